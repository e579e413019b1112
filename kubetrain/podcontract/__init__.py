"""The runtime contract: the one definition of the environment a replica's pod receives.

The operator's controllers render it; the code in the pod (kubetrain.runtimes.torch/tensorflow/mpi and
user code) and the local runner read it. Stdlib-only on purpose (an import-linter contract enforces it), so
that a training image needs nothing of the operator's dependencies to parse its own environment.

- `names`: every env var name and file path (TF_CONFIG, MASTER_*, PET_*, OMPI_MCA_*, I_MPI_*, HYDRA_*, ...).
- `TFConfig`: the TF_CONFIG document, render/parse, and the strategy it implies.
- `TorchEnv` (operator side) and `TorchProcess` (process side) for PyTorchJob.
- `JaxEnv` (both sides) for JAXJob.
- `XGBoostEnv` (both sides) for XGBoostJob.
- `PaddleEnv` (both sides) and `PaddleRole` for PaddleJob.
- `Hostfile`, `DiscoverHosts`, `launcher_env`, `worker_env`, `MPIProcess` for MPIJob.
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
