"""Pod-side TensorFlow helper: pick and build the tf.distribute strategy that TF_CONFIG implies.

- no TF_CONFIG, or a one-replica cluster: the default strategy;
- workers (and a chief) without ps: MultiWorkerMirroredStrategy, with a finite cluster-registration and
  collective timeout (TensorFlow would otherwise wait for a missing worker forever, ignoring SIGTERM);
- a chief, ps and workers: ParameterServerStrategy on the chief, while ps and worker tasks `serve()`.

The Keras trap: TensorFlow >= 2.16 ships Keras 3, whose `model.fit` fails under MultiWorkerMirroredStrategy
(keras-team/keras#20585). `configure_keras()`, called before TensorFlow is imported, switches `tf.keras` to
tf-keras (Keras 2) when it is installed. tensorflow is imported lazily; the operator never imports this.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from typing import Any, NoReturn

from kubetrain.podcontract import ContractError, StrategyKind, TFConfig, TFReplicaType
from kubetrain.podcontract.names import TF_CONFIG, TF_USE_LEGACY_KERAS

__all__ = ["configure_keras", "is_server_task", "make_strategy", "serve"]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 300.0


def configure_keras() -> bool:
    """Make `tf.keras` tf-keras (Keras 2) when tf-keras is installed and the user did not choose.

    Returns whether legacy Keras is in effect. Must run before the first `import tensorflow`: TensorFlow
    reads TF_USE_LEGACY_KERAS once, at import.
    """
    if TF_USE_LEGACY_KERAS not in os.environ and importlib.util.find_spec("tf_keras") is not None:
        if "tensorflow" in sys.modules:
            log.warning(
                "configure_keras() ran after tensorflow was imported: %s is ignored", TF_USE_LEGACY_KERAS
            )
        os.environ[TF_USE_LEGACY_KERAS] = "1"
    return os.environ.get(TF_USE_LEGACY_KERAS, "").lower() in ("1", "true")


def is_server_task(config: TFConfig | None) -> bool:
    """ps and worker tasks of a parameter-server cluster only serve; the chief (or, without one, worker 0)
    drives them."""
    if config is None or config.strategy_kind() is not StrategyKind.PARAMETER_SERVER:
        return False
    return config.with_coordinator().task.type in (TFReplicaType.PS, TFReplicaType.WORKER)


def make_strategy(config: TFConfig | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
    """The strategy for this replica, from `config` (default: TF_CONFIG in the environment)."""
    config = TFConfig.from_env() if config is None else config
    kind = StrategyKind.DEFAULT if config is None else config.strategy_kind()
    if config is not None and is_server_task(config):
        raise ContractError(
            TF_CONFIG,
            f"task {config.task.type}:{config.task.index} is a server of a parameter-server cluster",
            "ps and worker tasks call kubetrain.runtimes.tensorflow.serve(); only the chief builds one",
        )
    tf = _tensorflow()
    if kind is StrategyKind.MULTI_WORKER_MIRRORED:
        assert config is not None
        _bound_cluster_registration(config, timeout_s)
        options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=timeout_s)
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    if kind is StrategyKind.PARAMETER_SERVER:
        assert config is not None
        return tf.distribute.ParameterServerStrategy(_ps_resolver(tf, config.with_coordinator()))
    return tf.distribute.get_strategy()


def serve(config: TFConfig | None = None) -> NoReturn:
    """Run this ps or worker task's gRPC server until the process is killed (TFJob's success policy ends
    the job when the chief succeeds, and the operator then deletes these pods)."""
    config = TFConfig.from_env() if config is None else config
    if config is None or not is_server_task(config):
        raise ContractError(
            TF_CONFIG, "this task is not a ps or worker of a parameter-server cluster", _SERVE_FIX
        )
    tf = _tensorflow()
    effective = config.with_coordinator()
    server = tf.distribute.Server(
        _ps_resolver(tf, effective).cluster_spec(),
        job_name=effective.task.type,
        task_index=effective.task.index,
        protocol="grpc",
        start=True,
    )
    log.info("serving %s:%d at %s", effective.task.type, effective.task.index, effective.address)
    server.join()
    raise SystemExit(0)  # join() only returns if the server is stopped


_SERVE_FIX = "serve() is for ps and worker tasks when the TFJob has PS replicas; others call make_strategy()"


def _ps_resolver(tf: Any, config: TFConfig) -> Any:
    """A resolver for the parameter-server view (worker 0 promoted when there is no chief); evaluators stay
    out of it, as they take no part in the training cluster."""
    jobs = {
        job: list(addresses) for job, addresses in config.cluster.items() if job != TFReplicaType.EVALUATOR
    }
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(jobs), task_type=config.task.type, task_id=config.task.index, rpc_layer="grpc"
    )


def _tensorflow() -> Any:
    configure_keras()
    import tensorflow as tf  # noqa: PLC0415 (lazy: the operator imports kubetrain.runtimes, never TensorFlow)

    return tf


def _bound_cluster_registration(config: TFConfig, timeout_s: float) -> None:
    """Configure TF's coordination service as MultiWorkerMirroredStrategy would, plus a registration
    timeout, so that a worker whose peers never come fails instead of waiting forever. Uses a TensorFlow
    internal API: when it is missing, log and go on (the caller's own watchdog then has to save us)."""
    try:
        from tensorflow.python.distribute import collective_all_reduce_strategy as cars  # noqa: PLC0415
        from tensorflow.python.eager import context  # noqa: PLC0415

        coordinated_job = cars.coordination_config_pb2.CoordinatedJob
    except (ImportError, AttributeError):  # pragma: no cover - depends on the TensorFlow version
        log.warning("TensorFlow internals moved: no cluster registration timeout")
        return
    if context.context().coordination_service is not None:
        return
    jobs = [job for job in (TFReplicaType.CHIEF, TFReplicaType.WORKER) if config.count(job) > 0]
    leader_job = TFReplicaType.CHIEF if config.count(TFReplicaType.CHIEF) else TFReplicaType.WORKER
    context.context().configure_coordination_service(
        service_type="standalone",
        service_leader=f"/job:{leader_job}/replica:0/task:0",
        cluster_register_timeout_in_ms=int(timeout_s * 1000),
        coordinated_jobs=[coordinated_job(name=job.value, num_tasks=config.count(job)) for job in jobs],
    )
    # without the barrier, the registration timeout is not enforced while the leader waits for stragglers
    service_config = context.context().coordination_service
    if hasattr(service_config, "cluster_register_with_barrier"):
        service_config.cluster_register_with_barrier = True
