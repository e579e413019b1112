"""`--runtime container`: each pod's main container runs as a container of its image (podman or docker).

The operator's rendering is used as is, with nothing rewritten: every run gets a private network of its
own, and each pod's container joins it under every DNS name the operator's Services give the pod (`<pod>`,
`<pod>.<ns>`, `<pod>.<ns>.svc[.cluster.local]`, and with a subdomain `<host>.<subdomain>.<ns>.svc[...]`),
so TF_CONFIG, MASTER_ADDR, the MPI hostfile and the replicas' ports work as in a cluster; MPI workers run
the image's real sshd, and the launcher reaches them over SSH with the key from the job's Secret. The
pod's env is passed as `-e NAME` (values travel in the engine client's environment, never in its argv)
and its volumes, made as local directories exactly as for the process runtime, are bind-mounted at their
mountPaths. The engine client (`podman run`) is the pod's local process: the kubelet's SIGTERM reaches the
container through the client's signal proxy; whatever survives a SIGKILL is removed with the network when
the run ends (`cleanup`). Images are never pulled: a missing one is reported before anything starts.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kubetrain.common.kube import objects
from kubetrain.common.kube.resources import Obj

__all__ = [
    "BUILD_HINT",
    "ENGINES",
    "ContainerEngine",
    "ImageMissing",
    "Mount",
    "container_mounts",
    "dns_names",
    "images_of",
]

ENGINES = ("podman", "docker")
BUILD_HINT = "bash hack/images.sh"
"""How the trainer images the examples name are built (from a kubetrain checkout)."""
RUN_LABEL = "io.kubetrain.local-run"
_CLUSTER_DOMAIN = "cluster.local"
NVIDIA_VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
_EMPTY_DIR_MODE = 0o777  # what the kubelet gives an emptyDir: writable by a non-root image user


class ImageMissing(Exception):
    """Images the job names are not in the engine's local storage."""


def images_of(job: Obj) -> list[str]:
    """Every image of every container (init containers included) in the job's replica templates."""
    found: list[str] = []
    for key, specs in (job.get("spec") or {}).items():
        if not key.endswith("ReplicaSpecs") or not isinstance(specs, Mapping):
            continue
        for replica in specs.values():
            pod = ((replica or {}).get("template") or {}).get("spec") or {}
            for container in [*(pod.get("initContainers") or ()), *(pod.get("containers") or ())]:
                image = str(container.get("image") or "")
                if image and image not in found:
                    found.append(image)
    return found


def dns_names(pod: Obj) -> list[str]:
    """The names under which a pod is reachable in a cluster (see the module docstring)."""
    spec = pod.get("spec") or {}
    namespace = objects.namespace(pod) or "default"
    hosts = [objects.name(pod)]
    hostname = str(spec.get("hostname") or "")
    if hostname and hostname not in hosts:
        hosts.append(hostname)
    subdomain = str(spec.get("subdomain") or "")
    names: list[str] = []
    for host in hosts:
        names += [host, f"{host}.{namespace}", f"{host}.{namespace}.svc"]
        names.append(f"{host}.{namespace}.svc.{_CLUSTER_DOMAIN}")
        if subdomain:
            prefix = f"{host}.{subdomain}"
            names += [prefix, f"{prefix}.{namespace}", f"{prefix}.{namespace}.svc"]
            names.append(f"{prefix}.{namespace}.svc.{_CLUSTER_DOMAIN}")
    return names


@dataclass(frozen=True)
class ContainerEngine:
    """One container engine's command line, for one local run (its network and its containers' label)."""

    binary: str
    run_id: str

    @classmethod
    def detect(cls, run_id: str, wanted: str | None = None) -> ContainerEngine:
        """`wanted` if given, else podman, else docker; ValueError when none can be used."""
        for name in (wanted,) if wanted else ENGINES:
            path = shutil.which(name) if name else None
            if path is not None:
                return cls(path, run_id)
        which = wanted or " or ".join(ENGINES)
        raise ValueError(f"--runtime container needs {which} on PATH; install it or use --runtime process")

    @property
    def name(self) -> str:
        return Path(self.binary).name

    @property
    def network(self) -> str:
        return f"kubetrain-{self.run_id}"

    def container_name(self, pod: str) -> str:
        return f"kubetrain-{self.run_id}-{pod}"

    def missing_images(self, images: Iterable[str]) -> list[str]:
        """The images of `images` that are not in local storage."""
        missing = []
        for image in images:
            probe = subprocess.run(
                [self.binary, "image", "inspect", image], capture_output=True, check=False, timeout=60
            )
            if probe.returncode != 0:
                missing.append(image)
        return missing

    def check_images(self, job: Obj) -> None:
        """Raise ImageMissing, naming the images and how to get them, unless every image is local."""
        missing = self.missing_images(images_of(job))
        if missing:
            ours = [i for i in missing if "/kubetrain/trainer-" in i or "/kubetrain/kubetrain-" in i]
            hint = f"build them with `{BUILD_HINT}` in a kubetrain checkout" if ours else ""
            pull = f"`{self.name} pull` them" if len(ours) < len(missing) else ""
            fix = " or ".join(h for h in (hint, pull) if h)
            raise ImageMissing(
                f"{', '.join(missing)}: not in {self.name}'s local storage (a local run never pulls): {fix}"
            )

    async def create_network(self) -> None:
        await self._admin("network", "create", "--label", f"{RUN_LABEL}={self.run_id}", self.network)

    async def cleanup(self) -> None:
        """Remove this run's containers (the ones a SIGKILL left behind) and its network."""
        listed = await self._admin("ps", "-aq", "--filter", f"label={RUN_LABEL}={self.run_id}", check=False)
        ids = listed.split()
        if ids:  # podman would first wait 10 s for each to stop; docker's rm -f kills at once
            now = ["-t", "0"] if self.name == "podman" else []
            await self._admin("rm", "-f", *now, *ids, check=False)
        await self._admin("network", "rm", "-f", self.network, check=False)

    async def _admin(self, *args: str, check: bool = True) -> str:
        def call() -> subprocess.CompletedProcess[str]:
            argv = [self.binary, *args]
            return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)

        done = await asyncio.to_thread(call)
        if check and done.returncode != 0:
            raise RuntimeError(f"{self.name} {' '.join(args)}: {done.stderr.strip() or done.returncode}")
        return done.stdout

    def run_argv(
        self, pod: Obj, container: Obj, env: Mapping[str, str], mounts: Sequence[Mount]
    ) -> list[str]:
        """`<engine> run ...` for the main container of `pod` (see the module docstring)."""
        name = objects.name(pod)
        spec = pod.get("spec") or {}
        # --init: an init as PID 1 passes the kubelet's SIGTERM on (a trainer as PID 1 would ignore it)
        argv = [self.binary, "run", "--rm", "--init", "--pull=never", "--name", self.container_name(name)]
        argv += ["--label", f"{RUN_LABEL}={self.run_id}", "--network", self.network]
        argv += ["--hostname", str(spec.get("hostname") or name)]
        for alias in dns_names(pod):
            argv += ["--network-alias", alias]
        for key in env:
            argv += ["-e", key]
        for mount in mounts:
            argv += ["-v", mount.flag()]
        argv += _user_flags(spec, container) + self._gpu_flags(env)
        if container.get("workingDir"):
            argv += ["-w", str(container["workingDir"])]
        command = [str(c) for c in container.get("command") or ()]
        if command:
            argv += ["--entrypoint", command[0]]
        argv.append(str(container.get("image") or ""))
        return argv + command[1:] + [str(a) for a in container.get("args") or ()]

    def _gpu_flags(self, env: Mapping[str, str]) -> list[str]:
        """The GPUs the pod was allocated (NVIDIA_VISIBLE_DEVICES, as a device plugin sets it) as devices of
        the container: CDI names for podman (`nvidia-ctk cdi generate` makes them), `--gpus` for docker."""
        devices = [d for d in env.get(NVIDIA_VISIBLE_DEVICES, "").split(",") if d.strip()]
        if not devices or devices[0] in ("void", "none", "all"):
            return []
        if self.name == "docker":
            return ["--gpus", f'"device={",".join(devices)}"']
        return [flag for d in devices for flag in ("--device", f"nvidia.com/gpu={d.strip()}")]

    def container_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The pod's env as the container gets it. Inside, only its own GPUs exist, numbered from 0: a
        CUDA_VISIBLE_DEVICES that names the host's indexes (the local allocation) is dropped, as a device
        plugin never sets it."""
        own = dict(env)
        if own.get(CUDA_VISIBLE_DEVICES) and own.get(CUDA_VISIBLE_DEVICES) == own.get(NVIDIA_VISIBLE_DEVICES):
            del own[CUDA_VISIBLE_DEVICES]
        return own

    def describe(self, container: Obj) -> str:
        """The run as the console shows it: engine, image and command (the flags are many and predictable)."""
        words = [str(w) for w in [*(container.get("command") or ()), *(container.get("args") or ())]]
        return " ".join([self.name, "run", str(container.get("image") or ""), *words])

    def client_env(self, environ: Mapping[str, str], pod_env: Mapping[str, str]) -> dict[str, str]:
        """The engine client's environment: the machine's (its config, e.g. CONTAINERS_CONF) and the pod's
        values, which `-e NAME` hands to the container."""
        return {**environ, **pod_env}


@dataclass(frozen=True)
class Mount:
    """A local directory or file bind-mounted into the container."""

    local: Path
    path: str
    read_only: bool = False

    def flag(self) -> str:
        return f"{self.local}:{self.path}" + (":ro" if self.read_only else "")


def container_mounts(pod: Obj, container: Obj, local_paths: Sequence[tuple[str, Path]]) -> list[Mount]:
    """The container's volumeMounts as bind mounts of the directories the volume step made. emptyDir and
    claim directories are made writable for everyone, as a kubelet's are, since images run as non-root."""
    volumes = {str(v.get("name")): v for v in (pod.get("spec") or {}).get("volumes") or ()}
    read_only = {
        str(m.get("mountPath")): bool(m.get("readOnly")) for m in container.get("volumeMounts") or ()
    }
    by_path = {str(m.get("mountPath")): str(m.get("name")) for m in container.get("volumeMounts") or ()}
    mounts = []
    for path, local in local_paths:
        volume = volumes.get(by_path.get(path, ""), {})
        if ("emptyDir" in volume or "persistentVolumeClaim" in volume) and local.is_dir():
            os.chmod(local, _EMPTY_DIR_MODE)
        mounts.append(Mount(local, path, read_only.get(path, False)))
    return mounts


def _user_flags(spec: Obj, container: Obj) -> list[str]:
    """`--user uid[:gid]` from the securityContext (the container's over the pod's), as a kubelet sets it."""
    pod_ctx, own = spec.get("securityContext") or {}, container.get("securityContext") or {}
    uid = own.get("runAsUser", pod_ctx.get("runAsUser"))
    gid = own.get("runAsGroup", pod_ctx.get("runAsGroup"))
    if uid is None:
        return []
    return ["--user", f"{int(uid)}" + (f":{int(gid)}" if gid is not None else "")]
