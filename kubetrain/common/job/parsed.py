"""Each job's spec, parsed and defaulted once per change of it rather than once per reconcile.

A job is reconciled each time its status or one of its children changes, and nearly all of those reconciles
see the spec the one before saw. Parsing the whole object into the kind's model and applying the `default`
hook cost a four-replica MPIJob about 78 us of CPU per reconcile (more for a larger pod template); with the
spec remembered, a reconcile parses only the metadata and status and reuses the defaulted spec: 18 us.

What is remembered, per job, is only ever reused for the same object (uid) with an equal spec, labels and
annotations, the inputs a `default` hook may read besides the status; and the defaulted spec is reused only
when `default` changed nothing but the spec (`model_copy(update={"spec": ...})`, as the built-in kinds and
the scaffold do), so a hook that also writes the metadata or status is called on every reconcile.

Reconciles come in bursts (a job starting, its pods changing, it finishing), and a running job may go hours
without one, so an entry is kept only while it is used: it goes when the job is gone or finished (`forget`),
and when no reconcile has used it for `IDLE_S` seconds. What that costs is the memory of the parsed spec of
the jobs reconciled in the last minute, about 15 KB for that MPIJob (500 MPIJobs starting at once: peak RSS
107 -> 115 MiB in `python bench/operator_scale.py --kind MPIJob --jobs 500`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, final

from kubetrain.api import TrainingJob
from kubetrain.common.clock import Clock
from kubetrain.common.kube.resources import Obj
from kubetrain.common.reconcile import Request

__all__ = ["IDLE_S", "ParsedJobs"]

JobT = TypeVar("JobT", bound=TrainingJob[Any])

IDLE_S = 60.0
"""Seconds an entry is kept without a reconcile using it."""


@final
@dataclass(slots=True)
class _Known:
    uid: str
    spec_wire: Any
    """The cache's spec the entry was made from (the cache's objects are never changed in place)."""
    labels: Any
    annotations: Any
    spec: Any
    """The spec as `default` made it, or as parsed when `default` changes more than the spec."""
    defaulted: bool
    """Whether `spec` is the defaulted one."""
    used: float
    """When a reconcile last used it (the clock's monotonic seconds)."""


class ParsedJobs(Generic[JobT]):
    """The parsed and defaulted form of each job a controller reconciles (see the module docstring)."""

    def __init__(self, model: type[JobT], clock: Clock, *, idle_s: float = IDLE_S) -> None:
        """`model` parses a job (`KindInfo.model`); an entry unused for `idle_s` seconds goes."""
        self._model = model
        self._clock = clock
        self._idle_s = idle_s
        self._others = tuple(name for name in model.model_fields if name != "spec")
        self._known: dict[Request, _Known] = {}
        self._swept = clock.monotonic()

    def __len__(self) -> int:
        return len(self._known)

    def job(self, request: Request, raw: Obj, default: Callable[[JobT], JobT]) -> JobT:
        """The job in `raw`, parsed, as `default` (the controller's hook) makes it. Raises pydantic's
        `ValidationError` as `model.model_validate` does (the spec is checked whenever it changes)."""
        now = self._clock.monotonic()
        if now - self._swept >= self._idle_s:
            self._sweep(now)
        spec_wire = raw.get("spec")
        meta = raw.get("metadata") or {}
        uid, labels, annotations = meta.get("uid") or "", meta.get("labels"), meta.get("annotations")
        known = self._known.get(request)
        if known is not None and _same(known, uid, spec_wire, labels, annotations):
            known.spec_wire, known.used = spec_wire, now  # the cache's current dict, not an older equal one
            job = self._model.model_validate({**raw, "spec": known.spec})
            return job if known.defaulted else default(job)
        parsed = self._model.model_validate(raw)
        job = default(parsed)
        only_spec = all(getattr(job, name) is getattr(parsed, name) for name in self._others)
        if uid:  # a stored job (one built in code has no uid, and nothing to be reconciled again)
            spec = job.spec if only_spec else parsed.spec
            self._known[request] = _Known(uid, spec_wire, labels, annotations, spec, only_spec, now)
        return job

    def forget(self, request: Request) -> None:
        """The job is gone or finished: let its entry go (made again if it is reconciled again)."""
        self._known.pop(request, None)

    def _sweep(self, now: float) -> None:
        self._swept = now
        idle = [request for request, known in self._known.items() if now - known.used >= self._idle_s]
        for request in idle:
            del self._known[request]


def _same(known: _Known, uid: str, spec_wire: Any, labels: Any, annotations: Any) -> bool:
    """Whether `known` was made from the same object with an equal spec, labels and annotations."""
    same_spec = known.spec_wire is spec_wire or bool(known.spec_wire == spec_wire)
    return (
        known.uid == uid
        and same_spec
        and bool(known.labels == labels)
        and bool(known.annotations == annotations)
    )
