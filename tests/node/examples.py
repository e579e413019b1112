"""Helpers of the node tier's example tests: apply an example as a user would, wait for its verdict, and
read each replica's `kubetrain-result` line from `kubectl logs` and from `kubetrain logs`.

The files are applied as they are: their requests fit the 2-core node (tests/unit/api/test_examples.py
sums them), and their cleanPodPolicy is theirs. A replica that cleanPodPolicy removes prints no result
line (the results come from replicas that finished), so the readers pass over pods that are gone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from kubetrain.runtimes.examples.common import RESULT_PREFIX
from kubetrain.testing.node_plane import NodePlane
from kubetrain.testing.process import wait_until
from kubetrain.testing.volumes import provide_volume

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
Obj = dict[str, Any]


def load_example(relative: str) -> tuple[Obj, list[Obj]]:
    """The job of `examples/<relative>` and the other objects the file carries."""
    docs = [d for d in yaml.safe_load_all((EXAMPLES / relative).read_text()) if d]
    jobs = [d for d in docs if d.get("apiVersion", "").startswith("kubeflow.org/")]
    assert len(jobs) == 1, relative
    return jobs[0], [d for d in docs if d is not jobs[0]]


def apply(plane: NodePlane, namespace: str, objects: list[Obj]) -> None:
    text = yaml.safe_dump_all(objects)
    plane.kubectl("apply", "-f", "-", namespace=namespace, input=text)


def job_state(plane: NodePlane, namespace: str, job: Obj) -> Obj:
    plural, name = job["kind"].lower() + "s", job["metadata"]["name"]
    status, found = plane.rest.get(f"/apis/{job['apiVersion']}/namespaces/{namespace}/{plural}/{name}")
    assert status == 200, (status, found)
    return dict(found)


def wait_finished(plane: NodePlane, namespace: str, job: Obj, timeout: float) -> str:
    """Succeeded or Failed, whichever condition comes first; the seconds it took are printed."""
    found: list[str] = []

    def finished() -> bool:
        conditions = job_state(plane, namespace, job).get("status", {}).get("conditions", [])
        found[:] = [
            c["type"] for c in conditions if c["type"] in {"Succeeded", "Failed"} and c["status"] == "True"
        ]
        return bool(found)

    began = time.monotonic()
    wait_until(f"{job['kind']} {job['metadata']['name']} finished", finished, timeout=timeout, interval=1.0)
    print(f"{job['kind']} {job['metadata']['name']}: {found[0]} after {time.monotonic() - began:.0f} s")
    return found[0]


def results(text: str) -> list[Obj]:
    """The `kubetrain-result` JSON of every line that carries one (after any `[replica] ` prefix)."""
    found = []
    for line in text.splitlines():
        _, sep, rest = line.partition(RESULT_PREFIX)
        if sep:
            found.append(dict(json.loads(rest)))
    return found


def pod_names(plane: NodePlane, namespace: str, job: Obj) -> list[str]:
    name = job["metadata"]["name"]
    out = plane.kubectl(
        "get", "pods", "-l", f"training.kubeflow.org/job-name={name}", "-o", "name", namespace=namespace
    )
    return sorted(line.removeprefix("pod/") for line in out.stdout.split())


def kubectl_results(plane: NodePlane, namespace: str, pods: list[str], container: str) -> list[Obj]:
    """The result lines in every pod's log, read with `kubectl logs` (the kubelet's log of the container):
    one per rank, except that an MPI launcher's log carries every rank's line (mpirun gathers them). Pods
    without that container are passed over (the Horovod example's workers name theirs `worker`), and so are
    pods already gone (cleanPodPolicy)."""
    found = []
    for pod in pods:
        status, spec = plane.rest.get(f"/api/v1/namespaces/{namespace}/pods/{pod}")
        if status == 200 and container in {c["name"] for c in spec["spec"]["containers"]}:
            logs = plane.kubectl("logs", pod, "-c", container, namespace=namespace, check=False)
            found += results(logs.stdout)
    return found


class InstanceLogs:
    """`with InstanceLogs(plane, namespace, job, container) as logs:` follows the log of every instance of
    `container` in the job's pods (`kubectl logs -f`, from the moment the instance runs), so that what an
    instance printed is kept after the kubelet removed it: a restart of all containers in place removes the
    old instances with their logs. Seen on the real node: a worker of a finished PyTorchJob restarted in
    place after printing its result line (restartCount 1, lastState `RestartingAllContainers`)."""

    def __init__(self, plane: NodePlane, namespace: str, job: Obj, container: str) -> None:
        self._plane, self._namespace, self._container = plane, namespace, container
        self._selector = f"training.kubeflow.org/job-name={job['metadata']['name']}"
        self._files: dict[tuple[str, str], Path] = {}
        self._followers: list[subprocess.Popen[bytes]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._dir = Path(tempfile.mkdtemp(prefix="instance-logs-"))

    def __enter__(self) -> InstanceLogs:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for follower in self._followers:
            follower.terminate()
            follower.wait(timeout=10)

    def text(self) -> str:
        """Every followed instance's log so far (whole lines), one after the other."""
        texts = (path.read_text(errors="replace") for path in list(self._files.values()))
        return "".join(text[: text.rfind("\n") + 1] for text in texts)  # a line being written waits

    def tails(self, lines: int = 12) -> str:
        """The last `lines` lines of every followed instance, each under its pod's name, in the order the
        instances started: what a rank printed before it failed, for a failure's message."""
        parts = []
        for (pod, _), path in list(self._files.items()):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            parts.append("\n".join([f"== {pod} (instance {path.stem})", *tail]))
        return "\n".join(parts)

    def _poll(self) -> None:
        path = f"/api/v1/namespaces/{self._namespace}/pods?labelSelector={self._selector}"
        while not self._stop.wait(0.3):
            status, found = self._plane.rest.get(path)
            for pod in found.get("items", []) if status == 200 else []:
                for state in pod.get("status", {}).get("containerStatuses") or []:
                    started = {"running", "terminated"} & set(state.get("state") or {})
                    instance = state.get("containerID")
                    ours = state["name"] == self._container and started
                    if ours and instance and (pod["metadata"]["name"], instance) not in self._files:
                        self._follow(pod["metadata"]["name"], instance)

    def _follow(self, pod: str, instance: str) -> None:
        path = self._dir / f"{len(self._files)}.log"
        self._files[pod, instance] = path
        argv = [str(self._plane.binaries.kubectl), f"--kubeconfig={self._plane.kubeconfig}", "logs", "-f",
                pod, "-c", self._container, "-n", self._namespace]  # fmt: skip
        with path.open("wb") as out:
            self._followers.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL))


def rank_results(
    plane: NodePlane,
    namespace: str,
    job: Obj,
    container: str,
    ranks: list[int],
    timeout: float = 120.0,
    logs: InstanceLogs | None = None,
) -> list[Obj]:
    """The result lines of the job's pods once their ranks are exactly `ranks` (a replica may print its line
    a moment after the job's verdict), from `logs` when given (every instance), else from each pod's
    current instance; on timeout, the test fails with the ranks it found."""
    found: list[Obj] = []

    def complete() -> bool:
        if logs is not None:
            found[:] = results(logs.text())
        else:
            found[:] = kubectl_results(plane, namespace, pod_names(plane, namespace, job), container)
        return Counter(r.get("rank") for r in found) == Counter(ranks)

    try:
        wait_until(f"result lines of ranks {ranks}", complete, timeout=timeout, interval=2.0)
    except TimeoutError:
        pods = restarts(plane, namespace, pod_names(plane, namespace, job), container)
        raise AssertionError(
            f"expected one result line per rank {sorted(ranks)}, found {found}; restarted containers: {pods}"
        ) from None
    return found


def restarts(plane: NodePlane, namespace: str, pods: list[str], container: str) -> dict[str, Obj]:
    """For each pod whose `container` ran more than once: its restart count, how the previous run ended
    and the end of that run's log (`kubectl logs --previous`), to tell what a missing result line became."""
    found = {}
    for pod in pods:
        status, spec = plane.rest.get(f"/api/v1/namespaces/{namespace}/pods/{pod}")
        if status != 200:
            continue
        for state in spec.get("status", {}).get("containerStatuses", []):
            if state["name"] == container and state.get("restartCount", 0) > 0:
                previous = plane.kubectl(
                    "logs", pod, "-c", container, "--previous", namespace=namespace, check=False
                )
                found[pod] = {
                    "restartCount": state["restartCount"],
                    "lastState": state.get("lastState"),
                    "previousLog": previous.stdout[-1500:],
                }
    return found


def wait_cleaned(plane: NodePlane, namespace: str, job: Obj, timeout: float = 120.0) -> None:
    """Until no pod of the job is being deleted: the pods cleanPodPolicy removes are gone, so that reading
    every pod's log (`kubetrain logs`) does not race their removal."""

    def settled() -> bool:
        name = job["metadata"]["name"]
        status, pods = plane.rest.get(
            f"/api/v1/namespaces/{namespace}/pods?labelSelector=training.kubeflow.org/job-name={name}"
        )
        return status == 200 and not any(p["metadata"].get("deletionTimestamp") for p in pods["items"])

    wait_until("the pods cleanPodPolicy removes gone", settled, timeout=timeout, interval=1.0)


def kubetrain_logs(plane: NodePlane, namespace: str, job: Obj) -> str:
    """`kubetrain logs KIND NAME`, as a user runs it."""
    argv = [sys.executable, "-m", "kubetrain.cli", "logs", job["kind"], job["metadata"]["name"]]
    argv += ["-n", namespace, "--kubeconfig", str(plane.kubeconfig)]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=120, check=False, env=dict(os.environ)
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def static_volume(plane: NodePlane, namespace: str, claim: Obj, directory: Path) -> str:
    """A hostPath PersistentVolume on `directory` (writable by the images' uid 1000), bound in advance to
    the example's claim: what a user's cluster provisions from its default StorageClass, and this plane has
    no provisioner. Cluster-scoped: delete it (returned name) after the test."""
    directory.chmod(0o777)
    return provide_volume(plane, namespace, claim, directory)


def wait_pod_finished(plane: NodePlane, namespace: str, pod: str, timeout: float) -> None:
    """Until the pod's phase is Succeeded or Failed (a replica that outlives the job's verdict, such as a
    TFJob's Evaluator after the Chief succeeded)."""

    def finished() -> bool:
        status, found = plane.rest.get(f"/api/v1/namespaces/{namespace}/pods/{pod}")
        return status == 200 and found.get("status", {}).get("phase") in {"Succeeded", "Failed"}

    wait_until(f"pod {pod} finished", finished, timeout=timeout, interval=1.0)


IMAGE = "docker.io/kubetrain/trainer-pytorch:0.1.0"
# Fails the first time, succeeds once restarted: the emptyDir outlives a container restart, not the pod.
FAIL_ONCE = "if [ -f /state/ran ]; then echo second run; exit 0; fi; touch /state/ran; exit {code}"


def shell_job(name: str, policy: str, script: str) -> dict[str, Any]:
    """A PyTorchJob of one Master running `script` with `sh` in the trainer image, an emptyDir at /state."""
    container = {
        "name": "pytorch", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", script], "volumeMounts": [{"name": "state", "mountPath": "/state"}],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
    }  # fmt: skip
    template = {"spec": {"containers": [container], "volumes": [{"name": "state", "emptyDir": {}}]}}
    master = {"replicas": 1, "restartPolicy": policy, "template": template}
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "None", "backoffLimit": 3},
            "pytorchReplicaSpecs": {"Master": master},
        },
    }  # fmt: skip
