"""The gang failure policy (`kubetrain.io/failure-policy`) over the in-memory API server, on virtual time.

The test plays the kubelet: it fails pods (phase Failed with an exit code) or restarts a container in
place (restartCount and lastState), and checks what a user sees: pods, conditions, Events, metrics and
the job's ledger, also across an operator restart.
"""

from __future__ import annotations

import json
from typing import Any

from kubetrain.api import RestartPolicy, RunPolicy
from kubetrain.common.errors import ServerError
from kubetrain.common.job.failurepolicy import FAILURE_POLICY_ANNOTATION
from kubetrain.common.job.ledger import LEDGER_ANNOTATION
from kubetrain.common.kube.resources import PODS, Obj

from .harness import TOY, Cluster
from .toyjob import toy_job

RESTART_ON_KILL = {"action": "RestartGang", "onExitCodes": [137]}
SLOW_KILL = "test.kubetrain/slow-kill"
"""A finalizer that holds a deleted pod, as a kubelet does while a stopped container's grace period runs."""


def with_policy(body: Obj, policy: dict[str, Any] | str) -> Obj:
    text = policy if isinstance(policy, str) else json.dumps(policy)
    body["metadata"].setdefault("annotations", {})[FAILURE_POLICY_ANNOTATION] = text
    return body


async def uids(cluster: Cluster) -> dict[str, str]:
    return {name: pod["metadata"]["uid"] for name, pod in (await cluster.pods()).items()}


async def ledger(cluster: Cluster) -> dict[str, Any]:
    return dict(json.loads((await cluster.job())["metadata"]["annotations"][LEDGER_ANNOTATION]))


async def restart_in_place(cluster: Cluster, name: str, exit_code: int, *, reason: str = "Error") -> None:
    """What the kubelet shows after restarting a container of a Running pod (OnFailure/Always)."""
    status = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {
                "name": "toy",
                "restartCount": 1,
                "state": {"running": {}},
                "lastState": {"terminated": {"exitCode": exit_code, "reason": reason}},
            }
        ],
    }
    await cluster.api.patch(PODS, "ns", name, {"status": status})
    await cluster.step()


async def test_one_rank_killed_restarts_the_whole_gang_once(cluster: Cluster) -> None:
    body = toy_job(workers=3, restart_policy=RestartPolicy.ON_FAILURE, run_policy=RunPolicy(backoff_limit=0))
    await cluster.submit(with_policy(body, {"rules": [RESTART_ON_KILL]}))
    await cluster.run_all()
    before = await uids(cluster)
    await restart_in_place(cluster, "toy-worker-1", 137)
    after = await uids(cluster)
    assert sorted(after) == sorted(before), "every pod of the gang is recreated"
    assert not set(after.values()) & set(before.values()), "... and none is kept: all were deleted"
    restarting = await cluster.condition("Restarting")
    assert restarting is not None and restarting["reason"] == "ToyJobGangRestart"
    assert (
        "gang restart 1 of 3: pod toy-worker-1 (Worker) restarted its container, exit code 137"
        in (restarting["message"])
    )
    assert not await cluster.is_true("Failed"), "backoffLimit 0 is not charged by a gang restart"
    assert (await ledger(cluster))["gang"]["restarts"] == 1
    assert "ToyJobGangRestart" in cluster.op.events.reasons()
    assert "RankFailed" in cluster.op.events.reasons()
    assert cluster.op.counter("kubetrain_gang_restarts", reason="Error") == 1
    assert cluster.op.counter("kubetrain_rank_restarts", reason="Error", replica_type="Worker") == 1
    await cluster.run_all()
    assert await cluster.is_true("Running"), "the recreated gang runs again"
    statuses = (await cluster.job())["status"]["replicaStatuses"]
    assert statuses["Worker"]["active"] == 3
    assert (statuses["Worker"]["restarts"], statuses["Leader"]["restarts"]) == (1, 0), "rank restarts by type"


async def test_a_failed_pod_under_never_restarts_the_gang_instead_of_failing_the_job(
    cluster: Cluster,
) -> None:
    body = toy_job(workers=2, restart_policy=RestartPolicy.NEVER)
    await cluster.submit(with_policy(body, {"rules": [RESTART_ON_KILL]}))
    await cluster.run_all()
    before = await uids(cluster)
    await cluster.set_phase("toy-worker-0", "Failed", exit_code=137)
    assert not await cluster.is_true("Failed")
    assert not set((await uids(cluster)).values()) & set(before.values())
    # an exit code no rule names is what restartPolicy Never makes of it: the job fails
    await cluster.run_all()
    await cluster.set_phase("toy-worker-1", "Failed", exit_code=1)
    failed = await cluster.condition("Failed")
    assert failed is not None and failed["reason"] == "ToyJobFailed"
    assert cluster.op.counter("kubetrain_gang_restarts", reason="Error") == 1


async def test_ignore_replaces_the_pod_without_charging_backoff_limit(cluster: Cluster) -> None:
    body = toy_job(workers=2, restart_policy=RestartPolicy.NEVER, run_policy=RunPolicy(backoff_limit=0))
    await cluster.submit(with_policy(body, {"rules": [{"action": "Ignore", "onReasons": ["Evicted"]}]}))
    await cluster.run_all()
    before = await uids(cluster)
    await cluster.api.patch(PODS, "ns", "toy-worker-1", {"status": {"phase": "Failed", "reason": "Evicted"}})
    await cluster.step()
    after = await uids(cluster)
    assert after["toy-worker-1"] != before["toy-worker-1"], "the evicted pod is replaced"
    assert after["toy-worker-0"] == before["toy-worker-0"], "its peers stay"
    assert not await cluster.is_true("Failed"), "neither Never nor backoffLimit 0 fail the job"
    assert (await ledger(cluster))["restarts"] == 0
    await cluster.run_all()
    assert await cluster.is_true("Running")
    assert (await cluster.job())["status"]["replicaStatuses"]["Worker"]["restarts"] == 1


async def test_an_ignored_container_restart_is_not_charged_but_an_unmatched_one_is(cluster: Cluster) -> None:
    body = toy_job(workers=1, restart_policy=RestartPolicy.ON_FAILURE, run_policy=RunPolicy(backoff_limit=0))
    await cluster.submit(with_policy(body, {"rules": [{"action": "Ignore", "onExitCodes": [143]}]}))
    await cluster.run_all()
    uid = (await uids(cluster))["toy-worker-0"]
    await restart_in_place(cluster, "toy-worker-0", 143)
    assert not await cluster.is_true("Failed"), "an ignored restart in place is not charged to backoffLimit 0"
    assert (await uids(cluster))["toy-worker-0"] == uid, "the pod restarted in place is kept"
    assert (await ledger(cluster))["gang"]["ignored"] == 1
    status = {
        "containerStatuses": [
            {
                "name": "toy",
                "restartCount": 2,
                "state": {"running": {}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
            }
        ]
    }
    await cluster.api.patch(PODS, "ns", "toy-worker-0", {"status": status})
    await cluster.step()
    failed = await cluster.condition("Failed")
    assert failed is not None and "backoff limit" in failed["message"], "no rule: backoffLimit as always"


async def test_fail_job_fails_at_once_naming_the_rule(cluster: Cluster) -> None:
    body = toy_job(workers=2, restart_policy=RestartPolicy.ON_FAILURE)
    policy = {
        "rules": [RESTART_ON_KILL, {"action": "FailJob", "replicaTypes": ["Worker"], "onExitCodes": [3]}]
    }
    await cluster.submit(with_policy(body, policy))
    await cluster.run_all()
    await restart_in_place(cluster, "toy-worker-0", 3)
    failed = await cluster.condition("Failed")
    assert failed is not None and failed["reason"] == "ToyJobFailedByPolicy"
    assert (
        "failure policy rule 1 (FailJob): pod toy-worker-0 (Worker) restarted its container, exit code 3"
        in (failed["message"])
    )
    assert not any(p.get("status", {}).get("phase") == "Running" for p in (await cluster.pods()).values())


async def test_the_gang_restart_limit_holds_across_an_operator_restart(cluster: Cluster) -> None:
    body = toy_job(workers=2, restart_policy=RestartPolicy.ON_FAILURE)
    await cluster.submit(with_policy(body, {"maxGangRestarts": 1, "rules": [RESTART_ON_KILL]}))
    await cluster.run_all()
    await restart_in_place(cluster, "toy-worker-0", 137)
    assert not await cluster.is_true("Failed")
    await cluster.restart_operator()
    await cluster.run_all()
    await restart_in_place(cluster, "toy-worker-1", 137)
    failed = await cluster.condition("Failed")
    assert failed is not None and failed["reason"] == "ToyJobGangRestartLimitExceeded"
    assert "the gang was restarted 1 times, maxGangRestarts is 1" in failed["message"]


async def test_a_gang_restart_whose_deletes_fail_is_counted_once_across_an_operator_restart(
    cluster: Cluster,
) -> None:
    body = toy_job(workers=2, restart_policy=RestartPolicy.NEVER)
    await cluster.submit(with_policy(body, {"maxGangRestarts": 1, "rules": [RESTART_ON_KILL]}))
    await cluster.run_all()
    before = await uids(cluster)
    # deletes keep failing for longer than the retries of the first operator's reconciles last
    cluster.api.fail("delete", ServerError("etcd timeout", reason="InternalError"), resource=PODS, times=8)
    await cluster.set_phase("toy-worker-0", "Failed", exit_code=137)
    assert sorted((await ledger(cluster))["gang"]["draining"]) == sorted(before.values()), (
        "the gang restart is in the ledger before any delete"
    )
    assert await uids(cluster) == before
    await cluster.restart_operator()
    await cluster.step(10)
    assert not set((await uids(cluster)).values()) & set(before.values()), "the new operator finished it"
    assert (await ledger(cluster))["gang"]["restarts"] == 1, "one gang restart, however many tries"
    assert not await cluster.is_true("Failed"), "maxGangRestarts 1 is not exceeded"


async def running_with_progress_deadline(cluster: Cluster, deadline: int) -> None:
    """A running job of two workers with `progressDeadlineSeconds`, whose trainer reported progress now."""
    body = toy_job(workers=2, restart_policy=RestartPolicy.ON_FAILURE)
    await cluster.submit(with_policy(body, {"progressDeadlineSeconds": deadline}))
    await cluster.run_all()
    reported = cluster.clock.now().replace(microsecond=0).isoformat().replace("+00:00", "Z")
    trainer = {"trainerStatus": {"progressPercentage": 40, "lastUpdatedTime": reported}}
    await cluster.api.patch(TOY, "ns", "toy", {"status": trainer}, subresource="status")


async def test_a_stalled_gang_restarts_after_the_progress_deadline(cluster: Cluster) -> None:
    await running_with_progress_deadline(cluster, 120)
    before = await uids(cluster)
    await cluster.step(100)
    assert await uids(cluster) == before, "within the deadline nothing happens"
    await cluster.step(25)
    assert not set((await uids(cluster)).values()) & set(before.values()), "the whole gang was recreated"
    restarting = await cluster.condition("Restarting")
    assert restarting is not None and "training made no progress" in restarting["message"]
    assert cluster.op.counter("kubetrain_gang_restarts", reason="ProgressStalled") == 1
    # the deadline counts again from the gang restart: the next one comes 120 s later, not at once
    await cluster.run_all()
    await cluster.step(100)
    assert cluster.op.counter("kubetrain_gang_restarts", reason="ProgressStalled") == 1
    await cluster.step(25)
    assert cluster.op.counter("kubetrain_gang_restarts", reason="ProgressStalled") == 2


async def test_the_progress_deadline_counts_from_the_recreated_gang_not_from_the_restart(
    cluster: Cluster,
) -> None:
    """A stopped rank's pod takes the kubelet's grace period to go; the gang the restart makes afterwards
    gets the whole deadline to start and report, instead of being restarted again as it starts."""
    await running_with_progress_deadline(cluster, 120)
    slow = sorted(await cluster.pods())[-1]
    await cluster.api.patch(PODS, "ns", slow, {"metadata": {"finalizers": [SLOW_KILL]}})
    await cluster.step(125)
    assert cluster.op.counter("kubetrain_gang_restarts", reason="ProgressStalled") == 1
    await cluster.step(60)
    assert (await ledger(cluster))["gang"]["draining"], "the stopped rank's pod is still going"
    await cluster.api.patch(PODS, "ns", slow, {"metadata": {"finalizers": None}})
    await cluster.step(1)
    await cluster.run_all()
    await cluster.step(100)
    assert cluster.op.counter("kubetrain_gang_restarts", reason="ProgressStalled") == 1, (
        "the new gang was restarted before its deadline, counted from the restart's start"
    )
    await cluster.step(25)
    assert cluster.op.counter("kubetrain_gang_restarts", reason="ProgressStalled") == 2


async def test_a_bad_policy_fails_the_job_naming_the_field_and_the_fix(cluster: Cluster) -> None:
    policy = {"rules": [{"action": "Restart", "replicaTypes": ["Worker"]}]}
    await cluster.submit(with_policy(toy_job(workers=1), policy))
    failed = await cluster.condition("Failed")
    assert failed is not None and failed["reason"] == "ToyJobFailedValidation"
    field = f"metadata.annotations[{FAILURE_POLICY_ANNOTATION}].rules[0].action"
    assert field in failed["message"] and "RestartGang" in failed["message"]
    assert (await cluster.pods()) == {}
    assert "ToyJobFailedValidation" in cluster.op.events.reasons()
