"""Elastic PyTorchJob example: the DDP trainer under torchrun, rendezvous (c10d) from the PET_* env.

The operator renders PET_RDZV_ENDPOINT, PET_RDZV_BACKEND, PET_NNODES=min:max, PET_NPROC_PER_NODE,
PET_MAX_RESTARTS, ...; torchrun reads them all, so the container command is just
    torchrun -m kubetrain.runtimes.examples.pytorch_elastic --checkpoint-dir /shared/ckpt
With --checkpoint-dir (a volume all replicas share), rank 0 saves after every epoch and every rank resumes
from it when torchrun restarts the worker group (a peer failed, or a node joined or left), so a restart
costs at most one epoch. The failure drill (--exit-at-epoch) fires on the first attempt only.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence

import torch

from kubetrain.podcontract import ContractError, TorchProcess
from kubetrain.runtimes import torch as kt_torch
from kubetrain.runtimes.examples.checkpoint import resume_fields
from kubetrain.runtimes.examples.common import Stopwatch, exit_now, load_digits, parse_args, start_watchdog
from kubetrain.runtimes.examples.pytorch_ddp import checkpointer, new_state, report, resume, train

__all__ = ["main"]

RESTART_COUNT = "TORCHELASTIC_RESTART_COUNT"


def _require_torchrun() -> None:
    if not TorchProcess.from_env().under_torchrun:
        raise ContractError(
            "TORCHELASTIC_RUN_ID",
            "not set: this trainer was not started by torchrun",
            "Start it as `torchrun -m kubetrain.runtimes.examples.pytorch_elastic` (torchrun reads PET_*)",
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args("Elastic PyTorch DDP (torchrun, c10d) on the digits data", argv, epochs=10, lr=0.05)
    start_watchdog(args.timeout_s * 2 + 60, "pytorch_elastic")
    clock = Stopwatch()
    restarts = int(os.environ.get(RESTART_COUNT, "0"))
    if restarts > 0:
        args = dataclasses.replace(args, exit_at_epoch=None)
    torch.set_num_threads(1)
    try:
        _require_torchrun()
        with kt_torch.distributed(device=kt_torch.DeviceChoice(args.device), timeout_s=args.timeout_s) as ctx:
            data = load_digits()
            state = new_state(data, args, ctx.device)
            resumed = resume(ctx, state, args.checkpoint_dir)
            train(ctx, args, data, state, checkpointer(ctx, args.checkpoint_dir))
            run_id = os.environ.get("TORCHELASTIC_RUN_ID", "")
            fields = resume_fields(resumed, args.epochs)
            report(ctx, state, data, clock, restart_count=restarts, run_id=run_id, **fields)
    except ContractError as e:
        print(f"pytorch_elastic: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    exit_now(main())
