"""Harness for runtime tests: start replicas as local processes with the env the contract renders.

Every process runs in its own session under a deadline; whatever is still running when a test ends
(or fails) is SIGKILLed with its children, because TensorFlow ignores SIGTERM while it waits for peers.
Output goes to one log file per replica, attached to the report of a failing test.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kubetrain.runtimes.examples.common import RESULT_PREFIX
from kubetrain.testing.process import free_port

# Variables a developer's shell may carry that would leak into the replicas and change what they do.
_STRIP = (
    "TF_CONFIG",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "TORCHELASTIC_RUN_ID",
    "COORDINATOR_ADDRESS",
    "COORDINATOR_PORT",
    "NUM_PROCESSES",
    "PROCESS_ID",
    "WORKER_ADDRS",
    "WORKER_PORT",
)
_STRIP_PREFIXES = ("PET_", "PADDLE_", "OMPI_", "PMI_", "PMIX_", "HYDRA_", "I_MPI_", "MPI4PY_")


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _STRIP and not k.startswith(_STRIP_PREFIXES)}
    env |= {"PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "OMP_NUM_THREADS": "1"}
    return env


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports, outside the kernel's ephemeral range (`testing.process.free_port`)."""
    return [free_port() for _ in range(count)]


@dataclass
class Replica:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    started: float

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def results(self) -> list[dict[str, Any]]:
        return [
            json.loads(line[len(RESULT_PREFIX) :])
            for line in self.output().splitlines()
            if line.startswith(RESULT_PREFIX)
        ]


@dataclass
class Replicas:
    """The processes of one test; `wait` enforces the deadline, teardown kills the rest."""

    log_dir: Path
    started: list[Replica] = field(default_factory=list)

    def start(self, name: str, argv: Sequence[str], env: Mapping[str, str]) -> Replica:
        log = self.log_dir / f"{name}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                list(argv), env=dict(env), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        replica = Replica(name, popen, log, time.monotonic())
        self.started.append(replica)
        return replica

    def python(self, name: str, module: str, args: Sequence[str], env: Mapping[str, str]) -> Replica:
        return self.start(name, [sys.executable, "-m", module, *args], env)

    def wait(self, replicas: Sequence[Replica], deadline_s: float) -> dict[str, int]:
        """Exit codes by name; fails the test (after killing everything) when the deadline passes."""
        end = time.monotonic() + deadline_s
        codes: dict[str, int] = {}
        for replica in replicas:
            try:
                codes[replica.name] = replica.popen.wait(timeout=max(end - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                self.kill_all()
                pytest.fail(f"{replica.name} still ran after {deadline_s:.0f} s:\n{self.tails()}")
        return codes

    def kill_all(self) -> None:
        for replica in self.started:
            if replica.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(replica.popen.pid, signal.SIGKILL)
                replica.popen.wait()

    def tails(self, lines: int = 25) -> str:
        return "\n".join(
            f"--- {r.name} (rc {r.popen.poll()}) ---\n" + "\n".join(r.output().splitlines()[-lines:])
            for r in self.started
        )


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Replicas]:
    group = Replicas(tmp_path)
    yield group
    group.kill_all()


def single_result(replica: Replica) -> dict[str, Any]:
    results = replica.results()
    assert len(results) == 1, (
        f"{replica.name} printed {len(results)} result lines:\n{replica.output()[-4000:]}"
    )
    return results[0]


def assert_trained_in_lock_step(
    results: Sequence[dict[str, Any]], *, world_size: int, accuracy: float
) -> None:
    """Every replica learned (far above the 10% of guessing) and ends with the same weights: the
    gradients really were all-reduced (separately trained shards would end with different weights)."""
    assert len(results) == world_size
    assert sorted(r["rank"] for r in results) == list(range(world_size))
    for r in results:
        assert r["accuracy"] >= accuracy, f"rank {r['rank']} reached only {r['accuracy']}: {r}"
    digests = {r["weights_sha256"] for r in results}
    assert len(digests) == 1, f"replicas ended with different weights: {results}"
