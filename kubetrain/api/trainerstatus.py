"""`status.trainerStatus`: how far training has got, as KEP-2779 (kubeflow/trainer) defines it for TrainJob.

Why: users read logs to learn how far a job has got and whether it converges. KEP-2779 gives TrainJob a
status field that the training pods push to the controller; every kind here carries the same field, in the
same wire shape, so Kubeflow's instrumentation works against these kinds unchanged.

The bounds keep one job's status small whatever a training script sends: a percentage of 0-100, a
non-negative estimate, at most `MAX_METRICS` metrics, names and values of at most `MAX_METRIC_NAME` and
`MAX_METRIC_VALUE` characters (defined once, in the runtime contract that the pods' helpers share). The
generated CRD carries the same bounds, so the API server enforces them against any writer, and the
operator's endpoint refuses a report that breaks them before writing anything.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from kubetrain.api.meta import Int32, Int64, Time, WireModel
from kubetrain.podcontract.progress import MAX_METRIC_NAME, MAX_METRIC_VALUE, MAX_METRICS

__all__ = [
    "MAX_METRICS",
    "MAX_METRIC_NAME",
    "MAX_METRIC_VALUE",
    "TrainerMetric",
    "TrainerStatus",
    "latest_metric",
]

MetricName = Annotated[str, StringConstraints(min_length=1, max_length=MAX_METRIC_NAME)]
MetricValue = Annotated[str, StringConstraints(max_length=MAX_METRIC_VALUE)]


class TrainerMetric(WireModel):
    """One metric the trainer reported; the value is a string, as KEP-2779 keeps it (`"0.0412"`)."""

    name: MetricName
    value: MetricValue


class TrainerStatus(WireModel):
    """The latest progress report of a job's trainer: written by the operator's status endpoint only."""

    progress_percentage: Annotated[Int32, Field(ge=0, le=100)] | None = None
    """An estimate of how much of the training is done, 0-100."""
    estimated_remaining_seconds: Annotated[Int64, Field(ge=0)] | None = None
    """An estimate of the time left until training ends."""
    metrics: Annotated[list[TrainerMetric], Field(max_length=MAX_METRICS)] | None = None
    """The latest value of each metric the trainer reports (loss, accuracy, ...)."""
    last_updated_time: Time | None = None
    """When the operator accepted the report this status holds."""


_SHOWN_FIRST = ("loss", "accuracy", "acc")


def latest_metric(status: TrainerStatus | None) -> TrainerMetric | None:
    """The metric a one-line view shows: the loss, else the accuracy (any `*loss`/`*accuracy` name), else
    the first reported; None when there is none."""
    metrics = (status.metrics if status is not None else None) or []
    for wanted in _SHOWN_FIRST:
        for metric in metrics:
            if metric.name.lower() == wanted:
                return metric
    for wanted in _SHOWN_FIRST:
        for metric in metrics:
            if metric.name.lower().endswith(wanted):
                return metric
    return metrics[0] if metrics else None
