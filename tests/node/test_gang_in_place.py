"""A gang restarted in place by a real kubelet (1.36, `RestartAllContainers`): the pytorch-ddp example
with a failure policy that restarts the gang, one rank's container killed through containerd.

The operator runs as `kubectl apply -k manifests/base` installs it (`--gang-restart=auto`: the node's
kubelet declares `RestartAllContainersOnContainerExits`). The killed rank's pod restarts in place by its
rule, its peers exit when gloo loses it and restart in place by theirs: the same four pods (one UID each in
a watch that ran from before the job was applied) train again, the job succeeds, and the ledger counts one
gang restart. The seconds from the kill until every pod is Running and Ready again are printed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from kubetrain.testing.node_plane import NodePlane
from kubetrain.testing.process import wait_until
from kubetrain.testing.watch import WatchLog

from .examples import apply, job_state, load_example, wait_finished
from .progress import lengthen

pytestmark = pytest.mark.node

Obj = dict[str, Any]
PODS = ["pytorch-ddp-master-0", "pytorch-ddp-worker-0", "pytorch-ddp-worker-1", "pytorch-ddp-worker-2"]
POLICY = {"maxGangRestarts": 2, "rules": [{"action": "RestartGang"}]}


def _pods(plane: NodePlane, namespace: str) -> dict[str, Obj]:
    status, found = plane.rest.get(f"/api/v1/namespaces/{namespace}/pods")
    assert status == 200, found
    return {p["metadata"]["name"]: p for p in found["items"]}


def _main(pod: Obj) -> Obj:
    return next(s for s in pod.get("status", {}).get("containerStatuses") or [] if s["name"] == "pytorch")


def _ready(pod: Obj) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _all_back(plane: NodePlane, namespace: str) -> Callable[[], bool]:
    """Every rank's pod restarted (restartCount >= 1), its main container running, and Ready."""

    def check() -> bool:
        pods = _pods(plane, namespace)
        return all(
            n in pods and _ready(pods[n]) and _main(pods[n]).get("restartCount", 0) >= 1
            and "running" in _main(pods[n]).get("state", {})
            for n in PODS
        )  # fmt: skip

    return check


def test_a_killed_rank_restarts_its_gang_in_place(
    node_plane: NodePlane, trainer_images: Callable[..., None], namespace_on_node: str
) -> None:
    trainer_images("pytorch")
    namespace = namespace_on_node
    job, _ = load_example("pytorch/pytorch-ddp.yaml")
    job = lengthen(job, 100)
    job["metadata"]["annotations"] = {"kubetrain.io/failure-policy": json.dumps(POLICY)}
    with WatchLog(node_plane.rest, f"/api/v1/namespaces/{namespace}/pods") as watch:
        apply(node_plane, namespace, [job])
        wait_until("the first progress report", _training(node_plane, namespace, job), timeout=300)
        pods = _pods(node_plane, namespace)
        rules = {n: _main_spec(pods[n]).get("restartPolicyRules") for n in PODS}
        assert all(r and r[0]["action"] == "RestartAllContainers" for r in rules.values()), rules
        victim = _main(pods["pytorch-ddp-worker-0"])["containerID"].removeprefix("containerd://")
        killed = time.monotonic()
        node_plane.node.ctr("tasks", "kill", "-s", "SIGKILL", victim)
        wait_until(
            "every rank restarted in place", _all_back(node_plane, namespace), timeout=120, interval=0.2
        )
        back = time.monotonic() - killed
        print(f"in-place gang restart: every pod Running and Ready {back:.1f} s after the kill")
        assert wait_finished(node_plane, namespace, job, 600) == "Succeeded"
        watch.caught_up()
    assert {n: len(u) for n, u in watch.uids().items()} == dict.fromkeys(PODS, 1), "no pod was recreated"
    final = _pods(node_plane, namespace)
    assert all(_main(final[n])["restartCount"] >= 1 for n in PODS), "every rank restarted"
    annotations = job_state(node_plane, namespace, job)["metadata"]["annotations"]
    gang = json.loads(annotations["kubetrain.io/ledger"])["gang"]
    assert (gang["mode"], gang["restarts"]) == ("in-place", 1), gang
    assert sum(gang["ranks"].values()) >= 4, gang


def _training(plane: NodePlane, namespace: str, job: Obj) -> Callable[[], bool]:
    return lambda: bool(job_state(plane, namespace, job).get("status", {}).get("trainerStatus"))


def _main_spec(pod: Obj) -> Obj:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "pytorch")
