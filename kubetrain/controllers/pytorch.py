"""PyTorchJobController: the PyTorchJob kind (kubeflow.org/v1) on the JobController template.

What is PyTorch-specific, and only that:

- **Env** on every container of every pod, rendered by `kubetrain.podcontract.TorchEnv` (the code the
  pods parse it with): `PYTHONUNBUFFERED=1`; with a Master replica, `MASTER_ADDR`/`PET_MASTER_ADDR`
  (the master's address: `<job>-master-0.<job>` under the job's Service, Kubeflow's `<job>-master-0` under
  per-replica Services), `MASTER_PORT`/`PET_MASTER_PORT` (the Master's `pytorchjob-port`), `WORLD_SIZE`
  (replicas x nprocPerNode; `gpu`/`auto` become the pod's nvidia.com/gpu limit when it has one, else count
  as 1) and `RANK`/`PET_NODE_RANK` (the index, +1 for workers); `PET_NPROC_PER_NODE` (resolved likewise);
  `PET_NNODES` = the replica total, or `min:max` under an elasticPolicy,
  which also brings `PET_RDZV_ENDPOINT` (rdzvHost, else worker 0's address; rdzvPort, else the Worker's
  port), `PET_RDZV_BACKEND` (c10d) and, when set, `PET_RDZV_ID`, `PET_RDZV_CONF`, `PET_MAX_RESTARTS` and
  `PET_STANDALONE`.
- **Startup order**: with a Master, each Worker pod gets an `init-pytorch` init container that waits until
  the master's name resolves (image and number of tries from the operator settings; one try every 2 s).
- **HPA**: an elasticPolicy with `metrics` gets an autoscaling/v2 HorizontalPodAutoscaler named like the
  job, scaling the job's Workers through its scale subresource between min and max replicas. It is deleted
  while the job is suspended; after the job finishes it stays until the job is deleted (owner reference).
- **Who decides**: the Master when the job has one, else the workers (worker 0 carries `job-role=master`).
  The job succeeds when the Master has; without one, when every worker has, or, elastic, when any worker
  has. A pod that fails for good fails the job; Running follows the decider's pods.

Differences from Kubeflow (deliberate):

- The env must read back as rendered (`kubetrain.podcontract`): an rdzvHost with a port, or an
  rdzvConf key or value that the `k=v,k2=v2` form cannot carry, fails the job with
  `PyTorchJobFailedValidation` naming the field. Kubeflow passes them on and torchrun fails in every pod.
- A pod that failed for good under restartPolicy `ExitCode` (exit code 1-127) fails the job. Kubeflow's
  PyTorch status rule calls every non-`Never` failure "Restarting", so such a job stayed Restarting forever
  although its pod was never replaced.
- The init container's command is our own shell loop with the same contract (resolve the master's
  address, up to the configured tries, 2 s apart); there is no init-container template file
  (`--pytorch-init-container-template-file`): image and tries are the settings.
- When the decider succeeds in the same observation in which another replica is seen failed for good, the
  job Succeeded (Kubeflow could set both Succeeded and Failed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubetrain.api import PYTORCHJOB, FieldError, PyTorchJob, ReplicaSpec
from kubetrain.api.pytorchjob import ElasticPolicy, PyTorchReplicaType, RDZVBackend
from kubetrain.common.job import ExtraObject, Observed, ReplicaCounts, ServiceMode, Verdict, replica_name
from kubetrain.common.job.containers import replica_gpus, replica_port, set_pod_env
from kubetrain.common.job.decider import all_succeeded, decider_type, decider_verdict, is_decider_pod
from kubetrain.common.job.services import replica_address
from kubetrain.common.kube.resources import HPAS, Obj
from kubetrain.controllers.settings import ConfiguredJobController
from kubetrain.podcontract import ContractError, MasterEnv, RendezvousEnv, TorchEnv, names

__all__ = ["INIT_CONTAINER_NAME", "PyTorchJobController", "nproc_per_node", "resolved_nproc", "torch_env"]

_MASTER, _WORKER = PyTorchReplicaType.MASTER, PyTorchReplicaType.WORKER
INIT_CONTAINER_NAME = "init-pytorch"


class PyTorchJobController(ConfiguredJobController[PyTorchJob]):
    """Reconciles PyTorchJobs; see the module docstring for what is PyTorch-specific."""

    kind = PYTORCHJOB
    framework = "pytorch"
    extra_resources = (HPAS,)

    def configure_pod(self, job: PyTorchJob, rtype: str, index: int, pod: Obj) -> Obj:
        env = torch_env(job, rtype, index, self.service_mode_of(job)).render()
        set_pod_env(self.kind, pod, env)
        spec = pod["spec"]
        if rtype == _WORKER and _MASTER in job.replica_specs:
            master = self.replica_address(job, _MASTER, 0)
            spec["initContainers"] = [*(spec.get("initContainers") or ()), self._wait_for(master)]
        return pod

    def _wait_for(self, host: str) -> Obj:
        """The init container that holds a worker until `host` resolves."""
        tries = self.settings.pytorch_init_max_tries
        script = (
            f"n=0; until nslookup {host}; do n=$((n+1)); "
            f'if [ "$n" -ge {tries} ]; then echo "{host} did not resolve after {tries} tries"; exit 1; fi; '
            f'echo "waiting for {host} to resolve ($n/{tries})"; sleep 2; done'
        )
        return {
            "name": INIT_CONTAINER_NAME,
            "image": self.settings.pytorch_init_image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["sh", "-c", script],
            "resources": {
                "limits": {"cpu": "100m", "memory": "20Mi"},
                "requests": {"cpu": "50m", "memory": "10Mi"},
            },
        }

    def validate(self, job: PyTorchJob) -> Sequence[FieldError]:
        """The API's rules, plus: the env renders, and reads back as rendered (e.g. no port in rdzvHost)."""
        errors = list(super().validate(job))
        if errors or not job.replica_specs:
            return errors
        error = _env_error(job, self.replica_types(job)[0], self.service_mode_of(job))
        return [] if error is None else [error]

    def is_master(self, job: PyTorchJob, rtype: str, index: int) -> bool:
        return is_decider_pod(self.replica_types(job), self.kind.master_types, _WORKER, rtype, index)

    def verdict(self, job: PyTorchJob, observed: Observed) -> Verdict:
        decider = decider_type(self.replica_types(job), self.kind.master_types, _WORKER)
        elastic = decider == _WORKER and job.spec.elastic_policy is not None
        return decider_verdict(
            observed,
            self.replica_types(job),
            decider=decider,
            done=_any_succeeded if elastic else all_succeeded,
        )

    def extra_objects(self, job: PyTorchJob, observed: Observed) -> Sequence[ExtraObject]:
        elastic = job.spec.elastic_policy
        if elastic is None or not elastic.metrics or job.run_policy.suspend:
            return ()
        return [ExtraObject(HPAS, hpa(job, elastic))]


def torch_env(job: PyTorchJob, rtype: str, index: int, mode: ServiceMode) -> TorchEnv:
    """The env of replica `rtype`/`index` (the same for every container of its pod), its peers addressed
    as `mode` names them."""
    specs, elastic = job.replica_specs, job.spec.elastic_policy
    total = sum(spec.replicas or 0 for spec in specs.values())
    master = None
    if _MASTER in specs:
        world = sum((s.replicas or 0) * _processes(job, t) for t, s in specs.items())
        master = MasterEnv(
            addr=replica_address(job.name, replica_name(job.name, _MASTER, 0), mode),
            port=replica_port(PYTORCHJOB, specs[_MASTER]) or 0,
            world_size=world,
            rank=index + 1 if rtype == _WORKER else index,
        )
    return TorchEnv(
        nproc_per_node=resolved_nproc(job, rtype),
        nnodes=None if elastic else total,
        master=master,
        rendezvous=_rendezvous(job, elastic, mode) if elastic else None,
    )


def _env_error(job: PyTorchJob, rtype: str, mode: ServiceMode) -> FieldError | None:
    """Why the env of `rtype`'s pods would not reach torchrun as the job says, if it would not."""
    try:
        env = torch_env(job, rtype, 0, mode)
        if TorchEnv.parse(env.render()) == env:
            return None
    except ContractError as err:
        field, fix = _ENV_FIELDS.get(err.variable, ("spec", err.fix))
        return FieldError(field, f"gives {err.variable} that torchrun cannot read: {err.problem}", fix)
    field, fix = _ENV_FIELDS[names.PET_RDZV_CONF]
    return FieldError(field, "does not survive PET_RDZV_CONF's key=value,key=value form", fix)


_ENV_FIELDS = {
    names.PET_RDZV_ENDPOINT: (
        "spec.elasticPolicy.rdzvHost",
        "give a host name or address without a port (the port is rdzvPort; write IPv6 as [addr])",
    ),
    names.PET_RDZV_CONF: (
        "spec.elasticPolicy.rdzvConf",
        "use non-empty keys, and keys and values without ',' (and keys without '=')",
    ),
}


def nproc_per_node(job: PyTorchJob) -> str | None:
    """`spec.nprocPerNode`, else the deprecated `elasticPolicy.nProcPerNode`."""
    elastic = job.spec.elastic_policy
    if job.spec.nproc_per_node is not None:
        return job.spec.nproc_per_node
    if elastic is not None and elastic.n_proc_per_node is not None:
        return str(elastic.n_proc_per_node)
    return None


def resolved_nproc(job: PyTorchJob, rtype: str) -> str | None:
    """nprocPerNode for `rtype`'s pods as torchrun would resolve it inside them.

    torchrun's `gpu` and `auto` count the GPUs the process sees, which a device plugin makes exactly the main
    container's `nvidia.com/gpu` limit. So `gpu` (which only torchrun reads) becomes that limit. `auto` is
    also Kubeflow's default for every PyTorchJob, including jobs that run one plain `python` process per
    pod whatever its GPUs: it becomes the limit only when the container runs torchrun, else a pod counts
    as one process, as in Kubeflow. Without a limit both stay as written (torchrun then says there is no
    GPU, or uses the node's CPU count, which only the node knows).
    """
    nproc = nproc_per_node(job)
    spec = job.replica_specs.get(rtype)
    if nproc not in ("gpu", "auto") or spec is None:
        return nproc
    gpus = replica_gpus(PYTORCHJOB, spec)
    if gpus > 0 and (nproc == "gpu" or _runs_torchrun(spec)):
        return str(gpus)
    return nproc


def _runs_torchrun(spec: ReplicaSpec) -> bool:
    """Whether the main container starts torchrun (`torchrun ...`, `python -m torch.distributed.run ...`)."""
    containers = spec.template.spec.containers
    index = PYTORCHJOB.default_container_index(containers)
    if index is None:
        return False
    words = [*(containers[index].command or ()), *(containers[index].args or ())]
    return any(w.rsplit("/", 1)[-1] == "torchrun" or w.startswith("torch.distributed.run") for w in words)


def _processes(job: PyTorchJob, rtype: str) -> int:
    """Processes per pod of `rtype` in WORLD_SIZE; an unresolved auto/cpu/gpu counts 1, as in Kubeflow."""
    nproc = resolved_nproc(job, rtype)
    return int(nproc) if nproc and nproc.isdigit() else 1


def _rendezvous(job: PyTorchJob, elastic: ElasticPolicy, mode: ServiceMode) -> RendezvousEnv:
    """Defaulting has set both bounds (validation requires a Worker spec under an elasticPolicy)."""
    workers = job.replica_specs[_WORKER]
    host = elastic.rdzv_host or replica_address(job.name, replica_name(job.name, _WORKER, 0), mode)
    port = elastic.rdzv_port or replica_port(PYTORCHJOB, workers)
    return RendezvousEnv(
        endpoint=f"{host}:{port}",
        min_nodes=elastic.min_replicas or workers.replicas or 0,
        max_nodes=elastic.max_replicas or workers.replicas or 0,
        backend=(elastic.rdzv_backend or RDZVBackend.C10D).value,
        run_id=elastic.rdzv_id,
        conf=tuple((c.key, c.value or "") for c in elastic.rdzv_conf or () if c.key),
        max_restarts=elastic.max_restarts,
        standalone=bool(elastic.standalone),
    )


def hpa(job: PyTorchJob, elastic: ElasticPolicy) -> dict[str, Any]:
    """The HorizontalPodAutoscaler of an elastic job with metrics: it scales the job's scale subresource."""
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": PYTORCHJOB.api_version, "kind": PYTORCHJOB.kind, "name": job.name},
        "maxReplicas": elastic.max_replicas or elastic.min_replicas,
        "metrics": list(elastic.metrics or ()),
    }
    if elastic.min_replicas is not None:
        spec["minReplicas"] = elastic.min_replicas
    return {"apiVersion": HPAS.api_version, "kind": HPAS.kind, "metadata": {"name": job.name}, "spec": spec}


def _any_succeeded(counts: ReplicaCounts) -> bool:
    """Elastic without a Master: the first worker to finish successfully ends the job."""
    return counts.succeeded > 0
