"""A hook that raises never fails silently: a few retries with backoff, then the job is Failed with a
condition and a Warning Event naming the hook and the error; the log has the traceback; a metric counts
every try. A hook that raises only for a while does not fail the job."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from kubetrain.common.job.crash import ERROR_ATTEMPTS

from .harness import TOY, Cluster
from .toyjob import ToyJob, ToyJobController, toy_job


def hook_errors(cluster: Cluster, hook: str) -> float:
    labels = {"framework": "toy", "hook": hook}
    return cluster.op.metrics.registry.get_sample_value("kubetrain_job_hook_errors_total", labels) or 0.0


async def test_a_hook_that_raises_fails_the_job_naming_the_error(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def configure_pod(self: ToyJobController, job: ToyJob, rtype: str, index: int, pod: Any) -> Any:
        return {"world": 1 / 0}

    monkeypatch.setattr(ToyJobController, "configure_pod", configure_pod)
    with caplog.at_level(logging.ERROR):
        await cluster.submit(toy_job())
        for _ in range(ERROR_ATTEMPTS):
            await cluster.step(1.0)
    failed = await cluster.condition("Failed")
    message = (
        f"configure_pod raised ZeroDivisionError: division by zero ({ERROR_ATTEMPTS} tries; the operator's "
        "log has the traceback)"
    )
    assert failed is not None and failed["status"] == "True"
    assert (failed["reason"], failed["message"]) == ("ToyJobReconcileError", message)
    warnings = [e for e in cluster.op.events.events if e.reason == "ToyJobReconcileError"]
    assert [(e.type, e.message) for e in warnings] == [("Warning", message)]
    assert hook_errors(cluster, "configure_pod") == ERROR_ATTEMPTS
    assert "Traceback" in caplog.text and "ZeroDivisionError" in caplog.text
    assert await cluster.pods() == {}


async def test_a_hook_that_recovers_within_the_retries_does_not_fail_the_job(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    original = ToyJobController.verdict

    def verdict(self: ToyJobController, job: ToyJob, observed: Any) -> Any:
        calls.append(job.name)
        if len(calls) < ERROR_ATTEMPTS:
            raise RuntimeError("not yet")
        return original(self, job, observed)

    monkeypatch.setattr(ToyJobController, "verdict", verdict)
    await cluster.submit(toy_job())
    for _ in range(ERROR_ATTEMPTS):
        await cluster.step(1.0)
    assert hook_errors(cluster, "verdict") == ERROR_ATTEMPTS - 1
    assert await cluster.condition("Failed") is None
    assert len(await cluster.pods()) == 3  # the Leader and two Workers


async def test_a_hook_that_raises_on_a_finished_job_leaves_its_outcome(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    await cluster.submit(toy_job())
    await cluster.run_all("Succeeded")
    await cluster.step(1.0)
    assert await cluster.is_true("Succeeded")

    def default(self: ToyJobController, job: ToyJob) -> ToyJob:
        raise ValueError("a bug in a new operator version")

    monkeypatch.setattr(ToyJobController, "default", default)
    await cluster.api.patch(TOY, "ns", "toy", {"metadata": {"annotations": {"touched": "yes"}}})
    for _ in range(ERROR_ATTEMPTS):
        await cluster.step(1.0)
    assert hook_errors(cluster, "default") == ERROR_ATTEMPTS
    assert await cluster.condition("Failed") is None
    assert await cluster.is_true("Succeeded")
