"""Operators of one's own kinds run to a Succeeded job on the test plane, as their authors run them.

Each project's own test (`pytest` in its directory) starts kubetrain's test control plane, applies the
project's CRD, runs the operator with `python -m <package>` and applies its sample job, which must reach
Succeeded: examples/operators/sleepjob (the tutorial's example: the scaffold plus one hook), and a project
fresh from `kubetrain new-operator`, unedited.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kubetrain.cli.scaffold import ProjectNames, write_project

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def run_project_tests(project: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's kubetrain, as if installed
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore"]
    done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{project}:\n{done.stdout[-6000:]}{done.stderr[-3000:]}"
    assert "2 passed" in done.stdout, done.stdout


def test_the_sleepjob_example_runs_to_succeeded() -> None:
    run_project_tests(ROOT / "examples" / "operators" / "sleepjob")


def test_a_fresh_scaffold_runs_to_succeeded_unedited(tmp_path: Path) -> None:
    project = tmp_path / "napjob-operator"
    write_project(ProjectNames("NapJob", "example.dev", ("Master", "Worker")), project)
    run_project_tests(project)
