"""In-place gang restarts over the in-memory API server, on virtual time: one rank's failure and its peers'
restarts in place are one gang restart, no pod is deleted, and the ledger carries it across an operator
restart.

The test plays a 1.36 kubelet: a Ready node declares `RestartAllContainersOnContainerExits`, and a pod whose
main container exits with a code its `RestartAllContainers` rule names stays the same pod, Running, with
`restartCount` one higher and the exit in `lastState`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubetrain.api import RestartPolicy, RunPolicy, TrainerStatus
from kubetrain.common.errors import Forbidden
from kubetrain.common.gangrestart import GangRestartMode
from kubetrain.common.job.failurepolicy import FAILURE_POLICY_ANNOTATION
from kubetrain.common.job.gangcascade import PEER_GRACE_SECONDS
from kubetrain.common.job.ledger import LEDGER_ANNOTATION
from kubetrain.common.kube.resources import NODES, PODS, Obj
from kubetrain.common.progress.coalesce import Coalescer, JobKey
from kubetrain.common.progress.inject import ProgressInjection

from .harness import TOY, Cluster
from .toyjob import toy_job

RESTART_GANG = {"rules": [{"action": "FailJob", "onExitCodes": [2]}, {"action": "RestartGang"}]}
PODS_OF_TOY = ["toy-leader-0", "toy-worker-0", "toy-worker-1", "toy-worker-2"]
KUBELET_STOPPING = "test.kubetrain/kubelet-stopping"


async def declaring_node(cluster: Cluster, *features: str) -> None:
    status = {"conditions": [{"type": "Ready", "status": "True"}], "declaredFeatures": list(features)}
    await cluster.api.create(NODES, None, {"metadata": {"name": "node-1"}, "status": status})


async def submitted(cluster: Cluster, policy: dict[str, Any] = RESTART_GANG) -> dict[str, str]:
    """A running 4-pod ToyJob (OnFailure, backoffLimit 0) with `policy`; its pods' UIDs by name."""
    body = toy_job(workers=3, restart_policy=RestartPolicy.ON_FAILURE, run_policy=RunPolicy(backoff_limit=0))
    body["metadata"]["annotations"] = {FAILURE_POLICY_ANNOTATION: json.dumps(policy)}
    await cluster.submit(body)
    await cluster.run_all()
    return await uids(cluster)


async def uids(cluster: Cluster) -> dict[str, str]:
    return {name: pod["metadata"]["uid"] for name, pod in (await cluster.pods()).items()}


async def gang(cluster: Cluster) -> dict[str, Any]:
    ledger = json.loads((await cluster.job())["metadata"]["annotations"][LEDGER_ANNOTATION])
    return dict(ledger["gang"])


async def restarted_in_place(cluster: Cluster, name: str, exit_code: int, *, ready: bool = True) -> None:
    """What a 1.36 kubelet shows once a `RestartAllContainers` rule restarted the pod's containers."""
    pod = (await cluster.pods())[name]
    assert _rule_codes(pod) is not None, f"{name} has no RestartAllContainers rule"
    count = pod["status"]["containerStatuses"][0].get("restartCount", 0) + 1
    status = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        "containerStatuses": [
            {
                "name": "toy",
                "restartCount": count,
                "state": {"running": {"startedAt": _now(cluster)}},
                "lastState": {"terminated": {"exitCode": exit_code, "reason": "Error"}},
            }
        ],
    }
    await cluster.api.patch(PODS, "ns", name, {"status": status})
    await cluster.step()


def _now(cluster: Cluster) -> str:
    return cluster.clock.now().replace(microsecond=0).isoformat().replace("+00:00", "Z")


async def reported_progress(cluster: Cluster) -> None:
    """The trainer's progress report, as the endpoint writes it, stamped now."""
    trainer = {"trainerStatus": {"progressPercentage": 40, "lastUpdatedTime": _now(cluster)}}
    await cluster.api.patch(TOY, "ns", "toy", {"status": trainer}, subresource="status")


def _rule_codes(pod: Obj) -> dict[str, Any] | None:
    container = pod["spec"]["containers"][0]
    rules = container.get("restartPolicyRules") or []
    return next((r["exitCodes"] for r in rules if r["action"] == "RestartAllContainers"), None)


async def test_pods_get_the_rule_only_where_a_node_declares_the_feature(cluster: Cluster) -> None:
    await submitted(cluster)
    pod = (await cluster.pods())["toy-worker-0"]
    assert _rule_codes(pod) is None and "restartPolicy" not in pod["spec"]["containers"][0]
    assert (await gang(cluster))["mode"] == "recreate"
    assert cluster.api.count("list", NODES) == 1, "the nodes were read to decide"


async def test_one_failure_and_its_peers_restarting_in_place_are_one_gang_restart(cluster: Cluster) -> None:
    await declaring_node(cluster, "RestartAllContainersOnContainerExits")
    before = await submitted(cluster)
    worker = (await cluster.pods())["toy-worker-0"]["spec"]["containers"][0]
    assert worker["restartPolicy"] == "OnFailure"
    assert _rule_codes((await cluster.pods())["toy-worker-0"]) == {"operator": "NotIn", "values": [0, 2]}
    assert (await gang(cluster))["mode"] == "in-place"

    await restarted_in_place(cluster, "toy-worker-1", 137, ready=False)
    restarting = await cluster.condition("Restarting")
    assert restarting is not None and restarting["reason"] == "ToyJobGangRestart"
    assert "all pods restart in place" in restarting["message"]
    for name in ("toy-leader-0", "toy-worker-0", "toy-worker-2"):  # gloo breaks: each peer exits 1
        await restarted_in_place(cluster, name, 1, ready=False)
        assert not await cluster.is_true("Running"), "Restarting holds while the gang restarts"
    for name in await cluster.pods():  # Ready again, their restart counts kept
        ready = {"conditions": [{"type": "Ready", "status": "True"}]}
        await cluster.api.patch(PODS, "ns", name, {"status": ready})
    await cluster.step()
    assert await cluster.is_true("Running"), "the gang runs again"
    assert "until" in await gang(cluster), "the gang restart stays open until its deadline"
    # a peer whose first restart met a rendezvous still breaking fails again: the same gang restart
    await restarted_in_place(cluster, "toy-worker-0", 1)
    await cluster.step(5)
    assert "until" in await gang(cluster)
    await reported_progress(cluster)  # the gang trains again: its restart is over, before the deadline
    await cluster.step()

    assert await uids(cluster) == before, "no pod was deleted or recreated"
    assert cluster.api.count("delete", PODS) == 0
    state = await gang(cluster)
    assert state["restarts"] == 1, "one gang restart, not five"
    assert state["ranks"] == {"Leader": 1, "Worker": 4}
    assert "waiting" not in state and "until" not in state, "the gang restart is over"
    assert cluster.op.counter("kubetrain_gang_restarts", reason="Error") == 1
    ranks = cluster.op.counter("kubetrain_rank_restarts", reason="Error", replica_type="Worker")
    assert (ranks, cluster.op.counter("kubetrain_rank_restarts", reason="Error", replica_type="Leader")) == (
        4,
        1,
    )
    assert cluster.op.events.reasons().count("ToyJobGangRestart") == 1
    assert cluster.op.events.reasons().count("RankFailed") == 5
    assert await cluster.is_true("Running"), "the gang runs again"
    assert not await cluster.is_true("Failed"), "backoffLimit 0 is not charged by the in-place restarts"
    statuses = (await cluster.job())["status"]["replicaStatuses"]
    assert (statuses["Leader"]["restarts"], statuses["Worker"]["restarts"]) == (1, 4)


async def test_the_gang_restart_survives_an_operator_restart_mid_way(cluster: Cluster) -> None:
    await declaring_node(cluster, "RestartAllContainersOnContainerExits")
    before = await submitted(cluster)
    await restarted_in_place(cluster, "toy-worker-1", 137, ready=False)
    await restarted_in_place(cluster, "toy-leader-0", 1, ready=False)
    assert sorted((await gang(cluster))["waiting"]) == sorted(
        before[n] for n in ("toy-worker-0", "toy-worker-2")
    )
    await cluster.restart_operator()
    await restarted_in_place(cluster, "toy-worker-0", 1, ready=False)
    await restarted_in_place(cluster, "toy-worker-2", 1, ready=False)
    await cluster.run_all()
    state = await gang(cluster)
    assert (state["restarts"], state["ranks"]) == (1, {"Leader": 1, "Worker": 3})
    assert await uids(cluster) == before
    assert await cluster.is_true("Running")


@pytest.mark.parametrize("stopping", [False, True], ids=["gone-at-once", "stopping-a-while"])
async def test_a_peer_that_does_not_restart_is_recreated_alone(cluster: Cluster, stopping: bool) -> None:
    await declaring_node(cluster, "RestartAllContainersOnContainerExits")
    before = await submitted(cluster)
    await restarted_in_place(cluster, "toy-worker-1", 137)
    await restarted_in_place(cluster, "toy-leader-0", 1)
    await restarted_in_place(cluster, "toy-worker-0", 1)
    await cluster.step(PEER_GRACE_SECONDS - 5)
    assert await uids(cluster) == before, "within the grace the blocked peer is waited for"
    if stopping:  # a real kubelet keeps the deleted pod Running until its container stopped
        await cluster.api.patch(PODS, "ns", "toy-worker-2", {"metadata": {"finalizers": [KUBELET_STOPPING]}})
    await cluster.step(10)
    if stopping:
        await cluster.step(10)
        assert (await gang(cluster))["restarts"] == 1, "the operator's own deletion is not a lost node"
        told = [e.message for e in cluster.op.events.events]
        assert not [m for m in told if "NodeLost" in m], told
        await cluster.api.patch(PODS, "ns", "toy-worker-2", {"metadata": {"finalizers": None}})
        await cluster.step(5)
    after = await uids(cluster)
    assert after["toy-worker-2"] != before["toy-worker-2"], "the peer that never restarted is recreated"
    assert {n: after[n] for n in PODS_OF_TOY[:3]} == {n: before[n] for n in PODS_OF_TOY[:3]}
    assert "GangRestartPeersRecreated" in cluster.op.events.reasons()
    await cluster.run_all()
    assert await cluster.is_true("Running") and not await cluster.is_true("Failed")
    assert (await gang(cluster))["restarts"] == 1


async def test_a_failure_after_the_gang_restart_is_the_next_one_up_to_the_limit(cluster: Cluster) -> None:
    await cluster.restart_operator(gang_restart=GangRestartMode.IN_PLACE)  # no node read: the flag says so
    await submitted(cluster, {**RESTART_GANG, "maxGangRestarts": 1})
    for name in PODS_OF_TOY[::-1]:
        await restarted_in_place(cluster, name, 137 if name == "toy-worker-2" else 1)
    assert (await gang(cluster))["restarts"] == 1 and await cluster.is_true("Running")
    assert cluster.api.count("list", NODES) == 0
    await cluster.step(PEER_GRACE_SECONDS)  # the gang restart's window is over
    await restarted_in_place(cluster, "toy-worker-0", 137)
    failed = await cluster.condition("Failed")
    assert failed is not None and failed["reason"] == "ToyJobGangRestartLimitExceeded"


async def test_a_peer_failing_again_soon_after_the_gang_came_back_late_is_the_same_gang_restart(
    cluster: Cluster,
) -> None:
    # The peers come back late (a loaded node), and one fails again once the deadline has passed, its
    # rendezvous meeting a rank that restarted after it: the gang ran again only moments before, so that is
    # the same gang restart. A failure once the gang has run again for the grace is the next one.
    await cluster.restart_operator(gang_restart=GangRestartMode.IN_PLACE)
    await submitted(cluster)
    await restarted_in_place(cluster, "toy-worker-2", 137)
    await cluster.step(PEER_GRACE_SECONDS - 10)
    for name in ("toy-leader-0", "toy-worker-0", "toy-worker-1"):
        await restarted_in_place(cluster, name, 1)
    await cluster.step(15)  # past the deadline, 15 s after every rank ran again
    await restarted_in_place(cluster, "toy-leader-0", 1)
    state = await gang(cluster)
    assert (state["restarts"], state["ranks"]) == (1, {"Leader": 2, "Worker": 3}), state
    await cluster.step(PEER_GRACE_SECONDS)
    assert "until" not in await gang(cluster), "over: the gang has run again for the grace"
    await restarted_in_place(cluster, "toy-worker-0", 137)
    assert (await gang(cluster))["restarts"] == 2


async def test_a_report_from_before_the_peers_restarted_does_not_end_it(cluster: Cluster) -> None:
    # Rank 0 finishes the step it was in when a peer died and reports it: the gang does not train again
    # yet, and the peers' restarts that follow belong to the same gang restart.
    await cluster.restart_operator(gang_restart=GangRestartMode.IN_PLACE)
    await submitted(cluster)
    await cluster.step(1)
    await restarted_in_place(cluster, "toy-worker-2", 137, ready=False)
    await cluster.step(1)
    await reported_progress(cluster)
    await cluster.step(1)
    for name in ("toy-leader-0", "toy-worker-0", "toy-worker-1"):
        await cluster.step(1)
        await restarted_in_place(cluster, name, 1)
    state = await gang(cluster)
    assert state["restarts"] == 1, state
    assert state["ranks"] == {"Leader": 1, "Worker": 3}, state
    await cluster.step(2)
    await reported_progress(cluster)  # after every rank runs again: the gang restart is over
    await cluster.step()
    assert "until" not in await gang(cluster)


@pytest.mark.parametrize("report", ["written", "waiting"])
async def test_a_failure_seen_with_the_first_report_since_the_gang_restart_is_the_next_one(
    cluster: Cluster, report: str
) -> None:
    # The gang trains again and its trainer reports; before any reconcile saw the report, a rank is killed
    # again: that reconcile sees both, and the kill is a second gang restart, not part of the first. The
    # report may still wait in the endpoint's coalescer (one status write per job per 10 s).
    coalescer = Coalescer(cluster.api, interval=10.0, clock=cluster.clock)
    injection = ProgressInjection("https://op:8443", reports=coalescer)
    await cluster.restart_operator(gang_restart=GangRestartMode.IN_PLACE, progress=injection)
    before = await submitted(cluster)
    for name in PODS_OF_TOY[::-1]:
        await restarted_in_place(cluster, name, 137 if name == "toy-worker-2" else 1)
    assert (await gang(cluster))["restarts"] == 1
    await cluster.step(5)
    if report == "written":
        await reported_progress(cluster)  # no step: the same reconcile sees the report and the next kill
    else:
        key = JobKey(cluster.op.controller.kind, "ns", "toy")
        coalescer.offer(key, TrainerStatus(progress_percentage=40, last_updated_time=cluster.clock.now()))
    await restarted_in_place(cluster, "toy-worker-2", 137, ready=False)

    state = await gang(cluster)
    assert state["restarts"] == 2, state
    assert cluster.op.events.reasons().count("ToyJobGangRestart") == 2
    assert sorted(state["waiting"]) == sorted(uid for name, uid in before.items() if name != "toy-worker-2")
    assert await uids(cluster) == before


@pytest.mark.parametrize("mode", [GangRestartMode.RECREATE, GangRestartMode.AUTO])
async def test_a_job_keeps_the_mode_it_started_with(cluster: Cluster, mode: GangRestartMode) -> None:
    await declaring_node(cluster, "RestartAllContainersOnContainerExits")
    before = await submitted(cluster)
    await cluster.restart_operator(gang_restart=mode)
    await cluster.api.delete(NODES, None, "node-1")
    await restarted_in_place(cluster, "toy-worker-1", 137)
    assert (await gang(cluster))["mode"] == "in-place"
    assert await uids(cluster) == before, "the running gang still restarts in place"


async def test_an_operator_that_may_not_list_nodes_recreates(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    await declaring_node(cluster, "RestartAllContainersOnContainerExits")
    cluster.api.fail("list", Forbidden('nodes is forbidden: cannot list resource "nodes"'), resource=NODES)
    await submitted(cluster)
    assert (await gang(cluster))["mode"] == "recreate"
    assert _rule_codes((await cluster.pods())["toy-worker-0"]) is None
    assert "gang restarts recreate pods: cannot list nodes" in caplog.text
