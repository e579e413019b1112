"""The failure policy's rules, its validation, failure detection from pods, and its part of the ledger."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from kubetrain.common.job.facts import PodFacts, PodPhase
from kubetrain.common.job.failurepolicy import (
    FAILURE_POLICY_ANNOTATION,
    Action,
    Failure,
    FailurePolicy,
    policy_errors,
    read_policy,
    rule_for,
)
from kubetrain.common.job.gangfailures import new_failures, stalled
from kubetrain.common.job.gangstate import GangState
from kubetrain.common.job.ledger import LEDGER_ANNOTATION, Ledger

POLICY = FailurePolicy.model_validate(
    {
        "rules": [
            {"action": "FailJob", "replicaTypes": ["Master"], "onExitCodes": [1]},
            {"action": "RestartGang", "onExitCodes": [137, 143]},
            {"action": "Ignore", "onReasons": ["Evicted", "NodeLost"]},
            {"action": "RestartGang", "replicaTypes": ["Worker"]},
        ]
    }
)


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (Failure("Master", "m-0", 1), (0, Action.FAIL_JOB)),
        (Failure("Worker", "w-0", 137, "OOMKilled"), (1, Action.RESTART_GANG)),
        (Failure("Master", "m-0", None, "Evicted"), (2, Action.IGNORE)),
        (Failure("Worker", "w-0", 1), (3, Action.RESTART_GANG)),
        (Failure("Master", "m-0", 2), None),
    ],
)
def test_the_first_rule_whose_selectors_all_match_decides(
    failure: Failure, expected: tuple[int, Action] | None
) -> None:
    matched = rule_for(POLICY, failure)
    assert (None if matched is None else (matched[0], matched[1].action)) == expected


def test_no_annotation_means_no_policy_and_no_errors() -> None:
    assert read_policy({}) is None
    assert policy_errors({"other": "x"}, ["Worker"]) == []


@pytest.mark.parametrize(
    ("value", "path", "words"),
    [
        ("{rules", "", "is not JSON"),
        ('{"rules": [{"action": "Restart"}]}', ".rules[0].action", "RestartGang"),
        ('{"maxGangRestarts": -1}', ".maxGangRestarts", ">= 0"),
        ('{"rules": [{"action": "Ignore", "onExitCodes": [300]}]}', ".rules[0].onExitCodes[0]", "<= 255"),
        (
            '{"rules": [{"action": "Ignore", "replicaTypes": ["Chief"]}]}',
            ".rules[0].replicaTypes[0]",
            "Worker",
        ),
        ('{"rule": []}', ".rule", "unknown field"),
    ],
)
def test_bad_input_names_the_field_and_the_fix(value: str, path: str, words: str) -> None:
    errors = policy_errors({FAILURE_POLICY_ANNOTATION: value}, ["Worker"])
    assert len(errors) == 1
    assert errors[0].path == f"metadata.annotations[{FAILURE_POLICY_ANNOTATION}]{path}"
    assert words in str(errors[0]) and errors[0].fix


def running(name: str, uid: str, **kwargs: object) -> PodFacts:
    return PodFacts(name=name, uid=uid, index=0, phase=PodPhase.RUNNING, **kwargs)  # type: ignore[arg-type]


def test_failures_are_counted_per_pod_and_judged_once() -> None:
    restarted = running("w-0", "u0", restarts=2, last_exit=(137, "OOMKilled"))
    evicted = PodFacts(name="w-1", uid="u1", index=1, phase=PodPhase.FAILED, reason="Evicted")
    lost = running("w-2", "u2", deletion=datetime(2026, 1, 1, tzinfo=UTC))
    found = new_failures({"Worker": [restarted, evicted, lost]}, GangState())
    assert [(f.failure.exit_code, f.failure.reason, f.failure.container_restart, f.total) for f in found] == [
        (137, "OOMKilled", True, 2),
        (None, "Evicted", False, 1),
        (None, "NodeLost", False, 1),
    ]
    judged = GangState().judged("u0", 2, "Worker").judged("u1", 1, "Worker").judged("u2", 1, "Worker")
    assert new_failures({"Worker": [restarted, evicted, lost]}, judged) == []
    assert new_failures({"Worker": [restarted]}, GangState(draining=frozenset({"u0"}))) == []


def test_a_stall_counts_from_the_later_of_the_report_and_the_last_gang_restart() -> None:
    report = datetime(2026, 1, 1, tzinfo=UTC)
    assert not stalled(report, None, 60, report + timedelta(seconds=59))
    assert stalled(report, None, 60, report + timedelta(seconds=60))
    assert not stalled(report, report + timedelta(seconds=30), 60, report + timedelta(seconds=60))
    assert not stalled(None, None, 60, report), "a trainer that never reported is not watched"


def test_the_ledger_keeps_the_gang_state_and_a_gang_restart_forgets_indices() -> None:
    state = GangState().judged("u0", 1, "Worker").ignoring(1).gang_restart(["u0", "u1"], 1_800_000_000)
    ledger = Ledger(restarts=2).with_started("Worker", frozenset({0, 1})).for_gang_restart(state)
    read = Ledger.read({LEDGER_ANNOTATION: ledger.render()})
    assert read == ledger
    assert json.loads(ledger.render())["gang"] == {
        "restarts": 1,
        "ignored": 1,
        "draining": ["u0", "u1"],
        "since": 1_800_000_000,
        "ranks": {"Worker": 1},
    }
    assert read.started == {} and read.restarts == 2
    assert "gang" not in json.loads(Ledger(restarts=1).render()), "no policy, no change to the ledger"
