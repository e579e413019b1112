"""A kind of one's own states only what is its own; KindInfo derives the rest, and the built-in kinds keep
Kubeflow's names and labels."""

from __future__ import annotations

from typing import ClassVar

import pytest
from pydantic import Field

from kubetrain.api import (
    KINDS,
    FieldError,
    JobSpecBase,
    KindInfo,
    ReplicaSpec,
    RestartPolicy,
    TrainingJob,
    apply_defaults,
    validate,
)


class NapSpec(JobSpecBase):
    REPLICA_SPECS_FIELD: ClassVar[str] = "nap_replica_specs"
    nap_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)


class NapJob(TrainingJob[NapSpec]):
    API_VERSION: ClassVar[str] = "example.dev/v1"
    KIND: ClassVar[str] = "NapJob"
    spec: NapSpec = Field(default_factory=NapSpec)


NAP = KindInfo(
    group="example.dev", version="v1", kind="NapJob", model=NapJob, replica_specs_field="napReplicaSpecs",
    replica_types=("Napper", "Snorer"), default_replicas={"Snorer": 0}, default_container_name="nap",
    default_port_name="nap-port", default_port=4242, owned_env=frozenset({"NAP_SECONDS"}),
    required_types=("Napper",),
)  # fmt: skip


def test_names_policies_and_labels_are_derived_from_the_kind() -> None:
    assert (NAP.singular, NAP.plural, NAP.operator_name) == ("napjob", "napjobs", "napjob-controller")
    assert NAP.controller_name == "example.dev/napjob-operator"
    assert NAP.managed_by_values == ("example.dev/napjob-operator", "kueue.x-k8s.io/multikueue")
    assert dict(NAP.default_replicas) == {"Napper": 1, "Snorer": 0}
    assert dict(NAP.default_restart_policy) == {"Napper": RestartPolicy.NEVER, "Snorer": RestartPolicy.NEVER}
    assert NAP.label_prefix == "example.dev/"
    assert {info.label_prefix for info in KINDS} == {"training.kubeflow.org/"}


def test_a_label_prefix_must_end_in_a_slash() -> None:
    with pytest.raises(ValueError, match=r"label_prefix='my.org': end it in '/'"):
        KindInfo(group="my.org", version="v1", kind="X", model=NapJob, replica_specs_field="x",
                 replica_types=("A",), label_prefix="my.org")  # fmt: skip


def _job(env: list[dict[str, str]] | None = None, napper: bool = True) -> NapJob:
    container = {"name": "nap", "image": "busybox", "env": env or []}
    specs = {"napper" if napper else "Snorer": {"template": {"spec": {"containers": [container]}}}}
    return NapJob.model_validate({"metadata": {"name": "n"}, "spec": {"napReplicaSpecs": specs}})


def test_defaulting_of_any_kind_follows_its_kind_info() -> None:
    job = apply_defaults(_job(), kind=NAP)
    napper = job.replica_specs["Napper"]  # the key in canonical case
    assert (napper.replicas, napper.restart_policy) == (1, RestartPolicy.NEVER)
    ports = napper.template.spec.containers[0].ports or []
    assert [(p.name, p.container_port) for p in ports] == [("nap-port", 4242)]


def test_validation_of_any_kind_follows_its_kind_info() -> None:
    assert validate(_job(), kind=NAP) == []
    owned = validate(_job(env=[{"name": "NAP_SECONDS", "value": "1"}]), kind=NAP)
    assert [e.path for e in owned] == ["spec.napReplicaSpecs.Napper.template.spec.containers[0].env[0].name"]
    missing = validate(_job(napper=False), kind=NAP)
    assert missing == [
        FieldError("spec.napReplicaSpecs.Napper", "is required", "add a Napper with replicas: 1")
    ]
