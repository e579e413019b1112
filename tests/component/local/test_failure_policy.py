"""The gang failure policy in a local run: the operator's own controller restarts the whole gang when the
local kubelet reports a rank killed by SIGKILL (exit code 137), as it does in a cluster."""

from __future__ import annotations

import json
from pathlib import Path

from kubetrain.common.job.failurepolicy import FAILURE_POLICY_ANNOTATION
from kubetrain.runtimes.local.runner import Outcome

from .conftest import Runner, python, pytorch_job, replica


def killed_on_first_run(flag: Path, runs: Path) -> list[str]:
    """Waits (up to 60 s each time) for the master's first start (`runs`), then kills itself with SIGKILL,
    leaving `flag`; its next run waits until the master started twice, then creates `flag`.done. Killed
    sooner, the master could be recreated before it counted its first start; not waiting on the next run,
    the local kubelet's immediate restart of this container could end the job before the gang restart."""
    return python(
        f"import os, pathlib, signal, time\n"
        f"f, runs = pathlib.Path({str(flag)!r}), pathlib.Path({str(runs)!r})\n"
        f"def started(n):\n"
        f"    t = time.monotonic() + 60\n"
        f"    while time.monotonic() < t:\n"
        f"        if runs.exists() and len(runs.read_text().splitlines()) >= n: return\n"
        f"        time.sleep(0.1)\n"
        f"if f.exists():\n"
        f"    print('second run', flush=True); started(2)\n"
        f"    f.with_suffix('.done').touch(); raise SystemExit(0)\n"
        f"started(1); f.touch(); print('first run', flush=True); os.kill(os.getpid(), signal.SIGKILL)"
    )


def counts_runs_until(done: Path, runs: Path) -> list[str]:
    """Appends a line to `runs` per start, then succeeds once `done` exists."""
    return python(
        f"import pathlib, time\n"
        f"with open({str(runs)!r}, 'a') as r: r.write('run\\n')\n"
        f"print('master started', flush=True)\n"
        f"while not pathlib.Path({str(done)!r}).exists(): time.sleep(0.1)"
    )


async def test_a_killed_rank_restarts_the_whole_local_gang(runner: Runner, tmp_path: Path) -> None:
    flag, runs = tmp_path / "killed-once", tmp_path / "master-runs"
    job = pytorch_job(
        "gang",
        {
            "Master": replica(counts_runs_until(flag.with_suffix(".done"), runs)),
            "Worker": replica(killed_on_first_run(flag, runs)),
        },
        run_policy={"backoffLimit": 0},
    )
    policy = {"rules": [{"action": "RestartGang", "onExitCodes": [137]}]}
    job["metadata"]["annotations"] = {FAILURE_POLICY_ANNOTATION: json.dumps(policy)}
    ran = await runner.run(job)
    assert ran.result.outcome is Outcome.SUCCEEDED, ran.output
    assert ran.lines("gang-worker-0") == ["first run", "second run"]
    assert runs.read_text().splitlines() == ["run", "run"], "the master, not killed, was restarted with it"
    assert (
        "Warning PyTorchJobGangRestart: gang restart 1 of 3: pod gang-worker-0 (Worker) failed" in ran.output
    )
