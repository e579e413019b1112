"""Which environment variables the operator sets in which containers, so that users are told not to set them.

A user-set TF_CONFIG, RANK or OMPI_MCA_orte_default_hostfile would compete with the value the operator
renders and break the job in a way that is hard to see; validation rejects them up front. The names follow
what the Kubeflow operators inject (TF_CONFIG into the `tensorflow` container; the torch distributed and
torchrun `PET_*` env into every PyTorch container; the `jax.distributed` coordinator env into every JAX
container; the collective's MASTER_*, WORLD_SIZE, RANK and WORKER_* env into every XGBoost container; the
MPI role and per-implementation launcher env into containers[0]). Env vars the operator sets only as a
convenience (PYTHONUNBUFFERED) are not reserved.
"""

from __future__ import annotations

from typing import Any

from kubetrain.api.common import TrainingJob
from kubetrain.api.kinds import KindInfo, kind_info
from kubetrain.api.mpijob import MPIImplementation, MPIJob, MPIReplicaType
from kubetrain.api.pod import Container
from kubetrain.api.pytorchjob import PyTorchJob

__all__ = ["configured_containers", "owned_env_names"]

_ELASTIC_ALWAYS = frozenset({"PET_RDZV_ENDPOINT", "PET_RDZV_BACKEND"})
_ELASTIC_IF_SET = {
    "rdzv_id": "PET_RDZV_ID",
    "rdzv_conf": "PET_RDZV_CONF",
    "standalone": "PET_STANDALONE",
    "max_restarts": "PET_MAX_RESTARTS",
}
_MPI_LAUNCHER: dict[MPIImplementation, frozenset[str]] = {
    MPIImplementation.OPEN_MPI: frozenset(
        {
            "OMPI_MCA_orte_keep_fqdn_hostnames",
            "OMPI_MCA_orte_default_hostfile",
            "OMPI_MCA_plm_rsh_args",
            "OMPI_MCA_orte_set_default_slots",
        }
    ),
    MPIImplementation.INTEL: frozenset(
        {"I_MPI_HYDRA_HOST_FILE", "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", "I_MPI_PERHOST"}
    ),
    MPIImplementation.MPICH: frozenset({"HYDRA_HOST_FILE", "HYDRA_LAUNCH_EXTRA_ARGS"}),
}


def owned_env_names(
    job: TrainingJob[Any], replica_type: str, *, kind: KindInfo | None = None
) -> frozenset[str]:
    """The env var names the operator sets in the configured containers of `replica_type` pods of `job`
    (`kind`: the job's `KindInfo`; None looks it up among the built-in kinds)."""
    names = set((kind or kind_info(job)).owned_env)
    if isinstance(job, PyTorchJob) and job.spec.elastic_policy is not None:
        elastic = job.spec.elastic_policy
        names |= _ELASTIC_ALWAYS
        names |= {env for field, env in _ELASTIC_IF_SET.items() if getattr(elastic, field) is not None}
    if isinstance(job, MPIJob) and replica_type == MPIReplicaType.LAUNCHER:
        names |= _MPI_LAUNCHER[job.spec.mpi_implementation or MPIImplementation.OPEN_MPI]
    return frozenset(names)


def configured_containers(
    job: TrainingJob[Any], containers: list[Container], *, kind: KindInfo | None = None
) -> list[int]:
    """Indexes of the containers given the operator's env: all of them for kinds that configure every
    container (PyTorch, JAX, XGBoost), else the default one."""
    info = kind or kind_info(job)
    if info.env_in_every_container:
        return list(range(len(containers)))
    index = info.default_container_index(containers)
    return [] if index is None else [index]
