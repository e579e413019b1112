"""Restart, backoff, deadline, TTL and cleanup decisions, as tables on a fixed `now`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kubetrain.api import CleanPodPolicy, RestartPolicy
from kubetrain.common.job.facts import PodFacts, PodPhase
from kubetrain.common.job.limits import CREATES_PER_RECONCILE
from kubetrain.common.job.policy import (
    Bucket,
    classify,
    deadline_exceeded,
    is_retryable_exit_code,
    past_backoff_limit,
    plan_replica,
    pods_to_clean,
    seconds_until,
    will_restart,
)

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
R, P, S, F, U = PodPhase.RUNNING, PodPhase.PENDING, PodPhase.SUCCEEDED, PodPhase.FAILED, PodPhase.UNKNOWN


def pod(index: int | None, phase: PodPhase = R, *, code: int | None = None, restarts: int = 0,
        deleted_ago: float | None = None, disrupted: bool = False, name: str = "") -> PodFacts:  # fmt: skip
    deletion = NOW - timedelta(seconds=deleted_ago) if deleted_ago is not None else None
    return PodFacts(
        name=name or f"job-worker-{index}", uid=f"uid-{name or index}", index=index, phase=phase,
        exit_code=code, restarts=restarts, deletion=deletion, disrupted=disrupted,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("code", "retry"), [(0, False), (1, False), (127, False), (128, True), (137, True), (143, True)]
)
def test_retryable_exit_codes(code: int, retry: bool) -> None:
    assert is_retryable_exit_code(code) is retry


@pytest.mark.parametrize(
    ("policy", "failed", "restart"),
    [
        (RestartPolicy.ALWAYS, pod(0, F, code=1), True),
        (RestartPolicy.ON_FAILURE, pod(0, F, code=1), True),
        (RestartPolicy.NEVER, pod(0, F, code=137), False),
        (RestartPolicy.EXIT_CODE, pod(0, F, code=137), True),
        (RestartPolicy.EXIT_CODE, pod(0, F, code=1), False),
        (RestartPolicy.EXIT_CODE, pod(0, F, code=None), True),
        (RestartPolicy.EXIT_CODE, pod(0, F, code=2, disrupted=True), True),
    ],
)
def test_will_restart(policy: RestartPolicy, failed: PodFacts, restart: bool) -> None:
    assert will_restart(policy, failed) is restart


@pytest.mark.parametrize(
    ("policy", "facts", "bucket"),
    [
        (RestartPolicy.NEVER, pod(0, P), Bucket.PENDING),
        (RestartPolicy.NEVER, pod(0, U), Bucket.PENDING),
        (RestartPolicy.NEVER, pod(0, R), Bucket.ACTIVE),
        (RestartPolicy.NEVER, pod(0, S, code=0), Bucket.SUCCEEDED),
        (RestartPolicy.NEVER, pod(0, F, code=1), Bucket.FAILED),
        (RestartPolicy.ON_FAILURE, pod(0, F, code=1), Bucket.RESTARTING),
        # Terminating: a running pod going away fails a Never job, and is replaced otherwise.
        (RestartPolicy.NEVER, pod(0, R, deleted_ago=1), Bucket.FAILED),
        (RestartPolicy.NEVER, pod(0, U, deleted_ago=1), Bucket.FAILED),
        (RestartPolicy.NEVER, pod(0, P, deleted_ago=1), Bucket.RESTARTING),
        (RestartPolicy.ON_FAILURE, pod(0, R, deleted_ago=1), Bucket.RESTARTING),
        (RestartPolicy.EXIT_CODE, pod(0, R, deleted_ago=1), Bucket.RESTARTING),
        (RestartPolicy.NEVER, pod(0, S, deleted_ago=1), Bucket.SUCCEEDED),
    ],
)
def test_classify(policy: RestartPolicy, facts: PodFacts, bucket: Bucket) -> None:
    assert classify(policy, facts) is bucket


def test_plan_creates_missing_indices_and_removes_surplus() -> None:
    plan = plan_replica(
        replicas=3, policy=RestartPolicy.NEVER, now=NOW,
        pods=[pod(0), pod(2, P), pod(3), pod(None, name="unlabelled")],
    )  # fmt: skip
    assert plan.create == (1,)
    assert sorted(p.name for p in plan.remove) == ["job-worker-3", "unlabelled"]
    assert (plan.counts.active, plan.counts.pending, plan.counts.replicas) == (1, 1, 3)


def test_plan_replaces_failed_pods_and_counts_them_for_backoff() -> None:
    plan = plan_replica(
        replicas=3, policy=RestartPolicy.ON_FAILURE, now=NOW,
        pods=[pod(0, F, code=1, restarts=2), pod(1, R, restarts=3), pod(2, F, code=1, deleted_ago=1)],
    )  # fmt: skip
    assert [p.index for p in plan.restart] == [0], "a pod already being deleted is not replaced twice"
    assert plan.restart_units == 1 + 2, "the replaced pod, and its container restarts"
    assert plan.live_restarts == 3
    assert plan.create == (), "a replaced pod is recreated once it is gone"
    assert (plan.counts.restarting, plan.counts.active) == (2, 1)


def test_never_jobs_have_no_restarts_to_count() -> None:
    plan = plan_replica(replicas=1, policy=RestartPolicy.NEVER, now=NOW, pods=[pod(0, R, restarts=5)])
    assert (plan.restart_units, plan.live_restarts) == (0, 0)


def test_stuck_terminating_pods_are_forced_after_the_timeout() -> None:
    plan = plan_replica(
        replicas=2, policy=RestartPolicy.ON_FAILURE, now=NOW, terminating_timeout=60,
        pods=[pod(0, R, deleted_ago=61), pod(1, R, deleted_ago=20)],
    )  # fmt: skip
    assert [p.index for p in plan.force] == [0]
    assert plan.recheck_after == 40, "pod 1 becomes stuck in 40 seconds: look again then"
    assert plan.create == ()


def test_indices_known_to_have_succeeded_are_never_recreated() -> None:
    plan = plan_replica(
        replicas=3, policy=RestartPolicy.NEVER, now=NOW, pods=[pod(0)], succeeded_before=[1, 7]
    )
    assert plan.create == (2,)
    assert plan.counts.succeeded == 1
    assert plan.succeeded_indices == frozenset({1})


def test_a_duplicate_of_an_index_is_removed_keeping_the_live_pod() -> None:
    live, leftover = pod(0, R, name="job-worker-0"), pod(0, F, code=1, deleted_ago=1, name="job-worker-0-old")
    plan = plan_replica(replicas=1, policy=RestartPolicy.NEVER, now=NOW, pods=[leftover, live])
    assert plan.counts.pods[0] == live
    assert plan.remove == (), "the leftover is already being deleted"


@pytest.mark.parametrize(
    ("limit", "restarts", "failed"),
    [(None, 100, False), (0, 0, False), (0, 1, True), (3, 3, False), (3, 4, True)],
)
def test_backoff_limit(limit: int | None, restarts: int, failed: bool) -> None:
    assert past_backoff_limit(limit, restarts) is failed


def test_deadline_and_ttl_next_look() -> None:
    start = NOW - timedelta(seconds=70)
    assert not deadline_exceeded(start, 100, NOW)
    assert deadline_exceeded(start, 70, NOW)
    assert not deadline_exceeded(None, 10, NOW) and not deadline_exceeded(start, None, NOW)
    assert seconds_until(start, 100, NOW) == 30
    assert seconds_until(start, 10, NOW) == 0, "overdue: look now"
    assert seconds_until(None, 10, NOW) is None and seconds_until(start, None, NOW) is None


@pytest.mark.parametrize(
    ("policy", "deleted"),
    [
        (CleanPodPolicy.ALL, ["p", "r", "s", "f"]),
        (CleanPodPolicy.RUNNING, ["p", "r"]),
        (CleanPodPolicy.NONE, []),
    ],
)
def test_clean_pod_policy(policy: CleanPodPolicy, deleted: list[str]) -> None:
    pods = [pod(0, P, name="p"), pod(1, R, name="r"), pod(2, S, name="s"), pod(3, F, name="f")]
    assert [p.name for p in pods_to_clean(policy, pods)] == deleted


def test_a_failed_pod_whose_delete_failed_is_not_counted_again() -> None:
    failed = pod(0, F, code=137, restarts=1)
    first = plan_replica(replicas=1, policy=RestartPolicy.EXIT_CODE, now=NOW, pods=[failed])
    assert (first.restart_units, first.counted) == (2, frozenset({"uid-0"}))
    again = plan_replica(
        replicas=1, policy=RestartPolicy.EXIT_CODE, now=NOW, pods=[failed], counted_before=first.counted
    )
    assert again.restart == (failed,), "the delete is retried"
    assert again.restart_units == 0, "but the pod is already counted"


@pytest.mark.parametrize(
    ("policy", "failed", "units", "create"),
    [
        (RestartPolicy.NEVER, 1, 0, ()),
        (RestartPolicy.ON_FAILURE, 0, 1, (1,)),
        (RestartPolicy.ALWAYS, 0, 1, (1,)),
        (RestartPolicy.EXIT_CODE, 0, 1, (1,)),
    ],
)
def test_a_pod_that_vanished_after_it_was_seen_running(
    policy: RestartPolicy, failed: int, units: int, create: tuple[int, ...]
) -> None:
    plan = plan_replica(replicas=2, policy=policy, now=NOW, pods=[pod(0, R)], started_before={0, 1})
    assert (plan.counts.failed, plan.restart_units, plan.create) == (failed, units, create)
    kept = {0, 1} if policy is RestartPolicy.NEVER else {0}
    assert plan.started_indices == frozenset(kept), "a lost Never replica stays failed across reconciles"


def test_a_pod_that_vanished_before_it_ran_is_just_created_again() -> None:
    plan = plan_replica(replicas=1, policy=RestartPolicy.NEVER, now=NOW, pods=[], started_before=())
    assert (plan.counts.failed, plan.restart_units, plan.create) == (0, 0, (0,))


def test_a_succeeded_index_is_never_lost_nor_rerun() -> None:
    plan = plan_replica(
        replicas=1, policy=RestartPolicy.NEVER, now=NOW, pods=[], started_before={0}, succeeded_before={0}
    )
    assert (plan.counts.failed, plan.counts.succeeded, plan.create) == (0, 1, ())


def test_started_indices_follow_the_pods() -> None:
    pods = [
        pod(0, P), pod(1, R), pod(2, F, code=1), pod(3, R, deleted_ago=1), pod(4, R, deleted_ago=1),
        pod(5, F, code=1, deleted_ago=1),
    ]  # fmt: skip
    plan = plan_replica(
        replicas=6, policy=RestartPolicy.ON_FAILURE, now=NOW, pods=pods, started_before={3, 2}
    )
    # 2 is replaced now (its restart is counted); 5 was replaced before and is still being deleted: once
    # gone, neither may count again. 3 and 4 run and are going away (deleted by someone else): lost once gone.
    assert plan.started_indices == frozenset({1, 3, 4})


def test_the_plan_creates_a_bounded_number_of_pods_however_many_replicas() -> None:
    plan = plan_replica(replicas=2_147_483_647, policy=RestartPolicy.NEVER, now=NOW, pods=[pod(0, R)])
    assert plan.create == tuple(range(1, CREATES_PER_RECONCILE + 1))
