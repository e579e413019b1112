"""In-place gang restarts, the pure parts: the restart rule rendered from a failure policy, a pod read back
(did its rule restart it?), the ledger's part, and which nodes count for `--gang-restart=auto`."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.common.job.facts import PodFacts
from kubetrain.common.job.failurepolicy import FailurePolicy
from kubetrain.common.job.gangstate import GangState
from kubetrain.common.job.inplace import in_place_codes, restart_rule, with_restart_rule
from kubetrain.common.job.restartmode import declares_restart_all

ALL = frozenset(range(1, 256))


def policy(*rules: dict[str, Any]) -> FailurePolicy:
    return FailurePolicy.model_validate({"rules": list(rules)})


@pytest.mark.parametrize(
    ("rules", "rtype", "codes"),
    [
        ([{"action": "RestartGang"}], "Worker", ALL),
        ([{"action": "FailJob", "onExitCodes": [2]}, {"action": "RestartGang"}], "Worker", ALL - {2}),
        # the first rule for a code decides: a later RestartGang does not take 1 back from FailJob
        (
            [
                {"action": "RestartGang", "onExitCodes": [137]},
                {"action": "FailJob", "onExitCodes": [1, 137]},
                {"action": "RestartGang"},
            ],
            "Worker",
            ALL - {1},
        ),
        # a rule for another replica type does not decide this one's codes
        ([{"action": "FailJob", "replicaTypes": ["Master"]}, {"action": "RestartGang"}], "Worker", ALL),
        ([{"action": "RestartGang", "replicaTypes": ["Master"]}], "Worker", frozenset()),
        # reasons a container exit never has (pod or gang reasons) never decide a code
        (
            [{"action": "Ignore", "onReasons": ["Evicted", "NodeLost"]}, {"action": "RestartGang"}],
            "Worker",
            ALL,
        ),
        # a container reason decides by the reason: its codes are left to the operator's recreate
        (
            [
                {"action": "FailJob", "onReasons": ["OOMKilled"]},
                {"action": "RestartGang", "onExitCodes": [1, 3]},
            ],
            "Worker",
            frozenset(),
        ),
        (
            [
                {"action": "Ignore", "onReasons": ["OOMKilled"], "onExitCodes": [137]},
                {"action": "RestartGang", "onExitCodes": [1, 137]},
            ],
            "Worker",
            frozenset({1}),
        ),
        # no rule: the replica's restartPolicy decides, not the gang
        ([{"action": "RestartGang", "onExitCodes": [137, 143]}], "Worker", frozenset({137, 143})),
        ([{"action": "Ignore"}], "Worker", frozenset()),
    ],
)
def test_exactly_the_codes_the_policy_restarts_the_gang_for_restart_in_place(
    rules: list[dict[str, Any]], rtype: str, codes: frozenset[int]
) -> None:
    assert in_place_codes(policy(*rules), rtype) == codes


def test_the_rule_names_the_shorter_list_and_never_code_zero() -> None:
    assert restart_rule(ALL) == {
        "action": "RestartAllContainers",
        "exitCodes": {"operator": "NotIn", "values": [0]},
    }
    assert restart_rule({143, 137}) == {
        "action": "RestartAllContainers",
        "exitCodes": {"operator": "In", "values": [137, 143]},
    }
    assert restart_rule(ALL - {2})["exitCodes"] == {"operator": "NotIn", "values": [0, 2]}  # type: ignore[index]
    assert restart_rule({0}) is None and restart_rule(()) is None


def test_the_container_gets_the_pods_restart_policy_and_the_rule_first() -> None:
    own = {"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}
    container: dict[str, Any] = {"name": "pytorch", "restartPolicyRules": [own]}
    pod = {"spec": {"restartPolicy": "Never", "containers": [container]}}
    rule = restart_rule({137})
    assert rule is not None
    with_restart_rule(pod, container, rule)
    assert container["restartPolicy"] == "Never"
    assert container["restartPolicyRules"] == [rule, own]


def _pod(rules: list[dict[str, Any]], last_code: int | None) -> dict[str, Any]:
    status: dict[str, Any] = {"name": "pytorch", "restartCount": 1, "state": {"running": {}}}
    if last_code is not None:
        status["lastState"] = {"terminated": {"exitCode": last_code, "reason": "Error"}}
    return {
        "metadata": {"name": "p", "uid": "u"},
        "spec": {"containers": [{"name": "sidecar"}, {"name": "pytorch", "restartPolicyRules": rules}]},
        "status": {"phase": "Running", "containerStatuses": [status]},
    }


@pytest.mark.parametrize(
    ("rules", "code", "restarted_all"),
    [
        ([restart_rule({137})], 137, True),
        ([restart_rule({137})], 1, False),
        ([restart_rule(ALL)], 1, True),
        ([restart_rule(ALL)], None, False),
        (
            [{"action": "Restart", "exitCodes": {"operator": "In", "values": [1]}}, restart_rule(ALL)],
            1,
            False,
        ),
        ([], 1, False),
    ],
)
def test_a_pod_shows_whether_its_rule_restarted_it_in_place(
    rules: list[dict[str, Any]], code: int | None, restarted_all: bool
) -> None:
    assert PodFacts.of(_pod(rules, code), main_container="pytorch").restarted_all is restarted_all


def test_the_ledger_keeps_the_mode_and_an_open_gang_restart() -> None:
    state = GangState().decided("in-place").in_place_restart(["b", "a"], 100, 130)
    wire = state.wire()
    assert wire == {
        "restarts": 1,
        "ignored": 0,
        "since": 100,
        "mode": "in-place",
        "waiting": ["a", "b"],
        "until": 130,
    }
    assert GangState.of(wire) == state and state.cascading
    closed = state.restarted(["a"]).restarted(["b"]).closed()
    assert not closed.cascading and closed.wire() == {
        "restarts": 1,
        "ignored": 0,
        "since": 100,
        "mode": "in-place",
    }
    assert GangState().decided("recreate").wire() == {"restarts": 0, "ignored": 0, "mode": "recreate"}


@pytest.mark.parametrize(
    ("status", "counts"),
    [
        (
            {
                "conditions": [{"type": "Ready", "status": "True"}],
                "declaredFeatures": ["RestartAllContainersOnContainerExits"],
            },
            True,
        ),
        (
            {
                "conditions": [{"type": "Ready", "status": "False"}],
                "declaredFeatures": ["RestartAllContainersOnContainerExits"],
            },
            False,
        ),
        (
            {
                "conditions": [{"type": "Ready", "status": "True"}],
                "declaredFeatures": ["ExtendWebSocketsToKubelet"],
            },
            False,
        ),
        ({"conditions": [{"type": "Ready", "status": "True"}]}, False),
    ],
)
def test_auto_counts_only_ready_nodes_that_declare_the_feature(status: dict[str, Any], counts: bool) -> None:
    assert declares_restart_all({"metadata": {"name": "n"}, "status": status}) is counts
