"""Kubeflow's Go training-operator (built by `hack/peers.sh`) on a test plane: the real one, for the
migration and golden-env tests and for the benchmark's `--peer training-operator`.

`tools/peers/peers.txt` pins the Go peers (training-operator, mpi-operator); `hack/peers.sh [NAME]` builds
`<name>` at `<version>` into `${KUBETRAIN_PEERS_DIR:-${XDG_CACHE_HOME:-~/.cache}/kubetrain/peers}/
<name>-<version>/` (`bin/<name>`, the module tree in `src/`, its CRDs under `src/manifests/base/crds`, and
`stamp`, written last); `peers_dir` and `find_peer` compute the same paths.

The operator runs as its Deployment runs it, outside a pod, with what that needs here. It always starts
its webhook server and certificate rotator: the rotator reads the Secret
`training-operator-webhook-cert` of its namespace (`MY_POD_NAMESPACE`) and waits for `tls.crt` in the
fixed directory /tmp/k8s-webhook-server/serving-certs (where its Deployment mounts that Secret), and the
webhook server serves the pair it finds in `$TMPDIR/k8s-webhook-server/serving-certs`. So a self-signed CA
and serving pair, valid for the rotator (it then leaves the Secret alone), goes into the Secret and into a
`TMPDIR` of the run; the fixed directory gets a copy only if it has none, removed afterwards. With
`webhook=True` its ValidatingWebhookConfiguration (from its module's manifests, as its install applies it)
is registered too, pointed at the process (`url: https://127.0.0.1:<port>/...`, a name the serving pair
also carries) instead of its Service, which no kube-proxy routes here; it stays registered after `stop()`,
as when its Deployment is scaled to 0. Ready when each enabled kind's controller has started its workers.

Stdlib-only apart from what kubetrain.testing uses; import it explicitly.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.ecosystem import Component, built, parse_listing
from kubetrain.testing.process import ComponentProcess, free_port, wait_until

__all__ = [
    "CA_NAME",
    "CERT_DIR",
    "LISTING",
    "PEERS_BUILD",
    "SECRET",
    "SERVICE",
    "TRAINING_OPERATOR",
    "WEBHOOK_CONFIGURATION",
    "GoTrainingOperator",
    "find_peer",
    "peers",
    "peers_dir",
    "place_missing",
    "remove_placed",
    "webhook_pair",
]

ROOT = Path(__file__).resolve().parents[2]
LISTING = ROOT / "tools" / "peers" / "peers.txt"
PEERS_BUILD = ROOT / "hack" / "peers.sh"
TRAINING_OPERATOR = "training-operator"
# The names its code fixes (pkg/cert) and its flags' defaults.
CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
SECRET = "training-operator-webhook-cert"
SERVICE = "training-operator"
CA_NAME = "training-operator-ca"
WEBHOOK_CONFIGURATION = "validator.training-operator.kubeflow.org"


def peers_dir(env: Mapping[str, str] | None = None) -> Path:
    """The cache root, by hack/peers.sh's rule (it may not exist yet)."""
    env = os.environ if env is None else env
    if env.get("KUBETRAIN_PEERS_DIR"):
        return Path(env["KUBETRAIN_PEERS_DIR"])
    cache = env.get("XDG_CACHE_HOME") or Path(env.get("HOME") or Path.home()) / ".cache"
    return Path(cache) / "kubetrain" / "peers"


def peers(env: Mapping[str, str] | None = None) -> dict[str, Component]:
    """Every peer of tools/peers/peers.txt, by name."""
    return parse_listing(LISTING.read_text(), peers_dir(env), source=str(LISTING))


def find_peer(name: str, env: Mapping[str, str] | None = None) -> Component:
    """The built peer `name`, or MissingComponentError naming the command that builds it."""
    hint = f"run `bash hack/peers.sh {name}` (builds it from its Go module; a few minutes, cold)"
    return built(peers(env), name, what="Go peer", hint=hint)


# ---------------------------------------------------------------------------- its webhook certificate
def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed ({result.returncode}): {result.stderr.strip()}")


def webhook_pair(
    directory: Path, *, dns_name: str, ca_name: str, ip_addresses: Sequence[str] = ()
) -> dict[str, str]:
    """A self-signed CA (`ca_name`, RSA, 10 years) and a serving pair for `dns_name` (and `ip_addresses`;
    1 year) it signs, as
    the files of a webhook certificate Secret (`ca.crt`, `ca.key`, `tls.crt`, `tls.key`, PEM) written
    into `directory`; returns their contents by file name. RSA PKCS#1 and these names and lifetimes are
    what open-policy-agent's cert rotator generates and accepts as valid."""
    if shutil.which("openssl") is None:
        raise RuntimeError(
            "the `openssl` command is needed to make the training-operator's webhook certificate"
        )
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("genrsa", "-traditional", "-out", "ca.key", "2048", cwd=directory)
    _openssl(
        "req", "-x509", "-new", "-key", "ca.key", "-days", "3650", "-out", "ca.crt",
        "-subj", f"/O={SERVICE}/CN={ca_name}", "-addext", f"subjectAltName=DNS:{ca_name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign",
        cwd=directory,
    )  # fmt: skip
    _openssl("genrsa", "-traditional", "-out", "tls.key", "2048", cwd=directory)
    _openssl("req", "-new", "-key", "tls.key", "-subj", f"/CN={dns_name}", "-out", "tls.csr", cwd=directory)
    names = ",".join([f"DNS:{dns_name}", *(f"IP:{ip}" for ip in ip_addresses)])
    (directory / "tls.ext").write_text(
        f"subjectAltName={names}\nextendedKeyUsage=serverAuth\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
    )
    _openssl(
        "x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-days", "365", "-extfile", "tls.ext", "-out", "tls.crt",
        cwd=directory,
    )  # fmt: skip
    for leftover in ("tls.csr", "tls.ext", "ca.srl"):
        (directory / leftover).unlink(missing_ok=True)
    return {name: (directory / name).read_text() for name in ("ca.crt", "ca.key", "tls.crt", "tls.key")}


def place_missing(source: Path, target: Path, names: Sequence[str]) -> list[Path]:
    """Copy `names` from `source` into `target` where absent; returns what was created (files, then the
    directories this made, innermost first), for `remove_placed`."""
    created_dirs = [d for d in (target, *target.parents) if not d.exists()]
    target.mkdir(parents=True, exist_ok=True)
    created: list[Path] = []
    for name in names:
        with contextlib.suppress(FileExistsError):
            with (target / name).open("x") as handle:
                handle.write((source / name).read_text())
            created.append(target / name)
    return created + created_dirs


def remove_placed(paths: Sequence[Path]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            if path.is_dir():
                path.rmdir()  # only if empty: another run may have put files there since
            else:
                path.unlink()


# ---------------------------------------------------------------------------- the operator
class GoTrainingOperator:
    """The training-operator serving `kinds` on `plane` as the admin; a context manager. Its own namespace
    (`namespace`) holds the webhook Secret. `stop()` is a Deployment scaled to 0: SIGTERM."""

    def __init__(
        self,
        plane: ControlPlane,
        workdir: Path,
        *,
        kinds: Sequence[str],
        namespace: str = "kubeflow",
        peer: Component | None = None,
        webhook: bool = False,
    ) -> None:
        self.plane = plane
        self.workdir = workdir
        self.kinds = tuple(dict.fromkeys(kinds))  # it refuses a scheme enabled twice
        self.namespace = namespace
        self.peer = peer or find_peer(TRAINING_OPERATOR)
        self.webhook = webhook
        self.log_path = workdir / "training-operator.log"
        self._process: ComponentProcess | None = None
        self._placed: list[Path] = []

    @property
    def crds(self) -> Path:
        """Its CRDs' kustomization (all six kinds; MPIJob at kubeflow.org/v1)."""
        return self.peer.source / "manifests" / "base" / "crds"

    def install_crds(self) -> None:
        """Its CRDs as its README installs them: `kubectl apply --server-side -k` (too large for a
        client-side apply's annotation), and Established."""
        self.plane.kubectl("apply", "--server-side", "-k", str(self.crds))
        self.plane.wait_established(*(f"{kind.lower()}s.kubeflow.org" for kind in self.kinds))

    def argv(self, health_port: int, webhook_port: int) -> list[str]:
        schemes = [f"--enable-scheme={kind.lower()}" for kind in self.kinds]
        return [
            str(self.peer.binary), f"--kubeconfig={self.plane.kubeconfig}", *schemes,
            "--leader-elect=false", "--metrics-bind-address=0",
            f"--health-probe-bind-address=127.0.0.1:{health_port}", f"--webhook-server-port={webhook_port}",
            "--zap-log-level=info",
        ]  # fmt: skip

    def start(self, timeout: float = 120.0) -> GoTrainingOperator:
        """Its Secret and certificates, then the process; ready when every kind's workers started."""
        try:
            return self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float) -> GoTrainingOperator:
        tmp = self.workdir / "tmp"
        certs = tmp / "k8s-webhook-server" / "serving-certs"
        dns_name = f"{SERVICE}.{self.namespace}.svc"
        files = webhook_pair(certs, dns_name=dns_name, ca_name=CA_NAME, ip_addresses=["127.0.0.1"])
        self.plane.rest.ensure_namespace(self.namespace)
        metadata = {"name": SECRET, "namespace": self.namespace}
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "stringData": files}
        self.plane.kubectl("apply", "-f", "-", input=json.dumps(secret))
        self._placed = place_missing(certs, CERT_DIR, ("tls.crt", "tls.key"))
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.workdir), "TMPDIR": str(tmp),
            "MY_POD_NAMESPACE": self.namespace, "MY_POD_NAME": SERVICE,
        }  # fmt: skip
        webhook_port = free_port()
        argv = self.argv(free_port(), webhook_port)
        self._process = ComponentProcess(TRAINING_OPERATOR, argv, self.log_path, env)
        wanted = [f'"controller": "{kind.lower()}-controller"' for kind in self.kinds]
        wait_until(
            f"the training-operator's workers for {', '.join(self.kinds)}",
            lambda: all(self._started(want) for want in wanted),
            timeout=timeout, processes=[self._process], interval=0.3,
        )  # fmt: skip
        if self.webhook:
            self._register_webhook(webhook_port, files["ca.crt"])
        return self

    @property
    def webhook_manifests(self) -> Path:
        return self.peer.source / "manifests" / "base" / "webhook"

    def _register_webhook(self, port: int, ca: str) -> None:
        """Its ValidatingWebhookConfiguration, each webhook calling this process."""
        rendered = self.plane.kubectl(
            "create", "--dry-run=client", "-o", "json", "-k", str(self.webhook_manifests)
        )
        config = json.loads(rendered.stdout)
        assert config["metadata"]["name"] == WEBHOOK_CONFIGURATION, config["metadata"]
        for hook in config["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            bundle = base64.b64encode(ca.encode()).decode()
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
        self.plane.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(config))

    def _started(self, controller: str) -> bool:
        return any("Starting workers" in line and controller in line for line in self.log_lines())

    def log_lines(self) -> list[str]:
        return self.log_path.read_text(errors="replace").splitlines() if self.log_path.exists() else []

    @property
    def process(self) -> ComponentProcess:
        if self._process is None:
            raise RuntimeError("the training-operator is not started")
        return self._process

    def stop(self) -> None:
        """SIGTERM (what scaling its Deployment to 0 sends), then wait for it to exit."""
        if self._process is not None:
            self._process.signal(signal.SIGTERM)
            self._process.stop(grace=15.0)
            self._process = None
        remove_placed(self._placed)
        self._placed = []

    def __enter__(self) -> GoTrainingOperator:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
