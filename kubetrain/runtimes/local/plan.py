"""From a pod, as the operator rendered it, to the local process that stands for its main container.

Only the main container runs (the kind's default-named container, else the first, as the operator
configures it); sidecars and init containers are images-only work and are skipped with a note.
Kubeflow's PyTorch init container, for one, only waits for the master's DNS name, which locally is
127.0.0.1 from the start. The steps, in Kubernetes order: resolve env (valueFrom included), prepare
volumes, expand `$(VAR)` in command and args, then rewrite addresses (`network`) and mount paths
(`volumes`) in env values and arguments, then lay the node's environment under it (`node`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from kubetrain.common.job.pods import main_container_index
from kubetrain.common.kube import objects
from kubetrain.common.kube.resources import Obj
from kubetrain.runtimes.local.container import ContainerEngine, container_mounts
from kubetrain.runtimes.local.gpus import GpuAllocator, container_gpus, gpu_env
from kubetrain.runtimes.local.network import Network
from kubetrain.runtimes.local.node import LocalNode, is_mpi_worker
from kubetrain.runtimes.local.podenv import ConfigError, Lookup, NodeInfo, expand, resolve_env
from kubetrain.runtimes.local.volumes import Mounts, prepare_volumes

__all__ = ["LaunchPlan", "Planner"]


@dataclass(frozen=True)
class LaunchPlan:
    """Everything needed to start (and restart) one pod's main container locally."""

    container: str
    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: Path
    restart_policy: str
    grace_seconds: float
    notes: tuple[str, ...] = field(default=())
    start_error: str = ""
    """Why the container cannot start at all (no command): it fails like a StartError, every time."""
    display: str = ""
    """How the console shows the command, when not `argv` itself (a container engine's long run line)."""


@dataclass(frozen=True)
class Planner:
    """Plans the containers of one run: its network, node, directories and defaults."""

    network: Network
    node: LocalNode
    default_container: str | None
    workdir: Path
    """Where a container without a usable workingDir runs (the directory `kubetrain run` started in)."""
    default_grace: float = 5.0
    node_info: NodeInfo = field(default_factory=NodeInfo)
    gpus: GpuAllocator = field(default_factory=lambda: GpuAllocator(()))
    """Hands out the pods' `nvidia.com/gpu`; the default has none (pods asking for GPUs never schedule)."""
    engine: ContainerEngine | None = None
    """Set for `--runtime container`: the pod runs as a container of its image (`container`)."""

    def plan(self, pod: Obj, lookup: Lookup) -> LaunchPlan:
        """The launch plan of `pod`; raises ConfigError while something it needs is missing, and
        `gpus.Unschedulable` while the GPUs it asks for are held by other pods."""
        spec: Obj = pod.get("spec") or {}
        index = main_container_index(spec, self.default_container)
        if index is None:
            raise ConfigError("the pod has no containers")
        container: Obj = spec["containers"][index]
        name = objects.name(pod)
        # the pod's env before any local rewriting: what both runtimes start from; the GPUs a device plugin
        # would hand the container are part of it, so that they reach containers too
        held = self.gpus.allocate(objects.uid(pod), container_gpus(container))
        raw_env = {**resolve_env(container, pod, lookup, self.node_info), **gpu_env(held)}
        gpu_notes = [f"nvidia.com/gpu: GPU {', '.join(str(g) for g in held)}"] if held else []
        mounts = prepare_volumes(
            pod, container, pod_dir=self.node.run_dir / "pods" / name, run_dir=self.node.run_dir,
            lookup=lookup, node=self.node_info,
        )  # fmt: skip
        if self.engine is not None:
            planned = self._in_container(self.engine, pod, index, raw_env, mounts)
            return replace(planned, notes=(*planned.notes, *gpu_notes))
        self.network.declare(name, _ports(container), hostname=str(spec.get("hostname") or ""))
        env = {k: mounts.rewrite(v) for k, v in self.network.rewrite_env(raw_env, own=name).items()}
        argv, notes, error = self._argv(container, raw_env, mounts, name)
        cwd, cwd_note = self._cwd(container, mounts)
        return LaunchPlan(
            container=str(container.get("name", "")),
            argv=argv,
            env=self.node.container_env(env, hostname=str(spec.get("hostname") or name)),
            cwd=cwd,
            restart_policy=str(spec.get("restartPolicy") or "Always"),
            grace_seconds=float(spec.get("terminationGracePeriodSeconds") or self.default_grace),
            notes=(*_skipped(spec, index), *mounts.warnings, *notes, *cwd_note, *gpu_notes),
            start_error=error,
        )

    def release(self, pod_uid: str) -> None:
        """The pod's processes are gone: free what it held (its GPUs)."""
        self.gpus.release(pod_uid)

    def gpu_table(self, names: dict[str, str]) -> dict[str, str]:
        """Pod name -> the GPU indices it holds, for the view; `names` maps uid -> pod name."""
        return {
            names[uid]: ",".join(str(g.index) for g in held)
            for uid, held in self.gpus.holdings().items()
            if uid in names
        }

    def _in_container(
        self, engine: ContainerEngine, pod: Obj, index: int, env: dict[str, str], mounts: Mounts
    ) -> LaunchPlan:
        """The engine's `run` for the main container: the pod's env and volumes as the operator rendered
        them, nothing rewritten (the run's network resolves the pods' DNS names)."""
        spec: Obj = pod.get("spec") or {}
        container: Obj = spec["containers"][index]
        binds = container_mounts(pod, container, mounts.paths)
        env = engine.container_env(env)
        return LaunchPlan(
            container=str(container.get("name", "")),
            argv=tuple(engine.run_argv(pod, container, env, binds)),
            env=engine.client_env(self.node.container_env({}, hostname=objects.name(pod)), env),
            cwd=self.workdir,
            restart_policy=str(spec.get("restartPolicy") or "Always"),
            grace_seconds=float(spec.get("terminationGracePeriodSeconds") or self.default_grace),
            notes=(*_skipped(spec, index, in_containers=True), *mounts.warnings),
            display=engine.describe(container),
        )

    def _argv(
        self, container: Obj, env: dict[str, str], mounts: Mounts, own: str
    ) -> tuple[tuple[str, ...], list[str], str]:
        """(argv, notes, start error)."""
        command = [expand(str(c), env) for c in container.get("command") or ()]
        args = [expand(str(a), env) for a in container.get("args") or ()]
        if is_mpi_worker(env):
            note = (
                "MPI worker: runs the local stand-in for its sshd; the launcher's agent runs the ranks here"
            )
            return tuple(self.node.standin_command(command + args)), [note], ""
        if not command:
            error = (
                f"container {container.get('name')!r} has no command: its image's entrypoint is unknown "
                "locally; set `command` (and `args`) in the job YAML"
            )
            return (), [], error
        argv = [command[0], *self.network.rewrite_args(command[1:] + args, own=own)]
        return tuple(mounts.rewrite(a) for a in argv), [], ""

    def _cwd(self, container: Obj, mounts: Mounts) -> tuple[Path, list[str]]:
        wanted = str(container.get("workingDir") or "")
        if not wanted:
            return self.workdir, []
        local = Path(mounts.local(wanted))
        if local.is_dir():
            return local, []
        return self.workdir, [f"workingDir {wanted} does not exist locally: running in {self.workdir}"]


def _ports(container: Obj) -> list[int]:
    return [int(p["containerPort"]) for p in container.get("ports") or () if p.get("containerPort")]


def _skipped(spec: Obj, main: int, *, in_containers: bool = False) -> Sequence[str]:
    why = "only the main container runs locally" if in_containers else "images are not run locally"
    notes = [f"init container {c.get('name')!r} skipped ({why})" for c in spec.get("initContainers") or ()]
    notes += [
        f"container {c.get('name')!r} not run (only the main container runs locally)"
        for i, c in enumerate(spec.get("containers") or ())
        if i != main
    ]
    return notes
