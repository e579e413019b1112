"""What the operator must remember about a job that the cluster would otherwise forget.

Facts vanish with the pods that carry them; they are kept on the job itself, in one JSON annotation,
so that an operator restart or failover changes nothing:

    kubetrain.io/ledger: {"restarts": 3, "counted": ["<pod uid>"], "started": {"Worker": "0-3"},
                          "succeeded": {"Worker": "0,2"}, "created": ["secrets/pi-ssh"]}

- `restarts`: pods replaced so far (needed for backoffLimit once those pods are deleted);
- `counted`: the UIDs of failed pods already in `restarts` that still exist. A restart is written here
  *with* the pod's UID before the pod is deleted, so a delete that fails (a 500, a timeout, an admission
  policy) and is retried never counts the same pod twice. A UID is dropped once its pod is gone;
- `started`: indices whose current pod was seen running. A pod that vanishes without being seen
  failing (its node deleted, the pod garbage-collected) is then known to have run: under `Never` that
  index failed, under the other policies it is recreated and counts a restart (docs/differences.md);
- `succeeded`: indices whose pod succeeded: a completed pod may be garbage-collected before the job
  finishes, and must not be run again;
- `gang`: what a gang failure policy remembers (`kubetrain.common.job.gangstate`); absent without one;
- `created`: extra objects created without being read back (the MPI SSH Secret: the operator may not
  read Secrets), so that they are created once. Such a creation does not cost a write of its own: it is
  remembered in memory (`Unwritten`) and goes into the ledger with the job's next ledger write. After an
  operator restart before that write, the create is sent once more and answered AlreadyExists, which
  counts as created: one request per such job and restart, instead of one per job.

Index sets are written as ranges ("0-9999"), so 10,000 replicas cost a few bytes, not 50 KB of a 256 KB
annotation budget. An unreadable value (edited by hand) reads as empty: at worst a restart is allowed
once more; indices at or above `MAX_REPLICAS` are ignored, so no annotation can make the operator
allocate more than the largest valid job does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, final

from kubetrain.common.job.gangstate import GangState
from kubetrain.common.job.limits import MAX_REPLICAS

__all__ = ["LEDGER_ANNOTATION", "Ledger", "Unwritten", "parse_ranges", "render_ranges"]

LEDGER_ANNOTATION = "kubetrain.io/ledger"

Indices = Mapping[str, frozenset[int]]


def _empty() -> Indices:
    return MappingProxyType({})


@final
@dataclass(frozen=True, slots=True)
class Ledger:
    """Restarts so far, and the facts per index and per pod that the cluster may forget."""

    restarts: int = 0
    succeeded: Indices = field(default_factory=_empty)
    started: Indices = field(default_factory=_empty)
    counted: frozenset[str] = frozenset()
    created: frozenset[str] = frozenset()
    gang: GangState = field(default_factory=GangState)

    @classmethod
    def read(cls, annotations: Mapping[str, str]) -> Ledger:
        """The ledger stored in a job's annotations; empty when absent or unreadable."""
        try:
            data = json.loads(annotations.get(LEDGER_ANNOTATION) or "{}")
            return cls(
                restarts=max(int(data.get("restarts", 0)), 0),
                succeeded=_read_indices(data.get("succeeded")),
                started=_read_indices(data.get("started")),
                counted=frozenset(str(u) for u in data.get("counted") or ()),
                created=frozenset(str(c) for c in data.get("created") or ()),
                gang=GangState.of(data.get("gang")),
            )
        except (ValueError, TypeError, AttributeError):
            return cls()

    def render(self) -> str:
        """Compact, stable JSON (sorted keys, ranges), so an unchanged ledger is never rewritten."""
        data: dict[str, Any] = {"restarts": self.restarts}
        for key, sets in (("succeeded", self.succeeded), ("started", self.started)):
            kept = {k: render_ranges(v) for k, v in sorted(sets.items()) if v}
            if kept:
                data[key] = kept
        for key, names in (("counted", self.counted), ("created", self.created)):
            if names:
                data[key] = sorted(names)
        if (gang := self.gang.wire()) is not None:
            data["gang"] = gang
        return json.dumps(data, separators=(",", ":"), sort_keys=True)

    def with_restarts(self, added: int) -> Ledger:
        return replace(self, restarts=self.restarts + added)

    def with_succeeded(self, rtype: str, indices: frozenset[int]) -> Ledger:
        merged = dict(self.succeeded)
        merged[rtype] = merged.get(rtype, frozenset()) | indices
        return replace(self, succeeded=MappingProxyType(merged))

    def with_started(self, rtype: str, indices: frozenset[int]) -> Ledger:
        """`indices` are exactly the started ones of `rtype` now (replaced ones dropped, new ones added)."""
        merged = dict(self.started)
        merged[rtype] = indices
        return replace(self, started=MappingProxyType(merged))

    def with_counted(self, uids: Iterable[str]) -> Ledger:
        """The counted UIDs become `uids` (those still existing, plus the newly counted ones)."""
        return replace(self, counted=frozenset(uids))

    def with_created(self, key: str) -> Ledger:
        return replace(self, created=self.created | {key})

    def without_succeeded(self) -> Ledger:
        """Forget what pods did: after a suspension every replica runs again, from scratch."""
        return Ledger(restarts=self.restarts, created=self.created, gang=self.gang)

    def with_gang(self, gang: GangState) -> Ledger:
        return replace(self, gang=gang)

    def for_gang_restart(self, gang: GangState) -> Ledger:
        """Every index runs again from scratch: none counts as started (lost) or succeeded any more."""
        return replace(self, gang=gang, succeeded=_empty(), started=_empty(), counted=frozenset())

    def indices(self, rtype: str) -> frozenset[int]:
        return self.succeeded.get(rtype, frozenset())

    def started_indices(self, rtype: str) -> frozenset[int]:
        return self.started.get(rtype, frozenset())


class Unwritten:
    """Per job, the `created` keys known to this process but not yet in the job's ledger (see above).

    Keyed by the job's namespace/name and checked against its UID, so that a job deleted and created
    again under the same name starts with nothing; `forget` drops a job (it is gone, or its ledger now
    holds the keys)."""

    def __init__(self) -> None:
        self._jobs: dict[tuple[str, str], tuple[str, frozenset[str]]] = {}

    def get(self, job: tuple[str, str], uid: str) -> frozenset[str]:
        known = self._jobs.get(job)
        return known[1] if known is not None and known[0] == uid else frozenset()

    def add(self, job: tuple[str, str], uid: str, keys: Iterable[str]) -> None:
        self._jobs[job] = (uid, self.get(job, uid) | frozenset(keys))

    def forget(self, job: tuple[str, str]) -> None:
        self._jobs.pop(job, None)

    def __len__(self) -> int:
        return len(self._jobs)


def render_ranges(indices: Iterable[int]) -> str:
    """`{0, 1, 2, 5}` -> `"0-2,5"`."""
    runs: list[list[int]] = []
    for i in sorted(set(indices)):
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def parse_ranges(text: str, *, limit: int = MAX_REPLICAS) -> frozenset[int]:
    """`"0-2,5"` -> `{0, 1, 2, 5}`, keeping only indices below `limit` (however large the ranges)."""
    found: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        low, _, high = part.partition("-")
        first, last = int(low), int(high or low)
        found.update(range(max(first, 0), min(last, limit - 1) + 1))
    return frozenset(found)


def _read_indices(raw: Any) -> Indices:
    result: dict[str, frozenset[int]] = {}
    for rtype, value in (raw or {}).items():
        if isinstance(value, str):
            result[str(rtype)] = parse_ranges(value)
        else:  # the older form: a list of indices
            result[str(rtype)] = frozenset(i for i in (int(v) for v in value) if 0 <= i < MAX_REPLICAS)
    return MappingProxyType(result)
