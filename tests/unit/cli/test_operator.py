"""`kubetrain operator`'s flags: what they turn into, and one clear line (exit 2) for each mistake.

Also the kind registry behind `--enable` and the log formats. Running the operator is tested as a
process on the real control plane (tests/integration/test_operator_process.py, tests/e2e/).
"""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from asyncio import sslproto
from collections.abc import Iterator

import pytest

from kubetrain.api import KINDS, TFJOB
from kubetrain.cli import main
from kubetrain.cli.operator import app as operator_app
from kubetrain.cli.operator import build_operator_parser
from kubetrain.cli.operator.options import (
    DEFAULTS,
    SERVICE_MODES,
    LogFormat,
    OperatorOptions,
    OptionsError,
    ProgressOptions,
    options_from_args,
    parse_address,
)
from kubetrain.common.errors import ApiError, Forbidden, NotFound, TransportError, Unauthorized
from kubetrain.common.gangrestart import GangRestartMode
from kubetrain.common.job import ServiceMode
from kubetrain.common.kube.http import TLS_READ_BUFFER
from kubetrain.common.kube.informer import CacheSyncError
from kubetrain.common.logformat import configure_logging
from kubetrain.common.logs import ReconcileContext, reconcile_context
from kubetrain.controllers.registry import (
    CONTROLLERS,
    ControllerEntry,
    ControllerUnavailable,
    UnknownKind,
    load_controller,
    resolve_kinds,
)
from kubetrain.controllers.settings import ControllerSettings

IN_CLUSTER = {"POD_NAMESPACE": "kubetrain-system"}


def options(*argv: str, environ: dict[str, str] | None = None) -> OperatorOptions:
    args = build_operator_parser().parse_args(list(argv))
    return options_from_args(args, environ=IN_CLUSTER if environ is None else environ)


def error(*argv: str, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(OptionsError) as caught:
        options(*argv, environ=environ)
    return str(caught.value)


# defaults and help -----------------------------------------------------------------------------------
def test_defaults_serve_every_kind_in_every_namespace_with_leader_election() -> None:
    got = options()
    assert got.kinds == ("TFJob", "PyTorchJob", "MPIJob", "JAXJob", "XGBoostJob", "PaddleJob")
    assert got.namespaces is None
    assert got.leader_election is not None
    assert (got.leader_election.namespace, got.leader_election.name) == (
        "kubetrain-system",
        "kubetrain-operator",
    )
    assert (got.qps, got.burst, got.workers) == (50.0, 100, 5)
    assert got.health_address == ("", 8081) and got.metrics_address == ("", 8080)
    assert got.log_format is LogFormat.JSON and got.settings == ControllerSettings()
    assert got == OperatorOptions(leader_election=got.leader_election), "flag defaults = options defaults"


def test_flag_defaults_match_the_controller_settings_defaults() -> None:
    settings = ControllerSettings()
    assert DEFAULTS.pytorch_init_image == settings.pytorch_init_image
    assert DEFAULTS.pytorch_init_max_tries == settings.pytorch_init_max_tries
    assert tuple(ServiceMode) == SERVICE_MODES and SERVICE_MODES[0] == settings.service_mode


def test_service_mode_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert options().settings.service_mode is ServiceMode.JOB
    assert options("--service-mode=replica").settings.service_mode is ServiceMode.REPLICA
    with pytest.raises(SystemExit) as exited:
        build_operator_parser().parse_args(["--service-mode=pod"])
    assert exited.value.code == 2
    assert "--service-mode: invalid choice: 'pod' (choose from 'job', 'replica')" in capsys.readouterr().err


def test_the_operator_command_loads_no_other_commands_modules() -> None:
    """About 1 MiB an idle operator does not pay (bench/operator_at_rest.py): the SDK client, the local
    runner, scaffolding and the in-memory API server belong to other sub-commands."""
    probe = (
        "import sys\n"
        "from kubetrain.cli import main\n"
        "try:\n"
        "    main(['operator', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('kubetrain.'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.splitlines()[-1].split())
    assert "kubetrain.cli.operator" in loaded
    others = {"kubetrain.cli.submit", "kubetrain.cli.run", "kubetrain.client", "kubetrain.common.kube.fake"}
    assert not loaded & others


def test_help_groups_flags_shows_defaults_and_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["operator", "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    words = " ".join(text.split())
    for group in ("connection to the API server", "what the operator serves", "leader election", "logging"):
        assert group in words
    kinds = "(default: TFJob,PyTorchJob,MPIJob,JAXJob,XGBoostJob,PaddleJob)"
    for default in ("(default: 50)", "(default: :8081)", kinds):
        assert default in words
    assert "examples:\n  kubetrain operator" in text and "exit codes:" in text


# flags ------------------------------------------------------------------------------------------------
def test_namespaces_repeat_or_comma_separate_and_are_deduplicated() -> None:
    got = options("--namespace", "team-a", "--namespace=team-b,team-a", "--namespace", " team-c ")
    assert got.namespaces == ("team-a", "team-b", "team-c")


@pytest.mark.parametrize("bad", ["Team-A", "a_b", "-a", "x" * 64])
def test_a_bad_namespace_is_named(bad: str) -> None:
    assert f"--namespace={bad!r}" in error(f"--namespace={bad}")


def test_enable_takes_kinds_in_any_case_and_spelling_in_registry_order() -> None:
    assert options("--enable", "mpijob,TFJOBS").kinds == ("TFJob", "MPIJob")
    assert options("--enable", "pytorchjob", "--enable", "PyTorchJob").kinds == ("PyTorchJob",)


def test_a_misspelt_kind_gets_a_suggestion() -> None:
    message = error("--enable", "TFJob,PytorchJb")
    assert "unknown kind 'PytorchJb'" in message and "did you mean PyTorchJob?" in message
    assert "--enable is empty" in error("--enable", " , ")


def test_kubeflow_flag_names_are_accepted() -> None:
    got = options(
        "--kube-api-qps=20", "--kube-api-burst=30", "--controller-threads=3", "--enable-scheme=TFJob",
        "--pytorch-init-container-image=busybox:1.36", "--gang-scheduler-name=volcano", "--leader-elect=true",
    )  # fmt: skip
    assert (got.qps, got.burst, got.workers, got.kinds) == (20.0, 30, 3, ("TFJob",))
    assert got.settings.pytorch_init_image == "busybox:1.36"
    assert got.settings.gang_scheduler == "volcano" and got.leader_election is not None


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ((), ""),
        (("--gang-scheduler=none",), ""),
        (("--gang-scheduler=volcano",), "volcano"),
        (("--gang-scheduler=scheduler-plugins",), "scheduler-plugins-scheduler"),
        (("--gang-scheduler=scheduler-plugins", "--gang-scheduler-name=my-sched"), "my-sched"),
        (("--gang-scheduler-name=volcano",), "volcano"),
        (("--gang-scheduler-name=coscheduler",), "coscheduler"),
    ],
)
def test_gang_scheduler_choice(argv: tuple[str, ...], expected: str) -> None:
    assert options(*argv).settings.gang_scheduler == expected


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (("--gang-scheduler=none", "--gang-scheduler-name=x"), "--gang-scheduler-name needs gang scheduling"),
        (("--gang-scheduler=volcano", "--gang-scheduler-name=x"), "Volcano's scheduler is named volcano"),
        (("--gang-scheduler=scheduler-plugins", "--gang-scheduler-name=volcano"), "--gang-scheduler volcano"),
        (("--gang-scheduler-name=Not_A_Name",), "--gang-scheduler-name='Not_A_Name'"),
    ],
)
def test_contradictory_gang_flags_are_refused(argv: tuple[str, ...], needle: str) -> None:
    assert needle in error(*argv)


def test_leader_election_namespace_comes_from_the_flag_or_the_pod() -> None:
    got = options("--leader-election-namespace=ops", "--leader-election-id=my-lease")
    assert got.leader_election is not None
    assert (got.leader_election.namespace, got.leader_election.name) == ("ops", "my-lease")
    assert "--leader-election-namespace is needed outside a cluster" in error(environ={})
    assert options("--no-leader-elect", environ={}).leader_election is None
    assert options("--leader-elect=false", environ={}).leader_election is None


def test_leader_election_timing_must_be_ordered() -> None:
    message = error("--leader-election-renew-deadline=20")
    assert "--leader-election-retry-period/-renew-deadline/-lease-duration" in message


def test_a_bad_boolean_exits_2_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_operator_parser().parse_args(["--leader-elect=maybe"])
    assert exited.value.code == 2
    assert "--leader-elect=maybe: write --leader-elect=true or =false" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "expected"),
    [(":8080", ("", 8080)), ("127.0.0.1:0", ("127.0.0.1", 0)), ("[::1]:9000", ("::1", 9000)), ("0", None)],
)
def test_addresses(text: str, expected: tuple[str, int] | None) -> None:
    assert parse_address("--metrics-bind-address", text) == expected


@pytest.mark.parametrize("bad", ["8080", ":http", ":70000", "example.com:80"])
def test_a_bad_address_is_named(bad: str) -> None:
    assert "--health-probe-bind-address" in error(f"--health-probe-bind-address={bad}")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (("--qps=0",), "--qps=0: must be greater than 0"),
        (("--burst=-1",), "--burst=-1"),
        (("--workers=0",), "--workers=0"),
        (("--shutdown-grace=-1",), "--shutdown-grace"),
        (("--child-event-delay=-0.1",), "--child-event-delay=-0.1: write seconds from 0 (at once) to 10"),
        (("--child-event-delay=60",), "--child-event-delay=60"),
        (("--cluster-domain=Cluster..Local",), "--cluster-domain"),
        (("--pytorch-init-container-image= ",), "--pytorch-init-container-image"),
        (("--pytorch-init-container-max-tries=0",), "--pytorch-init-container-max-tries"),
        (("--kubeconfig=/nonexistent/kubeconfig",), "--kubeconfig=/nonexistent/kubeconfig: no such file"),
    ],
)
def test_bad_values_are_named(argv: tuple[str, ...], needle: str) -> None:
    assert needle in error(*argv)


def test_progress_endpoint_is_off_unless_bound() -> None:
    assert options().progress is None
    assert options("--progress-bind-address=0", "--progress-url=https://x:1").progress is None


def test_progress_url_defaults_to_the_operators_service_in_its_namespace() -> None:
    got = options("--progress-bind-address=:8443", "--cluster-domain=corp.local")
    service = "kubetrain-operator.kubetrain-system"
    assert got.progress == ProgressOptions(
        address=("", 8443),
        url=f"https://{service}.svc:8443",
        audience="kubetrain-progress",
        interval=10.0,
        hosts=(f"{service}.svc", "kubetrain-operator", service, f"{service}.svc.corp.local"),
        namespace="kubetrain-system",
    )


def test_progress_flags_given() -> None:
    argv = ("--progress-bind-address=127.0.0.1:9443", "--progress-url=https://10.0.0.7:9443/")
    more = ("--progress-max-connections=5000", "--progress-idle-timeout=300")
    got = options(
        *argv, "--progress-audience=mine", "--progress-interval=2", *more, "--no-leader-elect", environ={}
    )
    assert got.progress == ProgressOptions(
        address=("127.0.0.1", 9443),
        url="https://10.0.0.7:9443",
        audience="mine",
        interval=2.0,
        hosts=("10.0.0.7",),
        max_connections=5000,
        idle_timeout=300.0,
    )


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (("--progress-bind-address=8443",), "--progress-bind-address"),
        (("--progress-bind-address=:8443", "--progress-interval=0"), "--progress-interval=0"),
        (("--progress-bind-address=:8443", "--progress-audience= "), "--progress-audience is empty"),
        (("--progress-bind-address=:8443", "--progress-url=http://x:1"), "--progress-url='http://x:1'"),
        (("--progress-bind-address=:8443", "--progress-url=https://x:1/p"), "with no path"),
        (("--progress-bind-address=:8443", "--progress-max-connections=0"), "--progress-max-connections=0"),
        (("--progress-bind-address=:8443", "--progress-idle-timeout=0"), "--progress-idle-timeout=0"),
    ],
)
def test_bad_progress_flags_are_named(argv: tuple[str, ...], needle: str) -> None:
    assert needle in error(*argv)


def test_progress_url_is_needed_outside_a_cluster() -> None:
    assert "--progress-url is needed outside a cluster" in error(
        "--progress-bind-address=:8443", "--no-leader-elect", environ={}
    )


def test_cluster_domain_trailing_dot_is_dropped() -> None:
    assert options("--cluster-domain=cluster.local.").settings.cluster_domain == "cluster.local"


def test_bad_flags_exit_2_with_one_line_and_start_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["operator", "--enable", "tfjbo", "--kubeconfig", "/nonexistent"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kubetrain operator: ") and "Traceback" not in err


# the registry -------------------------------------------------------------------------------------------
def test_every_kind_has_a_controller_that_serves_it() -> None:
    assert list(CONTROLLERS) == [info.kind for info in KINDS]
    for kind in CONTROLLERS:
        assert load_controller(kind).kind.kind == kind


def test_a_missing_controller_fails_loudly_naming_the_kind() -> None:
    broken = ControllerEntry(TFJOB, "kubetrain.controllers.no_such_module", "TFJobController")
    with pytest.raises(ControllerUnavailable, match=r"^TFJob: cannot import its controller"):
        broken.load()
    wrong = ControllerEntry(TFJOB, "kubetrain.controllers.registry", "ControllerEntry")
    with pytest.raises(ControllerUnavailable, match="not a ConfiguredJobController subclass"):
        wrong.load()


def test_the_operator_process_reads_tls_into_small_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    """asyncio's 256 KiB per TLS connection, about 24 of them at rest: 4 MiB (bench/operator_at_rest.py)."""
    monkeypatch.setattr(sslproto.SSLProtocol, "max_size", 256 * 1024)

    def unavailable(kind: str) -> None:
        raise ControllerUnavailable(f"{kind}: stopped here by the test")

    monkeypatch.setattr(operator_app, "load_controller", unavailable)
    assert operator_app.run_operator(options("--enable", "TFJob")) != 0
    assert sslproto.SSLProtocol.max_size == TLS_READ_BUFFER == 64 * 1024


def test_resolve_kinds_rejects_what_it_does_not_know() -> None:
    assert resolve_kinds(["MPIJOBS", "tfjob", "TFJob"]) == ("TFJob", "MPIJob")
    known = "known kinds: TFJob, PyTorchJob, MPIJob, JAXJob, XGBoostJob, PaddleJob"
    with pytest.raises(UnknownKind, match=known):
        resolve_kinds(["MXJob"])


# logs ---------------------------------------------------------------------------------------------------
@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def _log_line(log_format: LogFormat) -> str:
    stream = io.StringIO()
    configure_logging(log_format, "info", stream=stream)
    token = reconcile_context.set(ReconcileContext("tfjob-controller", "team-a/mnist", "r-42"))
    try:
        logging.getLogger("kubetrain.test").info("created pod %s", "mnist-worker-0")
    finally:
        reconcile_context.reset(token)
    logging.getLogger("kubetrain.test").debug("not shown at info")
    return stream.getvalue()


@pytest.mark.usefixtures("restore_logging")
def test_json_logs_carry_the_job_and_the_reconcile_id() -> None:
    (line,) = _log_line(LogFormat.JSON).splitlines()
    record = json.loads(line)
    assert record["msg"] == "created pod mnist-worker-0" and record["level"] == "info"
    assert (record["namespace"], record["name"], record["reconcile_id"]) == ("team-a", "mnist", "r-42")
    assert record["controller"] == "tfjob-controller" and record["time"].endswith("+00:00")


@pytest.mark.usefixtures("restore_logging")
def test_text_logs_end_with_the_job_and_the_reconcile_id() -> None:
    (line,) = _log_line(LogFormat.TEXT).splitlines()
    assert line.endswith("kubetrain.test: created pod mnist-worker-0 [tfjob-controller team-a/mnist #r-42]")


@pytest.mark.usefixtures("restore_logging")
def test_json_logs_keep_a_traceback_in_one_line() -> None:
    stream = io.StringIO()
    configure_logging(LogFormat.JSON, "info", stream=stream)
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("kubetrain.test").exception("failed")
    (line,) = stream.getvalue().splitlines()
    record = json.loads(line)
    assert "ValueError: boom" in record["error"] and "namespace" not in record


@pytest.mark.parametrize(
    ("namespace", "error", "code", "needles"),
    [
        (None, NotFound("the server could not find the requested resource"), 1,
         ("the TFJob CRD is not installed", "kubectl apply -k manifests/crds", "out of --enable")),
        (None, Forbidden("tfjobs.kubeflow.org is forbidden"), 4,
         ("not allowed to read tfjobs.kubeflow.org in all namespaces", "manifests/base/rbac")),
        ("team-a", Unauthorized("Unauthorized"), 4, ("rejected the operator's credentials",)),
        ("team-a", TransportError("connection refused"), 4, ("cannot reach the API server",)),
    ],
)  # fmt: skip
def test_an_informer_that_cannot_sync_stops_start_up_with_one_line_saying_what_to_fix(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    namespace: str | None,
    error: ApiError,
    code: int,
    needles: tuple[str, ...],
) -> None:
    """The informers' first requests are the preflight: their CacheSyncError becomes the start-up error."""
    resource = load_controller("TFJob").job_resource()

    async def cannot_sync(self: object) -> None:
        raise CacheSyncError(resource, namespace, error)

    monkeypatch.setattr(operator_app._BuiltinOperator, "serve", cannot_sync)
    flags = ("--enable", "TFJob", *((f"--namespace={namespace}",) if namespace else ()))
    assert operator_app.run_operator(options(*flags)) == code
    records = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    (line,) = [r["msg"] for r in records if r["level"] == "error"]
    assert line.startswith("cannot start: ") and all(n in line for n in needles), line


def test_the_gang_restart_mode_reaches_the_options() -> None:
    assert options().gang_restart is GangRestartMode.AUTO
    assert options("--gang-restart=recreate").gang_restart is GangRestartMode.RECREATE
