"""Checkpoints of the data-parallel example trainers: a restarted gang resumes instead of starting over.

When one rank dies, a gang failure policy (docs/failure-policy.md) restarts every rank. With
`--checkpoint-dir DIR` on a volume the ranks share, rank 0 saves after each epoch and a restarted rank goes
on at the epoch after the newest checkpoint, so a failure costs at most the epoch it interrupted.

One format for every framework: numpy's `.npz` (no pickle) holding the model's arrays, the optimizer's
arrays (momentum) and the number of epochs completed, one file per epoch, `epoch-00003.npz`. It is written
to a temporary name and renamed (atomic on a POSIX file system), so a reader sees complete checkpoints
only, whenever the writer died; the two newest are kept.

No random state is saved because none is needed: the model is initialised from `--seed`, and each epoch's
data order is drawn from a generator seeded with (seed, epoch), never from a process-global generator.
Epoch e of a resumed run therefore sees exactly the batches epoch e of an uninterrupted run saw, and the
resumed run ends with the same weights, to the bit.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kubetrain.runtimes.examples.common import TrainArgs

__all__ = ["Checkpoint", "drill_once", "epoch_order", "newest", "resume_fields", "save"]

_NAME = re.compile(r"^epoch-(\d+)\.npz$")
KEEP = 2

Arrays = list[npt.NDArray[Any]]


@dataclass(frozen=True)
class Checkpoint:
    epochs: int
    """Epochs completed: a resumed run trains from this epoch on."""
    model: Arrays
    optimizer: Arrays


def save(directory: str | Path, checkpoint: Checkpoint) -> Path:
    """Write `checkpoint` into `directory` atomically (temp file + rename); older ones beyond two go."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"epoch-{checkpoint.epochs:05d}.npz"
    tmp = directory / f".{final.name}.tmp"
    arrays = {"epochs": np.asarray(checkpoint.epochs, dtype=np.int64)}
    arrays |= {f"model_{i:04d}": a for i, a in enumerate(checkpoint.model)}
    arrays |= {f"optimizer_{i:04d}": a for i, a in enumerate(checkpoint.optimizer)}
    with tmp.open("wb") as out:
        np.savez(out, allow_pickle=False, **arrays)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, final)
    for old in _saved(directory)[KEEP:]:
        old.unlink(missing_ok=True)
    return final


def newest(directory: str | Path | None) -> Checkpoint | None:
    """The newest checkpoint in `directory`, or None when there is none (or no directory is given)."""
    if directory is None or not Path(directory).is_dir():
        return None
    for path in _saved(Path(directory)):
        with np.load(path) as saved:
            return Checkpoint(
                epochs=int(saved["epochs"]),
                model=_series(saved, "model_"),
                optimizer=_series(saved, "optimizer_"),
            )
    return None


def resume_fields(resumed: Checkpoint | None, epochs: int) -> dict[str, Any]:
    """The result line's account of a run: the epoch it resumed from (null: none) and how many it trained."""
    start = 0 if resumed is None else resumed.epochs
    return {"resumed_from": None if resumed is None else start, "epochs_trained": max(epochs - start, 0)}


def drill_once(args: TrainArgs, resumed: Checkpoint | None) -> TrainArgs:
    """`args` without the --exit-at-epoch drill when the run resumed at or past its epoch: the drill fires
    once, not again in every restarted gang."""
    spent = resumed is not None and args.exit_at_epoch is not None and args.exit_at_epoch <= resumed.epochs
    return dataclasses.replace(args, exit_at_epoch=None) if spent else args


def epoch_order(count: int, seed: int, epoch: int) -> npt.NDArray[np.int64]:
    """The order in which an epoch visits a shard's `count` items, drawn from (seed, epoch) alone and never
    from a process-global generator: a run resumed at this epoch visits them in the same order."""
    return np.random.default_rng(seed * 1000 + epoch).permutation(count)


def _saved(directory: Path) -> list[Path]:
    """The complete checkpoints in `directory`, newest first."""
    found = [(int(m.group(1)), p) for p in directory.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found, reverse=True)]


def _series(saved: Any, prefix: str) -> Arrays:
    return [np.asarray(saved[k]) for k in sorted(k for k in saved.files if k.startswith(prefix))]
