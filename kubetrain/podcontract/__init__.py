"""The pod contract: the one definition of what a job's pod is given and what it reports back.

A replica's pod is given its environment (env var names, TF_CONFIG, the torch, JAX, XGBoost and Paddle
env, MPI hostfiles), and it may send a progress report. The operator's controllers render the first and
read the second; the code in the pod (kubetrain.runtimes.torch/tensorflow/mpi and user code) and the local
runner read the first and write the second. Every floor of the package uses it, so it is the bottom one:
it imports nothing of kubetrain but itself, and nothing outside the standard library (import-linter
contracts enforce both), so that a training image needs none of the operator's dependencies to parse its
own environment. `kubetrain.runtimes.contract` is its old name, kept for users' scripts.

- `names`: every env var name and file path (TF_CONFIG, MASTER_*, PET_*, OMPI_MCA_*, I_MPI_*, HYDRA_*, ...).
- `TFConfig`: the TF_CONFIG document, render/parse, and the strategy it implies.
- `TorchEnv` (operator side) and `TorchProcess` (process side) for PyTorchJob.
- `JaxEnv` (both sides) for JAXJob.
- `XGBoostEnv` (both sides) for XGBoostJob.
- `PaddleEnv` (both sides) and `PaddleRole` for PaddleJob.
- `Hostfile`, `DiscoverHosts`, `launcher_env`, `worker_env`, `MPIProcess` for MPIJob.
- `progress`: the training-progress report a pod sends, its bounds and the env that says where to send it.
- `ContractError`: a missing or malformed value, naming the variable and the fix.
"""

from __future__ import annotations

from kubetrain.podcontract import names
from kubetrain.podcontract.errors import ContractError
from kubetrain.podcontract.jaxenv import JaxEnv
from kubetrain.podcontract.mpi import (
    DiscoverHosts,
    Hostfile,
    HostfileEntry,
    MPIImplementation,
    MPIProcess,
    MPIRole,
    launcher_env,
    worker_env,
)
from kubetrain.podcontract.paddleenv import PaddleEnv, PaddleRole
from kubetrain.podcontract.tfconfig import StrategyKind, TFConfig, TFReplicaType, TFTask
from kubetrain.podcontract.torchenv import MasterEnv, RendezvousEnv, TorchEnv, TorchProcess
from kubetrain.podcontract.xgbenv import XGBoostEnv

__all__ = [
    "ContractError",
    "DiscoverHosts",
    "Hostfile",
    "HostfileEntry",
    "JaxEnv",
    "MPIImplementation",
    "MPIProcess",
    "MPIRole",
    "MasterEnv",
    "PaddleEnv",
    "PaddleRole",
    "RendezvousEnv",
    "StrategyKind",
    "TFConfig",
    "TFReplicaType",
    "TFTask",
    "TorchEnv",
    "TorchProcess",
    "XGBoostEnv",
    "launcher_env",
    "names",
    "worker_env",
]
