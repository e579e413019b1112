"""kubetrain's own Kueue integration against the real API server, with Kueue's v1beta2 Workload CRD from the
pinned Kueue module (tools/ecosystem/components.txt). The test plays Kueue's scheduler: it writes the
admission and the eviction into the Workload's status, so this tier shows what the operator does and what
the API server accepts from it (the Workload it makes, every status patch it sends, the admission policy),
independently of Kueue's scheduling (tests/ecosystem runs the real Kueue)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api import PYTORCHJOB
from kubetrain.common.kube import objects
from kubetrain.common.kube.resources import PODS, Obj
from kubetrain.common.kueue import WORKLOADS, KueueIntegration
from kubetrain.controllers.pytorch import PyTorchJobController
from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.ecosystem import BUILD_HINT, components
from kubetrain.testing.kwok import Outcome
from kubetrain.testing.operator import (
    InProcessOperator,
    container_spec,
    job_manifest,
    kubectl_apply,
    on_control_plane,
    replica_spec,
    wait_until,
)

pytestmark = pytest.mark.integration

POLICY = Path(__file__).resolve().parents[2] / "manifests" / "base" / "policy"
QUEUE = "team-a"


@pytest.fixture(scope="module")
def kueue_crds(control_plane: ControlPlane) -> ControlPlane:
    """Kueue's CRDs from the module tree `hack/ecosystem.sh` fetched for the pinned Kueue, server-side."""
    kueue = components()["kueue"]
    bases = kueue.source / "config" / "components" / "crd" / "bases"
    if not bases.is_dir():
        pytest.fail(
            f"Kueue {kueue.version}'s module tree is not at {kueue.source}; {BUILD_HINT}", pytrace=False
        )
    assert kueue.version == "v0.19.2", "this tier tests the Workload API of the Kueue the plane pins"
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(bases))
    for crd in sorted(bases.glob("*.yaml")):
        control_plane.wait_established(yaml.safe_load(crd.read_text())["metadata"]["name"])
    return control_plane


@pytest.fixture
def flavor(kueue_crds: ControlPlane, namespace: str) -> Iterator[str]:
    name = f"flavor-{namespace}"
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {
            "nodeLabels": {"kubernetes.io/os": "linux"},
            "tolerations": [{"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }
    kueue_crds.kubectl("apply", "-f", "-", input=json.dumps(body))
    yield name
    kueue_crds.kubectl("delete", "resourceflavor", name, "--wait=false")


@pytest.fixture
async def operator(kueue_crds: ControlPlane, namespace: str) -> AsyncIterator[InProcessOperator]:
    kueue = KueueIntegration(frozenset({"PyTorchJob"}))
    async with on_control_plane(kueue_crds, [PyTorchJobController], namespace=namespace, kueue=kueue) as op:
        yield op


def submit(plane: ControlPlane, namespace: str, *, workers: int = 1, name: str = "job") -> None:
    main = container_spec("pytorch")
    specs = {"Master": replica_spec(1, main), "Worker": replica_spec(workers, main)}
    body = job_manifest(PYTORCHJOB, specs, namespace=namespace, name=name)
    body["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": QUEUE}
    kubectl_apply(plane, body, namespace=namespace)


async def workload(op: InProcessOperator, namespace: str) -> Obj | None:
    items = (await op.api.list(WORKLOADS, namespace)).items
    assert len(items) <= 1, [objects.name(w) for w in items]
    return items[0] if items else None


def state(plane: ControlPlane, namespace: str, name: str = "job") -> str:
    listed = plane.kubectl("get", "pytorchjob", name, namespace=namespace).stdout.splitlines()
    return listed[1].split()[1]


def _cond(ctype: str, status: str, reason: str) -> Obj:
    return {"type": ctype, "status": status, "reason": reason, "message": f"{ctype} by the test",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip


def admit(plane: ControlPlane, namespace: str, wl: Obj, flavor: str) -> None:
    """What Kueue's scheduler writes on admission, written as Kueue writes it: to the status subresource."""
    assignments = [
        {"name": p["name"], "count": p["count"], "flavors": {"cpu": flavor}, "resourceUsage": {"cpu": "1"}}
        for p in wl["spec"]["podSets"]
    ]
    conditions = [c for c in (wl.get("status") or {}).get("conditions") or () if c["type"] != "Evicted"]
    conditions = [c for c in conditions if c["type"] not in ("QuotaReserved", "Admitted")]
    conditions += [_cond("QuotaReserved", "True", "QuotaReserved"), _cond("Admitted", "True", "Admitted")]
    status = {"admission": {"clusterQueue": "cq", "podSetAssignments": assignments}, "conditions": conditions}
    _patch_status(plane, namespace, wl, status)


def evict(plane: ControlPlane, namespace: str, wl: Obj, reason: str) -> None:
    conditions = [*wl["status"]["conditions"], _cond("Evicted", "True", reason)]
    _patch_status(plane, namespace, wl, {"conditions": conditions})


def _patch_status(plane: ControlPlane, namespace: str, wl: Obj, status: dict[str, Any]) -> None:
    plane.kubectl("patch", "workloads.kueue.x-k8s.io", objects.name(wl), "--subresource=status",
                  "--type=merge", "-p", json.dumps({"status": status}), namespace=namespace)  # fmt: skip


def wl_condition(wl: Obj | None, ctype: str) -> Obj | None:
    return next(
        (c for c in ((wl or {}).get("status") or {}).get("conditions") or () if c["type"] == ctype), None
    )


async def queued_then_admitted(plane: ControlPlane, ns: str, op: InProcessOperator, flavor: str) -> Obj:
    submit(plane, ns)
    wl = await wait_until(lambda: workload(op, ns), what="the job's Workload")
    assert await op.pods(ns) == {}, "no pod before admission"
    admit(plane, ns, wl, flavor)
    await wait_until(lambda: op.running(ns, "job-master-0", "job-worker-0"), what="the admitted pods")
    return wl


async def test_a_queued_job_waits_runs_on_admission_and_is_evicted_and_requeued(
    control_plane: ControlPlane, namespace: str, operator: InProcessOperator, flavor: str
) -> None:
    ns = namespace
    submit(control_plane, ns)
    wl = await wait_until(lambda: workload(operator, ns), what="the job's Workload")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("master", 1), ("worker", 1)]
    assert wl["metadata"]["ownerReferences"][0]["controller"] is True
    assert (await operator.reason(ns, "job", "Queued")) == "PyTorchJobQueued"
    assert state(control_plane, ns) == "Queued"
    assert await operator.pods(ns) == {}, "no pod before admission"
    assert "CreatedWorkload" in operator.events.reasons()

    admit(control_plane, ns, wl, flavor)
    await wait_until(lambda: operator.running(ns, "job-master-0", "job-worker-0"), what="the admitted pods")
    pod = (await operator.pods(ns))["job-worker-0"]
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert {"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["spec"][
        "tolerations"
    ]
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "worker"
    ready = await wait_until(
        lambda: _true(operator, ns, "PodsReady"), what="PodsReady on the Workload (waitForPodsReady)"
    )
    assert ready["reason"] == "Started"

    evict(control_plane, ns, await _wl(operator, ns), "Preempted")
    await wait_until(lambda: _no_pods(operator, ns), what="no pod after the eviction")
    assert await operator.reason(ns, "job", "Queued") == "PyTorchJobEvictedPreempted"
    assert state(control_plane, ns) == "Queued"
    freed = await wait_until(lambda: _freed(operator, ns), what="the quota handed back")
    assert wl_condition(freed, "Requeued")["status"] == "True"  # type: ignore[index]
    job = await operator.job(ns, "job")
    assert (job["status"]["replicaStatuses"]["Worker"].get("failed") or 0) == 0, "no restart charged"

    admit(control_plane, ns, await _wl(operator, ns), flavor)
    await wait_until(
        lambda: operator.running(ns, "job-master-0", "job-worker-0"), what="pods after readmission"
    )
    control_plane.finish_pod(ns, "job-worker-0", Outcome.SUCCEEDED)
    control_plane.finish_pod(ns, "job-master-0", Outcome.SUCCEEDED)
    assert await operator.reason(ns, "job", "Succeeded") == "PyTorchJobSucceeded"
    done = await wait_until(lambda: _true(operator, ns, "Finished"), what="Finished on the Workload")
    assert done["reason"] == "Succeeded"


async def _wl(op: InProcessOperator, ns: str) -> Obj:
    found = await workload(op, ns)
    assert found is not None
    return found


async def _true(op: InProcessOperator, ns: str, ctype: str) -> Obj | None:
    cond = wl_condition(await workload(op, ns), ctype)
    return cond if cond is not None and cond["status"] == "True" else None


async def _no_pods(op: InProcessOperator, ns: str) -> bool:
    return not (await op.api.list(PODS, ns)).items


async def _freed(op: InProcessOperator, ns: str) -> Obj | None:
    wl = await workload(op, ns)
    held = wl_condition(wl, "QuotaReserved")
    return (
        wl
        if wl is not None and "admission" not in wl["status"] and held and held["status"] == "False"
        else None
    )


@pytest.fixture
def policy(control_plane: ControlPlane) -> Iterator[None]:
    """The shipped admission policy (manifests/base/policy), applied as `kubectl apply -k` applies it."""
    control_plane.kubectl("apply", "-k", str(POLICY))
    yield
    control_plane.kubectl("delete", "-k", str(POLICY), "--wait=false")


def refused(plane: ControlPlane, namespace: str, *args: str) -> str:
    """The API server's refusal of `kubectl args`. It enforces a policy a moment after the policy is created
    (its admission plugin loads policies from an informer): the request is tried with `--dry-run=server`
    until refused, for 30 s at most, then for real."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if plane.kubectl(*args, "--dry-run=server", namespace=namespace, check=False).returncode != 0:
            break
        time.sleep(0.5)
    with pytest.raises(subprocess.CalledProcessError) as failed:
        plane.kubectl(*args, namespace=namespace)
    return str(failed.value.stderr)


async def test_the_policy_keeps_an_admitted_jobs_queue_and_counts(
    control_plane: ControlPlane, namespace: str, operator: InProcessOperator, flavor: str, policy: None
) -> None:
    ns = namespace
    await queued_then_admitted(control_plane, ns, operator, flavor)
    await wait_until(lambda: _started(operator, ns), what="the admitted job's startTime")
    relabel = ("label", "pytorchjob", "job", "kueue.x-k8s.io/queue-name=team-b", "--overwrite")
    message = refused(control_plane, ns, *relabel)
    assert "metadata.labels[kueue.x-k8s.io/queue-name] cannot change from 'team-a' to 'team-b'" in message
    scale = json.dumps({"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 3}}}})
    message = refused(control_plane, ns, "patch", "pytorchjob", "job", "--type=merge", "-p", scale)
    assert "spec.pytorchReplicaSpecs: the replica types and counts" in message
    # while queued (evicted), both may change
    evict(control_plane, ns, await _wl(operator, ns), "Preempted")
    await operator.wait_for_condition(ns, "job", "Queued")
    control_plane.kubectl(*relabel, namespace=ns)
    control_plane.kubectl("patch", "pytorchjob", "job", "--type=merge", "-p", scale, namespace=ns)


async def _started(op: InProcessOperator, ns: str) -> bool:
    return bool(((await op.job(ns, "job")).get("status") or {}).get("startTime"))
