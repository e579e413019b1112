"""The scheduler-plugins scheduler (built by `hack/ecosystem.sh`) as a second scheduler of a test plane,
with the Coscheduling plugin: real gang scheduling of the pods of one PodGroup.

Set up as scheduler-plugins' own "as a second scheduler" install does it: one profile whose
`schedulerName` is `scheduler-plugins-scheduler` (the name `manifests/overlays/scheduler-plugins` gives the
operator), Coscheduling enabled at every extension point (multiPoint) with PrioritySort disabled (they
both sort the queue), Permit waiting 10 s for the rest of a gang before it gives the places back. The
PodGroup CRD (`scheduling.x-k8s.io`) comes from the module tree the binary was built from. The default
kube-scheduler of the plane keeps running: pods that name no scheduler are still its own. One flag differs
from the defaults, to keep the tests short: refused pods are retried after UNSCHEDULABLE_RETRY.

Stdlib-only apart from what kubetrain.testing uses; import it explicitly.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import TracebackType
from typing import Any

from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.ecosystem import Component, find_component
from kubetrain.testing.process import ComponentProcess, free_port, wait_until
from kubetrain.testing.rest import http_ok

__all__ = ["PERMIT_WAIT_SECONDS", "SCHEDULER_NAME", "Coscheduler"]

SCHEDULER_NAME = "scheduler-plugins-scheduler"
PERMIT_WAIT_SECONDS = 10
UNSCHEDULABLE_RETRY = "15s"
"""How long a refused pod waits before the scheduler tries it again whatever happened (default 5 min).
Coscheduling v0.33.5 asks for a retry only when a pod is added or a PodGroup changes, not when a node
is added: in a cluster a gang that was refused starts at the latest 5 min after room appears."""


class Coscheduler:
    """One scheduler-plugins scheduler on `plane`; a context manager."""

    def __init__(
        self,
        plane: ControlPlane,
        workdir: Path,
        *,
        name: str = SCHEDULER_NAME,
        component: Component | None = None,
    ) -> None:
        self.plane = plane
        self.workdir = workdir
        self.name = name
        self.component = component or find_component("scheduler-plugins")
        self.port = free_port()
        self.log_path = workdir / "scheduler-plugins.log"
        self._process: ComponentProcess | None = None

    def configuration(self) -> dict[str, Any]:
        """The KubeSchedulerConfiguration: one profile, Coscheduling on."""
        return {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            "clientConnection": {"kubeconfig": str(self.plane.kubeconfig)},
            "profiles": [
                {
                    "schedulerName": self.name,
                    "plugins": {
                        "multiPoint": {
                            "enabled": [{"name": "Coscheduling"}],
                            "disabled": [{"name": "PrioritySort"}],
                        }
                    },
                    "pluginConfig": [
                        {"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": PERMIT_WAIT_SECONDS}}
                    ],
                }
            ],
        }

    @property
    def crd(self) -> Path:
        return self.component.source / "manifests" / "coscheduling" / "crd.yaml"

    def start(self, timeout: float = 120.0) -> Coscheduler:
        """Install the PodGroup CRD, start the scheduler and wait until it is ready (or stop it again)."""
        try:
            return self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float) -> Coscheduler:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.plane.kubectl("apply", "--server-side", "-f", str(self.crd))
        self.plane.wait_established("podgroups.scheduling.x-k8s.io")
        config = self.workdir / "scheduler-plugins-config.yaml"
        config.write_text(json.dumps(self.configuration(), indent=1))  # JSON is YAML
        argv = [
            str(self.component.binary), f"--config={config}", "--bind-address=127.0.0.1",
            f"--secure-port={self.port}", "--v=2",
            f"--pod-max-in-unschedulable-pods-duration={UNSCHEDULABLE_RETRY}",
        ]  # fmt: skip
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.workdir)}
        self._process = ComponentProcess("scheduler-plugins", argv, self.log_path, env)
        ready = f"https://127.0.0.1:{self.port}/readyz"
        wait_until(f"{self.name} /readyz", lambda: http_ok(ready), timeout=timeout, processes=[self._process])
        return self

    @property
    def process(self) -> ComponentProcess:
        if self._process is None:
            raise RuntimeError("the scheduler is not started")
        return self._process

    def stop(self) -> None:
        if self._process is not None:
            self._process.stop(grace=10.0)
            self._process = None

    def __enter__(self) -> Coscheduler:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
