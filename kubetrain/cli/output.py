"""How jobs look on a terminal and to scripts: kubectl's table, ages, `-o yaml|json|wide|name`.

The table keeps kubectl's habits so that eyes and `awk` both cope: upper-case headers, columns separated
by three spaces, `<none>` for an empty cell, ages like `45s`, `5m30s`, `3h`, `12d`. YAML and JSON are the
objects as the API server stores them (one object, or a `kind: List` for several), `name` is
`<singular>.<group>/<name>`, ready for `kubectl`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import yaml

from kubetrain.api import AnyJob, TrainerStatus, kind_info, latest_metric
from kubetrain.client.jobs import job_state

__all__ = [
    "FORMATS",
    "NONE",
    "age",
    "dump",
    "eta_text",
    "human_age",
    "job_table",
    "metric_text",
    "percent_text",
    "replica_counts",
    "replica_summary",
    "resource_name",
    "table",
]

FORMATS = ("yaml", "json", "wide", "name")
NONE = "<none>"


def human_age(seconds: float) -> str:
    """A duration as kubectl prints ages: `45s`, `5m30s`, `95m`, `5h3m`, `30h`, `3d4h`, `20d`, `2y100d`."""
    whole = int(seconds)
    if whole < 0:
        return "0s"
    minutes, hours, days = whole // 60, whole // 3600, whole // 86400
    if whole < 120:
        return f"{whole}s"
    if minutes < 10:
        return _pair(minutes, "m", whole % 60, "s")
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return _pair(hours, "h", minutes % 60, "m")
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return _pair(days, "d", hours % 24, "h")
    if days < 365 * 2:
        return f"{days}d"
    if days < 365 * 8:
        return _pair(days // 365, "y", days % 365, "d")
    return f"{days // 365}y"


def _pair(big: int, big_unit: str, small: int, small_unit: str) -> str:
    return f"{big}{big_unit}{small}{small_unit}" if small else f"{big}{big_unit}"


def age(when: datetime | None, now: datetime) -> str:
    """The age of a timestamp, or `<none>`."""
    return human_age((now - when).total_seconds()) if when is not None else NONE


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns, three spaces apart; no trailing spaces."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)]
    lines = []
    for row in (headers, *rows):
        cells = [str(cell).ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("   ".join(cells).rstrip())
    return "\n".join(lines)


def replica_counts(job: AnyJob) -> dict[str, tuple[int, int, int]]:
    """(active, succeeded, failed) pods per replica type, from `status.replicaStatuses`."""
    statuses = (job.status.replica_statuses if job.status else None) or {}
    return {rtype: (s.active or 0, s.succeeded or 0, s.failed or 0) for rtype, s in statuses.items()}


def replica_summary(job: AnyJob) -> str:
    """`Master:1,Worker:3`: the replicas asked for, per type (defaults filled in as the operator would)."""
    info = kind_info(job)
    parts = []
    for rtype, spec in job.replica_specs.items():
        wanted = spec.replicas if spec.replicas is not None else info.default_replicas.get(rtype, 1)
        parts.append(f"{rtype}:{wanted}")
    return ",".join(parts) or NONE


def resource_name(job: AnyJob) -> str:
    """`pytorchjob.kubeflow.org/mnist`, as `kubectl get -o name` prints it."""
    info = kind_info(job)
    return f"{info.singular}.{info.group}/{job.name}"


def percent_text(status: TrainerStatus | None) -> str:
    """`42%`, or `<none>` before the first report."""
    value = status.progress_percentage if status is not None else None
    return f"{value}%" if value is not None else NONE


def eta_text(status: TrainerStatus | None) -> str:
    """`5m10s`, as ages are written, or `<none>`."""
    value = status.estimated_remaining_seconds if status is not None else None
    return human_age(value) if value is not None else NONE


def metric_text(status: TrainerStatus | None) -> str:
    """`loss=0.0412` (the loss, else the accuracy, else the first metric), or `<none>`."""
    metric = latest_metric(status)
    return f"{metric.name}={metric.value}" if metric is not None else NONE


def job_table(jobs: Sequence[AnyJob], *, wide: bool, namespaces: bool, now: datetime | None = None) -> str:
    """NAME KIND STATE PROGRESS ETA METRIC AGE (after NAMESPACE with -A; plus REPLICAS ACTIVE SUCCEEDED
    FAILED with -o wide). PROGRESS, ETA and METRIC (the latest loss, else accuracy): the trainer's report."""
    now = now or datetime.now(UTC)
    headers = ["NAMESPACE"] if namespaces else []
    headers += ["NAME", "KIND", "STATE", "PROGRESS", "ETA", "METRIC", "AGE"]
    headers += ["REPLICAS", "ACTIVE", "SUCCEEDED", "FAILED"] if wide else []
    rows = []
    for job in jobs:
        row = [job.namespace] if namespaces else []
        trainer = job.status.trainer_status if job.status is not None else None
        row += [job.name, job.kind, job_state(job) or NONE]
        row += [percent_text(trainer), eta_text(trainer), metric_text(trainer)]
        row.append(age(job.metadata.creation_timestamp, now))
        if wide:
            counts = replica_counts(job).values()
            totals = [sum(c[i] for c in counts) for i in range(3)]
            row += [replica_summary(job), *(str(t) for t in totals)]
        rows.append(row)
    return table(headers, rows)


def dump(jobs: Sequence[AnyJob], fmt: str, *, single: bool) -> str:
    """`-o yaml|json|name` text: one object when `single`, else a `kind: List` (names: one per line)."""
    if fmt == "name":
        return "\n".join(resource_name(job) for job in jobs)
    wire: Any = jobs[0].to_wire() if single and jobs else _as_list(jobs)
    if fmt == "json":
        return json.dumps(wire, indent=4)
    return yaml.safe_dump(wire, sort_keys=False).rstrip("\n")


def _as_list(jobs: Sequence[AnyJob]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": [j.to_wire() for j in jobs], "metadata": {}}
