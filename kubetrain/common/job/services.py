"""The headless Services that give a job's pods stable DNS names, pure. Two modes (`ServiceMode`):

- `job` (the default of the built-in operators): **one** headless Service per job, named like the job,
  selecting every pod of the job; each pod gets `hostname` = its own name and `subdomain` = the job's name,
  so replica `{job}-{rtype}-{index}` resolves as `{job}-{rtype}-{index}.{job}` (and
  `....{job}.{ns}.svc[.<cluster domain>]`). One create per job instead of one per replica: this is how
  JobSet and the mpi-operator address pods.
- `replica` (Kubeflow v1's convention): one Service per replica index, named like the pod, selecting
  exactly that pod by its job, replica-type and replica-index labels, exposing every named port of the
  main container; replica `{job}-{rtype}-{index}` resolves under that very name.

Both publish not-ready addresses (unlike Kubeflow's per-replica Services), so that peers resolve each
other as soon as pods have IPs instead of after readiness (a known source of startup crashes).
`replica_address` is the one place that says how a replica is addressed in each mode.

The mode is the controller's (the operator's `--service-mode`), unless the job's annotation
`kubetrain.io/service-mode` names another, and a job keeps the mode its existing Services show
(`service_mode_in_use`): its running pods' env names its peers that way, so a job adopted from Kubeflow's
operator, or begun before the operator's setting changed, carries on as it began.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from enum import StrEnum
from typing import Any

from kubetrain.common.job.pods import main_container_index
from kubetrain.common.kube.resources import Obj

__all__ = [
    "SERVICE_MODE_ANNOTATION",
    "ServiceMode",
    "desired_service",
    "job_service",
    "replica_address",
    "service_mode_in_use",
    "service_ports",
]


class ServiceMode(StrEnum):
    """How a job's pods get their DNS names (see the module docstring)."""

    JOB = "job"
    """One headless Service per job; pods named `{pod}.{job}` through hostname and subdomain."""
    REPLICA = "replica"
    """One headless Service per replica, named like its pod (Kubeflow v1)."""


SERVICE_MODE_ANNOTATION = "kubetrain.io/service-mode"
"""A job's own choice of `ServiceMode` (`job` or `replica`), over the operator's."""


def service_mode_in_use(job_name: str, services: Collection[str]) -> ServiceMode | None:
    """The mode the job's existing template Services show: its own Service, JOB; only replicas', REPLICA;
    none, None (a new or suspended job: every pod is created afresh)."""
    if job_name in services:
        return ServiceMode.JOB
    return ServiceMode.REPLICA if services else None


def replica_address(job_name: str, replica: str, mode: ServiceMode) -> str:
    """The DNS name, relative to the job's namespace, by which pod `replica` of job `job_name` is reached:
    `{replica}` under per-replica Services, `{replica}.{job}` under the job's Service."""
    return replica if mode is ServiceMode.REPLICA else f"{replica}.{job_name}"


def service_ports(pod_spec: Mapping[str, Any], main_container: str | None) -> list[Obj]:
    """The named ports of the main container, as Service ports (port = targetPort = containerPort)."""
    index = main_container_index(pod_spec, main_container)
    if index is None:
        return []
    ports = (pod_spec.get("containers") or [])[index].get("ports") or []
    named = [p for p in ports if p.get("name") and p.get("containerPort")]
    return [
        {
            "name": p["name"],
            "port": p["containerPort"],
            "targetPort": p["containerPort"],
            "protocol": p.get("protocol") or "TCP",
        }
        for p in named
    ]


def desired_service(
    *, name: str, namespace: str, labels: Mapping[str, str], owner: Obj, ports: list[Obj]
) -> Obj:
    """The headless Service `name` of one replica, selecting the pod labelled `labels`."""
    service = job_service(name=name, namespace=namespace, labels=labels, owner=owner)
    service["spec"]["ports"] = ports
    return service


def job_service(*, name: str, namespace: str, labels: Mapping[str, str], owner: Obj) -> Obj:
    """The headless Service `name`, selecting every pod labelled `labels` (for the job's own Service: its
    name and the job's labels). No ports: it exists for the pods' DNS records, which need none."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "ownerReferences": [owner],
        },
        "spec": {"clusterIP": "None", "selector": dict(labels), "publishNotReadyAddresses": True},
    }
