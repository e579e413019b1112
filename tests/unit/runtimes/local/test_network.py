"""The local network: replica addresses become 127.0.0.1 with a port per (replica, port), consistently for
every replica, so that the env the operator renders (read back with the contract's parsers) still connects."""

from __future__ import annotations

import itertools

import pytest

from kubetrain.podcontract import MasterEnv, RendezvousEnv, TFConfig, TFTask, TorchEnv
from kubetrain.runtimes.local.network import Hosts, Network, ReplicaNames

HOSTS = Hosts("ns", frozenset({"job-worker-0", "job-worker-1", "job-ps-0", "job-master-0", "job-launcher"}))


def network() -> Network:
    counter = itertools.count(30001)
    return Network(HOSTS, lambda: next(counter))


@pytest.mark.parametrize(
    "host",
    [
        "job-worker-0",
        "job-worker-0.ns",
        "job-worker-0.ns.svc",
        "job-worker-0.ns.svc.cluster.local",
        "job-worker-0.ns.svc.corp.example.",
        "job-worker-0.job.ns.svc",  # MPI: <hostname>.<subdomain>.<ns>.svc
        "job-worker-0.job.ns.svc.cluster.local",
        "JOB-WORKER-0.NS.SVC",
    ],
)
def test_every_dns_form_of_a_replica_designates_it(host: str) -> None:
    assert HOSTS.replica_of(host) == "job-worker-0"


@pytest.mark.parametrize(
    "host", ["job-worker-0.other-ns.svc", "job-worker-9.ns.svc", "job-worker-0.ns.cluster", "pypi.org", "job"]
)
def test_other_names_are_left_alone(host: str) -> None:
    assert HOSTS.replica_of(host) is None


def test_under_the_jobs_service_the_short_pod_and_subdomain_form_designates_a_replica() -> None:
    hosts = Hosts("ns", HOSTS.replicas, subdomain="job")
    assert hosts.replica_of("job-master-0.job") == "job-master-0"  # MASTER_ADDR under ServiceMode.JOB
    assert hosts.replica_of("job-worker-0.job.ns.svc") == "job-worker-0"
    assert hosts.replica_of("job-master-0.other") is None
    assert HOSTS.replica_of("job-master-0.job") is None, "only the pods' own subdomain"


def test_a_pods_own_host_name_designates_it_once_declared() -> None:
    net = network()
    assert net.hosts.replica_of("job-launcher-x.job.ns.svc") is None
    net.declare("job-launcher-x", [], hostname="job-launch")
    assert net.hosts.replica_of("job-launch.job.ns.svc") == "job-launcher-x"
    assert (
        net.rewrite_text("job-launch.job.ns.svc:7000", own="w")
        == f"127.0.0.1:{net.local_port('job-launcher-x', 7000)}"
    )


def tf_cluster() -> dict[str, tuple[str, ...]]:
    return {
        "worker": ("job-worker-0.ns.svc:2222", "job-worker-1.ns.svc:2222"),
        "ps": ("job-ps-0.ns.svc:2222",),
    }


def test_tf_config_of_every_replica_agrees_on_distinct_local_addresses() -> None:
    net = network()
    tasks = [TFTask("worker", 0), TFTask("worker", 1), TFTask("ps", 0)]
    own = {
        TFTask("worker", 0): "job-worker-0",
        TFTask("worker", 1): "job-worker-1",
        TFTask("ps", 0): "job-ps-0",
    }
    seen = []
    for task in tasks:
        env = {"TF_CONFIG": TFConfig(cluster=tf_cluster(), task=task).render()}
        config = TFConfig.parse(net.rewrite_env(env, own=own[task])["TF_CONFIG"])
        assert config.task == task
        seen.append(dict(config.cluster))
    assert seen[0] == seen[1] == seen[2], "replicas must see the same cluster"
    addresses = [a for group in seen[0].values() for a in group]
    assert all(a.startswith("127.0.0.1:") for a in addresses)
    assert len(set(addresses)) == 3, f"two replicas share a local port: {addresses}"


def torch_env(rank: int, *, master_addr: str = "job-master-0") -> dict[str, str]:
    master = MasterEnv(addr=master_addr, port=23456, world_size=3, rank=rank)
    return TorchEnv(nproc_per_node="1", nnodes=3, master=master).render()


def test_master_address_and_port_point_every_replica_at_the_masters_local_port() -> None:
    net = network()
    master = net.rewrite_env(torch_env(0), own="job-master-0")
    worker = net.rewrite_env(torch_env(1), own="job-worker-0")
    parsed = [TorchEnv.parse(env).master for env in (master, worker)]
    assert parsed[0] is not None and parsed[1] is not None
    assert parsed[0].addr == parsed[1].addr == "127.0.0.1"
    assert parsed[0].port == parsed[1].port == net.local_port("job-master-0", 23456)
    assert worker["PET_MASTER_ADDR"] == "127.0.0.1"
    assert worker["PET_MASTER_PORT"] == worker["MASTER_PORT"]
    assert (worker["WORLD_SIZE"], worker["RANK"]) == ("3", "1")


def test_a_master_told_to_use_localhost_listens_where_the_workers_connect() -> None:
    net = network()
    worker = net.rewrite_env(torch_env(1), own="job-worker-0")
    master = net.rewrite_env(torch_env(0, master_addr="localhost"), own="job-master-0")
    assert master["MASTER_ADDR"] == "localhost"
    assert master["MASTER_PORT"] == worker["MASTER_PORT"]


def test_rendezvous_endpoint_is_the_same_local_address_for_every_node() -> None:
    net = network()
    rdzv = RendezvousEnv(endpoint="job-worker-0:29400", min_nodes=1, max_nodes=2)
    env = TorchEnv(nproc_per_node="2", rendezvous=rdzv).render()
    endpoints = {
        net.rewrite_env(env, own=own)["PET_RDZV_ENDPOINT"] for own in ("job-worker-0", "job-worker-1")
    }
    assert endpoints == {f"127.0.0.1:{net.local_port('job-worker-0', 29400)}"}


def test_same_port_of_different_replicas_gets_different_local_ports_and_a_pair_keeps_its_port() -> None:
    net = network()
    a, b = net.local_port("job-worker-0", 2222), net.local_port("job-worker-1", 2222)
    assert a != b
    assert net.local_port("job-worker-0", 2222) == a
    assert net.table == {("job-worker-0", 2222): a, ("job-worker-1", 2222): b}


def test_arguments_are_rewritten_like_env_values_and_bare_host_names_too() -> None:
    net = network()
    args = [
        "--master=job-master-0",
        "job-worker-1.ns.svc",
        "--peers",
        "job-worker-0:2222,job-worker-1:2222",
        "-x",
    ]
    out = net.rewrite_args(args, own="job-worker-0")
    w0, w1 = net.local_port("job-worker-0", 2222), net.local_port("job-worker-1", 2222)
    assert out == ["--master=127.0.0.1", "127.0.0.1", "--peers", f"127.0.0.1:{w0},127.0.0.1:{w1}", "-x"]


def test_self_addresses_are_rewritten_only_for_the_pods_declared_ports() -> None:
    net = network()
    net.declare("job-worker-0", [2222])
    text = "listen 0.0.0.0:2222 and localhost:2222, not localhost:6379"
    out = net.rewrite_text(text, own="job-worker-0")
    port = net.local_port("job-worker-0", 2222)
    assert out == f"listen 0.0.0.0:{port} and localhost:{port}, not localhost:6379"


@pytest.mark.parametrize(
    "value",
    ["https://pypi.org:443/simple", "12:30", "job-worker-0-extra:2222", "job:2222", "x=job-worker-0:99999"],
)
def test_values_that_do_not_address_a_replica_are_unchanged(value: str) -> None:
    assert network().rewrite_env({"V": value}, own="job-worker-0") == {"V": value}


def test_replica_names_answer_without_listing_two_billion_replicas() -> None:
    names = ReplicaNames("job", {"worker": 2_147_483_647, "ps": 1})
    assert "job-worker-2147483646" in names and "job-ps-0" in names
    assert "job-worker-2147483647" not in names and "job-ps-1" not in names
    assert "job-worker-01" not in names and "job-worker-x" not in names and "other-worker-0" not in names
