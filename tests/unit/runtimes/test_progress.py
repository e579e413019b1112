"""kubetrain.runtimes.progress: what a training loop relies on (never raises, never blocks, latest wins),
and the request it sends, checked against a real HTTP server on loopback."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from kubetrain.podcontract.progress import MAX_METRICS, URL_ENV, report_body
from kubetrain.runtimes import progress
from kubetrain.runtimes.progress import Reporter, http_sender


class Collect:
    """A send that records bodies; `gate` (when given) holds each send until it is set."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.gate = gate
        self.entered = threading.Event()

    def __call__(self, body: bytes) -> None:
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(10)
        self.bodies.append(_unstamped(json.loads(body))["trainerStatus"])


def _unstamped(document: dict[str, Any]) -> dict[str, Any]:
    """The body without its `lastUpdatedTime`, which must be an ISO 8601 time with its zone, as Kubeflow's
    clients send it."""
    stamped = datetime.fromisoformat(document["trainerStatus"].pop("lastUpdatedTime"))
    assert stamped.tzinfo is not None
    return document


def test_percentage_eta_and_metrics_are_computed_from_the_step_rate() -> None:
    clock = iter([100.0, 110.0])
    sent = Collect()
    reporter = Reporter(sent, min_interval=0, clock=lambda: next(clock))
    reporter.report(step=10, total=100, loss=0.5)
    assert reporter.flush(5)
    reporter.report(step=20, total=100, loss=0.25, accuracy=0.9)  # 10 steps in 10 s: 80 s left
    assert reporter.flush(5)
    assert sent.bodies == [
        {"progressPercentage": 10, "metrics": [{"name": "loss", "value": "0.5"}]},
        {
            "progressPercentage": 20,
            "estimatedRemainingSeconds": 80,
            "metrics": [{"name": "loss", "value": "0.25"}, {"name": "accuracy", "value": "0.9"}],
        },
    ]


def test_report_never_blocks_and_the_latest_report_wins_while_one_is_in_flight() -> None:
    gate = threading.Event()
    sent = Collect(gate)
    reporter = Reporter(sent, min_interval=0)
    reporter.report(step=1, total=1000)
    assert sent.entered.wait(5)  # the first is being sent, and held there
    for step in range(2, 1001):
        reporter.report(step=step, total=1000)  # returns at once although the sender is stuck
    gate.set()
    assert reporter.flush(5)
    assert [b["progressPercentage"] for b in sent.bodies] == [0, 100]
    assert reporter.dropped == 998 and reporter.sent == 2


def test_a_failing_endpoint_never_raises_into_the_loop_and_reports_are_dropped() -> None:
    def refuse(_: bytes) -> None:
        raise ConnectionRefusedError("nobody listens")

    reporter = Reporter(refuse, min_interval=0, retry_after=0)
    reporter.report(step=1, total=2, loss=object())  # an odd metric, too
    assert reporter.flush(5)
    assert reporter.sent == 0 and reporter.dropped == 1


def test_bodies_stay_within_every_bound() -> None:
    metrics = {f"{'m' * 100}{i}": 1.0 for i in range(MAX_METRICS + 5)}
    body = json.loads(report_body(percent=250, remaining=-3.0, metrics={"": 1, **metrics}))["trainerStatus"]
    assert body["progressPercentage"] == 100 and body["estimatedRemainingSeconds"] == 0
    assert len(body["metrics"]) == MAX_METRICS
    assert all(0 < len(m["name"]) <= 64 and len(m["value"]) <= 64 for m in body["metrics"])


class _Receiver(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, str | None, dict[str, Any]]] = []

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        self.seen.append(
            (self.path, self.headers.get("Authorization"), _unstamped(json.loads(self.rfile.read(length))))
        )
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[http.server.HTTPServer]:
    _Receiver.seen = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_the_request_carries_the_body_and_the_token_read_from_its_file(
    receiver: http.server.HTTPServer, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    url = f"http://127.0.0.1:{receiver.server_address[1]}/apis/kubeflow.org/v1/namespaces/a/tfjobs/b/status"
    send = http_sender(url, ca_cert=None, token_path=str(token))
    reporter = Reporter(send, min_interval=0, clock=lambda: 0.0)  # no time passes: no ETA
    reporter.report(step=1, total=4, loss=0.5)
    assert reporter.flush(5)
    token.write_text("rotated")  # the kubelet rotates projected tokens: each request reads the file
    reporter.report(step=2, total=4)
    assert reporter.flush(5)
    assert _Receiver.seen == [
        (
            "/apis/kubeflow.org/v1/namespaces/a/tfjobs/b/status",
            "Bearer first",
            {"trainerStatus": {"progressPercentage": 25, "metrics": [{"name": "loss", "value": "0.5"}]}},
        ),
        (
            "/apis/kubeflow.org/v1/namespaces/a/tfjobs/b/status",
            "Bearer rotated",
            {"trainerStatus": {"progressPercentage": 50}},
        ),
    ]


def test_an_unreachable_endpoint_drops_the_report(receiver: http.server.HTTPServer) -> None:
    port = receiver.server_address[1]
    receiver.shutdown()
    receiver.server_close()  # the port is closed now: connections are refused
    reporter = Reporter(
        http_sender(f"http://127.0.0.1:{port}/x", ca_cert=None, token_path=None), min_interval=0
    )
    reporter.report(step=1, total=2)
    assert reporter.flush(10)
    assert reporter.dropped == 1 and reporter.sent == 0


def test_without_the_env_report_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)
    monkeypatch.setattr(progress, "_default", None)
    progress.report(step=1, total=2, loss=1.0)
    assert progress.default_reporter() is None
    assert progress.flush(0)


class _KeptAlive(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 with kept connections; counts connections and requests. `drop_after` closes a connection
    silently (no `Connection: close`) after that many requests on it, as an idle timeout does;
    `retry_after` is sent on every answer."""

    protocol_version = "HTTP/1.1"
    connections = 0
    bodies: list[bytes] = []
    drop_after = 0
    retry_after = ""

    def setup(self) -> None:
        super().setup()
        type(self).connections += 1
        self.served = 0

    def do_POST(self) -> None:
        self.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.served += 1
        self.send_response(202)
        self.send_header("Content-Length", "2")
        if self.retry_after:
            self.send_header("Retry-After", self.retry_after)
        self.end_headers()
        self.wfile.write(b"{}")
        self.close_connection = self.served == self.drop_after

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def kept_alive() -> Iterator[str]:
    _KeptAlive.connections, _KeptAlive.bodies, _KeptAlive.drop_after, _KeptAlive.retry_after = 0, [], 0, ""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _KeptAlive)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/apis/kubeflow.org/v1/namespaces/a/tfjobs/b/status"
    server.shutdown()
    server.server_close()


def _report_each(reporter: Reporter, steps: int) -> None:
    for step in range(1, steps + 1):
        reporter.report(step=step, total=steps)
        assert reporter.flush(5)


def test_reports_share_one_kept_connection(kept_alive: str) -> None:
    send = http_sender(kept_alive, ca_cert=None, token_path=None)
    _report_each(Reporter(send, min_interval=0), 5)
    assert len(_KeptAlive.bodies) == 5
    assert _KeptAlive.connections == 1 and send.connections == 1


def test_a_connection_the_endpoint_closed_while_idle_is_opened_again_and_no_report_is_lost(
    kept_alive: str,
) -> None:
    _KeptAlive.drop_after = 2  # every connection goes after its second report, unannounced
    send = http_sender(kept_alive, ca_cert=None, token_path=None)
    reporter = Reporter(send, min_interval=0)
    _report_each(reporter, 5)
    assert [json.loads(b)["trainerStatus"]["progressPercentage"] for b in _KeptAlive.bodies] == [
        20, 40, 60, 80, 100
    ]  # fmt: skip
    assert reporter.dropped == 0 and _KeptAlive.connections == 3


def test_nothing_is_sent_before_the_retry_after_except_the_final_flush(kept_alive: str) -> None:
    _KeptAlive.retry_after = "30"
    reporter = Reporter(http_sender(kept_alive, ca_cert=None, token_path=None), min_interval=0)
    reporter.report(step=1, total=4)
    assert reporter.flush(5)
    reporter.report(step=2, total=4)
    reporter.report(step=3, total=4)  # the newer one waits in the slot
    deadline = time.monotonic() + 5
    while reporter.pause != 30 and time.monotonic() < deadline:  # the sender read the Retry-After
        time.sleep(0.01)
    assert reporter.pause == 30, f"the sender pauses {reporter.pause} s, not the 30 s it was asked"
    assert len(_KeptAlive.bodies) == 1, "sent before the 30 s the endpoint asked for"
    assert reporter.flush(5)  # at exit: the last report leaves at once
    assert [json.loads(b)["trainerStatus"]["progressPercentage"] for b in _KeptAlive.bodies] == [25, 75]
