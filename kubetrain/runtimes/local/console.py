"""Where a local run writes: replica output prefixed like `kubectl logs --prefix`, decisions, the live table.

On a terminal the per-replica table stays at the bottom and is redrawn in place (the lines above it
scroll as usual), under a bar of the trainer's progress (ETA, loss and its sparkline), and the run ends
with a table of the final metrics; elsewhere (a pipe, CI, `--plain`) there is no table: plain lines, plus
one line per change of the job's condition, and one line of the final report. Every replica's output is
also appended to `<log_dir>/<pod>.log` when a log directory is given. The last line is always the job's
final condition (or why the run stopped).
"""

from __future__ import annotations

import shutil
import zlib
from pathlib import Path
from typing import TextIO

from kubetrain.runtimes.local.progressbar import summary_lines, summary_text
from kubetrain.runtimes.local.view import Snapshot, final_line, render_table

__all__ = ["Console"]

_ERASE_UP = "\x1b[{n}F\x1b[J"  # cursor to the start of the line n lines up, then clear to the end
_COLORS = (31, 32, 33, 34, 35, 36, 91, 92, 93, 94, 95, 96)


class Console:
    """The sink of one run: kubelet output and notices, operator events, snapshots; see the docstring."""

    def __init__(self, stream: TextIO, *, tty: bool, log_dir: Path | None = None) -> None:
        self._out = stream
        self._tty = tty
        self._log_dir = log_dir
        self._logs: dict[str, TextIO] = {}
        self._drawn = 0
        self._drawn_lines: list[str] = []
        self._snapshot: Snapshot | None = None
        self._last_condition: tuple[str, str] | None = None
        if log_dir is not None:
            log_dir.mkdir(parents=True, exist_ok=True)

    # KubeletSink ------------------------------------------------------------------------------------
    def output(self, pod: str, container: str, line: str) -> None:
        self._log(pod, line)
        self._line(f"{self._paint(pod, f'[pod/{pod}/{container}]')} {line}")

    def notice(self, pod: str, message: str) -> None:
        self._log(pod, f"[kubetrain] {message}")
        self._line(f"[kubetrain] pod/{pod}: {message}")

    # the operator -----------------------------------------------------------------------------------
    def event(self, subject: str, event_type: str, reason: str, message: str) -> None:
        self._line(f"[event] {subject}: {event_type} {reason}: {message}")

    def update(self, snapshot: Snapshot) -> None:
        """A new state of the job: redraw the table (terminal) or print a changed condition (plain)."""
        self._snapshot = snapshot
        cond = snapshot.condition
        key = None if cond is None else (cond.type, cond.reason)
        if not self._tty and cond is not None and key != self._last_condition:
            who = f"{snapshot.kind} {snapshot.namespace}/{snapshot.name}"
            self._line(f"[kubetrain] {who}: {cond.type} ({cond.reason})")
        self._last_condition = key
        if self._tty:
            self._redraw()

    def finish(self, snapshot: Snapshot, *, outcome: str | None = None) -> None:
        """The final table (also when plain) and the final line; log files are closed."""
        self._snapshot = snapshot
        self._erase()
        for line in render_table(snapshot, self._width(), progress=self._tty):
            self._out.write(line + "\n")
        if self._tty:
            for line in summary_lines(snapshot.trainer):
                self._out.write(line + "\n")
        elif snapshot.trainer is not None:
            self._out.write(f"[kubetrain] final report: {summary_text(snapshot.trainer)}\n")
        self._out.write(final_line(snapshot, outcome=outcome) + "\n")
        self._out.flush()
        for log in self._logs.values():
            log.close()
        self._logs.clear()

    # internals --------------------------------------------------------------------------------------
    def _line(self, text: str) -> None:
        self._erase()  # the table comes back at the next update (a few times a second)
        self._out.write(text + "\n")
        self._out.flush()

    def _erase(self) -> None:
        if self._tty and self._drawn:
            self._out.write(_ERASE_UP.format(n=self._drawn))
            self._drawn = 0

    def _redraw(self) -> None:
        if self._snapshot is None:
            return
        # never wrap: the erase counts lines
        lines = render_table(self._snapshot, self._width() - 1, progress=True)
        if self._drawn and lines == self._drawn_lines:
            return
        self._erase()
        self._out.write("\n".join(lines) + "\n")
        self._drawn, self._drawn_lines = len(lines), lines
        self._out.flush()

    def _width(self) -> int:
        return shutil.get_terminal_size((120, 24)).columns if self._tty else 200

    def _paint(self, pod: str, text: str) -> str:
        if not self._tty:
            return text
        color = _COLORS[zlib.crc32(pod.encode()) % len(_COLORS)]
        return f"\x1b[{color}m{text}\x1b[0m"

    def _log(self, pod: str, line: str) -> None:
        if self._log_dir is None:
            return
        log = self._logs.get(pod)
        if log is None:
            log = self._logs[pod] = (self._log_dir / f"{pod}.log").open("a", encoding="utf-8")
        log.write(line + "\n")
        log.flush()
