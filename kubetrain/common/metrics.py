"""Prometheus collectors, registered on the `CollectorRegistry` the manager serves at /metrics.

Names, types, labels and buckets are those of client-go and controller-runtime, so that the dashboards
and alerts operator users already have work unchanged: `process_*` (plus Python's `python_info` and
`python_gc_*` where Go operators have `go_*`), `rest_client_requests_total{code,method,host}`,
`workqueue_*{name,controller}`, `controller_runtime_reconcile_*{controller}` and
`leader_election_master_status{name}`. Job counters use Kubeflow's `training_operator_jobs_*_total
{job_namespace,framework}`. docs/metrics.md is the reference. The registry is injected (never the
global default) so that tests get a fresh one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)

__all__ = [
    "EVENT_DROP_REASONS",
    "RECONCILE_RESULTS",
    "REST_ERROR_CODE",
    "SKIP_MANAGED_BY",
    "Metrics",
    "QueueMetrics",
]

RECONCILE_RESULTS = ("success", "error", "requeue", "requeue_after")
EVENT_DROP_REASONS = ("spam", "backlog", "error")
"""controller-runtime's `result` label values; a TerminalError counts as "error" (and as terminal)."""
SKIP_MANAGED_BY = "managed_by"
"""`kubetrain_jobs_skipped_total`'s `reason`: the job's `runPolicy.managedBy` names another controller."""
REST_ERROR_CODE = "<error>"
"""client-go's `code` for a request that got no HTTP answer (connection refused, timeout, TLS)."""

# controller-runtime's buckets, so that histogram_quantile over both kinds of operator lines up.
_RECONCILE_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
)  # fmt: skip
_REST_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)  # client-go's
_QUEUE_BUCKETS = tuple(1e-8 * 10**i for i in range(12))  # ExponentialBuckets(10e-9, 10, 12): 10 ns .. 1000 s


@final
@dataclass(frozen=True, slots=True)
class QueueMetrics:
    """The collectors of one named work queue, labels already bound."""

    depth: Gauge
    adds: Counter
    retries: Counter
    queue_duration: Histogram
    work_duration: Histogram
    unfinished_work: Gauge
    longest_running: Gauge

    def watch_in_flight(self, unfinished: Callable[[], float], longest: Callable[[], float]) -> None:
        """Compute the two in-flight gauges at scrape time (client-go recomputes them every 500 ms)."""
        self.unfinished_work.set_function(unfinished)
        self.longest_running.set_function(longest)


class Metrics:
    """Every operator metric. One instance per registry (prometheus refuses duplicate names)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        _runtime_collectors(registry)
        self._reconcile_collectors(registry)
        self._queue_collectors(registry)
        self._job_collectors(registry)
        self._rest_collectors(registry)
        self._rest_series: dict[tuple[str, str, str], tuple[Counter, Histogram, Histogram]] = {}
        """The labelled series of each (code, verb, host), looked up once: `labels()` checks and joins its
        arguments on every call, a cost per request."""
        self.leader_status = Gauge(
            "leader_election_master_status",
            "1 while this process holds the Lease `name`, 0 while it stands by.",
            ["name"],
            registry=registry,
        )
        self.is_leader = Gauge(
            "kubetrain_is_leader",
            "1 while this process leads (1 once synced without election).",
            registry=registry,
        )
        self.events_dropped = Counter(
            "kubetrain_events_dropped",
            "Events not written, by component and why: `spam` (over an object's budget), `backlog` (the "
            "queue was full) or `error` (the API server refused or did not answer).",
            ["component", "reason"],
            registry=registry,
        )

    def _rest_collectors(self, registry: CollectorRegistry) -> None:
        self.rest_requests = Counter(
            "rest_client_requests", "Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host"], registry=registry,
        )  # fmt: skip
        self.rest_latency = Histogram(
            "rest_client_request_duration_seconds", "Request latency in seconds, by verb and host.",
            ["verb", "host"], buckets=_REST_BUCKETS, registry=registry,
        )  # fmt: skip
        self.rest_throttled = Histogram(
            "rest_client_rate_limiter_duration_seconds",
            "Time a request waited for the client-side rate limiter (--qps/--burst), by verb and host.",
            ["verb", "host"], buckets=_REST_BUCKETS, registry=registry,
        )  # fmt: skip

    def _reconcile_collectors(self, registry: CollectorRegistry) -> None:
        self.reconcile_total = Counter(
            "controller_runtime_reconcile", "Total number of reconciliations per controller.",
            ["controller", "result"], registry=registry,
        )  # fmt: skip
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors", "Total number of reconciliation errors per controller.",
            ["controller"], registry=registry,
        )  # fmt: skip
        self.terminal_errors = Counter(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal reconciliation errors (not retried) per controller.",
            ["controller"], registry=registry,
        )  # fmt: skip
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds", "Length of time per reconciliation per controller.",
            ["controller"], buckets=_RECONCILE_BUCKETS, registry=registry,
        )  # fmt: skip
        self.max_workers = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller.",
            ["controller"], registry=registry,
        )  # fmt: skip
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller.",
            ["controller"], registry=registry,
        )  # fmt: skip

    def _queue_collectors(self, registry: CollectorRegistry) -> None:
        labels = ["name", "controller"]
        self.queue_depth = Gauge("workqueue_depth", "Current depth of workqueue.", labels, registry=registry)
        self.queue_adds = Counter(
            "workqueue_adds", "Total number of adds handled by workqueue.", labels, registry=registry
        )
        self.queue_retries = Counter(
            "workqueue_retries", "Total number of retries handled by workqueue.", labels, registry=registry
        )
        self.queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            labels, buckets=_QUEUE_BUCKETS, registry=registry,
        )  # fmt: skip
        self.work_duration = Histogram(
            "workqueue_work_duration_seconds", "How long in seconds processing an item from workqueue takes.",
            labels, buckets=_QUEUE_BUCKETS, registry=registry,
        )  # fmt: skip
        self.unfinished_work = Gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by "
            "work_duration. Large values indicate stuck workers.",
            labels, registry=registry,
        )  # fmt: skip
        self.longest_running = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            labels, registry=registry,
        )  # fmt: skip

    def _job_collectors(self, registry: CollectorRegistry) -> None:
        labels = ["job_namespace", "framework"]
        self.jobs_created = Counter(
            "training_operator_jobs_created", "Jobs created.", labels, registry=registry
        )
        self.jobs_deleted = Counter(
            "training_operator_jobs_deleted", "Jobs deleted.", labels, registry=registry
        )
        self.jobs_successful = Counter(
            "training_operator_jobs_successful", "Jobs that succeeded.", labels, registry=registry
        )
        self.jobs_failed = Counter(
            "training_operator_jobs_failed", "Jobs that failed.", labels, registry=registry
        )
        self.jobs_restarted = Counter(
            "training_operator_jobs_restarted", "Jobs restarted.", labels, registry=registry
        )
        self.hook_errors = Counter(
            "kubetrain_job_hook_errors",
            "Unexpected errors raised by a job controller's hook (hook=reconcile: a step of the template).",
            ["framework", "hook"], registry=registry,
        )  # fmt: skip
        self.gang_restarts = Counter(
            "kubetrain_gang_restarts",
            "Gang restarts by failure policy (all pods deleted and recreated), by the failure reason.",
            [*labels, "reason"], registry=registry,
        )  # fmt: skip
        self.rank_restarts = Counter(
            "kubetrain_rank_restarts",
            "Rank failures a job's failure policy judged (a container restarted in place or a pod failed).",
            [*labels, "reason", "replica_type"], registry=registry,
        )  # fmt: skip
        self.jobs_skipped = Counter(
            "kubetrain_jobs_skipped",
            "Reconciles that looked at a job and left it alone, by why: `managed_by` (another controller's).",
            [*labels, "reason"], registry=registry,
        )  # fmt: skip

    def controller(self, name: str, workers: int = 1) -> None:
        """Initialise every series of a controller, so that rates exist before the first error."""
        for result in RECONCILE_RESULTS:
            self.reconcile_total.labels(name, result)
        self.reconcile_errors.labels(name)
        self.terminal_errors.labels(name)
        self.reconcile_time.labels(name)
        self.active_workers.labels(name)
        self.max_workers.labels(name).set(workers)

    def queue(self, name: str) -> QueueMetrics:
        """The queue of controller `name` (controller-runtime names a controller's queue after it)."""
        return QueueMetrics(
            depth=self.queue_depth.labels(name, name),
            adds=self.queue_adds.labels(name, name),
            retries=self.queue_retries.labels(name, name),
            queue_duration=self.queue_duration.labels(name, name),
            work_duration=self.work_duration.labels(name, name),
            unfinished_work=self.unfinished_work.labels(name, name),
            longest_running=self.longest_running.labels(name, name),
        )

    def event_recorder(self, component: str) -> None:
        """Initialise the dropped-Events series of `component`: a rate exists before the first drop."""
        for reason in EVENT_DROP_REASONS:
            self.events_dropped.labels(component, reason)

    def event_dropped(self, component: str, reason: str) -> None:
        """An Event of `component` was not written (`reason`: spam, backlog or error)."""
        self.events_dropped.labels(component, reason).inc()

    def rest_request(self, code: int | str, method: str, host: str, *, waited: float, took: float) -> None:
        """Count one request of the operator's API client (code "<error>" when no answer came): `waited`
        seconds for the rate limiter, then `took` seconds until the answer was read (a watch: its headers),
        or the failure."""
        key = (str(code), method, host)
        series = self._rest_series.get(key)
        if series is None:
            series = (
                self.rest_requests.labels(*key),
                self.rest_throttled.labels(method, host),
                self.rest_latency.labels(method, host),
            )
            self._rest_series[key] = series
        requests, throttled, latency = series
        requests.inc()
        throttled.observe(waited)
        latency.observe(took)


def _runtime_collectors(registry: CollectorRegistry) -> None:
    """`process_*` (CPU, memory, fds, start time), `python_info`, and `python_gc_*` (CPython only)."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
