"""Failure paths with real containers and a real kubelet: `OnFailure` restarts the container in place (the
kubelet's restartCount), `ExitCode` recreates the pod for a retryable code and fails the job for a
permanent one. Each job is one PyTorchJob Master running `sh` in the trainer image.

Every pod is followed by a watch from before the job is applied (kubetrain.testing.watch), so a pod deleted
and made again between two looks is still seen, and "not recreated" is read from a record that holds the
pod's end (its exit code), not from one look at whatever pod holds the name then."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kubetrain.testing.node_plane import NodePlane
from kubetrain.testing.process import wait_until
from kubetrain.testing.watch import WatchLog

from .examples import FAIL_ONCE, apply, shell_job, wait_finished

pytestmark = pytest.mark.node

Obj = dict[str, Any]


def _pods(plane: NodePlane, namespace: str) -> WatchLog:
    return WatchLog(plane.rest, f"/api/v1/namespaces/{namespace}/pods")


def _statuses(version: Obj) -> list[Obj]:
    return list(version.get("status", {}).get("containerStatuses") or [])


def restarts(versions: list[Obj]) -> int:
    """The most restarts the kubelet counted in any version of the pod."""
    return max((s.get("restartCount", 0) for v in versions for s in _statuses(v)), default=0)


def exit_codes(versions: list[Obj]) -> set[int]:
    """Every exit code the pod's containers were seen to end with (the last state of a restarted one too)."""
    ended = [
        s.get(k, {}).get("terminated") for v in versions for s in _statuses(v) for k in ("state", "lastState")
    ]
    return {int(t["exitCode"]) for t in ended if t}


def test_on_failure_restarts_the_container_in_place(
    node_plane: NodePlane, trainer_images: Callable[..., None], namespace_on_node: str
) -> None:
    trainer_images("pytorch")
    namespace = namespace_on_node
    job = shell_job("once", "OnFailure", FAIL_ONCE.format(code=3))
    with _pods(node_plane, namespace) as pods:
        apply(node_plane, namespace, [job])
        assert wait_finished(node_plane, namespace, job, 300) == "Succeeded"
        pods.caught_up()
    versions = pods.versions("once-master-0")
    assert exit_codes(versions) == {3, 0}, versions[-1].get("status")
    assert restarts(versions) == 1
    assert len(pods.uids()["once-master-0"]) == 1, "restarted in place: the pod is the same one"


def test_exit_code_retryable_recreates_the_pod_permanent_fails_the_job(
    node_plane: NodePlane, trainer_images: Callable[..., None], namespace_on_node: str
) -> None:
    trainer_images("pytorch")
    namespace = namespace_on_node
    retry = shell_job("retry", "ExitCode", "sleep 1; exit 137")
    permanent = shell_job("permanent", "ExitCode", "exit 1")
    with _pods(node_plane, namespace) as pods:
        apply(node_plane, namespace, [retry, permanent])
        assert wait_finished(node_plane, namespace, permanent, 300) == "Failed"
        # The operator handles both jobs; by the time it made the retryable pod again, a permanent pod made
        # again (a retry of exit code 1 until backoffLimit) would be in the record too.
        wait_until(
            "retry-master-0 recreated after exit 137",
            lambda: len(pods.uids().get("retry-master-0", ())) >= 2,
            timeout=120,
            interval=1.0,
        )
        pods.caught_up()
    versions = pods.versions("permanent-master-0")
    seen = [_statuses(v) for v in versions[-1:]]
    assert 1 in exit_codes(versions), f"the watch never saw the permanent pod exit 1: {seen}"
    assert len(pods.uids()["permanent-master-0"]) == 1, "exit code 1 is permanent: no new pod"
    assert restarts(versions) == 0, "exit code 1 is permanent: no restart in place"
    assert 137 in exit_codes(pods.versions("retry-master-0"))
