"""When a rank trains: the example trainers' `kubetrain-train` lines, and the recovery time they give.

Every rank of pytorch_ddp, tf_multiworker and mpi_allreduce prints, after the first step of each epoch it
trains (so also after the first step once it was restarted),
    kubetrain-train {"epoch": 3, "rank": 1, "step": 136, "time": 1790000000.25}
where `time` is the Unix time of the print. The node's containers share the host's clock, so a line's
time compares with the moment the bench sent the kill.

A rank has recovered at the time of its first line printed after the kill by a process started after the
kill: a peer that finishes a step a few milliseconds after the kill, with the killed rank's gradients
already in, is not a rank training again. The gang has recovered when every rank has.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

TRAIN_PREFIX = "kubetrain-train "


@dataclass(frozen=True)
class TrainLine:
    rank: int
    epoch: int
    step: int
    time: float


def train_lines(text: str) -> list[TrainLine]:
    """Every `kubetrain-train` line of a log (after any prefix mpirun or a log reader adds)."""
    found = []
    for line in text.splitlines():
        _, sep, rest = line.partition(TRAIN_PREFIX)
        if not sep:
            continue
        try:
            data = json.loads(rest)
            rank, epoch, step = int(data["rank"]), int(data["epoch"]), int(data["step"])
            found.append(TrainLine(rank, epoch, step, float(data["time"])))
        except (ValueError, KeyError, TypeError):
            continue  # a line cut by a container's end
    return found


def first_after(lines: Iterable[TrainLine], moment: float) -> dict[int, float]:
    """Per rank, the time of its first line after `moment`."""
    first: dict[int, float] = {}
    for line in lines:
        if line.time > moment and line.time < first.get(line.rank, float("inf")):
            first[line.rank] = line.time
    return first


def recovered_after(first: Mapping[int, float], ranks: Iterable[int], kill: float) -> float | None:
    """Seconds from the kill until the last of `ranks` trained again; None while one has not."""
    wanted = list(ranks)
    if any(r not in first for r in wanted):
        return None
    return max(first[r] for r in wanted) - kill


def all_training(lines: Iterable[TrainLine], ranks: Iterable[int], epochs: int = 2) -> bool:
    """Every rank has printed `epochs` lines: the gang is under way, past its first epoch."""
    counts: dict[int, int] = {}
    for line in lines:
        counts[line.rank] = counts.get(line.rank, 0) + 1
    return all(counts.get(r, 0) >= epochs for r in ranks)
