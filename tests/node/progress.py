"""Training progress as a user sees it on the real node: `kubectl get <plural>` (its Progress and ETA printer
columns) sampled while a job runs, and `status.trainerStatus` once it ended.

Nothing is configured for it: the operator runs as `kubectl apply -k manifests/base` installs it (progress
endpoint on, behind the `kubetrain-operator` Service), and the example's pods report through the env and the
projected token the operator injects, to the Service's DNS name (CoreDNS) and ClusterIP (kube-proxy), over
TLS verified with the published CA. The helpers only look.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kubetrain.testing.node_plane import NodePlane

Obj = dict[str, Any]


EPOCHS = 150
"""The example's epochs take a fraction of a second on the node (0.2-0.5 s on a loaded 2-core machine: with
20, the 19 after the first report took under 10 s), so the operator (one status write per job per 10 s,
`--progress-interval`) wrote only the first report and the last. The test trains 150, so that reports with
an ETA land while it runs, with room for a faster machine (60 passed with about 13 s after the first)."""


def lengthen(job: Obj, epochs: int = EPOCHS) -> Obj:
    """The job with `--epochs epochs` in every container's args (printed: the file says 6)."""
    for replica in next(v for k, v in job["spec"].items() if k.endswith("ReplicaSpecs")).values():
        for container in replica["template"]["spec"]["containers"]:
            args = container.get("args", [])
            if "--epochs" in args:
                args[args.index("--epochs") + 1] = str(epochs)
    print(f"{job['metadata']['name']}: trained for {epochs} epochs, so that kubectl get can show an ETA")
    return job


@dataclass(frozen=True)
class Row:
    """One job's line of `kubectl get <plural>`; None for an empty cell."""

    state: str | None
    progress: int | None
    eta: int | None


def parse_table(text: str, name: str) -> Row | None:
    """`name`'s row of kubectl's table, read by the header's column offsets (an empty cell is blank)."""
    lines = text.splitlines()
    if not lines:
        return None
    header = lines[0]
    columns = header.split()
    starts = [header.index(c) for c in columns]
    bounds = dict(zip(columns, zip(starts, [*starts[1:], None], strict=True), strict=True))

    def cell(line: str, column: str) -> str | None:
        begin, end = bounds[column]
        value = line[begin:end].strip()
        return None if value in {"", "<none>"} else value

    for line in lines[1:]:
        if cell(line, "NAME") == name:
            progress, eta = cell(line, "PROGRESS"), cell(line, "ETA")
            return Row(cell(line, "STATE"), _int(progress), _int(eta))
    return None


def _int(cell: str | None) -> int | None:
    return None if cell is None else int(cell)


@contextmanager
def printer_columns(plane: NodePlane, namespace: str, job: Obj, every: float = 0.5) -> Iterator[list[Row]]:
    """Runs `kubectl get <plural>` in `namespace` every `every` seconds while the block runs; the rows of
    `job` seen, in order."""
    plural, name = job["kind"].lower() + "s", job["metadata"]["name"]
    seen: list[Row] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            done = plane.kubectl("get", plural, namespace=namespace, check=False, timeout=30)
            row = parse_table(done.stdout, name) if done.returncode == 0 else None
            if row is not None:
                seen.append(row)
            stop.wait(every)

    thread = threading.Thread(target=sample, name="kubectl-get", daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(timeout=60)


def distinct(rows: list[Row]) -> list[Row]:
    """The rows without consecutive repeats: what a user watching `kubectl get -w` would have seen."""
    return [row for i, row in enumerate(rows) if i == 0 or rows[i - 1] != row]


def assert_progress_shown(rows: list[Row], status: Obj, rank0: Obj) -> None:
    """While the job ran, `kubectl get` showed a Progress strictly between 0 and 100 with an ETA; at its end
    the status holds 100 % and the rank 0's final loss and accuracy (the one its result line printed)."""
    shown = distinct(rows)
    print(f"kubectl get, {len(rows)} samples: {shown}")
    midway = [r for r in shown if r.progress is not None and 0 < r.progress < 100 and r.eta is not None]
    assert midway, f"no sample showed a Progress between 0 and 100 with an ETA while the job ran: {shown}"
    assert all(r.state == "Running" for r in midway), shown
    trainer = status.get("trainerStatus") or {}
    assert trainer.get("progressPercentage") == 100, f"the last report did not land: {trainer}"
    metrics = {m["name"]: m["value"] for m in trainer.get("metrics", [])}
    assert {"loss", "accuracy", "epoch"} <= set(metrics), metrics
    assert float(metrics["accuracy"]) == rank0["accuracy"], (metrics, rank0)
    assert int(float(metrics["epoch"])) == rank0["epochs"], (metrics, rank0)
    assert trainer.get("estimatedRemainingSeconds") in (0, None), trainer
