"""The contract's public surface and its promise to stay stdlib-only (pods import it without our deps)."""

from __future__ import annotations

import subprocess
import sys

import kubetrain.podcontract as contract
from kubetrain.podcontract import progress


def test_public_api_is_pinned() -> None:
    assert sorted(contract.__all__) == [
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
    for name in contract.__all__:
        assert getattr(contract, name) is not None


def test_env_var_names_are_the_kubeflow_ones() -> None:
    n = contract.names
    assert (n.TF_CONFIG, n.MASTER_ADDR, n.PET_NNODES, n.PET_RDZV_ENDPOINT, n.K_MPI_JOB_ROLE) == (
        "TF_CONFIG",
        "MASTER_ADDR",
        "PET_NNODES",
        "PET_RDZV_ENDPOINT",
        "K_MPI_JOB_ROLE",
    )
    assert n.OMPI_MCA_ORTE_DEFAULT_HOSTFILE == "OMPI_MCA_orte_default_hostfile"
    assert (n.HOSTFILE_PATH, n.DISCOVER_HOSTS_PATH) == ("/etc/mpi/hostfile", "/etc/mpi/discover_hosts.sh")
    assert (progress.URL_ENV, progress.CA_CERT_ENV, progress.TOKEN_ENV) == (
        "KUBEFLOW_TRAINER_SERVER_URL",
        "KUBEFLOW_TRAINER_SERVER_CA_CERT",
        "KUBEFLOW_TRAINER_SERVER_TOKEN",
    )
    for name in n.__all__:
        assert isinstance(getattr(n, name), str)


def test_importing_the_contract_and_the_pod_helpers_pulls_no_third_party_module() -> None:
    # a fresh interpreter: which top-level modules do the contract and the pod helpers import?
    code = (
        "import sys; before = set(sys.modules); "
        "import kubetrain.podcontract, kubetrain.runtimes.torch, kubetrain.runtimes.tensorflow, "
        "kubetrain.runtimes.mpi, kubetrain.runtimes.progress, kubetrain.runtimes.progress.callbacks; "
        "print(sorted({m.split('.')[0] for m in set(sys.modules) - before}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    imported = set(eval(out))
    third_party = imported - set(sys.stdlib_module_names) - {"kubetrain"}
    assert third_party == set(), f"the contract must stay stdlib-only; it imported {third_party}"


def test_the_old_name_still_imports_the_same_contract() -> None:
    # users' training scripts import kubetrain.runtimes.contract (README named it); one definition behind both
    import kubetrain.runtimes.contract as old_name  # noqa: PLC0415

    assert old_name.__all__ == contract.__all__
    assert all(getattr(old_name, name) is getattr(contract, name) for name in contract.__all__)
