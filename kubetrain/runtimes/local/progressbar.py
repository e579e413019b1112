"""A local run's training progress as text: the live bar (percentage, ETA, loss and its sparkline) and the
summary of the final metrics.

The values come from the job's `status.trainerStatus`, which the run's report receiver (`reports.py`)
writes from the replicas' KEP-2779 reports. `LossHistory` keeps the loss of each new report (bounded) for
the sparkline, so that a user sees at a glance whether training converges.
"""

from __future__ import annotations

import math
from collections import deque

from kubetrain.api import TrainerStatus, latest_metric

__all__ = ["LossHistory", "bar_line", "duration", "sparkline", "summary_lines", "summary_text"]

_TICKS = "▁▂▃▄▅▆▇█"
_BAR = 24


def duration(seconds: float) -> str:
    """`42s`, `5m10s`, `2h05m`."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def sparkline(values: list[float]) -> str:
    """One block character per value, scaled between the smallest and the largest."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return ""
    low, high = min(finite), max(finite)
    span = high - low or 1.0
    return "".join(_TICKS[min(len(_TICKS) - 1, int((v - low) / span * len(_TICKS)))] for v in finite)


class LossHistory:
    """The loss (or the shown metric) of each new report, at most `size` of them."""

    def __init__(self, size: int = 30) -> None:
        self._values: deque[float] = deque(maxlen=size)
        self._seen: object = None

    def add(self, status: TrainerStatus | None) -> None:
        metric = latest_metric(status)
        if status is None or metric is None or status.last_updated_time == self._seen:
            return
        self._seen = status.last_updated_time
        try:
            self._values.append(float(metric.value))
        except ValueError:
            return

    @property
    def values(self) -> list[float]:
        return list(self._values)


def bar_line(status: TrainerStatus, losses: list[float]) -> str:
    """`[██████████░░░░░░]  42%  ETA 5m10s  loss=0.0412 ▇▆▅▃▂▁`."""
    percent = status.progress_percentage
    filled = round(_BAR * (percent or 0) / 100)
    parts = [f"[{'█' * filled}{'░' * (_BAR - filled)}] {percent if percent is not None else '?':>3}%"]
    if status.estimated_remaining_seconds is not None:
        parts.append(f"ETA {duration(status.estimated_remaining_seconds)}")
    metric = latest_metric(status)
    if metric is not None:
        parts.append(f"{metric.name}={metric.value} {sparkline(losses)}".rstrip())
    return "  ".join(parts)


def summary_text(status: TrainerStatus) -> str:
    """`progress 100%, epoch=30, loss=0.0128, accuracy=0.97`: the final report on one line."""
    parts = [f"progress {status.progress_percentage}%"] if status.progress_percentage is not None else []
    parts += [f"{m.name}={m.value}" for m in status.metrics or ()]
    return ", ".join(parts) or "(empty)"


def summary_lines(status: TrainerStatus | None) -> list[str]:
    """The final metrics as a two-column table (nothing when the trainer never reported)."""
    metrics = (status.metrics if status is not None else None) or []
    if status is None or not metrics:
        return []
    width = max(len("METRIC"), *(len(m.name) for m in metrics))
    lines = [f"{'METRIC'.ljust(width)}  VALUE"]
    lines += [f"{m.name.ljust(width)}  {m.value}" for m in metrics]
    if status.progress_percentage is not None:
        lines.append(f"{'progress'.ljust(width)}  {status.progress_percentage}%")
    return lines
