"""JAXJob example: data-parallel SPMD training of a small MLP on the digits data, across JAX processes.

Run one process per replica with the env the operator renders (COORDINATOR_ADDRESS, COORDINATOR_PORT,
NUM_PROCESSES, PROCESS_ID):
    python -m kubetrain.runtimes.examples.jax_spmd --epochs 30
Alone (no such env) it trains as one process. After `jax.distributed` is up, `jax.devices()` holds the devices
of every process; the parameters are replicated over a one-axis mesh of them and each global batch is split
along it, each process feeding only its own rows. One `jax.jit` step then computes the gradient of the
global batch's mean loss: XLA all-reduces the per-process partial gradients (gloo between CPU processes).

Every process prints a `kubetrain-result` line with its test accuracy, the last epoch's mean training loss
and the digest of its final weights: the all-reduce makes the digests identical in every process.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from kubetrain.podcontract import ContractError
from kubetrain.runtimes import jax as kt_jax
from kubetrain.runtimes.examples.common import (
    Digits,
    Stopwatch,
    TrainArgs,
    load_digits,
    maybe_fail,
    parse_args,
    print_result,
    report_epoch,
    start_watchdog,
    weights_digest,
)

__all__ = ["evaluate", "init_params", "main", "train"]

HIDDEN = 64
Params = dict[str, Any]


def init_params(data: Digits, seed: int) -> dict[str, np.ndarray[Any, Any]]:
    """The same initial weights in every process (same seed): a 64-unit ReLU layer and a softmax layer."""
    rng = np.random.default_rng(seed)
    features, classes = data.num_features, data.num_classes
    return {
        "w1": (rng.standard_normal((features, HIDDEN)) / np.sqrt(features)).astype(np.float32),
        "b1": np.zeros(HIDDEN, np.float32),
        "w2": (rng.standard_normal((HIDDEN, classes)) / np.sqrt(HIDDEN)).astype(np.float32),
        "b2": np.zeros(classes, np.float32),
    }


def _loss(jnp: Any, jax: Any, params: Params, x: Any, y: Any) -> Any:
    hidden = jax.nn.relu(x @ params["w1"] + params["b1"])
    logits = hidden @ params["w2"] + params["b2"]
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


def train(ctx: kt_jax.JaxContext, args: TrainArgs, data: Digits) -> tuple[Params, float]:
    """SGD with momentum on global batches of `batch_size` rows per process; (final weights, last epoch's
    mean loss), both as host numpy values identical in every process."""
    jax: Any = importlib.import_module("jax")
    jnp: Any = importlib.import_module("jax.numpy")
    sharding: Any = importlib.import_module("jax.sharding")
    mesh = sharding.Mesh(np.array(jax.devices()), ("data",))
    rows, whole = (
        sharding.NamedSharding(mesh, sharding.PartitionSpec("data")),
        sharding.NamedSharding(mesh, sharding.PartitionSpec()),
    )

    def global_array(host: np.ndarray[Any, Any], where: Any) -> Any:
        # every process holds the whole host array; each materialises only its own shards of it
        return jax.make_array_from_callback(host.shape, where, lambda index: host[index])

    def step(params: Params, velocity: Params, x: Any, y: Any) -> tuple[Params, Params, Any]:
        loss, grads = jax.value_and_grad(lambda p: _loss(jnp, jax, p, x, y))(params)
        velocity = jax.tree.map(lambda v, g: 0.9 * v + g, velocity, grads)
        params = jax.tree.map(lambda p, v: p - args.lr * v, params, velocity)
        return params, velocity, loss

    jitted: Any = jax.jit(step)
    host = init_params(data, args.seed)
    params = {k: global_array(v, whole) for k, v in host.items()}
    velocity = {k: global_array(np.zeros_like(v), whole) for k, v in host.items()}
    batch = args.batch_size * ctx.num_processes
    steps = len(data.x_train) // batch
    mean_loss = float("nan")
    for epoch in range(args.epochs):
        maybe_fail(args, epoch, ctx.process_id)
        order = np.random.default_rng(args.seed * 1000 + epoch).permutation(len(data.x_train))
        losses = []
        for s in range(steps):
            chosen = order[s * batch : (s + 1) * batch]
            x = global_array(data.x_train[chosen], rows)
            y = global_array(data.y_train[chosen].astype(np.int32), rows)
            params, velocity, loss = jitted(params, velocity, x, y)
            losses.append(loss)
        mean_loss = float(np.mean([_local(loss) for loss in losses]))
        if ctx.process_id == 0:
            accuracy = evaluate({k: _local(v) for k, v in params.items()}, data)
            report_epoch(0, epoch, args.epochs, loss=mean_loss, accuracy=accuracy)
    return {k: _local(v) for k, v in params.items()}, round(mean_loss, 4)


def _local(value: Any) -> np.ndarray[Any, Any]:
    """This process's copy of a replicated global array."""
    return np.asarray(value.addressable_data(0))


def evaluate(params: Params, data: Digits) -> float:
    hidden = np.maximum(data.x_test @ params["w1"] + params["b1"], 0)
    predicted = (hidden @ params["w2"] + params["b2"]).argmax(axis=1)
    return round(float((predicted == data.y_test).mean()), 4)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args("JAX data-parallel SPMD on the digits data", argv, epochs=30, batch_size=32, lr=0.05)
    start_watchdog(args.timeout_s * 2 + 60, "jax_spmd")
    clock = Stopwatch()
    try:
        with kt_jax.distributed(timeout_s=args.timeout_s) as ctx:
            data = load_digits()
            params, loss = train(ctx, args, data)
            print_result(
                accuracy=evaluate(params, data),
                epochs=args.epochs,
                loss=loss,
                num_processes=ctx.num_processes,
                process_id=ctx.process_id,
                rank=ctx.process_id,
                seconds=clock.seconds(),
                weights_sha256=weights_digest(params[k] for k in sorted(params)),
            )
    except ContractError as e:
        print(f"jax_spmd: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
