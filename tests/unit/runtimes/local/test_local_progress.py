"""A local run's progress: the loopback receiver serves HTTPS with the run's certificate, asks for the run's
token and checks reports as the operator would, and the console shows them as a bar with ETA and a loss
sparkline, then a table of the final metrics (terminal only)."""

from __future__ import annotations

import io
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kubetrain.api import TrainerStatus
from kubetrain.podcontract.progress import CA_CERT_ENV, MAX_BODY_BYTES, TOKEN_ENV, URL_ENV
from kubetrain.runtimes.local.console import Console
from kubetrain.runtimes.local.progressbar import LossHistory, bar_line, sparkline
from kubetrain.runtimes.local.reports import ReportReceiver
from kubetrain.runtimes.local.view import Snapshot
from kubetrain.runtimes.progress import Reporter, http_sender


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[ReportReceiver]:
    server = ReportReceiver("kubeflow.org/v1", "default", "pytorchjobs", "mnist", directory=tmp_path / "p")
    server.start()
    yield server
    server.stop()


def _post(receiver: ReportReceiver, url: str, body: bytes, token: str | None = None) -> int:
    token = receiver.token_file.read_text() if token is None else token
    headers = {"Authorization": f"Bearer {token}"}
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    context = ssl.create_default_context(cafile=str(receiver.ca_cert))
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_the_runtime_helper_reports_to_the_receiver(receiver: ReportReceiver) -> None:
    assert receiver.url.startswith("https://127.0.0.1:")
    assert receiver.url.endswith("/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/mnist/status")
    env = receiver.env()
    assert (env[URL_ENV], env[CA_CERT_ENV], env[TOKEN_ENV]) == (
        receiver.url,
        str(receiver.ca_cert),
        str(receiver.token_file),
    )
    assert receiver.token_file.stat().st_mode & 0o077 == 0, "only this user reads the token"
    send = http_sender(env[URL_ENV], ca_cert=env[CA_CERT_ENV], token_path=env[TOKEN_ENV])
    reporter = Reporter(send, min_interval=0)
    reporter.report(step=3, total=4, loss=0.25)
    assert reporter.flush(5)
    status = receiver.take()
    assert status is not None and status.progress_percentage == 75
    assert status.last_updated_time is not None
    assert receiver.take() is None  # taken once


@pytest.mark.parametrize(
    ("path", "body", "code"),
    [
        ("/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/other/status", b'{"trainerStatus": {}}', 404),
        (None, b'{"trainerStatus": {"progressPercentage": 101}}', 400),
        (None, b"not json", 400),
        (None, b'{"progress": 3}', 400),
        (None, b"{" + b" " * MAX_BODY_BYTES + b"}", 413),
    ],
    ids=["another job", "out of bounds", "not json", "no trainerStatus", "too large"],
)
def test_bad_reports_are_refused_and_kept_out(
    receiver: ReportReceiver, path: str | None, body: bytes, code: int
) -> None:
    base = receiver.url[: receiver.url.index("/apis/")]
    assert _post(receiver, base + (path or receiver.path), body) == code
    assert receiver.take() is None and receiver.refused == 1


def test_a_report_without_the_runs_token_is_refused(receiver: ReportReceiver) -> None:
    body = b'{"trainerStatus": {"progressPercentage": 5}}'
    assert _post(receiver, receiver.url, body, token="guessed") == 401
    assert receiver.take() is None and receiver.refused == 1
    assert _post(receiver, receiver.url, body) == 200


def _status(percent: int, loss: str, second: int) -> TrainerStatus:
    return TrainerStatus.model_validate(
        {
            "progressPercentage": percent,
            "estimatedRemainingSeconds": 310,
            "metrics": [{"name": "accuracy", "value": "0.9"}, {"name": "loss", "value": loss}],
            "lastUpdatedTime": datetime(2026, 1, 1, 0, 0, second, tzinfo=UTC),
        }
    )


def test_the_bar_shows_percentage_eta_and_the_loss_sparkline() -> None:
    history = LossHistory()
    for second, loss in enumerate(["2.0", "1.0", "1.0", "0.5"]):
        history.add(_status(50, loss, second))
    history.add(_status(50, "0.5", 3))  # the same report seen again: not a new point
    assert history.values == [2.0, 1.0, 1.0, 0.5]
    line = bar_line(_status(50, "0.5", 3), history.values)
    assert line == f"[{'█' * 12}{'░' * 12}]  50%  ETA 5m10s  loss=0.5 █▃▃▁"
    assert sparkline([]) == ""


def _snapshot(trainer: TrainerStatus | None) -> Snapshot:
    return Snapshot(
        kind="PyTorchJob", namespace="default", name="mnist", condition=None, rows=(), trainer=trainer
    )


def test_a_terminal_ends_with_the_final_metrics_and_plain_output_is_unchanged() -> None:
    final = _status(100, "0.04", 9)
    tty, plain = io.StringIO(), io.StringIO()
    Console(tty, tty=True).finish(_snapshot(final))
    Console(plain, tty=False).finish(_snapshot(final))
    assert "METRIC    VALUE\naccuracy  0.9\nloss      0.04\nprogress  100%\n" in tty.getvalue()
    assert "] 100%  ETA 5m10s  loss=0.04" in tty.getvalue()
    assert "METRIC" not in plain.getvalue() and "ETA" not in plain.getvalue()
    assert "[kubetrain] final report: progress 100%, accuracy=0.9, loss=0.04\n" in plain.getvalue()
    assert plain.getvalue().splitlines()[1].startswith("REPLICA")  # the header, then the replicas' table
