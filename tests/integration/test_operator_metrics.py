"""The metric families operator dashboards and alerts use, scraped from the running `kubetrain operator`.

A platform team points the Grafana dashboards and alert rules it already has for Go operators
(controller-runtime, client-go) at kubetrain: the families must exist under those names and labels, and
move when the operator works. The test scrapes the real process on the real plane before and after a
TFJob runs to Succeeded. docs/metrics.md is the reference these names are checked against.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from kubetrain.common.metrics import RECONCILE_RESULTS
from kubetrain.testing import ControlPlane, Outcome
from kubetrain.testing.operator import install_crds
from kubetrain.testing.operator_process import OperatorProcess
from kubetrain.testing.process import wait_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
METRICS_RBAC = ROOT / "manifests" / "base" / "rbac" / "metrics.yaml"
ROLE = "kubetrain-metrics-reader"
CONTROLLER = "tfjob-controller"
LEASE = "kubetrain-metrics"
TFJOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "TFJob",
    "metadata": {"name": "metered"},
    "spec": {
        "tfReplicaSpecs": {
            "Worker": {
                "replicas": 1,
                "restartPolicy": "Never",
                "template": {"spec": {"containers": [{"name": "tensorflow", "image": "trainer:1"}]}},
            }
        }
    },
}

JOB_EVENTS = ("created", "successful", "failed", "restarted", "deleted")
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(op: OperatorProcess) -> tuple[dict[str, str], Samples]:
    """({family: type}, {(sample name, labels): value}) of the operator's /metrics."""
    types: dict[str, str] = {}
    samples: Samples = {}
    for family in text_string_to_metric_families(op.metrics()):
        types[family.name] = family.type
        for sample in family.samples:
            samples[sample.name, frozenset(sample.labels.items())] = sample.value
    return types, samples


def value(samples: Samples, family: str, /, **labels: str) -> float:
    """The sum over the samples of `family` whose labels include `labels` (0 when there are none)."""
    want = set(labels.items())
    return sum(v for (n, have), v in samples.items() if n == family and want <= have)


@pytest.fixture
def operator(control_plane: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[OperatorProcess]:
    install_crds(control_plane)
    args = [
        f"--namespace={namespace}", "--enable=tfjob",
        f"--leader-election-namespace={namespace}", f"--leader-election-id={LEASE}",
    ]  # fmt: skip
    op = OperatorProcess(control_plane.kubeconfig, args, workdir=tmp_path).start()
    try:
        op.wait_ready()
        yield op
    finally:
        op.stop()


def _succeeded(plane: ControlPlane, namespace: str) -> bool:
    jsonpath = "jsonpath={.status.conditions[?(@.status=='True')].type}"
    out = plane.kubectl("get", "tfjob", "metered", "-o", jsonpath, namespace=namespace).stdout
    return "Succeeded" in out.split()


def test_dashboard_families_are_served_and_move_when_a_job_runs(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    wait_until(
        "leading", lambda: value(scrape(operator)[1], "leader_election_master_status", name=LEASE) == 1,
        timeout=30, processes=[operator.process],
    )  # fmt: skip
    types, before = scrape(operator)
    expected_types = {
        "process_cpu_seconds": "counter",
        "process_resident_memory_bytes": "gauge",
        "process_open_fds": "gauge",
        "process_start_time_seconds": "gauge",
        "process_virtual_memory_bytes": "gauge",
        "process_max_fds": "gauge",
        "python_info": "gauge",
        "python_gc_collections": "counter",
        "python_gc_objects_collected": "counter",
        "python_gc_objects_uncollectable": "counter",
        "rest_client_requests": "counter",
        "rest_client_request_duration_seconds": "histogram",
        "rest_client_rate_limiter_duration_seconds": "histogram",
        "workqueue_depth": "gauge",
        "workqueue_adds": "counter",
        "workqueue_retries": "counter",
        "workqueue_queue_duration_seconds": "histogram",
        "workqueue_work_duration_seconds": "histogram",
        "workqueue_unfinished_work_seconds": "gauge",
        "workqueue_longest_running_processor_seconds": "gauge",
        "controller_runtime_reconcile": "counter",
        "controller_runtime_reconcile_errors": "counter",
        "controller_runtime_reconcile_time_seconds": "histogram",
        "controller_runtime_terminal_reconcile_errors": "counter",
        "controller_runtime_max_concurrent_reconciles": "gauge",
        "controller_runtime_active_workers": "gauge",
        **{f"training_operator_jobs_{event}": "counter" for event in JOB_EVENTS},
        "leader_election_master_status": "gauge",
        "kubetrain_is_leader": "gauge",
        "kubetrain_events_dropped": "counter",
    }
    assert {name: types.get(name) for name in expected_types} == expected_types

    control_plane.kubectl("apply", "-f", "-", namespace=namespace, input=json.dumps(TFJOB))
    control_plane.wait_for_pod_phase(namespace, "metered-worker-0", "Running")
    control_plane.finish_pod(namespace, "metered-worker-0", Outcome.SUCCEEDED)
    wait_until("Succeeded", lambda: _succeeded(control_plane, namespace), timeout=60)
    _, after = scrape(operator)

    def moved(family: str, /, **labels: str) -> tuple[float, float]:
        return value(before, family, **labels), value(after, family, **labels)

    queue = {"name": CONTROLLER, "controller": CONTROLLER}
    reconciles = {"controller": CONTROLLER}
    grew = {
        "process CPU": moved("process_cpu_seconds_total"),
        "PATCH 200 (job status)": moved("rest_client_requests_total", code="200", method="PATCH"),
        "POST 201 (pod, service, events)": moved("rest_client_requests_total", code="201", method="POST"),
        "POST latencies": moved("rest_client_request_duration_seconds_count", verb="POST"),
        "queue adds": moved("workqueue_adds_total", **queue),
        "queue waits": moved("workqueue_queue_duration_seconds_count", **queue),
        "queue work": moved("workqueue_work_duration_seconds_count", **queue),
        "reconciles": moved("controller_runtime_reconcile_total", result="success", **reconciles),
        "reconcile times": moved("controller_runtime_reconcile_time_seconds_count", **reconciles),
    }
    assert all(b < a for b, a in grew.values()), grew
    hosts = {dict(labels)["host"] for name, labels in after if name == "rest_client_requests_total"}
    assert hosts == {control_plane.server.removeprefix("https://")}
    assert value(after, "rest_client_requests_total", code="<error>") == 0
    assert value(after, "workqueue_depth", **queue) == 0, "the queue drains once the job is done"
    assert value(after, "leader_election_master_status", name=LEASE) == 1
    assert value(after, "kubetrain_is_leader") == 1
    zero_until_trouble = [
        ("workqueue_retries_total", queue),
        ("workqueue_unfinished_work_seconds", queue),
        ("workqueue_longest_running_processor_seconds", queue),
        ("controller_runtime_reconcile_errors_total", reconciles),
        ("controller_runtime_terminal_reconcile_errors_total", reconciles),
        *[("controller_runtime_reconcile_total", {**reconciles, "result": r}) for r in RECONCILE_RESULTS],
    ]
    served = set(after)
    missing = [(n, ls) for n, ls in zero_until_trouble if (n, frozenset(ls.items())) not in served]
    assert not missing, "series exist from the start, so that rate() and alerts work before the first error"


def test_failed_creates_count_as_errors_retries_and_403s(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    """A namespace whose quota allows no pod: every pod create is refused (403), the reconcile fails and is
    retried with backoff. What an "operator is failing" alert watches."""
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-pods"},
        "spec": {"hard": {"pods": "0"}},
    }
    control_plane.kubectl("apply", "-f", "-", namespace=namespace, input=json.dumps(quota))
    wait_until(
        "the quota's usage computed",
        lambda: "pods" in control_plane.kubectl(
            "get", "resourcequota", "no-pods", "-o", "jsonpath={.status.used}", namespace=namespace
        ).stdout,
        timeout=30,
    )  # fmt: skip
    control_plane.kubectl("apply", "-f", "-", namespace=namespace, input=json.dumps(TFJOB))
    queue = {"name": CONTROLLER, "controller": CONTROLLER}

    def troubled() -> bool:
        _, now = scrape(operator)
        return all(
            value(now, family, **labels) > 0
            for family, labels in (
                ("rest_client_requests_total", {"code": "403", "method": "POST"}),
                ("controller_runtime_reconcile_total", {"controller": CONTROLLER, "result": "error"}),
                ("controller_runtime_reconcile_errors_total", {"controller": CONTROLLER}),
                ("workqueue_retries_total", queue),
            )
        )

    wait_until("403s, reconcile errors and retries counted", troubled, timeout=60)


def test_a_secure_metrics_endpoint_serves_only_scrapers_rbac_lets_read_it(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """As controller-runtime's metrics server: HTTPS, a TokenReview for the bearer token, then a
    SubjectAccessReview for GET /metrics. The reader role is the shipped kubetrain-metrics-reader."""
    install_crds(control_plane)
    reader = next(
        doc for doc in yaml.safe_load_all(METRICS_RBAC.read_text()) if doc["metadata"]["name"] == ROLE
    )
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(reader))
    for account in ("scraper", "stranger"):
        control_plane.kubectl("create", "serviceaccount", account, namespace=namespace)
    control_plane.kubectl(
        "create", "clusterrolebinding", f"{namespace}-scraper", f"--clusterrole={ROLE}",
        f"--serviceaccount={namespace}:scraper",
    )  # fmt: skip
    token = {
        account: control_plane.kubectl("create", "token", account, namespace=namespace).stdout.strip()
        for account in ("scraper", "stranger")
    }
    args = ["--metrics-secure", f"--namespace={namespace}", "--enable=tfjob", "--leader-elect=false"]
    with OperatorProcess(control_plane.kubeconfig, args, workdir=tmp_path) as op:
        op.wait_ready()
        assert op.scrape()[0] == 401, "no token"
        assert op.scrape("not-a-token")[0] == 401
        assert op.scrape(token["stranger"])[0] == 403, "a valid token without the role"
        status, body = op.scrape(token["scraper"])
        assert status == 200 and "controller_runtime_reconcile_total" in body
        assert op.get("/healthz")[0] == 200, "the probes need no token"
    control_plane.kubectl("delete", "clusterrolebinding", f"{namespace}-scraper")
