"""Small, kind-agnostic edits of a pod's containers for `configure_pod` hooks: find the main container,
set env vars, read a replica's named port.

Every framework injects env into the pods it creates (TF_CONFIG, MASTER_ADDR, K_MPI_JOB_ROLE, ...), and the
same "main container" rule must hold for env, ports and Services alike: the container with the kind's
default name, else the first one (`KindInfo.default_container_index`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubetrain.api import KindInfo, ReplicaSpec
from kubetrain.common.job.pods import main_container_index
from kubetrain.common.kube.resources import Obj

__all__ = [
    "GPU_RESOURCE",
    "container_gpus",
    "main_container",
    "replica_gpus",
    "replica_port",
    "set_env",
    "set_pod_env",
]

GPU_RESOURCE = "nvidia.com/gpu"
"""The extended resource of NVIDIA's device plugin: whole GPUs, request equal to limit."""


def main_container(pod: Obj, kind: KindInfo) -> dict[str, Any] | None:
    """The container of `pod` (a pod dict) that the operator configures, or None when it has none."""
    spec = pod.get("spec") or {}
    index = main_container_index(spec, kind.default_container_name)
    if index is None:
        return None
    container: dict[str, Any] = spec["containers"][index]
    return container


def set_env(container: dict[str, Any], env: Mapping[str, str | Mapping[str, Any]]) -> None:
    """Set `env` on `container`, in order, replacing any variable of the same name it already had.

    A value that is a mapping is the variable's `valueFrom` (a downward-API `fieldRef`, a ConfigMap or
    Secret key): e.g. PaddleJob's POD_IP_DUMMY, which a later variable names as `$(POD_IP_DUMMY)`."""
    kept = [e for e in container.get("env") or [] if e.get("name") not in env]
    container["env"] = [*kept, *(_env_var(name, value) for name, value in env.items())]


def set_pod_env(kind: KindInfo, pod: Obj, env: Mapping[str, str | Mapping[str, Any]]) -> None:
    """Set `env` on the containers of `pod` the kind configures: every one when
    `kind.env_in_every_container` (PyTorch, JAX, XGBoost, Paddle), else the main one (if any)."""
    if kind.env_in_every_container:
        containers = list(pod["spec"].get("containers") or ())
    else:
        main = main_container(pod, kind)
        containers = [main] if main is not None else []
    for container in containers:
        set_env(container, env)


def _env_var(name: str, value: str | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(value, str):
        return {"name": name, "value": value}
    return {"name": name, "valueFrom": dict(value)}


def container_gpus(container: Mapping[str, Any]) -> int:
    """The whole GPUs a container (wire form) asks for: its `nvidia.com/gpu` limit, else its request.

    A value that is not a whole number counts as 0: the API server rejects such a pod anyway.
    """
    resources = container.get("resources") or {}
    for part in ("limits", "requests"):
        value = (resources.get(part) or {}).get(GPU_RESOURCE)
        if value is not None:
            text = str(value)
            return int(text) if text.isdigit() else 0
    return 0


def replica_gpus(kind: KindInfo, spec: ReplicaSpec) -> int:
    """The GPUs each pod of `spec` gets for its main container (what torchrun's `gpu` would count)."""
    pod_spec = spec.template.spec.to_wire()
    index = main_container_index(pod_spec, kind.default_container_name)
    return 0 if index is None else container_gpus(pod_spec["containers"][index])


def replica_port(kind: KindInfo, spec: ReplicaSpec) -> int | None:
    """The kind's default-named port on the main container of `spec`'s template, else the kind's default
    port (defaulting adds that port, so the fallback only matters for undefaulted specs)."""
    containers = spec.template.spec.containers
    index = kind.default_container_index(containers)
    if index is not None:
        for port in containers[index].ports or ():
            if port.name == kind.default_port_name:
                return port.container_port
    return kind.default_port
