"""A killed rank's gang resumes from its checkpoint under `kubetrain run --local`, and ends exactly where an
uninterrupted run ends.

Each case runs an example file as it is (its failure policy restarts the gang, its trainer checkpoints to
the claim the local runner gives the run) twice at once: once untouched, and once with one rank SIGKILLed
as soon as any rank has started epoch K, which it signals with its `kubetrain-train` line (rank 0 saved
epoch K's checkpoint before that step). Then:
- the interrupted run Succeeds after a gang restart, every rank resumed from the same epoch: the newest
  checkpoint, so never one older than an epoch any rank had begun before the kill (K at least; a later
  one when the ranks went on until the kill reached them: on a loaded machine the MPI example's short
  epochs ran into epoch K+1 before the killed agent's ranks were gone);
- its final accuracy and weights digest are the uninterrupted run's, and every rank's digest is the same;
- fewer epochs were trained twice (begun before the kill and again after it) than the run completed.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubetrain.runtimes.examples.common import TRAIN_PREFIX

from .test_local_examples import EXAMPLES, finish, job_of, kill_when, kubetrain_run, results

pytestmark = pytest.mark.runtime

TIMEOUT = 400
TRAIN = re.compile(r"^\[pod/([^/]+)/[^\]]+\] " + re.escape(TRAIN_PREFIX) + r"(\{.*\})$")


@dataclass(frozen=True)
class Case:
    example: str
    victim: str
    """The pod whose main process is killed: a rank that is not rank 0."""
    ranks: int
    epochs: int
    kill_at: int
    first: tuple[str, ...] = ()
    """Pods whose failure the gang restart may name besides the victim: the MPI launcher's mpirun fails
    when a worker's agent dies, and which of the two the operator sees first is a race."""


CASES = {
    "pytorch-ddp": Case("pytorch/pytorch-ddp.yaml", "pytorch-ddp-worker-1", ranks=4, epochs=6, kill_at=3),
    "tf-multiworker": Case(
        "tensorflow/tf-multiworker-mirrored.yaml", "tf-multiworker-worker-1", ranks=4, epochs=3, kill_at=2
    ),
    # the ranks run under the launcher's mpirun: the victim is a worker pod's remote-shell agent, and the
    # ranks it started with it
    "mpi-allreduce": Case(
        "mpi/mpi-allreduce-openmpi.yaml",
        "mpi-allreduce-worker-0",
        ranks=3,
        epochs=10,
        kill_at=5,
        first=("mpi-allreduce-launcher-0",),
    ),
}


def train_lines(output: str) -> list[dict[str, Any]]:
    return [json.loads(m.group(2)) for line in output.splitlines() if (m := TRAIN.match(line))]


def kill_at_epoch(proc: subprocess.Popen[str], pod: str, epoch: int) -> tuple[str, float]:
    """Read the run's output until a rank signals it trains `epoch`, then SIGKILL `pod`'s process; the
    output so far and the time of the kill (after the signalling line's own time)."""
    killed_at = []

    def reached(line: str) -> bool:
        train = train_lines(line)
        killed_at.append(time.time())
        return bool(train) and train[0]["epoch"] >= epoch

    return kill_when(proc, pod, reached, deadline=TIMEOUT), killed_at[-1]


def succeeded(path: Path, output: str) -> None:
    kind, namespace, name = job_of(path)
    last = output.rstrip().splitlines()[-1]
    assert last.startswith(f"{kind} {namespace}/{name} Succeeded ({kind}Succeeded): "), output[-6000:]


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_killed_ranks_gang_resumes_and_ends_as_an_uninterrupted_run(name: str, tmp_path: Path) -> None:
    case, path = CASES[name], EXAMPLES / CASES[name].example
    (tmp_path / "whole").mkdir()
    (tmp_path / "killed").mkdir()
    whole = kubetrain_run(path, tmp_path / "whole", timeout=TIMEOUT)
    killed = kubetrain_run(path, tmp_path / "killed", timeout=TIMEOUT)
    seen, killed_at = kill_at_epoch(killed, case.victim, case.kill_at)
    output = seen + finish(killed, TIMEOUT)
    reference = finish(whole, TIMEOUT)
    succeeded(path, reference)
    succeeded(path, output)
    named = "|".join(re.escape(pod) for pod in (case.victim, *case.first))
    restarts = [ln for ln in output.splitlines() if "GangRestart" in ln]
    first_restart = re.search(rf"GangRestart: gang restart 1 of 3: pod ({named})\b", output)
    assert first_restart, (restarts, output[-6000:])

    expected = {(r["accuracy"], r["weights_sha256"], r["resumed_from"]) for r in results(reference)}
    assert len(results(reference)) == case.ranks and len(expected) == 1, results(reference)
    ((accuracy, digest, resumed_from),) = expected
    assert resumed_from is None
    final = {r["rank"]: r for r in results(output)}  # a rank's last line: its restarted incarnation's
    assert sorted(final) == list(range(case.ranks)), output[-6000:]
    for r in final.values():
        assert (r["accuracy"], r["weights_sha256"]) == (accuracy, digest), (r, expected)
    (resumed,) = {r["resumed_from"] for r in final.values()}  # the same checkpoint for every rank
    assert resumed is not None, final
    assert all(r["epochs_trained"] == case.epochs - resumed for r in final.values()), final

    lines = train_lines(output)
    before = {t["epoch"] for t in lines if t["time"] < killed_at}
    after = {t["epoch"] for t in lines if t["time"] > killed_at}
    # every epoch begun before the kill had its checkpoint saved first (rank 0 saves before the step)
    assert max(before) >= case.kill_at and resumed >= max(before), (resumed, before)
    assert set(range(resumed, case.epochs)) <= after <= set(range(case.kill_at, case.epochs)), lines
    twice = before & after
    assert len(twice) < case.epochs, (before, after)
    print(f"{name}: killed {case.victim} in epoch {case.kill_at}, resumed from {resumed}; ", end="")
    print(f"epochs trained twice {sorted(twice)}")
