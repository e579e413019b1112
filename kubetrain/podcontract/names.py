"""Environment variable names and file paths shared by the operator and the code in the pods.

The names are those the Kubeflow training-operator (TFJob, PyTorchJob, JAXJob, XGBoostJob, PaddleJob) and
mpi-operator (MPIJob v2beta1) inject, so that training code written for Kubeflow runs unchanged under
kubetrain.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "COORDINATOR_ADDRESS",
    "COORDINATOR_PORT",
    "CUSTOM_CLUSTER_DOMAIN",
    "DISCOVER_HOSTS_PATH",
    "GROUP_RANK",
    "HOSTFILE_PATH",
    "HYDRA_HOST_FILE",
    "HYDRA_LAUNCHER",
    "HYDRA_LAUNCHER_EXEC",
    "HYDRA_LAUNCH_EXTRA_ARGS",
    "I_MPI_HYDRA_BOOTSTRAP",
    "I_MPI_HYDRA_BOOTSTRAP_EXEC",
    "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS",
    "I_MPI_HYDRA_HOST_FILE",
    "I_MPI_PERHOST",
    "K_MPI_JOB_ROLE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "MPI_CONFIG_DIR",
    "MPI_LOCALNRANKS",
    "MPI_LOCALRANKID",
    "NUM_PROCESSES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "NVIDIA_VISIBLE_DEVICES",
    "OMPI_ALLOW_RUN_AS_ROOT",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_MCA_ORTE_DEFAULT_HOSTFILE",
    "OMPI_MCA_ORTE_KEEP_FQDN_HOSTNAMES",
    "OMPI_MCA_ORTE_SET_DEFAULT_SLOTS",
    "OMPI_MCA_PLM_RSH_AGENT",
    "OMPI_MCA_PLM_RSH_ARGS",
    "PADDLE_JOB_ID",
    "PADDLE_MASTER",
    "PADDLE_NNODES",
    "PADDLE_SERVER_NUM",
    "PADDLE_TRAINER_NUM",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
    "PET_MAX_RESTARTS",
    "PET_MONITOR_INTERVAL",
    "PET_NNODES",
    "PET_NODE_RANK",
    "PET_NPROC_PER_NODE",
    "PET_RDZV_BACKEND",
    "PET_RDZV_CONF",
    "PET_RDZV_ENDPOINT",
    "PET_RDZV_ID",
    "PET_STANDALONE",
    "PET_START_METHOD",
    "PMIX_RANK",
    "PMI_RANK",
    "PMI_SIZE",
    "POD_IP_DUMMY",
    "PROCESS_ID",
    "PYTHONUNBUFFERED",
    "RANK",
    "SSH_CONNECTION_ATTEMPTS",
    "TF_CONFIG",
    "TF_USE_LEGACY_KERAS",
    "TORCHELASTIC_RUN_ID",
    "WORKER_ADDRS",
    "WORKER_PORT",
    "WORLD_SIZE",
]

# --- TFJob --------------------------------------------------------------------------------------
TF_CONFIG: Final = "TF_CONFIG"
"""JSON cluster spec + own task, set on every replica of a distributed TFJob (container `tensorflow`)."""
TF_USE_LEGACY_KERAS: Final = "TF_USE_LEGACY_KERAS"
"""`1` makes `tf.keras` resolve to tf-keras (Keras 2); Keras 3's model.fit fails under MultiWorkerMirrored."""
CUSTOM_CLUSTER_DOMAIN: Final = "CUSTOM_CLUSTER_DOMAIN"
"""Read by the operator itself: appended to the service names in TF_CONFIG when set."""

# --- PyTorchJob: set by the operator ----------------------------------------------------------
PYTHONUNBUFFERED: Final = "PYTHONUNBUFFERED"
MASTER_ADDR: Final = "MASTER_ADDR"
MASTER_PORT: Final = "MASTER_PORT"
WORLD_SIZE: Final = "WORLD_SIZE"
RANK: Final = "RANK"
PET_MASTER_ADDR: Final = "PET_MASTER_ADDR"
PET_MASTER_PORT: Final = "PET_MASTER_PORT"
PET_NNODES: Final = "PET_NNODES"
PET_NPROC_PER_NODE: Final = "PET_NPROC_PER_NODE"
PET_NODE_RANK: Final = "PET_NODE_RANK"
PET_RDZV_BACKEND: Final = "PET_RDZV_BACKEND"
PET_RDZV_ENDPOINT: Final = "PET_RDZV_ENDPOINT"
PET_RDZV_ID: Final = "PET_RDZV_ID"
PET_RDZV_CONF: Final = "PET_RDZV_CONF"
PET_STANDALONE: Final = "PET_STANDALONE"
PET_MAX_RESTARTS: Final = "PET_MAX_RESTARTS"
PET_MONITOR_INTERVAL: Final = "PET_MONITOR_INTERVAL"
"""Declared by the training-operator but never set; torchrun reads it if a user sets it."""
PET_START_METHOD: Final = "PET_START_METHOD"
"""Declared by the training-operator but never set; torchrun reads it if a user sets it."""

# --- PyTorch: set by torchrun for each worker process it starts --------------------------------
LOCAL_RANK: Final = "LOCAL_RANK"
LOCAL_WORLD_SIZE: Final = "LOCAL_WORLD_SIZE"
GROUP_RANK: Final = "GROUP_RANK"
TORCHELASTIC_RUN_ID: Final = "TORCHELASTIC_RUN_ID"

# --- JAXJob: set by the operator, read by jax.distributed.initialize's caller -------------------
COORDINATOR_ADDRESS: Final = "COORDINATOR_ADDRESS"
"""The coordinator's host, without a port: `<job>-worker-0`, worker 0's Service."""
COORDINATOR_PORT: Final = "COORDINATOR_PORT"
"""Worker 0's `jaxjob-port` (6666 by default), where process 0 serves the coordinator."""
NUM_PROCESSES: Final = "NUM_PROCESSES"
"""Every replica of the job (one JAX process per pod)."""
PROCESS_ID: Final = "PROCESS_ID"
"""The replica's index."""

# --- XGBoostJob: MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and PYTHONUNBUFFERED above, and ------------
WORKER_ADDRS: Final = "WORKER_ADDRS"
"""Comma-separated `<job>-worker-<i>` addresses, one per replica but the master (for LightGBM's machine list);
set only when the job has more than one replica."""
WORKER_PORT: Final = "WORKER_PORT"
"""The Worker's `xgboostjob-port` (9999 by default); set only with WORKER_ADDRS."""

# --- PaddleJob: set by the operator, read by paddle.distributed.launch ---------------------------
PADDLE_MASTER: Final = "PADDLE_MASTER"
"""`host:port` of the launcher's rendezvous (an HTTP key-value store) that the master pod serves."""
PADDLE_NNODES: Final = "PADDLE_NNODES"
"""Every replica of the job (one node, one launcher per pod)."""
PADDLE_JOB_ID: Final = "PADDLE_JOB_ID"
"""The job's name: the launcher's key prefix in the rendezvous store."""
PADDLE_SERVER_NUM: Final = "PADDLE_SERVER_NUM"
"""Parameter-server mode, Master pods: the servers this pod runs (1)."""
PADDLE_TRAINER_NUM: Final = "PADDLE_TRAINER_NUM"
"""Parameter-server mode, Worker pods: the trainers this pod runs (1)."""
POD_IP_DUMMY: Final = "POD_IP_DUMMY"
"""The master pod's own IP (downward API `status.podIP`), which its PADDLE_MASTER refers to."""

# --- MPIJob (v2beta1): set by the operator on the launcher and workers --------------------------
K_MPI_JOB_ROLE: Final = "K_MPI_JOB_ROLE"
"""`launcher` or `worker`."""
MPI_CONFIG_DIR: Final = "/etc/mpi"
HOSTFILE_PATH: Final = "/etc/mpi/hostfile"
DISCOVER_HOSTS_PATH: Final = "/etc/mpi/discover_hosts.sh"
SSH_CONNECTION_ATTEMPTS: Final = "-o ConnectionAttempts=10"
"""The extra ssh arguments every implementation's launcher gets, so that slow-starting workers are retried."""
OMPI_MCA_ORTE_KEEP_FQDN_HOSTNAMES: Final = "OMPI_MCA_orte_keep_fqdn_hostnames"
OMPI_MCA_ORTE_DEFAULT_HOSTFILE: Final = "OMPI_MCA_orte_default_hostfile"
OMPI_MCA_PLM_RSH_ARGS: Final = "OMPI_MCA_plm_rsh_args"
OMPI_MCA_ORTE_SET_DEFAULT_SLOTS: Final = "OMPI_MCA_orte_set_default_slots"
OMPI_MCA_PLM_RSH_AGENT: Final = "OMPI_MCA_plm_rsh_agent"
"""Not set by the v2 operator (it uses ssh); the local runner points it at a fake remote-shell agent."""
OMPI_ALLOW_RUN_AS_ROOT: Final = "OMPI_ALLOW_RUN_AS_ROOT"
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: Final = "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"
I_MPI_HYDRA_HOST_FILE: Final = "I_MPI_HYDRA_HOST_FILE"
I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS: Final = "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS"
I_MPI_PERHOST: Final = "I_MPI_PERHOST"
I_MPI_HYDRA_BOOTSTRAP: Final = "I_MPI_HYDRA_BOOTSTRAP"
I_MPI_HYDRA_BOOTSTRAP_EXEC: Final = "I_MPI_HYDRA_BOOTSTRAP_EXEC"
HYDRA_HOST_FILE: Final = "HYDRA_HOST_FILE"
HYDRA_LAUNCH_EXTRA_ARGS: Final = "HYDRA_LAUNCH_EXTRA_ARGS"
HYDRA_LAUNCHER: Final = "HYDRA_LAUNCHER"
HYDRA_LAUNCHER_EXEC: Final = "HYDRA_LAUNCHER_EXEC"
NVIDIA_VISIBLE_DEVICES: Final = "NVIDIA_VISIBLE_DEVICES"
NVIDIA_DRIVER_CAPABILITIES: Final = "NVIDIA_DRIVER_CAPABILITIES"

# --- MPI: set by mpirun / the process manager for each rank ------------------------------------
OMPI_COMM_WORLD_RANK: Final = "OMPI_COMM_WORLD_RANK"
OMPI_COMM_WORLD_SIZE: Final = "OMPI_COMM_WORLD_SIZE"
OMPI_COMM_WORLD_LOCAL_RANK: Final = "OMPI_COMM_WORLD_LOCAL_RANK"
OMPI_COMM_WORLD_LOCAL_SIZE: Final = "OMPI_COMM_WORLD_LOCAL_SIZE"
PMIX_RANK: Final = "PMIX_RANK"
PMI_RANK: Final = "PMI_RANK"
PMI_SIZE: Final = "PMI_SIZE"
MPI_LOCALRANKID: Final = "MPI_LOCALRANKID"
MPI_LOCALNRANKS: Final = "MPI_LOCALNRANKS"
