"""The Go peers: Kubeflow's own operators for the same kinds, measured beside kubetrain (`--peer NAME`).

`tools/peers/peers.txt` pins each peer's Go module, version and main package; `hack/peers.sh` builds `<name>`
at `<version>` into `${KUBETRAIN_PEERS_DIR:-${XDG_CACHE_HOME:-~/.cache}/kubetrain/peers}/<name>-<version>/`
(`bin/<name>`, the module tree in `src/`, and `stamp`, written last); this module computes the same paths.

Each peer runs as the Deployment of its own manifests runs it, outside a pod, with what that needs here,
and with kubetrain's client limits and worker count (`Limits`, the bench's floor settings) instead of its
own lower defaults. Like every process under test it acts as a ServiceAccount of its own (its requests
are counted in the audit log) and watches every namespace.

training-operator (PyTorchJob, TFJob; its start-up needs are `kubetrain.testing.training_operator`'s,
shared with the migration tests): `--enable-scheme` the measured kind only; `--kube-api-qps`,
`--kube-api-burst`, `--controller-threads`; no leader election (as kubetrain is run); its metrics on a
loopback port (`{port3}`), read at the end of the run for controller-runtime's reconcile histogram; info
logging (its default is development mode, debug). It always starts its webhook server and certificate
rotator, whatever is registered: the rotator reads the Secret `training-operator-webhook-cert` of its
namespace (`MY_POD_NAMESPACE`, set to the run's) and waits for `tls.crt` in the fixed directory
/tmp/k8s-webhook-server/serving-certs (where its Deployment mounts that Secret), and the webhook server
serves the pair it finds in `$TMPDIR/k8s-webhook-server/serving-certs`. So a self-signed CA and serving
pair, valid for the rotator (it then leaves the Secret alone), goes into the Secret and into a
`TMPDIR` of the run; the fixed directory gets a copy only if it has none, removed after the run. The
webhooks are not registered. Ready when the measured kind's controller has started its workers.

mpi-operator (MPIJob v2beta1): `--kube-api-qps`, `--kube-api-burst`, `--threadiness`, and its work-queue
limits `--controller-queue-rate-limit`/`--controller-queue-burst` lifted to the same QPS and burst. It
always runs leader election, in `--lock-namespace` (the run's); it reads `KUBECONFIG` before
`--kubeConfig`, so that variable is removed. Its launcher is a batch/v1 Job, so the control plane runs the
kube-controller-manager's job controller (`extra_controllers`). Its health endpoint binds :8080 on every
interface (fixed): that port must be free. Ready once it logs `Started workers`.
"""

from __future__ import annotations

import asyncio
import shlex
import socket
import subprocess
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from kubetrain.api import MPIJOB, PYTORCHJOB, TFJOB, KindInfo
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.resources import SECRETS
from kubetrain.testing.ecosystem import Component, parse_listing
from kubetrain.testing.training_operator import (
    CA_NAME,
    CERT_DIR,
    LISTING,
    PEERS_BUILD,
    SECRET,
    SERVICE,
    TRAINING_OPERATOR,
    peers,
    peers_dir,
    place_missing,
    remove_placed,
    webhook_pair,
)
from opbench.runner import Command
from opbench.subject import Readiness

__all__ = [
    "LISTING",
    "PEER_KINDS",
    "Limits",
    "Peer",
    "build_peers",
    "extra_controllers",
    "load_peers",
    "parse_peer_names",
    "peer_command",
    "peers",
    "peers_dir",
    "webhook_pair",
]

BUILD_SCRIPT = PEERS_BUILD
MPI_OPERATOR = "mpi-operator"
PEER_KINDS: Mapping[str, tuple[KindInfo, ...]] = {
    TRAINING_OPERATOR: (PYTORCHJOB, TFJOB),
    MPI_OPERATOR: (MPIJOB,),
}
"""The kinds each peer can run: training-operator's MPIJob is kubeflow.org/v1, not kubetrain's v2beta1."""

_NOT_INHERITED = frozenset({"KUBECONFIG", "KUBEFLOW_NAMESPACE"})
# training-operator: the names its code fixes (pkg/cert) and its flags' defaults.
_TO_CERT_DIR = CERT_DIR
_TO_SECRET = SECRET
_TO_SERVICE = SERVICE
_TO_CA_NAME = CA_NAME
_place_missing = place_missing
_remove = remove_placed
_MPI_HEALTH_PORT = 8080


@dataclass(frozen=True)
class Limits:
    """Client rate limit and workers, the same for kubetrain, the floor and every peer."""

    qps: float
    burst: int
    workers: int


Peer = Component
"""One pinned peer and where its build lives (the ecosystem components' type: same list format, same
build script)."""


def load_peers(text: str, root: Path, *, source: str = "peers.txt") -> dict[str, Peer]:
    """The peers listed in `text` (peers.txt's format), built under `root`; ValueError on a bad line."""
    return parse_listing(text, root, source=source)


def parse_peer_names(values: Iterable[str], kind: KindInfo, known: Iterable[str]) -> list[str]:
    """The peers named in `values` (each a name or a comma list), once each in order; ValueError for a
    name not in `known` or a peer that does not run `kind`."""
    names: list[str] = []
    known = list(known)
    for value in values:
        for name in (part.strip() for part in value.split(",")):
            if not name or name in names:
                continue
            if name not in known or name not in PEER_KINDS:
                raise ValueError(f"--peer {name!r}: unknown; choose among {', '.join(known)}")
            if kind not in PEER_KINDS[name]:
                runs = ", ".join(info.kind for info in PEER_KINDS[name])
                raise ValueError(f"--peer {name} runs {runs}, not {kind.kind} (see --kind)")
            names.append(name)
    return names


def extra_controllers(names: Sequence[str]) -> tuple[str, ...]:
    """kube-controller-manager controllers the named peers need beyond the plane's own."""
    return ("job-controller",) if MPI_OPERATOR in names else ()


def build_peers(names: Sequence[str], *, script: Path = BUILD_SCRIPT) -> None:
    """Build the named peers if missing (hack/peers.sh; minutes each, cold); RuntimeError if that fails."""
    if not names:
        return
    result = subprocess.run(["bash", str(script), *names], check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"building the peers {', '.join(names)} failed: `bash {script}` exited {result.returncode}"
        )


def _word(text: str) -> str:
    """`text` as one word of a command template (quoted for shlex, braces kept from str.format)."""
    return shlex.quote(text).replace("{", "{{").replace("}", "}}")


def peer_command(peer: Peer, kind: KindInfo, limits: Limits) -> Command:
    """How the bench starts `peer` for `kind`: its command template, readiness, environment and set-up."""
    qps = max(1, round(limits.qps))  # both take whole numbers
    binary = _word(str(peer.binary))
    if peer.name == TRAINING_OPERATOR:
        template = (
            f"{binary} --kubeconfig {{kubeconfig}} --enable-scheme={kind.kind.lower()} "
            f"--kube-api-qps={qps} --kube-api-burst={limits.burst} --controller-threads={limits.workers} "
            "--leader-elect=false --metrics-bind-address=127.0.0.1:{port3} "
            "--health-probe-bind-address=127.0.0.1:{port} "
            "--webhook-server-port={port2} --zap-log-level=info"
        )
        ready = Readiness("log", f'Starting workers.*"controller": "{kind.kind.lower()}-controller"')
        metrics = "http://127.0.0.1:{port3}/metrics"  # controller-runtime's reconcile histogram
        setup = _training_operator_setup
        return Command(template, ready, unset=_NOT_INHERITED, prepare=setup, metrics=metrics)
    if peer.name == MPI_OPERATOR:
        template = (
            f"{binary} --kubeConfig {{kubeconfig}} --lock-namespace {{namespace}} --kube-api-qps={qps} "
            f"--kube-api-burst={limits.burst} --threadiness={limits.workers} "
            f"--controller-queue-rate-limit={qps} --controller-queue-burst={limits.burst} "
            "--monitoring-port=0 -alsologtostderr"
        )
        ready = Readiness("log", "Started workers")
        return Command(template, ready, unset=_NOT_INHERITED, prepare=_mpi_operator_setup)
    raise ValueError(f"no way to start peer {peer.name!r}")


# ---------------------------------------------------------------------------- training-operator
@asynccontextmanager
async def _training_operator_setup(
    api: ApiClient, namespace: str, scratch: Path
) -> AsyncIterator[Mapping[str, str]]:
    tmp = scratch / "tmp"
    certs = tmp / "k8s-webhook-server" / "serving-certs"
    dns_name = f"{_TO_SERVICE}.{namespace}.svc"
    files = await asyncio.to_thread(webhook_pair, certs, dns_name=dns_name, ca_name=_TO_CA_NAME)
    secret = {"metadata": {"name": _TO_SECRET}, "type": "Opaque", "stringData": files}
    await api.create(SECRETS, namespace, secret)  # removed with the namespace
    placed = await asyncio.to_thread(_place_missing, certs, _TO_CERT_DIR, ("tls.crt", "tls.key"))
    try:
        yield {"MY_POD_NAMESPACE": namespace, "MY_POD_NAME": _TO_SERVICE, "TMPDIR": str(tmp)}
    finally:
        _remove(placed)


# ---------------------------------------------------------------------------- mpi-operator
def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("", port))
        except OSError:
            return False
    return True


@asynccontextmanager
async def _mpi_operator_setup(
    api: ApiClient, namespace: str, scratch: Path
) -> AsyncIterator[Mapping[str, str]]:
    if not _port_free(_MPI_HEALTH_PORT):
        raise RuntimeError(
            f"mpi-operator serves its health check on port {_MPI_HEALTH_PORT} (fixed), which is in use"
        )
    yield {}
