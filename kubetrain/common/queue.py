"""A work queue with client-go semantics: fair, stingy, rate-limited, on an injected clock.

- Fair: items are handed out in the order they were added.
- Stingy: an item waiting in the queue is added only once (dedupe), and an item is never handed to
  two workers at once. Adding an item that is being processed marks it *dirty*; `done()` puts it back
  at the end of the queue, so the change that arrived meanwhile is not lost.
- Delayed adds (`add_after`) wait in a heap ordered by due time; a second delayed add of the same
  item keeps the earlier due time.
- `add_rate_limited` delays by the rate limiter's verdict for the item; `forget` resets its history.
- Shutdown: further adds are ignored and delayed items are dropped; `get()` still hands out what is
  already queued, then raises `QueueShutDown`. `shut_down_with_drain()` also waits until every item
  handed out has been marked done.

Single event loop, no threads; the queue is passive (no background task): waiting `get()` calls
promote due items themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
from collections import deque
from collections.abc import Hashable
from itertools import count
from typing import Generic, TypeVar

from kubetrain.common.clock import Clock, wait_with_deadline
from kubetrain.common.metrics import QueueMetrics
from kubetrain.common.ratelimit import RateLimiter, default_controller_rate_limiter

__all__ = ["QueueShutDown", "WorkQueue"]

T = TypeVar("T", bound=Hashable)


class QueueShutDown(Exception):
    """`get()` on a queue that is shut down and empty."""


class WorkQueue(Generic[T]):
    """See the module docstring for the contract. `len()` is informational only: never gate `add` on it."""

    def __init__(
        self,
        *,
        clock: Clock,
        name: str = "",
        rate_limiter: RateLimiter[T] | None = None,
        metrics: QueueMetrics | None = None,
    ) -> None:
        self.name = name
        self._clock = clock
        self._limiter: RateLimiter[T] = rate_limiter or default_controller_rate_limiter(clock)
        self._metrics = metrics
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._added_at: dict[T, float] = {}
        self._started_at: dict[T, float] = {}
        self._delayed: list[tuple[float, int, T]] = []
        self._due: dict[T, float] = {}
        self._seq = count()
        self._shutting_down = False
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        if metrics:
            metrics.watch_in_flight(self._unfinished_seconds, self._longest_running_seconds)

    # producers --------------------------------------------------------------------------------------
    def add(self, item: T) -> None:
        """Queue `item` unless it is already waiting; if it is being processed, mark it for a re-run."""
        if self._shutting_down or item in self._dirty:
            return
        if self._metrics:
            self._metrics.adds.inc()
        self._dirty.add(item)
        if item in self._processing:
            return
        self._push(item)

    def add_after(self, item: T, delay: float) -> None:
        """Add `item` once `delay` seconds have passed on the clock (at once if `delay <= 0`)."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(item)
            return
        due = self._clock.monotonic() + delay
        if item in self._due and self._due[item] <= due:
            return
        self._due[item] = due
        heapq.heappush(self._delayed, (due, next(self._seq), item))
        self._notify()

    def add_rate_limited(self, item: T) -> None:
        """Add `item` after the rate limiter's delay for it (which records one more failure)."""
        if self._metrics:
            self._metrics.retries.inc()
        self.add_after(item, self._limiter.when(item))

    def forget(self, item: T) -> None:
        """Clear the item's failure history (after success, or when giving up on it)."""
        self._limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """How many rate-limited adds since the last `forget`."""
        return self._limiter.num_requeues(item)

    # consumers --------------------------------------------------------------------------------------
    async def get(self) -> T:
        """The next item; the caller must call `done(item)` when finished. Waits while the queue is empty."""
        while True:
            self._promote_due()
            if self._queue:
                return self._take()
            if self._shutting_down:
                raise QueueShutDown(self.name)
            wakeup = self._wakeup
            delay = self._next_due_in()
            if delay is None:
                await wakeup.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    await wait_with_deadline(self._clock, wakeup.wait(), delay)

    def done(self, item: T) -> None:
        """Mark `item` finished; if it was added again meanwhile, queue it again."""
        self._processing.discard(item)
        started = self._started_at.pop(item, None)
        if self._metrics and started is not None:
            self._metrics.work_duration.observe(self._clock.monotonic() - started)
        if item in self._dirty:
            self._push(item)
        if not self._processing:
            self._idle.set()

    # lifecycle --------------------------------------------------------------------------------------
    def shut_down(self) -> None:
        """Ignore further adds, drop delayed items, and wake every waiting `get()`."""
        self._shutting_down = True
        self._delayed.clear()
        self._due.clear()
        self._notify()

    async def shut_down_with_drain(self) -> None:
        """`shut_down()`, then wait until every handed-out item is done."""
        self.shut_down()
        await self._idle.wait()

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def processing(self) -> int:
        """Items handed out and not yet done."""
        return len(self._processing)

    @property
    def delayed(self) -> int:
        """Items waiting for their due time."""
        return len(self._due)

    # internals --------------------------------------------------------------------------------------
    def _unfinished_seconds(self) -> float:
        now = self._clock.monotonic()
        return sum(now - started for started in self._started_at.values())

    def _longest_running_seconds(self) -> float:
        oldest = min(self._started_at.values(), default=None)
        return 0.0 if oldest is None else self._clock.monotonic() - oldest

    def _push(self, item: T) -> None:
        self._queue.append(item)
        self._added_at.setdefault(item, self._clock.monotonic())
        self._set_depth()
        self._notify()

    def _take(self) -> T:
        item = self._queue.popleft()
        self._dirty.discard(item)
        self._processing.add(item)
        self._idle.clear()
        now = self._clock.monotonic()
        added = self._added_at.pop(item, now)
        self._started_at[item] = now
        if self._metrics:
            self._metrics.queue_duration.observe(now - added)
        self._set_depth()
        return item

    def _promote_due(self) -> None:
        now = self._clock.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            due, _, item = heapq.heappop(self._delayed)
            if self._due.get(item) == due:
                del self._due[item]
                self.add(item)

    def _next_due_in(self) -> float | None:
        while self._delayed and self._due.get(self._delayed[0][2]) != self._delayed[0][0]:
            heapq.heappop(self._delayed)  # superseded by an earlier due time
        return self._delayed[0][0] - self._clock.monotonic() if self._delayed else None

    def _notify(self) -> None:
        self._wakeup.set()
        self._wakeup = asyncio.Event()

    def _set_depth(self) -> None:
        if self._metrics:
            self._metrics.depth.set(len(self._queue))
