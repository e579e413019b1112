"""What the mpi-operator (v2beta1) adds to an MPIJob's pods, applied to the template's fresh pod dicts.

Every pod: `hostname` and `subdomain: <job>` (its DNS name under the job's headless Service), the job's
domain in `dnsConfig.searches` (so bare host names resolve too; `ClusterFirstWithHostNet` under
hostNetwork), the role label, `K_MPI_JOB_ROLE`, and the SSH Secret mounted read-only at sshAuthMountPath.
The launcher also gets the implementation's env and `/etc/mpi` (hostfile, discover_hosts.sh); a worker
without command and args runs `/usr/sbin/sshd -De`. Only containers[0] is configured, as upstream, and
the operator's env wins over the template's (validation already rejects the names it owns; the NVIDIA
variables that keep a launcher off the GPUs are overridden, as by the mpi-operator).
"""

from __future__ import annotations

from typing import Any

from kubetrain.api import MPIJOB, MPIJob
from kubetrain.common.job import JOB_ROLE_LABEL
from kubetrain.common.job.containers import main_container, set_env
from kubetrain.common.kube.resources import Obj
from kubetrain.controllers.mpi.cluster import (
    CONFIG_KEYS,
    SSH_PRIVATE_KEY,
    SSH_PUBLIC_KEY,
    JobHosts,
    config_map_name,
    implementation,
    secret_name,
)
from kubetrain.podcontract import MPIRole, launcher_env, names, worker_env

__all__ = ["CONFIG_VOLUME", "SSH_VOLUME", "configure_launcher", "configure_worker"]

SSH_VOLUME = "ssh-auth"
CONFIG_VOLUME = "mpi-job-config"
ROOT_SSH_DIR = "/root/.ssh"
WORKER_COMMAND = ["/usr/sbin/sshd", "-De"]
_CONFIG_MODES = {CONFIG_KEYS[0]: 0o444, CONFIG_KEYS[1]: 0o555}


def configure_launcher(pod: Obj, hosts: JobHosts) -> Obj:
    """The launcher pod: runs mpirun against the hostfile."""
    job = hosts.job
    _join(pod, hosts, hosts.launcher_hostname, MPIRole.LAUNCHER)
    env = launcher_env(
        implementation(job),
        slots_per_worker=job.spec.slots_per_worker or 1,
        launcher_is_worker=bool(job.spec.run_launcher_as_worker),
    )
    set_env(_main(pod), env)
    items = [{"key": key, "path": key, "mode": mode} for key, mode in _CONFIG_MODES.items()]
    volume = {"name": CONFIG_VOLUME, "configMap": {"name": config_map_name(job), "items": items}}
    _mount(pod, volume, names.MPI_CONFIG_DIR)
    return pod


def configure_worker(pod: Obj, hosts: JobHosts, index: int) -> Obj:
    """A worker pod: runs sshd, into which the launcher's mpirun logs."""
    _join(pod, hosts, hosts.worker_hostname(index), MPIRole.WORKER)
    container = _main(pod)
    set_env(container, worker_env())
    if not container.get("command") and not container.get("args"):
        container["command"] = list(WORKER_COMMAND)
    return pod


def _join(pod: Obj, hosts: JobHosts, hostname: str, role: MPIRole) -> None:
    """Hostname, DNS, role label and SSH key: what launcher and workers share."""
    job = hosts.job
    pod["metadata"].setdefault("labels", {})[JOB_ROLE_LABEL] = role.value
    spec = pod["spec"]
    spec["hostname"] = hostname
    spec["subdomain"] = job.name
    dns = spec.setdefault("dnsConfig", {})
    searches = dns.setdefault("searches", [])
    if hosts.search_domain not in searches:
        searches.append(hosts.search_domain)
    if spec.get("hostNetwork") and not spec.get("dnsPolicy"):
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    _mount(pod, _ssh_volume(job), _ssh_dir(job))


def _ssh_dir(job: MPIJob) -> str:
    return job.spec.ssh_auth_mount_path or ROOT_SSH_DIR


def _ssh_volume(job: MPIJob) -> Obj:
    # sshd and ssh accept root-owned key files readable by others; a file owned by the user (root, in
    # /root/.ssh) must be private to it.
    mode = 0o600 if _ssh_dir(job) == ROOT_SSH_DIR else 0o644
    items = [
        {"key": SSH_PRIVATE_KEY, "path": "id_rsa"},
        {"key": SSH_PUBLIC_KEY, "path": "id_rsa.pub"},
        {"key": SSH_PUBLIC_KEY, "path": "authorized_keys"},
    ]
    return {
        "name": SSH_VOLUME,
        "secret": {"secretName": secret_name(job), "defaultMode": mode, "items": items},
    }


def _main(pod: Obj) -> dict[str, Any]:
    container = main_container(pod, MPIJOB)
    if container is None:  # validation requires a container; a pod without one is never rendered
        raise ValueError(f"pod {pod['metadata'].get('name')} has no container")
    return container


def _mount(pod: Obj, volume: Obj, path: str) -> None:
    pod["spec"].setdefault("volumes", []).append(volume)
    mount = {"name": volume["name"], "mountPath": path, "readOnly": True}
    _main(pod).setdefault("volumeMounts", []).append(mount)
