"""Small values: pod facts read from raw pods, the ledger annotation, merge diffs, the default verdict."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kubetrain.common.job.compare import contains, merge_diff
from kubetrain.common.job.facts import PodFacts, PodPhase, ReplicaCounts
from kubetrain.common.job.ledger import LEDGER_ANNOTATION, Ledger, Unwritten, parse_ranges, render_ranges
from kubetrain.common.job.limits import MAX_REPLICAS
from kubetrain.common.job.verdict import JobState, default_verdict


def test_pod_facts_read_the_main_containers_exit_code_and_all_restarts() -> None:
    pod = {
        "metadata": {
            "name": "job-worker-2",
            "uid": "u",
            "deletionTimestamp": "2025-01-01T00:00:30Z",
            "labels": {"training.kubeflow.org/replica-index": "2"},
        },
        "spec": {"containers": [{"name": "sidecar"}, {"name": "tensorflow"}]},
        "status": {
            "phase": "Failed",
            "reason": "Evicted",
            "conditions": [
                {"type": "Ready", "status": "False"},
                {"type": "DisruptionTarget", "status": "True"},
            ],
            "initContainerStatuses": [{"name": "init", "restartCount": 1}],
            "containerStatuses": [
                {"name": "sidecar", "restartCount": 2, "state": {"terminated": {"exitCode": 0}}},
                {"name": "tensorflow", "restartCount": 3, "state": {"terminated": {"exitCode": 137}}},
            ],
        },
    }
    facts = PodFacts.of(pod, main_container="tensorflow")
    assert facts == PodFacts(
        name="job-worker-2", uid="u", index=2, phase=PodPhase.FAILED, exit_code=137, reason="Evicted",
        ready=False, restarts=6, deletion=datetime(2025, 1, 1, 0, 0, 30, tzinfo=UTC), disrupted=True,
    )  # fmt: skip
    assert PodFacts.of(pod, main_container=None).exit_code == 0, "without a default name: the first container"


def test_pod_facts_of_a_fresh_pod() -> None:
    facts = PodFacts.of({"metadata": {"name": "p"}, "status": {"phase": "Weird"}})
    assert (facts.phase, facts.exit_code, facts.index, facts.deleting) == (
        PodPhase.PENDING,
        None,
        None,
        False,
    )


def test_ledger_round_trip_and_tolerance() -> None:
    ledger = Ledger().with_restarts(2).with_succeeded("Worker", frozenset({3, 1}))
    text = ledger.render()
    assert text == '{"restarts":2,"succeeded":{"Worker":"1,3"}}'
    assert Ledger.read({LEDGER_ANNOTATION: text}) == ledger
    assert Ledger.read({LEDGER_ANNOTATION: text}).without_succeeded().render() == '{"restarts":2}'
    for garbage in ("not json", '{"restarts": "x"}', '{"succeeded": {"Worker": 3}}', "[]"):
        assert Ledger.read({LEDGER_ANNOTATION: garbage}) == Ledger()
    older = Ledger.read({LEDGER_ANNOTATION: '{"restarts":1,"succeeded":{"Worker":[1,3]}}'})
    assert older.indices("Worker") == frozenset({1, 3}), "the list form written by earlier versions"


def test_ledger_keeps_counted_pods_started_indices_and_blind_objects() -> None:
    ledger = (
        Ledger()
        .with_restarts(1)
        .with_counted(["uid-b", "uid-a"])
        .with_started("Worker", frozenset(range(10_000)))
        .with_created("secrets/pi-ssh")
    )
    text = ledger.render()
    assert text == (
        '{"counted":["uid-a","uid-b"],"created":["secrets/pi-ssh"],"restarts":1,"started":{"Worker":"0-9999"}}'
    ), "10,000 started indices take a dozen bytes of the annotation, not 50 KB"
    assert Ledger.read({LEDGER_ANNOTATION: text}) == ledger
    suspended = ledger.without_succeeded()
    assert (suspended.started, suspended.counted, suspended.created) == ({}, frozenset(), ledger.created)


def test_ranges_round_trip_and_a_huge_range_is_clipped() -> None:
    assert render_ranges({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    assert parse_ranges("0-2,5,7-8") == frozenset({0, 1, 2, 5, 7, 8})
    # A hand-edited annotation may not make the operator allocate two billion integers.
    huge = Ledger.read({LEDGER_ANNOTATION: '{"started":{"Worker":"0-2147483647"}}'})
    assert len(huge.started_indices("Worker")) == MAX_REPLICAS


def test_merge_diff_is_the_minimal_patch() -> None:
    old = {"a": 1, "b": {"c": 2, "d": 3}, "gone": True, "list": [1]}
    new = {"a": 1, "b": {"c": 2, "d": 4}, "list": [1, 2], "added": "x"}
    assert merge_diff(old, new) == {"gone": None, "b": {"d": 4}, "list": [1, 2], "added": "x"}
    assert merge_diff(new, new) == {}


@pytest.mark.parametrize(
    ("observed", "desired", "result"),
    [
        ({"a": 1, "server": "default"}, {"a": 1}, True),
        ({"a": 1}, {"a": 2}, False),
        ({"l": [{"x": 1, "y": 2}]}, {"l": [{"x": 1}]}, True),
        ({"l": [{"x": 1}, {"x": 2}]}, {"l": [{"x": 1}]}, False),
        ({}, {"a": None}, False),
    ],
)
def test_contains(observed: dict[str, Any], desired: dict[str, Any], result: bool) -> None:
    assert contains(observed, desired) is result


@pytest.mark.parametrize(
    ("counts", "state"),
    [
        ({"W": ReplicaCounts(2)}, JobState.PENDING),
        ({"W": ReplicaCounts(2, active=1, pending=1)}, JobState.RUNNING),
        ({"W": ReplicaCounts(2, succeeded=2), "P": ReplicaCounts(1, succeeded=1)}, JobState.SUCCEEDED),
        ({"W": ReplicaCounts(2, succeeded=2), "P": ReplicaCounts(1, active=1)}, JobState.RUNNING),
        ({"W": ReplicaCounts(2, active=1, failed=1)}, JobState.FAILED),
        ({"W": ReplicaCounts(0)}, JobState.PENDING),
    ],
)
def test_default_verdict(counts: dict[str, ReplicaCounts], state: JobState) -> None:
    assert default_verdict(counts, ["P", "W"]).state is state


def test_default_verdict_names_the_first_failed_type_in_order() -> None:
    verdict = default_verdict({"W": ReplicaCounts(3, failed=2), "P": ReplicaCounts(1, failed=1)}, ["P", "W"])
    assert (verdict.replica_type, verdict.failed, verdict.reason_suffix) == ("P", 1, "Failed")


def test_unwritten_creations_are_per_job_and_forgotten_with_a_new_uid() -> None:
    memory = Unwritten()
    memory.add(("ns", "pi"), "uid-1", ["secrets/pi-ssh"])
    memory.add(("ns", "pi"), "uid-1", ["configmaps/x"])
    assert memory.get(("ns", "pi"), "uid-1") == {"secrets/pi-ssh", "configmaps/x"}
    assert memory.get(("ns", "pi"), "uid-2") == frozenset(), "a job created again under the same name"
    assert memory.get(("ns", "other"), "uid-1") == frozenset()
    memory.forget(("ns", "pi"))
    assert memory.get(("ns", "pi"), "uid-1") == frozenset() and len(memory) == 0
