"""MPIJob `kubeflow.org/v1` (the training-operator's) to `kubeflow.org/v2beta1` (the mpi-operator's, ours).

Why: teams leaving the unmaintained training-operator v1 carry MPIJob files of the v1 API, whose launcher
reached the workers with `kubectl exec` (a `kubexec.sh` agent and a `kubectl-delivery` init container).
kubetrain serves v2beta1, whose launcher runs mpirun over SSH. Most fields map one to one; a few have
defaults that differ or no counterpart at all. `convert_mpijob_v1` maps what maps, keeps v1's behaviour
where the defaults differ (by writing the v1 value explicitly), and returns a note for everything it
changed, dropped, or cannot decide for the user (the images must run sshd). Nothing is dropped silently.

Pure: a decoded object in, a new object and its notes out. The caller validates the result (it is a
v2beta1 MPIJob that `kubetrain.api.parse_job` and `check_job` judge like any other).

The facts behind each rule (training-operator v1.9 `mpi_types.go`, `mpi_defaults.go` and its MPI
controller; mpi-operator v0.8 `v2beta1`): v1 defaults both replica types to `restartPolicy: Never`,
Launcher replicas 1, Worker replicas 0, cleanPodPolicy None; v1's top-level `spec.cleanPodPolicy` is a
deprecated copy of `runPolicy.cleanPodPolicy`, and the runPolicy one wins when both are set; `mainContainer`
names the container `kubectl exec` entered; a worker without a command ran `sleep 365d`. v2beta1 defaults
the Launcher to `OnFailure`, accepts only `Never` and `OnFailure`, requires at least one replica in a
Worker spec, and names itself `kubeflow.org/mpi-operator` in `runPolicy.managedBy`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["Conversion", "ConversionNote", "NoteKind", "convert_mpijob_v1", "is_mpijob_v1"]

V1 = "kubeflow.org/v1"
V2BETA1 = "kubeflow.org/v2beta1"

_SERVER_FIELDS = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
)
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_V1_CONTROLLER = "kubeflow.org/training-operator"
_V2_CONTROLLER = "kubeflow.org/mpi-operator"
_V2_RESTART_POLICIES = ("Never", "OnFailure")
# What v1's kubectl-exec launcher needed and v2beta1's SSH launcher sets by itself.
_V1_AGENT_HINTS = ("kubexec.sh", "/opt/kube/", "/etc/mpi/kubexec")


class NoteKind(StrEnum):
    """What the conversion did with a field."""

    CHANGED = "changed"
    """Rewritten to keep the v1 behaviour under v2beta1."""
    DROPPED = "dropped"
    """Has no v2beta1 counterpart (or was server state); removed."""
    CHECK = "check"
    """Converted as written, but something only the user can confirm (usually the image)."""


@dataclass(frozen=True)
class ConversionNote:
    """One thing a user should know about a converted job: the v1 field path, what happened and why."""

    path: str
    kind: NoteKind
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.kind.value}: {self.message}"


@dataclass(frozen=True)
class Conversion:
    """A converted job (a fresh dict) and the notes, in the order of the v1 fields."""

    job: dict[str, Any]
    notes: tuple[ConversionNote, ...]


def is_mpijob_v1(obj: object) -> bool:
    """True for a decoded `kubeflow.org/v1` MPIJob (the training-operator's)."""
    return isinstance(obj, Mapping) and obj.get("kind") == "MPIJob" and obj.get("apiVersion") == V1


def convert_mpijob_v1(obj: Mapping[str, Any]) -> Conversion:
    """The v2beta1 MPIJob for a v1 one (see the module docstring). `obj` is not modified.

    Raises ValueError when `obj` is not a v1 MPIJob (check with `is_mpijob_v1` first).
    """
    if not is_mpijob_v1(obj):
        raise ValueError(f"not a {V1} MPIJob: apiVersion {obj.get('apiVersion')!r}, kind {obj.get('kind')!r}")
    source = copy.deepcopy(dict(obj))
    notes: list[ConversionNote] = []
    job: dict[str, Any] = {"apiVersion": V2BETA1, "kind": "MPIJob"}
    job["metadata"] = _metadata(source.get("metadata"), notes)
    spec = source.get("spec")
    job["spec"] = _spec(spec if isinstance(spec, Mapping) else {}, notes)
    if source.get("status"):
        notes.append(ConversionNote("status", NoteKind.DROPPED, "server state; a new object starts without"))
    return Conversion(job, tuple(notes))


def _metadata(raw: object, notes: list[ConversionNote]) -> dict[str, Any]:
    metadata = dict(raw) if isinstance(raw, Mapping) else {}
    for field in _SERVER_FIELDS:
        if metadata.pop(field, None) is not None:
            notes.append(ConversionNote(f"metadata.{field}", NoteKind.DROPPED, "set by the API server"))
    annotations = metadata.get("annotations")
    if isinstance(annotations, dict) and annotations.pop(_LAST_APPLIED, None) is not None:
        notes.append(
            ConversionNote(
                f"metadata.annotations[{_LAST_APPLIED}]", NoteKind.DROPPED, "it describes the v1 object"
            )
        )
        if not annotations:
            del metadata["annotations"]
    return metadata


def _spec(v1: Mapping[str, Any], notes: list[ConversionNote]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if "slotsPerWorker" in v1:
        spec["slotsPerWorker"] = v1["slotsPerWorker"]
    run_policy = _run_policy(v1, notes)
    if run_policy:
        spec["runPolicy"] = run_policy
    specs = v1.get("mpiReplicaSpecs")
    spec["mpiReplicaSpecs"] = _replica_specs(specs if isinstance(specs, Mapping) else {}, notes)
    if _uses_intel_mpi(spec["mpiReplicaSpecs"]):
        spec["mpiImplementation"] = "Intel"
        notes.append(
            ConversionNote(
                "spec.mpiImplementation",
                NoteKind.CHANGED,
                "set to Intel because the launcher sets I_MPI_* variables (v2beta1 defaults to OpenMPI)",
            )
        )
    main = v1.get("mainContainer")
    if main:
        notes.append(
            ConversionNote(
                "spec.mainContainer",
                NoteKind.DROPPED,
                f"v2beta1 reaches workers over SSH, not `kubectl exec`: container {main!r} must run sshd",
            )
        )
    notes.append(
        ConversionNote(
            "spec",
            NoteKind.CHECK,
            "v2beta1 launches over SSH: the worker image must run sshd (its entrypoint or command) and the "
            "launcher image needs an ssh client; keys are mounted at sshAuthMountPath (default /root/.ssh; "
            "set it to the user's ~/.ssh for an image that runs as non-root)",
        )
    )
    return spec


def _run_policy(v1: Mapping[str, Any], notes: list[ConversionNote]) -> dict[str, Any]:
    raw = v1.get("runPolicy")
    policy = dict(raw) if isinstance(raw, Mapping) else {}
    top = v1.get("cleanPodPolicy")
    if top is not None:
        if "cleanPodPolicy" not in policy:
            policy["cleanPodPolicy"] = top
            message = "moved to spec.runPolicy.cleanPodPolicy (v2beta1 has only that one)"
            notes.append(ConversionNote("spec.cleanPodPolicy", NoteKind.CHANGED, message))
        elif policy["cleanPodPolicy"] != top:
            wins = policy["cleanPodPolicy"]
            message = f"differs from spec.runPolicy.cleanPodPolicy ({wins}), which wins, as in v1"
            notes.append(ConversionNote("spec.cleanPodPolicy", NoteKind.DROPPED, message))
    if policy.get("managedBy") == _V1_CONTROLLER:
        policy["managedBy"] = _V2_CONTROLLER
        message = f"{_V1_CONTROLLER} manages v1 MPIJobs; v2beta1's name for this operator is {_V2_CONTROLLER}"
        notes.append(ConversionNote("spec.runPolicy.managedBy", NoteKind.CHANGED, message))
    return policy


def _replica_specs(specs: Mapping[str, Any], notes: list[ConversionNote]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for rtype, raw in specs.items():
        path = f"spec.mpiReplicaSpecs.{rtype}"
        if not isinstance(raw, Mapping):
            out[rtype] = raw  # validation of the result names it
            continue
        rspec = dict(raw)
        if rtype == "Worker" and not rspec.get("replicas"):
            message = "0 replicas (v1 default), but a v2beta1 Worker needs 1 or more: the launcher runs alone"
            notes.append(ConversionNote(path, NoteKind.DROPPED, message))
            continue
        _restart_policy(rtype, rspec, path, notes)
        _template(rtype, rspec, path, notes)
        out[rtype] = rspec
    return out


def _restart_policy(rtype: str, rspec: dict[str, Any], path: str, notes: list[ConversionNote]) -> None:
    policy = rspec.get("restartPolicy")
    where = f"{path}.restartPolicy"
    if policy is None:
        if rtype == "Launcher":
            rspec["restartPolicy"] = "Never"
            message = "written as Never, v1's default (v2beta1's Launcher default is OnFailure)"
            notes.append(ConversionNote(where, NoteKind.CHANGED, message))
    elif policy not in _V2_RESTART_POLICIES:
        rspec["restartPolicy"] = "OnFailure"
        message = f"{policy} is not accepted by v2beta1 (Never or OnFailure); OnFailure retries every failure"
        notes.append(ConversionNote(where, NoteKind.CHANGED, message))


def _template(rtype: str, rspec: dict[str, Any], path: str, notes: list[ConversionNote]) -> None:
    containers = list(_containers(rspec))
    if rtype == "Worker" and containers and not containers[0].get("command"):
        message = "no command: v1 ran `sleep 365d`; v2beta1 runs the image entrypoint, which must start sshd"
        notes.append(ConversionNote(f"{path}.template.spec.containers[0].command", NoteKind.CHECK, message))
    for index, container in enumerate(containers):
        env = container.get("env")
        if not isinstance(env, list):
            continue
        kept = [e for e in env if not _is_v1_agent_env(e)]
        for entry in env:
            if entry not in kept:
                where = f"{path}.template.spec.containers[{index}].env[{entry.get('name')}]"
                message = "points at v1's kubectl-exec agent; v2beta1 sets its own SSH agent"
                notes.append(ConversionNote(where, NoteKind.DROPPED, message))
        container["env"] = kept


def _containers(rspec: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    template = rspec.get("template")
    pod = template.get("spec") if isinstance(template, Mapping) else None
    containers = pod.get("containers") if isinstance(pod, Mapping) else None
    for container in containers if isinstance(containers, list) else []:
        if isinstance(container, dict):
            yield container


def _is_v1_agent_env(entry: object) -> bool:
    if not isinstance(entry, Mapping):
        return False
    value = entry.get("value")
    if not isinstance(value, str):
        return False
    # Intel MPI's rsh bootstrap only worked with v1's kubexec.sh as its exec; v2beta1 uses ssh.
    rsh_bootstrap = entry.get("name") == "I_MPI_HYDRA_BOOTSTRAP" and value == "rsh"
    return rsh_bootstrap or any(hint in value for hint in _V1_AGENT_HINTS)


def _uses_intel_mpi(specs: Mapping[str, Any]) -> bool:
    launcher = specs.get("Launcher")
    if not isinstance(launcher, Mapping):
        return False
    return any(
        isinstance(e, Mapping) and str(e.get("name", "")).startswith("I_MPI_")
        for container in _containers(launcher)
        for e in container.get("env") or ()
    )
