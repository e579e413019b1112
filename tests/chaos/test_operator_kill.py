"""The operator process SIGKILLed at random (seeded) moments while a dozen jobs run, restarted each time.

Whatever a kill interrupts (a create batch, a ledger write, a delete, a status patch), the restarted
operator must carry on from what the cluster shows: no pod created twice for the same replica, no job lost
or stuck, every backoffLimit honoured exactly. A watch of the namespace's pods, from before the first job
to after the last finished, records every pod ever created, so every UID a pod name had is known.
"""

from __future__ import annotations

import json
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import PYTORCHJOB
from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.kwok import Outcome, outcome_annotations
from kubetrain.testing.operator import container_spec, install_crds, job_manifest, kubectl_apply, replica_spec
from kubetrain.testing.operator_process import OperatorProcess
from kubetrain.testing.watch import WatchLog

pytestmark = pytest.mark.chaos

SEED = 20261124
KILLS = 6
BACKOFF_LIMIT = 2
FINISH_WITHIN = 180.0


def jobs(rng: random.Random, namespace: str) -> dict[str, dict[str, Any]]:
    """8 jobs that succeed (Never and OnFailure), 4 whose Master always fails with a retryable code."""
    made = {}
    for i in range(8):
        annotations = outcome_annotations(Outcome.SUCCEEDED, run_for=f"{rng.randint(2, 8)}s")
        policy = "Never" if i % 2 else "OnFailure"
        specs = {
            "Master": replica_spec(
                1, container_spec("pytorch"), restartPolicy=policy, annotations=annotations
            ),
            "Worker": replica_spec(
                rng.randint(1, 2), container_spec("pytorch"), restartPolicy=policy, annotations=annotations
            ),
        }
        made[f"ok-{i}"] = job_manifest(PYTORCHJOB, specs, name=f"ok-{i}", namespace=namespace)
    for i in range(4):
        annotations = outcome_annotations(Outcome.FAILED, exit_code=137, run_for=f"{rng.randint(1, 2)}s")
        specs = {
            "Master": replica_spec(
                1, container_spec("pytorch"), restartPolicy="ExitCode", annotations=annotations
            )
        }
        limit = {"backoffLimit": BACKOFF_LIMIT}
        made[f"doomed-{i}"] = job_manifest(
            PYTORCHJOB, specs, name=f"doomed-{i}", namespace=namespace, runPolicy=limit
        )
    return made


def pod_names(submitted: dict[str, dict[str, Any]], prefix: str) -> list[str]:
    """The pod of every replica of the jobs whose names start with `prefix`."""
    return [
        f"{name}-{rtype.lower()}-{index}"
        for name, body in submitted.items()
        if name.startswith(prefix)
        for rtype, spec in body["spec"]["pytorchReplicaSpecs"].items()
        for index in range(spec["replicas"])
    ]


def finished(plane: ControlPlane, namespace: str) -> dict[str, str]:
    """{job: Succeeded|Failed} of the jobs that have finished, with the Failed message's gist."""
    out = plane.kubectl("get", "pytorchjobs", "-o", "json", namespace=namespace).stdout
    done = {}
    for job in json.loads(out)["items"]:
        for cond in (job.get("status") or {}).get("conditions") or ():
            if cond["type"] in ("Succeeded", "Failed") and cond["status"] == "True":
                done[job["metadata"]["name"]] = f"{cond['type']}: {cond['message']}"
    return done


def test_sigkilled_operator_creates_no_duplicate_and_loses_no_job(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    install_crds(control_plane)
    rng = random.Random(SEED)
    submitted = jobs(rng, namespace)
    args = [f"--namespace={namespace}", "--no-leader-elect"]
    seen = WatchLog(control_plane.rest, f"/api/v1/namespaces/{namespace}/pods").start()
    started: list[OperatorProcess] = []

    def start() -> OperatorProcess:
        op = OperatorProcess(control_plane.kubeconfig, args, workdir=tmp_path, name=f"op-{len(started)}")
        started.append(op.start())
        return op

    try:
        op = start()
        for body in submitted.values():
            kubectl_apply(control_plane, body, namespace=namespace)
        for _ in range(KILLS):
            time.sleep(rng.uniform(1.0, 5.0))  # a random moment: starting up, creating, deleting, ...
            op.process.signal(signal.SIGKILL)
            assert op.process.wait(10), "SIGKILL ends the process"
            op = start()
        deadline = time.monotonic() + FINISH_WITHIN
        while len(finished(control_plane, namespace)) < len(submitted) and time.monotonic() < deadline:
            time.sleep(1.0)
        seen.caught_up()
        outcome = finished(control_plane, namespace)
        assert op.exit_code is None, op.process.log_tail()
    finally:
        seen.stop()
        for process in started:
            process.stop()
    assert sorted(outcome) == sorted(submitted), f"lost or stuck jobs: {set(submitted) - set(outcome)}"
    for name in submitted:
        if name.startswith("ok-"):
            assert outcome[name].startswith("Succeeded"), outcome[name]
        else:
            assert outcome[name] == (
                f"Failed: Job {name} has failed because it has reached the specified backoff limit"
            )
    runs = {pod: len(uids) for pod, uids in seen.uids().items()}
    ok = {pod: n for pod, n in runs.items() if pod.startswith("ok-")}
    assert ok == dict.fromkeys(pod_names(submitted, "ok-"), 1), "each replica of a successful job ran once"
    attempts = {pod: n for pod, n in runs.items() if pod.startswith("doomed-")}
    assert attempts == dict.fromkeys(pod_names(submitted, "doomed-"), BACKOFF_LIMIT + 1), (
        "backoffLimit 2: the first run and exactly two restarts"
    )
