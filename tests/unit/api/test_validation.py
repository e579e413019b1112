"""Validation: each rule rejects what the Kubeflow operators reject, naming the field and the fix."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubetrain.api import (
    KINDS,
    FieldError,
    InvalidJobError,
    KindInfo,
    PyTorchJob,
    check_job,
    owned_env_names,
    parse_job,
    validate,
)
from kubetrain.testing.operator import container_spec, job_manifest, replica_spec

Doc = dict[str, Any]


def base(kind: str) -> Doc:
    """A small valid job of `kind` as a mapping, to break one rule at a time."""

    def rep(container: str, **extra: Any) -> Doc:
        return {"template": {"spec": {"containers": [{"name": container, "image": "img:1"}]}}, **extra}

    if kind == "TFJob":
        spec = {"tfReplicaSpecs": {"PS": rep("tensorflow"), "Worker": rep("tensorflow", replicas=2)}}
    elif kind == "PyTorchJob":
        spec = {"pytorchReplicaSpecs": {"Master": rep("pytorch"), "Worker": rep("pytorch", replicas=2)}}
    else:
        spec = {"mpiReplicaSpecs": {"Launcher": rep("launcher"), "Worker": rep("worker", replicas=2)}}
    version = "kubeflow.org/v2beta1" if kind == "MPIJob" else "kubeflow.org/v1"
    return {"apiVersion": version, "kind": kind, "metadata": {"name": "train"}, "spec": spec}


def errors(doc: Doc) -> list[FieldError]:
    return validate(parse_job(doc))


@pytest.mark.parametrize("kind", ["TFJob", "PyTorchJob", "MPIJob"])
def test_the_base_jobs_are_valid(kind: str) -> None:
    assert errors(base(kind)) == []


DELETE = object()


def edited(kind: str, *edits: tuple[tuple[Any, ...], Any]) -> Doc:
    """`base(kind)` with each `(path, value)` applied; DELETE removes a key, index len(list) appends."""
    doc = copy.deepcopy(base(kind))
    for path, value in edits:
        node: Any = doc
        for key in path[:-1]:
            node = node.setdefault(key, {}) if isinstance(node, dict) else node[key]
        last = path[-1]
        if value is DELETE:
            del node[last]
        elif isinstance(node, list) and last == len(node):
            node.append(value)
        else:
            node[last] = value
    return doc


def setting(kind: str, path: tuple[Any, ...], value: Any) -> Doc:
    return edited(kind, (path, value))


def deleting(kind: str, path: tuple[Any, ...]) -> Doc:
    return edited(kind, (path, DELETE))


TF_W = ("spec", "tfReplicaSpecs", "Worker")
PT = ("spec", "pytorchReplicaSpecs")
MPI = ("spec", "mpiReplicaSpecs")
C0 = ("template", "spec", "containers", 0)

# (id, job document, expected error path, fragment of message, fragment of fix)
CASES: list[tuple[str, Doc, str, str, str]] = [
    (
        "unknown type",
        setting("TFJob", ("spec", "tfReplicaSpecs", "Chef"), {}),
        "spec.tfReplicaSpecs.Chef",
        "unknown replica type",
        "PS, Worker, Chief, Master, Evaluator",
    ),
    (
        "pytorch unknown type",
        setting("PyTorchJob", (*PT, "PS"), {}),
        "spec.pytorchReplicaSpecs.PS",
        "unknown replica type",
        "Master, Worker",
    ),
    (
        "negative replicas",
        setting("TFJob", (*TF_W, "replicas"), -1),
        "spec.tfReplicaSpecs.Worker.replicas",
        ">= 0",
        "0 or more",
    ),
    (
        "two masters",
        setting("PyTorchJob", (*PT, "Master", "replicas"), 2),
        "spec.pytorchReplicaSpecs.Master.replicas",
        "exactly one Master",
        "replicas: 1",
    ),
    (
        "no launcher replica",
        setting("MPIJob", (*MPI, "Launcher", "replicas"), 0),
        "spec.mpiReplicaSpecs.Launcher.replicas",
        "exactly one Launcher",
        "replicas: 1",
    ),
    (
        "no specs",
        setting("PyTorchJob", (*PT,), {}),
        "spec.pytorchReplicaSpecs",
        "is required",
        "Master, Worker",
    ),
    (
        "no containers",
        setting("TFJob", (*TF_W, "template", "spec", "containers"), []),
        "spec.tfReplicaSpecs.Worker.template.spec.containers",
        "has no container",
        "`tensorflow`",
    ),
    (
        "no default container",
        setting("TFJob", (*TF_W, *C0, "name"), "tf"),
        "spec.tfReplicaSpecs.Worker.template.spec.containers",
        "no container is named `tensorflow`",
        "name the",
    ),
    (
        "no image",
        deleting("PyTorchJob", (*PT, "Worker", *C0, "image")),
        "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].image",
        "is required",
        "image",
    ),
    (
        "duplicate container",
        setting(
            "MPIJob", (*MPI, "Worker", "template", "spec", "containers", 1), {"name": "worker", "image": "i"}
        ),
        "spec.mpiReplicaSpecs.Worker.template.spec.containers[1].name",
        "used twice",
        "own name",
    ),
    (
        "TF_CONFIG",
        setting("TFJob", (*TF_W, *C0, "env"), [{"name": "TF_CONFIG", "value": "{}"}]),
        "spec.tfReplicaSpecs.Worker.template.spec.containers[0].env[0].name",
        "`TF_CONFIG` is set by the operator",
        "remove it",
    ),
    (
        "WORLD_SIZE",
        setting("PyTorchJob", (*PT, "Worker", *C0, "env"), [{"name": "WORLD_SIZE", "value": "2"}]),
        "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].env[0].name",
        "`WORLD_SIZE`",
        "remove it",
    ),
    (
        "PET_NODE_RANK",
        setting("PyTorchJob", (*PT, "Master", *C0, "env"), [{"name": "PET_NODE_RANK", "value": "0"}]),
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].env[0].name",
        "`PET_NODE_RANK`",
        "remove it",
    ),
    (
        "elastic min > max",
        setting("PyTorchJob", ("spec", "elasticPolicy"), {"minReplicas": 3, "maxReplicas": 2}),
        "spec.elasticPolicy.maxReplicas",
        "less than minReplicas 3",
        ">= minReplicas",
    ),
    (
        "elastic min < 1",
        setting("PyTorchJob", ("spec", "elasticPolicy"), {"minReplicas": 0, "maxReplicas": 2}),
        "spec.elasticPolicy.minReplicas",
        ">= 1",
        "1 or more",
    ),
    (
        "elastic no worker",
        edited("PyTorchJob", (("spec", "elasticPolicy"), {"minReplicas": 1}), ((*PT, "Worker"), DELETE)),
        "spec.elasticPolicy",
        "needs a Worker replica spec",
        "add a Worker",
    ),
    (
        "nproc",
        setting("PyTorchJob", ("spec", "nprocPerNode"), "0"),
        "spec.nprocPerNode",
        "'0' is not allowed",
        "auto, cpu, gpu",
    ),
    (
        "ttl",
        setting("TFJob", ("spec", "runPolicy", "ttlSecondsAfterFinished"), -1),
        "spec.runPolicy.ttlSecondsAfterFinished",
        ">= 0",
        "0 or more",
    ),
    (
        "backoff",
        setting("MPIJob", ("spec", "runPolicy", "backoffLimit"), -3),
        "spec.runPolicy.backoffLimit",
        "got -3",
        "0 or more",
    ),
    (
        "deadline",
        setting("PyTorchJob", ("spec", "runPolicy", "activeDeadlineSeconds"), 0),
        "spec.runPolicy.activeDeadlineSeconds",
        ">= 1",
        "1 or more",
    ),
    (
        "min available",
        setting("TFJob", ("spec", "runPolicy", "schedulingPolicy"), {"minAvailable": -1}),
        "spec.runPolicy.schedulingPolicy.minAvailable",
        ">= 0",
        "0 or more",
    ),
    (
        "managedBy",
        setting("MPIJob", ("spec", "runPolicy", "managedBy"), "kubeflow.org/training-operator"),
        "spec.runPolicy.managedBy",
        "not a controller that manages MPIJobs",
        "kubeflow.org/mpi-operator",
    ),
    (
        "mpi restart",
        setting("MPIJob", (*MPI, "Launcher", "restartPolicy"), "Always"),
        "spec.mpiReplicaSpecs.Launcher.restartPolicy",
        "Always is not supported",
        "Never or OnFailure",
    ),
    (
        "mpi no launcher",
        deleting("MPIJob", (*MPI, "Launcher")),
        "spec.mpiReplicaSpecs.Launcher",
        "is required",
        "add a Launcher",
    ),
    (
        "mpi worker 0",
        setting("MPIJob", (*MPI, "Worker", "replicas"), 0),
        "spec.mpiReplicaSpecs.Worker.replicas",
        "at least 1 replica",
        "remove the Worker spec",
    ),
    (
        "mpi slots",
        setting("MPIJob", ("spec", "slotsPerWorker"), 0),
        "spec.slotsPerWorker",
        ">= 1",
        "1 or more",
    ),
    (
        "name",
        setting("TFJob", ("metadata", "name"), "9lives"),
        "metadata.name",
        "not a DNS-1035 label",
        "'lives'",
    ),
    (
        "name dots",
        setting("PyTorchJob", ("metadata", "name"), "bert.large"),
        "metadata.name",
        "not a DNS-1035 label",
        "'bert-large'",
    ),
    (
        "generateName",
        setting("TFJob", ("metadata",), {"generateName": "Run-"}),
        "metadata.generateName",
        "does not start a DNS-1035 label",
        "'run-'",
    ),
    (
        "long name",
        setting("TFJob", ("metadata", "name"), "x" * 56),
        "metadata.name",
        "`<name>-worker-1` would have 65 characters",
        "at most 54 characters",
    ),
    (
        "long generateName",
        setting("TFJob", ("metadata",), {"generateName": "x" * 50}),
        "metadata.generateName",
        "`<name>-worker-1` would have 64 characters",
        "at most 49 characters",
    ),
]


@pytest.mark.parametrize("doc,path,message,fix", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_rule_names_the_field_and_the_fix(doc: Doc, path: str, message: str, fix: str) -> None:
    found = errors(doc)
    assert [e.path for e in found] == [path], found
    assert message in found[0].message
    assert fix in found[0].fix


def test_all_problems_are_reported_at_once() -> None:
    doc = setting("TFJob", (*TF_W, "replicas"), -1)
    doc["spec"]["runPolicy"] = {"backoffLimit": -1}
    doc["metadata"]["name"] = "Bad"
    assert [e.path for e in errors(doc)] == [
        "metadata.name",
        "spec.tfReplicaSpecs.Worker.replicas",
        "spec.runPolicy.backoffLimit",
    ]


def test_validation_does_not_depend_on_prior_defaulting() -> None:
    doc = setting(
        "TFJob", ("spec", "tfReplicaSpecs"), {"worker": base("TFJob")["spec"]["tfReplicaSpecs"]["Worker"]}
    )
    assert errors(doc) == []


def test_check_job_returns_the_defaulted_job() -> None:
    job = check_job(parse_job(base("PyTorchJob")))
    assert isinstance(job, PyTorchJob)
    assert job.spec.nproc_per_node == "auto"


def test_check_job_raises_one_readable_line_per_error() -> None:
    doc = setting("TFJob", (*TF_W, "replicas"), -1)
    doc["spec"]["runPolicy"] = {"managedBy": "me"}
    with pytest.raises(InvalidJobError) as caught:
        check_job(parse_job(doc))
    lines = str(caught.value).splitlines()
    assert lines[0] == "TFJob 'train' is invalid (2 errors):"
    assert lines[1].startswith("  spec.tfReplicaSpecs.Worker.replicas: must be >= 0, got -1; ")
    assert lines[2].startswith("  spec.runPolicy.managedBy: 'me' is not a controller")
    assert [e.path for e in caught.value.errors] == [
        "spec.tfReplicaSpecs.Worker.replicas",
        "spec.runPolicy.managedBy",
    ]


def test_owned_env_is_per_kind_and_configuration() -> None:
    pytorch = parse_job(base("PyTorchJob"))
    assert {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "PET_NNODES"} <= owned_env_names(
        pytorch, "Worker"
    )
    assert "PET_RDZV_ENDPOINT" not in owned_env_names(pytorch, "Worker")
    elastic = parse_job(setting("PyTorchJob", ("spec", "elasticPolicy"), {"maxRestarts": 3}))
    assert {"PET_RDZV_ENDPOINT", "PET_RDZV_BACKEND", "PET_MAX_RESTARTS"} <= owned_env_names(elastic, "Worker")
    assert "PET_RDZV_ID" not in owned_env_names(elastic, "Worker")
    intel = parse_job(setting("MPIJob", ("spec", "mpiImplementation"), "Intel"))
    assert {"K_MPI_JOB_ROLE", "I_MPI_HYDRA_HOST_FILE", "I_MPI_PERHOST"} <= owned_env_names(intel, "Launcher")
    assert "OMPI_MCA_orte_default_hostfile" not in owned_env_names(intel, "Launcher")
    assert owned_env_names(intel, "Worker") == {"K_MPI_JOB_ROLE"}
    assert owned_env_names(parse_job(base("TFJob")), "PS") == {"TF_CONFIG"}


def test_user_env_the_operator_does_not_own_is_fine() -> None:
    tf_sidecar = setting(
        "TFJob",
        (*TF_W, "template", "spec", "containers", 1),
        {"name": "sidecar", "image": "i", "env": [{"name": "TF_CONFIG", "value": "{}"}]},
    )
    mpi_tuning = setting(
        "MPIJob",
        (*MPI, "Launcher", *C0, "env"),
        [
            {"name": "OMPI_MCA_btl_tcp_if_include", "value": "eth0"},
            {"name": "PYTHONUNBUFFERED", "value": "1"},
        ],
    )
    assert errors(tf_sidecar) == []
    assert errors(mpi_tuning) == []


PORTED = [info for info in KINDS if info.default_port_name]


@pytest.mark.parametrize("info", PORTED, ids=[info.kind for info in PORTED])
@pytest.mark.parametrize("port", [0, 65536, 70000])
def test_a_port_the_operator_cannot_render_into_the_env_is_refused_naming_it(
    info: KindInfo, port: int
) -> None:
    """MASTER_PORT, COORDINATOR_PORT, PADDLE_MASTER...: every kind's port is checked before any pod exists
    (the CRDs, like Kubeflow's, leave containerPort unbounded); 1 and 65535 are fine."""
    name = info.default_container_name or "main"
    assert info.default_port_name is not None

    def job(number: int) -> Doc:
        worker = container_spec(name, port=(info.default_port_name or "", number))
        specs = {rtype: replica_spec(1, container_spec(name)) for rtype in info.required_types}
        return job_manifest(info, {**specs, "Worker": replica_spec(2, worker)})

    got = errors(job(port))
    field = info.replica_specs_field
    assert [e.path for e in got] == [
        f"spec.{field}.Worker.template.spec.containers[0].ports[0].containerPort"
    ]
    assert str(port) in got[0].message and "1..65535" in got[0].fix
    assert errors(job(1)) == errors(job(65535)) == []
