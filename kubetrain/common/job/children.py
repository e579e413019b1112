"""Creating and deleting a job's children: idempotent, observable, and honest about failures.

- Create: AlreadyExists counts as success when the existing object is controlled by this job (the cache
  was behind); when it belongs to someone else it is a failure, like any other API error.
- A failed create is recorded (Warning Event `FailedCreate<Kind>`) and collected in `failures`, not
  raised, so that the reconcile can still write a condition carrying the API server's message before
  it asks to be retried.
- Delete: NotFound, or a uid precondition that no longer holds, means the object is already gone.
  Other failures raise (the reconcile is retried with backoff).
- Creates go out in batches that double in size (1, 2, 4, ...), stopping at the first failing batch,
  so that a job of 500 pods whose pods are all rejected costs one rejected call, not 500.
- One Event per kind and reconcile, not one per object: what a reconcile created is announced by
  `announce()` as `SuccessfulCreatePod` "Created 4 pods: a, b, c, d" (the first 16 names, then how many
  more). The reconcile that creates the job's first children says so in the job's `<Kind>Created` Event
  instead (`summary()`), so a new job costs one Event for its creation where Kubeflow sends one per
  object; a failure keeps an Event of its own. Deletions are told the same way, one Event per kind and
  reconcile (a finished job's cleanup: one `SuccessfulDeletePod` naming its pods).
- Expectations are raised before each write and lowered again when the write did not happen.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any, final

from kubetrain.common.errors import AlreadyExists, ApiError, Conflict, NotFound
from kubetrain.common.events import EventRecorder, EventType
from kubetrain.common.expectations import Expectations
from kubetrain.common.kube import objects
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.resources import Obj, Resource
from kubetrain.common.reconcile import Request

__all__ = ["ChildWriter", "CreateFailure"]

_MAX_BATCH = 32
_NAMED = 16  # names in one SuccessfulCreate Event; the rest are counted


@final
@dataclass(frozen=True, slots=True)
class CreateFailure:
    """A child that could not be created, with the API server's answer."""

    kind: str
    name: str
    error: ApiError

    @property
    def message(self) -> str:
        return f"failed to create {self.kind} {self.name}: {self.error}"


class ChildWriter:
    """Writes the children of one job during one reconcile."""

    def __init__(
        self, *, api: ApiClient, recorder: EventRecorder, expectations: Expectations, job: Mapping[str, Any]
    ) -> None:
        self._api = api
        self._recorder = recorder
        self._expectations = expectations
        self._job = job
        self._key = objects.request_for(job)
        self.failures: list[CreateFailure] = []
        self._announce: dict[str, list[str]] = {}
        self._gone: dict[tuple[str, str], list[str]] = {}
        """Deleted children by kind and verb, told by `announce()` in one Event each."""

    @property
    def request(self) -> Request:
        return self._key

    async def create_all(
        self, resource: Resource, bodies: Iterable[Obj], *, expect: str | None = None
    ) -> int:
        """Create `bodies` in doubling batches; returns how many exist afterwards.

        `bodies` is consumed lazily, one batch at a time: pass a generator, and no more than one batch of
        rendered bodies is held at once however many are created."""
        done, size, pending, created = 0, 1, iter(bodies), list[str]()
        while batch := list(islice(pending, size)):
            results = await asyncio.gather(
                *(self._create(resource, body, expect=expect, blind=False) for body in batch)
            )
            done += sum(result is not None for result in results)
            created.extend(name for name in results if name)
            if None in results:
                break
            size = min(size * 2, _MAX_BATCH)
        self._announce.setdefault(resource.kind, []).extend(created)
        return done

    def announce(self) -> None:
        """One Event per kind for what was created since the last call (the pods of every replica type of
        a reconcile in one `SuccessfulCreatePod`) and not yet told by `summary()`, and one per kind for
        what was deleted (`SuccessfulDeletePod` "Deleted 3 pods: a, b, c")."""
        for kind, names in self._announce.items():
            if names:
                self._event(EventType.NORMAL, f"SuccessfulCreate{kind}", f"Created {_listed(kind, names)}")
        self._announce.clear()
        for (kind, verb), names in self._gone.items():
            self._event(EventType.NORMAL, f"SuccessfulDelete{kind}", f"{verb} {_listed(kind, names)}")
        self._gone.clear()

    def summary(self) -> str:
        """What was created since the last call, every kind in one phrase ("4 pods: a, b, c, d; service:
        j"), which no later `announce()` repeats; "" when nothing was."""
        told = "; ".join(_listed(kind, names) for kind, names in self._announce.items() if names)
        self._announce.clear()
        return told

    async def create(
        self, resource: Resource, body: Obj, *, expect: str | None = None, blind: bool = False
    ) -> bool:
        """Create one child; True when it exists afterwards (created now, or already ours).

        `blind`: an object the operator may not read (a Secret); AlreadyExists counts as present without
        reading it back to check its owner."""
        name = await self._create(resource, body, expect=expect, blind=blind)
        if name:
            self._announce.setdefault(resource.kind, []).append(name)
        return name is not None

    async def _create(self, resource: Resource, body: Obj, *, expect: str | None, blind: bool) -> str | None:
        """The name when created now, "" when it already existed as ours, None when it does not exist."""
        name = objects.name(body)
        if expect:
            self._expectations.expect(self._key, expect, adds=1)
        try:
            await self._api.create(resource, self._key.namespace, body, read_back=False)
        except AlreadyExists as err:
            self._observed_create(expect)
            return "" if blind or await self._owned_already(resource, name, err) else None
        except ApiError as err:
            self._observed_create(expect)
            self._failed(resource.kind, name, err)
            return None
        return name

    async def delete(
        self, resource: Resource, name: str, *, uid: str = "", expect: str | None = None, force: bool = False
    ) -> None:
        """Delete one child (only the incarnation `uid` when given); `force` skips the grace period."""
        if expect:
            self._expectations.expect(self._key, expect, deletes=1)
        try:
            await self._api.delete(
                resource,
                self._key.namespace,
                name,
                uid_precondition=uid or None,
                grace_period_seconds=0 if force else None,
            )
        except (NotFound, Conflict):
            self._observed_delete(expect)
            return
        except ApiError as err:
            self._observed_delete(expect)
            self._event(EventType.WARNING, f"FailedDelete{resource.kind}", f"Error deleting: {err}")
            raise
        self._gone.setdefault((resource.kind, "Force-deleted" if force else "Deleted"), []).append(name)

    async def patch(self, resource: Resource, name: str, body: Obj) -> None:
        """Merge-patch one child (extra objects and PodGroups that drifted from their desired form)."""
        await self._api.patch(resource, self._key.namespace, name, body)

    async def _owned_already(self, resource: Resource, name: str, err: AlreadyExists) -> bool:
        try:
            existing = await self._api.get(resource, self._key.namespace, name)
        except NotFound:
            return self._failed(resource.kind, name, err)  # deleted meanwhile: create again next time
        ref = objects.controller_of(existing)
        if ref is not None and ref.get("uid") == objects.uid(self._job):
            return True
        owner = f"{ref.get('kind')} {ref.get('name')}" if ref else "no controller"
        message = (
            f'{resource.kind.lower()} "{name}" already exists and is not owned by this job (owner: {owner})'
        )
        return self._failed(resource.kind, name, AlreadyExists(message, reason="AlreadyExists"))

    def _failed(self, kind: str, name: str, err: ApiError) -> bool:
        self._event(EventType.WARNING, f"FailedCreate{kind}", f"Error creating: {err}")
        self.failures.append(CreateFailure(kind, name, err))
        return False

    def _observed_create(self, expect: str | None) -> None:
        if expect:
            self._expectations.creation_observed(self._key, expect)

    def _observed_delete(self, expect: str | None) -> None:
        if expect:
            self._expectations.deletion_observed(self._key, expect)

    def event(self, event_type: EventType, reason: str, message: str) -> None:
        """An Event about the job."""
        self._event(event_type, reason, message)

    def _event(self, event_type: EventType, reason: str, message: str) -> None:
        self._recorder.record(self._job, event_type, reason, message)


def _listed(kind: str, names: list[str]) -> str:
    """`pod: a` or `4 pods: a, b, c, d` (the first 16 names, then how many more)."""
    noun = kind.lower()
    shown = ", ".join(names[:_NAMED])
    more = f" and {len(names) - _NAMED} more" if len(names) > _NAMED else ""
    return f"{noun}: {shown}" if len(names) == 1 else f"{len(names)} {noun}s: {shown}{more}"
