"""Jobs' training progress as people and scripts read it: a live bar per job on a terminal, lines otherwise.

`kubetrain wait` and `kubetrain get -w` hand every new version of a job to `JobBars`. On a terminal each job
gets one line that is redrawn in place: its state, a bar of `status.trainerStatus.progressPercentage`, the
ETA, the loss (or accuracy) and the time watched. Anywhere else (CI logs, pipes) a job gets one plain line
each time what it shows changes, so that logs stay short and `grep`-able.

rich draws the bars and is imported on first use, on a terminal only: the operator runs from this same
command line, and its memory at rest must not pay for a terminal library (a test checks it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from kubetrain.api import AnyJob, latest_metric
from kubetrain.cli.output import NONE, eta_text, human_age, metric_text, percent_text, replica_counts
from kubetrain.client.jobs import condition, job_state

if TYPE_CHECKING:
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID

__all__ = ["JobBars", "progress_line", "progress_suffix"]


def progress_suffix(job: AnyJob) -> str:
    """`; 42%, ETA 5m10s, loss=0.0412` once the trainer has reported, else nothing."""
    status = job.status.trainer_status if job.status is not None else None
    if status is None:
        return ""
    shown = [percent_text(status), f"ETA {eta_text(status)}", metric_text(status)]
    return "; " + ", ".join(text for text in shown if NONE not in text)


def progress_line(job: AnyJob) -> str:
    """`PyTorchJob mnist: Running (PyTorchJobRunning); Master 1 active; Worker 2 active; 42%, ETA 5m`."""
    state = job_state(job)
    last = condition(job, state) if state else None
    head = f"{job.kind} {job.name}: {state or 'waiting for the operator'}"
    if last is not None and last.reason:
        head += f" ({last.reason})"
    parts = [head]
    for rtype, (active, succeeded, failed) in replica_counts(job).items():
        counts = [
            f"{n} {word}" for n, word in ((active, "active"), (succeeded, "succeeded"), (failed, "failed"))
        ]
        shown = [c for c in counts if not c.startswith("0 ")] or ["no pods"]
        parts.append(f"{rtype} {', '.join(shown)}")
    return "; ".join(parts) + progress_suffix(job)


class JobBars:
    """The live view of one or more jobs; `__call__` takes each new version of a job, `close()` ends it."""

    def __init__(self, stream: TextIO, *, tty: bool, clock: Callable[[], float] = time.monotonic) -> None:
        self._stream, self._tty, self._clock = stream, tty, clock
        self._start = clock()
        self._lines: dict[tuple[str, str, str], str] = {}
        self._lock = threading.Lock()
        self._bars: RichProgress | None = None
        self._tasks: dict[tuple[str, str, str], TaskID] = {}

    def __call__(self, job: AnyJob) -> None:
        key = (job.kind, job.namespace, job.name)
        with self._lock:
            if self._tty:
                self._draw(key, job)
            else:
                self._print(key, progress_line(job))

    def _print(self, key: tuple[str, str, str], line: str) -> None:
        if self._lines.get(key) == line:
            return
        self._lines[key] = line
        self._stream.write(f"[{human_age(self._clock() - self._start)}] {line}\n")
        self._stream.flush()

    def _draw(self, key: tuple[str, str, str], job: AnyJob) -> None:
        bars = self._bars or self._open()
        status = job.status.trainer_status if job.status is not None else None
        fields: dict[str, Any] = {
            "state": job_state(job) or "Pending",
            "eta": f"ETA {eta_text(status)}" if status is not None else "",
            "metric": metric_text(status) if latest_metric(status) is not None else "",
        }
        done = status.progress_percentage if status is not None else None
        task = self._tasks.get(key)
        if task is None:
            task = self._tasks[key] = bars.add_task(f"{job.kind} {job.name}", total=100, **fields)
        bars.update(task, completed=done or 0, **fields)

    def _open(self) -> RichProgress:
        from rich.console import Console  # noqa: PLC0415 - on a terminal only (see the module docstring)
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: PLC0415

        console = Console(file=self._stream, force_terminal=True)
        self._bars = Progress(
            TextColumn("{task.description}"),
            TextColumn("{task.fields[state]}"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TextColumn("{task.fields[eta]}"),
            TextColumn("{task.fields[metric]}"),
            TimeElapsedColumn(),
            console=console,
            refresh_per_second=4,
        )
        self._bars.start()
        return self._bars

    def close(self) -> None:
        """Draw the last state and leave it on the screen."""
        with self._lock:
            if self._bars is not None:
                self._bars.stop()
