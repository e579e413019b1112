"""`kubetrain.common.run`'s flags: what an operator of one's own kinds accepts, and how a bad one is named."""

from __future__ import annotations

import pytest

from kubetrain.common.cmdline import config_from_args, operator_parser, parse_address
from kubetrain.common.gangrestart import GangRestartMode
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


def test_gang_restarts_decide_by_the_nodes_unless_told() -> None:
    assert _config().gang_restart is GangRestartMode.AUTO
    assert _config("--gang-restart=in-place").gang_restart is GangRestartMode.IN_PLACE
    assert _config("--gang-restart", "recreate").gang_restart is GangRestartMode.RECREATE
    with pytest.raises(SystemExit):
        _config("--gang-restart=restart")


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


def test_the_go_style_spellings_any_operator_takes() -> None:
    """The same declarations as `kubetrain operator`'s: booleans as --flag=false, levels in any case,
    namespaces comma-separated."""
    config = _config("--leader-elect=false", "--metrics-secure=false", "--namespace=a,b", "--log-level=DEBUG")
    assert (config.leader_election, config.metrics_secure, config.namespaces) == (None, False, ("a", "b"))
    assert operator_parser().parse_args(["--log-level=DEBUG"]).log_level == "debug"


def test_the_lease_timings_reach_the_election(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "ops")
    config = _config(
        "--leader-elect", "--leader-election-lease-duration=30", "--leader-election-renew-deadline=20"
    )
    assert config.leader_election is not None
    assert (config.leader_election.lease_duration, config.leader_election.renew_deadline) == (30, 20)
    with pytest.raises(ValueError, match="--leader-election-retry-period/-renew-deadline/-lease-duration"):
        _config("--leader-elect", "--leader-election-renew-deadline=20")


def test_kubetrain_operator_is_built_on_the_same_flags() -> None:
    """Every flag of the library is `kubetrain operator`'s too, with its own defaults where they differ."""
    from kubetrain.cli.operator import build_operator_parser  # noqa: PLC0415

    ours, library = build_operator_parser(), operator_parser()
    for action in library._actions[1:]:  # after -h
        theirs = next(a for a in ours._actions if a.option_strings == action.option_strings)
        assert (type(theirs), theirs.dest, theirs.metavar) == (type(action), action.dest, action.metavar)
    args = ours.parse_args([])
    assert (args.leader_elect, args.workers, args.log_format, args.metrics_bind_address) == (
        True,
        5,
        "json",
        ":8080",
    )
    assert operator_parser().parse_args([]).leader_election_id is None
