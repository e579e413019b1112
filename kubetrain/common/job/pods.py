"""The desired pod of one replica, pure: the replica's template plus the operator's name, labels and owner.

Kubeflow's rules: the replica's restartPolicy replaces the template's (`ExitCode` becomes `Never`: the
operator, not the kubelet, decides on exit codes), operator labels win over template labels, and the job
is the controlling owner. Framework specifics (env, init containers, volumes) come afterwards from the
`configure_pod` hook.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubetrain.api import RestartPolicy
from kubetrain.common.kube import jsonwire
from kubetrain.common.kube.resources import Obj

__all__ = ["RESTART_POLICY_WARNING", "desired_pod", "main_container_index", "pod_restart_policy"]

RESTART_POLICY_WARNING = (
    "Restart policy in pod template will be overwritten by restart policy in replica spec"
)


def pod_restart_policy(policy: RestartPolicy) -> str:
    """The pod-level restartPolicy for a replica policy: `ExitCode` runs as `Never`."""
    return RestartPolicy.NEVER.value if policy is RestartPolicy.EXIT_CODE else policy.value


def desired_pod(
    *,
    template: Mapping[str, Any],
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    owner: Obj,
    restart_policy: RestartPolicy,
) -> tuple[Obj, str | None]:
    """The pod to create, and a warning when the template's own restartPolicy is overridden.

    `template` is the wire form of the replica's PodTemplateSpec; it is copied, never changed.
    """
    source = jsonwire.copy(dict(template))
    meta: dict[str, Any] = dict(source.get("metadata") or {})
    for server_side in ("name", "generateName", "namespace", "uid", "resourceVersion", "creationTimestamp"):
        meta.pop(server_side, None)
    meta.update(
        name=name,
        namespace=namespace,
        labels={**(meta.get("labels") or {}), **labels},
        ownerReferences=[owner],
    )
    spec: dict[str, Any] = dict(source.get("spec") or {})
    warning = RESTART_POLICY_WARNING if spec.get("restartPolicy") else None
    spec["restartPolicy"] = pod_restart_policy(restart_policy)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}, warning


def main_container_index(spec: Mapping[str, Any], default_name: str | None) -> int | None:
    """Index of the container the operator configures: the default-named one, else the first."""
    containers = spec.get("containers") or []
    for index, container in enumerate(containers):
        if default_name and container.get("name") == default_name:
            return index
    return 0 if containers else None
