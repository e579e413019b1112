"""What every example trainer shares: the dataset, sharding, the CLI, the watchdog and the result line.

The data is scikit-learn's bundled `load_digits` (1,797 8x8 images of digits, shipped inside the package,
nothing downloaded): a fixed split of 1,437 training and 360 test images. Each rank trains on its own
equal-sized shard, so data-parallel replicas step in lock-step. Random guessing scores about 10%.

After every epoch (or step) rank 0 reports its progress, loss and accuracy (`report_epoch`) to the
operator's status endpoint (KEP-2779), or to `kubetrain run --local`. Each trainer ends by printing one
line a test (or a user) can parse:
    kubetrain-result {"accuracy": 0.95, "rank": 0, "weights_sha256": "...", ...}
The weights digest is over the final float32 parameters: replicas that really all-reduced end identical.

Every rank of the data-parallel trainers (pytorch_ddp, tf_multiworker, mpi_allreduce) also prints, once it
has completed the first training step of each epoch it runs (so also the first step after a (re)start):
    kubetrain-train {"epoch": 3, "rank": 1, "step": 136, "time": 1790000000.25}
`step` counts the steps of the whole run (a resumed run goes on counting), `time` is the Unix time of the
print. It tells when a rank really trains again after a failure, without reading the trainer's progress.
"""

from __future__ import annotations

import argparse
import faulthandler
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import numpy.typing as npt

from kubetrain.runtimes import progress

__all__ = [
    "RESULT_PREFIX",
    "TRAIN_PREFIX",
    "Digits",
    "TrainArgs",
    "TrainSignal",
    "exit_now",
    "held_out_scores",
    "limit_threads",
    "load_digits",
    "parse_args",
    "print_result",
    "report_epoch",
    "shard",
    "start_watchdog",
    "weights_digest",
]

RESULT_PREFIX = "kubetrain-result "
TRAIN_PREFIX = "kubetrain-train "

Floats = npt.NDArray[np.float32]
Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Digits:
    x_train: Floats
    y_train: Ints
    x_test: Floats
    y_test: Ints
    num_classes: int = 10

    @property
    def num_features(self) -> int:
        return int(self.x_train.shape[1])


def load_digits(seed: int = 0) -> Digits:
    """The digits data, standardised with training-set statistics, split with a fixed permutation.

    The data is scikit-learn's (`sklearn.datasets.load_digits`), read from the file that package ships
    without importing it: importing scikit-learn costs every rank about 2 s of CPU at each start, and a
    restarted gang waits for its slowest rank."""
    table = np.loadtxt(_sklearn_file("datasets/data/digits.csv.gz"), delimiter=",")
    x = np.asarray(table[:, :-1], dtype=np.float32)
    y = np.asarray(table[:, -1], dtype=np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    n_test = 360
    x_train, x_test = x[n_test:], x[:n_test]
    mean, std = x_train.mean(axis=0), x_train.std(axis=0) + 1.0
    return Digits(
        x_train=((x_train - mean) / std).astype(np.float32),
        y_train=y[n_test:],
        x_test=((x_test - mean) / std).astype(np.float32),
        y_test=y[:n_test],
    )


def _sklearn_file(name: str) -> Path:
    """A data file of the installed scikit-learn package, found without importing it."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or spec.origin is None:
        missing = "scikit-learn is not installed: the examples read its digits data"
        raise ModuleNotFoundError(missing, name="sklearn")
    return Path(spec.origin).parent / name


def exit_now(code: int) -> NoReturn:
    """End the process with `code` once its output (progress reports, logs, stdio) is flushed, skipping
    the interpreter's teardown.

    torch.distributed's threads can abort a rank at interpreter exit after it finished ("terminate called
    without an active exception", exit 134): under a gang failure policy that is a failed rank, and the
    kubelet restarts a pod whose work is done. Seen intermittently, for a few ranks in a hundred."""
    progress.flush()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def shard(count: int, rank: int, world_size: int) -> npt.NDArray[np.int64]:
    """Indices of rank's shard: every world_size-th item, all shards the same length (the tail is dropped)."""
    per_rank = count // world_size
    return np.arange(rank, per_rank * world_size, world_size, dtype=np.int64)


def weights_digest(arrays: Iterable[Any]) -> str:
    """sha256 over the float32 little-endian bytes of the arrays, in order."""
    h = hashlib.sha256()
    for array in arrays:
        h.update(np.ascontiguousarray(np.asarray(array, dtype="<f4")).tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class TrainArgs:
    epochs: int
    batch_size: int
    lr: float
    seed: int
    timeout_s: float
    exit_at_epoch: int | None
    device: str
    checkpoint_dir: str | None = None
    evaluate: bool = False
    steps: int | None = None
    role: str | None = None


def parse_args(
    description: str,
    argv: Sequence[str] | None = None,
    *,
    epochs: int = 10,
    batch_size: int = 32,
    lr: float = 0.1,
) -> TrainArgs:
    """The options every example understands (each uses those that apply to it)."""
    p = argparse.ArgumentParser(description=description)
    _add_training_options(p, epochs=epochs, batch_size=batch_size, lr=lr)
    _add_limit_options(p)
    _add_device_options(p)
    _add_job_options(p)
    a = p.parse_args(argv)
    _check_limits(p, a)
    a.device = _device_of(p, a.device, a.backend)
    return _train_args(a)


def _add_training_options(p: argparse.ArgumentParser, *, epochs: int, batch_size: int, lr: float) -> None:
    """How long and how fast to train: the defaults are each example's own."""
    p.add_argument("--epochs", type=int, default=epochs)
    p.add_argument("--batch-size", type=int, default=batch_size, help="per replica")
    p.add_argument("--lr", type=float, default=lr)
    p.add_argument("--seed", type=int, default=0)


def _add_limit_options(p: argparse.ArgumentParser) -> None:
    """The time limit and the failure drill."""
    p.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds for rendezvous and collectives; the watchdog kills "
        "the process at this limit plus a margin, whatever it is blocked in",
    )
    p.add_argument(
        "--exit-at-epoch",
        type=int,
        default=None,
        help="failure drill: exit 1 at the start of this epoch",
    )


def _add_device_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument(
        "--backend", choices=["gloo", "nccl"], help="torch: gloo means --device cpu, nccl --device cuda"
    )


def _add_job_options(p: argparse.ArgumentParser) -> None:
    """Options of some examples only: TensorFlow's steps, role and evaluator, the shared checkpoints."""
    p.add_argument(
        "--steps", type=int, default=None, help="total training steps, instead of --epochs (tf_ps)"
    )
    p.add_argument(
        "--role", default=None, help="TF: the task type TF_CONFIG must give this replica (a check)"
    )
    p.add_argument(
        "--checkpoint-dir",
        "--model-dir",
        dest="checkpoint_dir",
        default=None,
        help="a directory all replicas share: checkpoints to resume from, the final model for the evaluator",
    )
    p.add_argument("--evaluate", action="store_true", help="evaluate the final model in --model-dir (TF)")


def _check_limits(p: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """Counts at least 1 and a positive timeout, else exit 2 with argparse's usage error."""
    for name in ("epochs", "batch_size"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if a.timeout <= 0:
        p.error("--timeout must be positive")
    if a.steps is not None and a.steps < 1:
        p.error("--steps must be at least 1")


def _device_of(p: argparse.ArgumentParser, device: str, backend: str | None) -> str:
    """--device, or the one --backend implies (an error if the two contradict each other)."""
    if backend is None:
        return device
    implied = {"gloo": "cpu", "nccl": "cuda"}[backend]
    if device not in ("auto", implied):
        p.error(f"--backend {backend} contradicts --device {device}")
    return implied


def _train_args(a: argparse.Namespace) -> TrainArgs:
    return TrainArgs(
        epochs=a.epochs,
        batch_size=a.batch_size,
        lr=a.lr,
        seed=a.seed,
        timeout_s=a.timeout,
        exit_at_epoch=a.exit_at_epoch,
        device=a.device,
        checkpoint_dir=a.checkpoint_dir,
        evaluate=a.evaluate,
        steps=a.steps,
        role=a.role,
    )


def maybe_fail(args: TrainArgs, epoch: int, rank: int) -> None:
    """The --exit-at-epoch failure drill: lets tests and restart-policy drills see a replica die."""
    if args.exit_at_epoch is not None and epoch == args.exit_at_epoch:
        print(f"kubetrain-example: rank {rank} exits 1 at epoch {epoch} (--exit-at-epoch)", flush=True)
        os._exit(1)


def start_watchdog(seconds: float, what: str) -> None:
    """Exit the process (code 1, with every thread's traceback on stderr) after `seconds`, whatever it is
    blocked in. faulthandler's watchdog is a C thread that needs no GIL: TensorFlow holds the GIL while it
    waits for peers, and ignores SIGTERM. The last line of defence behind the frameworks' own timeouts."""
    print(f"kubetrain-example: {what}: watchdog armed for {seconds:.0f} s", file=sys.stderr, flush=True)
    faulthandler.dump_traceback_later(seconds, exit=True)


def print_result(**fields: Any) -> None:
    _print_line(RESULT_PREFIX, fields)


def _print_line(prefix: str, fields: dict[str, Any]) -> None:
    # one write per line: mpirun forwards the ranks' stdout through one pipe, and a separate "\n" write
    # lets another rank's output slip in between
    sys.stdout.write(prefix + json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


class TrainSignal:
    """This rank's `kubetrain-train` line: after the first step of each epoch this process trains. One
    line per epoch keeps it cheap; the first one after a (re)start is the moment the rank trains again."""

    def __init__(self, rank: int) -> None:
        self._rank = rank
        self._epoch: int | None = None

    def stepped(self, epoch: int, step: int) -> None:
        """Call after every completed step: `step` counts the whole run's steps, from 1."""
        if epoch != self._epoch:
            self._epoch = epoch
            _print_line(TRAIN_PREFIX, {"rank": self._rank, "epoch": epoch, "step": step, "time": time.time()})


def report_epoch(rank: int, epoch: int, epochs: int, **metrics: float) -> None:
    """Rank 0 reports the training's progress after an epoch (`kubetrain.runtimes.progress`): the epoch
    of `epochs` and the metrics (loss, accuracy). A no-op where no receiver is configured."""
    if rank == 0:
        progress.report(step=epoch + 1, total=epochs, epoch=epoch + 1, **metrics)


def held_out_scores(logits: npt.NDArray[Any], data: Digits) -> dict[str, float]:
    """The test set's mean cross-entropy (`loss`) and `accuracy`, from the model's logits on `x_test`."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = float(-log_probs[np.arange(len(data.y_test)), data.y_test].mean())
    accuracy = float((logits.argmax(axis=1) == data.y_test).mean())
    return {"loss": round(loss, 4), "accuracy": round(accuracy, 4)}


def limit_threads() -> None:
    """One BLAS/OpenMP thread per rank: data-parallel ranks share the node's cores already."""
    threadpoolctl: Any = importlib.import_module("threadpoolctl")  # comes with scikit-learn
    threadpoolctl.threadpool_limits(1)


class Stopwatch:
    def __init__(self) -> None:
        self._start = time.monotonic()

    def seconds(self) -> float:
        return round(time.monotonic() - self._start, 3)
