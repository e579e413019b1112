"""A real admission webhook for tests: an HTTPS server in the test process, registered with the API server.

Why: what an API server does with the answer of a webhook (a JSONPatch applied after the request was
decoded, then validated against the CRD schema) cannot be faked. Kueue, Go controllers and policy engines
are webhooks; a test that needs their effect on our objects registers one of these with the behaviour it
needs (a Python function from the AdmissionReview request to a list of JSONPatch operations).

The registration is scoped to one namespace (`namespaceSelector` on the automatic
`kubernetes.io/metadata.name` label), so tests sharing the control plane are not touched, and it is
removed on exit. The serving certificate comes from a fresh throw-away CA (`certs.make_pki`), which the
registration carries as its `caBundle`.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kubetrain.testing.certs import make_pki
from kubetrain.testing.controlplane import ControlPlane

__all__ = ["MutatingWebhook", "Patcher", "mutating_webhook", "wait_until_called"]

Patcher = Callable[[dict[str, Any]], list[dict[str, Any]]]
"""From an AdmissionReview `request` to the JSONPatch operations to return (empty: allow unchanged)."""


@dataclass
class MutatingWebhook:
    """A running webhook: the AdmissionReview requests it has answered, newest last."""

    name: str
    requests: list[dict[str, Any]] = field(default_factory=list)


def _handler(patcher: Patcher, seen: list[dict[str, Any]]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            request: dict[str, Any] = review["request"]
            seen.append(request)
            response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
            operations = patcher(request)
            if operations:
                patch = base64.b64encode(json.dumps(operations).encode()).decode()
                response.update(patchType="JSONPatch", patch=patch)
            body = json.dumps(
                {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
            )
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, format: str, *args: Any) -> None:
            return  # the API server's calls would flood the test output

    return Handler


def _registration(name: str, url: str, ca: bytes, namespace: str, rules: list[dict[str, Any]]) -> str:
    webhook = {
        "name": f"{name}.kubetrain.test",
        "clientConfig": {"url": url, "caBundle": base64.b64encode(ca).decode()},
        "rules": rules,
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "timeoutSeconds": 10,
    }
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [webhook],
    }
    return json.dumps(config)


@contextmanager
def mutating_webhook(
    plane: ControlPlane,
    namespace: str,
    rules: list[dict[str, Any]],
    patcher: Patcher,
    *,
    workdir: Path,
    name: str = "kubetrain-test-webhook",
) -> Iterator[MutatingWebhook]:
    """Serve `patcher` over HTTPS and register it for `rules` in `namespace` only, until the block ends."""
    pki = make_pki(workdir)
    hook = MutatingWebhook(name=name)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(patcher, hook.requests))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.serving_crt, pki.serving_key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, name=f"webhook-{name}", daemon=True)
    thread.start()
    url = f"https://127.0.0.1:{server.server_address[1]}/mutate"
    try:
        config = _registration(name, url, pki.ca_crt.read_bytes(), namespace, rules)
        plane.kubectl("apply", "-f", "-", input=config)
        yield hook
    finally:
        plane.kubectl("delete", "mutatingwebhookconfiguration", name, "--ignore-not-found", check=False)
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def wait_until_called(hook: MutatingWebhook, probe: Callable[[], object], timeout: float = 30.0) -> None:
    """Repeat `probe` (e.g. a dry-run create) until the API server has called the webhook at least once.

    The API server learns of a new registration through a watch, a moment after `kubectl apply` returns.
    """
    deadline = time.monotonic() + timeout
    while not hook.requests:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the API server did not call webhook {hook.name} within {timeout:.0f} s")
        probe()
        if not hook.requests:
            time.sleep(0.5)
