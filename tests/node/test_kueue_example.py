"""examples/pytorch/pytorch-kueue.yaml on the real node: Kueue v0.19 (built by `hack/ecosystem.sh`, run as
its standard install runs it: its default configuration plus manifests/kueue/integrations.yaml, webhooks
registered; kubetrain.testing.kueue) admits the PyTorchJob from the LocalQueue the example names through
kubetrain's integration (Kueue's own kubeflow integration is off in its default configuration), and its pod
trains to Succeeded in a real container. The queue is what an administrator would make: a ResourceFlavor, a
ClusterQueue for the test's namespace and the LocalQueue. The operator is restarted once Kueue runs, as
docs/ecosystem.md tells a user who installs Kueue after kubetrain: it reads what Kueue integrates at start."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kubetrain.testing.ecosystem import MissingComponentError, find_component
from kubetrain.testing.kueue import Kueue
from kubetrain.testing.node_plane import NodePlane

from . import examples as ex
from .conftest import NAMESPACE, OPERATOR

pytestmark = pytest.mark.node

KUEUE_API = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


@pytest.fixture(scope="module")
def kueue(
    node_plane: NodePlane, operator_installed: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Kueue]:
    try:
        find_component("kueue")
    except MissingComponentError as err:
        pytest.fail(str(err), pytrace=False)
    with Kueue(node_plane, tmp_path_factory.mktemp("kueue")) as running:
        restart = ("rollout", "restart", f"deployment/{OPERATOR}")
        node_plane.kubectl(*restart, namespace=NAMESPACE)
        node_plane.kubectl("rollout", "status", f"deployment/{OPERATOR}", "--timeout=300s",
                           namespace=NAMESPACE, timeout=320)  # fmt: skip
        yield running


def queue(namespace: str, local_queue: str) -> list[dict[str, Any]]:
    """A ResourceFlavor, a ClusterQueue for `namespace` only and its LocalQueue `local_queue`."""
    quota = [{"name": "cpu", "nominalQuota": "1"}, {"name": "memory", "nominalQuota": "2Gi"}]
    group = {"coveredResources": ["cpu", "memory"], "flavors": [{"name": namespace, "resources": quota}]}
    selector = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    return [
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": namespace}},
        {
            "apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": namespace},
            "spec": {"namespaceSelector": selector, "resourceGroups": [group]},
        },
        {
            "apiVersion": KUEUE_API, "kind": "LocalQueue",
            "metadata": {"name": local_queue, "namespace": namespace}, "spec": {"clusterQueue": namespace},
        },
    ]  # fmt: skip


def test_kueue_admits_the_queued_example_and_it_trains_in_a_real_container(
    node_plane: NodePlane,
    kueue: Kueue,
    trainer_images: Callable[..., None],
    namespace_on_node: str,
) -> None:
    trainer_images("pytorch")
    namespace = namespace_on_node
    job, others = ex.load_example("pytorch/pytorch-kueue.yaml")
    ex.apply(node_plane, namespace, queue(namespace, job["metadata"]["labels"][QUEUE_LABEL]))
    try:
        ex.apply(node_plane, namespace, [*others, ex.fit_to_node(job)])
        verdict = ex.wait_finished(node_plane, namespace, job, 600.0)
        workloads = json.loads(
            node_plane.kubectl("get", "workloads", "-o", "json", namespace=namespace).stdout
        )
        pods = ex.pod_names(node_plane, namespace, job)
        found = ex.kubectl_results(node_plane, namespace, pods, "pytorch")
    finally:
        node_plane.kubectl("delete", "clusterqueue,resourceflavor", namespace, "--wait=false", check=False)
    assert verdict == "Succeeded", kueue.log_tail()
    admitted = [
        w["metadata"]["name"] for w in workloads["items"]
        for c in w.get("status", {}).get("conditions", []) if (c["type"], c["status"]) == ("Admitted", "True")
    ]  # fmt: skip
    assert len(admitted) == 1, f"Kueue did not admit the job's Workload: {workloads['items']}"
    assert len(found) == 1 and found[0]["accuracy"] >= 0.8, found
    assert ex.results(ex.kubetrain_logs(node_plane, namespace, job)) == found
