"""MPIJobController: MPIJob (kubeflow.org/v2beta1) on the JobController template, mpi-operator semantics.

A launcher runs `mpirun`/`mpiexec`, which logs into the workers (running sshd) over SSH with the job's own
key and reads the hostfile the operator keeps current. The job's fate is the launcher's. The launcher is a
Pod (`<job>-launcher-0`), not a batch/v1 Job: it stays inside the template's machinery shared by every
kind (restarts, backoffLimit kept across operator restarts, deadline, suspend, TTL, cleanup, gangs) and
is created fresh from the MPIJob after a Kueue resume. docs/mpijob.md has the reasons in full.

Differences from the mpi-operator (deliberate; each explained in docs/mpijob.md): the launcher is a Pod
(Never: its first failure fails the job); backoffLimit defaults to 6 (the batch/v1 default its launcher
Job got) and cleanPodPolicy to Running (as the v2beta1 API documents; the mpi-operator writes None and
leaves workers running); TTL deletes the MPIJob; backoff and deadline failures read `MPIJobFailed`;
under WaitForWorkersReady the PodGroup's minMember leaves the launcher out (mpi-operator#608 deadlock);
a worker failing for good before the launcher exists fails the job; the Service always publishes
not-ready addresses; the DNS search domain uses the configured cluster domain; worker replica indices
are not shifted under runLauncherAsWorker; slotsPerWorker 0 is rejected.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubetrain.api import (
    MPIJOB,
    CleanPodPolicy,
    FieldError,
    LauncherCreationPolicy,
    MPIJob,
    MPIReplicaType,
)
from kubetrain.common.job import ExtraObject, Observed, ServiceMode, Verdict
from kubetrain.common.kube.resources import CONFIGMAPS, SECRETS, Obj
from kubetrain.controllers.mpi import cluster
from kubetrain.controllers.mpi.pods import configure_launcher, configure_worker
from kubetrain.controllers.mpi.verdict import mpi_verdict, workers_ready
from kubetrain.controllers.settings import ConfiguredJobController

__all__ = ["LAUNCHER_BACKOFF_LIMIT", "MPIJobController"]

LAUNCHER = MPIReplicaType.LAUNCHER
WORKER = MPIReplicaType.WORKER
LAUNCHER_BACKOFF_LIMIT = 6
"""backoffLimit of an MPIJob that sets none: the batch/v1 Job default the mpi-operator's launcher gets."""


class MPIJobController(ConfiguredJobController[MPIJob]):
    """The MPIJob operator: a launcher Pod, worker Pods, one headless Service, hostfile and SSH key."""

    kind = MPIJOB
    framework = "mpi"
    extra_resources = (CONFIGMAPS,)
    """The SSH Secret is not among them: the operator creates it blind and never reads Secrets."""
    service_modes = (ServiceMode.JOB,)
    """The job's headless Service `<job>`, as in the mpi-operator, whatever the operator's setting."""

    def default(self, job: MPIJob) -> MPIJob:
        given = job.run_policy
        defaulted = super().default(job)
        update: dict[str, object] = {}
        if given.clean_pod_policy is None:
            update["clean_pod_policy"] = CleanPodPolicy.RUNNING
        if given.backoff_limit is None:
            update["backoff_limit"] = LAUNCHER_BACKOFF_LIMIT
        policy = defaulted.run_policy.model_copy(update=update)
        return defaulted.model_copy(update={"spec": defaulted.spec.model_copy(update={"run_policy": policy})})

    def validate(self, job: MPIJob) -> Sequence[FieldError]:
        errors = list(super().validate(job))  # slotsPerWorker >= 1 is a shared rule (the CRD has it too)
        return errors or cluster.config_map_fits(job, cluster.JobHosts(job, self.settings))

    def is_master(self, job: MPIJob, rtype: str, index: int) -> bool:
        return False  # v2beta1 labels roles `launcher`/`worker` (configure_pod), not `master`

    def configure_pod(self, job: MPIJob, rtype: str, index: int, pod: Obj) -> Obj:
        hosts = cluster.JobHosts(job, self.settings)
        if rtype == LAUNCHER:
            return configure_launcher(pod, hosts)
        return configure_worker(pod, hosts, index)

    def ready_to_create(self, job: MPIJob, rtype: str, observed: Observed) -> bool:
        if (
            rtype != LAUNCHER
            or job.spec.launcher_creation_policy != LauncherCreationPolicy.WAIT_FOR_WORKERS_READY
        ):
            return True
        return workers_ready(observed.counts(WORKER))

    def gang_members(self, job: MPIJob, rtype: str) -> int:
        waits = job.spec.launcher_creation_policy == LauncherCreationPolicy.WAIT_FOR_WORKERS_READY
        return 0 if rtype == LAUNCHER and waits else super().gang_members(job, rtype)

    def restarts_with_gang(self, job: MPIJob, rtype: str) -> bool:
        return rtype != WORKER  # workers run sshd: a restarted launcher's mpirun reaches them again

    def verdict(self, job: MPIJob, observed: Observed) -> Verdict:
        return mpi_verdict(job, observed)

    def extra_objects(self, job: MPIJob, observed: Observed) -> Sequence[ExtraObject]:
        hosts = cluster.JobHosts(job, self.settings)
        wanted = [ExtraObject(CONFIGMAPS, cluster.config_map(job, hosts, observed))]
        # The key is generated only until the ledger records the Secret as created: it is never read.
        if not observed.was_created(SECRETS, cluster.secret_name(job)):
            wanted.append(ExtraObject(SECRETS, cluster.ssh_secret(job), update=False, blind=True))
        return wanted
