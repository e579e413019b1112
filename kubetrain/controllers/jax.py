"""JAXJobController: the JAXJob kind (kubeflow.org/v1) on the JobController template.

What is JAX-specific, and only that:

- **Env** on every container of every pod, rendered by `kubetrain.podcontract.JaxEnv` (the code the
  pods parse it with): `PYTHONUNBUFFERED=1`, `COORDINATOR_ADDRESS` (worker 0's address relative to the
  namespace, which the pod's DNS search path resolves: `<job>-worker-0.<job>` under the job's Service,
  the training-operator's `<job>-worker-0` under per-replica Services), `COORDINATOR_PORT` (the Worker's
  `jaxjob-port`, 6666 by default), `NUM_PROCESSES` (every replica of the job) and `PROCESS_ID` (the
  replica's index). `kubetrain.runtimes.jax` starts `jax.distributed` from them.
- **Who decides**: the workers, all peers; worker 0 (the coordinator) carries `job-role=master`. The job
  succeeds when every worker has, fails when a worker fails for good (restartPolicy Never, or ExitCode
  with a permanent exit code), and is Running while a worker runs.

No Service, init container or start order beyond the template's: process 0 serves the coordinator and the
others retry until it answers (`jax.distributed.initialize`'s initialization timeout).
"""

from __future__ import annotations

from kubetrain.api import JAXJOB, JAXJob
from kubetrain.api.jaxjob import JAXReplicaType
from kubetrain.common.job import Observed, ServiceMode, Verdict, replica_name
from kubetrain.common.job.containers import replica_port, set_pod_env
from kubetrain.common.job.decider import decider_verdict, is_decider_pod
from kubetrain.common.job.services import replica_address
from kubetrain.common.kube.resources import Obj
from kubetrain.controllers.settings import ConfiguredJobController
from kubetrain.podcontract import JaxEnv

__all__ = ["JAXJobController", "jax_env"]

_WORKER = JAXReplicaType.WORKER


class JAXJobController(ConfiguredJobController[JAXJob]):
    """Reconciles JAXJobs; see the module docstring for what is JAX-specific."""

    kind = JAXJOB
    framework = "jax"

    def configure_pod(self, job: JAXJob, rtype: str, index: int, pod: Obj) -> Obj:
        env = jax_env(job, index, self.service_mode_of(job)).render()
        set_pod_env(self.kind, pod, env)
        return pod

    def is_master(self, job: JAXJob, rtype: str, index: int) -> bool:
        return is_decider_pod(self.replica_types(job), self.kind.master_types, _WORKER, rtype, index)

    def verdict(self, job: JAXJob, observed: Observed) -> Verdict:
        return decider_verdict(observed, self.replica_types(job), decider=_WORKER)


def jax_env(job: JAXJob, index: int, mode: ServiceMode) -> JaxEnv:
    """The env of replica `index` (the same for every container of its pod), worker 0 addressed as `mode`
    names it; defaulting and validation have given the job a Worker spec with its `jaxjob-port`."""
    workers = job.replica_specs[_WORKER]
    return JaxEnv(
        coordinator_address=replica_address(job.name, replica_name(job.name, _WORKER, 0), mode),
        coordinator_port=replica_port(JAXJOB, workers) or 0,
        num_processes=sum(spec.replicas or 0 for spec in job.replica_specs.values()),
        process_id=index,
    )
