"""`status.trainerStatus`: how far training has got, as KEP-2779 (kubeflow/trainer) defines it for TrainJob.

Why: users read logs to learn how far a job has got and whether it converges. KEP-2779 gives TrainJob a
status field that the training pods push to the controller; every kind here carries the same field, in the
same wire shape. `from_report` reads a report body as Kubeflow's own clients send it (Hugging Face
Transformers' `KubeflowCallback`, the Kubeflow SDK's `update_trainjob_status`).

The bounds keep one job's status small whatever a training script sends: a percentage of 0-100, a
non-negative estimate, at most `MAX_METRICS` metrics, names and values of at most `MAX_METRIC_NAME` and
`MAX_METRIC_VALUE` characters (defined once, in the runtime contract that the pods' helpers share). The
generated CRD carries the same bounds, so the API server enforces them against any writer. A report with
more metrics, or longer names and values, than the bounds keeps what fits (the SDK sends up to 256 metrics);
one whose percentage or estimate is out of range is refused before anything is written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any

from pydantic import Field, StringConstraints

from kubetrain.api.meta import Int32, Int64, Time, WireModel
from kubetrain.podcontract.progress import MAX_METRIC_NAME, MAX_METRIC_VALUE, MAX_METRICS

__all__ = [
    "MAX_METRICS",
    "MAX_METRIC_NAME",
    "MAX_METRIC_VALUE",
    "TrainerMetric",
    "TrainerStatus",
    "from_report",
    "latest_metric",
    "replacing",
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


def from_report(document: object, at: datetime) -> TrainerStatus:
    """The status a report stands for (`document`: its parsed JSON body), received at `at`.

    Read as Kubeflow's clients send it: `lastUpdatedTime` may be there (the status records `at` instead: a
    pod's clock is not the cluster's), a percentage or an estimate may be a float (its whole part is kept),
    metric values may be numbers (kept as their text); metrics past `MAX_METRICS` and characters past
    the name and value bounds are cut. ValueError (pydantic's ValidationError is one) says what is wrong."""
    report = document.get("trainerStatus") if isinstance(document, Mapping) else None
    if not isinstance(report, Mapping):
        raise ValueError('the body must be {"trainerStatus": {...}}')
    fields: dict[str, Any] = {"lastUpdatedTime": at}
    for key in ("progressPercentage", "estimatedRemainingSeconds"):
        if report.get(key) is not None:
            fields[key] = _whole(key, report[key])
    metrics = report.get("metrics")
    if metrics is not None:
        if not isinstance(metrics, list):
            raise ValueError("trainerStatus.metrics must be a list of {name, value}")
        fields["metrics"] = [_metric(m) for m in metrics[:MAX_METRICS]]
    return TrainerStatus.model_validate(fields)


def _whole(key: str, value: object) -> object:
    """A float's whole part (an SDK caller may pass 42.5); anything else as sent, for the model to judge."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"trainerStatus.{key} must be a finite number")
        return int(value)
    return value


def _metric(metric: object) -> dict[str, object]:
    if not isinstance(metric, Mapping):
        raise ValueError("each of trainerStatus.metrics must be {name, value}")
    name, value = metric.get("name"), metric.get("value")
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(name, str) or not isinstance(value, str):
        raise ValueError("a metric's name and value must be strings")
    return {"name": name[:MAX_METRIC_NAME], "value": value[:MAX_METRIC_VALUE]}


def replacing(status: TrainerStatus) -> dict[str, Any]:
    """`status` as the value of a JSON merge patch that replaces the stored one whole: a field the report
    leaves out is written as null, so it is gone (an ETA of an earlier report never outlives it)."""
    wire = status.to_wire()
    return {alias: wire.get(alias) for alias in _WIRE_FIELDS}


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


_WIRE_FIELDS = tuple(field.alias or name for name, field in TrainerStatus.model_fields.items())
