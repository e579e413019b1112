"""PaddleJob example: collective data-parallel training of a small MLP on the digits data, across the nodes
of a PaddleJob, under `paddle.distributed.launch`.

Each pod runs `python -m paddle.distributed.launch <this file> ARGS`. The launcher reads the env the operator
renders (PADDLE_MASTER, PADDLE_NNODES, PADDLE_JOB_ID), meets the other pods' launchers at PADDLE_MASTER
(worker 0 serves it), and starts this script once per pod with the trainer env (PADDLE_TRAINER_ID,
PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ENDPOINTS, ...). `paddle.distributed.init_parallel_env()` then joins
the trainers (gloo on CPU), and `paddle.DataParallel` all-reduces the gradients: each trainer steps on its
own shard of every batch, and all end with the same weights.

Run directly (`python -m kubetrain.runtimes.examples.paddle_collective`) it trains as one process.
Every trainer prints a `kubetrain-result` line with its test accuracy, the last epoch's mean training loss
and the digest of its final weights.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from kubetrain.runtimes.examples.common import (
    Digits,
    Stopwatch,
    TrainArgs,
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

__all__ = ["main", "train"]

HIDDEN = 64


def train(paddle: Any, args: TrainArgs, data: Digits, rank: int, world: int) -> tuple[Any, float]:
    """SGD with momentum, `batch_size` rows per trainer per step; (the model, last epoch's mean loss)."""
    nn = paddle.nn
    paddle.seed(args.seed)  # the same initial weights in every trainer
    model = nn.Sequential(
        nn.Linear(data.num_features, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, data.num_classes)
    )
    if world > 1:
        model = paddle.DataParallel(model)
    optimizer = paddle.optimizer.Momentum(learning_rate=args.lr, momentum=0.9, parameters=model.parameters())
    mine = shard(len(data.x_train), rank, world)
    x_all, y_all = data.x_train[mine], data.y_train[mine]
    steps = len(mine) // args.batch_size
    mean_loss = float("nan")
    for epoch in range(args.epochs):
        maybe_fail(args, epoch, rank)
        order = np.random.default_rng(args.seed * 1000 + epoch).permutation(len(mine))
        losses = []
        for s in range(steps):
            chosen = order[s * args.batch_size : (s + 1) * args.batch_size]
            x = paddle.to_tensor(x_all[chosen])
            y = paddle.to_tensor(y_all[chosen])
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()  # DataParallel all-reduces the gradients here
            optimizer.step()
            optimizer.clear_grad()
            losses.append(float(loss))
        mean_loss = float(np.mean(losses))
        if rank == 0:
            report_epoch(rank, epoch, args.epochs, loss=mean_loss, accuracy=evaluate(paddle, model, data))
            model.train()
    return model, round(mean_loss, 4)


def evaluate(paddle: Any, model: Any, data: Digits) -> float:
    model.eval()
    with paddle.no_grad():
        logits = model(paddle.to_tensor(data.x_test)).numpy()
    return round(float((logits.argmax(axis=1) == data.y_test).mean()), 4)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args("Paddle collective data-parallel on the digits data", argv, epochs=20, lr=0.05)
    start_watchdog(args.timeout_s * 2 + 60, "paddle_collective")
    clock = Stopwatch()
    limit_threads()
    paddle: Any = importlib.import_module("paddle")
    paddle.set_device("cpu")
    dist: Any = importlib.import_module("paddle.distributed")
    world = int(os.environ.get("PADDLE_TRAINERS_NUM", "1"))
    if world > 1:
        # This example trains on CPU: gloo. The launcher picks gloo itself only when it finds no
        # accelerator, and it counts a set CUDA_VISIBLE_DEVICES (even empty, as for a pod given no GPU)
        # as one, which would leave the process group uncreated.
        os.environ["PADDLE_DISTRI_BACKEND"] = "gloo"
        dist.init_parallel_env()
    rank = dist.get_rank() if world > 1 else 0
    data = load_digits()
    model, loss = train(paddle, args, data, rank, world)
    print_result(
        accuracy=evaluate(paddle, model, data),
        epochs=args.epochs,
        loss=loss,
        rank=rank,
        seconds=clock.seconds(),
        weights_sha256=weights_digest(p.numpy() for p in model.parameters()),
        world_size=world,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
