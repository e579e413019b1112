"""The user-facing contract of a controller: one method that makes the world match one object.

Level-triggered: a `Request` names an object and nothing more. It carries no event, no old or new
state; the reconciler reads the current state (cache and API) and converges it. A deleted child is
seen as *missing*, never reported as "deleted".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol, final

__all__ = ["Reconciler", "Request", "Result"]


@final
class Request(NamedTuple):
    """The key of the object to reconcile. `namespace` is "" for cluster-scoped objects.

    A named tuple, so that hashing and comparing it, which every cache lookup and queue add does, run in
    C: as a frozen dataclass its generated `__hash__` was 2 % of the operator's CPU at 100 MPIJobs."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@final
@dataclass(frozen=True, slots=True)
class Result:
    """What the controller should do after a successful reconcile.

    `requeue_after=None`: nothing until something watched changes. `requeue_after=s` (s >= 0):
    look again in `s` seconds even if nothing changes (deadlines, TTL, waiting on a timeout). There is
    no boolean "requeue": raise to retry with backoff, return a delay to schedule.
    """

    requeue_after: float | None = None

    def __post_init__(self) -> None:
        if self.requeue_after is not None and self.requeue_after < 0:
            raise ValueError(f"requeue_after must be >= 0 seconds, got {self.requeue_after}")


class Reconciler(Protocol):
    """Makes the cluster match the desired state of one object.

    Contract:
    - Called with a `Request`; never concurrently for the same request (the Controller's queue
      guarantees it), possibly concurrently for different requests.
    - Return `Result()` when converged, `Result(requeue_after=s)` to be called again after `s` seconds.
    - Raise any exception to be retried with per-item exponential backoff (5 ms doubling up to
      1000 s, combined with an overall rate limit). The Controller logs the error once, with the request.
    - Raise `kubetrain.common.errors.TerminalError` when retrying cannot help: logged and counted, not
      retried until the object (or one it watches) changes again.
    - The object may be gone (the request outlives it): treat NotFound as "nothing to do".
    - Must be idempotent: the same request may be reconciled any number of times.
    """

    async def reconcile(self, request: Request) -> Result: ...
