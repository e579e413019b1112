"""A real Kubernetes control plane for integration and e2e tests: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kwok, started on free 127.0.0.1 ports from the binaries
that `hack/testbin.sh` builds.

Why real processes and not a fake: validation, RBAC, garbage collection, scheduling and watch semantics
are what the operator must get right, and only the real API server has them. kwok plays the kubelet
(see kubetrain.testing.kwok for the pod lifecycle a test can drive).

    with ControlPlane() as plane:
        ns = plane.create_namespace()
        plane.kubectl("apply", "-f", "job.yaml", namespace=ns)

Everything lives in one temporary directory (certificates, kubeconfigs, logs; etcd data on /dev/shm),
removed by stop(), which also runs at interpreter exit and when start() fails half-way. Components are
stopped in reverse order, SIGTERM then SIGKILL, each in its own process group. Set
KUBETRAIN_CP_LOG_DIR to keep a copy of the component logs after stop() (e.g. as CI artifacts).

Auditing is off unless `ControlPlane(audit_policy=...)` is given an audit Policy (YAML text): then
kube-apiserver writes one JSON event per line to `plane.audit_log` (never rotated), so a benchmark or a
test can tell who issued which requests (e.g. bench/operator_scale.py counts the operator's requests).
`ControlPlane(extra_controllers=["job-controller"])` runs more kube-controller-manager controllers than
components.CONTROLLERS (e.g. the batch Job controller, for an operator whose launcher is a Job).
"""

from __future__ import annotations

import atexit
import functools
import os
import secrets
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from subprocess import CompletedProcess
from types import TracebackType
from typing import Any

from kubetrain.testing import components as comp
from kubetrain.testing import etcd as etcd_store
from kubetrain.testing.binaries import Binaries, find_binaries
from kubetrain.testing.certs import make_pki
from kubetrain.testing.kubeconfig import write_kubeconfig
from kubetrain.testing.kubectl import KubectlError, run_kubectl
from kubetrain.testing.kwok import DEFAULT_NODES, FakeNode, Outcome, kwok_config, outcome_annotations
from kubetrain.testing.kwok_logs import LOGS_CRD, PodLogFile, logs_object
from kubetrain.testing.process import (
    ComponentProcess,
    free_port,
    make_owned_tempdir,
    sweep_orphaned_tempdirs,
    wait_until,
)
from kubetrain.testing.rest import AdminRest, http_ok

__all__ = ["ControlPlane", "KubectlError"]

_CLIENTS_FIRST = ("kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd")
_PORT_ATTEMPTS = 3
_PREFIX = "kubetrain-cp-"
_SHM = "/dev/shm"
LOG_DIR_ENV = "KUBETRAIN_CP_LOG_DIR"  # if set, component logs are copied there at stop


class ControlPlane:
    """One control plane; a context manager. Properties are valid between start() and stop()."""

    def __init__(
        self,
        *,
        binaries: Binaries | None = None,
        nodes: Sequence[FakeNode] = DEFAULT_NODES,
        start_timeout: float = 120.0,
        audit_policy: str | None = None,
        extra_controllers: Sequence[str] = (),
    ) -> None:
        self._binaries = binaries
        self._extra_controllers = tuple(extra_controllers)
        self._audit_policy = audit_policy
        self._nodes = tuple(nodes)
        self._timeout = start_timeout
        self._procs: list[ComponentProcess] = []
        self._dirs: list[Path] = []
        self._workdir: Path | None = None
        self._rest: AdminRest | None = None
        self._etcd_endpoint = ""
        self._apiserver_argv: list[str] = []
        self.start_seconds = 0.0
        # Where the API server binds, and more names for its certificate: a subclass with a real node
        # (kubetrain.testing.node_plane) sets them to the node's bridge, which pods can reach.
        self._address = "127.0.0.1"
        self._extra_ips: tuple[str, ...] = ()

    # ---------------------------------------------------------------- lifecycle
    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        """Start every component and wait until each is ready; on failure nothing is left running."""
        if self._workdir is not None:
            raise RuntimeError("this ControlPlane is already started")
        self._binaries = self._binaries or find_binaries()
        began = time.monotonic()
        sweep_orphaned_tempdirs(_PREFIX, [tempfile.gettempdir(), _SHM])
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            self._workdir = self._mkdtemp(None)
            atexit.register(self.stop)
            try:
                self._start_all(self._binaries, self._workdir)
                break
            except BaseException as err:
                self.stop()
                # Ports are picked free but may be taken before a component binds them: retry.
                if attempt == _PORT_ATTEMPTS or "address already in use" not in str(err):
                    raise
        self.start_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        """Stop every component (clients first), then remove the temporary directories. Idempotent."""
        procs = {p.name: p for p in self._procs}
        for group in (_CLIENTS_FIRST[:3], _CLIENTS_FIRST[3:4], _CLIENTS_FIRST[4:]):
            members = [procs[n] for n in group if n in procs]
            for member in members:
                member.signal(signal.SIGTERM)  # to the whole group at once, then wait for each
            for member in members:
                member.stop(grace=10.0)
        self._procs.clear()
        self._keep_logs()
        for directory in self._dirs:
            shutil.rmtree(directory, ignore_errors=True)
        self._dirs.clear()
        self._workdir = None
        self._rest = None
        atexit.unregister(self.stop)

    def _mkdtemp(self, parent: str | None) -> Path:
        directory = make_owned_tempdir(_PREFIX, parent)
        self._dirs.append(directory)
        return directory

    def _spawn(self, name: str, argv: list[str]) -> ComponentProcess:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.workdir)}
        process = ComponentProcess(name, argv, self.workdir / "logs" / f"{name}.log", env)
        self._procs.append(process)
        return process

    def _start_all(self, bins: Binaries, work: Path) -> None:
        pki = make_pki(work / "pki", self._extra_ips)
        ports = comp.Ports(free_port(), free_port(), free_port(), free_port(), free_port())
        shm = _SHM if os.access(_SHM, os.W_OK) else None
        etcd = self._spawn("etcd", comp.etcd_args(bins, ports, self._mkdtemp(shm) / "etcd"))
        health = f"http://127.0.0.1:{ports.etcd_client}/health"
        wait_until("etcd /health", lambda: http_ok(health), timeout=self._timeout, processes=[etcd])
        argv = comp.apiserver_args(bins, ports, pki, work / "apiserver", self._address)
        argv += self._audit_args(work)
        self._etcd_endpoint, self._apiserver_argv = f"http://127.0.0.1:{ports.etcd_client}", argv
        apiserver = self._spawn("kube-apiserver", argv)
        server = f"https://{self._address}:{ports.apiserver}"
        self._rest = AdminRest(server, pki.ca_crt, pki.admin_crt, pki.admin_key)
        admin = write_kubeconfig(
            work / "admin.kubeconfig", server=server, ca_file=pki.ca_crt, user="kubetrain-admin",
            cert_file=pki.admin_crt, key_file=pki.admin_key,
        )  # fmt: skip
        wait_until(
            "kube-apiserver /readyz", self._rest.ready, timeout=self._timeout, processes=[etcd, apiserver]
        )
        config = kwok_config(kubelet_port=ports.kubelet, tls_cert=pki.serving_crt, tls_key=pki.serving_key)
        (work / "kwok.yaml").write_text(config)
        self._rest.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", LOGS_CRD)
        self._wait("kwok's Logs CRD served", lambda: self._rest_ok("/apis/kwok.x-k8s.io/v1alpha1/logs"))
        self._spawn("kube-controller-manager", comp.kcm_args(bins, admin, pki, self._extra_controllers))
        self._spawn("kube-scheduler", comp.scheduler_args(bins, admin, ports))
        self._spawn("kwok", comp.kwok_args(bins, admin, work / "kwok.yaml"))
        for node in self._nodes:
            self._rest.create("/api/v1/nodes", node.manifest())
        scheduler = f"https://127.0.0.1:{ports.scheduler}/readyz"
        self._wait("kube-scheduler /readyz", lambda: http_ok(scheduler))
        self._wait("the `default` ServiceAccount (kube-controller-manager)", lambda: self._exists("default"))
        for node in self._nodes:
            self._wait_node(node.name, self._timeout)

    def restart_apiserver(self, *, compact: bool = False) -> int | None:
        """Stop kube-apiserver, optionally compact etcd meanwhile, start it again on the same port and
        wait until it is ready. Returns the compacted revision: watches older than it get 410 Gone."""
        old = next(p for p in self._procs if p.name == "kube-apiserver")
        old.stop(grace=30.0)
        self._procs.remove(old)
        revision = etcd_store.compact(self._etcd_endpoint) if compact else None
        fresh = self._spawn("kube-apiserver", self._apiserver_argv)
        wait_until("kube-apiserver /readyz", self.rest.ready, timeout=self._timeout, processes=[fresh])
        return revision

    def _audit_args(self, work: Path) -> list[str]:
        if self._audit_policy is None:
            return []
        policy = work / "audit-policy.yaml"
        policy.write_text(self._audit_policy)
        self.audit_log.parent.mkdir(parents=True, exist_ok=True)
        # A size limit (MB) far beyond any test's log: the file is never rotated under a reader's feet.
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-maxsize=100000",
        ]

    def wait_established(self, *names: str, timeout: float = 60.0) -> None:
        """Wait until each CRD `names` (`tfjobs.kubeflow.org`, with or without `crd/`) is Established.

        Polled over REST: `kubectl wait --for=condition=Established` fails at once, instead of waiting,
        when it reads a CRD whose status has no conditions yet (just created or replaced)."""
        for name in names:
            crd = name.removeprefix("crd/")
            self._wait(f"CRD {crd} Established", functools.partial(self._established, crd), timeout=timeout)

    def _established(self, crd: str) -> bool:
        status, found = self.rest.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
        conditions = ((found.get("status") or {}).get("conditions") or []) if status == 200 else []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    def _wait(self, what: str, check: Callable[[], bool], timeout: float | None = None) -> float:
        return wait_until(what, check, timeout=timeout or self._timeout, processes=self._procs)

    def _wait_node(self, name: str, timeout: float) -> None:
        self._wait(f"node {name} Ready (kwok)", lambda: self._node_ready(name), timeout=timeout)

    def _rest_ok(self, path: str) -> bool:
        return self.rest.get(path)[0] == 200

    def _exists(self, namespace: str, sa: str = "default") -> bool:
        return self.rest.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/{sa}")[0] == 200

    def _node_ready(self, name: str) -> bool:
        status, node = self.rest.get(f"/api/v1/nodes/{name}")
        conditions = node.get("status", {}).get("conditions", []) if status == 200 else []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    def _keep_logs(self) -> None:
        target = os.environ.get(LOG_DIR_ENV)
        if target and self._workdir is not None and (self._workdir / "logs").is_dir():
            shutil.copytree(self._workdir / "logs", Path(target), dirs_exist_ok=True)

    # ---------------------------------------------------------------- accessors
    @property
    def workdir(self) -> Path:
        if self._workdir is None:
            raise RuntimeError("the control plane is not started")
        return self._workdir

    @property
    def rest(self) -> AdminRest:
        if self._rest is None:
            raise RuntimeError("the control plane is not started")
        return self._rest

    @property
    def server(self) -> str:
        """https://127.0.0.1:<port> of the API server."""
        return self.rest.server

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (user kubetrain-admin in group system:masters)."""
        return self.workdir / "admin.kubeconfig"

    @property
    def audit_log(self) -> Path:
        """The API server's audit log (JSON lines); written only when the plane was given an audit_policy."""
        return self.workdir / "audit" / "audit.log"

    @property
    def binaries(self) -> Binaries:
        if self._binaries is None:
            raise RuntimeError("the control plane is not started")
        return self._binaries

    # ---------------------------------------------------------------- what tests use
    def kubectl(
        self,
        *args: str,
        namespace: str | None = None,
        input: str | None = None,
        check: bool = True,
        kubeconfig: Path | None = None,
        timeout: float = 120.0,
    ) -> CompletedProcess[str]:
        """Run the built kubectl as the admin (or as `kubeconfig`'s user); raise KubectlError if `check`."""
        return run_kubectl(
            self.binaries.kubectl, kubeconfig or self.kubeconfig, self.workdir, args,
            namespace=namespace, input=input, check=check, timeout=timeout,
        )  # fmt: skip

    def create_namespace(self, prefix: str = "test-") -> str:
        """A fresh namespace, returned once its `default` ServiceAccount exists (pods need it)."""
        name = f"{prefix}{secrets.token_hex(4)}"
        self.rest.ensure_namespace(name)
        self._wait(f"ServiceAccount {name}/default", lambda: self._exists(name), timeout=60.0)
        return name

    def delete_namespace(self, name: str, *, wait: bool = False) -> None:
        """Delete a namespace (the namespace controller removes its content); optionally wait until gone."""
        self.rest.request("DELETE", f"/api/v1/namespaces/{name}")
        if wait:
            self._wait(
                f"namespace {name} gone", lambda: self.rest.get(f"/api/v1/namespaces/{name}")[0] == 404
            )

    def kubeconfig_for_service_account(self, namespace: str, name: str, *, duration: str = "24h") -> Path:
        """A kubeconfig acting as ServiceAccount `namespace/name` (both created if missing), with a token
        minted through the TokenRequest API. The SA has no permissions until a test binds a role."""
        self.rest.ensure_namespace(namespace)
        self.rest.create(
            f"/api/v1/namespaces/{namespace}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
        )
        token = self.kubectl(
            "create", "token", name, f"--duration={duration}", namespace=namespace
        ).stdout.strip()
        path = self.workdir / f"sa-{namespace}-{name}.kubeconfig"
        user = f"system:serviceaccount:{namespace}:{name}"
        return write_kubeconfig(path, server=self.server, ca_file=self.rest.ca_file, user=user, token=token)

    def add_node(self, node: FakeNode) -> None:
        """Create one more fake node and wait until kwok reports it Ready."""
        self.rest.create("/api/v1/nodes", node.manifest())
        self._wait_node(node.name, 60.0)

    def finish_pod(
        self,
        namespace: str,
        name: str,
        outcome: Outcome,
        *,
        exit_code: int | None = None,
        reason: str | None = None,
        run_for: str | None = None,
    ) -> None:
        """Ask kwok to end a Running pod (now, or `run_for` later) by annotating it (see testing.kwok)."""
        annotations = outcome_annotations(outcome, exit_code=exit_code, reason=reason, run_for=run_for)
        pairs = [f"{key}={value}" for key, value in annotations.items()]
        self.kubectl("annotate", "--overwrite", f"pod/{name}", *pairs, namespace=namespace)

    def pod_log(self, namespace: str, pod: str) -> PodLogFile:
        """A log file that kwok serves for every container of `namespace/pod` (see testing.kwok_logs)."""
        log = PodLogFile(self.workdir / "pod-logs" / namespace / f"{pod}.log")
        self.rest.create(
            f"/apis/kwok.x-k8s.io/v1alpha1/namespaces/{namespace}/logs", logs_object(namespace, pod, log.path)
        )
        return log

    def wait_for_pod_phase(
        self, namespace: str, name: str, phase: str, timeout: float = 60.0
    ) -> dict[str, Any]:
        """Poll until the pod reaches `phase`; return the pod object."""
        found: dict[str, Any] = {}

        def reached() -> bool:
            status, pod = self.rest.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
            found.update(pod if status == 200 else {})
            return status == 200 and pod.get("status", {}).get("phase") == phase

        self._wait(f"pod {namespace}/{name} phase {phase}", reached, timeout=timeout)
        return found

    # ---------------------------------------------------------------- logs
    def logs(self) -> dict[str, Path]:
        """Log file of each component, by name."""
        return {p.name: p.log_path for p in self._procs}

    def exit_codes(self) -> dict[str, int | None]:
        """Exit code of each component by name (None while it runs)."""
        return {p.name: p.exit_code() for p in self._procs}

    def log_tails(self, lines: int = 30) -> str:
        """The last lines of every component's log, for a failing test's report."""
        return "\n".join(f"----- {p.name} ({p.log_path})\n{p.log_tail(lines)}" for p in self._procs)
