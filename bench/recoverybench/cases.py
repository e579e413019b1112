"""What the benchmark runs: three examples (kinds) under two modes, each with one rank to kill.

Each example is the file under examples/, changed only where the measure needs it:
- more epochs, so that the gang still trains long after the kill (the bench deletes the job once it has
  its figure);
- every replica's `restartPolicy: OnFailure`, in both modes, so that the two differ only by the policy;
- in the `OnFailure` mode, without the example's failure policy annotation;
- in the `RestartGang` mode, with the example's failure policy (or, for an example without one, a rule
  that restarts the gang on any failure). The operator picks how the gang restarts: in place where the
  node's kubelet can, else by recreating the pods.
The other objects of the file (a checkpoint volume's claim) come with the job.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
POLICY_ANNOTATION = "kubetrain.io/failure-policy"
GANG_POLICY = {"rules": [{"action": "RestartGang"}]}

Obj = dict[str, Any]


class Mode(StrEnum):
    ON_FAILURE = "OnFailure"
    """Kubeflow's per-replica restart: the kubelet restarts each dead container, peers as they die."""
    RESTART_GANG = "RestartGang"
    """kubetrain's gang failure policy: the whole gang restarts at the first failure."""


@dataclass(frozen=True)
class Kind:
    name: str  # the row's name
    example: str  # under examples/
    images: tuple[str, ...]  # trainer images (hack/images.sh names without `trainer-`)
    container: str
    ranks: tuple[int, ...]
    killed: str  # the pod whose main container is killed: it holds a rank other than 0
    epochs: int


KINDS = {
    "PyTorchJob": Kind("PyTorchJob", "pytorch/pytorch-ddp.yaml", ("pytorch",), "pytorch", (0, 1, 2, 3),
                       "pytorch-ddp-worker-0", 2000),
    "TFJob": Kind("TFJob", "tensorflow/tf-multiworker-mirrored.yaml", ("tensorflow",), "tensorflow",
                  (0, 1, 2, 3), "tf-multiworker-worker-1", 500),
    # mpirun -np 3 on the launcher (a worker too, first in the hostfile) and two workers: rank 1 runs under
    # worker-0's sshd; all the ranks' lines come out of the launcher's mpirun
    "MPIJob": Kind("MPIJob", "mpi/mpi-allreduce-openmpi.yaml", ("mpi",), "mpi", (0, 1, 2),
                   "mpi-allreduce-worker-0", 20000),
}  # fmt: skip


def load_example(kind: Kind) -> tuple[Obj, list[Obj]]:
    """The example's job, and the other objects its file carries."""
    docs = [d for d in yaml.safe_load_all((EXAMPLES / kind.example).read_text()) if d]
    jobs = [d for d in docs if str(d.get("apiVersion", "")).startswith("kubeflow.org/")]
    if len(jobs) != 1:
        raise ValueError(f"{kind.example}: expected one job, found {len(jobs)}")
    return dict(jobs[0]), [d for d in docs if d is not jobs[0]]


def job_for(kind: Kind, mode: Mode, epochs: int | None = None) -> Obj:
    """The example's job as this mode runs it (see the module docstring)."""
    job = copy.deepcopy(load_example(kind)[0])
    for replica in _replicas(job).values():
        replica["restartPolicy"] = "OnFailure"
        for container in replica["template"]["spec"]["containers"]:
            _set_epochs(container, epochs or kind.epochs)
    annotations = job["metadata"].setdefault("annotations", {})
    if mode is Mode.ON_FAILURE:
        annotations.pop(POLICY_ANNOTATION, None)
    else:
        annotations.setdefault(POLICY_ANNOTATION, json.dumps(GANG_POLICY))
    return job


def policy_of(job: Obj) -> Any:
    """The job's failure policy (the annotation's JSON value), None without one."""
    text = job["metadata"].get("annotations", {}).get(POLICY_ANNOTATION)
    return None if text is None else json.loads(text)


def _replicas(job: Obj) -> dict[str, Obj]:
    return dict(next(v for k, v in job["spec"].items() if k.endswith("ReplicaSpecs")))


def _set_epochs(container: Obj, epochs: int) -> None:
    """`--epochs N` in the trainer's arguments: in `args` (PyTorch, TF), or after the module that mpirun
    runs in the launcher's `command` (MPI); sshd's command is left alone."""
    for key in ("args", "command"):
        words = container.get(key)
        if not words:
            continue
        if "--epochs" in words:
            words[words.index("--epochs") + 1] = str(epochs)
            return
        trainer = next((w for w in words if w.startswith("kubetrain.runtimes.examples.")), None)
        if trainer is not None and key == "command":
            container[key] = [*words, "--epochs", str(epochs)]
            return
