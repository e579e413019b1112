"""The models speak the Kubeflow wire format: camelCase field names, RFC 3339 times, lossless round trips."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from kubetrain.api import (
    MPIJob,
    MPIJobSpec,
    ObjectMeta,
    PyTorchJob,
    PyTorchJobSpec,
    ReplicaSpec,
    RestartPolicy,
    RunPolicy,
    TFJob,
    TFJobSpec,
    apply_defaults,
    dump_jobs,
    load_jobs,
    parse_job,
)
from kubetrain.api.common import JobStatus, ReplicaStatus, SchedulingPolicy
from kubetrain.api.pytorchjob import ElasticPolicy
from kubetrain.api.trainerstatus import TrainerMetric, TrainerStatus

RICH_TFJOB = """
apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: rich
  namespace: team-a
  uid: 1b7c0f1e-0000-4000-8000-000000000001
  resourceVersion: "12345"
  generation: 3
  creationTimestamp: 2026-01-02T03:04:05Z
  labels: {app: rich}
  annotations: {note: kept}
  managedFields:
    - manager: kubectl
      operation: Update
      time: 2026-01-02T03:04:05Z
spec:
  enableDynamicWorker: false
  successPolicy: AllWorkers
  runPolicy:
    cleanPodPolicy: Running
    ttlSecondsAfterFinished: 60
    activeDeadlineSeconds: 3600
    backoffLimit: 2
    suspend: false
    managedBy: kubeflow.org/training-operator
    schedulingPolicy:
      minAvailable: 3
      queue: research
      priorityClass: high
      scheduleTimeoutSeconds: 120
      minResources: {cpu: 3, memory: 12Gi, nvidia.com/gpu: "0"}
  tfReplicaSpecs:
    Worker:
      replicas: 3
      restartPolicy: ExitCode
      template:
        metadata:
          creationTimestamp: null
          labels: {tier: train}
        spec:
          x-foo: {made: up, nested: [1, 2]}
          affinity:
            nodeAffinity:
              requiredDuringSchedulingIgnoredDuringExecution:
                nodeSelectorTerms:
                  - matchExpressions: [{key: pool, operator: In, values: [cpu]}]
          containers:
            - name: tensorflow
              image: tf:2
              securityContext: {runAsUser: 1000, capabilities: {drop: [ALL]}}
              readinessProbe: {exec: {command: [cat, /tmp/ready]}}
              env:
                - name: POD_IP
                  valueFrom: {fieldRef: {fieldPath: status.podIP}}
              ports:
                - {name: tfjob-port, containerPort: 2222, protocol: TCP, hostIP: 0.0.0.0}
              resources:
                limits: {cpu: 0.5, memory: 1Gi, ephemeral-storage: 500M}
          volumes:
            - name: data
              nfs: {server: nfs.example, path: /exports}
status:
  conditions:
    - type: Created
      status: "True"
      reason: TFJobCreated
      message: TFJob team-a/rich is created.
      lastUpdateTime: 2026-01-02T03:04:05Z
      lastTransitionTime: 2026-01-02T03:04:05Z
  replicaStatuses:
    Worker:
      active: 3
      labelSelector:
        matchLabels: {training.kubeflow.org/job-name: rich}
      selector: training.kubeflow.org/job-name=rich
  startTime: 2026-01-02T03:04:06Z
  lastReconcileTime: 2026-01-02T03:04:07Z
"""


def _plain(text: str) -> Any:
    """The YAML as the API server sees it: timestamps stay strings."""
    return yaml.load(text, Loader=_StringTimes)


class _StringTimes(yaml.SafeLoader):
    pass


_StringTimes.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def test_yaml_read_and_written_back_is_unchanged() -> None:
    job = load_jobs(RICH_TFJOB)[0]
    assert job.to_wire() == _plain(RICH_TFJOB)
    assert load_jobs(dump_jobs([job]))[0] == job


def test_unknown_pod_template_fields_are_kept() -> None:
    job = load_jobs(RICH_TFJOB)[0]
    template = job.to_wire()["spec"]["tfReplicaSpecs"]["Worker"]["template"]
    assert template["spec"]["x-foo"] == {"made": "up", "nested": [1, 2]}
    assert template["spec"]["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert template["metadata"] == {"creationTimestamp": None, "labels": {"tier": "train"}}


def test_unknown_fields_survive_defaulting() -> None:
    defaulted = apply_defaults(load_jobs(RICH_TFJOB)[0]).to_wire()
    container = defaulted["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["securityContext"] == {"runAsUser": 1000, "capabilities": {"drop": ["ALL"]}}
    assert defaulted["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["x-foo"]["made"] == "up"


def test_typed_access_to_what_the_operator_reads() -> None:
    job = load_jobs(RICH_TFJOB)[0]
    assert isinstance(job, TFJob)
    worker = job.spec.tf_replica_specs["Worker"]
    assert worker.restart_policy is RestartPolicy.EXIT_CODE
    container = worker.template.spec.containers[0]
    assert container.ports is not None and container.ports[0].host_ip == "0.0.0.0"
    assert container.env is not None and container.env[0].value_from == {
        "fieldRef": {"fieldPath": "status.podIP"}
    }
    assert job.metadata.creation_timestamp == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert job.status is not None and job.status.last_reconcile_time == datetime(
        2026, 1, 2, 3, 4, 7, tzinfo=UTC
    )
    assert job.run_policy.scheduling_policy == SchedulingPolicy(
        min_available=3,
        queue="research",
        priority_class="high",
        schedule_timeout_seconds=120,
        min_resources={"cpu": 3, "memory": "12Gi", "nvidia.com/gpu": "0"},
    )


def test_times_are_written_as_rfc3339_utc() -> None:
    """Second precision like metav1.Time; a sub-second part is written with 6 digits like metav1.MicroTime."""
    eastern = timezone(timedelta(hours=-5))
    status = JobStatus(
        start_time=datetime(2026, 1, 1, 22, 4, 5, tzinfo=eastern),
        completion_time=datetime(2026, 1, 2, 3, 4, 5),  # naive: taken as UTC
        last_reconcile_time=datetime(2026, 1, 2, 3, 4, 5, 120000, tzinfo=UTC),
    )
    assert status.to_wire() == {
        "startTime": "2026-01-02T03:04:05Z",
        "completionTime": "2026-01-02T03:04:05Z",
        "lastReconcileTime": "2026-01-02T03:04:05.120000Z",
    }


@pytest.mark.parametrize("bad", ["yesterday", "2026-13-01T00:00:00Z", 12])
def test_bad_times_are_rejected(bad: Any) -> None:
    with pytest.raises(ValidationError):
        JobStatus.model_validate({"startTime": bad})


def test_jobs_built_in_code_carry_api_version_and_kind() -> None:
    job = PyTorchJob(
        metadata=ObjectMeta(name="p"),
        spec=PyTorchJobSpec(pytorch_replica_specs={"Master": ReplicaSpec(replicas=1)}),
    )
    assert job.to_wire() == {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "p"},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}}},
    }
    assert MPIJob().to_wire() == {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob"}


def test_a_model_rejects_another_kinds_type_meta() -> None:
    with pytest.raises(ValidationError):
        TFJob.model_validate({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"})


# The field names of the upstream Go types (json tags), which our aliases must reproduce exactly.
WIRE_NAMES: list[tuple[type[BaseModel], set[str]]] = [
    (TFJobSpec, {"runPolicy", "successPolicy", "tfReplicaSpecs", "enableDynamicWorker"}),
    (PyTorchJobSpec, {"runPolicy", "elasticPolicy", "pytorchReplicaSpecs", "nprocPerNode"}),
    (
        MPIJobSpec,
        {
            "slotsPerWorker",
            "runLauncherAsWorker",
            "runPolicy",
            "mpiReplicaSpecs",
            "sshAuthMountPath",
            "launcherCreationPolicy",
            "mpiImplementation",
        },
    ),
    (ReplicaSpec, {"replicas", "template", "restartPolicy"}),
    (
        RunPolicy,
        {
            "cleanPodPolicy",
            "ttlSecondsAfterFinished",
            "activeDeadlineSeconds",
            "backoffLimit",
            "schedulingPolicy",
            "suspend",
            "managedBy",
        },
    ),
    (
        SchedulingPolicy,
        {"minAvailable", "queue", "minResources", "priorityClass", "scheduleTimeoutSeconds"},
    ),
    (
        ElasticPolicy,
        {
            "minReplicas",
            "maxReplicas",
            "rdzvBackend",
            "rdzvPort",
            "rdzvHost",
            "rdzvId",
            "rdzvConf",
            "standalone",
            "nProcPerNode",
            "maxRestarts",
            "metrics",
        },
    ),
    # trainerStatus: KEP-2779's TrainJob field, which Kubeflow's v1 kinds lack (docs/progress.md)
    (
        JobStatus,
        {
            "conditions",
            "replicaStatuses",
            "startTime",
            "completionTime",
            "lastReconcileTime",
            "trainerStatus",
        },
    ),
    (TrainerStatus, {"progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime"}),
    (TrainerMetric, {"name", "value"}),
    # restarts: kubetrain's, set only under a failure policy (docs/failure-policy.md); Kubeflow ignores it
    (ReplicaStatus, {"active", "succeeded", "failed", "labelSelector", "selector", "restarts"}),
]


@pytest.mark.parametrize("model,names", WIRE_NAMES, ids=[m.__name__ for m, _ in WIRE_NAMES])
def test_wire_names_match_the_kubeflow_crds(model: type[BaseModel], names: set[str]) -> None:
    assert {field.alias for field in model.model_fields.values()} == names


@pytest.mark.parametrize(
    "patch",
    [
        {"replicas": "2"},  # the API server rejects a string for an integer
        {"replicas": True},
        {"replicas": 2.5},
        {"restartPolicy": "Sometimes"},
        {"replica": 2},  # a misspelt field is not silently dropped
    ],
)
def test_replica_spec_rejects_what_the_api_server_rejects(patch: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ReplicaSpec.model_validate(patch)


def test_quantities_are_kept_as_written_and_checked() -> None:
    ok = {"cpu": 2, "memory": "1.5Gi", "x": 0.25, "y": "500m", "z": "1e3"}
    policy = SchedulingPolicy.model_validate({"minResources": ok})
    assert policy.to_wire() == {"minResources": ok}
    for bad in ("2 cores", "1.5GB", True, [1]):
        with pytest.raises(ValidationError):
            SchedulingPolicy.model_validate({"minResources": {"cpu": bad}})


def test_models_are_immutable_values() -> None:
    spec = ReplicaSpec(replicas=1)
    with pytest.raises(ValidationError):
        spec.replicas = 2  # type: ignore[misc]
    assert spec == ReplicaSpec(replicas=1)


def test_parse_job_does_not_change_its_input() -> None:
    data = yaml.load(RICH_TFJOB, Loader=_StringTimes)
    before = copy.deepcopy(data)
    parse_job(data)
    assert data == before
