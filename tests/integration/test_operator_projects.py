"""Operators of one's own kinds run on the test plane, as their authors run them, and say how a job ended.

Each project's own test (`pytest` in its directory) starts kubetrain's test control plane, applies the
project's CRD, runs the operator with `python -m <package>` and applies its sample job:
examples/operators/sleepjob (the tutorial's example: the scaffold plus one hook and one CEL rule, which the
API server enforces at `kubectl apply`), and a project fresh from `kubetrain new-operator`, unedited, whose
sample must reach Succeeded. A fresh project whose sample fails must say so as soon as the job has
Failed, with the condition, not after waiting out its timeout for a Succeeded that cannot come.

The projects run in kubetrain's install as their README gives it (this checkout's editable install: no
PYTHONPATH), each under a time limit; the outcome is pytest's exit code and the counts of its summary line.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from kubetrain.cli.scaffold import ProjectNames, write_project

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PROJECT_TIMEOUT = 300.0
"""Seconds a project's whole test run may take: a control plane's start, an operator, a job or two."""
_SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s(?: \([\d:]+\))?\s*=*$")


@dataclass(frozen=True)
class Run:
    """A project's test run: pytest's exit code, the counts of its summary line, and its output."""

    code: int
    counts: dict[str, int]
    output: str


def run_project_tests(project: Path) -> Run:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # kubetrain as installed
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore", "-s"]
    try:
        done = subprocess.run(
            command,
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=PROJECT_TIMEOUT,
        )
    except subprocess.TimeoutExpired as err:
        raise AssertionError(f"{project}: pytest ran past {PROJECT_TIMEOUT:g} s:\n{err.stdout!r}") from err
    return Run(done.returncode, summary_counts(done.stdout), done.stdout + done.stderr)


def summary_counts(stdout: str) -> dict[str, int]:
    """`{"passed": 2, "failed": 1}` from pytest's last summary line (`2 passed, 1 failed in 9.1s`)."""
    lines = [m.group(1) for line in stdout.splitlines() if (m := _SUMMARY.match(line.strip()))]
    assert lines, f"no pytest summary line in:\n{stdout[-3000:]}"
    return {word: int(n) for n, word in (part.split(" ") for part in lines[-1].split(", "))}


def test_the_sleepjob_example_runs_to_succeeded_and_refuses_a_bad_job() -> None:
    run = run_project_tests(ROOT / "examples" / "operators" / "sleepjob")
    assert (run.code, run.counts) == (0, {"passed": 3}), run.output[-6000:]
    assert "sleepjob-sample: Succeeded (SleepJobSucceeded)" in run.output


def test_a_fresh_scaffold_runs_to_succeeded_unedited(tmp_path: Path) -> None:
    project = tmp_path / "napjob-operator"
    write_project(ProjectNames("NapJob", "example.dev", ("Master", "Worker")), project)
    run = run_project_tests(project)
    assert (run.code, run.counts) == (0, {"passed": 2}), run.output[-6000:]
    assert "napjob-sample: Succeeded (NapJobSucceeded)" in run.output


def test_a_fresh_scaffold_reports_a_failed_job_at_once(tmp_path: Path) -> None:
    project = tmp_path / "napjob-operator"
    write_project(ProjectNames("NapJob", "example.dev", ("Worker",)), project)
    sample = project / "examples" / "napjob.yaml"
    text = sample.read_text()
    assert "sim.kubetrain.dev/run-for: 1s" in text
    sample.write_text(text.replace("run-for: 1s", "outcome: Failed"))  # kwok fails the pod at once
    run = run_project_tests(project)
    assert (run.code, run.counts) == (1, {"failed": 1, "passed": 1}), run.output[-6000:]
    assert "napjob-sample: Failed (NapJobFailed)" in run.output, run.output[-6000:]
    assert "the job finished Failed: NapJob" in run.output, "the failure names the condition's message"
    assert "neither Succeeded nor Failed within" not in run.output
