"""Training progress from inside the pod: `report(step=..., total=..., **metrics)`, sent to the operator.

    from kubetrain.runtimes import progress
    for step in range(total):
        loss = train_step()
        progress.report(step=step + 1, total=total, loss=loss, accuracy=acc)

The operator (or `kubetrain run --local`) injects the KEP-2779 env (`kubetrain.podcontract.progress`);
without it, `report` does nothing, so the same script runs anywhere. Callbacks for Keras, Hugging Face
Transformers, PyTorch Lightning and XGBoost are in `kubetrain.runtimes.progress.callbacks`.

What the training loop may rely on:
- `report` never raises and never blocks: it computes the percentage and the ETA (from the step rate seen
  so far), encodes the body and leaves it in a one-report slot; a background thread sends it. A newer
  report replaces one not yet sent (the receiver keeps only the latest anyway).
- At most one request per `min_interval` seconds leaves the process, each with a short timeout, and none
  before the `Retry-After` the endpoint answered (the operator asks each job for one report per write
  interval; a report made meanwhile waits in the slot, newer ones replacing it). When the endpoint cannot be
  reached, reports are dropped (counted in `dropped`), and the sender waits `retry_after` seconds before it
  tries again.
- The requests share one kept-open connection (one TLS handshake, not one per report); a connection the
  endpoint closed while idle is opened again and the report sent once more on it.
- At exit (or `flush()`), the last report is sent if it can be within a second, whatever `Retry-After`
  said, so the final metrics land.

Standard library only: a training image needs nothing else to report.
"""

from __future__ import annotations

import atexit
import http.client
import math
import os
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from kubetrain.podcontract.progress import CA_CERT_ENV, TOKEN_ENV, URL_ENV, report_body

__all__ = ["HttpSender", "Refused", "Reporter", "default_reporter", "flush", "http_sender", "report"]

Send = Callable[[bytes], float | None]
"""Sends one body; returns the seconds the receiver asks to wait before the next (its `Retry-After`), or
None. Raises when the report did not land (`Refused` carries the receiver's `Retry-After` too)."""

MAX_WAIT = 300.0
"""The longest `Retry-After` honoured: a receiver cannot silence a pod for longer."""


class Refused(Exception):
    """The receiver answered `status` (4xx or 5xx); `retry_after`: the seconds it asked to wait, or None."""

    def __init__(self, status: int, retry_after: float | None) -> None:
        super().__init__(f"the progress endpoint answered {status}")
        self.status, self.retry_after = status, retry_after


class Reporter:
    """Sends the latest report of this process to one endpoint, from a daemon thread."""

    def __init__(
        self,
        send: Send,
        *,
        min_interval: float = 1.0,
        retry_after: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send, self._clock = send, clock
        self._min_interval, self._retry_after = min_interval, retry_after
        self._slot: bytes | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._hurry = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._first: tuple[float, float] | None = None
        self._thread: threading.Thread | None = None
        self.sent = 0
        self.dropped = 0
        self.pause = 0.0
        """Seconds the sender waits after its last request before the next (the `Retry-After` it was
        answered, or `min_interval`, or `retry_after` after a failure)."""

    def report(self, step: float | None = None, total: float | None = None, **metrics: object) -> None:
        """Queue a report (replacing one not yet sent); never raises."""
        try:
            percent, remaining = self._percent(step, total), self._eta(step, total)
            self._put(report_body(percent=percent, remaining=remaining, metrics=metrics))
        except Exception:  # a report must never stop the training
            self.dropped += 1

    def _percent(self, step: float | None, total: float | None) -> int | None:
        if step is None or not total or total <= 0:
            return None
        return int(100 * min(max(step / total, 0.0), 1.0))

    def _eta(self, step: float | None, total: float | None) -> float | None:
        """Seconds left at the step rate since the first report with a step."""
        if step is None or not total:
            return None
        now = self._clock()
        if self._first is None:
            self._first = (now, step)
            return None
        since, first_step = self._first
        if step <= first_step or now <= since:
            return None
        return (total - step) * (now - since) / (step - first_step)

    def _put(self, body: bytes) -> None:
        with self._lock:
            if self._slot is not None:
                self.dropped += 1  # replaced before it left: the newer report wins
            self._slot = body
            self._idle.clear()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="kubetrain-progress", daemon=True)
                self._thread.start()
        self._wake.set()

    def _take(self) -> bytes | None:
        with self._lock:
            body, self._slot = self._slot, None
            if body is None:
                self._idle.set()
            return body

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            body = self._take()
            if body is None:
                continue
            self._hurry.clear()  # a flush until now asked for this report, which leaves now
            pause = self._min_interval
            try:
                asked = self._send(body)
                self.sent += 1
            except Exception as error:  # unreachable, refused, timed out: drop and wait
                self.dropped += 1
                asked = error.retry_after if isinstance(error, Refused) else None
                pause = self._retry_after
            if asked is not None:
                pause = max(pause, min(asked, MAX_WAIT))
            with self._lock:
                if self._slot is None:
                    self._idle.set()
            # at most one request per pause (a report that came meanwhile set _wake); flush() cuts it short
            self.pause = pause
            if self._hurry.wait(pause):
                self._hurry.clear()

    def flush(self, timeout: float = 1.0) -> bool:
        """Wait up to `timeout` seconds for the queued report to leave (sent now, not after the pause the
        receiver asked for); True if nothing is left."""
        with self._lock:
            if self._slot is not None:
                self._hurry.set()
        return self._idle.wait(timeout)


class HttpSender:
    """POSTs each body to `url` on one connection kept open between reports (`connections` counts those
    opened): TLS verified against `ca_cert` (when https). The token file is read for each request and the
    CA file for each new connection, so a rotated token or a new operator certificate (the kubelet updates
    both files) is used without a restart. A kept connection that fails before any answer (the endpoint
    closed it while idle) is replaced and the report sent once more; any other failure is raised."""

    def __init__(
        self, url: str, *, ca_cert: str | None, token_path: str | None, timeout: float = 5.0
    ) -> None:
        parts = urlsplit(url)
        self._secure = parts.scheme == "https"
        self._host, self._port = parts.hostname or "", parts.port
        self._path = parts.path + (f"?{parts.query}" if parts.query else "")
        self._ca_cert, self._token_path, self._timeout = ca_cert, token_path, timeout
        self._connection: http.client.HTTPConnection | None = None
        self.connections = 0

    def __call__(self, body: bytes) -> float | None:
        headers = {"Content-Type": "application/json"}
        if self._token_path:
            with open(self._token_path, encoding="utf-8") as file:
                headers["Authorization"] = f"Bearer {file.read().strip()}"
        if self._connection is not None:
            try:
                return self._post(self._connection, body, headers)
            except (ConnectionError, http.client.BadStatusLine, ssl.SSLEOFError):
                pass  # closed by the endpoint while idle: once more, on a new connection
        return self._post(self._open(), body, headers)

    def _open(self) -> http.client.HTTPConnection:
        if self._secure:
            context = ssl.create_default_context(cafile=self._ca_cert)
            connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                self._host, self._port, timeout=self._timeout, context=context
            )
        else:
            connection = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        self._connection = connection
        self.connections += 1
        return connection

    def _post(
        self, connection: http.client.HTTPConnection, body: bytes, headers: dict[str, str]
    ) -> float | None:
        try:
            connection.request("POST", self._path, body=body, headers=headers)
            response = connection.getresponse()
            response.read(64 * 1024)  # the answer is a short JSON message, read whole to reuse the connection
        except BaseException:
            self.close()
            raise
        if response.will_close or not response.isclosed():
            self.close()
        wait = _seconds(response.getheader("Retry-After"))
        if response.status >= 400:
            raise Refused(response.status, wait)
        return wait

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def _seconds(value: str | None) -> float | None:
    """A `Retry-After` of delay-seconds (the only form the operator sends); None for anything else."""
    try:
        seconds = float(value) if value is not None else math.nan
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def http_sender(url: str, *, ca_cert: str | None, token_path: str | None, timeout: float = 5.0) -> HttpSender:
    """The sender of the pods' reports: an `HttpSender`."""
    return HttpSender(url, ca_cert=ca_cert, token_path=token_path, timeout=timeout)


_default: Reporter | None = None
_default_lock = threading.Lock()


def default_reporter(environ: Mapping[str, str] = os.environ) -> Reporter | None:
    """The process's reporter, made from the KEP-2779 env on first use; None when it is not set."""
    global _default  # noqa: PLW0603 - one reporter per process, made on first use
    with _default_lock:
        if _default is None and environ.get(URL_ENV):
            send = http_sender(
                environ[URL_ENV], ca_cert=environ.get(CA_CERT_ENV), token_path=environ.get(TOKEN_ENV)
            )
            _default = Reporter(send)
            atexit.register(_default.flush)
        return _default


def report(step: float | None = None, total: float | None = None, **metrics: Any) -> None:
    """Report this process's progress (`step` of `total`) and latest metrics; a no-op without the env."""
    try:
        reporter = default_reporter()
    except Exception:  # e.g. an unreadable CA file: training goes on without reports
        return
    if reporter is not None:
        reporter.report(step, total, **metrics)


def flush(timeout: float = 1.0) -> bool:
    """Wait up to `timeout` seconds for the last report to leave (done at exit anyway)."""
    reporter = _default
    return reporter.flush(timeout) if reporter is not None else True
