"""`kubetrain operator` as a child process of a test, exactly as a user or a Deployment starts it.

Where `kubetrain.testing.operator` runs the controllers in-process, this runs the real entry point:
flag parsing, credentials from a kubeconfig (the admin's, or a ServiceAccount token so that the shipped
RBAC is enforced), the preflight, leader election, the HTTP endpoints, JSON logs, signals and exit codes.

    with OperatorProcess(plane.kubeconfig, ["--namespace", ns], workdir=tmp_path) as op:
        op.wait_ready()
        ...  # submit jobs with kubectl; read op.metrics(), op.log_records()
    assert op.exit_code == 0

The health and metrics listeners get free loopback ports. /metrics is plain HTTP unless `args` set
`--metrics-secure` (then HTTPS with a self-signed certificate: `metrics(token=...)`). The process runs
in its own session and dies with the test process (see `kubetrain.testing.process`). Stdlib-only, like
the rest of kubetrain.testing.
"""

from __future__ import annotations

import json
import os
import re
import signal
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from kubetrain.testing.process import ComponentProcess, free_port, wait_until

__all__ = ["OperatorProcess"]

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class OperatorProcess:
    """One `kubetrain operator` process. `args` are extra flags; logs are JSON lines in `log_path`."""

    def __init__(
        self,
        kubeconfig: Path,
        args: Sequence[str] = (),
        *,
        workdir: Path,
        name: str = "operator",
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.health_port = free_port()
        self.metrics_port = free_port()
        self.metrics_secure = any(a.startswith("--metrics-secure") and not a.endswith("=false") for a in args)
        self.log_path = workdir / f"{name}.log"
        self.argv = [
            sys.executable, "-m", "kubetrain.cli", "operator",
            f"--kubeconfig={kubeconfig}",
            f"--health-probe-bind-address=127.0.0.1:{self.health_port}",
            f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
            "--log-format=json",
            *([] if self.metrics_secure else ["--metrics-secure=false"]),
            *args,
        ]  # fmt: skip
        self._name = name
        self._env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self._process: ComponentProcess | None = None
        self.started_at = 0.0

    # life ---------------------------------------------------------------------------------------------
    def start(self) -> OperatorProcess:
        self.started_at = time.monotonic()
        self._process = ComponentProcess(self._name, self.argv, self.log_path, self._env)
        return self

    @property
    def process(self) -> ComponentProcess:
        if self._process is None:
            raise RuntimeError("the operator process is not started")
        return self._process

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def exit_code(self) -> int | None:
        """None while it runs."""
        return self.process.exit_code()

    def wait_ready(self, timeout: float = 60.0) -> float:
        """Wait until /readyz answers 200; seconds since `start()`. Fails at once if the process exits."""
        wait_until(
            f"{self._name} /readyz", lambda: self.get("/readyz")[0] == 200,
            timeout=timeout, processes=[self.process],
        )  # fmt: skip
        return time.monotonic() - self.started_at

    def wait_exit(self, timeout: float = 60.0) -> int:
        """The exit code, once the process has exited by itself; TimeoutError otherwise."""
        if not self.process.wait(timeout):
            raise TimeoutError(f"{self._name} still runs after {timeout:g} s:\n{self.process.log_tail()}")
        code = self.exit_code
        assert code is not None
        return code

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM (what the kubelet sends), then the exit code; SIGKILL and TimeoutError if it hangs."""
        self.process.signal(signal.SIGTERM)
        if not self.process.wait(timeout):
            self.process.stop(grace=0)
            raise TimeoutError(f"{self._name} ignored SIGTERM for {timeout:g} s:\n{self.process.log_tail()}")
        code = self.exit_code
        assert code is not None
        return code

    def stop(self) -> None:
        """Make sure the process is gone (SIGTERM, SIGKILL after 30 s): clean-up, whatever happened before."""
        if self._process is not None:
            self._process.stop(grace=30.0)

    def __enter__(self) -> OperatorProcess:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # looking inside -------------------------------------------------------------------------------------
    def get(
        self, path: str, *, port: int | None = None, tls: bool = False, token: str | None = None
    ) -> tuple[int, str]:
        """GET `path` on the health port (or `port`): (status, body); (0, reason) when nothing answers.

        `tls`: over HTTPS, the certificate unchecked (the operator's own is self-signed); `token`: sent as
        a bearer token."""
        url = f"{'https' if tls else 'http'}://127.0.0.1:{port or self.health_port}{path}"
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
        context = ssl._create_unverified_context() if tls else None
        try:
            with urllib.request.urlopen(request, timeout=5, context=context) as response:
                return int(response.status), response.read().decode()
        except urllib.error.HTTPError as err:
            return int(err.code), err.read().decode()
        except OSError as err:
            return 0, str(err)

    def metrics(self, token: str | None = None) -> str:
        """The Prometheus text of the metrics port (with `token` when it is served securely)."""
        status, body = self.scrape(token)
        if status != 200:
            raise AssertionError(f"/metrics answered {status}: {body}")
        return body

    def scrape(self, token: str | None = None) -> tuple[int, str]:
        """(status, body) of GET /metrics on the metrics port, over HTTPS when it is served so."""
        return self.get("/metrics", port=self.metrics_port, tls=self.metrics_secure, token=token)

    def sample(self, name: str, **labels: str) -> float:
        """The sum of the samples `name` (e.g. `kubetrain_jobs_skipped_total`) of /metrics whose labels
        include `labels`; 0 when there is none."""
        total = 0.0
        for line in self.metrics().splitlines():
            found = _SAMPLE.match(line)
            if found and found["name"] == name:
                have = dict(_LABEL.findall(found["labels"] or ""))
                total += float(found["value"]) if labels.items() <= have.items() else 0.0
        return total

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_records(self) -> list[dict[str, Any]]:
        """The JSON log lines (other lines, such as a crash before logging is set up, are skipped)."""
        records = []
        for line in self.log_text().splitlines():
            if line.startswith("{"):
                try:
                    records.append(json.loads(line))
                except ValueError:
                    continue
        return records

    def rss_mib(self) -> float:
        """Resident memory of the running process, from /proc (Linux)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS in /proc status")
