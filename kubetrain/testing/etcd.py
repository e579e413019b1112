"""Compacting the test plane's etcd, as etcd's periodic compaction (or an operator's) does in production.

After a compaction, a watch that resumes from an older resourceVersion gets 410 Gone and must list again:
the chaos tests use this to make every informer of the operator take its recovery path. Spoken through
etcd's JSON gateway (`/v3/kv/...`), so it needs no client library. Stdlib-only.
"""

from __future__ import annotations

import base64
import json
import urllib.request
from typing import Any

__all__ = ["compact", "current_revision"]


def _post(endpoint: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{endpoint}{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


def current_revision(endpoint: str) -> int:
    """The store's revision now (`endpoint`: `http://127.0.0.1:<client port>`)."""
    key = base64.b64encode(b"/").decode()
    answer = _post(endpoint, "/v3/kv/range", {"key": key, "count_only": True})
    return int(answer["header"]["revision"])


def compact(endpoint: str) -> int:
    """Compact every revision before the current one; returns that revision."""
    revision = current_revision(endpoint)
    _post(endpoint, "/v3/kv/compaction", {"revision": str(revision), "physical": True})
    return revision
