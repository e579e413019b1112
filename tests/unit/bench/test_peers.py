"""The Go peers of bench/operator_scale.py (`--peer`): the pinned list, where builds live, how each peer is
started (client limits equal to kubetrain's), its webhook certificate, and the operator/peer table. No
control plane and no Go build here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from opbench import cli
from opbench.peers import (
    LISTING,
    Limits,
    Peer,
    _place_missing,
    _remove,
    extra_controllers,
    load_peers,
    parse_peer_names,
    peer_command,
    peers,
    peers_dir,
    webhook_pair,
)
from opbench.report import Mode, Row, peer_ratios, render_json, render_markdown
from opbench.runner import Command
from opbench.subject import Readiness, expand

from kubetrain.api import MPIJOB, PYTORCHJOB, TFJOB

REPO = Path(__file__).resolve().parents[3]
LIMITS = Limits(qps=50.0, burst=100, workers=5)
VALUES = {
    "kubeconfig": "/w/op.kubeconfig",
    "namespace": "bench-peer-10",
    "port": "4001",
    "port2": "4002",
    "port3": "4003",
    "python": "py",
    "kind": "PyTorchJob",
    "jobs": "10",
    "replicas": "4",
    "run_for": "2s",
}


def flags(argv: list[str]) -> dict[str, str]:
    """`--name=value` and `--name value` words of `argv`, by name."""
    found: dict[str, str] = {}
    for index, word in enumerate(argv):
        if word.startswith("-"):
            name, eq, value = word.lstrip("-").partition("=")
            nxt = argv[index + 1] if index + 1 < len(argv) else ""
            found[name] = value if eq else ("" if nxt.startswith("-") else nxt)
    return found


# ------------------------------------------------------------------ the list and the cache
def test_the_list_pins_both_peers_to_their_modules() -> None:
    known = peers({"KUBETRAIN_PEERS_DIR": "/cache"})
    assert {name: (p.module, p.version, p.package) for name, p in known.items()} == {
        "training-operator": (
            "github.com/kubeflow/training-operator",
            "v1.9.4",
            "./cmd/training-operator.v1",
        ),
        "mpi-operator": ("github.com/kubeflow/mpi-operator", "v0.8.0", "./cmd/mpi-operator"),
    }
    assert known["mpi-operator"].binary == Path("/cache/mpi-operator-v0.8.0/bin/mpi-operator")


def test_a_bad_line_is_named() -> None:
    with pytest.raises(ValueError, match=r"peers.txt:2: want `name module version package`"):
        load_peers("# comment\nx github.com/x v1\n", Path("/c"))


def test_python_and_build_script_agree_on_the_cache(tmp_path: Path) -> None:
    for env in ({"KUBETRAIN_PEERS_DIR": str(tmp_path / "p")}, {"XDG_CACHE_HOME": str(tmp_path)}, {}):
        full = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), **env}
        script = subprocess.run(
            ["bash", str(REPO / "hack" / "peers.sh"), "--print-dir"],
            env=full,
            capture_output=True,
            text=True,
            check=False,
        )
        assert Path(script.stdout.strip()) == peers_dir(full)


def test_a_peer_is_built_only_with_its_stamp_and_binary(tmp_path: Path) -> None:
    peer = Peer("mpi-operator", "m", "v1", "./cmd", tmp_path / "mpi-operator-v1")
    assert not peer.built
    peer.binary.parent.mkdir(parents=True)
    peer.binary.write_text("")
    peer.binary.chmod(0o755)
    assert not peer.built
    (peer.directory / "stamp").write_text("built")
    assert peer.built


def test_the_build_script_refuses_a_name_not_in_the_list() -> None:
    result = subprocess.run(
        ["bash", str(REPO / "hack" / "peers.sh"), "kubetrain"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2
    assert "unknown name 'kubetrain'" in result.stderr
    assert str(LISTING) in result.stderr


# ------------------------------------------------------------------ choosing peers
def test_peers_are_named_once_each_repeated_or_comma_separated() -> None:
    known = ["training-operator", "mpi-operator"]
    assert parse_peer_names(["training-operator", "training-operator,"], PYTORCHJOB, known) == [
        "training-operator"
    ]
    assert parse_peer_names(["training-operator"], TFJOB, known) == ["training-operator"]
    assert parse_peer_names([], MPIJOB, known) == []


@pytest.mark.parametrize(
    ("value", "kind", "message"),
    [
        ("kueue", PYTORCHJOB, "--peer 'kueue': unknown; choose among training-operator, mpi-operator"),
        ("mpi-operator", PYTORCHJOB, "--peer mpi-operator runs MPIJob, not PyTorchJob"),
        (
            "mpi-operator,training-operator",
            MPIJOB,
            "--peer training-operator runs PyTorchJob, TFJob, not MPIJob",
        ),
    ],
)
def test_a_peer_that_cannot_run_the_kind_is_refused(value: str, kind: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        parse_peer_names([value], kind, ["training-operator", "mpi-operator"])  # type: ignore[arg-type]


def test_only_mpi_operator_needs_the_job_controller() -> None:
    assert extra_controllers(["training-operator"]) == ()
    assert extra_controllers(["training-operator", "mpi-operator"]) == ("job-controller",)


# ------------------------------------------------------------------ how each peer is started
def test_training_operator_gets_kubetrains_limits_and_only_the_measured_kind() -> None:
    peer = peers({"KUBETRAIN_PEERS_DIR": "/cache dir"})["training-operator"]
    command = peer_command(peer, PYTORCHJOB, LIMITS)
    argv = expand(command.template, VALUES)
    assert argv[0] == "/cache dir/training-operator-v1.9.4/bin/training-operator"
    got = flags(argv[1:])
    assert got["kubeconfig"] == "/w/op.kubeconfig"
    assert got["enable-scheme"] == "pytorchjob"
    assert (got["kube-api-qps"], got["kube-api-burst"], got["controller-threads"]) == ("50", "100", "5")
    assert got["health-probe-bind-address"] == "127.0.0.1:4001"
    assert got["webhook-server-port"] == "4002"
    assert (got["leader-elect"], got["metrics-bind-address"]) == ("false", "127.0.0.1:4003")
    # its reconcile histogram is read from the same port
    assert command.metrics is not None
    assert command.metrics.format_map(VALUES) == "http://127.0.0.1:4003/metrics"
    assert command.unset >= {"KUBECONFIG", "KUBEFLOW_NAMESPACE"}
    assert command.prepare is not None
    assert flags(expand(peer_command(peer, TFJOB, LIMITS).template, VALUES))["enable-scheme"] == "tfjob"


def test_training_operator_is_ready_when_the_kinds_controller_starts_its_workers() -> None:
    ready = peer_command(peers()["training-operator"], PYTORCHJOB, LIMITS).ready
    line = 'Z\tINFO\tStarting workers\t{"controller": "pytorchjob-controller", "worker count": 5}'
    other = line.replace("pytorchjob-controller", "cert-rotator")
    assert ready.how == "log"
    assert re.search(ready.value, line)
    assert not re.search(ready.value, other)


def test_mpi_operator_gets_kubetrains_limits_for_its_client_and_its_work_queue() -> None:
    command = peer_command(peers()["mpi-operator"], MPIJOB, Limits(qps=20.4, burst=40, workers=3))
    got = flags(expand(command.template, {**VALUES, "kind": "MPIJob"}))
    assert got["kubeConfig"] == "/w/op.kubeconfig"
    assert got["lock-namespace"] == "bench-peer-10"
    assert (got["kube-api-qps"], got["kube-api-burst"], got["threadiness"]) == ("20", "40", "3")
    assert (got["controller-queue-rate-limit"], got["controller-queue-burst"]) == ("20", "40")
    assert got["monitoring-port"] == "0"
    assert "KUBECONFIG" in command.unset
    assert command.ready == Readiness("log", "Started workers")


def test_a_command_drops_what_it_must_not_inherit() -> None:
    command = Command("op", Readiness("after", "1"), env={"A": "1"}, unset=frozenset({"KUBECONFIG"}))
    env = command.environment({"KUBECONFIG": "/admin", "PATH": "/bin", "A": "0"}, {"B": "2"})
    assert env == {"PATH": "/bin", "A": "1", "B": "2"}


# ------------------------------------------------------------------ training-operator's webhook certificate
@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_the_webhook_pair_serves_the_name_the_rotator_checks(tmp_path: Path) -> None:
    files = webhook_pair(tmp_path, dns_name="training-operator.ns.svc", ca_name="training-operator-ca")
    assert sorted(files) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert files["ca.key"].startswith("-----BEGIN RSA PRIVATE KEY-----")  # PKCS#1, as the rotator parses it
    later = str(int(time.time()) + 91 * 24 * 3600)  # the rotator renews what expires within 90 days
    for target, purpose, name in (
        ("tls.crt", "sslserver", "training-operator.ns.svc"),
        ("ca.crt", "any", "training-operator-ca"),
    ):
        check = subprocess.run(
            ["openssl", "verify", "-CAfile", "ca.crt", "-purpose", purpose, "-verify_hostname", name,
             "-attime", later, target],
            cwd=tmp_path, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert check.returncode == 0, check.stdout + check.stderr


def test_the_fixed_cert_directory_gets_only_missing_files_and_loses_only_those(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    for name in ("tls.crt", "tls.key"):
        (source / name).write_text(name)
    fixed = tmp_path / "tmp" / "k8s-webhook-server" / "serving-certs"
    placed = _place_missing(source, fixed, ("tls.crt", "tls.key"))
    assert (fixed / "tls.key").read_text() == "tls.key"
    _remove(placed)
    assert not (tmp_path / "tmp").exists()

    fixed.mkdir(parents=True)
    (fixed / "tls.crt").write_text("someone else's")
    placed = _place_missing(source, fixed, ("tls.crt", "tls.key"))
    assert placed == [fixed / "tls.key"]
    _remove(placed)
    assert (fixed / "tls.crt").read_text() == "someone else's"
    assert not (fixed / "tls.key").exists()


# ------------------------------------------------------------------ report
def row(mode: Mode, t_pods: float | None, **fields: object) -> Row:
    return Row(mode=mode, kind="MPIJob", jobs=10, replicas=4, pods=40, outcome="ok", load_before=1.0,
               t_pods=t_pods, **fields)  # type: ignore[arg-type]  # fmt: skip


def test_each_peer_row_gets_the_operators_figures_over_its_own() -> None:
    rows = [
        row(Mode.FLOOR, 1.0),
        row(Mode.OPERATOR, 3.0, cpu_seconds=2.0, peak_rss_mib=60.0, requests=100),
        row(Mode.PEER, 4.0, cpu_seconds=1.0, peak_rss_mib=40.0, requests=None, peer="mpi-operator"),
    ]
    assert peer_ratios(rows[2], rows) == {
        "t_pods": 0.75,
        "cpu_seconds": 2.0,
        "peak_rss_mib": 1.5,
        "requests": None,
    }
    assert peer_ratios(rows[1], rows) is None
    assert peer_ratios(rows[2], rows[::2]) is None  # no operator run of that shape
    text = render_markdown(rows, title="t")
    assert "| peer (mpi-operator) | 10 | 4 | 40 |" in text
    assert "| 4.0 |" in text  # its all-pods figure
    assert "| 10 | 4 | mpi-operator | 0.75x | 2.00x | 1.50x | n/a |" in text
    assert "4.00x" in text  # the peer's own ratio to the floor
    assert '"operator_over_peer": {' in render_json(rows, meta={})


def test_no_peer_no_operator_peer_table() -> None:
    assert "operator / peer" not in render_markdown([row(Mode.OPERATOR, 1.0)], title="t")


# ------------------------------------------------------------------ command line
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--peer", "kueue"], "--peer 'kueue': unknown"),
        (["--peer", "mpi-operator"], "--peer mpi-operator runs MPIJob, not PyTorchJob"),
        (["--kind", "MPIJob", "--peer", "training-operator"], "runs PyTorchJob, TFJob, not MPIJob"),
        (["--modes", "floor,peer"], "--modes: name the peers with --peer"),
        (["--kubeconfig", "/k", "--peer", "training-operator"], "--peer needs a started plane"),
    ],
)
def test_bad_peer_options_exit_2_naming_them(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
