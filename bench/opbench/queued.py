"""kueue_admission: N PyTorchJobs queued in Kueue v0.19 and admitted, through kubetrain's integration and
through Kueue's own kubeflow integration switched back on, on the same control plane, one after the other.

A path is one way a cluster admits the jobs:

- `kubetrain`: Kueue's default configuration plus manifests/kueue/integrations.yaml (PyTorchJob is an
  external framework); the operator with its `--kueue-integration` default makes and drives the Workloads;
- `kueue`: Kueue's own PyTorchJob integration switched back on (`kubeflow.org/pytorchjob` in
  `integrations.frameworks`), the operator told to leave every kind to Kueue (`--kueue-integration=none`):
  Kueue's webhook suspends each job, its controller makes the Workload and unsuspends the job.

Each run of a path starts a fresh Kueue (the path's configuration) and a fresh operator, each with an
identity of its own (a ServiceAccount: the audit log counts each one's requests), makes a ClusterQueue
with room for every job, then submits the N jobs, labelled with the LocalQueue, and waits until every job
has Succeeded. Measured: the time from the first create to all pods existing and to all jobs Succeeded
(the harness's watches), and the CPU seconds (/proc, the process trees) and API requests (audit log) of
the operator and of Kueue over that window. Everything a run made is removed before the next one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.resources import PODS, Obj
from kubetrain.testing import ControlPlane
from kubetrain.testing.kueue import Kueue
from kubetrain.testing.operator_process import OperatorProcess
from opbench.audit import read_requests
from opbench.cluster import create_namespace, delete_namespace, follow, submit
from opbench.identity import Identity, create_identity, delete_identity
from opbench.procstat import TreeSampler
from opbench.progress import Progress
from opbench.workload import Workload, kind_by_name

__all__ = ["PATHS", "AdmitPath", "QueuedRow", "QueuedSettings", "ratios", "render", "run_path"]

log = logging.getLogger("opbench")

QUEUE = "bench"
OPERATOR_ARGS = ("--no-leader-elect",)
"""One replica, as the other benchmarks run it."""
KUEUE_API = "kueue.x-k8s.io/v1beta2"
CPU_PER_POD = "10m"
"""What each pod requests, so that Kueue accounts quota for it; the ClusterQueue has room for all."""


@dataclass(frozen=True)
class AdmitPath:
    """One way to admit the jobs: Kueue's integrations switched on, the operator's extra flags."""

    name: str
    frameworks_on: tuple[str, ...]
    operator_args: tuple[str, ...]


PATHS = {
    "kubetrain": AdmitPath("kubetrain", (), ()),
    "kueue": AdmitPath("kueue", ("kubeflow.org/pytorchjob",), ("--kueue-integration=none",)),
}


@dataclass(frozen=True)
class QueuedSettings:
    plane: ControlPlane
    admin: dict[str, Any]
    workdir: Path
    jobs: int
    replicas: int
    run_for: str
    timeout: float


@dataclass(frozen=True)
class QueuedRow:
    """One run of one path."""

    path: str
    run: int
    jobs: int
    pods: int
    outcome: str
    t_pods: float | None
    t_done: float | None
    cpu_operator: float | None
    cpu_kueue: float | None
    requests_operator: int | None
    requests_kueue: int | None


def queued_job(workload: Workload, name: str) -> Obj:
    """One job of `workload`, labelled with the LocalQueue, each pod asking for CPU_PER_POD."""
    body = workload.job(name)
    body["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": QUEUE}
    for spec in body["spec"][workload.kind.replica_specs_field].values():
        spec["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": CPU_PER_POD}}
    return body


def queue_objects(namespace: str, pods: int) -> list[Obj]:
    quota = [{"name": "cpu", "nominalQuota": f"{pods * 10 + 100}m"}]
    spec = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": QUEUE, "resources": quota}]}],
    }
    return [
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": QUEUE}},
        {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": namespace}, "spec": spec},
        {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": {"name": QUEUE, "namespace": namespace},
         "spec": {"clusterQueue": namespace}},
    ]  # fmt: skip


async def run_path(api: ApiClient, settings: QueuedSettings, path: AdmitPath, run: int) -> QueuedRow:
    """One run of `path`; a failure is a row with its outcome."""
    workload = Workload(kind_by_name("PyTorchJob"), settings.jobs, settings.replicas, settings.run_for)
    tag = f"{path.name}-{run}-{secrets.token_hex(3)}"
    namespace = f"bench-{tag}"
    progress = Progress(pods=workload.pods, jobs=settings.jobs)
    found: dict[str, Any] = {"outcome": "not started"}
    async with _identities(api, settings, tag) as (op_id, kueue_id):
        scratch = settings.workdir / namespace
        kueue = Kueue(
            settings.plane,
            scratch / "kueue",
            frameworks_on=path.frameworks_on,
            kubeconfig=kueue_id.kubeconfig,
        )
        try:
            await asyncio.to_thread(kueue.start)
            await create_namespace(api, namespace)
            await asyncio.to_thread(_apply, settings.plane, queue_objects(namespace, workload.pods))
            found = await _measure(api, settings, path, workload, namespace, (op_id, kueue), progress)
        except Exception as err:  # a failed run is reported as a row
            found["outcome"] = f"error: {err}".splitlines()[0][:200]
            log.exception("run %s failed", tag)
        finally:  # while Kueue runs: it removes the finalizers of its Workloads and ClusterQueue
            await delete_namespace(api, namespace, within=300.0)
            await asyncio.to_thread(
                settings.plane.kubectl, "delete", "clusterqueue", namespace, "--ignore-not-found"
            )
            await asyncio.to_thread(kueue.stop)
        log.info("run %s: %s (%s)", tag, found["outcome"], progress.summary())
        audit = settings.plane.audit_log
        counted = [read_requests(audit, who.username).total if audit else None for who in (op_id, kueue_id)]
    return QueuedRow(
        path=path.name, run=run, jobs=settings.jobs, pods=workload.pods, outcome=found["outcome"],
        t_pods=progress.since_origin(progress.t_pods), t_done=progress.since_origin(progress.t_done),
        cpu_operator=found.get("cpu_operator"), cpu_kueue=found.get("cpu_kueue"),
        requests_operator=counted[0], requests_kueue=counted[1],
    )  # fmt: skip


@asynccontextmanager
async def _identities(
    api: ApiClient, settings: QueuedSettings, tag: str
) -> AsyncIterator[tuple[Identity, Identity]]:
    admin_dir = settings.plane.kubeconfig.parent
    made = [await create_identity(api, settings.admin, admin_dir, f"{who}-{tag}", settings.workdir)
            for who in ("op", "kueue")]  # fmt: skip
    try:
        yield made[0], made[1]
    finally:
        for identity in made:
            await delete_identity(api, identity)


async def _measure(
    api: ApiClient,
    settings: QueuedSettings,
    path: AdmitPath,
    workload: Workload,
    namespace: str,
    running: tuple[Identity, Kueue],
    progress: Progress,
) -> dict[str, Any]:
    """Start the operator as `running[0]`, then clock the jobs; the operator is stopped on the way out."""
    args = (*OPERATOR_ARGS, *path.operator_args)
    operator = OperatorProcess(
        running[0].kubeconfig, args, workdir=_dir(settings.workdir / namespace / "operator")
    )
    try:
        await asyncio.to_thread(operator.start().wait_ready, 120.0)
        samplers = [TreeSampler(operator.pid), TreeSampler(running[1].process.pid)]
        for sampler in samplers:
            sampler.start()
        try:
            return await _clocked(api, settings, workload, namespace, progress, samplers)
        finally:
            for sampler in samplers:
                await sampler.stop()
    finally:
        await asyncio.to_thread(operator.stop)


async def _clocked(
    api: ApiClient,
    settings: QueuedSettings,
    workload: Workload,
    namespace: str,
    progress: Progress,
    samplers: list[TreeSampler],
) -> dict[str, Any]:
    listed = [asyncio.Event(), asyncio.Event()]
    watches = [
        asyncio.ensure_future(follow(api, PODS, namespace, progress.observe_pod, listed[0])),
        asyncio.ensure_future(follow(api, workload.resource, namespace, progress.observe_job, listed[1])),
    ]
    try:
        for event in listed:
            await asyncio.wait_for(event.wait(), timeout=60.0)
        start = [s.sample().cpu_seconds for s in samplers]
        progress.origin = time.monotonic()
        bodies = [queued_job(workload, name) for name in workload.job_names()]
        await submit(api, workload.resource, namespace, bodies, concurrency=20)
        try:
            await asyncio.wait_for(progress.done.wait(), timeout=settings.timeout)
            outcome = f"{progress.failures()} failed" if progress.failures() else "ok"
        except TimeoutError:
            outcome = "timeout"
        spent = [s.sample().cpu_seconds - s0 for s, s0 in zip(samplers, start, strict=True)]
        return {"outcome": outcome, "cpu_operator": spent[0], "cpu_kueue": spent[1]}
    finally:
        for task in watches:
            task.cancel()
        await asyncio.gather(*watches, return_exceptions=True)


def _apply(plane: ControlPlane, items: list[Obj]) -> None:
    plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


def _dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def ratios(rows: list[QueuedRow]) -> Mapping[str, tuple[float, float]]:
    """For each figure, the (lowest, highest) kubetrain/kueue ratio over the runs both paths finished."""
    by_run: dict[int, dict[str, QueuedRow]] = {}
    for row in rows:
        if row.outcome == "ok":
            by_run.setdefault(row.run, {})[row.path] = row
    found: dict[str, tuple[float, float]] = {}
    for name, figure in FIGURES.items():
        values = [
            ours / theirs
            for pair in by_run.values()
            if len(pair) == 2
            and (ours := figure(pair["kubetrain"])) is not None
            and (theirs := figure(pair["kueue"]))
        ]
        if values:
            found[name] = (min(values), max(values))
    return found


def render(rows: list[QueuedRow], *, title: str) -> str:
    """The runs as a Markdown table, then the range of each kubetrain/kueue ratio."""
    head = [*COLUMNS]
    lines = [f"# {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r.path, r.run, r.jobs, r.pods, r.outcome, _f(r.t_pods), _f(r.t_done), _f(r.cpu_operator),
                 _f(r.cpu_kueue), r.requests_operator, r.requests_kueue]  # fmt: skip
        lines.append("| " + " | ".join("-" if c is None else str(c) for c in cells) + " |")
    lines += [
        "",
        "kubetrain's integration over Kueue's own, run by run (below 1.00x: kubetrain's took less):",
        "",
    ]
    for name, (low, high) in ratios(rows).items():
        lines.append(f"- {name}: {low:.2f}x to {high:.2f}x")
    return "\n".join(lines) + "\n"


COLUMNS = (
    "path", "run", "jobs", "pods", "outcome", "all pods s", "all Succeeded s", "CPU s operator",
    "CPU s Kueue", "requests operator", "requests Kueue",
)  # fmt: skip
FIGURES: dict[str, Callable[[QueuedRow], float | None]] = {
    "time to all pods": lambda r: r.t_pods,
    "time to all Succeeded": lambda r: r.t_done,
    "CPU s, operator + Kueue": lambda r: _sum(r.cpu_operator, r.cpu_kueue),
    "API requests, operator + Kueue": lambda r: _sum(r.requests_operator, r.requests_kueue),
}


def _f(value: float | None) -> str | None:
    return None if value is None else f"{value:.1f}"


def _sum(a: float | None, b: float | None) -> float | None:
    """Both summed, or None when either is unknown."""
    return None if a is None or b is None else a + b
