"""The results of operator_scale runs: one `Row` per (mode, N, R), rendered as a Markdown table and JSON.

Pure functions only, so that the table a reader sees is unit-tested without a control plane. Missing
figures (a run that timed out before all pods existed, a cluster without an audit log) render as `n/a`,
never as zero.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from opbench.histogram import FAMILY, ReconcileTimes

__all__ = ["Mode", "Row", "floor_ratio", "peer_ratios", "render_json", "render_markdown"]

NA = "n/a"


class Mode(StrEnum):
    """What created the pods."""

    OPERATOR = "operator"
    FLOOR = "floor"
    PEER = "peer"
    """Another operator for the same kinds (Kubeflow's own), measured the same way as the operator."""


@dataclass(frozen=True)
class Row:
    """One run. Times are seconds from the start of the run (first job create, or the floor's go signal)."""

    mode: Mode
    kind: str
    jobs: int
    replicas: int
    pods: int
    outcome: str
    """"ok", "timeout", or what went wrong."""
    load_before: float
    """The machine's 1-minute load average when the run started (the machine may be shared)."""
    steal_seconds: float | None = None
    """CPU seconds the VM's host took from the machine (all CPUs) during the run's CPU window: the host's
    other guests, which no load average shows."""
    t_submitted: float | None = None
    t_pods: float | None = None
    t_running: float | None = None
    t_done: float | None = None
    requests: int | None = None
    requests_by_call: Mapping[str, int] = field(default_factory=dict)
    refused_by_call: Mapping[str, int] = field(default_factory=dict)
    """Requests answered with an error, by call and status code (e.g. conflicts on a status patch)."""
    cpu_seconds: float | None = None
    """CPU (user + system) of the process tree under test during the run, start-up excluded."""
    cpu_total_seconds: float | None = None
    """The same, start-up included."""
    peak_rss_mib: float | None = None
    peer: str | None = None
    """The peer's name (peer mode)."""
    reconciles: ReconcileTimes | None = None
    """The operator's own reconcile-time histogram at the end of the run, when its /metrics was read."""

    @property
    def label(self) -> str:
        """The mode, and the peer's name in peer mode: `peer (mpi-operator)`."""
        return f"{self.mode} ({self.peer})" if self.peer else str(self.mode)

    @property
    def requests_per_job(self) -> float | None:
        return None if self.requests is None or not self.jobs else self.requests / self.jobs


_COLUMNS = (
    "mode",
    "N",
    "R",
    "pods",
    "jobs created s",
    "all pods s",
    "all Running s",
    "all Succeeded s",
    "API requests",
    "req/job",
    "CPU s",
    "peak RSS MiB",
    "all pods / floor",
    "load",
    "steal s",
    "outcome",
)


def floor_ratio(row: Row, rows: Sequence[Row]) -> float | None:
    """t(all pods) of `row` divided by that of the floor run of the same kind, N and R (None if unknown)."""
    floor = next(
        (
            r
            for r in rows
            if r.mode is Mode.FLOOR and (r.kind, r.jobs, r.replicas) == (row.kind, row.jobs, row.replicas)
        ),
        None,
    )
    if floor is None or floor.t_pods is None or row.t_pods is None or floor.t_pods <= 0:
        return None
    return row.t_pods / floor.t_pods


_RATIOS = {
    "t_pods": "all pods",
    "cpu_seconds": "CPU s",
    "peak_rss_mib": "peak RSS",
    "requests": "API requests",
}


def peer_ratios(row: Row, rows: Sequence[Row]) -> dict[str, float | None] | None:
    """For a peer `row`: the operator's figure over the peer's, for time to all pods, CPU, peak RSS and API
    requests, from the operator run of the same kind, N and R (None without one; a figure is None when
    either side lacks it). Below 1: the operator took less."""
    if row.mode is not Mode.PEER:
        return None
    operator = next(
        (
            r
            for r in rows
            if r.mode is Mode.OPERATOR and (r.kind, r.jobs, r.replicas) == (row.kind, row.jobs, row.replicas)
        ),
        None,
    )
    if operator is None:
        return None
    ratios: dict[str, float | None] = {}
    for name in _RATIOS:
        ours, theirs = getattr(operator, name), getattr(row, name)
        ratios[name] = None if ours is None or theirs is None or theirs <= 0 else ours / theirs
    return ratios


def _num(value: float | None, digits: int = 1) -> str:
    return NA if value is None else f"{value:.{digits}f}"


def _cells(row: Row, rows: Sequence[Row]) -> list[str]:
    ratio = floor_ratio(row, rows)
    return [
        row.label,
        str(row.jobs),
        str(row.replicas),
        str(row.pods),
        _num(row.t_submitted),
        _num(row.t_pods),
        _num(row.t_running),
        _num(row.t_done),
        NA if row.requests is None else str(row.requests),
        _num(row.requests_per_job),
        _num(row.cpu_seconds),
        _num(row.peak_rss_mib, 0),
        NA if ratio is None else f"{ratio:.2f}x",
        f"{row.load_before:.1f}",
        _num(row.steal_seconds, 2),
        row.outcome,
    ]


def render_markdown(rows: Sequence[Row], *, title: str, notes: Sequence[str] = ()) -> str:
    """A Markdown section: `title`, the table (rows in the given order), then `notes` as a bullet list."""
    lines = [f"## {title}", "", _line(_COLUMNS), _line(["---"] * len(_COLUMNS))]
    lines += [_line(_cells(row, rows)) for row in rows]
    versus = [(row, peer_ratios(row, rows)) for row in rows if row.mode is Mode.PEER]
    if versus:
        lines += ["", "operator / peer, same kind, N and R (below 1.00x: the operator took less):", ""]
        header = ["N", "R", "peer", *_RATIOS.values()]
        lines += [_line(header), _line(["---"] * len(header))]
        for row, ratios in versus:
            cells = [
                NA if ratios is None or ratios[name] is None else f"{ratios[name]:.2f}x" for name in _RATIOS
            ]
            lines.append(_line([str(row.jobs), str(row.replicas), str(row.peer), *cells]))
    if notes:
        lines += ["", *(f"- {note}" for note in notes)]
    timed = [row for row in rows if row.reconciles is not None and row.reconciles.count]
    if timed:
        lines += ["", f"Reconcile times, from the process's own `{FAMILY}` (bucket bounds):", ""]
        lines += [f"- {row.label} N={row.jobs}: {_times_line(row)}" for row in timed]
    calls = [row for row in rows if row.requests_by_call]
    if calls:
        lines += ["", "Requests by call (most frequent first):", ""]
        lines += [f"- {row.label} N={row.jobs}: {_calls_line(row)}" for row in calls]
    return "\n".join(lines) + "\n"


def _times_line(row: Row) -> str:
    times = row.reconciles
    assert times is not None
    line = f"{times.count} reconciles, p50 <= {_num(times.p50, 3)} s, p99 <= {_num(times.p99, 3)} s"
    if times.throttle_p99 is not None:
        wait = _num(times.throttle_p99, 3)
        line += f"; its requests' waits for its own client rate limiter: p99 <= {wait} s"
    return line


def _calls_line(row: Row) -> str:
    refused = sum(row.refused_by_call.values())
    tail = f"; refused {refused} ({_top_calls(row.refused_by_call, 3)})" if refused else "; refused 0"
    return _top_calls(row.requests_by_call) + tail


def _top_calls(calls: Mapping[str, int], limit: int = 8) -> str:
    ranked = sorted(calls.items(), key=lambda item: (-item[1], item[0]))
    shown = ", ".join(f"{name} {count}" for name, count in ranked[:limit])
    rest = sum(count for _, count in ranked[limit:])
    return f"{shown}, other {rest}" if rest else shown


def _line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def render_json(rows: Sequence[Row], *, meta: Mapping[str, Any]) -> str:
    """Every figure of every row (the table rounds them), the floor ratios, and `meta` (machine, options)."""
    body = {
        "meta": dict(meta),
        "rows": [
            {
                **asdict(row),
                "requests_by_call": dict(row.requests_by_call),
                "refused_by_call": dict(row.refused_by_call),
                "requests_per_job": row.requests_per_job,
                "pods_vs_floor": floor_ratio(row, rows),
                "operator_over_peer": peer_ratios(row, rows),
            }
            for row in rows
        ],
    }
    return json.dumps(body, indent=2, sort_keys=True) + "\n"
