"""The API server restarted under a running operator, with etcd compacted while it was down.

Every watch of the operator breaks; the resourceVersions it would resume from are compacted away, so
each informer must list again (410 Gone) and diff: its log says so for pods, Services and the jobs. The same
operator process must then see everything that happens next (pods finishing, a pod failing, a new job) and
act on it: nothing missed, nothing doubled. The API server's audit log, which the restarted server appends
to, tells how many times each pod was created.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import PYTORCHJOB
from kubetrain.common.job import LEDGER_ANNOTATION
from kubetrain.testing.audit import CREATES, created
from kubetrain.testing.binaries import find_binaries
from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.kwok import DEFAULT_NODES, Outcome
from kubetrain.testing.operator import container_spec, install_crds, job_manifest, kubectl_apply, replica_spec
from kubetrain.testing.operator_process import OperatorProcess

pytestmark = pytest.mark.chaos


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    """A plane of its own: restarting the API server under the session's plane would disturb the other
    tests' components (kube-scheduler, for one, exits when its cache sees a pod move after a relist)."""
    with ControlPlane(binaries=find_binaries(), audit_policy=CREATES) as own:
        yield own


def job(name: str, namespace: str) -> dict[str, Any]:
    specs = {
        "Master": replica_spec(1, container_spec("pytorch"), restartPolicy="ExitCode"),
        "Worker": replica_spec(1, container_spec("pytorch"), restartPolicy="ExitCode"),
    }
    for spec in specs.values():  # bound by the operator's template, not by kube-scheduler
        spec["template"]["spec"]["nodeName"] = DEFAULT_NODES[0].name
    return job_manifest(PYTORCHJOB, specs, name=name, namespace=namespace)


def get(plane: ControlPlane, namespace: str, what: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(plane.kubectl("get", what, "-o", "json", namespace=namespace).stdout)
    return loaded


def until(check: Any, what: str, within: float = 90.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"{what}: not reached within {within:g} s"
        time.sleep(0.5)


def pods(plane: ControlPlane, namespace: str) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in get(plane, namespace, "pods")["items"]}


def running(plane: ControlPlane, namespace: str, *names: str) -> bool:
    found = pods(plane, namespace)
    return all(found.get(n, {}).get("status", {}).get("phase") == "Running" for n in names)


def relisted(op: OperatorProcess, since: int) -> dict[str, set[str]]:
    """The resources whose informer listed again, from the operator's log records after the first `since`,
    with why: `410` (its watch expired), or the HTTP code of an answer that made it drop its
    resourceVersion (a 503 while a restarted server installs the CRDs' paths). Both lead to a fresh list; a
    refused connection or a 429 does not."""
    found: dict[str, set[str]] = {}
    for record in op.log_records()[since:]:
        match = _EXPIRED.match(record["msg"]) or _REFUSED.match(record["msg"])
        why = match and (match.groupdict().get("code") or "410")
        if match and why != "429":
            found.setdefault(match["resource"], set()).add(str(why))
    return found


_EXPIRED = re.compile(r"^watch of (?P<resource>\S+) expired; listing again$")
_REFUSED = re.compile(r"^list/watch of (?P<resource>\S+) failed \((?P<code>[1-9][0-9][0-9]) ")


def condition(plane: ControlPlane, namespace: str, name: str, ctype: str) -> bool:
    conditions = (get(plane, namespace, f"pytorchjob/{name}").get("status") or {}).get("conditions") or []
    return any(c["type"] == ctype and c["status"] == "True" for c in conditions)


def test_watches_recover_after_an_apiserver_restart_and_a_compaction(
    plane: ControlPlane, tmp_path: Path
) -> None:
    control_plane, namespace = plane, plane.create_namespace()
    install_crds(control_plane)
    args = [f"--namespace={namespace}", "--no-leader-elect"]
    with OperatorProcess(control_plane.kubeconfig, args, workdir=tmp_path) as op:
        op.wait_ready()
        for name in ("a", "b", "c"):
            kubectl_apply(control_plane, job(name, namespace), namespace=namespace)
        everyone = [f"{j}-{r}-0" for j in ("a", "b", "c") for r in ("master", "worker")]
        until(lambda: running(control_plane, namespace, *everyone), "every pod Running")
        before = {n: p["metadata"]["uid"] for n, p in pods(control_plane, namespace).items()}

        logged = len(op.log_records())
        assert control_plane.restart_apiserver(compact=True) is not None

        control_plane.finish_pod(namespace, "a-master-0", Outcome.SUCCEEDED)
        control_plane.finish_pod(namespace, "b-worker-0", Outcome.FAILED, exit_code=137)
        kubectl_apply(control_plane, job("d", namespace), namespace=namespace)
        until(lambda: condition(control_plane, namespace, "a", "Succeeded"), "a Succeeded")

        def replaced() -> bool:
            pod = pods(control_plane, namespace).get("b-worker-0")
            return pod is not None and pod["metadata"]["uid"] != before["b-worker-0"]

        until(replaced, "b's failed Worker replaced")
        until(lambda: running(control_plane, namespace, "d-master-0", "d-worker-0"), "the new job's pods")
        ledger = get(control_plane, namespace, "pytorchjob/b")["metadata"]["annotations"][LEDGER_ANNOTATION]
        assert json.loads(ledger)["restarts"] == 1
        now = pods(control_plane, namespace)
        kept = {n: now[n]["metadata"]["uid"] for n in ("c-master-0", "c-worker-0", "b-master-0")}
        assert kept == {n: before[n] for n in kept}, "untouched pods kept"
        again = relisted(op, since=logged)
        assert "410" in again.get("pods", ()) and "410" in again.get("services", ()), f"410 Gone: {again}"
        assert "pytorchjobs.kubeflow.org" in again, f"the jobs' informer listed again: {again}"
        assert op.exit_code is None and op.get("/healthz")[0] == 200, "the same process recovered"
        assert op.terminate() == 0
    once = {f"{j}-{r}-0": 1 for j in "abcd" for r in ("master", "worker")}
    assert created(control_plane.audit_log, "pods", namespace) == {**once, "b-worker-0": 2}, (
        "each pod created once, and b's failed Worker once more"
    )
