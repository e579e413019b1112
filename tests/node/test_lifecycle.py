"""A job's lifecycle acted out on real containers: a container killed behind the operator's back (through
containerd, as `crictl stop` would) is restarted in place under OnFailure; activeDeadlineSeconds stops
running containers; cleanPodPolicy All removes a finished job's pods; suspend stops the containers and
resume starts new ones. A pod on a real node is gone from the API only once its kubelet has killed its
containers, so "the pod is gone" here means "its containers were stopped"."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kubetrain.testing.node_plane import NodePlane
from kubetrain.testing.process import wait_until

from .examples import apply, shell_job, wait_finished

pytestmark = pytest.mark.node

SLEEP = "echo started; sleep 600"


def _pod(plane: NodePlane, namespace: str, name: str) -> dict[str, Any]:
    status, pod = plane.rest.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    return dict(pod) if status == 200 else {}


def _running(plane: NodePlane, namespace: str, name: str) -> Callable[[], bool]:
    def check() -> bool:
        statuses = _pod(plane, namespace, name).get("status", {}).get("containerStatuses", [])
        return bool(statuses) and "running" in statuses[0].get("state", {})

    return check


def _gone(plane: NodePlane, namespace: str, name: str) -> Callable[[], bool]:
    return lambda: not _pod(plane, namespace, name)


def _patch_job(plane: NodePlane, namespace: str, name: str, run_policy: dict[str, Any]) -> None:
    patch = json.dumps({"spec": {"runPolicy": run_policy}})
    plane.kubectl("patch", "pytorchjob", name, "--type=merge", "-p", patch, namespace=namespace)


@pytest.fixture
def node_ns(
    node_plane: NodePlane, operator_installed: Any, trainer_images: Callable[..., None]
) -> Iterator[str]:
    trainer_images("pytorch")
    name = node_plane.create_namespace("node-")
    yield name
    node_plane.delete_namespace(name)


def test_a_container_killed_behind_the_operators_back_restarts_in_place(
    node_plane: NodePlane, node_ns: str
) -> None:
    apply(node_plane, node_ns, [shell_job("killed", "OnFailure", SLEEP)])
    wait_until("killed-master-0 running", _running(node_plane, node_ns, "killed-master-0"), timeout=120)
    pod = _pod(node_plane, node_ns, "killed-master-0")
    container = pod["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://")
    node_plane.node.ctr("tasks", "kill", "-s", "SIGKILL", container)

    def restarted() -> bool:
        statuses = _pod(node_plane, node_ns, "killed-master-0")["status"]["containerStatuses"]
        return bool(statuses[0]["restartCount"] == 1 and "running" in statuses[0]["state"])

    wait_until("the kubelet restarted the killed container", restarted, timeout=120)
    assert _pod(node_plane, node_ns, "killed-master-0")["metadata"]["uid"] == pod["metadata"]["uid"]


def test_active_deadline_stops_running_containers(node_plane: NodePlane, node_ns: str) -> None:
    job = shell_job("deadline", "OnFailure", SLEEP)
    job["spec"]["runPolicy"].update(activeDeadlineSeconds=20, cleanPodPolicy="Running")
    apply(node_plane, node_ns, [job])
    wait_until("deadline-master-0 running", _running(node_plane, node_ns, "deadline-master-0"), timeout=120)
    assert wait_finished(node_plane, node_ns, job, 120) == "Failed"
    wait_until("deadline-master-0 stopped", _gone(node_plane, node_ns, "deadline-master-0"), timeout=120)


def test_clean_pod_policy_all_removes_a_finished_jobs_pods(node_plane: NodePlane, node_ns: str) -> None:
    job = shell_job("clean", "OnFailure", "echo done")
    job["spec"]["runPolicy"]["cleanPodPolicy"] = "All"
    apply(node_plane, node_ns, [job])
    assert wait_finished(node_plane, node_ns, job, 120) == "Succeeded"
    wait_until("clean-master-0 removed", _gone(node_plane, node_ns, "clean-master-0"), timeout=120)


def test_suspend_stops_the_containers_and_resume_starts_new_ones(node_plane: NodePlane, node_ns: str) -> None:
    apply(node_plane, node_ns, [shell_job("pause", "OnFailure", SLEEP)])
    wait_until("pause-master-0 running", _running(node_plane, node_ns, "pause-master-0"), timeout=120)
    first = _pod(node_plane, node_ns, "pause-master-0")["metadata"]["uid"]
    _patch_job(node_plane, node_ns, "pause", {"suspend": True})
    wait_until("suspended: pause-master-0 stopped", _gone(node_plane, node_ns, "pause-master-0"), timeout=120)
    _patch_job(node_plane, node_ns, "pause", {"suspend": False})
    wait_until(
        "resumed: pause-master-0 running", _running(node_plane, node_ns, "pause-master-0"), timeout=120
    )
    assert _pod(node_plane, node_ns, "pause-master-0")["metadata"]["uid"] != first
