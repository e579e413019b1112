"""Kueue (built by `hack/ecosystem.sh`) beside a test control plane, run as its standard install runs it.

The standard install (Kueue's `config/default`) runs the manager with a configuration file, registers
Kueue's mutating and validating webhooks with the API server and serves them from the manager. Here the
manager is a local process with the admin kubeconfig and:

- a configuration file: leader election off, internal certificate management off (the test makes the
  serving certificate), webhook server, health probes and metrics on loopback ports, and the integrations
  of `manifests/kueue/integrations.yaml` (the recipe we document, so the tests exercise it);
- feature gate `VisibilityOnDemand=false` (its API server wants in-cluster extras that a test plane lacks);
- Kueue's CRDs from the module tree it was built from, applied server-side (`workloads` is ~650 KB);
- Kueue's own webhook configurations (`config/components/webhook`, rendered with kustomize as the release
  does), each webhook's `clientConfig` rewritten from the in-cluster Service to `url` at the loopback port
  with the test CA as `caBundle`. Nothing else is changed: every webhook, rule, selector and failure policy
  is Kueue's.

stop() removes the webhook configurations before it stops the manager: with failurePolicy Fail they
would otherwise refuse every pod create on the plane.

Imports PyYAML, so `kubetrain.testing` does not import this module: import it explicitly.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from kubetrain.testing.certs import make_serving_tls
from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.ecosystem import Component, find_component
from kubetrain.testing.process import ComponentProcess, free_port, wait_until
from kubetrain.testing.rest import http_ok

__all__ = ["KUEUE_NAMESPACE", "RECIPE", "Kueue", "webhook_configurations"]

KUEUE_NAMESPACE = "kueue-system"
RECIPE = Path(__file__).resolve().parents[2] / "manifests" / "kueue" / "integrations.yaml"
"""The configuration fragment that manifests/README.md tells users to keep in Kueue's configuration."""
_WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
_NAME_PREFIX = "kueue-"  # what Kueue's config/default kustomization prefixes to every name


def webhook_configurations(
    plane: ControlPlane, source: Path, url: str, ca_bundle: bytes
) -> list[dict[str, Any]]:
    """Kueue's webhook configurations from its module tree, each webhook called at `url` + its path."""
    rendered = plane.kubectl("kustomize", str(source / "config" / "components" / "webhook")).stdout
    found = [d for d in yaml.safe_load_all(rendered) if d and d.get("kind") in _WEBHOOK_KINDS]
    bundle = base64.b64encode(ca_bundle).decode()
    for config in found:
        config["metadata"] = {"name": _NAME_PREFIX + config["metadata"]["name"]}
        for hook in config["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"{url}{path}", "caBundle": bundle}
    if len(found) != len(_WEBHOOK_KINDS):
        raise RuntimeError(f"expected Kueue's two webhook configurations in {source}, found {len(found)}")
    return found


class Kueue:
    """One Kueue manager on `plane`; a context manager. `workdir` holds its config, certificate and log."""

    def __init__(self, plane: ControlPlane, workdir: Path, *, component: Component | None = None) -> None:
        self.plane = plane
        self.workdir = workdir
        self.component = component or find_component("kueue")
        self.webhook_port = free_port()
        self.health_port = free_port()
        self.metrics_port = free_port()
        self.log_path = workdir / "kueue.log"
        self._process: ComponentProcess | None = None
        self._registered: list[str] = []

    @property
    def process(self) -> ComponentProcess:
        if self._process is None:
            raise RuntimeError("Kueue is not started")
        return self._process

    def configuration(self, cert_dir: Path) -> dict[str, Any]:
        """Kueue's configuration file for this plane: the recipe's integrations on loopback listeners."""
        recipe = yaml.safe_load(RECIPE.read_text())
        return {
            "apiVersion": "config.kueue.x-k8s.io/v1beta1",
            "kind": "Configuration",
            "namespace": KUEUE_NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{self.metrics_port}"},
            "webhook": {"host": "127.0.0.1", "port": self.webhook_port, "certDir": str(cert_dir)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "clientConnection": {"qps": 50, "burst": 100},
            "integrations": recipe["integrations"],
        }

    def start(self, timeout: float = 120.0) -> Kueue:
        """Install the CRDs, start the manager, register its webhooks; on failure nothing is left behind."""
        try:
            return self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float) -> Kueue:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.install_crds()
        self.plane.rest.ensure_namespace(KUEUE_NAMESPACE)
        tls = make_serving_tls(self.workdir / "webhook-tls", "kueue-webhook")
        config = self.workdir / "kueue-config.yaml"
        config.write_text(json.dumps(self.configuration(tls.directory), indent=1))  # JSON is YAML
        # Level 3: Kueue's job reconciler logs each job it ignores (no queue name), which tests read as
        # proof that it looked at a job and left it alone.
        argv = [
            str(self.component.binary), f"--config={config}", f"--kubeconfig={self.plane.kubeconfig}",
            "--feature-gates=VisibilityOnDemand=false", "--zap-log-level=3",
        ]  # fmt: skip
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.workdir)}
        self._process = ComponentProcess("kueue", argv, self.log_path, env)
        ready = f"http://127.0.0.1:{self.health_port}/readyz"
        wait_until("kueue /readyz", lambda: http_ok(ready), timeout=timeout, processes=[self._process])
        self.register_webhooks(tls.ca_crt.read_bytes())
        return self

    def install_crds(self) -> None:
        bases = self.component.source / "config" / "components" / "crd" / "bases"
        self.plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(bases))
        for crd in sorted(bases.glob("*.yaml")):
            name = yaml.safe_load(crd.read_text())["metadata"]["name"]
            self.plane.wait_established(name)

    def register_webhooks(self, ca_bundle: bytes) -> None:
        url = f"https://127.0.0.1:{self.webhook_port}"
        configs = webhook_configurations(self.plane, self.component.source, url, ca_bundle)
        self._registered = [f"{c['kind'].lower()}/{c['metadata']['name']}" for c in configs]
        self.plane.kubectl(
            "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": configs})
        )

    def unregister_webhooks(self) -> None:
        if self._registered:
            self.plane.kubectl("delete", "--ignore-not-found", *self._registered)
            self._registered = []

    def stop(self) -> None:
        """Unregister the webhooks, then stop the manager. Idempotent."""
        try:
            self.unregister_webhooks()
        finally:
            if self._process is not None:
                self._process.stop(grace=10.0)
                self._process = None

    def log_tail(self, lines: int = 40) -> str:
        return self.process.log_tail(lines)

    def __enter__(self) -> Kueue:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
