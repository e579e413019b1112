"""Training-progress load: N running jobs, each reporting every P seconds, against the same run without
reports (issue 21's figures: the operator's CPU, status writes per job per minute, and whether the
operator's own work - pods for new jobs - is slowed).

    python bench/progress_load.py [--jobs 500] [--every 2] [--window 60] [--extra 50] [--runs 3]
                                  [--out bench/results/progress_load.md]

Each run starts a fresh control plane with kwok nodes and `kubetrain operator` with the progress endpoint
on loopback (`--progress-bind-address`, the default `--progress-interval` of 10 s), as the shipped Deployment
runs it. It submits N PyTorchJobs of one Master each, whose pods kwok keeps Running, and waits until all
run. Then, in the `reports` mode only, every job's pod reports every P seconds (first reports spread over
the first P seconds) through the pods' own helper (`kubetrain.runtimes.progress`: a `Reporter` and its
`HttpSender` per pod, each with a thread and one kept-open TLS connection verified with the CA the
operator published, honouring the endpoint's `Retry-After`), with a TokenRequest token bound to that pod
for the job's own audience (the one its projected volume names), read from a file as in a pod. Each pod
connects from a loopback address of its own (127.1.x.y: Linux routes all of 127/8 to `lo`), as each real
pod has an address of its own, so the endpoint's cap of 32 connections per address applies as in a
cluster. Each pod's first report is timed apart: all N arrive within the first P seconds, as at a start or
an operator restart, and each must be answered 200 within the pods' 5 s timeout (`TIMEOUT`). Over the next
`--window` seconds it measures the operator's CPU (its process tree's utime+stime), the status writes
(`kubetrain_progress_status_writes_total{result="written"}`), the answers and the connections the pods
opened. Then it submits E more jobs and times until all their pods are Running: the operator's own work
while reports flow. The `quiet` mode does the same with no reports; both modes run in each round, one after
the other, so each ratio compares runs of the same invocation.

Everything talks to loopback only. Figures depend on the machine's load: run it on a quiet machine, and
note what else ran.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import random
import resource
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opbench.procstat import sample_tree

from kubetrain.common.progress.inject import token_audience
from kubetrain.runtimes.progress import HttpSender, Refused, Reporter
from kubetrain.testing import ControlPlane, FakeNode
from kubetrain.testing.kwok import Outcome, outcome_annotations
from kubetrain.testing.operator_process import OperatorProcess
from kubetrain.testing.process import free_port

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "kubetrain-progress"
TIMEOUT = 5.0
"""The pods' timeout: the helper's `HttpSender` (5 s), Transformers' KubeflowCallback (`urlopen(...,
timeout=5)`) and the Kubeflow SDK's `update_trainjob_status` (`session.post(..., timeout=5)`). Theirs bound
each socket operation, the connect and each read; a report answered within 5 s in all is within them."""
NAMESPACE = "load"
JOB_LABEL = "training.kubeflow.org/job-name"
WRITES = "kubetrain_progress_status_writes_total"
REQUESTS = "kubetrain_progress_requests_total"


@dataclass(frozen=True)
class Result:
    mode: str
    cpu_percent: float
    writes_per_job_minute: float
    accepted: int
    refused: int
    failed: int
    client_cpu_percent: float
    extra_pods_seconds: float
    p50_ms: float
    p99_ms: float
    connections: int
    first_in_time: int
    """Pods whose first report was answered 200 within `TIMEOUT`."""
    first_max_ms: float


def job(name: str) -> dict[str, Any]:
    """A PyTorchJob of one Master whose pod kwok keeps Running for an hour."""
    annotations = outcome_annotations(Outcome.SUCCEEDED, run_for="1h")
    template = {
        "metadata": {"annotations": annotations},
        "spec": {"containers": [{"name": "pytorch", "image": "x"}]},
    }
    master = {"replicas": 1, "restartPolicy": "Never", "template": template}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {"Master": master}},
    }


def running_pods(plane: ControlPlane) -> dict[str, dict[str, Any]]:
    """The Running pods of the namespace, by their job's name."""
    status, found = plane.rest.get(f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector={JOB_LABEL}")
    assert status == 200, found
    return {
        p["metadata"]["labels"][JOB_LABEL]: p
        for p in found["items"]
        if (p.get("status") or {}).get("phase") == "Running"
    }


def submit(plane: ControlPlane, names: list[str]) -> None:
    for name in names:
        plane.rest.create(f"/apis/kubeflow.org/v1/namespaces/{NAMESPACE}/pytorchjobs", job(name))


def wait_running(plane: ControlPlane, names: list[str], within: float) -> float:
    """Seconds until every job of `names` has its pod Running."""
    began = time.monotonic()
    while not set(names) <= set(running_pods(plane)):
        if time.monotonic() - began > within:
            raise TimeoutError(
                f"{len(set(names) - set(running_pods(plane)))} of {len(names)} pods not Running"
            )
        time.sleep(0.25)
    return time.monotonic() - began


def token(plane: ControlPlane, pod: dict[str, Any]) -> str:
    """A TokenRequest token bound to `pod`, for its job's audience (what the kubelet projects)."""
    ref = {"kind": "Pod", "apiVersion": "v1", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
    name = pod["metadata"]["labels"][JOB_LABEL]
    audience = token_audience(
        PREFIX, api_version="kubeflow.org/v1", plural="pytorchjobs", namespace=NAMESPACE, name=name
    )
    body = {"spec": {"audiences": [audience], "expirationSeconds": 3600, "boundObjectRef": ref}}
    status, answer = plane.rest.request(
        "POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default/token", body
    )
    assert status == 201, answer
    return str(answer["status"]["token"])


def pod_address(index: int) -> str:
    """The loopback address pod `index` connects from: one of its own in 127/8 (Linux routes all of it to
    `lo`), as every real pod has, so the endpoint's per-address cap sees one connection per pod."""
    return f"127.1.{index // 250}.{index % 250 + 1}"


class PodSender(HttpSender):
    """The pods' own `HttpSender`, its connections opened from the pod's address."""

    def __init__(self, url: str, *, source: str, ca_cert: str, token_path: str) -> None:
        super().__init__(url, ca_cert=ca_cert, token_path=token_path, timeout=TIMEOUT)
        self._source = source

    def _open(self) -> http.client.HTTPConnection:
        connection = super()._open()  # not connected yet: `request` connects, from `source_address`
        connection.source_address = (self._source, 0)  # type: ignore[attr-defined]  # set by __init__, not in typeshed
        return connection


class Reporters:
    """One pod per job, reporting as a training pod does: the helper's `Reporter` and `HttpSender` (one
    kept connection, `Retry-After` honoured), given a new report every `every` seconds."""

    def __init__(self, url: str, ca_path: Path, token_paths: dict[str, Path], every: float) -> None:
        self._every = every
        self._lock = threading.Lock()
        self.answers: dict[int, int] = {}
        self.failed = 0
        self.latencies: list[float] = []
        self.first: dict[str, tuple[int, float]] = {}
        """Each pod's first report: the answer's status (0: none) and its latency."""
        self.senders = {
            name: PodSender(
                f"{url}/apis/kubeflow.org/v1/namespaces/{NAMESPACE}/pytorchjobs/{name}/status",
                source=pod_address(index),
                ca_cert=str(ca_path),
                token_path=str(path),
            )
            for index, (name, path) in enumerate(token_paths.items())
        }

    def _timed(self, name: str, sender: HttpSender) -> Callable[[bytes], float | None]:
        def send(body: bytes) -> float | None:
            sent, status = time.monotonic(), 200
            try:
                return sender(body)
            except Refused as refused:
                status = refused.status
                raise
            except Exception:
                status = 0
                raise
            finally:
                with self._lock:
                    self.first.setdefault(name, (status, time.monotonic() - sent))
                    if status:
                        self.answers[status] = self.answers.get(status, 0) + 1
                        self.latencies.append(time.monotonic() - sent)
                    else:
                        self.failed += 1

        return send

    async def run(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        pods = [Reporter(self._timed(name, sender)) for name, sender in self.senders.items()]
        await asyncio.gather(*(self._one(pod, end) for pod in pods))

    async def _one(self, pod: Reporter, end: float) -> None:
        step, due = 0, time.monotonic() + random.uniform(0, self._every)
        while due < end:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            step += 1
            pod.report(step=step % 100, total=100, loss=1.0 / step)
            due += self._every

    @property
    def connections(self) -> int:
        return sum(sender.connections for sender in self.senders.values())


def one_run(args: argparse.Namespace, *, reports: bool) -> Result:
    nodes = [FakeNode(f"load-node-{i}", pods=400) for i in range(4)]
    with ControlPlane(nodes=nodes) as plane, tempfile.TemporaryDirectory() as tmp:
        plane.kubectl("apply", "-f", str(ROOT / "manifests" / "crds"))
        plane.rest.ensure_namespace(NAMESPACE)
        port = free_port()
        flags = [f"--progress-bind-address=127.0.0.1:{port}", f"--progress-url=https://127.0.0.1:{port}"]
        with OperatorProcess(plane.kubeconfig, ["--no-leader-elect", *flags], workdir=Path(tmp)) as op:
            op.wait_ready()
            names = [f"load-{i}" for i in range(args.jobs)]
            submit(plane, names)
            print(
                f"  {args.jobs} jobs Running after {wait_running(plane, names, 600):.0f} s", file=sys.stderr
            )
            pods = running_pods(plane)
            status, ca = plane.rest.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps/kubetrain-progress-ca")
            assert status == 200, ca
            ca_path = Path(tmp) / "ca.crt"
            ca_path.write_text(ca["data"]["ca.crt"])
            tokens = {name: Path(tmp) / f"{name}.token" for name in names} if reports else {}
            for name, path in tokens.items():
                path.write_text(token(plane, pods[name]))
            reporters = Reporters(f"https://127.0.0.1:{port}", ca_path, tokens, args.every)
            return asyncio.run(_measure(args, plane, op, reporters, reports=reports))


async def _measure(
    args: argparse.Namespace, plane: ControlPlane, op: OperatorProcess, reporters: Reporters, *, reports: bool
) -> Result:
    load = asyncio.create_task(reporters.run(args.window + args.every + 120.0)) if reports else None
    await asyncio.sleep(args.every)  # every job has reported once: the steady state
    cpu0, writes0, client0 = sample_tree(op.pid).cpu_seconds, op.sample(WRITES, result="written"), _own_cpu()
    began = time.monotonic()
    await asyncio.sleep(args.window)
    elapsed = time.monotonic() - began
    cpu, writes = sample_tree(op.pid).cpu_seconds - cpu0, op.sample(WRITES, result="written") - writes0
    client = _own_cpu() - client0
    extra = [f"extra-{i}" for i in range(args.extra)]
    began_extra = time.monotonic()
    await asyncio.to_thread(submit, plane, extra)
    await asyncio.to_thread(wait_running, plane, extra, 300.0)
    extra_seconds = time.monotonic() - began_extra
    if load is not None:
        load.cancel()
    accepted = int(op.sample(REQUESTS, result="accepted") + op.sample(REQUESTS, result="early"))
    refused = sum(n for code, n in reporters.answers.items() if code != 200)
    firsts = list(reporters.first.values())
    return Result(
        mode="reports" if reports else "quiet",
        cpu_percent=100 * cpu / elapsed,
        writes_per_job_minute=writes / args.jobs / (elapsed / 60),
        accepted=accepted,
        refused=refused,
        failed=reporters.failed,
        client_cpu_percent=100 * client / elapsed,
        extra_pods_seconds=extra_seconds,
        p50_ms=_quantile(reporters.latencies, 0.5) * 1000,
        p99_ms=_quantile(reporters.latencies, 0.99) * 1000,
        connections=reporters.connections,
        first_in_time=sum(1 for status, took in firsts if status == 200 and took <= TIMEOUT),
        first_max_ms=max((took for _, took in firsts), default=0.0) * 1000,
    )


def _quantile(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))] if values else 0.0


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def table(args: argparse.Namespace, results: list[tuple[Result, Result]]) -> str:
    lines = [
        f"{args.jobs} running PyTorchJobs, reports every {args.every:g} s by each job's pod (reports) or "
        f"none (quiet); window {args.window:g} s; then {args.extra} new jobs' pods timed",
        "",
        "| round | mode | first reports answered 200 within 5 s | slowest first answer, ms "
        "| operator CPU % | status writes / job / min | answers 200 (other, failed) "
        "| answer p50 / p99 ms | connections | load generator CPU % | new jobs' pods Running, s "
        "| ratio to quiet |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, (quiet, loud) in enumerate(results, 1):
        for r in (quiet, loud):
            ratio = r.extra_pods_seconds / quiet.extra_pods_seconds
            firsts = f"{r.first_in_time} of {args.jobs if r.mode == 'reports' else 0}"
            lines.append(
                f"| {n} | {r.mode} | {firsts} | {r.first_max_ms:.0f} | "
                f"{r.cpu_percent:.1f} | {r.writes_per_job_minute:.2f} | "
                f"{r.accepted} ({r.refused}, {r.failed}) | {r.p50_ms:.0f} / {r.p99_ms:.0f} | "
                f"{r.connections} | "
                f"{r.client_cpu_percent:.1f} | "
                f"{r.extra_pods_seconds:.1f} | {ratio:.2f} |"
            )
    ratios = [loud.extra_pods_seconds / quiet.extra_pods_seconds for quiet, loud in results]
    cpus = [loud.cpu_percent for _, loud in results]
    lines += [
        "",
        f"new jobs' pods, reports / quiet: {min(ratios):.2f}-{max(ratios):.2f} over {len(results)} rounds; "
        f"operator CPU with reports {min(cpus):.0f}-{max(cpus):.0f} % "
        f"(median {statistics.median(cpus):.0f} %)",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--every", type=float, default=2.0, help="seconds between a job's reports")
    parser.add_argument("--window", type=float, default=60.0, help="seconds measured under load")
    parser.add_argument("--extra", type=int, default=50, help="jobs submitted after the window, timed")
    parser.add_argument("--runs", type=int, default=3, help="rounds, each a quiet and a reporting run")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "progress_load.md")
    args = parser.parse_args()
    results = []
    for n in range(args.runs):
        print(f"round {n + 1}: quiet", file=sys.stderr)
        quiet = one_run(args, reports=False)
        print(f"round {n + 1}: reports", file=sys.stderr)
        loud = one_run(args, reports=True)
        results.append((quiet, loud))
        print(table(args, results), file=sys.stderr)
    print(table(args, results))
    save(args.out, table(args, results))
    return 0


def save(out: Path, text: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
