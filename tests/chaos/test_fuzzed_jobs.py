"""Fuzzed jobs that the API server accepts never crash the operator; one it cannot run says why.

Valid jobs of every kind are mutated at random (seeded) within what the CRD schema lets through: replica
counts, restart policies, every runPolicy field, user-set env the operator owns, renamed containers, odd
ports, elastic bounds, MPI and TF options, and kwok outcomes for their pods. Each is submitted with
`kubectl create` (strict field validation); the ones the API server rejects are not this test's concern.
The operator process must stay up and healthy, every accepted job must get a condition, and every job it
fails as invalid must carry an Event with the same reason. A watch of each kind records every version of
every job, so a job the operator never wrote cannot hide behind one its TTL deleted early; and the seed's
jobs include some that the operator fails as invalid (the service-mode annotation, which no schema checks).
"""

from __future__ import annotations

import contextlib
import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import MPIJOB, PYTORCHJOB, TFJOB, KindInfo
from kubetrain.common.job.services import SERVICE_MODE_ANNOTATION
from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.kwok import Outcome, outcome_annotations
from kubetrain.testing.operator import container_spec, install_crds, job_manifest, replica_spec
from kubetrain.testing.operator_process import OperatorProcess
from kubetrain.testing.watch import WatchLog

pytestmark = pytest.mark.chaos

SEED = 1212
JOBS = 30
POLICIES = ("Never", "OnFailure", "Always", "ExitCode")
TYPES = {
    TFJOB.kind: ("Chief", "PS", "Worker"),
    PYTORCHJOB.kind: ("Master", "Worker"),
    MPIJOB.kind: ("Launcher", "Worker"),
}


def base(kind: KindInfo, name: str, namespace: str) -> dict[str, Any]:
    container = container_spec(kind.default_container_name or "mpi")
    specs = {t: replica_spec(1, container) for t in TYPES[kind.kind]}
    return job_manifest(kind, specs, name=name, namespace=namespace)


def mutate(rng: random.Random, kind: KindInfo, job: dict[str, Any]) -> None:
    spec = job["spec"]
    specs = spec[kind.replica_specs_field]
    rtype = rng.choice(sorted(specs))
    replica = specs[rtype]
    pod = replica["template"]
    container = pod["spec"]["containers"][0]
    run_policy = spec.setdefault("runPolicy", {})
    choices = [
        lambda: replica.update(replicas=rng.choice([0, 1, 2, 3])),
        lambda: replica.update(restartPolicy=rng.choice(POLICIES)),
        lambda: run_policy.update(backoffLimit=rng.randint(0, 3)),
        lambda: run_policy.update(activeDeadlineSeconds=rng.randint(1, 20)),
        lambda: run_policy.update(ttlSecondsAfterFinished=rng.randint(0, 5)),
        lambda: run_policy.update(cleanPodPolicy=rng.choice(["All", "Running", "None"])),
        lambda: run_policy.update(suspend=rng.random() < 0.5),
        lambda: run_policy.update(schedulingPolicy={"minAvailable": rng.randint(0, 5)}),
        lambda: container.setdefault("env", []).append({"name": rng.choice(_OWNED_ENV), "value": "x"}),
        lambda: container.update(name=rng.choice(["other", kind.default_container_name or "mpi"])),
        lambda: container.update(
            ports=[{"name": kind.default_port_name, "containerPort": rng.randint(1, 65535)}]
        ),
        lambda: pod.setdefault("metadata", {}).update(annotations=_outcome(rng)),
        lambda: job["metadata"].update(annotations={SERVICE_MODE_ANNOTATION: rng.choice(_MODES)}),
        *_kind_mutations(rng, kind, spec),
    ]
    for change in rng.sample(choices, rng.randint(1, 4)):
        change()


_MODES = ["replica", "job", "pod"]
_OWNED_ENV = ["MASTER_ADDR", "WORLD_SIZE", "TF_CONFIG", "RANK", "OMPI_MCA_orte_default_hostfile", "HOME"]


def _outcome(rng: random.Random) -> dict[str, str]:
    if rng.random() < 0.5:
        return outcome_annotations(Outcome.SUCCEEDED, run_for=f"{rng.randint(1, 4)}s")
    code = rng.choice([1, 2, 127, 128, 137, 143])
    return outcome_annotations(Outcome.FAILED, exit_code=code, run_for=f"{rng.randint(1, 4)}s")


def _kind_mutations(rng: random.Random, kind: KindInfo, spec: dict[str, Any]) -> list[Any]:
    if kind is MPIJOB:
        return [
            lambda: spec.update(slotsPerWorker=rng.randint(0, 4)),
            lambda: spec.update(runLauncherAsWorker=rng.random() < 0.5),
            lambda: spec.update(launcherCreationPolicy=rng.choice(["AtStartup", "WaitForWorkersReady"])),
            lambda: spec.update(mpiImplementation=rng.choice(["OpenMPI", "Intel", "MPICH"])),
        ]
    if kind is TFJOB:
        return [
            lambda: spec.update(successPolicy=rng.choice(["", "AllWorkers"])),
            lambda: spec.update(enableDynamicWorker=rng.random() < 0.5),
        ]
    bounds = {"minReplicas": rng.randint(0, 3), "maxReplicas": rng.randint(0, 3), "rdzvBackend": "c10d"}
    return [lambda: spec.update(elasticPolicy=bounds)]


def kubectl_json(plane: ControlPlane, namespace: str, *args: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(plane.kubectl(*args, "-o", "json", namespace=namespace).stdout)
    return loaded


def watch_jobs(plane: ControlPlane, namespace: str) -> dict[str, WatchLog]:
    """A watch of each kind's jobs in `namespace`, by kind."""
    return {
        k.kind: WatchLog(plane.rest, f"/apis/{k.group}/{k.version}/namespaces/{namespace}/{k.plural}")
        for k in (TFJOB, PYTORCHJOB, MPIJOB)
    }


def conditions_seen(log: WatchLog, name: str) -> list[dict[str, Any]]:
    """Every condition any version of job `name` had, deleted or not."""
    return [c for v in log.versions(name) for c in (v.get("status") or {}).get("conditions") or ()]


def submit(plane: ControlPlane, namespace: str, rng: random.Random) -> dict[str, KindInfo]:
    """Create JOBS fuzzed jobs; those the API server accepted, by name."""
    accepted: dict[str, KindInfo] = {}
    for i in range(JOBS):
        kind = rng.choice([TFJOB, PYTORCHJOB, MPIJOB])
        job = base(kind, f"fuzz-{i}", namespace)
        mutate(rng, kind, job)
        answer = plane.kubectl("create", "-f", "-", namespace=namespace, input=json.dumps(job), check=False)
        if answer.returncode == 0:
            accepted[f"fuzz-{i}"] = kind
    return accepted


def invalid_conditions(
    logs: dict[str, WatchLog], accepted: dict[str, KindInfo]
) -> dict[tuple[str, str], Any]:
    """{(job, reason): condition} of every `Failed/<Kind>FailedValidation` condition any job ever had."""
    return {
        (name, cond["reason"]): cond
        for name, kind in accepted.items()
        for cond in conditions_seen(logs[kind.kind], name)
        if cond["type"] == "Failed" and cond["reason"].endswith("FailedValidation")
    }


def unsaid(plane: ControlPlane, namespace: str, wanted: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The (job, reason) pairs of `wanted` that no Event says, after waiting up to 30 s for them: Events
    are written after the status, by the recorder's own task."""
    deadline = time.monotonic() + 30
    while True:
        events = kubectl_json(plane, namespace, "get", "events")["items"]
        missing = wanted - {(e["involvedObject"]["name"], e["reason"]) for e in events}
        if not missing or time.monotonic() > deadline:
            return missing
        time.sleep(1)


def test_fuzzed_jobs_never_crash_the_operator(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    install_crds(control_plane)
    args = [f"--namespace={namespace}", "--no-leader-elect"]
    logs = watch_jobs(control_plane, namespace)
    with (
        contextlib.ExitStack() as stack,
        OperatorProcess(control_plane.kubeconfig, args, workdir=tmp_path) as op,
    ):
        for log in logs.values():
            stack.enter_context(log)
        op.wait_ready()
        accepted = submit(control_plane, namespace, random.Random(SEED))
        assert len(accepted) >= JOBS // 2, "most mutations stay within the schema"
        assert {k.kind for k in accepted.values()} == {TFJOB.kind, PYTORCHJOB.kind, MPIJOB.kind}

        def unwritten() -> list[str]:
            for log in logs.values():
                log.check()
            return [n for n, kind in accepted.items() if not conditions_seen(logs[kind.kind], n)]

        deadline = time.monotonic() + 120
        while unwritten():
            assert time.monotonic() < deadline, f"accepted, yet never a condition: {unwritten()}"
            time.sleep(1)
        assert op.exit_code is None and op.get("/healthz")[0] == 200, op.process.log_tail()
        invalid = invalid_conditions(logs, accepted)
        assert invalid, "the seed makes jobs the operator fails as invalid, or the checks below check nothing"
        for cond in invalid.values():
            assert cond["message"].startswith(("spec.", "metadata.")), cond
        missing = unsaid(control_plane, namespace, set(invalid))
        assert not missing, f"no Event says why these jobs failed: {sorted(missing)}"
        assert op.terminate() == 0
