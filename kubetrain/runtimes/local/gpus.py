"""GPUs for local runs, handed out as a kubelet's NVIDIA device plugin hands them out in a cluster.

Why: in a cluster each pod sees only the GPUs of its `nvidia.com/gpu` limit. A local run that let every
process see every GPU would put two pods of one job on the same device, and NCCL fails deep inside with
"Duplicate GPU detected". So, locally:

- the inventory is the machine's GPUs (NVML through `nvidia-ml-py` when importable, else `nvidia-smi`,
  else none), narrowed by `kubetrain run --local --gpus 0,2` or `--gpus none`;
- a pod gets whole GPUs for its main container's `nvidia.com/gpu` limit, exclusively, through
  `CUDA_VISIBLE_DEVICES` and `NVIDIA_VISIBLE_DEVICES` (by UUID, so CUDA's device order cannot differ from
  nvidia-smi's); a pod that asks for none sees none;
- a GPU is claimed machine-wide (`claims.Claims`), so two local runs never share one; a pod whose GPUs are
  held by another run waits Pending/Unschedulable, as the scheduler would leave it;
- a job that can never fit (one pod asking more than the machine has, or all pods together, which a
  distributed job needs at once) is refused before anything starts (`check_fit`).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubetrain.common.job.containers import GPU_RESOURCE, container_gpus
from kubetrain.runtimes.local.claims import Claims, default_claims_dir

__all__ = [
    "GPU_RESOURCE",
    "Gpu",
    "GpuAllocator",
    "GpuFitError",
    "Unschedulable",
    "check_fit",
    "container_gpus",
    "discover",
    "gpu_env",
    "parse_nvidia_smi",
    "select_gpus",
]

_SMI_QUERY = ("--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader,nounits")


@dataclass(frozen=True)
class Gpu:
    """One GPU of this machine."""

    index: int
    uuid: str
    name: str = ""
    memory_mib: int = 0

    def __str__(self) -> str:
        return f"{self.index} ({self.uuid})"


class GpuFitError(ValueError):
    """The job's GPU requests can never be met on this machine; nothing was started."""


class Unschedulable(Exception):
    """Not enough free GPUs right now (other pods hold them): the pod waits, as a scheduler would leave it."""


def parse_nvidia_smi(text: str) -> tuple[Gpu, ...]:
    """The GPUs of `nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits`."""
    gpus = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 2 or not fields[0].isdigit():
            continue
        memory = fields[3] if len(fields) > 3 else ""
        name = fields[2] if len(fields) > 2 else ""
        gpus.append(Gpu(int(fields[0]), fields[1], name, int(memory) if memory.isdigit() else 0))
    return tuple(sorted(gpus, key=lambda g: g.index))


def discover() -> tuple[Gpu, ...]:
    """This machine's GPUs: NVML if `nvidia-ml-py` is installed and a driver answers, else nvidia-smi."""
    return _from_nvml() or _from_smi()


def _from_nvml() -> tuple[Gpu, ...]:
    try:
        import pynvml  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415  (optional)
    except ImportError:
        return ()
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver: NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return ()
    try:
        return tuple(_nvml_gpu(pynvml, i) for i in range(pynvml.nvmlDeviceGetCount()))
    finally:
        pynvml.nvmlShutdown()


def _nvml_gpu(nvml: Any, index: int) -> Gpu:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    memory = nvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024)
    return Gpu(index, _text(nvml.nvmlDeviceGetUUID(handle)), _text(nvml.nvmlDeviceGetName(handle)), memory)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _from_smi() -> tuple[Gpu, ...]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    try:
        done = subprocess.run([smi, *_SMI_QUERY], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return parse_nvidia_smi(done.stdout) if done.returncode == 0 else ()


def select_gpus(inventory: Sequence[Gpu], wanted: str | None) -> tuple[Gpu, ...]:
    """The GPUs a run may use: all (`None`/"all"), none ("none") or a comma list of indices or UUIDs."""
    if wanted is None or wanted.strip() == "all":
        return tuple(inventory)
    if wanted.strip() == "none":
        return ()
    by_key = {str(g.index): g for g in inventory} | {g.uuid: g for g in inventory}
    chosen: list[Gpu] = []
    for key in (k.strip() for k in wanted.split(",") if k.strip()):
        if key not in by_key:
            found = ", ".join(str(g) for g in inventory) or "none"
            raise ValueError(f"--gpus: no GPU {key!r} on this machine (found: {found}); use indices or UUIDs")
        if by_key[key] not in chosen:
            chosen.append(by_key[key])
    return tuple(chosen)


def check_fit(requests: Mapping[str, tuple[int, int]], inventory: Sequence[Gpu]) -> None:
    """Raise GpuFitError when the job's pods can never run together here.

    `requests` maps each replica type to (GPUs per pod, pods). A distributed job needs all its pods at once,
    so the sum must fit, not only each pod.
    """
    have = len(inventory)
    fix = "ask for fewer (replicas or nvidia.com/gpu limits), pick others with --gpus, or run it on a cluster"
    for rtype, (per_pod, _) in sorted(requests.items()):
        if per_pod > have:
            raise GpuFitError(
                f"a {rtype} pod requests {GPU_RESOURCE}: {per_pod}, but {have} GPU(s) are available to this "
                f"run: it can never start. Fix: {fix}"
            )
    total = sum(per_pod * pods for per_pod, pods in requests.values())
    if total > have:
        pods = sum(pods for per_pod, pods in requests.values() if per_pod)
        raise GpuFitError(
            f"the job's {pods} GPU pod(s) request {GPU_RESOURCE}: {total} in all and must run at once, but "
            f"{have} GPU(s) are available to this run. Fix: {fix}"
        )


def gpu_env(gpus: Iterable[Gpu]) -> dict[str, str]:
    """What a device plugin gives a container: only its GPUs visible (none: none visible)."""
    uuids = ",".join(g.uuid for g in gpus)
    return {"CUDA_VISIBLE_DEVICES": uuids, "NVIDIA_VISIBLE_DEVICES": uuids or "void"}


class GpuAllocator:
    """Exclusive GPUs per pod uid, claimed machine-wide; see the module docstring."""

    def __init__(self, inventory: Sequence[Gpu], *, claims_dir: Path | None = None) -> None:
        self.inventory = tuple(inventory)
        self._claims = Claims(claims_dir if claims_dir is not None else default_claims_dir("gpus"))
        self._held: dict[str, tuple[Gpu, ...]] = {}

    def allocate(self, pod_uid: str, count: int) -> tuple[Gpu, ...]:
        """`count` GPUs for the pod (the same ones again for the same uid); raises Unschedulable."""
        if pod_uid in self._held or count == 0:
            return self._held.get(pod_uid, ())
        taken: list[Gpu] = []
        for gpu in self.inventory:
            if len(taken) == count:
                break
            if not self._busy(gpu) and self._claims.claim(gpu.uuid):
                taken.append(gpu)
        if len(taken) < count:
            for gpu in taken:
                self._claims.release(gpu.uuid)
            free = len(taken)
            raise Unschedulable(
                f"0/1 nodes are available: 1 Insufficient {GPU_RESOURCE} "
                f"(requests {count}, {free} free of {len(self.inventory)}; the others are held by other pods)"
            )
        self._held[pod_uid] = tuple(taken)
        return self._held[pod_uid]

    def release(self, pod_uid: str) -> None:
        """Free the pod's GPUs (its process ended)."""
        for gpu in self._held.pop(pod_uid, ()):
            self._claims.release(gpu.uuid)

    def holdings(self) -> dict[str, tuple[Gpu, ...]]:
        """Pod uid -> the GPUs it holds now."""
        return dict(self._held)

    def release_all(self) -> None:
        for uid in list(self._held):
            self.release(uid)

    def _busy(self, gpu: Gpu) -> bool:
        return any(gpu in held for held in self._held.values())
