"""The progress endpoint of a local run: KEP-2779 reports from the replicas, over plain HTTP on loopback.

A cluster's pods POST `{"trainerStatus": {...}}` to the operator over HTTPS with a projected token. A local
run has no cluster and no other users, so its replicas get the same `KUBEFLOW_TRAINER_STATUS_URL` pointing
at `http://127.0.0.1:<port>/apis/.../<plural>/<name>/status`, and neither a CA nor a token: the same
helpers (`kubetrain.runtimes.progress`) and the same examples report unchanged.

The receiver checks what the operator checks of a body (the path is this job's, at most `MAX_BODY_BYTES`,
a valid `TrainerStatus` within its bounds) and keeps only the latest report; the runner takes it on its
next tick and writes it to the job's status, where the live view and the summary read it.
"""

from __future__ import annotations

import http.server
import json
import threading
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from kubetrain.api import TrainerStatus
from kubetrain.podcontract.progress import MAX_BODY_BYTES, status_path

__all__ = ["ReportReceiver"]


class ReportReceiver:
    """A loopback HTTP server for one job's reports; `take()` returns the latest one not yet taken."""

    def __init__(self, api_version: str, namespace: str, plural: str, name: str) -> None:
        self.path = status_path(api_version, namespace, plural, name)
        self._latest: TrainerStatus | None = None
        self._lock = threading.Lock()
        self.accepted = 0
        self.refused = 0
        receiver = self

        class Handler(_Handler):
            owner = receiver

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="local-reports", daemon=True)

    @property
    def url(self) -> str:
        """What the replicas get as `KUBEFLOW_TRAINER_STATUS_URL`."""
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.path}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def take(self) -> TrainerStatus | None:
        with self._lock:
            latest, self._latest = self._latest, None
            return latest

    def offer(self, path: str, body: bytes) -> tuple[int, str]:
        """Check one request; keep its report when valid. Returns (HTTP status, message)."""
        if path != self.path:
            return self._refuse(404, f"reports for this run go to {self.path}")
        try:
            document: Any = json.loads(body)
            report = document["trainerStatus"]
            status = TrainerStatus.model_validate({**report, "lastUpdatedTime": datetime.now(UTC)})
        except (ValueError, KeyError, TypeError, ValidationError) as error:
            shape = '{"trainerStatus": {...}}'
            return self._refuse(400, f"the body must be {shape} within its bounds: {error}")
        with self._lock:
            self._latest = status
            self.accepted += 1
        return 200, "{}"

    def _refuse(self, code: int, message: str) -> tuple[int, str]:
        with self._lock:
            self.refused += 1
        return code, json.dumps({"message": message})


class _Handler(http.server.BaseHTTPRequestHandler):
    owner: ReportReceiver
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            code, message = self.owner._refuse(413, f"a report is at most {MAX_BODY_BYTES} bytes")
            self.close_connection = True
        else:
            code, message = self.owner.offer(self.path, self.rfile.read(length))
        payload = message.encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the run's console is for the replicas' output."""
