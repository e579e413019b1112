"""What a local run looks like to its user, as pure values and text: per-replica rows and the job's condition.

`Board` remembers every replica seen (a deleted pod keeps its last row, marked Deleted) and counts
restarts the way a user thinks of them: in-place container restarts plus pods the operator replaced.
`render_table` draws the live table (under the training progress bar, on a terminal); `final_line` states
how the job ended, with the operator's reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kubetrain.api import TrainerStatus
from kubetrain.common.job.labels import REPLICA_INDEX_LABEL, REPLICA_TYPE_LABEL
from kubetrain.common.kube import objects
from kubetrain.common.kube.resources import Obj
from kubetrain.runtimes.local.progressbar import bar_line

__all__ = ["Board", "Condition", "ReplicaRow", "Snapshot", "final_line", "latest_condition", "render_table"]

_FINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Condition:
    type: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class ReplicaRow:
    pod: str
    rtype: str = ""
    index: int | None = None
    state: str = "Pending"
    restarts: int = 0
    exit_code: int | None = None
    pid: int | None = None
    ports: str = ""
    gpus: str = ""
    """The GPUs the pod holds (indices), as a device plugin allocated them; empty: none."""


@dataclass(frozen=True)
class Snapshot:
    kind: str
    namespace: str
    name: str
    condition: Condition | None
    rows: tuple[ReplicaRow, ...]
    elapsed: float = 0.0
    trainer: TrainerStatus | None = None
    """The trainer's latest report (`status.trainerStatus`), None before the first."""
    losses: tuple[float, ...] = ()
    """The loss of each report so far (bounded), for the sparkline."""


def latest_condition(job: Obj | None) -> Condition | None:
    """The job's current condition: a true terminal one if any, else the last true one."""
    conditions = [
        c for c in ((job or {}).get("status") or {}).get("conditions") or () if c.get("status") == "True"
    ]
    final = [c for c in conditions if c.get("type") in _FINAL]
    chosen = (final or conditions or [None])[-1]
    if chosen is None:
        return None
    return Condition(
        str(chosen.get("type", "")), str(chosen.get("reason", "")), str(chosen.get("message", ""))
    )


def pod_state(pod: Obj) -> tuple[str, int, int | None]:
    """(state text, container restarts, exit code) of a pod, as `kubectl get pods` would summarise it."""
    status: Mapping[str, Any] = pod.get("status") or {}
    containers = status.get("containerStatuses") or [{}]
    main = containers[0]
    state = main.get("state") or {}
    restarts = int(main.get("restartCount") or 0)
    terminated = state.get("terminated") or (main.get("lastState") or {}).get("terminated")
    code = int(terminated["exitCode"]) if terminated and terminated.get("exitCode") is not None else None
    waiting = (state.get("waiting") or {}).get("reason")
    phase = str(status.get("phase") or "Pending")
    if objects.is_deleting(pod):
        return "Terminating", restarts, code
    if phase in _FINAL:
        return phase, restarts, code
    if waiting:
        return str(waiting), restarts, code
    return phase, restarts, code


@dataclass
class Board:
    """Every replica of the run, current or gone: an informer handler on the run's pods, so that no state
    (a last exit code, a deletion) is missed between two redraws. See the module docstring."""

    _rows: dict[str, ReplicaRow] = field(default_factory=dict)
    _uids: dict[str, set[str]] = field(default_factory=dict)

    def on_add(self, obj: Obj) -> None:
        self._set(obj)

    def on_update(self, old: Obj, new: Obj) -> None:
        self._set(new)

    def on_delete(self, obj: Obj) -> None:
        self._set(obj, state="Deleted")

    def stopped(self) -> None:
        """The run is over: replicas still alive were stopped by it (whatever their pods still say)."""
        for name, row in self._rows.items():
            if row.state not in ("Succeeded", "Failed", "Deleted"):
                self._rows[name] = replace(row, state="Stopped")

    def rows(
        self, pids: Mapping[str, int], ports: Mapping[str, str], gpus: Mapping[str, str] | None = None
    ) -> tuple[ReplicaRow, ...]:
        """The rows, by replica type and index, with the running pids, local ports and GPUs of this moment."""
        rows = (
            replace(
                r,
                pid=pids.get(r.pod) if r.state in ("Running", "Terminating") else None,
                ports=ports.get(r.pod, ""),
                gpus=(gpus or {}).get(r.pod, ""),
            )
            for r in self._rows.values()
        )
        return tuple(sorted(rows, key=lambda r: (r.rtype, r.index or 0, r.pod)))

    def _set(self, pod: Obj, state: str | None = None) -> None:
        name = objects.name(pod)
        uids = self._uids.setdefault(name, set())
        uids.add(objects.uid(pod))
        current, restarts, code = pod_state(pod)
        labels = objects.labels(pod)
        index = labels.get(REPLICA_INDEX_LABEL)
        self._rows[name] = ReplicaRow(
            pod=name,
            rtype=str(labels.get(REPLICA_TYPE_LABEL, "")),
            index=int(index) if index and index.isdigit() else None,
            state=state or current,
            restarts=restarts + len(uids) - 1,
            exit_code=code,
        )


_COLUMNS = ("REPLICA", "TYPE", "STATE", "RESTARTS", "EXIT", "PID", "LOCAL PORTS")


def render_table(snapshot: Snapshot, width: int = 120, *, progress: bool = False) -> list[str]:
    """The live view: a header line with the job's condition, the training progress bar (with `progress`,
    once the trainer has reported), then one line per replica."""
    with_gpus = any(r.gpus for r in snapshot.rows)  # the GPUS column only where GPUs are in play
    columns = (*_COLUMNS, "GPUS") if with_gpus else _COLUMNS
    cells = [
        (r.pod, r.rtype, r.state, str(r.restarts), "" if r.exit_code is None else str(r.exit_code),
         "" if r.pid is None else str(r.pid), r.ports, *((r.gpus,) if with_gpus else ()))
        for r in snapshot.rows
    ]  # fmt: skip
    widths = [max(len(c[i]) for c in [columns, *cells]) for i in range(len(columns))]
    lines = [_header(snapshot)]
    if progress and snapshot.trainer is not None:
        lines.append(bar_line(snapshot.trainer, list(snapshot.losses)))
    for row in [columns, *cells]:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return [line[:width] for line in lines]


def _header(snapshot: Snapshot) -> str:
    cond = snapshot.condition
    state = "Submitted" if cond is None else f"{cond.type} ({cond.reason})" if cond.reason else cond.type
    minutes, seconds = divmod(int(snapshot.elapsed), 60)
    return f"{snapshot.kind} {snapshot.namespace}/{snapshot.name}  {state}  {minutes:02d}:{seconds:02d}"


def final_line(snapshot: Snapshot, *, outcome: str | None = None) -> str:
    """How the job ended: `<Kind> ns/name <Condition> (<Reason>): <message>`, or why the run stopped."""
    who = f"{snapshot.kind} {snapshot.namespace}/{snapshot.name}"
    cond = snapshot.condition
    if outcome is not None:
        now = "" if cond is None else f"; it was {cond.type}"
        return f"{who}: {outcome}{now}"
    if cond is None:
        return f"{who}: no condition"
    text = f"{who} {cond.type}"
    if cond.reason:
        text += f" ({cond.reason})"
    return f"{text}: {cond.message}" if cond.message else text
