"""Kueue (built by `hack/ecosystem.sh`) beside a test control plane, run as its standard install runs it.

The standard install (Kueue's `config/default`) runs the manager with its default configuration
(`config/components/manager/controller_manager_config.yaml`), registers Kueue's mutating and validating
webhooks with the API server and serves them from the manager. Here the manager is a local process with the
admin kubeconfig and:

- that default configuration, read at start from the module tree the binary was built from, changed only
  where a test plane must differ (health probes, metrics and webhook server on loopback ports, the test's
  serving certificate instead of internal certificate management, leader election off) and by the additions
  `manifests/kueue/integrations.yaml` tells a user to make (the recipe we document, so the tests exercise
  it). A test may ask for more: Kueue's own integration of a kind switched back on (`frameworks_on`), or
  `waitForPodsReady`;
- its metrics certificate where Kueue reads it when internal certificate management is off
  (`/etc/kueue/metrics/certs`, cert-manager's volume in its pod): Kueue runs in a mount namespace of its own
  whose /etc is overlaid with the test's pair (`unshare`, as root);
- feature gate `VisibilityOnDemand=false`: its API server writes its certificate to a fixed `/visibility`
  directory and wants in-cluster extras that a test plane lacks;
- Kueue's CRDs from the module tree it was built from, applied server-side (`workloads` is large);
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
import copy
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from kubetrain.testing.certs import make_serving_tls
from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.ecosystem import Component, find_component
from kubetrain.testing.process import ComponentProcess, free_port, wait_until
from kubetrain.testing.rest import http_ok

__all__ = [
    "KUEUE_NAMESPACE",
    "RECIPE",
    "Kueue",
    "configuration",
    "default_configuration",
    "webhook_configurations",
]

KUEUE_NAMESPACE = "kueue-system"
RECIPE = Path(__file__).resolve().parents[2] / "manifests" / "kueue" / "integrations.yaml"
"""The configuration fragment that manifests/README.md tells users to keep in Kueue's configuration."""
METRICS_CERTS = Path("/etc/kueue/metrics/certs")
"""Where Kueue v0.19 reads its metrics serving pair when internal certificate management is off."""
CONFIGMAP, CONFIG_KEY = "kueue-manager-config", "controller_manager_config.yaml"
"""Where Kueue's install keeps its configuration (`config/components/manager`, prefixed `kueue-`)."""
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


def default_configuration(source: Path) -> dict[str, Any]:
    """The configuration Kueue's release installs (its `kueue-manager-config`), from the module tree."""
    text = (source / "config" / "components" / "manager" / "controller_manager_config.yaml").read_text()
    found: dict[str, Any] = yaml.safe_load(text)
    return found


def configuration(
    default: Mapping[str, Any],
    listeners: Mapping[str, Any],
    *,
    frameworks_on: Sequence[str] = (),
    external: Sequence[str] = (),
    wait_for_pods_ready: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """`default` with `listeners` in place of its own sections, the recipe's integrations added to its
    lists, and the test's extras.

    A kind whose Kueue integration is switched on leaves `externalFrameworks`: Kueue refuses a kind that
    is both (a `Duplicate` error at start), so a user who switches it on must take it out as well."""
    config = {**copy.deepcopy(dict(default)), **copy.deepcopy(dict(listeners))}
    integrations = config.setdefault("integrations", {})
    recipe = yaml.safe_load(RECIPE.read_text())["integrations"]
    if external:
        recipe = {**recipe, "externalFrameworks": [*recipe.get("externalFrameworks", []), *external]}
    for key, values in recipe.items():
        known = integrations.setdefault(key, [])
        known.extend(v for v in values if v not in known)
    frameworks = integrations.setdefault("frameworks", [])
    frameworks.extend(f for f in frameworks_on if f not in frameworks)
    switched = {_framework_kind(f) for f in frameworks_on}
    if "externalFrameworks" in integrations:
        kept = [e for e in integrations["externalFrameworks"] if _external_kind(e) not in switched]
        integrations["externalFrameworks"] = kept
    if wait_for_pods_ready is not None:
        config["waitForPodsReady"] = dict(wait_for_pods_ready)
    return config


def _framework_kind(framework: str) -> tuple[str, str]:
    """`kubeflow.org/tfjob` -> (`kubeflow.org`, `tfjob`)."""
    group, _, kind = framework.partition("/")
    return group, kind.lower()


def _external_kind(external: str) -> tuple[str, str]:
    """`TFJob.v1.kubeflow.org` -> (`kubeflow.org`, `tfjob`)."""
    kind, _, rest = external.partition(".")
    return rest.partition(".")[2], kind.lower()


class Kueue:
    """One Kueue manager on `plane`; a context manager. `workdir` holds its config, certificate and log."""

    def __init__(
        self,
        plane: ControlPlane,
        workdir: Path,
        *,
        component: Component | None = None,
        frameworks_on: Sequence[str] = (),
        external: Sequence[str] = (),
        wait_for_pods_ready: Mapping[str, Any] | None = None,
        kubeconfig: Path | None = None,
    ) -> None:
        """`frameworks_on`: Kueue integrations to switch on beside its defaults (e.g. `kubeflow.org/tfjob`);
        `external`: more `externalFrameworks` (an operator's own kind, as its docs say to add it);
        `wait_for_pods_ready`: Kueue's `waitForPodsReady` section; `kubeconfig`: whom Kueue runs as (default:
        the admin; a benchmark gives it an identity of its own, to count its requests)."""
        self.plane = plane
        self.kubeconfig = kubeconfig or plane.kubeconfig
        self.frameworks_on = tuple(frameworks_on)
        self.external = tuple(external)
        self.wait_for_pods_ready = dict(wait_for_pods_ready) if wait_for_pods_ready else None
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
        """Kueue's configuration file for this plane (see the module docstring)."""
        listeners = {
            "namespace": KUEUE_NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{self.metrics_port}"},
            "webhook": {"host": "127.0.0.1", "port": self.webhook_port, "certDir": str(cert_dir)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
        }
        return configuration(
            default_configuration(self.component.source),
            listeners,
            frameworks_on=self.frameworks_on,
            external=self.external,
            wait_for_pods_ready=self.wait_for_pods_ready,
        )

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
        settings = self.configuration(tls.directory)
        config = self.workdir / "kueue-config.yaml"
        config.write_text(json.dumps(settings, indent=1))  # JSON is YAML
        self.publish_configuration(settings)
        # Level 3: Kueue's reconcilers log each decision (a job ignored, a Workload admitted or evicted).
        argv = [
            str(self.component.binary), f"--config={config}", f"--kubeconfig={self.kubeconfig}",
            "--feature-gates=VisibilityOnDemand=false", "--zap-log-level=3",
        ]  # fmt: skip
        argv = self._with_metrics_certificate(argv, tls.crt, tls.key)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.workdir)}
        self._process = ComponentProcess("kueue", argv, self.log_path, env)
        ready = f"http://127.0.0.1:{self.health_port}/readyz"
        wait_until("kueue /readyz", lambda: http_ok(ready), timeout=timeout, processes=[self._process])
        self.register_webhooks(tls.ca_crt.read_bytes())
        return self

    def _with_metrics_certificate(self, argv: list[str], crt: Path, key: Path) -> list[str]:
        """`argv` run where Kueue finds its metrics certificate at METRICS_CERTS, as the volume that
        cert-manager fills in Kueue's pod puts it there (Kueue reads that fixed path whenever internal
        certificate management is off): in a mount namespace of its own, /etc overlaid with a directory
        that holds the test's pair, so the host's /etc is never written."""
        upper, work = self.workdir / "etc-overlay", self.workdir / "etc-overlay-work"
        certs = upper / METRICS_CERTS.relative_to("/etc")
        certs.mkdir(parents=True, exist_ok=True)
        work.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(crt, certs / "tls.crt")
        shutil.copyfile(key, certs / "tls.key")
        script = (
            'mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1,workdir=$2" /etc && shift 2 && exec "$@"'
        )
        namespace = ["unshare", "--mount", "--propagation", "private"]
        return [*namespace, "sh", "-c", script, "sh", str(upper), str(work), *argv]

    def publish_configuration(self, settings: Mapping[str, Any]) -> None:
        """The configuration also in the ConfigMap where Kueue's install keeps it, for those who read it
        there (the operator's `--kueue-integration=auto` does)."""
        configmap = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CONFIGMAP, "namespace": KUEUE_NAMESPACE},
            "data": {CONFIG_KEY: yaml.safe_dump(dict(settings), sort_keys=False)},
        }
        self.plane.kubectl("apply", "-f", "-", input=json.dumps(configmap))

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
