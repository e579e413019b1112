"""XGBoostJobController: the XGBoostJob kind (kubeflow.org/v1) on the JobController template.

What is XGBoost-specific, and only that:

- **Env** on every container of every pod, rendered by `kubetrain.podcontract.XGBoostEnv` (the code the
  pods parse it with): `PYTHONUNBUFFERED=1`, `MASTER_ADDR` (the master's address: `<job>-master-0.<job>`
  under the job's Service, Kubeflow's `<job>-master-0` under per-replica Services), `MASTER_PORT` (the
  Master's `xgboostjob-port`, 9999 by default), `WORLD_SIZE` (every replica of the job), `RANK` (the master
  0, a worker its index + 1); with more than one replica, for LightGBM, `WORKER_PORT` (the Worker's
  `xgboostjob-port`) and `WORKER_ADDRS` (the addresses of workers 0 to WORLD_SIZE - 2, comma-separated,
  named as MASTER_ADDR is). `kubetrain.runtimes.xgboost` starts the collective's tracker on the master and
  joins every process to it.
- **Who decides**: the Master (required, one replica; it carries `job-role=master`). The job succeeds when
  the Master has, fails when a replica of either type fails for good (restartPolicy Never, the default, or
  ExitCode with a permanent exit code), and is Running while the Master runs.

No Service, init container or start order beyond the template's: the master starts the tracker and the
workers retry their connection to it until it answers (the collective's `dmlc_retry`).

Differences from Kubeflow (deliberate): a pod that failed for good under restartPolicy `ExitCode` fails
the job; Kubeflow's XGBoost status rule calls every `ExitCode` failure "Restarting", so such a job stayed
Restarting although its pod was never replaced. When the Master succeeds in the same observation in which
a worker is seen failed, the job Succeeded (the model exists).
"""

from __future__ import annotations

from kubetrain.api import XGBOOSTJOB, XGBoostJob
from kubetrain.api.xgboostjob import XGBoostReplicaType
from kubetrain.common.job import Observed, ServiceMode, Verdict, replica_name
from kubetrain.common.job.containers import replica_port, set_pod_env
from kubetrain.common.job.decider import decider_verdict, is_decider_pod
from kubetrain.common.job.services import replica_address
from kubetrain.common.kube.resources import Obj
from kubetrain.controllers.settings import ConfiguredJobController
from kubetrain.podcontract import XGBoostEnv

__all__ = ["XGBoostJobController", "xgboost_env"]

_MASTER, _WORKER = XGBoostReplicaType.MASTER, XGBoostReplicaType.WORKER


class XGBoostJobController(ConfiguredJobController[XGBoostJob]):
    """Reconciles XGBoostJobs; see the module docstring for what is XGBoost-specific."""

    kind = XGBOOSTJOB
    framework = "xgboost"

    def configure_pod(self, job: XGBoostJob, rtype: str, index: int, pod: Obj) -> Obj:
        env = xgboost_env(job, rtype, index, self.service_mode_of(job)).render()
        set_pod_env(self.kind, pod, env)
        return pod

    def is_master(self, job: XGBoostJob, rtype: str, index: int) -> bool:
        return is_decider_pod(self.replica_types(job), self.kind.master_types, _WORKER, rtype, index)

    def verdict(self, job: XGBoostJob, observed: Observed) -> Verdict:
        return decider_verdict(observed, self.replica_types(job), decider=_MASTER)


def xgboost_env(job: XGBoostJob, rtype: str, index: int, mode: ServiceMode) -> XGBoostEnv:
    """The env of replica `rtype`/`index` (the same for every container of its pod), its peers addressed
    as `mode` names them; defaulting and validation have given the job a Master with its port."""
    specs = job.replica_specs
    masters = specs[_MASTER]
    total = sum(spec.replicas or 0 for spec in specs.values())
    workers = specs.get(_WORKER) if total > 1 else None

    def address(rtype: str, index: int) -> str:
        return replica_address(job.name, replica_name(job.name, rtype, index), mode)

    return XGBoostEnv(
        master_addr=address(_MASTER, 0),
        master_port=replica_port(XGBOOSTJOB, masters) or 0,
        world_size=total,
        rank=index + (masters.replicas or 0) if rtype == _WORKER else index,
        worker_port=None if workers is None else replica_port(XGBOOSTJOB, workers) or 0,
        worker_addrs=tuple(address(_WORKER, i) for i in range(total - 1)) if workers else (),
    )
