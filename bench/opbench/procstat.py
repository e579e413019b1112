"""CPU time and memory of a process tree, read from /proc: whatever the operator under test is written in.

The process under test may fork (a wrapper script, a Go binary spawning helpers), so figures cover the
whole tree below the process we started: CPU is utime + stime + the CPU of reaped children (cutime,
cstime) summed over the live processes; RSS is sampled periodically, summed over the tree, and combined
with each process's own high-water mark (VmHWM), which catches a peak between two samples.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ProcStat",
    "TreeSample",
    "TreeSampler",
    "parse_stat",
    "parse_status_kib",
    "parse_steal_ticks",
    "sample_tree",
    "steal_seconds",
]

PROC = Path("/proc")
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/<pid>/stat the benchmark uses; times in clock ticks."""

    pid: int
    comm: str
    state: str
    ppid: int
    utime: int
    stime: int
    cutime: int
    cstime: int

    @property
    def cpu_ticks(self) -> int:
        return self.utime + self.stime + self.cutime + self.cstime


def parse_stat(text: str) -> ProcStat:
    """Parse /proc/<pid>/stat. `comm` is in parentheses and may itself hold spaces and parentheses, so the
    fields are split after its last closing parenthesis."""
    head, _, rest = text.rpartition(")")
    pid, _, comm = head.partition(" (")
    fields = rest.split()
    # rest starts at field 3 (state); utime..cstime are fields 14..17 (1-based), i.e. fields[11:15].
    return ProcStat(
        pid=int(pid),
        comm=comm,
        state=fields[0],
        ppid=int(fields[1]),
        utime=int(fields[11]),
        stime=int(fields[12]),
        cutime=int(fields[13]),
        cstime=int(fields[14]),
    )


def parse_status_kib(text: str, key: str) -> int | None:
    """The value in KiB of a `Key:   123 kB` line of /proc/<pid>/status (None when absent, e.g. a zombie)."""
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == key:
            parts = value.split()
            return int(parts[0]) if parts else None
    return None


def parse_steal_ticks(text: str) -> int | None:
    """The machine's `steal` time in clock ticks, from the summary `cpu` line of /proc/stat (its eighth
    number: time the hypervisor ran something else while this VM had work); None where a kernel lacks it."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            return int(fields[8]) if len(fields) > 8 else None
    return None


def steal_seconds(proc: Path = PROC) -> float | None:
    """CPU seconds taken from this machine by its host so far, all CPUs together (None where unknown).

    Two runs on one VM can differ by a factor when a neighbour on the same host is busy; the difference
    of two readings tells how much of a run's window the machine was not given."""
    try:
        ticks = parse_steal_ticks((proc / "stat").read_text())
    except (OSError, ValueError):
        return None
    return None if ticks is None else ticks / _TICKS


def _children(pid: int, proc: Path) -> list[int]:
    found: list[int] = []
    for task in (proc / str(pid) / "task").glob("*"):
        with contextlib.suppress(OSError, ValueError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _tree(root: int, proc: Path) -> list[int]:
    pids, pending = [], [root]
    while pending:
        pid = pending.pop()
        pids.append(pid)
        pending += _children(pid, proc)
    return pids


@dataclass(frozen=True)
class TreeSample:
    """One look at the tree: total CPU seconds so far, current RSS, and the largest per-process peak."""

    processes: int
    cpu_seconds: float
    rss_kib: int
    hwm_kib: int


def sample_tree(root: int, proc: Path = PROC) -> TreeSample:
    """Sum the tree below (and including) `root`; processes that vanish while being read are skipped."""
    count, ticks, rss, hwm = 0, 0, 0, 0
    for pid in _tree(root, proc):
        try:
            stat = parse_stat((proc / str(pid) / "stat").read_text())
            status = (proc / str(pid) / "status").read_text()
        except (OSError, ValueError, IndexError):
            continue
        count += 1
        ticks += stat.cpu_ticks
        rss += parse_status_kib(status, "VmRSS") or 0
        hwm = max(hwm, parse_status_kib(status, "VmHWM") or 0)
    return TreeSample(processes=count, cpu_seconds=ticks / _TICKS, rss_kib=rss, hwm_kib=hwm)


class TreeSampler:
    """Samples the tree of `root` every `interval` seconds in the background, keeping the peaks."""

    def __init__(self, root: int, *, interval: float = 0.25, proc: Path = PROC) -> None:
        self._root = root
        self._interval = interval
        self._proc = proc
        self._task: asyncio.Task[None] | None = None
        self.peak_rss_kib = 0
        self.last: TreeSample | None = None

    def sample(self) -> TreeSample:
        """Take one sample now (also updating the peaks) and return it."""
        found = sample_tree(self._root, self._proc)
        if found.processes:
            self.last = found
            self.peak_rss_kib = max(self.peak_rss_kib, found.rss_kib, found.hwm_kib)
        return found

    async def _loop(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(self._interval)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._loop())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
