"""MPIJob example: data-parallel training of a numpy MLP, gradients averaged with MPI_Allreduce (mpi4py).

The launcher runs it under mpirun with the hostfile the operator mounted:
    mpirun -np 2 python -m kubetrain.runtimes.examples.mpi_allreduce --epochs 10
Rank 0's initial weights are broadcast, each rank computes gradients on its own shard, and the averaged
gradient is applied everywhere, so all ranks end with the same weights (same digest in every rank's
`kubetrain-result` line). No deep-learning framework: only numpy and mpi4py.
With --checkpoint-dir, rank 0 saves the weights and momentum after every epoch, and a restarted job goes on
from the newest checkpoint (`kubetrain.runtimes.examples.checkpoint`), which rank 0 reads and broadcasts.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubetrain.podcontract import ContractError
from kubetrain.runtimes import mpi as kt_mpi
from kubetrain.runtimes.examples import checkpoint
from kubetrain.runtimes.examples.checkpoint import Checkpoint, drill_once, resume_fields
from kubetrain.runtimes.examples.common import (
    Digits,
    Floats,
    Ints,
    Stopwatch,
    TrainArgs,
    TrainSignal,
    held_out_scores,
    limit_threads,
    load_digits,
    maybe_fail,
    parse_args,
    print_result,
    report_epoch,
    shard,
    start_watchdog,
    weights_digest,
)

__all__ = ["Mlp", "main"]

HIDDEN = 64


@dataclass
class Mlp:
    """x -> relu(x W1 + b1) W2 + b2, trained with SGD + momentum on softmax cross-entropy."""

    params: list[Floats]
    velocity: list[Floats] = field(default_factory=list)

    @classmethod
    def create(cls, data: Digits, seed: int) -> Mlp:
        rng = np.random.default_rng(seed)
        w1 = rng.normal(0, 1 / np.sqrt(data.num_features), (data.num_features, HIDDEN)).astype(np.float32)
        w2 = rng.normal(0, 1 / np.sqrt(HIDDEN), (HIDDEN, data.num_classes)).astype(np.float32)
        params = [w1, np.zeros(HIDDEN, np.float32), w2, np.zeros(data.num_classes, np.float32)]
        return cls(params, [np.zeros_like(p) for p in params])

    def logits(self, x: Floats) -> Floats:
        w1, b1, w2, b2 = self.params
        return np.asarray(np.maximum(x @ w1 + b1, 0) @ w2 + b2, dtype=np.float32)

    def gradients(self, x: Floats, y: Ints) -> list[Floats]:
        w1, b1, w2, _ = self.params
        hidden = np.maximum(x @ w1 + b1, 0)
        scores = hidden @ w2 + self.params[3]
        probs = np.exp(scores - scores.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        probs[np.arange(len(y)), y] -= 1
        d_scores = probs / len(y)
        d_hidden = (d_scores @ w2.T) * (hidden > 0)
        return [x.T @ d_hidden, d_hidden.sum(axis=0), hidden.T @ d_scores, d_scores.sum(axis=0)]

    def step(self, grads: list[Floats], lr: float, momentum: float = 0.9) -> None:
        for param, velocity, grad in zip(self.params, self.velocity, grads, strict=True):
            np.multiply(velocity, momentum, out=velocity)
            np.add(velocity, grad, out=velocity)
            np.subtract(param, lr * velocity, out=param)


def train(comm: Any, args: TrainArgs, data: Digits) -> tuple[Mlp, Checkpoint | None]:
    """Data-parallel SGD from the newest checkpoint (if any) to args.epochs; rank 0 saves after each epoch."""
    rank, size = comm.Get_rank(), comm.Get_size()
    model = Mlp.create(data, args.seed)
    resumed = _resume(comm, model, args.checkpoint_dir)
    args = drill_once(args, resumed)
    idx = shard(len(data.x_train), rank, size)
    x, y = data.x_train[idx], data.y_train[idx]
    signal = TrainSignal(rank)
    for epoch in range(0 if resumed is None else resumed.epochs, args.epochs):
        maybe_fail(args, epoch, rank)
        _train_epoch(comm, model, args, (x, y), epoch=epoch, signal=signal)
        if rank == 0:
            report_epoch(rank, epoch, args.epochs, **held_out_scores(model.logits(data.x_test), data))
            if args.checkpoint_dir is not None:
                checkpoint.save(args.checkpoint_dir, Checkpoint(epoch + 1, model.params, model.velocity))
    return model, resumed


def _train_epoch(
    comm: Any, model: Mlp, args: TrainArgs, shard_xy: tuple[Floats, Ints], *, epoch: int, signal: TrainSignal
) -> None:
    """One pass over this rank's shard, in the order drawn from (seed, epoch), gradients averaged."""
    x, y = shard_xy
    order = checkpoint.epoch_order(len(x), args.seed, epoch)
    starts = range(0, len(x), args.batch_size)
    for i, start in enumerate(starts):
        batch = order[start : start + args.batch_size]
        local = model.gradients(x[batch], y[batch])
        flat = np.concatenate([g.ravel() for g in local]).astype(np.float32)
        mean = kt_mpi.allreduce_mean(comm, flat)
        model.step(_unflatten(mean, model.params), args.lr)
        signal.stepped(epoch, epoch * len(starts) + i + 1)


def _resume(comm: Any, model: Mlp, checkpoint_dir: str | None) -> Checkpoint | None:
    """Rank 0 reads the newest checkpoint and broadcasts it, so every rank goes on from the same one; then
    rank 0's weights (the checkpoint's, or its initial ones) are broadcast as they always were."""
    found = checkpoint.newest(checkpoint_dir) if comm.Get_rank() == 0 else None
    resumed: Checkpoint | None = comm.bcast(found, root=0)
    if resumed is not None:
        model.params = [np.array(a, dtype=np.float32) for a in resumed.model]
        model.velocity = [np.array(a, dtype=np.float32) for a in resumed.optimizer]
    for p in model.params:
        comm.Bcast(p, root=0)
    return resumed


def _unflatten(flat: Floats, like: list[Floats]) -> list[Floats]:
    out, offset = [], 0
    for p in like:
        out.append(flat[offset : offset + p.size].reshape(p.shape))
        offset += p.size
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args("numpy MLP with MPI_Allreduce on the digits data", argv, epochs=10, lr=0.05)
    start_watchdog(args.timeout_s, "mpi_allreduce")
    clock = Stopwatch()
    limit_threads()
    try:
        comm = kt_mpi.world()
        data = load_digits()
        model, resumed = train(comm, args, data)
    except ContractError as e:
        print(f"mpi_allreduce: {e}", file=sys.stderr)
        return 2
    predicted = model.logits(data.x_test).argmax(axis=1)
    impl = kt_mpi.implementation()
    print_result(
        accuracy=round(float((predicted == data.y_test).mean()), 4),
        epochs=args.epochs,
        mpi=None if impl is None else impl.value,
        rank=comm.Get_rank(),
        seconds=clock.seconds(),
        weights_sha256=weights_digest(model.params),
        world_size=comm.Get_size(),
        **resume_fields(resumed, args.epochs),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
