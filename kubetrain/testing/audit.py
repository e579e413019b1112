"""What the API server created, from its audit log: every create, across restarts, none missed.

A test that must know how many times a pod was made ("nothing doubled") cannot learn it from lists, which
miss what lives between two of them, nor from a watch when the API server restarts and compacts etcd under
it. kube-apiserver's audit log records every request it served, and a restarted server appends to the
same file. Start the plane with `ControlPlane(audit_policy=CREATES)`; then `created(plane.audit_log, ...)`
counts the objects made, by name.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

__all__ = ["CREATES", "created"]

CREATES = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
  verbs: [create]
- level: None
"""
"""An audit Policy that logs the metadata of each create request (and nothing else): who made what, and
the answer."""


def created(audit_log: Path, resource: str, namespace: str) -> Counter[str]:
    """How many times each object of `resource` (a plural: `pods`) was created in `namespace`, by name:
    create requests the server answered 201. A refused create (409 AlreadyExists) does not count."""
    made: Counter[str] = Counter()
    for line in audit_log.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:  # the last line, while the server is still writing it
            continue
        ref = event.get("objectRef") or {}
        if (
            event.get("verb") == "create"
            and (event.get("responseStatus") or {}).get("code") == 201
            and (ref.get("resource"), ref.get("namespace"), ref.get("subresource"))
            == (resource, namespace, None)
        ):
            made[ref["name"]] += 1
    return made
