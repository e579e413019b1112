"""Replica counts are bounded (issue: `replicas: 2147483647` took the operator down) in models and CRDs alike.

The real API server check is tests/integration/test_replica_bounds.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kubetrain.api import KINDS, MAX_REPLICAS, MAX_SLOTS_PER_WORKER, InvalidJobError, KindInfo, parse_job
from kubetrain.api.crd import custom_resource_definition

Job = dict[str, Any]
KIND = {info.kind: info for info in KINDS}


def _job(kind: str) -> Job:
    info = KIND[kind]
    specs = {
        "Worker": {"replicas": 2, "template": {"spec": {"containers": [{"name": "main", "image": "x"}]}}}
    }
    return {
        "apiVersion": info.api_version,
        "kind": kind,
        "metadata": {"name": "j"},
        "spec": {info.replica_specs_field: specs},
    }


def _workers(count: int) -> Callable[[Job], None]:
    def change(job: Job) -> None:
        next(iter(job["spec"].values()))["Worker"]["replicas"] = count

    return change


def _spec(field: str, value: Any) -> Callable[[Job], None]:
    def change(job: Job) -> None:
        *parents, last = field.split(".")
        node = job["spec"]
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return change


BOUNDS = [
    *[
        (kind, _workers, MAX_REPLICAS, f"spec.{KIND[kind].replica_specs_field}.Worker.replicas")
        for kind in KIND
    ],
    (
        "PyTorchJob",
        lambda n: _spec("elasticPolicy.maxReplicas", n),
        MAX_REPLICAS,
        "spec.elasticPolicy.maxReplicas",
    ),
    (
        "PyTorchJob",
        lambda n: _spec("elasticPolicy.minReplicas", n),
        MAX_REPLICAS,
        "spec.elasticPolicy.minReplicas",
    ),
    ("MPIJob", lambda n: _spec("slotsPerWorker", n), MAX_SLOTS_PER_WORKER, "spec.slotsPerWorker"),
]


@pytest.mark.parametrize(("kind", "setter", "bound", "field"), BOUNDS, ids=[b[3] for b in BOUNDS])
def test_the_model_takes_the_bound_and_refuses_one_more(
    kind: str, setter: Callable[[int], Callable[[Job], None]], bound: int, field: str
) -> None:
    job = _job(kind)
    setter(bound)(job)
    parse_job(job)
    setter(bound + 1)(job)
    with pytest.raises(InvalidJobError) as caught:
        parse_job(job)
    assert [e.path for e in caught.value.errors] == [field]
    assert f"<= {bound}" in caught.value.errors[0].message


@pytest.mark.parametrize("info", KINDS, ids=lambda info: info.kind)
def test_the_crd_carries_the_same_maximum(info: KindInfo) -> None:
    (version,) = custom_resource_definition(info)["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    replicas = spec[info.replica_specs_field]["additionalProperties"]["properties"]["replicas"]
    assert (replicas["minimum"], replicas["maximum"]) == (0, MAX_REPLICAS)
    if info.kind == "PyTorchJob":
        elastic = spec["elasticPolicy"]["properties"]
        assert elastic["minReplicas"]["maximum"] == elastic["maxReplicas"]["maximum"] == MAX_REPLICAS
    if info.kind == "MPIJob":
        assert (spec["slotsPerWorker"]["minimum"], spec["slotsPerWorker"]["maximum"]) == (
            1,
            MAX_SLOTS_PER_WORKER,
        )
