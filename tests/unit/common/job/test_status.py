"""Condition transitions, reasons and messages exactly as the Kubeflow operators write them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kubetrain.api import ConditionStatus, JobCondition, JobConditionType, JobStatus
from kubetrain.common.job.facts import ReplicaCounts
from kubetrain.common.job.status import StatusBuilder, is_finished

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def builder(status: JobStatus | None = None, at: int = 0) -> StatusBuilder:
    return StatusBuilder(
        kind="TFJob", namespace="ns", name="mnist", status=status, now=T0 + timedelta(seconds=at)
    )


def last(b: StatusBuilder) -> JobCondition:
    assert b.status.conditions
    return b.status.conditions[-1]


def table(b: StatusBuilder) -> list[tuple[str, str, str]]:
    return [(c.type.value, c.status.value, c.reason or "") for c in b.status.conditions or ()]


def test_the_life_of_a_job() -> None:
    b = builder()
    b.created()
    b.started()
    assert table(b) == [("Created", "True", "TFJobCreated")]
    assert b.status.conditions and b.status.conditions[0].message == "TFJob mnist is created."
    b = builder(b.status, at=10)
    b.running()
    b.restarting("Worker")
    assert table(b) == [("Created", "True", "TFJobCreated"), ("Restarting", "True", "TFJobRestarting")]
    assert last(b).message == "job mnist is restarting because Worker replica(s) failed."
    b.running()
    assert table(b)[-1] == ("Running", "True", "TFJobRunning")
    assert last(b).message == "TFJob ns/mnist is running."
    b = builder(b.status, at=20)
    b.succeeded()
    assert table(b) == [
        ("Created", "True", "TFJobCreated"),
        ("Running", "False", "TFJobRunning"),
        ("Succeeded", "True", "TFJobSucceeded"),
    ]
    assert last(b).message == "TFJob ns/mnist successfully completed."
    assert b.status.completion_time == T0 + timedelta(seconds=20)
    assert b.status.start_time == T0
    assert is_finished(b.status)


def test_setting_the_same_condition_again_changes_nothing() -> None:
    b = builder()
    b.created()
    b.running()
    before = b.status
    again = builder(before, at=60)
    assert not again.created() and not again.running()
    assert again.status == before and again.transitions == []


def test_last_transition_time_is_kept_while_the_status_does_not_change() -> None:
    b = builder()
    b.running(suffix="Running")
    later = builder(b.status, at=30)
    later.running(suffix="ScalingUp", message="other")
    cond = last(later)
    assert (cond.reason, cond.last_transition_time, cond.last_update_time) == (
        "TFJobScalingUp", T0, T0 + timedelta(seconds=30),
    )  # fmt: skip


def test_failed_is_a_terminal_latch() -> None:
    b = builder()
    b.running()
    b.failed_replicas("Worker", 2)
    assert last(b).message == "TFJob ns/mnist has failed because 2 Worker replica(s) failed."
    frozen = b.status
    assert not b.succeeded() and not b.running() and not b.restarting("Worker")
    assert b.status.conditions == frozen.conditions


def test_backoff_deadline_and_validation_messages() -> None:
    for fail, message, reason in [
        (
            "backoff_limit_exceeded",
            "Job mnist has failed because it has reached the specified backoff limit",
            "TFJobFailed",
        ),
        (
            "deadline_exceeded",
            "Job mnist has failed because it was active longer than specified deadline",
            "TFJobFailed",
        ),
    ]:
        b = builder()
        getattr(b, fail)()
        assert table(b) == [("Failed", "True", reason)] and last(b).message == message
    b = builder()
    b.invalid("spec.x: bad")
    assert table(b) == [("Failed", "True", "TFJobFailedValidation")]


def test_suspend_and_resume() -> None:
    b = builder()
    b.created()
    b.running()
    b = builder(b.status, at=5)
    b.suspended()
    assert table(b) == [
        ("Created", "True", "TFJobCreated"),
        ("Running", "False", "TFJobSuspended"),
        ("Suspended", "True", "TFJobSuspended"),
    ]
    assert last(b).message == "TFJob mnist is suspended."
    assert not builder(b.status, at=6).suspended(), "suspended twice is one transition"
    b = builder(b.status, at=100)
    assert b.resumed()
    assert table(b)[-1] == ("Suspended", "False", "TFJobResumed")
    assert last(b).message == "TFJob mnist is resumed."
    assert b.status.start_time == T0 + timedelta(seconds=100)
    assert not builder(b.status).resumed()


def test_creation_failure_is_the_latest_state_until_it_clears() -> None:
    b = builder()
    b.created()
    b.running()
    b.creation_failed("Pod", "failed to create Pod x: 422 Invalid: spec.containers[0].image: Required")
    assert table(b) == [
        ("Created", "True", "TFJobCreated"),
        ("Running", "True", "TFJobRunning"),
        ("CreateFailed", "True", "TFJobFailedCreatePod"),
    ], "last, so the State column shows it"
    assert "422 Invalid" in last(b).message
    assert not builder(b.status).created(), "created() only sets the first Created"
    retry = builder(b.status, at=10)
    retry.creation_failed("Pod", "failed to create Pod x: 422 Invalid: spec.containers[0].image: Required")
    assert retry.transitions == [] and retry.status == b.status, "the same failure again is no change"
    assert retry.creation_succeeded()
    assert table(retry) == [("Created", "True", "TFJobCreated"), ("Running", "True", "TFJobRunning")]
    assert not builder(retry.status).creation_succeeded(), "nothing to clear"


def test_a_legacy_created_false_becomes_true_on_success() -> None:
    b = builder()
    b.set(JobConditionType.CREATED, ConditionStatus.FALSE, "TFJobFailedCreatePod", "quota")
    assert builder(b.status).creation_succeeded()


def test_a_failed_job_keeps_its_conditions() -> None:
    b = builder()
    b.creation_failed("Pod", "quota")
    b.failed("deadline")
    after = builder(b.status)
    assert not after.creation_succeeded() and after.status == b.status


def test_replica_statuses_count_replaced_pods_as_failed_and_carry_selectors() -> None:
    b = builder()
    selector = {"training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/replica-type": "worker"}
    b.replica_statuses(
        {"Worker": ReplicaCounts(replicas=4, active=2, succeeded=1, failed=0, restarting=1)},
        {"Worker": selector},
    )
    worker = b.status.to_wire()["replicaStatuses"]["Worker"]
    assert worker == {
        "active": 2,
        "succeeded": 1,
        "failed": 1,
        "labelSelector": {"matchLabels": selector},
        "selector": "training.kubeflow.org/job-name=mnist,training.kubeflow.org/replica-type=worker",
    }
    b.no_active(into_succeeded=True)
    assert b.status.to_wire()["replicaStatuses"]["Worker"]["succeeded"] == 3
