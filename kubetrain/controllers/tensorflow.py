"""TFJobController: the TFJob kind (kubeflow.org/v1) on the JobController template.

What is TensorFlow-specific, and only that:

- **TF_CONFIG** on the `tensorflow` container (validation insists on one; defaulting so names a lone
  container) of every pod of a distributed job (more than one replica in total; a single-replica job gets
  none): the cluster lists every replica type present (`ps`, `worker`, `chief`, `master`, `evaluator`)
  as `<job>-<type>-<i>.<job>.<namespace>.svc[.<cluster domain>]:<port>` (under per-replica Services,
  Kubeflow's `<job>-<type>-<i>.<namespace>.svc[...]:<port>`),
  the port being the type's `tfjob-port` (2222 by default); the task is the pod's own type and index;
  `environment` is `cloud`. Under `enableDynamicWorker` it is Kubeflow's sparse form instead (a ps sees
  itself, a worker sees every ps and itself). `kubetrain.podcontract.TFConfig` renders the document:
  the same code the pods parse it with.
- **Who decides**: a Chief (or its older name, Master) when the job has one, else the workers. The decider's
  first pod carries `job-role=master`.
- **Verdict**: with a chief, the job succeeds when the chief has; without one, when worker 0 has succeeded
  (successPolicy `""`) or every worker has (`AllWorkers`). Evaluators never count towards success and
  parameter servers never complete (they are cleaned up by cleanPodPolicy). A pod of any type that fails for
  good fails the job, except workers under `enableDynamicWorker`. Running follows the decider's pods.

Differences from Kubeflow (deliberate):

- The cluster domain comes from the operator's settings (`--cluster-domain`), not from the operator pod's
  `CUSTOM_CLUSTER_DOMAIN` environment variable.
- When the decider succeeds in the same observation in which another replica is seen failed for good, the
  job Succeeded (Kubeflow could set both Succeeded and Failed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kubetrain.api import TFJOB, TFJob
from kubetrain.api.tfjob import SuccessPolicy, TFReplicaType
from kubetrain.common.job import Observed, PodPhase, ReplicaCounts, Verdict
from kubetrain.common.job.containers import replica_port, set_pod_env
from kubetrain.common.job.decider import all_succeeded, decider_type, decider_verdict, is_decider_pod
from kubetrain.common.kube.resources import Obj
from kubetrain.controllers.settings import ConfiguredJobController
from kubetrain.podcontract import TFConfig, TFTask
from kubetrain.podcontract.names import TF_CONFIG

__all__ = ["HostOf", "TFJobController", "is_distributed", "tf_cluster", "tf_config"]

_WORKER = TFReplicaType.WORKER

HostOf = Callable[[str, int], str]
"""Maps a replica (type, index) to the DNS name pods reach it by."""


class TFJobController(ConfiguredJobController[TFJob]):
    """Reconciles TFJobs; see the module docstring for what is TensorFlow-specific."""

    kind = TFJOB
    framework = "tensorflow"
    podset_order = ("Chief", "Master", "PS", "Worker", "Evaluator")  # Kueue's TFJob integration's order
    _last_cluster: tuple[TFJob, Mapping[str, tuple[str, ...]]] | None = None

    def configure_pod(self, job: TFJob, rtype: str, index: int, pod: Obj) -> Obj:
        if is_distributed(job):
            set_pod_env(self.kind, pod, {TF_CONFIG: self.tf_config(job, rtype, index)})
        return pod

    def tf_config(self, job: TFJob, rtype: str, index: int) -> str:
        """The TF_CONFIG value of replica `rtype`/`index`."""
        return tf_config(self._cluster(job), rtype, index, sparse=bool(job.spec.enable_dynamic_worker))

    def _cluster(self, job: TFJob) -> Mapping[str, tuple[str, ...]]:
        # The cluster spec lists every replica: computed once per job object (one reconcile renders all
        # its pods from the same object), not once per pod, which would cost replicas squared.
        cached = self._last_cluster
        if cached is None or cached[0] is not job:
            cluster = tf_cluster(job, lambda rtype, index: self.replica_host(job, rtype, index))
            cached = self._last_cluster = (job, cluster)
        return cached[1]

    def is_master(self, job: TFJob, rtype: str, index: int) -> bool:
        return is_decider_pod(self.replica_types(job), self.kind.master_types, _WORKER, rtype, index)

    def restarts_with_gang(self, job: TFJob, rtype: str) -> bool:
        return rtype != TFReplicaType.EVALUATOR  # it only reads checkpoints: no collective breaks for it

    def verdict(self, job: TFJob, observed: Observed) -> Verdict:
        decider = decider_type(self.replica_types(job), self.kind.master_types, _WORKER)
        all_workers = job.spec.success_policy == SuccessPolicy.ALL_WORKERS
        return decider_verdict(
            observed,
            self.replica_types(job),
            decider=decider,
            done=all_succeeded if all_workers or decider != _WORKER else _first_or_all_succeeded,
            tolerated={_WORKER} if job.spec.enable_dynamic_worker else set(),
        )


def is_distributed(job: TFJob) -> bool:
    """Kubeflow's rule: a job of exactly one replica in total runs without TF_CONFIG."""
    return sum(spec.replicas or 0 for spec in job.replica_specs.values()) != 1


def tf_cluster(job: TFJob, host: HostOf) -> dict[str, tuple[str, ...]]:
    """Every replica's `host:port`, by lower-case replica type; `host` maps a replica to its DNS name."""
    cluster = {}
    for rtype, spec in job.replica_specs.items():
        port = replica_port(TFJOB, spec)
        cluster[rtype.lower()] = tuple(f"{host(rtype, i)}:{port}" for i in range(spec.replicas or 0))
    return cluster


def tf_config(cluster: Mapping[str, tuple[str, ...]], rtype: str, index: int, *, sparse: bool = False) -> str:
    """The TF_CONFIG of one replica of `cluster`: the full document, or the dynamic-worker sparse one."""
    config = TFConfig(cluster=cluster, task=TFTask(type=rtype.lower(), index=index))
    return config.render_sparse() if sparse else config.render()


def _first_or_all_succeeded(counts: ReplicaCounts) -> bool:
    """Worker 0 exited 0 (successPolicy ""), or every worker succeeded."""
    first = counts.pod(0)
    worker0 = first is not None and first.phase is PodPhase.SUCCEEDED and first.exit_code in (None, 0)
    return worker0 or counts.all_succeeded
