"""The progress endpoint of a local run: KEP-2779 reports from the replicas, over HTTPS on loopback.

A cluster's pods POST `{"trainerStatus": {...}}` to the operator over HTTPS with a projected token. A local
run's replicas get the same three variables (`env()`): `KUBEFLOW_TRAINER_SERVER_URL` pointing at
`https://127.0.0.1:<port>/apis/.../<plural>/<name>/status`, `KUBEFLOW_TRAINER_SERVER_CA_CERT` (a
self-signed certificate made for the run) and `KUBEFLOW_TRAINER_SERVER_TOKEN` (a random token made for the
run, in a file only this user can read, so another user of the machine cannot report). So the same helpers
(`kubetrain.runtimes.progress`), Transformers' `KubeflowCallback` and the Kubeflow SDK report unchanged:
both send nothing without a token file.

The receiver checks what the operator checks of a request (the path is this job's, the token, at most
`MAX_BODY_BYTES`, a body `from_report` reads) and keeps only the latest report, answering 200; the runner
takes it on its next tick and writes it to the job's status, where the live view and the summary read it.
"""

from __future__ import annotations

import datetime
import hmac
import http.server
import json
import secrets
import ssl
import threading
from pathlib import Path
from typing import Any

from kubetrain.api import TrainerStatus
from kubetrain.api.trainerstatus import from_report
from kubetrain.common.servingcert import generate, load_pem
from kubetrain.podcontract.progress import CA_CERT_ENV, MAX_BODY_BYTES, TOKEN_ENV, URL_ENV, status_path

__all__ = ["ReportReceiver"]


class ReportReceiver:
    """A loopback HTTPS server for one job's reports, its certificate and token kept in `directory`;
    `take()` returns the latest report not yet taken."""

    def __init__(self, api_version: str, namespace: str, plural: str, name: str, *, directory: Path) -> None:
        self.path = status_path(api_version, namespace, plural, name)
        self.ca_cert, self.token_file = _credentials(directory)
        self._token = self.token_file.read_text()
        self._latest: TrainerStatus | None = None
        self._lock = threading.Lock()
        self.accepted = 0
        self.refused = 0
        receiver = self

        class Handler(_Handler):
            owner = receiver

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.socket = _context(directory).wrap_socket(self._server.socket, server_side=True)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="local-reports", daemon=True)

    @property
    def url(self) -> str:
        """What the replicas get as `KUBEFLOW_TRAINER_SERVER_URL`."""
        return f"https://127.0.0.1:{self._server.server_address[1]}{self.path}"

    def env(self) -> dict[str, str]:
        """The three variables every replica gets, as the operator gives them."""
        return {URL_ENV: self.url, CA_CERT_ENV: str(self.ca_cert), TOKEN_ENV: str(self.token_file)}

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def take(self) -> TrainerStatus | None:
        with self._lock:
            latest, self._latest = self._latest, None
            return latest

    def offer(self, path: str, authorization: str | None, body: bytes) -> tuple[int, str]:
        """Check one request; keep its report when valid. Returns (HTTP status, message)."""
        if path != self.path:
            return self._refuse(404, f"reports for this run go to {self.path}")
        if not hmac.compare_digest((authorization or "").encode(), f"Bearer {self._token}".encode()):
            return self._refuse(401, f"the run's token (the file {TOKEN_ENV} names) is needed")
        try:
            now = datetime.datetime.now(datetime.UTC)
            status = from_report(json.loads(body), now)
        except (ValueError, TypeError, RecursionError) as error:
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


_DRAIN_LIMIT = 4 * MAX_BODY_BYTES
"""An oversized report up to this size is read before it is refused, so that its sender gets the 413."""


class _Handler(http.server.BaseHTTPRequestHandler):
    owner: ReportReceiver
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            code, message = self.owner._refuse(413, f"a report is at most {MAX_BODY_BYTES} bytes")
            self.close_connection = True
            if length <= _DRAIN_LIMIT:
                # read what the client is sending: a close with unread data resets the connection, and a
                # reset can reach the client before the 413 does, which then sees no answer at all
                self.rfile.read(length)
        else:
            body = self.rfile.read(length)
            code, message = self.owner.offer(self.path, self.headers.get("Authorization"), body)
        payload = message.encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the run's console is for the replicas' output."""


def _credentials(directory: Path) -> tuple[Path, Path]:
    """The run's certificate (made for 127.0.0.1 and localhost, valid for a week) and token files."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    now = datetime.datetime.now(datetime.UTC)
    names = ["127.0.0.1", "localhost"]
    pem = generate(
        names, common_name="kubetrain-local-progress", valid=datetime.timedelta(days=7), ca=True, now=now
    )
    cert = pem[: pem.index(b"-----BEGIN PRIVATE KEY-----")]
    (directory / "serving.pem").write_bytes(pem)
    (directory / "serving.pem").chmod(0o600)
    (directory / "ca.crt").write_bytes(cert)
    token = directory / "token"
    token.write_text(secrets.token_urlsafe(32))
    token.chmod(0o600)
    return directory / "ca.crt", token


def _context(directory: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    load_pem(context, (directory / "serving.pem").read_bytes())
    return context
