"""MPIJob: hostfiles per implementation, discover_hosts.sh, the launcher/worker env and the rank env."""

from __future__ import annotations

import pytest

from kubetrain.podcontract import (
    ContractError,
    DiscoverHosts,
    Hostfile,
    HostfileEntry,
    MPIImplementation,
    MPIProcess,
    launcher_env,
    worker_env,
)

ENTRIES = (HostfileEntry("job-worker-0.job.ns.svc", 2), HostfileEntry("job-worker-1.job.ns.svc", 2))


def test_open_mpi_hostfile() -> None:
    hostfile = Hostfile(MPIImplementation.OPEN_MPI, ENTRIES)
    assert hostfile.render() == "job-worker-0.job.ns.svc slots=2\njob-worker-1.job.ns.svc slots=2\n"
    assert hostfile.total_slots == 4


@pytest.mark.parametrize("implementation", [MPIImplementation.INTEL, MPIImplementation.MPICH])
def test_hydra_hostfile(implementation: MPIImplementation) -> None:
    assert (
        Hostfile(implementation, ENTRIES).render() == "job-worker-0.job.ns.svc:2\njob-worker-1.job.ns.svc:2\n"
    )


@pytest.mark.parametrize("implementation", list(MPIImplementation))
def test_hostfile_round_trips(implementation: MPIImplementation) -> None:
    hostfile = Hostfile(implementation, (*ENTRIES, HostfileEntry("10.0.0.7", 1)))
    assert Hostfile.parse(hostfile.render(), implementation) == hostfile


def test_parse_skips_comments_and_defaults_to_one_slot() -> None:
    text = "# workers\n\nw-0 slots=4  # big one\nw-1\n"
    parsed = Hostfile.parse(text, MPIImplementation.OPEN_MPI)
    assert parsed.entries == (HostfileEntry("w-0", 4), HostfileEntry("w-1", 1))
    assert Hostfile.parse("w-0:3\nw-1\n", MPIImplementation.MPICH).entries == (
        HostfileEntry("w-0", 3),
        HostfileEntry("w-1", 1),
    )


@pytest.mark.parametrize(
    ("text", "implementation", "says"),
    [
        ("w-0:2\n", MPIImplementation.OPEN_MPI, "not a host name"),
        ("w-0 slots=2\n", MPIImplementation.MPICH, "has spaces"),
        ("w-0 max_slots=2\n", MPIImplementation.OPEN_MPI, "not 'slots=N'"),
        ("w-0 slots=0\n", MPIImplementation.OPEN_MPI, "less than 1"),
        ("w-0:x\n", MPIImplementation.INTEL, "not an integer"),
        ("bad_host slots=1\n", MPIImplementation.OPEN_MPI, "not a host name"),
    ],
)
def test_malformed_hostfile_names_the_line_and_the_format(
    text: str, implementation: MPIImplementation, says: str
) -> None:
    with pytest.raises(ContractError) as err:
        Hostfile.parse(text, implementation)
    assert err.value.variable == "hostfile line 1"
    assert says in err.value.problem
    assert ("slots=N" if implementation is MPIImplementation.OPEN_MPI else "host:N") in err.value.fix


def test_discover_hosts_script() -> None:
    script = DiscoverHosts(("job-worker-0.job.ns.svc", "job-worker-1.job.ns.svc")).render()
    assert script == "#!/bin/sh\necho job-worker-0.job.ns.svc\necho job-worker-1.job.ns.svc\n"
    assert DiscoverHosts.parse(script) == DiscoverHosts(
        ("job-worker-0.job.ns.svc", "job-worker-1.job.ns.svc")
    )
    with_slots = DiscoverHosts(("w-0", "w-1"), slots=4)
    assert with_slots.render() == "#!/bin/sh\necho w-0:4\necho w-1:4\n"
    assert DiscoverHosts.parse(with_slots.render()) == with_slots
    assert DiscoverHosts.parse("#!/bin/sh\n") == DiscoverHosts(())


@pytest.mark.parametrize(
    "script", ["echo w-0\n", "#!/bin/sh\nls w-0\n", "#!/bin/sh\necho w-0:1\necho w-1:2\n"]
)
def test_malformed_discover_hosts(script: str) -> None:
    with pytest.raises(ContractError, match=r"discover_hosts\.sh"):
        DiscoverHosts.parse(script)


def test_launcher_env_per_implementation() -> None:
    assert launcher_env(MPIImplementation.OPEN_MPI, slots_per_worker=2) == {
        "K_MPI_JOB_ROLE": "launcher",
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
        "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
        "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
        "OMPI_MCA_orte_set_default_slots": "2",
        "NVIDIA_VISIBLE_DEVICES": "",
        "NVIDIA_DRIVER_CAPABILITIES": "",
    }
    assert launcher_env(MPIImplementation.INTEL, slots_per_worker=4, launcher_is_worker=True) == {
        "K_MPI_JOB_ROLE": "launcher",
        "I_MPI_HYDRA_HOST_FILE": "/etc/mpi/hostfile",
        "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS": "-o ConnectionAttempts=10",
        "I_MPI_PERHOST": "4",
    }
    mpich = launcher_env(MPIImplementation.MPICH, slots_per_worker=1, hostfile="/tmp/h")
    assert mpich["HYDRA_HOST_FILE"] == "/tmp/h"
    assert mpich["HYDRA_LAUNCH_EXTRA_ARGS"] == "-o ConnectionAttempts=10"
    assert worker_env() == {"K_MPI_JOB_ROLE": "worker"}


def test_rank_env_of_each_process_manager() -> None:
    ompi = {
        "OMPI_COMM_WORLD_RANK": "3",
        "OMPI_COMM_WORLD_SIZE": "4",
        "OMPI_COMM_WORLD_LOCAL_RANK": "1",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
    }
    assert MPIProcess.from_env(ompi) == MPIProcess(rank=3, size=4, local_rank=1, local_size=2)
    hydra = {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "1"}
    assert MPIProcess.from_env(hydra) == MPIProcess(rank=1, size=2, local_rank=0, local_size=1)
    assert MPIProcess.from_env({"PMI_RANK": "0", "PMI_SIZE": "1"}) == MPIProcess()
    assert MPIProcess.from_env({}) == MPIProcess()


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"OMPI_COMM_WORLD_RANK": "0"}, "OMPI_COMM_WORLD_SIZE"),
        ({"PMI_RANK": "2", "PMI_SIZE": "2"}, "PMI_RANK"),
        ({"PMI_RANK": "-1", "PMI_SIZE": "2"}, "PMI_RANK"),
    ],
)
def test_malformed_rank_env(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ContractError) as err:
        MPIProcess.from_env(env)
    assert err.value.variable == variable
    assert "mpirun" in err.value.fix
