"""TFJob example: ParameterServerStrategy (chief + ps + workers) on the digits data.

Every replica runs the same command with the TF_CONFIG the operator renders:
    python -m kubetrain.runtimes.examples.tf_ps --epochs 10
A TFJob without a Chief (PS + Worker, the TF1-era shape) works too: worker 0 then coordinates. ps and
worker tasks serve (they never exit: TFJob's default success policy ends the job when the chief
succeeds, and the operator deletes them). The chief builds the model with its variables on the ps tasks,
dispatches training steps to the workers through a ClusterCoordinator, and prints the `kubetrain-result`
line. Steps run asynchronously on whichever worker is free, so the final weights differ from run to run:
only the chief reports them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from kubetrain.podcontract import ContractError, TFConfig
from kubetrain.runtimes import tensorflow as kt_tf
from kubetrain.runtimes.examples.common import (
    Digits,
    Stopwatch,
    TrainArgs,
    held_out_scores,
    load_digits,
    maybe_fail,
    parse_args,
    print_result,
    report_epoch,
    start_watchdog,
    weights_digest,
)
from kubetrain.runtimes.examples.tf_multiworker import build_model

# before TensorFlow is imported (it reads both once): see tf_multiworker
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
kt_tf.configure_keras()
import tensorflow as tf  # noqa: E402

__all__ = ["main"]


def _per_worker_dataset(strategy: Any, data: Digits, args: TrainArgs) -> Any:
    """Every worker reads the whole training set in its own shuffled order: under ParameterServerStrategy
    the dataset function runs on the workers with no worker index (its InputContext is always 0 of 1), so
    sharding by rank is not possible; asynchronous steps drawn from shuffled data are the documented way."""

    def make(ctx: Any) -> Any:
        ds = tf.data.Dataset.from_tensor_slices((data.x_train, data.y_train))
        return ds.shuffle(len(data.x_train)).repeat().batch(args.batch_size)

    return lambda: strategy.distribute_datasets_from_function(make)


def _train_step(strategy: Any, model: Any) -> Any:
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=tf.keras.losses.Reduction.NONE
    )

    def step(iterator: Any) -> Any:
        def replica_fn(x: Any, y: Any) -> Any:
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(loss_fn(y, model(x, training=True)))
            grads = tape.gradient(loss, model.trainable_variables)
            model.optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        x, y = next(iterator)
        return strategy.run(replica_fn, args=(x, y))

    return tf.function(step)


def coordinate(args: TrainArgs, config: TFConfig, clock: Stopwatch) -> None:
    strategy = kt_tf.make_strategy(config, timeout_s=args.timeout_s)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    data = load_digits()
    workers = config.with_coordinator().count("worker")  # without a Chief, worker 0 coordinates
    with strategy.scope():
        model = build_model(data, args)
    iterator = iter(coordinator.create_per_worker_dataset(_per_worker_dataset(strategy, data, args)))
    step = _train_step(strategy, model)
    steps_per_epoch = len(data.x_train) // args.batch_size
    total = args.steps or args.epochs * steps_per_epoch
    for start in range(0, total, steps_per_epoch):
        maybe_fail(args, start // steps_per_epoch, 0)
        for _ in range(min(steps_per_epoch, total - start)):
            coordinator.schedule(step, args=(iterator,))
        coordinator.join()  # an epoch's steps are done (asynchronously, on whichever worker was free)
        epoch, epochs = start // steps_per_epoch, -(-total // steps_per_epoch)
        report_epoch(
            0, epoch, epochs, **held_out_scores(model(tf.constant(data.x_test), training=False).numpy(), data)
        )
    logits = model(tf.constant(data.x_test), training=False).numpy()
    print_result(
        accuracy=round(float((logits.argmax(axis=1) == data.y_test).mean()), 4),
        epochs=round(total / steps_per_epoch, 2),
        ps=config.count("ps"),
        rank=0,
        seconds=clock.seconds(),
        task=f"{config.task.type}:{config.task.index}",
        variables_on=sorted({v.device for v in model.variables}),
        weights_sha256=weights_digest(model.get_weights()),
        workers=workers,
    )


def _check_role(role: str | None, config: TFConfig) -> None:
    if role is not None and role.lower() != config.task.type:
        raise ContractError(
            "--role",
            f"is {role!r} but TF_CONFIG makes this replica {config.task.type}:{config.task.index}",
            "Give each replica type its own --role, or leave --role out (TF_CONFIG decides)",
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args("TensorFlow ParameterServerStrategy on the digits data", argv, epochs=10, lr=0.05)
    try:
        config = TFConfig.from_env()
        if config is None:
            raise ContractError("TF_CONFIG", "not set", "tf_ps needs a cluster with a chief, ps and workers")
        _check_role(args.role, config)
        if kt_tf.is_server_task(config):
            kt_tf.serve(config)
        start_watchdog(args.timeout_s * 2 + 60, "tf_ps chief")
        coordinate(args, config, Stopwatch())
    except ContractError as e:
        print(f"tf_ps: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
