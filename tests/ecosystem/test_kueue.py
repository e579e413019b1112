"""Kueue v0.10.2, installed as its standard install runs it (webhooks registered), queueing kubetrain's
TFJobs, PyTorchJobs, MPIJobs, XGBoostJobs and PaddleJobs on the real control plane, with the operator from
the shipped manifests.

What a user of Kueue relies on, for each kind: a job that names a LocalQueue is suspended at create (by
Kueue's mutating webhook, which round-trips it through Go structs), admitted when quota allows, placed
on its ResourceFlavor's nodes and run to Succeeded; a second job waits its turn; a higher-priority job
evicts a running one, whose pods go away, and which later resumes and finishes with its restart count
kept; Kueue sees an MPIJob's launcher in its pod sets; a job without a queue is not touched, and a job
that MultiKueue manages is left to it by kubetrain.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from kubetrain.api import MULTIKUEUE_CONTROLLER
from kubetrain.common.metrics import SKIP_MANAGED_BY
from kubetrain.testing import ControlPlane, Outcome
from kubetrain.testing.ecosystem import find_component
from kubetrain.testing.kueue import Kueue
from kubetrain.testing.operator_process import OperatorProcess
from kubetrain.testing.process import wait_until

from .harness import (
    LEADER,
    LOGS,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    RETRYABLE_EXIT,
    Obj,
    component,
    conditions,
    fake_nodes,
    finish,
    get,
    job,
    own_plane,
    pods,
    restarts,
    shipped_operator,
    submit,
    suspended,
    wait_for,
    wait_running,
)

pytestmark = pytest.mark.ecosystem

KINDS = ("TFJob", "PyTorchJob", "MPIJob", "XGBoostJob", "PaddleJob")
KUEUE_API = "kueue.x-k8s.io/v1beta1"
POOL_LABEL = "example.com/pool"
POOL = "training"
POOL_NODE = "pool-node"
NODES = fake_nodes((POOL_NODE, "16", {POOL_LABEL: POOL}), ("other-node", "16", {}))
"""Only the first node carries the flavor's label: a pod without the flavor's selector may land on either."""
KUEUE_CONFIGS = {
    "MutatingWebhookConfiguration": "mutating-webhook-configuration",
    "ValidatingWebhookConfiguration": "validating-webhook-configuration",
}
"""The names Kueue's manifests give its webhook configurations (its install prefixes `kueue-`)."""
SKIPPED = "kubetrain_jobs_skipped_total"
Installed = tuple[ControlPlane, OperatorProcess, Kueue]
"""The plane, the operator (from the shipped manifests) and Kueue."""
LOCAL_QUEUE = "team"
QUOTA_CPU = "2"
"""Room for one test job at a time (a leader and a worker of 1 CPU each)."""


def kueue_objects() -> list[Obj]:
    """The ResourceFlavor and the two WorkloadPriorityClasses every test uses."""
    flavor = {"nodeLabels": {POOL_LABEL: POOL}}
    return [
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": POOL}, "spec": flavor},
        *(
            {"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": {"name": n}, "value": v}
            for n, v in (("kt-low", 100), ("kt-high", 1000))
        ),
    ]


def queues(namespace: str) -> list[Obj]:
    """A ClusterQueue for `namespace` only (StrictFIFO, lower priorities preemptible) and its LocalQueue."""
    quota = [{"name": "cpu", "nominalQuota": QUOTA_CPU}]
    cluster_queue = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "queueingStrategy": "StrictFIFO",
        "preemption": {"withinClusterQueue": "LowerPriority"},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": POOL, "resources": quota}]}],
    }
    return [
        {
            "apiVersion": KUEUE_API,
            "kind": "ClusterQueue",
            "metadata": {"name": namespace},
            "spec": cluster_queue,
        },
        {
            "apiVersion": KUEUE_API,
            "kind": "LocalQueue",
            "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
            "spec": {"clusterQueue": namespace},
        },
    ]


def apply(plane: ControlPlane, items: list[Obj]) -> None:
    plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


@pytest.fixture(scope="module")
def installed(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ControlPlane, OperatorProcess, Kueue]]:
    """A plane with the operator (shipped base install) and Kueue, its webhooks registered."""
    component("kueue")
    with (
        own_plane(NODES) as plane,
        shipped_operator(plane, "base", tmp_path_factory.mktemp("operator")) as operator,
        Kueue(plane, tmp_path_factory.mktemp("kueue")) as kueue,
    ):
        LOGS["kueue"] = kueue.log_path
        apply(plane, kueue_objects())
        yield plane, operator, kueue


@pytest.fixture(scope="module")
def plane(installed: Installed) -> ControlPlane:
    return installed[0]


def ignored_by_kueue(kueue: Kueue, namespace: str, name: str) -> bool:
    """Kueue's job reconciler logged that it looked at job `namespace/name` and ignored it (no queue)."""
    return any(
        "ignoring the job" in line and f'"{namespace}/{name}"' in line
        for line in kueue.log_path.read_text(errors="replace").splitlines()
    )


@pytest.fixture
def ns(plane: ControlPlane) -> Iterator[str]:
    """A namespace with its own ClusterQueue and LocalQueue `team`."""
    name = plane.create_namespace("kueue-")
    apply(plane, queues(name))
    yield name
    plane.delete_namespace(name)
    plane.kubectl("delete", "clusterqueue", name, "--wait=false", "--ignore-not-found")


def queued(kind: str, name: str, priority: str | None = None, **spec: Any) -> Obj:
    labels = {QUEUE_LABEL: LOCAL_QUEUE, **({PRIORITY_LABEL: priority} if priority else {})}
    return job(kind, name, labels=labels, **spec)


def dry_run(plane: ControlPlane, namespace: str, body: Obj) -> Obj:
    """The job as the API server would store it at create, admission webhooks included (nothing stored:
    Kueue admits a job too fast to catch its stored state before admission)."""
    out = plane.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", namespace=namespace,
                        input=json.dumps(body))  # fmt: skip
    created: Obj = json.loads(out.stdout)
    return created


def workload(plane: ControlPlane, namespace: str, body: Obj) -> Obj | None:
    """Kueue's Workload for the job `body`, found by its owner reference."""
    status, found = plane.rest.get(f"/apis/{KUEUE_API}/namespaces/{namespace}/workloads")
    assert status == 200, found
    name = body["metadata"]["name"]
    for item in found["items"]:
        owners = item["metadata"].get("ownerReferences") or []
        if any(o["kind"] == body["kind"] and o["name"] == name for o in owners):
            return dict(item)
    return None


def pending(plane: ControlPlane, namespace: str, body: Obj) -> bool:
    """Whether the job's Workload exists and Kueue has reserved no quota for it."""
    found = workload(plane, namespace, body)
    wl_conditions = {
        c["type"]: c["status"] for c in ((found or {}).get("status") or {}).get("conditions") or []
    }
    return found is not None and wl_conditions.get("QuotaReserved") == "False"


def on_the_flavor(running: dict[str, Obj]) -> None:
    for name, pod in running.items():
        assert pod["spec"].get("nodeSelector", {}).get(POOL_LABEL) == POOL, f"{name}: flavor selector missing"
        assert pod["spec"]["nodeName"] == POOL_NODE, f"{name} runs on {pod['spec']['nodeName']}"


def test_kueues_own_webhooks_are_registered_at_its_loopback_server(plane: ControlPlane) -> None:
    """Every webhook of Kueue's release manifests, none hand-picked, each calling the local Kueue."""
    shipped = find_component("kueue").source / "config" / "components" / "webhook" / "manifests.yaml"
    expected = {
        doc["kind"]: {hook["name"] for hook in doc["webhooks"]}
        for doc in yaml.safe_load_all(shipped.read_text())
        if doc
    }
    for kind, names in expected.items():
        registered = json.loads(plane.kubectl("get", f"{kind.lower()}/kueue-{KUEUE_CONFIGS[kind]}",
                                              "-o", "json").stdout)  # fmt: skip
        assert {hook["name"] for hook in registered["webhooks"]} == names
        assert {"kubeflow.org"} <= {
            g for hook in registered["webhooks"] for r in hook["rules"] for g in r["apiGroups"]
        }
        for hook in registered["webhooks"]:
            assert hook["clientConfig"]["url"].startswith("https://127.0.0.1:"), hook["name"]
            assert hook["clientConfig"]["caBundle"], hook["name"]


@pytest.mark.parametrize("kind", KINDS)
def test_queued_jobs_are_suspended_admitted_in_order_on_their_flavor(
    installed: Installed, ns: str, kind: str
) -> None:
    plane, _, kueue = installed
    first, second, loose = queued(kind, "first"), queued(kind, "second"), job(kind, "loose")
    assert suspended(dry_run(plane, ns, first)), "Kueue's webhook suspends a queued job at create"
    submit(plane, ns, first)
    submit(plane, ns, second)
    on_the_flavor(wait_running(plane, ns, first))
    wait_until("second job pending for quota", lambda: pending(plane, ns, second), timeout=60)
    assert suspended(get(plane, ns, kind, "second")) and not pods(plane, ns, "second")
    first_workload = workload(plane, ns, first)
    assert first_workload is not None
    pod_sets = {p["name"]: p["count"] for p in first_workload["spec"]["podSets"]}
    assert pod_sets == {LEADER[kind].lower(): 1, "worker": 1}, "every replica, the launcher too, is a pod set"

    submit(plane, ns, loose)  # no queue: runs at once although the queue is full
    assert not suspended(get(plane, ns, kind, "loose"))
    wait_running(plane, ns, loose)
    finish(plane, ns, loose)
    wait_until("Kueue's log: it looked at the job without a queue and ignored it",
               lambda: ignored_by_kueue(kueue, ns, "loose"), timeout=60)  # fmt: skip
    assert workload(plane, ns, loose) is None, "Kueue made a Workload for a job without a queue"

    finish(plane, ns, first)
    on_the_flavor(wait_running(plane, ns, second))
    assert "Succeeded" in conditions(finish(plane, ns, second))


@pytest.mark.parametrize("kind", KINDS)
def test_a_higher_priority_job_evicts_and_the_evicted_job_resumes_keeping_its_restarts(
    plane: ControlPlane, ns: str, kind: str
) -> None:
    low = queued(kind, "low", "kt-low")
    submit(plane, ns, low)
    worker = wait_running(plane, ns, low)["low-worker-0"]
    plane.finish_pod(ns, "low-worker-0", Outcome.FAILED, exit_code=RETRYABLE_EXIT)
    wait_for(plane, ns, low, lambda j: restarts(j) == 1, "one restart in the ledger")
    replaced = wait_running(plane, ns, low)["low-worker-0"]
    assert replaced["metadata"]["uid"] != worker["metadata"]["uid"]

    high = queued(kind, "high", "kt-high")
    submit(plane, ns, high)
    wait_for(plane, ns, low, lambda j: suspended(j) and "Suspended" in conditions(j), "evicted and suspended")
    wait_until("the evicted job's pods gone", lambda: not pods(plane, ns, "low"), timeout=60)
    wait_running(plane, ns, high)
    finish(plane, ns, high)

    resumed = wait_running(plane, ns, low)  # re-admitted: every replica runs again
    on_the_flavor(resumed)
    assert restarts(get(plane, ns, kind, "low")) == 1, "the restart count survived the eviction"
    done = finish(plane, ns, low)
    assert restarts(done) == 1 and not suspended(done)


@pytest.mark.parametrize("kind", KINDS)
def test_a_job_managed_by_multikueue_is_left_to_it(installed: Installed, ns: str, kind: str) -> None:
    plane, operator, _ = installed
    elsewhere = queued(kind, "elsewhere", runPolicy={"managedBy": MULTIKUEUE_CONTROLLER})
    submit(plane, ns, elsewhere)
    skipped = {"job_namespace": ns, "reason": SKIP_MANAGED_BY}
    wait_until("the operator looked at the MultiKueue job and left it alone (kubetrain_jobs_skipped_total)",
               lambda: operator.sample(SKIPPED, **skipped) > 0, timeout=60)  # fmt: skip
    assert not pods(plane, ns, "elsewhere"), "kubetrain made pods for a job MultiKueue manages"
    left = get(plane, ns, kind, "elsewhere")
    assert not (left.get("status") or {}).get("conditions"), "kubetrain wrote the status of a MultiKueue job"
