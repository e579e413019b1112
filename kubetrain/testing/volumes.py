"""PersistentVolumes for the claims an example file carries, on test planes that have no storage provisioner.

Some examples (`examples/`) bring a PersistentVolumeClaim for their checkpoints, which a cluster fills
from its default StorageClass. The test planes have none: each test provides a volume bound in advance to
the claim (`claimRef`), with the claim's own access modes and size, as a provisioner would. The volume is
a hostPath: on the real node, a directory the test made; on a plane without a kubelet, any path.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

__all__ = ["Kubectl", "claims_in", "provide_volume"]


class Kubectl(Protocol):
    def kubectl(self, *args: str, namespace: str | None = None, input: str | None = None) -> Any: ...


def claims_in(objects: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The PersistentVolumeClaims among `objects` (the documents of an example file)."""
    return [o for o in objects if o and o.get("kind") == "PersistentVolumeClaim"]


def provide_volume(plane: Kubectl, namespace: str, claim: Mapping[str, Any], directory: str | Path) -> str:
    """A hostPath PersistentVolume on `directory`, reserved for `claim` in `namespace`. Cluster-scoped:
    the caller deletes it (the name returned) after the test."""
    name = f"{claim['metadata']['name']}-{namespace}"
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": dict(claim["spec"]["resources"]["requests"]),
            "accessModes": list(claim["spec"]["accessModes"]),
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": str(directory)},
            "claimRef": {"namespace": namespace, "name": claim["metadata"]["name"]},
        },
    }
    plane.kubectl("apply", "-f", "-", input=json.dumps(volume))
    return name
