"""What an unchanged job does not cost: the watch event of the operator's own write to it (its echo) causes
no reconcile (any other change of the job does, and so does the echo a reconcile was put off for: the cache
behind our write), and its spec is checked once per generation, not once per reconcile."""

from __future__ import annotations

from typing import Any

from kubetrain.common.reconcile import Request

from .harness import TOY, Cluster
from .toyjob import toy_job


def _reconciles(cluster: Cluster) -> float:
    """Reconciles of the ToyJob controller so far, whatever their result."""
    registry = cluster.op.metrics.registry
    samples = (
        registry.get_sample_value(
            "controller_runtime_reconcile_total", {"controller": "toyjob-controller", "result": result}
        )
        for result in ("success", "error", "requeue", "requeue_after")
    )
    return sum(value or 0.0 for value in samples)


async def test_the_echo_of_our_own_status_write_costs_no_reconcile(cluster: Cluster) -> None:
    await cluster.submit(toy_job(workers=1))
    await cluster.set_phase("toy-worker-0", "Running", ready=True)
    before, patches = _reconciles(cluster), cluster.api.count("patch", TOY)
    await cluster.set_phase("toy-leader-0", "Running", ready=True)  # the job becomes Running
    assert await cluster.is_true("Running")
    assert cluster.api.count("patch", TOY) > patches, "the reconcile wrote the job's status"
    assert _reconciles(cluster) - before == 1, "the pod's change, not the echo of the status it caused"


async def test_a_change_of_the_job_by_someone_else_is_reconciled(cluster: Cluster) -> None:
    await cluster.submit(toy_job(workers=1))
    before = _reconciles(cluster)
    await cluster.api.patch(TOY, "ns", "toy", {"metadata": {"labels": {"team": "a"}}})
    await cluster.step()
    assert _reconciles(cluster) - before == 1


async def test_the_echo_a_put_off_reconcile_waits_for_enqueues_the_job(cluster: Cluster) -> None:
    op = cluster.op
    await cluster.submit(toy_job(workers=1))
    fence, request = op.controller.fence, Request("ns", "toy")
    cached = op.controller.cache[TOY].get("ns", "toy")
    assert cached is not None
    fence.wrote(request, "999999", based_on=cached["metadata"]["resourceVersion"])  # a write not yet seen
    assert fence.own_echo(request, "999999")
    assert not await fence.caught_up(op.controller.api, TOY, request, cached), "the reconcile is put off"
    assert not fence.own_echo(request, "999999"), "so the echo must enqueue the job"


async def test_a_job_is_checked_once_per_spec_and_again_when_it_changes(cluster: Cluster) -> None:
    ctl = cluster.op.controller
    checked: list[str] = []

    def counting_validate(job: Any) -> Any:
        checked.append(job.metadata.resource_version)
        return type(ctl).validate(ctl, job)

    ctl.validate = counting_validate  # type: ignore[method-assign]
    await cluster.submit(toy_job(workers=1))
    await cluster.run_all()
    assert await cluster.is_true("Running")
    assert len(checked) == 1, "the reconciles of an unchanged spec reuse its answer"
    spec = {"spec": {"toyReplicaSpecs": {"Leader": {"replicas": 2}}}}
    await cluster.api.patch(TOY, "ns", "toy", spec)  # the spec changed: a new generation
    await cluster.step()
    assert len(checked) == 2
    failed = await cluster.condition("Failed")
    assert failed is not None and failed["reason"] == "ToyJobFailedValidation"
