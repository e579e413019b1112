"""XGBoostJob example: a gradient-boosted classifier of the digits data, trained across XGBoost processes.

Run one process per replica with the env the operator renders (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK):
    python -m kubetrain.runtimes.examples.xgboost_digits --epochs 30
Alone (no such env) it trains as one process. The master (RANK 0) runs the collective's tracker and every
process joins it (`kubetrain.runtimes.xgboost.collective`); each process then loads only its shard of the
training rows (every WORLD_SIZE-th row from RANK), and `xgboost.train`'s histogram method all-reduces the
per-shard gradient histograms each round: every process grows the same trees, those of the whole data set.
`--epochs` is the number of boosting rounds (one tree per class each).

Every process prints a `kubetrain-result` line with its test accuracy, the last round's multi-class log
loss over the whole training set (all-reduced) and the digest of its final model: the all-reduce makes the
digests identical in every process.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from kubetrain.podcontract import ContractError
from kubetrain.runtimes import xgboost as kt_xgb
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
)

__all__ = ["evaluate", "main", "train"]

MAX_DEPTH = 4


def train(ctx: kt_xgb.XGBoostContext, args: TrainArgs, data: Digits) -> tuple[Any, float]:
    """`args.epochs` boosting rounds at learning rate `args.lr` on this process's shard; (the booster, the
    last round's training log loss over every process's rows)."""
    xgb: Any = importlib.import_module("xgboost")
    rows = shard(len(data.x_train), ctx.rank, ctx.world_size)
    train_set = xgb.DMatrix(data.x_train[rows], label=data.y_train[rows])
    params = {
        "objective": "multi:softprob",
        "num_class": data.num_classes,
        "eval_metric": ["merror", "mlogloss"],  # mlogloss last: the metric the history's last entry is
        "max_depth": MAX_DEPTH,
        "eta": args.lr,
        "tree_method": "hist",
        "nthread": 1,  # one thread per process: the replicas share the node's cores already
        "seed": args.seed,
    }
    history: dict[str, dict[str, list[float]]] = {}

    def before_iteration(_self: Any, _model: Any, epoch: int, _log: Any) -> bool:
        maybe_fail(args, epoch, ctx.rank)
        return False  # do not stop

    def after_iteration(_self: Any, model: Any, epoch: int, log: Any) -> bool:
        if ctx.rank == 0:
            # from the all-reduced eval log: a predict on one rank alone would break the collective
            train = log["train"]
            loss, accuracy = float(train["mlogloss"][-1]), 1.0 - float(train["merror"][-1])
            report_epoch(0, epoch, args.epochs, loss=loss, accuracy=round(accuracy, 4))
        return False

    hooks = {"before_iteration": before_iteration, "after_iteration": after_iteration}
    drill = type("FailureDrill", (xgb.callback.TrainingCallback,), hooks)
    booster = xgb.train(
        params,
        train_set,
        num_boost_round=args.epochs,
        evals=[(train_set, "train")],
        evals_result=history,
        verbose_eval=False,
        callbacks=[drill()],
    )
    return booster, round(float(history["train"]["mlogloss"][-1]), 4)


def evaluate(booster: Any, data: Digits) -> float:
    xgb: Any = importlib.import_module("xgboost")
    predicted = np.asarray(booster.predict(xgb.DMatrix(data.x_test))).argmax(axis=1)
    return round(float((predicted == data.y_test).mean()), 4)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args("XGBoost across processes on the digits data", argv, epochs=30, lr=0.3)
    start_watchdog(args.timeout_s * 2 + 60, "xgboost_digits")
    clock = Stopwatch()
    try:
        with kt_xgb.collective(timeout_s=args.timeout_s) as ctx:
            data = load_digits()
            booster, loss = train(ctx, args, data)
            print_result(
                accuracy=evaluate(booster, data),
                epochs=args.epochs,
                loss=loss,
                rank=ctx.rank,
                seconds=clock.seconds(),
                weights_sha256=hashlib.sha256(bytes(booster.save_raw("json"))).hexdigest(),
                world_size=ctx.world_size,
            )
    except ContractError as e:
        print(f"xgboost_digits: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
