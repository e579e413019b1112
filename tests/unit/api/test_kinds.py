"""The kind registry carries the Kubeflow identities and defaults the controllers and the CRDs rely on."""

from __future__ import annotations

import pytest

from kubetrain.api import (
    JAXJOB,
    KINDS,
    MPIJOB,
    PADDLEJOB,
    PYTORCHJOB,
    TFJOB,
    XGBOOSTJOB,
    Container,
    KindInfo,
    MPIJob,
    PyTorchJob,
    RestartPolicy,
    TFJob,
    kind_info,
    lookup_kind,
)

# kind: (apiVersion, plural, replica-specs field, replica types, masters, container, port, operator label)
IDENTITY = {
    TFJOB: (
        "kubeflow.org/v1",
        "tfjobs",
        "tfReplicaSpecs",
        ("PS", "Worker", "Chief", "Master", "Evaluator"),
        {"Chief", "Master"},
        "tensorflow",
        ("tfjob-port", 2222),
        "tfjob-controller",
    ),
    PYTORCHJOB: (
        "kubeflow.org/v1",
        "pytorchjobs",
        "pytorchReplicaSpecs",
        ("Master", "Worker"),
        {"Master"},
        "pytorch",
        ("pytorchjob-port", 23456),
        "pytorchjob-controller",
    ),
    JAXJOB: (
        "kubeflow.org/v1",
        "jaxjobs",
        "jaxReplicaSpecs",
        ("Worker",),
        set(),
        "jax",
        ("jaxjob-port", 6666),
        "jaxjob-controller",
    ),
    XGBOOSTJOB: (
        "kubeflow.org/v1",
        "xgboostjobs",
        "xgbReplicaSpecs",
        ("Master", "Worker"),
        {"Master"},
        "xgboost",
        ("xgboostjob-port", 9999),
        "xgboostjob-controller",
    ),
    PADDLEJOB: (
        "kubeflow.org/v1",
        "paddlejobs",
        "paddleReplicaSpecs",
        ("Master", "Worker"),
        set(),  # Paddle's Masters are parameter servers: any number of them
        "paddle",
        ("master", 36543),
        "paddlejob-controller",
    ),
    MPIJOB: (
        "kubeflow.org/v2beta1",
        "mpijobs",
        "mpiReplicaSpecs",
        ("Launcher", "Worker"),
        {"Launcher"},
        None,
        (None, None),
        "mpi-operator",
    ),
}


@pytest.mark.parametrize("info", KINDS, ids=[k.kind for k in KINDS])
def test_identity(info: KindInfo) -> None:
    api_version, plural, field, types, masters, container, port, operator = IDENTITY[info]
    assert (info.api_version, info.plural, info.singular, info.crd_name) == (
        api_version,
        plural,
        plural[:-1],
        f"{plural}.kubeflow.org",
    )
    assert (info.replica_specs_field, info.replica_types, set(info.master_types)) == (field, types, masters)
    assert (info.default_container_name, (info.default_port_name, info.default_port)) == (container, port)
    assert info.operator_name == operator
    assert set(info.default_replicas) == set(info.replica_types) == set(info.default_restart_policy)
    assert info.controller_name in info.managed_by_values
    assert "kueue.x-k8s.io/multikueue" in info.managed_by_values


def test_defaults_match_the_kubeflow_operators() -> None:
    assert set(TFJOB.default_restart_policy.values()) == {RestartPolicy.NEVER}
    assert set(PYTORCHJOB.default_restart_policy.values()) == {RestartPolicy.ON_FAILURE}
    assert dict(JAXJOB.default_restart_policy) == {"Worker": RestartPolicy.NEVER}
    assert dict(JAXJOB.default_replicas) == {"Worker": 1}
    assert dict(XGBOOSTJOB.default_restart_policy) == {
        "Master": RestartPolicy.NEVER,
        "Worker": RestartPolicy.NEVER,
    }
    assert dict(XGBOOSTJOB.default_replicas) == {"Master": 1, "Worker": 1}
    assert XGBOOSTJOB.env_in_every_container and XGBOOSTJOB.scale_replica_type is None
    assert XGBOOSTJOB.required_types == ("Master",) and MPIJOB.required_types == ("Launcher",)
    assert dict(PADDLEJOB.default_restart_policy) == {
        "Master": RestartPolicy.ON_FAILURE,
        "Worker": RestartPolicy.ON_FAILURE,
    }
    assert dict(PADDLEJOB.default_replicas) == {"Master": 1, "Worker": 1}
    assert dict(MPIJOB.default_restart_policy) == {
        "Launcher": RestartPolicy.ON_FAILURE,
        "Worker": RestartPolicy.NEVER,
    }
    assert dict(MPIJOB.default_replicas) == {"Launcher": 1, "Worker": 0}
    assert TFJOB.controller_name == PYTORCHJOB.controller_name == "kubeflow.org/training-operator"
    assert MPIJOB.controller_name == "kubeflow.org/mpi-operator"


def test_lookup() -> None:
    assert (
        kind_info(TFJob()) is TFJOB and kind_info(PyTorchJob) is PYTORCHJOB and kind_info(MPIJob()) is MPIJOB
    )
    assert lookup_kind("MPIJob") is MPIJOB
    assert lookup_kind("MPIJob", "kubeflow.org/v1") is None
    assert lookup_kind("PyTorchJob", "kubeflow.org/v1") is PYTORCHJOB
    assert lookup_kind("tfjob") is None


@pytest.mark.parametrize(
    "key,canonical", [("worker", "Worker"), ("ps", "PS"), ("CHIEF", "Chief"), ("chef", None)]
)
def test_canonical_replica_type(key: str, canonical: str | None) -> None:
    assert TFJOB.canonical_replica_type(key) == canonical


def test_default_container_index() -> None:
    named = [Container(name="sidecar"), Container(name="tensorflow")]
    assert TFJOB.default_container_index(named) == 1
    assert TFJOB.default_container_index([Container(name="a"), Container(name="b")]) == 0
    assert MPIJOB.default_container_index([Container(name="launcher"), Container(name="mpi")]) == 0
    assert TFJOB.default_container_index([]) is None


def test_kind_info_is_a_frozen_value() -> None:
    with pytest.raises(AttributeError):
        TFJOB.kind = "Other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        TFJOB.default_replicas["Worker"] = 3  # type: ignore[index]
