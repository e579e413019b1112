"""Examples train to Succeeded in real containers on the real node: the operator (from its image, installed
by `kubectl apply -k manifests/base`) creates the pods, the kubelet runs them, peers find each other only
through cluster DNS (CoreDNS over the job's headless Service and its EndpointSlices), and every replica's
accuracy is read from the kubelet's log of its container, with `kubectl logs` and `kubetrain logs` alike.
Each file is applied as it is; a variant of one (a Service mode, a longer run to watch its progress) is a
case of its own beside the unchanged file."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import pytest

from kubetrain.testing.node_plane import NodePlane

from .examples import (
    InstanceLogs,
    apply,
    job_state,
    kubectl_results,
    kubetrain_logs,
    load_example,
    pod_names,
    rank_results,
    results,
    wait_cleaned,
    wait_finished,
    wait_pod_finished,
)
from .progress import Row, assert_progress_shown, lengthen, printer_columns

pytestmark = pytest.mark.node

ACCURACY = 0.8


@dataclass(frozen=True)
class Example:
    path: str
    image: str
    container: str
    ranks: tuple[int, ...]  # the `rank` of each result line, one line each (an evaluator prints -1)
    timeout: float = 900.0
    service_mode: str | None = None
    outlives: str | None = None  # a replica (`<rtype>-<index>`) still running at the job's verdict
    watched: bool = False  # run longer, and checked as `kubectl get` shows it (tests/node/progress.py)


def ranks(n: int) -> tuple[int, ...]:
    return tuple(range(n))


EXAMPLES = {
    "pytorch-ddp": Example("pytorch/pytorch-ddp.yaml", "pytorch", "pytorch", ranks(4)),
    "tf-multiworker": Example(
        "tensorflow/tf-multiworker-mirrored.yaml", "tensorflow", "tensorflow", ranks(4)
    ),
    "tf-ps-workers": Example("tensorflow/tf-ps-workers.yaml", "tensorflow", "tensorflow", ranks(1)),
    "jax-spmd": Example("jax/jax-spmd.yaml", "jax", "jax", ranks(2)),
    "pytorch-elastic": Example("pytorch/pytorch-elastic.yaml", "pytorch", "pytorch", ranks(4)),
    "mpi-allreduce-openmpi": Example("mpi/mpi-allreduce-openmpi.yaml", "mpi", "mpi", ranks(3)),
    "mpi-intel": Example("mpi/mpi-intel.yaml", "intelmpi", "mpi", ranks(4)),
    "mpi-mpich": Example("mpi/mpi-mpich.yaml", "mpich", "mpi", ranks(2)),
    "mpi-horovod-openmpi": Example("mpi/mpi-horovod-openmpi.yaml", "horovod", "launcher", ranks(4)),
    "xgboost-digits": Example("xgboost/xgboost-digits.yaml", "xgboost", "xgboost", ranks(3)),
    "paddle-collective": Example("paddle/paddle-collective.yaml", "paddle", "paddle", ranks(2)),
    # The Evaluator scores the Chief's final weights from the shared volume, after the Chief's success.
    "tf-chief-evaluator": Example(
        "tensorflow/tf-chief-evaluator.yaml",
        "tensorflow",
        "tensorflow",
        (-1, 0, 1, 2),
        outlives="evaluator-0",
    ),
    "pytorch-ddp-replica-services": Example(
        "pytorch/pytorch-ddp.yaml", "pytorch", "pytorch", ranks(4), service_mode="replica"
    ),
    "tf-multiworker-replica-services": Example(
        "tensorflow/tf-multiworker-mirrored.yaml",
        "tensorflow",
        "tensorflow",
        ranks(4),
        service_mode="replica",
    ),
    "pytorch-ddp-progress": Example("pytorch/pytorch-ddp.yaml", "pytorch", "pytorch", ranks(4), watched=True),
}
SERVICE_MODE = "kubetrain.io/service-mode"


def variant(example: Example, job: dict[str, Any]) -> dict[str, Any]:
    """The job as the case runs it: the file's, unless the case names a variant (printed when it does)."""
    if example.service_mode:
        job["metadata"].setdefault("annotations", {})[SERVICE_MODE] = example.service_mode
        print(f"{job['metadata']['name']}: annotated {SERVICE_MODE}: {example.service_mode}")
    return lengthen(job) if example.watched else job


def assert_trained_alike(found: list[dict[str, Any]]) -> None:
    """Every replica learned, and all ended with the same weights (each line must carry its digest)."""
    for result in found:
        assert result["accuracy"] >= ACCURACY, f"a replica learned too little: {result}"
    missing = [r for r in found if not r.get("weights_sha256")]
    assert not missing, f"result lines without a weights digest: {missing}"
    assert len({r["weights_sha256"] for r in found}) == 1, f"replicas ended apart: {found}"


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_trains_to_succeeded_in_real_containers(
    name: str,
    node_plane: NodePlane,
    operator_installed: dict[str, Any],
    trainer_images: Callable[..., None],
    namespace_on_node: str,
    volumes_for_claims: Callable[[str, list[Any]], None],
) -> None:
    example = EXAMPLES[name]
    trainer_images(example.image)
    namespace = namespace_on_node
    job, others = load_example(example.path)
    volumes_for_claims(namespace, others)
    apply(node_plane, namespace, [*others, variant(example, job)])
    sampling: AbstractContextManager[list[Row]] = (
        printer_columns(node_plane, namespace, job) if example.watched else nullcontext([])
    )
    with sampling as rows, InstanceLogs(node_plane, namespace, job, example.container) as logs:
        verdict = wait_finished(node_plane, namespace, job, example.timeout)
        if example.outlives:
            wait_pod_finished(node_plane, namespace, f"{job['metadata']['name']}-{example.outlives}", 300.0)
        pods = pod_names(node_plane, namespace, job)
        assert verdict == "Succeeded", {
            p: node_plane.kubectl("logs", p, namespace=namespace, check=False).stdout[-2000:] for p in pods
        }
        found = rank_results(node_plane, namespace, job, example.container, list(example.ranks), logs=logs)
    assert_trained_alike(found)
    wait_cleaned(node_plane, namespace, job)
    # `kubetrain logs` reads each pod's current instance, as `kubectl logs` does
    current = kubectl_results(node_plane, namespace, pod_names(node_plane, namespace, job), example.container)
    via_cli = results(kubetrain_logs(node_plane, namespace, job))
    assert sorted(map(str, via_cli)) == sorted(map(str, current))
    assert all(r in found for r in current), (current, found)
    if example.watched:
        rank0 = next(r for r in found if r["rank"] == 0)
        print(f"rank 0 trained {rank0['epochs']} epochs in {rank0['seconds']} s")
        assert_progress_shown(rows, job_state(node_plane, namespace, job)["status"], rank0)
