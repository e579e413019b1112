"""Kueue v0.19.2 with its own integration of one of our v1 kinds switched back on (TFJob) beside MPIJob's,
which its default configuration keeps on, and with `waitForPodsReady` set short: the operator run with its
`--kueue-integration` default (it reads Kueue's configuration) and with the same choice written out.

What a user relies on: each queued job has exactly one Workload, made by the one integration that holds its
kind (Kueue's webhook suspends a TFJob or MPIJob at create; kubetrain queues a PyTorchJob without
suspending it); and a job whose pods cannot start within `waitForPodsReady.timeout` is evicted by Kueue:
its pods go and it is queued again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from kubetrain.testing import ControlPlane
from kubetrain.testing.operator_process import OperatorProcess
from kubetrain.testing.process import wait_until

from .harness import (
    Obj,
    conditions,
    fake_nodes,
    finish,
    get,
    pods,
    shipped_operator,
    submit,
    suspended,
    wait_running,
)
from .queueing import (
    POOL,
    POOL_LABEL,
    kueue_plane,
    queue_namespace,
    queued,
    waiting,
    workload,
    workload_conditions,
    workloads,
)

pytestmark = pytest.mark.ecosystem

KUEUES_OWN = ("TFJob", "MPIJob")
"""Held by Kueue's built-in integration here: TFJob switched back on, MPIJob on by default."""
NODES = fake_nodes(("pool-node", "16", {POOL_LABEL: POOL}))
PODS_READY = {"timeout": "10s", "requeuingStrategy": {"backoffBaseSeconds": 1, "backoffMaxSeconds": 2}}
"""Kueue's `waitForPodsReady`: evict a job whose pods are not all ready 10 s after admission; requeue soon."""
EXPLICIT = "--kueue-integration=PyTorchJob,JAXJob,XGBoostJob,PaddleJob"
"""What the flag's default (`auto`) chooses with this Kueue configuration, written out."""


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    options = {"frameworks_on": ["kubeflow.org/tfjob"], "wait_for_pods_ready": PODS_READY}
    with kueue_plane(NODES, tmp_path_factory.mktemp("kueue"), **options) as started:
        yield started


@pytest.fixture(scope="module", params=["default", "explicit"])
def operator(
    plane: ControlPlane, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """The operator from the shipped base install, with its flag's default, then with EXPLICIT."""
    extra = (EXPLICIT,) if request.param == "explicit" else ()
    with shipped_operator(plane, "base", tmp_path_factory.mktemp("operator"), *extra) as running:
        yield running


@pytest.fixture
def ns(plane: ControlPlane, operator: OperatorProcess) -> Iterator[str]:
    with queue_namespace(plane) as name:
        yield name


def dry_run(plane: ControlPlane, namespace: str, body: Obj) -> Obj:
    """The job as the API server would store it at create, Kueue's webhooks included (nothing stored)."""
    out = plane.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", namespace=namespace,
                        input=json.dumps(body))  # fmt: skip
    created: Obj = json.loads(out.stdout)
    return created


@pytest.mark.parametrize("kind", [*KUEUES_OWN, "PyTorchJob"])
def test_each_queued_job_has_exactly_one_workload_made_by_the_integration_that_holds_its_kind(
    plane: ControlPlane, ns: str, kind: str
) -> None:
    body = queued(kind, "only")
    assert suspended(dry_run(plane, ns, body)) == (kind in KUEUES_OWN), (
        "Kueue's webhook suspends only its own"
    )
    submit(plane, ns, body)
    wait_running(plane, ns, body)
    done = finish(plane, ns, body)
    assert "Succeeded" in conditions(done)
    # Both controllers have seen the job run and finish: a second Workload would exist by now.
    found = workloads(plane, ns, body)
    assert len(found) == 1, f"{len(found)} Workloads: {[w['metadata']['name'] for w in found]}"


@pytest.mark.parametrize("operator", ["default"], indirect=True)  # the flag plays no part here
def test_wait_for_pods_ready_evicts_a_job_whose_pods_cannot_start(plane: ControlPlane, ns: str) -> None:
    body = queued("PyTorchJob", "stuck")
    for spec in body["spec"]["pytorchReplicaSpecs"].values():  # within the quota, but on no node
        spec["template"]["spec"]["nodeSelector"] = {"example.com/absent": "true"}
    submit(plane, ns, body)
    wait_until("the stuck job's pods created (admitted)", lambda: bool(pods(plane, ns, "stuck")), timeout=60)

    def evicted() -> bool:
        found = workload(plane, ns, body)
        evictions = [
            c for c in ((found or {}).get("status") or {}).get("conditions") or [] if c["type"] == "Evicted"
        ]
        return any(c["status"] == "True" and c["reason"] == "PodsReadyTimeout" for c in evictions)

    wait_until("Kueue evicts the Workload: PodsReadyTimeout", evicted, timeout=60)
    wait_until("the evicted job's pods gone", lambda: not pods(plane, ns, "stuck"), timeout=60)
    assert waiting(get(plane, ns, "PyTorchJob", "stuck")), "the evicted job is not queued again"
    assert workload_conditions(workload(plane, ns, body)).get("PodsReady") != "True"
