"""ParsedJobs: a job's spec is parsed and defaulted again exactly when something `default` reads changed."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from kubetrain.api import PYTORCHJOB, PyTorchJob, apply_defaults
from kubetrain.common.job.parsed import IDLE_S, ParsedJobs
from kubetrain.common.kube.resources import Obj
from kubetrain.common.reconcile import Request
from kubetrain.common.testing import FakeClock

JOB = Request("ns", "pt")


def raw_job(*, version: str = "1", replicas: int = 2, status: Obj | None = None) -> Obj:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "trainer:1"}]}}
    job: Obj = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "pt", "namespace": "ns", "uid": "uid-1", "resourceVersion": version},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": copy.deepcopy(template)},
                "Worker": {"replicas": replicas, "template": copy.deepcopy(template)},
            }
        },
    }
    if status is not None:
        job["status"] = status
    return job


class Counting:
    """The built-in defaulting, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, job: PyTorchJob) -> PyTorchJob:
        self.calls += 1
        return apply_defaults(job, kind=PYTORCHJOB)


def fresh(raw: Obj) -> dict[str, Any]:
    """What parsing and defaulting `raw` from nothing gives, in wire form."""
    return apply_defaults(PyTorchJob.model_validate(raw), kind=PYTORCHJOB).to_wire()


def test_a_reconcile_that_sees_the_same_spec_reuses_the_parsed_and_defaulted_spec() -> None:
    jobs: ParsedJobs[PyTorchJob] = ParsedJobs(PyTorchJob, FakeClock())
    default = Counting()
    jobs.job(JOB, raw_job(), default)
    later = raw_job(version="2", status={"conditions": [], "startTime": "2026-11-27T10:00:00Z"})
    job = jobs.job(JOB, later, default)
    assert default.calls == 1
    assert job.to_wire() == fresh(later)  # the new status and metadata, the remembered defaulted spec
    assert job.metadata.resource_version == "2"
    assert job.status is not None and job.status.start_time is not None


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda raw: raw["spec"]["pytorchReplicaSpecs"]["Worker"].update(replicas=5), id="spec"),
        pytest.param(lambda raw: raw["metadata"].update(labels={"team": "a"}), id="labels"),
        pytest.param(lambda raw: raw["metadata"].update(annotations={"note": "b"}), id="annotations"),
        pytest.param(lambda raw: raw["metadata"].update(uid="uid-2"), id="uid (the job was recreated)"),
    ],
)
def test_a_change_of_what_default_may_read_parses_and_defaults_again(change: Any) -> None:
    jobs: ParsedJobs[PyTorchJob] = ParsedJobs(PyTorchJob, FakeClock())
    default = Counting()
    jobs.job(JOB, raw_job(), default)
    changed = raw_job(version="2")
    change(changed)
    job = jobs.job(JOB, changed, default)
    assert default.calls == 2
    assert job.to_wire() == fresh(changed)


def test_a_default_hook_that_writes_more_than_the_spec_runs_on_every_reconcile() -> None:
    jobs: ParsedJobs[PyTorchJob] = ParsedJobs(PyTorchJob, FakeClock())
    calls = []

    def default(job: PyTorchJob) -> PyTorchJob:
        calls.append(job.metadata.resource_version)
        meta = job.metadata.model_copy(update={"annotations": {"seen": job.metadata.resource_version or ""}})
        return apply_defaults(job, kind=PYTORCHJOB).model_copy(update={"metadata": meta})

    jobs.job(JOB, raw_job(), default)
    job = jobs.job(JOB, raw_job(version="2"), default)
    assert calls == ["1", "2"]
    assert job.metadata.annotations == {"seen": "2"}


def test_an_invalid_job_raises_every_time_and_a_bad_status_is_caught_with_a_remembered_spec() -> None:
    jobs: ParsedJobs[PyTorchJob] = ParsedJobs(PyTorchJob, FakeClock())
    default = Counting()
    bad = raw_job()
    bad["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "many"
    for _ in range(2):
        with pytest.raises(ValidationError, match="replicas"):
            jobs.job(JOB, bad, default)
    assert default.calls == 0 and len(jobs) == 0
    jobs.job(JOB, raw_job(), default)
    with pytest.raises(ValidationError, match="startTime"):
        jobs.job(JOB, raw_job(version="2", status={"startTime": "yesterday"}), default)


def test_forget_lets_the_entry_go_and_a_job_without_uid_is_never_remembered() -> None:
    jobs: ParsedJobs[PyTorchJob] = ParsedJobs(PyTorchJob, FakeClock())
    default = Counting()
    jobs.job(JOB, raw_job(), default)
    assert len(jobs) == 1
    jobs.forget(JOB)
    assert len(jobs) == 0
    jobs.job(JOB, raw_job(), default)
    assert default.calls == 2
    unsaved = raw_job()
    del unsaved["metadata"]["uid"]
    jobs.forget(JOB)
    jobs.job(JOB, unsaved, default)
    assert len(jobs) == 0


async def test_an_entry_no_reconcile_used_for_a_minute_goes_and_one_in_use_stays() -> None:
    clock = FakeClock()
    jobs: ParsedJobs[PyTorchJob] = ParsedJobs(PyTorchJob, clock)
    default = Counting()
    quiet, busy = Request("ns", "quiet"), Request("ns", "busy")
    jobs.job(quiet, raw_job(), default)
    jobs.job(busy, raw_job(), default)
    await clock.advance(IDLE_S / 2)
    jobs.job(busy, raw_job(version="2"), default)
    await clock.advance(IDLE_S / 2)
    jobs.job(busy, raw_job(version="3"), default)  # the sweep: quiet has been idle for IDLE_S
    assert len(jobs) == 1 and default.calls == 2
    jobs.job(quiet, raw_job(version="4"), default)
    assert default.calls == 3  # parsed and defaulted again, as new
