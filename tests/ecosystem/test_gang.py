"""Gang scheduling for real: the scheduler-plugins scheduler (v0.33.5, Coscheduling plugin) as a second
scheduler, the operator installed with `manifests/overlays/scheduler-plugins`.

What a user relies on, for each kind: a job whose pods do not all fit starts none of them (a partial
gang would hold resources and hang in its first collective), and starts all of them once a node with
room appears; the PodGroup's minMember counts every replica, an MPIJob's launcher too.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubetrain.testing import ControlPlane, FakeNode
from kubetrain.testing.coscheduling import SCHEDULER_NAME, Coscheduler
from kubetrain.testing.process import wait_until

from .harness import (
    LOGS,
    Obj,
    component,
    fake_nodes,
    finish,
    job,
    own_plane,
    pod_names,
    pods,
    shipped_operator,
    submit,
    wait_running,
)

pytestmark = pytest.mark.ecosystem

KINDS = ("TFJob", "PyTorchJob", "MPIJob")
PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
NODES = fake_nodes(("gang-node", "3", {}))
"""Room for three pods of 1 CPU: a gang of four does not fit."""
EXTRA = FakeNode("gang-extra", cpu="1", gpus=0)


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A plane with the coscheduling scheduler and the operator of the scheduler-plugins overlay."""
    component("scheduler-plugins")
    with (
        own_plane(NODES) as plane,
        Coscheduler(plane, tmp_path_factory.mktemp("coscheduler")) as scheduler,
    ):
        LOGS["scheduler-plugins"] = scheduler.log_path
        with shipped_operator(plane, "overlays/scheduler-plugins", tmp_path_factory.mktemp("operator")):
            yield plane


@pytest.fixture
def ns(plane: ControlPlane) -> Iterator[str]:
    name = plane.create_namespace("gang-")
    yield name
    plane.delete_namespace(name, wait=True)
    plane.kubectl("delete", "node", EXTRA.name, "--ignore-not-found")


def refused(pod: Obj) -> bool:
    """Whether the scheduler tried the pod and left it unscheduled."""
    found = [c for c in pod.get("status", {}).get("conditions") or [] if c["type"] == "PodScheduled"]
    return bool(found) and found[0]["status"] == "False" and not pod["spec"].get("nodeName")


@pytest.mark.parametrize("kind", KINDS)
def test_a_gang_that_does_not_fit_starts_no_pod_until_a_node_has_room(
    plane: ControlPlane, ns: str, kind: str
) -> None:
    body = job(kind, "gang", workers=3)
    submit(plane, ns, body)
    names = pod_names(body)
    assert len(names) == 4

    def all_refused() -> bool:
        found = pods(plane, ns)
        return all(n in found and refused(found[n]) for n in names)

    wait_until("every pod of the gang tried and refused", all_refused, timeout=120, interval=0.5)
    status, group = plane.rest.get(f"{PODGROUPS}/namespaces/{ns}/podgroups/gang")
    assert status == 200, group
    assert group["spec"]["minMember"] == 4, "every replica (a launcher too) is a member of the gang"
    found = pods(plane, ns)
    for name in names:
        assert found[name]["spec"]["schedulerName"] == SCHEDULER_NAME
        assert found[name]["metadata"]["labels"][GROUP_LABEL] == "gang"
    assert not any(p["spec"].get("nodeName") for p in found.values()), "a part of the gang started alone"

    plane.add_node(EXTRA)
    running = wait_running(plane, ns, body, timeout=180)
    assert {p["spec"]["nodeName"] for p in running.values()} == {NODES[0].name, EXTRA.name}
    finish(plane, ns, body)
