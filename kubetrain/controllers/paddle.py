"""PaddleJobController: the PaddleJob kind (kubeflow.org/v1) on the JobController template.

What is Paddle-specific, and only that:

- **Mode**: collective when the job has no Master replica type (the Workers train, worker 0 serves the
  launcher's rendezvous); parameter-server when it has one (the Masters are the servers, the Workers the
  trainers, Master 0 serves the rendezvous).
- **Env** on every container of every pod, rendered by `kubetrain.podcontract.PaddleEnv` (the code the
  pods parse it with): `PYTHONUNBUFFERED=1`, `PADDLE_JOB_ID` (the job's name), `PADDLE_NNODES` (every
  replica), `PADDLE_MASTER` (the rendezvous pod's address relative to the namespace and its `master`
  port, 36543 by default: `<job>-worker-0.<job>` or `<job>-master-0.<job>` under the job's Service, the
  training-operator's `<job>-worker-0`/`<job>-master-0` under per-replica Services; on the rendezvous pod
  itself `$(POD_IP_DUMMY):port`, with `POD_IP_DUMMY` from the downward API `status.podIP`) and, in
  parameter-server mode, `PADDLE_SERVER_NUM=1` on Masters or `PADDLE_TRAINER_NUM=1` on Workers.
  `python -m paddle.distributed.launch` reads them.
- **Who decides**: the Masters when the job has them (every Master pod carries `job-role=master`, as in
  Kubeflow), else the Workers (no pod carries it). The job succeeds when every pod of the decider has,
  fails when any pod fails for good (restartPolicy Never, or ExitCode with a permanent exit code), and is
  Running while a pod of the decider runs.

No init container or start order beyond the template's: `paddle.distributed.launch` on the other pods
waits until the rendezvous answers.

Differences from Kubeflow (deliberate; docs/differences.md has the rest): a `master` port outside 1..65535
fails the job with `PaddleJobFailedValidation` naming the port (a rule of `kubetrain.api.validate` for
every kind's port; Kubeflow renders it into PADDLE_MASTER, and the pods are refused or the launchers cannot
parse it).
"""

from __future__ import annotations

from kubetrain.api import PADDLEJOB, PaddleJob
from kubetrain.api.paddlejob import PaddleReplicaType
from kubetrain.common.job import Observed, ServiceMode, Verdict, replica_name
from kubetrain.common.job.containers import replica_port, set_pod_env
from kubetrain.common.job.decider import decider_verdict
from kubetrain.common.job.services import replica_address
from kubetrain.common.kube.resources import Obj
from kubetrain.controllers.settings import ConfiguredJobController
from kubetrain.podcontract import PaddleEnv, PaddleRole

__all__ = ["PaddleJobController", "paddle_env"]

_MASTER, _WORKER = PaddleReplicaType.MASTER, PaddleReplicaType.WORKER


class PaddleJobController(ConfiguredJobController[PaddleJob]):
    """Reconciles PaddleJobs; see the module docstring for what is Paddle-specific."""

    kind = PADDLEJOB
    framework = "paddle"

    def configure_pod(self, job: PaddleJob, rtype: str, index: int, pod: Obj) -> Obj:
        env = paddle_env(job, rtype, index, self.service_mode_of(job)).render()
        set_pod_env(self.kind, pod, env)
        return pod

    def is_master(self, job: PaddleJob, rtype: str, index: int) -> bool:
        return rtype == _MASTER

    def verdict(self, job: PaddleJob, observed: Observed) -> Verdict:
        decider = _MASTER if _MASTER in job.replica_specs else _WORKER
        return decider_verdict(observed, self.replica_types(job), decider=decider)


def paddle_env(job: PaddleJob, rtype: str, index: int, mode: ServiceMode) -> PaddleEnv:
    """The env of replica `rtype`/`index` (the same for every container of its pod), the rendezvous pod
    addressed as `mode` names it; defaulting has given each replica spec its `master` port."""
    specs = job.replica_specs
    server = _MASTER if _MASTER in specs else _WORKER
    role = None
    if server == _MASTER:
        role = PaddleRole.SERVER if rtype == _MASTER else PaddleRole.TRAINER
    host = None  # the rendezvous pod serves at its own IP
    if rtype != server or index != 0:
        host = replica_address(job.name, replica_name(job.name, server, 0), mode)
    return PaddleEnv(
        job_id=job.name,
        nnodes=sum(spec.replicas or 0 for spec in specs.values()),
        master_host=host,
        master_port=replica_port(PADDLEJOB, specs[server]) or 0,
        role=role,
    )
