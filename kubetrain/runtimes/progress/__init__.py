"""Training progress from inside the pod: `report(step=..., total=..., **metrics)`, sent to the operator.

    from kubetrain.runtimes import progress
    for step in range(total):
        loss = train_step()
        progress.report(step=step + 1, total=total, loss=loss, accuracy=acc)

The operator (or `kubetrain run --local`) injects the KEP-2779 env (`kubetrain.runtimes.contract.progress`);
without it, `report` does nothing, so the same script runs anywhere. Callbacks for Keras, Hugging Face
Transformers, PyTorch Lightning and XGBoost are in `kubetrain.runtimes.progress.callbacks`.

What the training loop may rely on:
- `report` never raises and never blocks: it computes the percentage and the ETA (from the step rate seen
  so far), encodes the body and leaves it in a one-report slot; a background thread sends it. A newer
  report replaces one not yet sent (the receiver keeps only the latest anyway).
- At most one request per `min_interval` seconds leaves the process, each with a short timeout. When the
  endpoint cannot be reached, reports are dropped (counted in `dropped`), and the sender waits
  `retry_after` seconds before it tries again.
- At exit (or `flush()`), the last report is sent if it can be within a second, so the final metrics land.

Standard library only: a training image needs nothing else to report.
"""

from __future__ import annotations

import atexit
import os
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from kubetrain.runtimes.contract.progress import CA_CERT_ENV, TOKEN_ENV, URL_ENV, report_body

__all__ = ["Reporter", "default_reporter", "flush", "report"]

Send = Callable[[bytes], None]


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
        self._idle = threading.Event()
        self._idle.set()
        self._first: tuple[float, float] | None = None
        self._thread: threading.Thread | None = None
        self.sent = 0
        self.dropped = 0

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
            pause = self._min_interval
            try:
                self._send(body)
                self.sent += 1
            except Exception:  # unreachable, refused, timed out: drop and wait
                self.dropped += 1
                pause = self._retry_after
            with self._lock:
                if self._slot is None:
                    self._idle.set()
            time.sleep(pause)  # at most one request per pause; a report that came meanwhile set _wake

    def flush(self, timeout: float = 1.0) -> bool:
        """Wait up to `timeout` seconds for the queued report to leave; True if nothing is left."""
        return self._idle.wait(timeout)


def http_sender(url: str, *, ca_cert: str | None, token_path: str | None, timeout: float = 5.0) -> Send:
    """POSTs a body to `url`: TLS verified against `ca_cert` (when https); the token file and the CA file are
    read each time, so a rotated token or a new operator certificate (the kubelet updates both files) is
    used without a restart."""
    secure = url.startswith("https:")

    def send(body: bytes) -> None:
        context = ssl.create_default_context(cafile=ca_cert) if secure else None
        headers = {"Content-Type": "application/json"}
        if token_path:
            with open(token_path, encoding="utf-8") as file:
                headers["Authorization"] = f"Bearer {file.read().strip()}"
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            response.read(1024)

    return send


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
