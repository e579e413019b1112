"""One measured run on the real node: apply the job, wait until every rank trains, SIGKILL the killed
pod's main container through containerd (as `crictl`/`ctr` would; the kubelet sees the container die on
its own), and follow every rank's `kubetrain-train` lines until each one trains again.

The logs are read through the API server from the kubelet, as `kubectl logs` reads them, once a second,
from each pod's current container, and kept per container instance (pod UID and start time), so that a
line printed by an instance replaced between two looks is still counted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import yaml

from kubetrain.testing.node_plane import NodePlane
from kubetrain.testing.volumes import claims_in, provide_volume
from recoverybench.cases import Kind, Mode, job_for, load_example
from recoverybench.signal import TrainLine, all_training, first_after, recovered_after, train_lines

Obj = dict[str, Any]
JOB_LABEL = "training.kubeflow.org/job-name"
LEDGER_ANNOTATION = "kubetrain.io/ledger"


@dataclass(frozen=True)
class Run:
    kind: str
    mode: Mode
    seconds: tuple[float | None, ...]  # per kill; None: not every rank trained again within the limit
    containers: tuple[float | None, ...]  # per kill: until the last container restarted was running again
    pods_replaced: int  # pods whose UID changed between the kill and the recovery
    pods: int
    gang_restarts: int
    replica_restarts: int | None  # the sum of status.replicaStatuses[*].restarts; None: the field is unset
    container_restarts: int  # the kubelet's restartCount, summed over the pods there at the end
    restarting: str  # the Restarting condition's message, if any
    gang_mode: str  # how the operator restarts this job's gang (the ledger's gang.mode), "" without a policy


class Logs:
    """Every `kubetrain-train` line the job's containers printed, per container instance."""

    def __init__(self, plane: NodePlane, namespace: str, job: str, container: str) -> None:
        self._plane, self._ns, self._job, self._container = plane, namespace, job, container
        self._seen: dict[tuple[str, float], list[TrainLine]] = {}

    def pods(self) -> list[Obj]:
        path = f"/api/v1/namespaces/{self._ns}/pods?labelSelector={JOB_LABEL}={self._job}"
        status, found = self._plane.rest.get(path)
        return list(found["items"]) if status == 200 else []

    def read(self, started_after: float = 0.0) -> list[TrainLine]:
        """Reads the running instances started after `started_after` (Unix seconds); every line kept."""
        for pod in self.pods():
            started = _started(pod, self._container)
            if started is None or started < int(started_after):  # startedAt has whole seconds
                continue
            name = pod["metadata"]["name"]
            status, text = self._plane.rest.get(
                f"/api/v1/namespaces/{self._ns}/pods/{name}/log?container={self._container}"
            )
            if status == 200 and isinstance(text, str):
                self._seen[(pod["metadata"]["uid"], started)] = train_lines(text)
        return [line for lines in self._seen.values() for line in lines]

    def restarted_by(self, moment: float) -> float | None:
        """Seconds from `moment` until the last pod with a container started after it had one running:
        the kubelet's part of a recovery (startedAt has whole seconds); None if none restarted."""
        first: dict[str, float] = {}
        for uid, started in self._seen:
            if started >= int(moment):
                first[uid] = min(started, first.get(uid, started))
        return max(first.values()) - moment if first else None

    def since(self, moment: float) -> list[TrainLine]:
        """The lines of instances started at or after `moment`."""
        self.read(moment)
        kept = [lines for (_, started), lines in self._seen.items() if started >= int(moment)]
        return [line for lines in kept for line in lines]


def _started(pod: Obj, container: str) -> float | None:
    for status in pod.get("status", {}).get("containerStatuses") or []:
        running = status.get("state", {}).get("running")
        if status["name"] == container and running and running.get("startedAt"):
            return datetime.fromisoformat(running["startedAt"].replace("Z", "+00:00")).timestamp()
    return None


def _until(what: str, check: Callable[[], bool], timeout: float, interval: float = 1.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval)
    print(f"    {what}: not within {timeout:.0f} s", flush=True)
    return False


def measure(plane: NodePlane, kind: Kind, mode: Mode, *, epochs: int | None, limit: float, kills: int) -> Run:
    """One run in a namespace of its own, removed afterwards: `kills` times, the same rank is killed once
    the gang trains again (two epochs on every rank since the last kill), and each recovery is timed."""
    namespace = plane.create_namespace("recovery-")
    job, others = job_for(kind, mode, epochs), load_example(kind)[1]
    volumes = _volumes(plane, namespace, others)
    try:
        plane.kubectl("apply", "-f", "-", namespace=namespace, input=yaml.safe_dump_all([*others, job]))
        logs = Logs(plane, namespace, job["metadata"]["name"], kind.container)
        seconds: list[float | None] = []
        containers: list[float | None] = []
        before: dict[str, str] = {}
        mark = 0.0
        while len(seconds) < kills and (not seconds or seconds[-1] is not None):
            if not _until("every rank training", _training(logs, kind, mark), 420):
                raise RuntimeError(f"{kind.name}: the gang does not train; pods: {_phases(logs.pods())}")
            pods = logs.pods()
            before = before or {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}
            killed = _container_id(pods, kind.killed, kind.container)
            mark = time.time()
            plane.node.ctr("tasks", "kill", "-s", "SIGKILL", killed)
            seconds.append(_recovery(logs, kind, mark, limit))
            containers.append(logs.restarted_by(mark))
        return _figures(plane, namespace, job, logs, before, (seconds, containers), kind, mode)
    finally:
        _remove(plane, namespace)
        for volume in volumes:
            plane.kubectl("delete", "persistentvolume", volume, "--wait=false", check=False)


def _training(logs: Logs, kind: Kind, since: float) -> Callable[[], bool]:
    """Every rank has trained two epochs in containers started after `since`."""
    return lambda: all_training([x for x in logs.since(since) if x.time > since], kind.ranks)


def _recovery(logs: Logs, kind: Kind, kill: float, limit: float) -> float | None:
    """Seconds from the kill until every rank trains again; None if not within `limit`."""
    found: list[float | None] = [None]

    def recovered() -> bool:
        found[0] = recovered_after(first_after(logs.since(kill), kill), kind.ranks, kill)
        return found[0] is not None

    _until(f"{kind.name}: every rank training again", recovered, limit)
    return found[0]


def _volumes(plane: NodePlane, namespace: str, objects: list[Obj]) -> list[str]:
    """A fresh hostPath volume for each claim of the example (its checkpoints): the plane has no
    provisioner. Writable by the images' non-root users."""
    made = []
    for claim in claims_in(objects):
        directory = plane.workdir / "volumes" / namespace / claim["metadata"]["name"]
        directory.mkdir(parents=True)
        directory.chmod(0o777)
        made.append(provide_volume(plane, namespace, claim, directory))
    return made


def _container_id(pods: list[Obj], pod: str, container: str) -> str:
    found = next(p for p in pods if p["metadata"]["name"] == pod)
    status = next(s for s in found["status"]["containerStatuses"] if s["name"] == container)
    return str(status["containerID"]).removeprefix("containerd://")


def _phases(pods: list[Obj]) -> dict[str, str]:
    return {p["metadata"]["name"]: p.get("status", {}).get("phase", "?") for p in pods}


def _figures(
    plane: NodePlane, namespace: str, job: Obj, logs: Logs, before: dict[str, str],
    times: tuple[list[float | None], list[float | None]], kind: Kind, mode: Mode,
) -> Run:  # fmt: skip
    plural, name = job["kind"].lower() + "s", job["metadata"]["name"]
    _, found = plane.rest.get(f"/apis/{job['apiVersion']}/namespaces/{namespace}/{plural}/{name}")
    status = found.get("status", {})
    ledger = json.loads(found["metadata"].get("annotations", {}).get(LEDGER_ANNOTATION, "{}"))
    counts = [s.get("restarts") for s in (status.get("replicaStatuses") or {}).values()]
    pods = logs.pods()
    now = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}
    restarting: Obj = next((c for c in status.get("conditions", []) if c["type"] == "Restarting"), {})
    return Run(
        kind=kind.name, mode=mode, seconds=tuple(times[0]), containers=tuple(times[1]),
        pods_replaced=sum(1 for n, uid in before.items() if now.get(n) != uid), pods=len(before),
        gang_restarts=int(ledger.get("gang", {}).get("restarts", 0)),
        replica_restarts=_total(counts),
        container_restarts=sum(
            s.get("restartCount", 0) for p in pods for s in p.get("status", {}).get("containerStatuses") or []
        ),
        restarting=str(restarting.get("message", "")),
        gang_mode=str(ledger.get("gang", {}).get("mode", "")),
    )  # fmt: skip


def _total(counts: list[int | None]) -> int | None:
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


def _remove(plane: NodePlane, namespace: str) -> None:
    """The namespace goes (the job first, so nothing recreates the pods), its pods with a 1 s grace period
    (TensorFlow ignores SIGTERM: the default 30 s would come into every run); waits until they are gone."""
    plane.delete_namespace(namespace)
    options = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 1}
    plane.rest.request("DELETE", f"/api/v1/namespaces/{namespace}/pods", options)

    def gone() -> bool:
        status, found = plane.rest.get(f"/api/v1/namespaces/{namespace}/pods")
        return status == 404 or (status == 200 and not found["items"])

    _until(f"the pods of {namespace} gone", gone, 180)
