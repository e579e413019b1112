"""TFJob example: MultiWorkerMirroredStrategy with Keras `model.fit` on the digits data.

Each worker (and chief, if any) runs this with the TF_CONFIG the operator renders:
    python -m kubetrain.runtimes.examples.tf_multiworker --epochs 10
Each input pipeline reads its own shard; gradients are all-reduced every step, so every worker ends with
the same weights (same digest in its `kubetrain-result` line). Without TF_CONFIG it trains alone.
With --model-dir (a shared volume) the chief saves the final weights there; an Evaluator replica (or
--evaluate) waits for them and prints their test accuracy.
With --checkpoint-dir (the same option), the chief also saves a checkpoint after every epoch, and a
restarted job goes on from the newest (`kubetrain.runtimes.examples.checkpoint`): every worker reads it, and
all check that they read the same epoch. Each epoch's data order is drawn from (seed, epoch), so that a
resumed run sees the batches an uninterrupted one would.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kubetrain.podcontract import ContractError, StrategyKind, TFConfig
from kubetrain.runtimes import tensorflow as kt_tf
from kubetrain.runtimes.examples import checkpoint
from kubetrain.runtimes.examples.checkpoint import Checkpoint, drill_once, resume_fields
from kubetrain.runtimes.examples.common import (
    Digits,
    Stopwatch,
    TrainArgs,
    TrainSignal,
    load_digits,
    maybe_fail,
    parse_args,
    print_result,
    report_epoch,
    shard,
    start_watchdog,
    weights_digest,
)

# Both must happen before TensorFlow is imported: it reads them once, at import. configure_keras() makes
# tf.keras be tf-keras (Keras 2), because Keras 3's model.fit fails under MultiWorkerMirroredStrategy.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
kt_tf.configure_keras()
import tensorflow as tf  # noqa: E402

__all__ = ["FINAL_WEIGHTS", "build_model", "main"]

FINAL_WEIGHTS = "final-weights.npz"


def build_model(data: Digits, args: TrainArgs) -> Any:
    tf.keras.utils.set_random_seed(args.seed)
    model = tf.keras.Sequential(
        [
            tf.keras.Input(shape=(data.num_features,)),
            tf.keras.layers.Dense(64, activation="relu"),
            tf.keras.layers.Dense(data.num_classes),
        ]
    )
    model.compile(
        optimizer=tf.keras.optimizers.SGD(learning_rate=args.lr, momentum=0.9),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def _dataset_fn(data: Digits, args: TrainArgs, first_epoch: int, steps: int) -> Any:
    """Each input pipeline's shard, epoch after epoch from `first_epoch`, each in its own (seed, epoch)
    order, `steps` batches an epoch."""

    def make(ctx: Any) -> Any:
        idx = shard(len(data.x_train), ctx.input_pipeline_id, ctx.num_input_pipelines)
        batch = ctx.get_per_replica_batch_size(args.batch_size * ctx.num_replicas_in_sync)
        orders = [
            checkpoint.epoch_order(len(idx), args.seed, e)[: steps * batch]
            for e in range(first_epoch, args.epochs)
        ]
        rows = idx[np.concatenate([np.zeros(0, np.int64), *orders])]
        return tf.data.Dataset.from_tensor_slices((data.x_train[rows], data.y_train[rows])).batch(batch)

    return make


_Callback: Any = tf.keras.callbacks.Callback


class FailureDrill(_Callback):  # type: ignore[misc]
    """--exit-at-epoch as a Keras callback."""

    def __init__(self, args: TrainArgs, rank: int) -> None:
        super().__init__()
        self._args, self._rank = args, rank

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        maybe_fail(self._args, epoch, self._rank)


class SignalTraining(_Callback):  # type: ignore[misc]
    """Every worker's `kubetrain-train` line, after the first step of each epoch."""

    def __init__(self, rank: int, steps_per_epoch: int) -> None:
        super().__init__()
        self._signal, self._steps = TrainSignal(rank), steps_per_epoch
        self._epoch = 0

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self._epoch = epoch

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self._signal.stepped(self._epoch, self._epoch * self._steps + batch + 1)


class SaveCheckpoint(_Callback):  # type: ignore[misc]
    """The chief saves the weights, the optimizer's variables and the epoch after each epoch. Plain arrays:
    Keras' own saving runs collectives under MultiWorkerMirroredStrategy, which every worker would join."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self._directory = directory

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        optimizer = [v.numpy() for v in self.model.optimizer.variables]
        checkpoint.save(self._directory, Checkpoint(epoch + 1, self.model.get_weights(), optimizer))


class ReportProgress(_Callback):  # type: ignore[misc]
    """Rank 0 reports each epoch's progress, training loss and accuracy."""

    def __init__(self, args: TrainArgs, rank: int) -> None:
        super().__init__()
        self._args, self._rank = args, rank

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        logs = logs or {}
        metrics = {k: float(logs[k]) for k in ("loss", "accuracy") if k in logs}
        report_epoch(self._rank, epoch, self._args.epochs, **metrics)


def train(args: TrainArgs, config: TFConfig | None, clock: Stopwatch) -> None:
    strategy = kt_tf.make_strategy(config, timeout_s=args.timeout_s)
    data = load_digits()
    rank = 0 if config is None else (config.id_in_cluster or 0)
    chief = config is None or config.is_chief
    with strategy.scope():
        model = build_model(data, args)
        resumed = _resume(strategy, model, args.checkpoint_dir)
    args = drill_once(args, resumed)
    first = 0 if resumed is None else resumed.epochs
    steps = len(shard(len(data.x_train), 0, strategy.num_replicas_in_sync)) // args.batch_size
    dataset = strategy.distribute_datasets_from_function(_dataset_fn(data, args, first, steps))
    callbacks = [FailureDrill(args, rank), SignalTraining(rank, steps), ReportProgress(args, rank)]
    if args.checkpoint_dir is not None and chief:
        callbacks.append(SaveCheckpoint(args.checkpoint_dir))
    model.fit(
        dataset,
        epochs=args.epochs,
        initial_epoch=first,
        steps_per_epoch=steps,
        verbose=0,
        callbacks=callbacks,
    )
    if args.checkpoint_dir is not None and chief:
        _save_final(model, Path(args.checkpoint_dir))
    replicas = int(strategy.num_replicas_in_sync)
    _report(
        model, data, clock, args, config, rank=rank, replicas=replicas, **resume_fields(resumed, args.epochs)
    )
    if config is not None and config.strategy_kind() is StrategyKind.MULTI_WORKER_MIRRORED:
        _all_reported(strategy)


def _resume(strategy: Any, model: Any, checkpoint_dir: str | None) -> Checkpoint | None:
    """Every worker loads the newest checkpoint into the model and its optimizer (built first: its
    momentum variables are made lazily), after all have checked that they found the same one."""
    found = checkpoint.newest(checkpoint_dir)
    _same_everywhere(strategy, 0 if found is None else found.epochs)
    if found is not None:
        model.set_weights(found.model)
        model.optimizer.build(model.trainable_variables)
        for variable, value in zip(model.optimizer.variables, found.optimizer, strict=True):
            variable.assign(value)
    return found


def _same_everywhere(strategy: Any, epochs: int) -> None:
    """Fail unless every worker found a checkpoint of the same epoch (or none): workers that resumed from
    different epochs would train on silently. All equal exactly when n * sum(e^2) == sum(e)^2."""
    values = strategy.run(lambda: tf.constant([1.0, epochs, epochs * epochs], dtype=tf.float64))
    n, total, squares = strategy.reduce(tf.distribute.ReduceOp.SUM, values, axis=None).numpy()
    if n * squares != total * total:
        raise ContractError(
            "--checkpoint-dir",
            "the workers found checkpoints of different epochs",
            "Give every worker the same --checkpoint-dir, on a volume they all share",
        )


def _all_reported(strategy: Any) -> None:
    """Wait until every worker has printed its result: one all-reduce of a constant, which returns only
    when all have called it. Without it the chief could exit first and so end the TFJob (its success
    policy) while a slower worker was still scoring. That worker lost the chief's coordination service,
    and a loaded CI run saw it stopped before its result line. A worker that never comes makes this fail
    at the strategy's collective timeout (--timeout), as a training step would."""
    ones = strategy.run(lambda: tf.constant(1.0))
    strategy.reduce(tf.distribute.ReduceOp.SUM, ones, axis=None)


def _save_final(model: Any, model_dir: Path) -> None:
    """The chief alone writes the final weights, atomically (the evaluator polls for the file). Plain arrays
    from get_weights(): Keras' save_weights runs collectives under MultiWorkerMirroredStrategy, which would
    need every worker to call it too."""
    model_dir.mkdir(parents=True, exist_ok=True)
    tmp = model_dir / f".tmp-{FINAL_WEIGHTS}"
    with tmp.open("wb") as out:
        np.savez(out, *model.get_weights())
    os.replace(tmp, model_dir / FINAL_WEIGHTS)


def evaluate(args: TrainArgs, config: TFConfig | None, clock: Stopwatch) -> None:
    """The Evaluator replica: wait for the chief's final weights in --model-dir, then score them."""
    if args.checkpoint_dir is None:
        raise ContractError(
            "--model-dir", "not given", "The evaluator reads the final model from --model-dir"
        )
    final = Path(args.checkpoint_dir) / FINAL_WEIGHTS
    deadline = time.monotonic() + args.timeout_s * 2
    while not final.exists():
        if time.monotonic() > deadline:
            raise ContractError("--model-dir", f"no {final} after {args.timeout_s * 2:.0f} s", _EVAL_FIX)
        time.sleep(1.0)
    data = load_digits()
    model = build_model(data, args)
    with np.load(final) as saved:
        model.set_weights([saved[f"arr_{i}"] for i in range(len(saved.files))])
    _report(model, data, clock, args, config, rank=-1, replicas=0)


_EVAL_FIX = "Give the chief and the evaluator the same --model-dir on a shared volume"


def _report(
    model: Any,
    data: Digits,
    clock: Stopwatch,
    args: TrainArgs,
    config: TFConfig | None,
    *,
    rank: int,
    replicas: int,
    **extra: Any,
) -> None:
    logits = model(tf.constant(data.x_test), training=False).numpy()
    print_result(
        accuracy=round(float((logits.argmax(axis=1) == data.y_test).mean()), 4),
        epochs=args.epochs,
        keras=tf.keras.__name__,
        rank=rank,
        replicas=replicas,
        seconds=clock.seconds(),
        task="local" if config is None else f"{config.task.type}:{config.task.index}",
        weights_sha256=weights_digest(model.get_weights()),
        **extra,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args("TensorFlow MultiWorkerMirroredStrategy on the digits data", argv, epochs=10, lr=0.05)
    start_watchdog(args.timeout_s * 2 + 60, "tf_multiworker")
    clock = Stopwatch()
    try:
        config = TFConfig.from_env()
        evaluator = config is not None and config.strategy_kind() is StrategyKind.EVALUATOR
        (evaluate if args.evaluate or evaluator else train)(args, config, clock)
    except ContractError as e:
        print(f"tf_multiworker: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
