"""On the real node, the pytorch-ddp example as applied from examples/ resumes from its checkpoint when one
rank's container is killed, and ends exactly where an uninterrupted run ends.

The file runs twice, one job after the other (the 2-core node holds one at a time): once untouched, and once
with worker-1's container SIGKILLed (through containerd, behind the kubelet's back) as soon as it signals,
with its `kubetrain-train` line, that it trains epoch 2 or later. The example's failure policy restarts the
gang, rank 0 reads the newest checkpoint from the file's PersistentVolumeClaim (a static volume here: the
plane has no provisioner) and sends it to the others. Then:
- the job Succeeds after a gang restart (its Event), every rank resumed from the same epoch;
- every rank's final accuracy and weights digest are the uninterrupted run's;
- fewer epochs were trained twice (begun before the kill and again after it) than the run completed;
- the gang restarted in place: the operator (`--gang-restart=auto`, and this node's kubelet 1.36 declares
  `RestartAllContainersOnContainerExits`) gave every rank a `RestartAllContainers` rule, no pod was
  recreated (one UID each in a watch that ran from before the job was applied), every rank's container
  restarted, and the ledger counts one gang restart, in place.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kubetrain.runtimes.examples.common import TRAIN_PREFIX
from kubetrain.testing.node_plane import NodePlane
from kubetrain.testing.process import wait_until
from kubetrain.testing.watch import WatchLog

from .examples import InstanceLogs, apply, job_state, load_example, rank_results, wait_finished

pytestmark = pytest.mark.node

EXAMPLE = "pytorch/pytorch-ddp.yaml"
VICTIM = "pytorch-ddp-worker-1"
CONTAINER = "pytorch"
RANKS = [0, 1, 2, 3]
KILL_AT = 2
Obj = dict[str, Any]


def train_epochs(log: str) -> set[int]:
    """The epochs a log's `kubetrain-train` lines say were trained."""
    lines = (line.partition(TRAIN_PREFIX)[2] for line in log.splitlines())
    return {int(json.loads(rest)["epoch"]) for rest in lines if rest}


def run(plane: NodePlane, namespace: str, provide: Callable[[str, list[Any]], None]) -> Obj:
    """Apply the example (its claim given a volume) into `namespace`; the job."""
    job, others = load_example(EXAMPLE)
    provide(namespace, others)
    apply(plane, namespace, [*others, job])
    return job


def kill_when_training(plane: NodePlane, namespace: str) -> set[int]:
    """SIGKILL the victim's container once it trains epoch KILL_AT or later; the epochs it had begun."""
    begun: set[int] = set()

    def reached() -> bool:
        log = plane.kubectl("logs", VICTIM, "-c", CONTAINER, namespace=namespace, check=False).stdout
        begun.update(train_epochs(log))
        return max(begun, default=-1) >= KILL_AT

    wait_until(f"{VICTIM} trains epoch {KILL_AT}", reached, timeout=600, interval=0.2)
    status, pod = plane.rest.get(f"/api/v1/namespaces/{namespace}/pods/{VICTIM}")
    assert status == 200, pod
    container = pod["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://")
    plane.node.ctr("tasks", "kill", "-s", "SIGKILL", container)
    print(f"killed {VICTIM} in epoch {max(begun)}")
    return begun


@pytest.fixture
def second_namespace(node_plane: NodePlane, namespace_on_node: str) -> Iterator[str]:
    name = node_plane.create_namespace("node-")
    yield name
    node_plane.delete_namespace(name)


def test_a_killed_ranks_gang_resumes_and_ends_as_an_uninterrupted_run(
    node_plane: NodePlane,
    trainer_images: Callable[..., None],
    namespace_on_node: str,
    second_namespace: str,
    volumes_for_claims: Callable[[str, list[Any]], None],
) -> None:
    trainer_images("pytorch")
    whole, killed = namespace_on_node, second_namespace
    job = run(node_plane, whole, volumes_for_claims)
    with InstanceLogs(node_plane, whole, job, CONTAINER) as logs:
        assert wait_finished(node_plane, whole, job, 900) == "Succeeded"
        reference = rank_results(node_plane, whole, job, CONTAINER, RANKS, logs=logs)
    expected = {(r["accuracy"], r["weights_sha256"], r["resumed_from"]) for r in reference}
    assert len(expected) == 1, reference
    ((accuracy, digest, resumed_from),) = expected
    assert resumed_from is None, reference

    with (
        WatchLog(node_plane.rest, f"/api/v1/namespaces/{killed}/pods") as watch,
        InstanceLogs(node_plane, killed, job, CONTAINER) as logs,
    ):
        run(node_plane, killed, volumes_for_claims)
        before = kill_when_training(node_plane, killed)
        assert wait_finished(node_plane, killed, job, 900) == "Succeeded"
        watch.caught_up()
        found = rank_results(node_plane, killed, job, CONTAINER, RANKS, logs=logs)
        made = {n: len(u) for n, u in watch.uids().items()}
        try:
            assert made == dict.fromkeys(_pods(job), 1), f"a pod was recreated: {made}"
            assert_restarted_in_place(node_plane, killed, job)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{_story(node_plane, killed, logs)}") from None
    restarts = node_plane.kubectl(
        "get", "events", "--field-selector", "reason=PyTorchJobGangRestart", "-o", "name", namespace=killed
    )
    assert restarts.stdout.split(), "no gang restart Event"
    resumed = {r["resumed_from"] for r in found}
    assert len(resumed) == 1 and KILL_AT <= min(resumed) < 6, found
    for r in found:
        assert (r["accuracy"], r["weights_sha256"]) == (accuracy, digest), (r, expected)
        assert r["epochs_trained"] == 6 - r["resumed_from"], r

    after = set().union(*(train_epochs(node_plane.kubectl(
        "logs", pod, "-c", CONTAINER, namespace=killed).stdout) for pod in _pods(job)))  # fmt: skip
    assert after == set(range(min(resumed), 6)), after
    twice = before & after
    assert len(twice) < 6, (before, after)
    print(f"resumed from epoch {min(resumed)}; epochs trained twice {sorted(twice)}")


def assert_restarted_in_place(plane: NodePlane, namespace: str, job: Obj) -> None:
    """Every rank's main container has the operator's rule and restarted; the ledger: one gang restart."""
    status, found = plane.rest.get(f"/api/v1/namespaces/{namespace}/pods")
    assert status == 200, found
    pods = {p["metadata"]["name"]: p for p in found["items"]}
    for name in _pods(job):
        spec = next(c for c in pods[name]["spec"]["containers"] if c["name"] == CONTAINER)
        assert [r["action"] for r in spec.get("restartPolicyRules") or []] == ["RestartAllContainers"], spec
        main = next(c for c in pods[name]["status"]["containerStatuses"] if c["name"] == CONTAINER)
        assert main["restartCount"] >= 1, (name, main)
    ledger = json.loads(job_state(plane, namespace, job)["metadata"]["annotations"]["kubetrain.io/ledger"])
    gang = ledger["gang"]
    assert (gang["mode"], gang["restarts"]) == ("in-place", 1), gang
    assert sum(gang["ranks"].values()) >= len(RANKS), gang


def _story(plane: NodePlane, namespace: str, logs: InstanceLogs) -> str:
    """What happened to the job, for a failure's message: the operator's Events and the kubelet's kills in
    order, the end of every rank instance's log, and the operator's log lines about the namespace."""
    events = plane.kubectl(
        "get", "events", "--sort-by=.lastTimestamp", "-o",
        "custom-columns=AT:.lastTimestamp,REASON:.reason,OBJECT:.involvedObject.name,MESSAGE:.message",
        namespace=namespace, check=False,
    ).stdout.splitlines()  # fmt: skip
    told = [e for e in events if "Container" not in e and "Scheduled" not in e]
    log = plane.kubectl(
        "logs", "deployment/kubetrain-operator", "--tail=2000", namespace="kubetrain-system", check=False
    ).stdout.splitlines()
    ours = [line[:400] for line in log if namespace in line][-40:]
    return "\n".join(["events:", *told, "ranks:", logs.tails(), "operator log:", *ours])


def _pods(job: Obj) -> list[str]:
    name = job["metadata"]["name"]
    return [f"{name}-master-0", *(f"{name}-worker-{i}" for i in range(3))]
