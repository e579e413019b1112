"""Kueue v0.19.2 in its default configuration, plus the `externalFrameworks` lines our docs tell a user to
add (manifests/kueue/integrations.yaml; SleepJob's README for the example), installed as its standard
install runs it (webhooks registered), queueing jobs of every kind and the SleepJob example on the real
control plane, with the operator from the shipped manifests and its `--kueue-integration` default.

What a user of Kueue relies on, for each kind: with quota for one job, a second waits with no pod created
and is admitted, on its flavor's nodes, when the first finishes; a higher-priority job evicts a running
one, whose pods all go before the higher one's start, and which is queued again, later admitted and runs
to Succeeded with its restart count kept; each job has exactly one Workload, whichever integration made it
(MPIJob: Kueue's own, on in its default configuration); a job without a queue is not held; a job that
MultiKueue manages is left to it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest
import yaml

from kubetrain.api import MULTIKUEUE_CONTROLLER
from kubetrain.common.metrics import SKIP_MANAGED_BY
from kubetrain.testing import ControlPlane, Outcome
from kubetrain.testing.ecosystem import find_component
from kubetrain.testing.operator_process import OperatorProcess
from kubetrain.testing.process import wait_until

from .harness import (
    RETRYABLE_EXIT,
    Obj,
    conditions,
    fake_nodes,
    finish,
    get,
    job,
    pods,
    restarts,
    shipped_operator,
    spare,
    submit,
    wait_for,
    wait_running,
)
from .queueing import (
    POOL,
    POOL_LABEL,
    SLEEPJOB_FRAMEWORK,
    kueue_plane,
    pending,
    queue_namespace,
    queued,
    sleepjob_operator,
    waiting,
    workload,
    workload_conditions,
)

pytestmark = pytest.mark.ecosystem

KINDS = ("TFJob", "PyTorchJob", "JAXJob", "XGBoostJob", "PaddleJob", "MPIJob")
QUEUED = (*KINDS, "SleepJob")
POOL_NODE = "pool-node"
NODES = fake_nodes((POOL_NODE, "16", {POOL_LABEL: POOL}), ("other-node", "16", {}))
"""Only the first node carries the flavor's label: a pod without the flavor's selector may land on either."""
KUEUE_CONFIGS = {
    "MutatingWebhookConfiguration": "mutating-webhook-configuration",
    "ValidatingWebhookConfiguration": "validating-webhook-configuration",
}
"""The names Kueue's manifests give its webhook configurations (its install prefixes `kueue-`)."""
SKIPPED = "kubetrain_jobs_skipped_total"
Installed = tuple[ControlPlane, OperatorProcess, "subprocess.Popen[bytes]"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """A plane with Kueue (its webhooks registered), then the operator (shipped base install) and the
    SleepJob example's operator, which read at start what Kueue integrates itself."""
    with (
        kueue_plane(NODES, tmp_path_factory.mktemp("kueue"), external=[SLEEPJOB_FRAMEWORK]) as plane,
        shipped_operator(plane, "base", tmp_path_factory.mktemp("operator")) as operator,
        sleepjob_operator(plane, tmp_path_factory.mktemp("sleepjob")) as example,
    ):
        yield plane, operator, example


@pytest.fixture(scope="module")
def plane(installed: Installed) -> ControlPlane:
    return installed[0]


@pytest.fixture
def ns(plane: ControlPlane) -> Iterator[str]:
    with queue_namespace(plane) as name:
        yield name


def on_the_flavor(running: dict[str, Obj]) -> None:
    for name, pod in running.items():
        assert pod["spec"].get("nodeSelector", {}).get(POOL_LABEL) == POOL, f"{name}: flavor selector missing"
        assert pod["spec"]["nodeName"] == POOL_NODE, f"{name} runs on {pod['spec']['nodeName']}"


def held(plane: ControlPlane, ns: str, body: Obj) -> None:
    """Wait until Kueue has looked at the job's one Workload and reserved no quota; the job says it waits,
    and not one of its pods exists."""
    wait_until(f"{body['metadata']['name']} pending for quota", lambda: pending(plane, ns, body), timeout=60)
    assert waiting(get(plane, ns, body["kind"], body["metadata"]["name"])), "the job does not say it waits"
    assert not pods(plane, ns, body["metadata"]["name"]), "a pod of a job Kueue has not admitted"


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
        for hook in registered["webhooks"]:
            assert hook["clientConfig"]["url"].startswith("https://127.0.0.1:"), hook["name"]
            assert hook["clientConfig"]["caBundle"], hook["name"]


@pytest.mark.parametrize("kind", QUEUED)
def test_with_quota_for_one_job_the_second_waits_podless_and_runs_when_the_first_finishes(
    plane: ControlPlane, ns: str, kind: str
) -> None:
    first, second = queued(kind, "first"), queued(kind, "second")
    submit(plane, ns, first)
    on_the_flavor(wait_running(plane, ns, first))
    submit(plane, ns, second)
    held(plane, ns, second)
    admitted = workload(plane, ns, first)
    assert admitted is not None, "the running job has no Workload"
    assert len(admitted["spec"]["podSets"]) == len({p["name"] for p in admitted["spec"]["podSets"]})

    done = finish(plane, ns, first)
    assert "Succeeded" in conditions(done)
    told = lambda: workload_conditions(workload(plane, ns, first)).get("Finished") == "True"  # noqa: E731
    wait_until("the first job's Workload told Finished", told, timeout=60)
    on_the_flavor(wait_running(plane, ns, second))
    assert "Succeeded" in conditions(finish(plane, ns, second))
    assert workload(plane, ns, second) is not None


@pytest.mark.parametrize("kind", QUEUED)
def test_a_higher_priority_job_evicts_and_the_evicted_job_resumes_keeping_its_restarts(
    plane: ControlPlane, ns: str, kind: str
) -> None:
    low = queued(kind, "low", "kt-low")
    submit(plane, ns, low)
    lost = spare(low)
    worker = wait_running(plane, ns, low)[lost]
    plane.finish_pod(ns, lost, Outcome.FAILED, exit_code=RETRYABLE_EXIT)
    wait_for(plane, ns, low, lambda j: restarts(j) == 1, "one restart in the ledger")
    replaced = wait_running(plane, ns, low)[lost]
    assert replaced["metadata"]["uid"] != worker["metadata"]["uid"]

    high = queued(kind, "high", "kt-high")
    submit(plane, ns, high)
    wait_until("the higher job's first pod", lambda: bool(pods(plane, ns, "high")), timeout=120)
    assert not pods(plane, ns, "low"), "the evicted job kept a pod while the higher one started"
    assert waiting(get(plane, ns, kind, "low")), "the evicted job is not queued again"
    wait_running(plane, ns, high)
    finish(plane, ns, high)

    resumed = wait_running(plane, ns, low)  # re-admitted: every replica runs again
    on_the_flavor(resumed)
    assert restarts(get(plane, ns, kind, "low")) == 1, "the eviction was charged as a restart"
    done = finish(plane, ns, low)
    assert restarts(done) == 1 and "Succeeded" in conditions(done)


@pytest.mark.parametrize("kind", ["PyTorchJob", "MPIJob"])  # kubetrain's integration, and Kueue's own
def test_a_job_without_a_queue_runs_at_once_without_a_workload(
    plane: ControlPlane, ns: str, kind: str
) -> None:
    blocker = queued(kind, "blocker")
    submit(plane, ns, blocker)
    wait_running(plane, ns, blocker)
    loose = job(kind, "loose")
    submit(plane, ns, loose)  # no queue: runs although the queue is full
    wait_running(plane, ns, loose)
    assert "Succeeded" in conditions(finish(plane, ns, loose))
    assert workload(plane, ns, loose) is None, "a Workload for a job without a queue"


@pytest.mark.parametrize("kind", KINDS)
def test_a_job_managed_by_multikueue_is_left_to_it(installed: Installed, ns: str, kind: str) -> None:
    plane, operator, _ = installed
    elsewhere = job(kind, "elsewhere", labels={"kueue.x-k8s.io/queue-name": "team"},
                    runPolicy={"managedBy": MULTIKUEUE_CONTROLLER})  # fmt: skip
    submit(plane, ns, elsewhere)
    skipped = {"job_namespace": ns, "reason": SKIP_MANAGED_BY}
    wait_until("the operator looked at the MultiKueue job and left it alone (kubetrain_jobs_skipped_total)",
               lambda: operator.sample(SKIPPED, **skipped) > 0, timeout=60)  # fmt: skip
    assert not pods(plane, ns, "elsewhere"), "kubetrain made pods for a job MultiKueue manages"
    left = get(plane, ns, kind, "elsewhere")
    assert not (left.get("status") or {}).get("conditions"), "kubetrain wrote the status of a MultiKueue job"
