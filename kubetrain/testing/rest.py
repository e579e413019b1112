"""A few HTTPS calls to the test API server as the admin user, for the plane's own bookkeeping.

Starting the plane needs to poll `/readyz`, create fake nodes and check that controllers came up; doing
that through `kubectl` would spawn dozens of processes on a 2-core machine. Tests themselves use
`ControlPlane.kubectl` or a real client library, never this.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["AdminRest", "http_ok"]


@dataclass(frozen=True)
class AdminRest:
    """Admin-authenticated JSON requests to one API server."""

    server: str
    ca_file: Path
    cert_file: Path
    key_file: Path

    def _context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        context.load_cert_chain(str(self.cert_file), str(self.key_file))
        return context

    def request(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> tuple[int, Any]:
        """(HTTP status, decoded JSON body or None). HTTP errors are returned, not raised."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self._context()) as resp:
                return int(resp.status), _decode(resp.read())
        except urllib.error.HTTPError as err:
            with err:
                return int(err.code), _decode(err.read())

    def get(self, path: str) -> tuple[int, Any]:
        return self.request("GET", path)

    def stream(self, path: str, timeout: float = 30.0) -> Iterator[Any]:
        """The decoded JSON lines of a GET that answers one object per line (a watch), until the server
        ends it; an HTTP error raises `urllib.error.HTTPError`."""
        req = urllib.request.Request(self.server + path, method="GET")
        req.add_header("Accept", "application/json")
        with urllib.request.urlopen(req, timeout=timeout, context=self._context()) as resp:
            for line in resp:
                if line.strip():
                    yield json.loads(line)

    def ready(self) -> bool:
        """True when `/readyz` answers 200 (every post-start hook, RBAC bootstrap included, is done)."""
        status, _ = self.request("GET", "/readyz", timeout=5.0)
        return status == 200

    def create(self, path: str, body: Any) -> None:
        """POST `body`; an object that already exists counts as created."""
        status, answer = self.request("POST", path, body)
        if status not in (200, 201, 202, 409):
            raise RuntimeError(f"POST {path} failed with {status}: {answer}")

    def ensure_namespace(self, name: str) -> None:
        self.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )


def http_ok(url: str) -> bool:
    """GET `url` answers 200 (TLS not verified: for the scheduler's self-signed port and plain http)."""
    context = ssl._create_unverified_context() if url.startswith("https") else None
    try:
        with urllib.request.urlopen(url, timeout=3.0, context=context) as resp:
            return int(resp.status) == 200
    except urllib.error.HTTPError as err:
        err.close()
        return False


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw.decode("utf-8", "replace")
