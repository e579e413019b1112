"""Every flag of training-operator v1.9.4 and mpi-operator v0.8.0, as `kubetrain operator` takes it.

Table-driven over `kubetrain.cli.operator.kubeflow.FLAGS`: an alias gives the same options as kubetrain's
own flag with the same value, in both Go spellings (`--name`, `-name`); a conversion gives what its
kubetrain flag would; a no-op changes nothing; a refusal is one line naming the flag and what to use.
That the table lists exactly the Go binaries' flags is checked against their `--help` on the plane
(tests/integration/test_migration.py).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kubetrain.cli import main
from kubetrain.cli.operator import build_operator_parser
from kubetrain.cli.operator.kubeflow import (
    FLAGS,
    MPI_OPERATOR,
    TRAINING_OPERATOR,
    Handling,
    KubeflowFlag,
    markdown_table,
)
from kubetrain.cli.operator.options import OperatorOptions, OptionsError, options_from_args

ENV = {"POD_NAMESPACE": "kubetrain-system"}
KUBECONFIG = Path(__file__)  # any existing file: --kubeconfig only checks that it exists

SAMPLES: dict[str, str] = {
    "--kubeconfig": str(KUBECONFIG),
    "--metrics-bind-address": "127.0.0.1:9090",
    "--health-probe-bind-address": ":9091",
    "--leader-elect": "false",
    "--leader-election-id": "1ca428e5.training-operator.kubeflow.org",
    "--enable": "PyTorchJob",
    "--gang-scheduler-name": "volcano",
    "--namespace": "team-a",
    "--workers": "7",
    "--qps": "20",
    "--burst": "30",
    "--pytorch-init-container-image": "busybox:1.36",
    "--pytorch-init-container-max-tries": "9",
    "--leader-election-namespace": "mpi-operator",
    "--cluster-domain": "cluster.local",
}
"""A value for each kubetrain flag an alias stands for."""

CONVERSIONS: list[tuple[str, str, tuple[str, ...]]] = [
    ("monitoring-port", "9090", ("--metrics-bind-address", ":9090")),
    ("monitoring-port", "0", ("--metrics-bind-address", "0")),
    ("zap-encoder", "json", ("--log-format", "json")),
    ("zap-encoder", "console", ("--log-format", "text")),
    ("zap-log-level", "debug", ("--log-level", "debug")),
    ("zap-log-level", "info", ("--log-level", "info")),
    ("zap-log-level", "error", ("--log-level", "error")),
    ("zap-log-level", "panic", ("--log-level", "error")),
    ("zap-log-level", "3", ("--log-level", "debug")),
    ("v", "0", ("--log-level", "info")),
    ("v", "4", ("--log-level", "debug")),
]
BAD_CONVERSIONS = [("monitoring-port", "70000"), ("monitoring-port", "x"), ("zap-encoder", "yaml"),
                   ("zap-log-level", "warn"), ("v", "-1")]  # fmt: skip


def options(*argv: str) -> OperatorOptions:
    """The options of `argv`, the leader's identity (random per call) made comparable."""
    got = options_from_args(build_operator_parser().parse_args(list(argv)), environ=ENV)
    if got.leader_election is None:
        return got
    return replace(got, leader_election=replace(got.leader_election, identity="-"))


def rows(handling: Handling) -> list[KubeflowFlag]:
    return [flag for flag in FLAGS if flag.handling is handling]


def ids(flag: KubeflowFlag) -> str:
    return f"{flag.operator.split()[0]}:{flag.name}"


def test_the_table_names_each_flag_of_each_operator_once() -> None:
    keys = [(flag.operator, flag.name) for flag in FLAGS]
    assert len(keys) == len(set(keys))
    assert {flag.operator for flag in FLAGS} == {TRAINING_OPERATOR, MPI_OPERATOR}
    for flag in FLAGS:
        assert flag.note, flag
        assert (flag.convert is not None) == (flag.handling is Handling.CONVERT and flag.name != "version")


@pytest.mark.parametrize("flag", rows(Handling.ALIAS), ids=ids)
@pytest.mark.parametrize("dashes", ["--", "-"])
def test_an_alias_gives_what_its_kubetrain_flag_gives(flag: KubeflowFlag, dashes: str) -> None:
    value = SAMPLES[flag.kubetrain]
    expected = options(f"{flag.kubetrain}={value}")
    assert expected != options(), f"the sample of {flag.kubetrain} must change something"
    assert options(f"{dashes}{flag.name}={value}") == expected
    if not flag.boolean:  # Go takes a bool flag's value only after `=`
        assert options(f"{dashes}{flag.name}", value) == expected


@pytest.mark.parametrize(("name", "value", "kubetrain"), CONVERSIONS)
def test_a_conversion_gives_what_the_kubetrain_flag_gives(
    name: str, value: str, kubetrain: tuple[str, ...]
) -> None:
    assert options(f"--{name}", value) == options(*kubetrain)
    assert options(f"-{name}={value}") == options(*kubetrain)


def test_every_conversion_is_exercised() -> None:
    assert {name for name, _, _ in CONVERSIONS} | {"version"} == {f.name for f in rows(Handling.CONVERT)}


@pytest.mark.parametrize(("name", "value"), BAD_CONVERSIONS)
def test_a_bad_value_of_a_converted_flag_exits_2_naming_it(
    name: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        build_operator_parser().parse_args([f"--{name}={value}"])
    assert stopped.value.code == 2
    assert f"--{name}" in capsys.readouterr().err


@pytest.mark.parametrize("spelling", ["--version", "-version"])
def test_version_prints_kubetrains(spelling: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        build_operator_parser().parse_args([spelling])
    assert stopped.value.code == 0 and capsys.readouterr().out.startswith("kubetrain ")


@pytest.mark.parametrize("flag", rows(Handling.NO_OP), ids=ids)
@pytest.mark.parametrize("argv", ["-{}", "--{}=true", "-{}=1"])
def test_a_no_op_changes_nothing(flag: KubeflowFlag, argv: str) -> None:
    assert options(argv.format(flag.name)) == options()


def test_logtostderr_false_asks_for_log_files_and_is_refused() -> None:
    with pytest.raises(OptionsError, match=r"^-logtostderr=false: klog's log files"):
        options("-logtostderr=false")
    assert options("-alsologtostderr=false") == options()


@pytest.mark.parametrize("flag", rows(Handling.REFUSED), ids=ids)
def test_a_refused_flag_is_one_line_naming_it_and_what_to_use(
    flag: KubeflowFlag, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [f"-{flag.name}"] if flag.boolean else [f"--{flag.name}", "x"]
    assert main(["operator", *argv, "--kubeconfig", str(KUBECONFIG)]) == 2
    err = capsys.readouterr().err
    assert err == f"kubetrain operator: {argv[0]}: {flag.note}\n"
    assert flag.kubetrain in flag.note or "drop it" in flag.note


def test_the_first_refused_flag_is_reported_before_any_other_mistake() -> None:
    with pytest.raises(OptionsError, match=r"^--webhook-server-port: "):
        options("--workers=0", "--webhook-server-port=9443", "--master", "https://x")


def test_a_training_operator_deployment_s_arguments_carry_over() -> None:
    """Arguments a training-operator Deployment is run with (less the webhook flags, refused)."""
    got = options(
        "--kubeconfig", str(KUBECONFIG), "--enable-scheme=pytorchjob", "--kube-api-qps=50",
        "--kube-api-burst=100", "--controller-threads=5", "--leader-elect=false", "--metrics-bind-address=0",
        "--health-probe-bind-address=127.0.0.1:8081", "--zap-log-level=info",
    )  # fmt: skip
    assert (got.kinds, got.qps, got.burst, got.workers) == (("PyTorchJob",), 50.0, 100, 5)
    assert got.leader_election is None and got.metrics_address is None
    assert got.health_address == ("127.0.0.1", 8081)


def test_an_mpi_operator_deployment_s_arguments_carry_over() -> None:
    got = options(
        "-alsologtostderr", "--lock-namespace", "mpi-operator", "--kubeConfig", str(KUBECONFIG),
        "--threadiness=3", "--gang-scheduling=volcano", "--monitoring-port=0",
        "--cluster-domain=cluster.local",
    )  # fmt: skip
    assert got.leader_election is not None and got.leader_election.namespace == "mpi-operator"
    assert (got.workers, got.settings.gang_scheduler, got.metrics_address) == (3, "volcano", None)
    assert got.settings.cluster_domain == "cluster.local"


def test_none_shows_in_help_whose_epilog_points_to_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_operator_parser().parse_args(["--help"])
    text = capsys.readouterr().out
    assert "docs/migrating.md" in text
    assert "--threadiness" not in text.split("examples:")[0] and "--webhook-server-port" not in text


def test_docs_migrating_prints_the_table() -> None:
    doc = Path(__file__).resolve().parents[3] / "docs" / "migrating.md"
    assert markdown_table() in doc.read_text(), "paste kubetrain.cli.operator.kubeflow.markdown_table()"
