"""`convert_mpijob_v1`: training-operator MPIJobs (kubeflow.org/v1) become valid v2beta1 MPIJobs that behave
as they did, and every field that does not map one to one is named in a note.

The inputs under mpijob_v1/ are real-world shapes of v1 MPIJobs (Horovod over mpirun, elastic horovodrun,
Intel MPI with v1's kubexec agent, `kubectl get -o yaml` output with server fields).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api import check_job, parse_job
from kubetrain.api.convert import Conversion, NoteKind, convert_mpijob_v1, is_mpijob_v1
from kubetrain.api.mpijob import MPIJob

V1_DIR = Path(__file__).parent / "mpijob_v1"


def _v1_jobs() -> dict[str, dict[str, Any]]:
    jobs: dict[str, dict[str, Any]] = {}
    for path in sorted(V1_DIR.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            items = document["items"] if document.get("kind") == "List" else [document]
            jobs.update({item["metadata"]["name"]: item for item in items})
    return jobs


V1_JOBS = _v1_jobs()


def _convert(name: str) -> Conversion:
    return convert_mpijob_v1(V1_JOBS[name])


def _notes(conversion: Conversion) -> dict[str, NoteKind]:
    return {note.path: note.kind for note in conversion.notes}


@pytest.mark.parametrize("name", sorted(V1_JOBS))
def test_every_real_world_shape_converts_to_a_valid_v2beta1_job(name: str) -> None:
    before = copy.deepcopy(V1_JOBS[name])
    conversion = _convert(name)
    job = check_job(parse_job(conversion.job))
    assert isinstance(job, MPIJob)
    assert conversion.job["apiVersion"] == "kubeflow.org/v2beta1"
    assert V1_JOBS[name] == before, "the input must not be modified"
    # The one thing no converter can check: the images must serve SSH now.
    assert any(n.kind is NoteKind.CHECK and "sshd" in n.message for n in conversion.notes)


def test_horovod_job_keeps_commands_resources_and_v1_restart_behaviour() -> None:
    conversion = _convert("horovod-mnist")
    spec = conversion.job["spec"]
    source = V1_JOBS["horovod-mnist"]["spec"]["mpiReplicaSpecs"]
    for rtype in ("Launcher", "Worker"):
        assert spec["mpiReplicaSpecs"][rtype]["template"] == source[rtype]["template"]
        assert spec["mpiReplicaSpecs"][rtype]["replicas"] == source[rtype]["replicas"]
    # v1 defaulted the launcher to Never; v2beta1 would default it to OnFailure.
    assert spec["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] == "Never"
    assert "restartPolicy" not in spec["mpiReplicaSpecs"]["Worker"]  # Never in both APIs
    assert spec["runPolicy"] == {"cleanPodPolicy": "Running"}
    assert "cleanPodPolicy" not in spec
    assert spec["slotsPerWorker"] == 1
    metadata = {"name": "horovod-mnist", "namespace": "research", "labels": {"team": "vision"}}
    assert conversion.job["metadata"] == metadata
    notes = _notes(conversion)
    assert notes["spec.cleanPodPolicy"] is NoteKind.CHANGED
    assert notes["spec.mpiReplicaSpecs.Launcher.restartPolicy"] is NoteKind.CHANGED
    assert notes["spec.mpiReplicaSpecs.Worker.template.spec.containers[0].command"] is NoteKind.CHECK


def test_elastic_job_keeps_its_run_policy_and_explicit_restart_policies() -> None:
    conversion = _convert("elastic-resnet")
    spec = conversion.job["spec"]
    assert spec["runPolicy"] == {"cleanPodPolicy": "All", "backoffLimit": 3, "ttlSecondsAfterFinished": 600}
    assert spec["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] == "OnFailure"
    assert spec["mpiReplicaSpecs"]["Worker"]["restartPolicy"] == "Never"
    assert spec["slotsPerWorker"] == 2
    # A worker that starts sshd itself needs no note about its command.
    assert not any(".command" in n.path for n in conversion.notes)


def test_intel_job_drops_the_kubexec_agent_and_names_what_does_not_map() -> None:
    conversion = _convert("impi-bench")
    spec = conversion.job["spec"]
    launcher = spec["mpiReplicaSpecs"]["Launcher"]
    assert spec["mpiImplementation"] == "Intel"
    assert launcher["template"]["spec"]["containers"][0]["env"] == [{"name": "I_MPI_DEBUG", "value": "5"}]
    assert launcher["restartPolicy"] == "OnFailure"  # ExitCode is not accepted by v2beta1
    assert spec["runPolicy"]["managedBy"] == "kubeflow.org/mpi-operator"
    assert "mainContainer" not in spec
    metadata = {"name": "impi-bench", "namespace": "hpc", "annotations": {"owner": "hpc-team"}}
    assert conversion.job["metadata"] == metadata
    assert "status" not in conversion.job
    notes = _notes(conversion)
    env = "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].env"
    for path, kind in {
        "spec.mpiImplementation": NoteKind.CHANGED,
        "spec.mainContainer": NoteKind.DROPPED,
        "spec.mpiReplicaSpecs.Launcher.restartPolicy": NoteKind.CHANGED,
        "spec.runPolicy.managedBy": NoteKind.CHANGED,
        f"{env}[I_MPI_HYDRA_BOOTSTRAP]": NoteKind.DROPPED,
        f"{env}[I_MPI_HYDRA_BOOTSTRAP_EXEC]": NoteKind.DROPPED,
        "metadata.uid": NoteKind.DROPPED,
        "metadata.resourceVersion": NoteKind.DROPPED,
        "metadata.creationTimestamp": NoteKind.DROPPED,
        "metadata.annotations[kubectl.kubernetes.io/last-applied-configuration]": NoteKind.DROPPED,
        "status": NoteKind.DROPPED,
    }.items():
        assert notes.get(path) is kind, path


def test_launcher_only_job_loses_its_empty_worker_spec_and_runpolicy_wins_a_conflict() -> None:
    conversion = _convert("single-node-smoke")
    spec = conversion.job["spec"]
    assert set(spec["mpiReplicaSpecs"]) == {"Launcher"}
    assert spec["runPolicy"]["cleanPodPolicy"] == "Running"  # as v1 decided: runPolicy's copy wins
    notes = _notes(conversion)
    assert notes["spec.mpiReplicaSpecs.Worker"] is NoteKind.DROPPED
    assert notes["spec.cleanPodPolicy"] is NoteKind.DROPPED


def test_only_v1_mpijobs_are_converted() -> None:
    v2 = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "x"}}
    tf = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "x"}}
    assert is_mpijob_v1(V1_JOBS["horovod-mnist"])
    assert not is_mpijob_v1(v2)
    assert not is_mpijob_v1(tf)
    assert not is_mpijob_v1("MPIJob")
    with pytest.raises(ValueError, match=r"not a kubeflow\.org/v1 MPIJob"):
        convert_mpijob_v1(v2)


def test_a_note_reads_as_path_kind_and_reason() -> None:
    note = next(n for n in _convert("impi-bench").notes if n.path == "spec.mainContainer")
    assert str(note) == f"spec.mainContainer: dropped: {note.message}"
    assert "sshd" in note.message and "'bench'" in note.message
