"""Fuzzed jobs that the API server accepts never crash the operator; one it cannot run says why.

Valid jobs of every kind are mutated at random (seeded) within what the CRD schema lets through: replica
counts, restart policies, every runPolicy field, user-set env the operator owns, renamed containers, odd
ports, elastic bounds, MPI and TF options, and kwok outcomes for their pods. Each is submitted with
`kubectl create` (strict field validation); the ones the API server rejects are not this test's concern.
The operator process must stay up and healthy, every accepted job must get a condition, and every job it
fails as invalid must carry an Event with the same reason.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import MPIJOB, PYTORCHJOB, TFJOB, KindInfo
from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.kwok import Outcome, outcome_annotations
from kubetrain.testing.operator import container_spec, install_crds, job_manifest, replica_spec
from kubetrain.testing.operator_process import OperatorProcess

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
        *_kind_mutations(rng, kind, spec),
    ]
    for change in rng.sample(choices, rng.randint(1, 4)):
        change()


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


def test_fuzzed_jobs_never_crash_the_operator(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    install_crds(control_plane)
    rng = random.Random(SEED)
    accepted: dict[str, KindInfo] = {}
    args = [f"--namespace={namespace}", "--no-leader-elect"]
    with OperatorProcess(control_plane.kubeconfig, args, workdir=tmp_path) as op:
        op.wait_ready()
        for i in range(JOBS):
            kind = rng.choice([TFJOB, PYTORCHJOB, MPIJOB])
            job = base(kind, f"fuzz-{i}", namespace)
            mutate(rng, kind, job)
            answer = control_plane.kubectl(
                "create", "-f", "-", namespace=namespace, input=json.dumps(job), check=False
            )
            if answer.returncode == 0:
                accepted[f"fuzz-{i}"] = kind
        assert len(accepted) >= JOBS // 2, "most mutations stay within the schema"
        assert {k.kind for k in accepted.values()} == {TFJOB.kind, PYTORCHJOB.kind, MPIJOB.kind}

        def conditions() -> dict[str, list[dict[str, Any]]]:
            found = {}
            for kind in {TFJOB, PYTORCHJOB, MPIJOB}:
                for item in kubectl_json(control_plane, namespace, "get", kind.plural)["items"]:
                    found[item["metadata"]["name"]] = (item.get("status") or {}).get("conditions") or []
            return found

        deadline = time.monotonic() + 120
        while any(not c for n, c in conditions().items() if n in accepted):
            assert time.monotonic() < deadline, "a job accepted by the API server never got a condition"
            time.sleep(1)
        assert op.exit_code is None and op.get("/healthz")[0] == 200, op.process.log_tail()
        invalid = {
            (name, cond["reason"]): cond
            for name, found in conditions().items()
            for cond in found
            if cond["type"] == "Failed" and cond["reason"].endswith("FailedValidation")
        }
        for cond in invalid.values():
            assert cond["message"].startswith("spec."), cond
        # Events are written after the status, by the recorder's own task: give them a moment to land.
        deadline = time.monotonic() + 30
        while True:
            events = kubectl_json(control_plane, namespace, "get", "events")["items"]
            unsaid = set(invalid) - {(e["involvedObject"]["name"], e["reason"]) for e in events}
            if not unsaid or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert not unsaid, f"no Event says why these jobs failed: {sorted(unsaid)}"
        assert op.terminate() == 0
