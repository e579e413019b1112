"""The real API server refuses a replica count above the bound, naming the field, and takes the bound itself.

`replicas: 2147483647` used to pass the CRD and take the operator down; now it never reaches the operator.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubetrain.api import KINDS, MAX_REPLICAS, MAX_SLOTS_PER_WORKER, KindInfo
from kubetrain.testing.controlplane import ControlPlane

pytestmark = pytest.mark.integration


def _job(info: KindInfo, workers: int, **spec: Any) -> dict[str, Any]:
    container = {"name": info.default_container_name or "main", "image": "busybox:1.36"}
    first = info.replica_types[0] if info.kind != "TFJob" else "Chief"
    specs = {
        first: {"replicas": 1, "template": {"spec": {"containers": [container]}}},
        "Worker": {"replicas": workers, "template": {"spec": {"containers": [container]}}},
    }
    return {
        "apiVersion": info.api_version,
        "kind": info.kind,
        "metadata": {"name": "big"},
        "spec": {info.replica_specs_field: specs, **spec},
    }


def _dry_run(plane: ControlPlane, namespace: str, job: dict[str, Any]) -> tuple[int, str]:
    result = plane.kubectl(
        "create", "--dry-run=server", "-f", "-", namespace=namespace, input=json.dumps(job), check=False
    )
    return result.returncode, result.stdout + result.stderr


@pytest.mark.parametrize("info", KINDS, ids=lambda info: info.kind)
def test_replicas_above_the_bound_are_refused(crds: ControlPlane, namespace: str, info: KindInfo) -> None:
    code, out = _dry_run(crds, namespace, _job(info, MAX_REPLICAS))
    assert code == 0, out
    for huge in (MAX_REPLICAS + 1, 2**31 - 1):
        code, out = _dry_run(crds, namespace, _job(info, huge))
        assert code != 0, out
        assert f"spec.{info.replica_specs_field}.Worker.replicas" in out and str(MAX_REPLICAS) in out, out


@pytest.mark.parametrize(
    ("field", "spec", "bound"),
    [
        (
            "spec.elasticPolicy.maxReplicas",
            {"elasticPolicy": {"minReplicas": 1, "maxReplicas": "N"}},
            MAX_REPLICAS,
        ),
        ("spec.elasticPolicy.minReplicas", {"elasticPolicy": {"minReplicas": "N"}}, MAX_REPLICAS),
        ("spec.slotsPerWorker", {"slotsPerWorker": "N"}, MAX_SLOTS_PER_WORKER),
    ],
    ids=["elastic-max", "elastic-min", "mpi-slots"],
)
def test_other_counts_above_the_bound_are_refused(
    crds: ControlPlane, namespace: str, field: str, spec: dict[str, Any], bound: int
) -> None:
    info = next(i for i in KINDS if i.kind == ("MPIJob" if "slots" in field else "PyTorchJob"))
    text = json.dumps(spec)
    code, out = _dry_run(crds, namespace, _job(info, 1, **json.loads(text.replace('"N"', str(bound + 1)))))
    assert code != 0 and field in out and str(bound) in out, out


def test_kubectl_scale_above_the_bound_is_refused(crds: ControlPlane, namespace: str) -> None:
    info = next(i for i in KINDS if i.kind == "PyTorchJob")
    crds.kubectl("create", "-f", "-", namespace=namespace, input=json.dumps(_job(info, 2)))
    result = crds.kubectl(
        "scale", f"{info.plural}/big", f"--replicas={MAX_REPLICAS + 1}", namespace=namespace, check=False
    )
    assert result.returncode != 0 and str(MAX_REPLICAS) in result.stderr, result.stderr
