"""The names and objects an MPIJob needs beside its pods: host names, the hostfile ConfigMap, the SSH Secret.

As in the mpi-operator (v2beta1):
- Service `<job>` (the template's job Service, `ServiceMode.JOB`): headless, selecting every pod of the
  job; pods set `hostname` and `subdomain: <job>`, so each is `<hostname>.<job>.<ns>.svc[.<cluster domain>]`.
  Unlike the mpi-operator (which publishes not-ready addresses only with runLauncherAsWorker), not-ready
  addresses are always published, so that a name resolves as soon as its pod has an IP (headless-DNS
  lag is a known cause of launcher crashes).
- ConfigMap `<job>-config`: `hostfile` (every worker, and first the launcher when it runs as a worker; the
  format of the MPI implementation, from `kubetrain.podcontract`) and `discover_hosts.sh` (the hosts
  Running right now, for Horovod elastic). Kept current as workers come and go.
- Secret `<job>-ssh` (`kubernetes.io/ssh-auth`, immutable): created once with a fresh key, never updated.
"""

from __future__ import annotations

import base64
import posixpath
from dataclasses import dataclass
from typing import final

from kubetrain.api import FieldError, MPIJob, MPIReplicaType
from kubetrain.common.job import Observed, PodPhase, replica_name
from kubetrain.common.job.limits import CONFIGMAP_MAX_BYTES
from kubetrain.common.kube.resources import Obj
from kubetrain.controllers.mpi.sshkey import generate_ssh_key
from kubetrain.controllers.settings import ControllerSettings
from kubetrain.podcontract import DiscoverHosts, Hostfile, HostfileEntry, MPIImplementation, names

__all__ = [
    "CONFIG_KEYS",
    "SSH_PRIVATE_KEY",
    "SSH_PUBLIC_KEY",
    "JobHosts",
    "config_map",
    "config_map_fits",
    "config_map_name",
    "secret_name",
    "ssh_secret",
]

HOSTFILE_KEY = posixpath.basename(names.HOSTFILE_PATH)
DISCOVER_HOSTS_KEY = posixpath.basename(names.DISCOVER_HOSTS_PATH)
CONFIG_KEYS = (HOSTFILE_KEY, DISCOVER_HOSTS_KEY)
SSH_PRIVATE_KEY = "ssh-privatekey"
SSH_PUBLIC_KEY = "ssh-publickey"


def config_map_name(job: MPIJob) -> str:
    return f"{job.name}-config"


def secret_name(job: MPIJob) -> str:
    return f"{job.name}-ssh"


@final
@dataclass(frozen=True, slots=True)
class JobHosts:
    """The DNS names of one job's pods under its headless Service."""

    job: MPIJob
    settings: ControllerSettings

    @property
    def launcher_hostname(self) -> str:
        return f"{self.job.name}-launcher"

    def worker_hostname(self, index: int) -> str:
        return replica_name(self.job.name, MPIReplicaType.WORKER, index)

    def fqdn(self, hostname: str) -> str:
        """`<hostname>.<job>.<ns>.svc[.<cluster domain>]`."""
        return f"{hostname}.{self.settings.service_host(self.job.name, self.job.namespace)}"

    @property
    def search_domain(self) -> str:
        """The DNS search domain under which bare host names resolve. A search domain must be complete,
        so `cluster.local` stands in when the operator was given no cluster domain (the mpi-operator
        always writes `cluster.local`, even with `--cluster-domain`)."""
        domain = self.settings.cluster_domain or "cluster.local"
        return f"{self.job.name}.{self.job.namespace}.svc.{domain}"

    def hostfile(self) -> Hostfile:
        """Every worker (the launcher first when it runs as a worker), each with slotsPerWorker slots."""
        spec = self.job.spec
        slots = spec.slots_per_worker or 1
        hosts = [self.launcher_hostname] if spec.run_launcher_as_worker else []
        hosts += [self.worker_hostname(i) for i in range(_workers(self.job))]
        entries = tuple(HostfileEntry(host=self.fqdn(h), slots=slots) for h in hosts)
        return Hostfile(implementation=implementation(self.job), entries=entries)

    def discover_hosts(self, observed: Observed) -> DiscoverHosts:
        """The hosts that are up now: the launcher when it runs as a worker, then the Running workers."""
        hosts = [self.launcher_hostname] if self.job.spec.run_launcher_as_worker else []
        pods = observed.counts(MPIReplicaType.WORKER).pods
        hosts += [
            self.worker_hostname(index)
            for index, pod in sorted(pods.items())
            if pod.phase is PodPhase.RUNNING and not pod.deleting
        ]
        return DiscoverHosts(hosts=tuple(self.fqdn(h) for h in hosts))


def implementation(job: MPIJob) -> MPIImplementation:
    chosen = job.spec.mpi_implementation
    return MPIImplementation(chosen.value) if chosen is not None else MPIImplementation.OPEN_MPI


def _workers(job: MPIJob) -> int:
    spec = job.replica_specs.get(MPIReplicaType.WORKER)
    return (spec.replicas or 0) if spec is not None else 0


def config_map(job: MPIJob, hosts: JobHosts, observed: Observed) -> Obj:
    """`<job>-config`: the hostfile and discover_hosts.sh, mounted at /etc/mpi on the launcher."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": config_map_name(job), "labels": {"app": job.name}},
        "data": {
            HOSTFILE_KEY: hosts.hostfile().render(),
            DISCOVER_HOSTS_KEY: hosts.discover_hosts(observed).render(),
        },
    }


def config_map_fits(job: MPIJob, hosts: JobHosts) -> list[FieldError]:
    """An error when `<job>-config` could exceed a ConfigMap's 1 MiB: with every worker Running, its
    discover_hosts.sh lists as many hosts as the hostfile."""
    every = DiscoverHosts(hosts=tuple(entry.host for entry in hosts.hostfile().entries))
    size = len(hosts.hostfile().render().encode()) + len(every.render().encode())
    if size <= CONFIGMAP_MAX_BYTES:
        return []
    return [
        FieldError(
            f"spec.mpiReplicaSpecs.{MPIReplicaType.WORKER}.replicas",
            f"is {_workers(job)}: the hostfile and discover_hosts.sh would take {size} bytes, more than "
            f"the {CONFIGMAP_MAX_BYTES} bytes (1 MiB) a ConfigMap may hold",
            "run fewer, larger workers (raise slotsPerWorker), or shorten the job and namespace names "
            "that every host name repeats",
        )
    ]


def ssh_secret(job: MPIJob) -> Obj:
    """`<job>-ssh` with a freshly generated key pair: create it once and never update it."""
    key = generate_ssh_key()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": secret_name(job)},
        "type": "kubernetes.io/ssh-auth",
        "immutable": True,
        "data": {SSH_PRIVATE_KEY: _b64(key.private_pem), SSH_PUBLIC_KEY: _b64(key.public_openssh)},
    }


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("ascii")).decode("ascii")
