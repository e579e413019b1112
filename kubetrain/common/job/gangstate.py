"""What a job's gang failure policy must remember across operator restarts: kept in the job's ledger.

Stored under the ledger's `gang` key (`kubetrain.common.job.ledger`), only once a policy acted:

    "gang": {"restarts": 1, "ignored": 2, "seen": {"<pod uid>": 3}, "draining": ["<pod uid>"],
             "since": 1795900000}

- `restarts`: gang restarts so far, counted against the policy's `maxGangRestarts` (not backoffLimit);
- `ignored`: container restarts an `Ignore` or `RestartGang` rule took on itself: subtracted from the
  restarts backoffLimit counts, since the pods that carry them still count them;
- `seen`: per pod UID, how many of its failures (container restarts, plus one if the pod failed) the
  policy has already judged, so that a failure is acted on once, however many reconciles see it;
- `draining`: the UIDs of the pods a gang restart deleted (all of them, or the peers of an in-place one
  that did not restart); the missing pods are created again once all are gone;
- `ranks`: per replica type, the rank failures judged (containers restarted in place, pods failed or
  lost): `status.replicaStatuses[type].restarts`;
- `since`: when the last gang restart began in place, or recreated the pods, or an ignored stall was let
  be (Unix seconds): the progress deadline counts from there too;
- `mode`: how this job's gang restarts (`in-place` or `recreate`, `kubetrain.common.job.inplace`), decided
  when its pods are first made and kept for its life;
- `waiting`, `until`: an in-place gang restart still open (`kubetrain.common.job.gangcascade`): the pods
  of its peers that have not restarted yet, and when (Unix seconds) those left are recreated instead;
- `back`: when every rank of that open gang restart ran again (the newest start, Unix seconds): a progress
  report after it means the gang trains again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, final

__all__ = ["GangState"]


def _empty() -> Mapping[str, int]:
    return MappingProxyType({})


@final
@dataclass(frozen=True, slots=True)
class GangState:
    restarts: int = 0
    ignored: int = 0
    seen: Mapping[str, int] = field(default_factory=_empty)
    draining: frozenset[str] = frozenset()
    since: int | None = None
    ranks: Mapping[str, int] = field(default_factory=_empty)
    mode: str | None = None
    waiting: frozenset[str] = frozenset()
    until: int | None = None
    back: int | None = None

    @property
    def cascading(self) -> bool:
        """An in-place gang restart is open: its peers' own restarts belong to it."""
        return self.until is not None

    @classmethod
    def of(cls, data: Any) -> GangState:
        """Read the ledger's `gang` value; raises ValueError/TypeError/AttributeError when malformed."""
        if not data:
            return cls()
        since, until, mode, back = data.get("since"), data.get("until"), data.get("mode"), data.get("back")
        return cls(
            restarts=max(int(data.get("restarts", 0)), 0),
            ignored=max(int(data.get("ignored", 0)), 0),
            seen=MappingProxyType({str(k): int(v) for k, v in (data.get("seen") or {}).items()}),
            draining=frozenset(str(u) for u in data.get("draining") or ()),
            since=int(since) if since is not None else None,
            ranks=MappingProxyType({str(k): int(v) for k, v in (data.get("ranks") or {}).items()}),
            mode=str(mode) if mode is not None else None,
            waiting=frozenset(str(u) for u in data.get("waiting") or ()),
            until=int(until) if until is not None else None,
            back=int(back) if back is not None else None,
        )

    def wire(self) -> dict[str, Any] | None:
        """The JSON value, None while the policy never acted (the ledger then has no `gang` key)."""
        if self == GangState():
            return None
        data: dict[str, Any] = {"restarts": self.restarts, "ignored": self.ignored}
        if self.seen:
            data["seen"] = dict(sorted(self.seen.items()))
        if self.draining:
            data["draining"] = sorted(self.draining)
        if self.since is not None:
            data["since"] = self.since
        if self.ranks:
            data["ranks"] = dict(sorted(self.ranks.items()))
        if self.mode is not None:
            data["mode"] = self.mode
        if self.waiting:
            data["waiting"] = sorted(self.waiting)
        if self.until is not None:
            data["until"] = self.until
        if self.back is not None:
            data["back"] = self.back
        return data

    def judged(self, uid: str, failures: int, rtype: str) -> GangState:
        """The failures of pod `uid` (of `rtype`) judged so far: one more rank restart of `rtype`."""
        ranks = MappingProxyType({**self.ranks, rtype: self.ranks.get(rtype, 0) + 1})
        return replace(self, seen=MappingProxyType({**self.seen, uid: failures}), ranks=ranks)

    def kept(self, uids: Iterable[str]) -> GangState:
        """Only the `seen` entries of pods that still exist."""
        alive = set(uids)
        return replace(self, seen=MappingProxyType({u: n for u, n in self.seen.items() if u in alive}))

    def gang_restart(self, uids: Iterable[str], now: int) -> GangState:
        return replace(
            self,
            restarts=self.restarts + 1,
            draining=frozenset(uids),
            since=now,
            seen=_empty(),
            waiting=frozenset(),
            until=None,
        )

    def restarted_at(self, now: int) -> GangState:
        return replace(self, since=now)

    def draining_too(self, uids: Iterable[str]) -> GangState:
        """The pods `uids`, deleted alone, drain too: the job waits until they are gone."""
        return replace(self, draining=self.draining | frozenset(uids))

    def drained(self) -> GangState:
        return replace(self, draining=frozenset())

    def ignoring(self, count: int) -> GangState:
        return replace(self, ignored=self.ignored + count)

    def decided(self, mode: str) -> GangState:
        return replace(self, mode=mode)

    def in_place_restart(self, waiting: Iterable[str], now: int, until: int) -> GangState:
        """One more gang restart, done in place: `waiting` are the peers that must still restart, by
        `until`. What was judged stays judged: the pods are the same."""
        return replace(
            self, restarts=self.restarts + 1, since=now, waiting=frozenset(waiting), until=until, back=None
        )

    def restarted(self, uids: Iterable[str]) -> GangState:
        """The peers `uids` have restarted (or are gone): none of them is waited for any more."""
        return replace(self, waiting=self.waiting - frozenset(uids))

    def came_back(self, at: int) -> GangState:
        """Every rank of the open gang restart runs again, the last since `at`."""
        return replace(self, back=at)

    def closed(self) -> GangState:
        """The in-place gang restart is over: later failures are new ones."""
        return replace(self, waiting=frozenset(), until=None, back=None)
