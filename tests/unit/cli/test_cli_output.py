"""What the CLI prints and how it reads its words: ages, tables, describe, progress, durations, targets."""

from __future__ import annotations

import argparse
import io
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes.client import CoreV1Event, V1ObjectMeta, V1ObjectReference, V1Pod, V1PodSpec, V1PodStatus

from kubetrain.api import AnyJob
from kubetrain.cli.describe import describe_job
from kubetrain.cli.jobargs import Target, parse_target
from kubetrain.cli.logs import format_logs
from kubetrain.cli.output import human_age, table
from kubetrain.cli.progressview import JobBars, progress_line
from kubetrain.cli.wait import parse_duration
from kubetrain.client.kinds import UnknownKindError

Make = Callable[..., AnyJob]
NOW = datetime(2026, 1, 1, 1, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-5, "0s"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (150, "2m30s"),
        (599, "9m59s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 300, "3h5m"),
        (8 * 3600, "8h"),
        (47 * 3600, "47h"),
        (48 * 3600, "2d"),
        (49 * 3600, "2d1h"),
        (8 * 86400, "8d"),
        (729 * 86400, "729d"),
        (730 * 86400, "2y"),
        (731 * 86400, "2y1d"),
        (8 * 365 * 86400, "8y"),
    ],
)
def test_ages_read_like_kubectls(seconds: int, shown: str) -> None:
    assert human_age(seconds) == shown


def test_table_columns_are_aligned_three_spaces_apart_without_trailing_blanks() -> None:
    text = table(["NAME", "KIND"], [["a-long-name", "TFJob"], ["b", "MPIJob"]])
    assert text.splitlines() == ["NAME          KIND", "a-long-name   TFJob", "b             MPIJob"]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90), ("30s", 30), ("10m", 600), ("1h30m", 5400), ("1.5h", 5400), ("2m5s", 125)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "ten", "10x", "m", "1h-5m"])
def test_bad_durations_say_how_to_write_one(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="write it like 90s, 10m or 1h30m"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("words", "target"),
    [
        ([], Target(None, ())),
        (["mnist"], Target(None, ("mnist",))),
        (["tfjobs"], Target("TFJob", ())),
        (["PyTorchJob", "a"], Target("PyTorchJob", ("a",))),
        (["mpijob/a"], Target("MPIJob", ("a",))),
        (["kubeflow"], Target(None, ())),
        (["tfjob", "a", "b"], Target("TFJob", ("a", "b"))),
    ],
)
def test_kind_and_name_words(words: list[str], target: Target) -> None:
    assert parse_target(words) == target


def test_an_unknown_kind_suggests_the_closest() -> None:
    with pytest.raises(UnknownKindError, match="did you mean 'mpijobs'"):
        parse_target(["mpijbos", "a"])
    with pytest.raises(UnknownKindError, match="did you mean 'tfjob'"):
        parse_target(["tfjbo/a"])


def test_log_prefixes_follow_the_pod_names() -> None:
    logs = {"j-launcher": "hi\n", "j-worker-10": "a\nb"}
    assert format_logs(logs, "j", prefix=True) == "[launcher] hi\n[worker-10] a\n[worker-10] b\n"
    assert format_logs(logs, "j", prefix=False) == "hi\na\nb"


def _running(job: Make) -> AnyJob:
    status = {
        "conditions": [
            {
                "type": "Created",
                "status": "True",
                "reason": "TFJobCreated",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            },
            {
                "type": "Running",
                "status": "True",
                "reason": "TFJobRunning",
                "message": "TFJob a is running.",
                "lastTransitionTime": "2026-01-01T00:55:00Z",
            },
        ],
        "replicaStatuses": {"PS": {"active": 1}, "Worker": {"active": 1, "failed": 1}},
        "startTime": "2026-01-01T00:01:00Z",
    }
    return job("TFJob", "a", status=status)


def test_describe_shows_replicas_conditions_pods_and_events(job: Make) -> None:
    pod = V1Pod(
        metadata=V1ObjectMeta(name="a-worker-0", creation_timestamp=NOW - timedelta(minutes=3)),
        spec=V1PodSpec(containers=[], node_name="node-1"),
        status=V1PodStatus(phase="Running"),
    )
    event = CoreV1Event(
        metadata=V1ObjectMeta(name="e"),
        involved_object=V1ObjectReference(name="a"),
        type="Warning",
        reason="ExitedWithCode",
        message="Pod: default.a-worker-1 exited with code 137",
        count=3,
        last_timestamp=NOW - timedelta(seconds=40),
    )
    text = describe_job(_running(job), [pod], [event], now=NOW)
    assert "State:      Running" in text
    assert "Started:    2026-01-01T00:01:00Z" in text
    assert "Created:    2026-01-01T00:00:00Z (60m ago)" in text
    replicas = text[text.index("Replicas:") : text.index("Conditions:")].splitlines()
    assert replicas[2].split() == ["PS", "1", "1", "0", "0", "Never", "img:1"]
    assert replicas[3].split() == ["Worker", "2", "1", "0", "1", "Never", "img:1"]
    assert "Running   True     TFJobRunning   5m    TFJob a is running." in text
    assert "a-worker-0   Running   node-1   3m" in text
    assert "Warning   ExitedWithCode   40s   Pod: default.a-worker-1 exited with code 137 (x3)" in text


def test_describe_still_shows_the_job_when_pods_may_not_be_listed(job: Make) -> None:
    text = describe_job(job("MPIJob", "m"), "(cannot list: forbidden)", [], now=NOW)
    assert "Pods: (cannot list: forbidden)" in text
    assert "Conditions: <none> (the operator has not reported on this job yet)" in text


def test_progress_line_names_state_reason_and_pods(job: Make) -> None:
    line = progress_line(_running(job))
    assert line == "TFJob a: Running (TFJobRunning); PS 1 active; Worker 1 active, 1 failed"


def _reporting(job: Make, percent: int) -> AnyJob:
    running = _running(job)
    trainer = {
        "progressPercentage": percent,
        "estimatedRemainingSeconds": 310,
        "metrics": [{"name": "loss", "value": "0.0412"}],
    }
    assert running.status is not None
    status = running.status.to_wire()
    return job("TFJob", "a", status={**status, "trainerStatus": trainer})


def test_progress_line_adds_the_trainers_report(job: Make) -> None:
    line = progress_line(_reporting(job, 42))
    assert line.endswith("; Worker 1 active, 1 failed; 42%, ETA 5m10s, loss=0.0412")


def test_plain_progress_prints_one_line_per_change_only(job: Make) -> None:
    ticks = iter([0.0, 5.0, 65.0, 70.0])
    stream = io.StringIO()
    bars = JobBars(stream, tty=False, clock=lambda: next(ticks))
    bars(job("TFJob", "a"))
    bars(_reporting(job, 42))
    bars(_reporting(job, 42))  # the same again: nothing printed
    bars.close()
    assert stream.getvalue().splitlines() == [
        "[5s] TFJob a: waiting for the operator",
        "[65s] TFJob a: Running (TFJobRunning); PS 1 active; Worker 1 active, 1 failed; 42%, ETA 5m10s, "
        "loss=0.0412",
    ]


def test_progress_on_a_terminal_draws_a_bar_per_job_with_eta_and_loss(job: Make) -> None:
    stream = io.StringIO()
    bars = JobBars(stream, tty=True)
    bars(_reporting(job, 42))
    bars(job("PyTorchJob", "b"))
    bars.close()
    screen = stream.getvalue()
    assert "\x1b[" in screen  # drawn for a terminal
    last = screen[screen.rindex("TFJob a") :]
    assert "Running" in last and " 42%" in last and "ETA 5m10s" in last and "loss=0.0412" in last
    assert "PyTorchJob b" in screen and "  0%" in screen
