"""Each reporting job's progress and numeric metrics as Prometheus gauges, written with its status.

Why apart from the coalescer: the series follow the writes (a job's gauges show what its status shows), and
their cardinality is bounded by the jobs that report, each removed with its job.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Gauge

from kubetrain.api import TrainerStatus

if TYPE_CHECKING:
    from kubetrain.common.progress.coalesce import JobKey

__all__ = ["ProgressGauges"]


class ProgressGauges:
    """Each job's written progress and numeric metrics as gauges; a job's series go with the job.

    Cardinality: one progress series and at most `MAX_METRICS` metric series per job that reports, each
    removed by `remove` when the job goes (and a metric the job stopped reporting, at its next write)."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        labels = ["job_namespace", "job_name", "kind"]
        help_text = "The trainer's latest progress, 0-100"
        self._progress = Gauge("kubetrain_job_progress_percent", help_text, labels, registry=registry)
        self._metric = Gauge(
            "kubetrain_job_metric", "The trainer's latest value of each numeric metric", [*labels, "metric"],
            registry=registry,
        )  # fmt: skip
        self._shown: dict[JobKey, set[str]] = {}

    def show(self, key: JobKey, status: TrainerStatus) -> None:
        job = (key.namespace, key.name, key.info.kind)
        if status.progress_percentage is not None:
            self._progress.labels(*job).set(status.progress_percentage)
        values = {m.name: _number(m.value) for m in status.metrics or ()}
        shown = {name for name, value in values.items() if value is not None}
        for name in self._shown.get(key, set()) - shown:
            self._metric.remove(*job, name)
        for name in shown:
            self._metric.labels(*job, name).set(values[name] or 0.0)
        self._shown[key] = shown

    def remove(self, key: JobKey) -> None:
        job = (key.namespace, key.name, key.info.kind)
        for name in self._shown.pop(key, set()):
            self._metric.remove(*job, name)
        with contextlib.suppress(KeyError):
            self._progress.remove(*job)


def _number(value: str) -> float | None:
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None
