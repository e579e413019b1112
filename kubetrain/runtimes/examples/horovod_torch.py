"""MPIJob example: Horovod over PyTorch on the digits data, launched by mpirun (or horovodrun).

The launcher runs, with the hostfile the operator mounted:
    mpirun -np 2 python -m kubetrain.runtimes.examples.horovod_torch --epochs 10
Horovod's DistributedOptimizer averages the gradients of every step across ranks (rank 0's initial
weights and optimizer state are broadcast first), so every rank ends with the same weights.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from kubetrain.podcontract import ContractError
from kubetrain.runtimes import mpi as kt_mpi
from kubetrain.runtimes.examples.common import (
    Digits,
    Stopwatch,
    TrainArgs,
    load_digits,
    maybe_fail,
    parse_args,
    print_result,
    report_epoch,
    shard,
    start_watchdog,
    weights_digest,
)
from kubetrain.runtimes.examples.pytorch_ddp import evaluate, make_model

__all__ = ["main"]


def train(hvd: Any, args: TrainArgs, data: Digits) -> Any:
    model = make_model(data, args.seed)
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9),
        named_parameters=model.named_parameters(),
    )
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    idx = shard(len(data.x_train), hvd.rank(), hvd.size())
    x, y = torch.from_numpy(data.x_train[idx]), torch.from_numpy(data.y_train[idx])
    for epoch in range(args.epochs):
        maybe_fail(args, epoch, hvd.rank())
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(args.seed * 1000 + epoch))
        for start in range(0, len(x), args.batch_size):
            batch = order[start : start + args.batch_size]
            optimizer.zero_grad()
            loss: Any = F.cross_entropy(model(x[batch]), y[batch])
            loss.backward()
            optimizer.step()  # waits for Horovod's all-reduce of this step's gradients
        accuracy = evaluate(model, data, torch.device("cpu")) if hvd.rank() == 0 else 0.0
        report_epoch(hvd.rank(), epoch, args.epochs, loss=float(loss.item()), accuracy=accuracy)
    return model


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args("Horovod (PyTorch) on the digits data", argv, epochs=10, lr=0.05)
    start_watchdog(args.timeout_s * 2 + 60, "horovod_torch")
    clock = Stopwatch()
    torch.set_num_threads(1)
    try:
        hvd = kt_mpi.init_horovod()
    except ContractError as e:
        print(f"horovod_torch: {e}", file=sys.stderr)
        return 2
    data = load_digits()
    model = train(hvd, args, data)
    print_result(
        accuracy=evaluate(model, data, torch.device("cpu")),
        epochs=args.epochs,
        local_rank=hvd.local_rank(),
        rank=hvd.rank(),
        seconds=clock.seconds(),
        weights_sha256=weights_digest(p.detach().numpy() for p in model.parameters()),
        world_size=hvd.size(),
    )
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
