"""`kubetrain.common.run`'s flags: what an operator of one's own kinds accepts, and how a bad one is named."""

from __future__ import annotations

import pytest

from kubetrain.common.cmdline import config_from_args, operator_parser, parse_address
from kubetrain.common.operator import Operator, OperatorConfig


def _config(*argv: str) -> OperatorConfig:
    return config_from_args(operator_parser().parse_args(list(argv)), lease_name="sleepjob-controller")


def test_defaults_watch_everything_probe_on_8081_and_elect_no_leader() -> None:
    config = _config()
    assert config == _config("--health-probe-bind-address", ":8081", "--metrics-bind-address", "0")
    assert (config.namespaces, config.leader_election, config.kubeconfig) == (None, None, None)
    assert config.health_address == ("", 8081)


def test_flags_reach_the_config() -> None:
    config = _config(
        "--namespace=a", "--namespace=b", "--leader-elect", "--leader-election-namespace=ops",
        "--health-probe-bind-address=127.0.0.1:0", "--metrics-bind-address=[::1]:9090", "--workers=4",
    )  # fmt: skip
    assert config.namespaces == ("a", "b")
    election = config.leader_election
    assert election is not None
    assert (election.namespace, election.name) == ("ops", "sleepjob-controller")
    assert config.health_address == ("127.0.0.1", 0)
    assert config.metrics_address == ("::1", 9090)
    assert config.workers == 4


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("8081", r"--x='8081': write \[HOST\]:PORT"),
        ("host:80", r"--x='host:80': the host must be an IP address"),
        (":99999", r"write \[HOST\]:PORT"),
    ],
)
def test_a_bad_address_names_the_flag_and_the_fix(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_address("--x", text)


def test_leader_election_outside_a_cluster_needs_a_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    with pytest.raises(ValueError, match="--leader-election-namespace is needed"):
        _config("--leader-elect")


def test_an_operator_needs_a_controller() -> None:
    with pytest.raises(ValueError, match="at least one JobController"):
        Operator([])
