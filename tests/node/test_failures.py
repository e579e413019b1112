"""Failure paths with real containers and a real kubelet: `OnFailure` restarts the container in place (the
kubelet's restartCount), `ExitCode` recreates the pod for a retryable code and fails the job for a
permanent one. Each job is one PyTorchJob Master running `sh` in the trainer image."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from kubetrain.testing.node_plane import NodePlane
from kubetrain.testing.process import wait_until

from .examples import FAIL_ONCE, apply, shell_job, wait_finished

pytestmark = pytest.mark.node


def _pod(plane: NodePlane, namespace: str, name: str) -> dict[str, Any]:
    return dict(json.loads(plane.kubectl("get", "pod", name, "-o", "json", namespace=namespace).stdout))


def test_on_failure_restarts_the_container_in_place(
    node_plane: NodePlane, operator_installed: Any, trainer_images: Callable[..., None]
) -> None:
    trainer_images("pytorch")
    namespace = node_plane.create_namespace("node-")
    job = shell_job("once", "OnFailure", FAIL_ONCE.format(code=3))
    apply(node_plane, namespace, [job])
    assert wait_finished(node_plane, namespace, job, 300) == "Succeeded"
    pod = _pod(node_plane, namespace, "once-master-0")
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 1
    node_plane.delete_namespace(namespace)


def test_exit_code_retryable_recreates_the_pod_permanent_fails_the_job(
    node_plane: NodePlane, operator_installed: Any, trainer_images: Callable[..., None]
) -> None:
    trainer_images("pytorch")
    namespace = node_plane.create_namespace("node-")
    retry = shell_job("retry", "ExitCode", "sleep 1; exit 137")
    permanent = shell_job("permanent", "ExitCode", "exit 1")
    apply(node_plane, namespace, [retry, permanent])
    assert wait_finished(node_plane, namespace, permanent, 300) == "Failed"
    first = _pod(node_plane, namespace, "retry-master-0")["metadata"]["uid"]

    def recreated() -> bool:
        pod = json.loads(
            node_plane.kubectl(
                "get", "pod", "retry-master-0", "-o", "json", namespace=namespace, check=False
            ).stdout
            or "{}"
        )
        return bool(pod) and pod["metadata"]["uid"] != first

    wait_until("retry-master-0 recreated after exit 137", recreated, timeout=120, interval=1.0)
    node_plane.delete_namespace(namespace)
