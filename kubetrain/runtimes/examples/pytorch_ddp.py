"""PyTorchJob example: DistributedDataParallel on the digits data (gloo on CPU, NCCL on GPU).

Run one process per replica with the env the operator renders (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK):
    python -m kubetrain.runtimes.examples.pytorch_ddp --epochs 10
It also runs under torchrun. Every rank prints a `kubetrain-result` line with its test accuracy and the
digest of its final weights; DDP's gradient all-reduce makes the digests identical on every rank.
With --checkpoint-dir, rank 0 saves a checkpoint after every epoch and a restarted gang resumes from the
newest (`kubetrain.runtimes.examples.checkpoint`): rank 0 reads it and broadcasts it, so every rank goes on
from the same one.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from kubetrain.podcontract import ContractError
from kubetrain.runtimes import torch as kt_torch
from kubetrain.runtimes.examples.checkpoint import Checkpoint, drill_once, newest, resume_fields, save
from kubetrain.runtimes.examples.common import (
    Digits,
    Stopwatch,
    TrainArgs,
    TrainSignal,
    exit_now,
    load_digits,
    maybe_fail,
    parse_args,
    print_result,
    report_epoch,
    shard,
    start_watchdog,
    weights_digest,
)

__all__ = [
    "TrainState",
    "average_each_parameter",
    "checkpointer",
    "evaluate",
    "main",
    "make_model",
    "new_state",
    "report",
    "resume",
    "train",
]


@dataclass
class TrainState:
    model: Any
    optimizer: Any
    next_epoch: int = 0


EpochHook = Callable[[TrainState], None]
"""Called after each epoch: rank 0's checkpointing."""


def make_model(data: Digits, seed: int) -> Any:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(data.num_features, 64), torch.nn.ReLU(), torch.nn.Linear(64, data.num_classes)
    )


def train(
    ctx: kt_torch.DistContext,
    args: TrainArgs,
    data: Digits,
    state: TrainState,
    on_epoch_end: EpochHook | None = None,
) -> None:
    """Data-parallel SGD over this rank's shard, from state.next_epoch to args.epochs."""
    idx = shard(len(data.x_train), ctx.rank, ctx.world_size)
    x = torch.from_numpy(data.x_train[idx]).to(ctx.device)
    y = torch.from_numpy(data.y_train[idx]).to(ctx.device)
    device_ids = [ctx.local_rank] if ctx.backend is kt_torch.Backend.NCCL else None
    ddp = DistributedDataParallel(state.model, device_ids=device_ids)
    # a lambda: DDP refuses a hook whose annotations are not its own classes (here they are strings)
    hook = lambda world, bucket: average_each_parameter(world, bucket)  # noqa: E731, PLW0108
    ddp.register_comm_hook(ctx.world_size, hook)
    signal = TrainSignal(ctx.rank)
    starts = range(0, len(x), args.batch_size)
    for epoch in range(state.next_epoch, args.epochs):
        maybe_fail(args, epoch, ctx.rank)
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(args.seed * 1000 + epoch))
        for i, start in enumerate(starts):
            batch = order[start : start + args.batch_size].to(ctx.device)
            state.optimizer.zero_grad()
            loss: Any = F.cross_entropy(ddp(x[batch]), y[batch])
            loss.backward()  # DDP all-reduces the gradients here, bucket by bucket
            state.optimizer.step()
            signal.stepped(epoch, epoch * len(starts) + i + 1)
        state.next_epoch = epoch + 1
        accuracy = evaluate(state.model, data, ctx.device) if ctx.rank == 0 else 0.0
        report_epoch(ctx.rank, epoch, args.epochs, loss=float(loss.item()), accuracy=accuracy)
        if on_epoch_end is not None:
            on_epoch_end(state)


def average_each_parameter(world_size: int, bucket: Any) -> Any:
    """DDP's gradient hook: average each parameter's gradient by itself, not the bucket as one tensor.

    DDP packs the gradients into buckets, laid out anew after the first step (in the order the gradients
    became ready). An all-reduce over a whole bucket sums each element in an order that depends on its place
    in the bucket (ring all-reduce splits the tensor into chunks), so a restarted gang, whose first step
    uses fresh buckets, would end a few bits apart from an uninterrupted run. Per parameter, the sums do not
    depend on the layout: a resumed run ends with exactly the uninterrupted run's weights."""
    buffer, offset = bucket.buffer(), 0
    for param in bucket.parameters():
        dist.all_reduce(buffer[offset : offset + param.numel()])
        offset += param.numel()
    done: Any = torch.futures.Future()
    done.set_result(buffer.div_(world_size))
    return done


def evaluate(model: Any, data: Digits, device: Any) -> float:
    with torch.no_grad():
        logits = model(torch.from_numpy(data.x_test).to(device))
        predicted = logits.argmax(dim=1).cpu().numpy()
    return round(float((predicted == data.y_test).mean()), 4)


def new_state(data: Digits, args: TrainArgs, device: Any) -> TrainState:
    model = make_model(data, args.seed).to(device)
    return TrainState(model, torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9))


def to_checkpoint(state: TrainState) -> Checkpoint:
    """The weights and SGD's momentum buffers (one per parameter, in order), as numpy arrays."""
    momentum = [state.optimizer.state[p]["momentum_buffer"] for p in state.model.parameters()]
    return Checkpoint(
        epochs=state.next_epoch,
        model=[t.detach().cpu().numpy() for t in state.model.state_dict().values()],
        optimizer=[t.detach().cpu().numpy() for t in momentum],
    )


def restore(state: TrainState, checkpoint: Checkpoint, device: Any) -> None:
    names = list(state.model.state_dict())
    weights = zip(names, checkpoint.model, strict=True)
    state.model.load_state_dict({name: torch.from_numpy(a).to(device) for name, a in weights})
    for param, buffer in zip(state.model.parameters(), checkpoint.optimizer, strict=True):
        state.optimizer.state[param]["momentum_buffer"] = torch.from_numpy(buffer).to(device)
    state.next_epoch = checkpoint.epochs


def resume(ctx: kt_torch.DistContext, state: TrainState, checkpoint_dir: str | None) -> Checkpoint | None:
    """Go on from the newest checkpoint, if there is one: rank 0 reads it and broadcasts it to all ranks,
    so that they cannot start from different ones (a volume some rank does not share, a late write)."""
    if checkpoint_dir is None:
        return None
    found = [newest(checkpoint_dir) if ctx.rank == 0 else None]
    if ctx.world_size > 1:
        dist.broadcast_object_list(found, src=0, device=ctx.device)
    if found[0] is not None:
        restore(state, found[0], ctx.device)
    return found[0]


def checkpointer(ctx: kt_torch.DistContext, checkpoint_dir: str | None) -> EpochHook | None:
    """Rank 0 saves after every epoch (the others train the same weights)."""
    if checkpoint_dir is None or ctx.rank != 0:
        return None
    directory = checkpoint_dir

    def save_state(state: TrainState) -> None:
        save(directory, to_checkpoint(state))

    return save_state


def report(
    ctx: kt_torch.DistContext, state: TrainState, data: Digits, clock: Stopwatch, **extra: Any
) -> None:
    print_result(
        accuracy=evaluate(state.model, data, ctx.device),
        backend=ctx.backend.value,
        epochs=state.next_epoch,
        rank=ctx.rank,
        seconds=clock.seconds(),
        weights_sha256=weights_digest(p.detach().cpu().numpy() for p in state.model.parameters()),
        world_size=ctx.world_size,
        **extra,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args("PyTorch DDP on the digits data", argv, epochs=10, lr=0.05)
    start_watchdog(args.timeout_s * 2 + 60, "pytorch_ddp")
    clock = Stopwatch()
    torch.set_num_threads(1)
    try:
        device = kt_torch.DeviceChoice(args.device)
        with kt_torch.distributed(device=device, timeout_s=args.timeout_s) as ctx:
            data = load_digits()
            state = new_state(data, args, ctx.device)
            resumed = resume(ctx, state, args.checkpoint_dir)
            train(ctx, drill_once(args, resumed), data, state, checkpointer(ctx, args.checkpoint_dir))
            report(ctx, state, data, clock, **resume_fields(resumed, args.epochs))
    except ContractError as e:
        print(f"pytorch_ddp: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    exit_now(main())
