"""Faults the operator must survive: a refused delete, a pod that vanished while the operator was down,
and jobs whose numbers would size the operator's memory (issue 12: B1, B2, B3).

The real API server versions of these (an admission policy refusing a delete, a deleted kwok Node) are in
tests/chaos; here they run on virtual time over the in-memory API server, in milliseconds.
"""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest

from kubetrain.api import RestartPolicy
from kubetrain.common.errors import ServerError
from kubetrain.common.job import LEDGER_ANNOTATION
from kubetrain.common.job.limits import CREATES_PER_RECONCILE, MAX_REPLICAS
from kubetrain.common.kube.resources import PODS, SERVICES, Obj, Resource

from .harness import TOY, Cluster, ClusterApi
from .toyjob import toy_job


def ledger(job: Obj) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(job["metadata"]["annotations"][LEDGER_ANNOTATION])
    return loaded


async def test_a_failed_pod_whose_delete_is_refused_counts_once(cluster: Cluster) -> None:
    body = toy_job(leader=None, workers=1, restart_policy=RestartPolicy.ON_FAILURE)
    body["spec"]["runPolicy"] = {"backoffLimit": 1}
    await cluster.submit(body)
    await cluster.run_all()
    first = (await cluster.pods())["toy-worker-0"]["metadata"]["uid"]
    cluster.api.fail("delete", ServerError("etcd timeout", reason="InternalError"), resource=PODS, times=2)
    await cluster.set_phase("toy-worker-0", "Failed", exit_code=1)
    await cluster.step(1)
    await cluster.step(2)
    replaced = (await cluster.pods())["toy-worker-0"]["metadata"]["uid"]
    assert replaced != first, "deleted on the third try"
    assert not await cluster.is_true("Failed"), "three tries to delete one failed pod are one restart"
    assert ledger(await cluster.job())["restarts"] == 1
    await cluster.set_phase("toy-worker-0", "Succeeded", exit_code=0)
    assert await cluster.is_true("Succeeded")


@pytest.mark.parametrize(
    ("policy", "rerun"),
    [
        (RestartPolicy.NEVER, False),
        (RestartPolicy.ON_FAILURE, True),
        (RestartPolicy.ALWAYS, True),
        (RestartPolicy.EXIT_CODE, True),
    ],
)
async def test_a_running_pod_that_vanished_while_the_operator_was_down(
    cluster: Cluster, policy: RestartPolicy, rerun: bool
) -> None:
    await cluster.submit(toy_job(leader=None, workers=2, restart_policy=policy))
    await cluster.run_all()
    assert ledger(await cluster.job())["started"] == {"Worker": "0-1"}
    await cluster.op.stop(cluster.clock)
    await cluster.api.delete(PODS, "ns", "toy-worker-1", grace_period_seconds=0)  # node gone, pod collected
    await cluster.start_operator()
    pods = await cluster.pods()
    assert ("toy-worker-1" in pods) is rerun
    if rerun:
        assert ledger(await cluster.job())["restarts"] == 1, "a lost replica that ran counts a restart"
        assert not await cluster.is_true("Failed")
    else:
        failed = await cluster.condition("Failed")
        assert failed is not None, "under Never a lost running replica fails the job; it never runs twice"
        assert failed["message"] == "ToyJob ns/toy has failed because 1 Worker replica(s) failed."


async def test_a_job_near_the_limit_is_reconciled_in_bounded_memory() -> None:
    cluster = Cluster()
    cluster.api = Discarding(clock=cluster.clock, status_subresources=[TOY])
    await cluster.start_operator()
    try:
        tracemalloc.start()
        await cluster.submit(toy_job(leader=None, workers=MAX_REPLICAS))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        await cluster.op.stop(cluster.clock)
    assert cluster.api.created[PODS] == CREATES_PER_RECONCILE, "one reconcile creates one bounded share"
    assert cluster.api.created[SERVICES] == CREATES_PER_RECONCILE
    # Bodies are rendered a batch at a time and the plan holds one share of indices: about 2.5 MiB.
    assert peak < 8 * 2**20, f"peak {peak / 2**20:.1f} MiB"


async def test_two_billion_replicas_fail_the_job_with_a_condition_and_an_event(cluster: Cluster) -> None:
    tracemalloc.start()
    job = toy_job(leader=None, workers=1)
    job["spec"]["toyReplicaSpecs"]["Worker"]["replicas"] = 2_147_483_647  # an old CRD without a maximum
    await cluster.submit(job)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    failed = await cluster.condition("Failed")
    assert failed is not None and failed["reason"] == "ToyJobFailedValidation"
    # Said by the operator's own check, or by the model once it carries the CRD's maximum: either way
    # the field and the bound are named.
    assert failed["message"].startswith("spec.toyReplicaSpecs.Worker.replicas")
    assert "10000" in failed["message"]
    assert [e.reason for e in cluster.op.events.events if e.type == "Warning"] == ["ToyJobFailedValidation"]
    assert await cluster.pods() == {}
    assert peak < 8 * 2**20, f"peak {peak / 2**20:.1f} MiB"


class Discarding(ClusterApi):
    """Accepts pods and Services without keeping them (what is measured is the operator, not this store)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.created: dict[Resource, int] = {PODS: 0, SERVICES: 0}

    async def create(self, res: Resource, namespace: str | None, body: Obj, *, read_back: bool = True) -> Obj:
        if res in self.created:
            self.created[res] += 1
            return body
        return await super().create(res, namespace, body)
