"""Container logs on the test plane: kwok serves them from files the test writes, as a kubelet would.

`kubectl logs`, `kubetrain logs` and the SDKs read a pod's logs through the API server's `pods/log`
subresource, which the API server proxies to the kubelet of the pod's node. On the test plane kwok is that
kubelet: it serves the kubelet API (`/containerLogs/...`) over TLS on a loopback port, every fake node
advertises that port (`status.daemonEndpoints.kubeletEndpoint`) and the address 127.0.0.1, and the API
server dials nodes by InternalIP. Which file backs which pod is a kwok `Logs` object (kwok.x-k8s.io/v1alpha1,
one per pod, named like the pod, in its namespace), read from the API server because the test creates it
at run time; the plane installs a minimal CRD for it before kwok starts.

    log = plane.pod_log(ns, "train-worker-0")    # a file kwok now serves for every container of that pod
    log.write("epoch 1 loss=0.3")                # appended in the CRI log format the kubelet reads
    plane.kubectl("logs", "train-worker-0", namespace=ns)

A file may be written before or after the pod exists; `kubectl logs -f` follows appends.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["LOGS_CRD", "PodLogFile", "logs_object"]

LOGS_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "logs.kwok.x-k8s.io"},
    "spec": {
        "group": "kwok.x-k8s.io",
        "scope": "Namespaced",
        "names": {"kind": "Logs", "listKind": "LogsList", "plural": "logs", "singular": "logs"},
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}
"""Only what kwok's typed client needs to list and watch `Logs`; kwok validates the content itself."""


def logs_object(namespace: str, pod: str, path: Path) -> dict[str, Any]:
    """The kwok `Logs` object that serves `path` for every container of pod `namespace/pod`."""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Logs",
        "metadata": {"name": pod, "namespace": namespace},
        "spec": {"logs": [{"logsFile": str(path), "follow": True}]},
    }


class PodLogFile:
    """A container log file in the CRI format (`<RFC 3339 time> <stream> F <line>`), append-only."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def write(self, *lines: str, stream: str = "stdout") -> None:
        """Append `lines`, each as one complete log line of `stream` ("stdout" or "stderr")."""
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        with self.path.open("a") as out:
            out.writelines(f"{stamp} {stream} F {line}\n" for line in lines)
