"""Runs a Reconciler: a work queue, N workers, and the one place where a Result becomes a decision.

Result policy (the only one in the code base):
- success with `Result()`: forget the item's failure history;
- `Result(requeue_after=s)`: forget, then look again in `s` seconds;
- any exception: log it once (with the request), count it, retry with rate-limited backoff;
- `TerminalError`: log and count it, forget, no retry (a later watch event enqueues again).

Metrics follow controller-runtime: result "error" for any exception (a TerminalError also counts in
`controller_runtime_terminal_reconcile_errors_total`), "requeue" for `Result(requeue_after=0)` (look
again at once), "requeue_after" for a later look, "success" otherwise.

An exception in one reconcile never kills a worker. A key is never reconciled by two workers at
once (the queue guarantees it), so reconcilers need no locks per object.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Mapping
from typing import Any

from kubetrain.common.clock import Clock, wait_with_deadline
from kubetrain.common.errors import ApiError, TerminalError
from kubetrain.common.handlers import Enqueue, Mapper, for_object
from kubetrain.common.kube.informer import ControllerKind, Informer, ResourceEventHandler
from kubetrain.common.logs import ReconcileContext, reconcile_context
from kubetrain.common.metrics import Metrics
from kubetrain.common.queue import QueueShutDown, WorkQueue
from kubetrain.common.ratelimit import RateLimiter
from kubetrain.common.reconcile import Reconciler, Request, Result

__all__ = ["Controller"]

log = logging.getLogger(__name__)


class Controller:
    """One reconciler, its queue and workers. Wire watches with `watch()`; the Manager calls `run()`."""

    def __init__(
        self,
        name: str,
        reconciler: Reconciler,
        *,
        clock: Clock,
        workers: int = 1,
        metrics: Metrics | None = None,
        rate_limiter: RateLimiter[Request] | None = None,
        reconcile_timeout: float | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"a controller needs at least 1 worker, got {workers}")
        self.name = name
        self.reconciler = reconciler
        self.workers = workers
        self._clock = clock
        self._metrics = metrics
        self._timeout = reconcile_timeout
        self.queue: WorkQueue[Request] = WorkQueue(
            clock=clock,
            name=name,
            rate_limiter=rate_limiter,
            metrics=metrics.queue(name) if metrics else None,
        )
        self.informers: list[Informer] = []
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        if metrics:
            metrics.controller(name, workers)

    def watch(self, informer: Informer, mapper: Mapper = for_object) -> None:
        """Enqueue `mapper(obj)` for each change the informer sees (the Manager waits for its sync)."""
        self.observe(informer, Enqueue(self.queue, mapper))

    def observe(
        self,
        informer: Informer,
        handler: ResourceEventHandler,
        *,
        controlled_by: ControllerKind | None = None,
    ) -> None:
        """Give the informer's changes to `handler` (which enqueues what it decides); the Manager waits for
        the informer's sync before this controller runs. `controlled_by=(group, kind)`: only the changes of
        objects controlled by that kind (see `Informer.add_handler`)."""
        informer.add_handler(handler, controlled_by=controlled_by)
        if informer not in self.informers:
            self.informers.append(informer)

    def enqueue(self, request: Request, delay: float = 0.0) -> None:
        """Queue `request`, after `delay` seconds if given (requests for one key within it merge)."""
        self.queue.add_after(request, delay)

    async def run(self) -> None:
        """Run the workers until `stop()` (or cancellation); return once every worker has exited.

        A controller runs once: afterwards its queue is shut down.
        """
        log.info("starting controller %s with %d workers", self.name, self.workers)
        try:
            async with asyncio.TaskGroup() as group:
                self._tasks = [
                    group.create_task(self._worker(), name=f"{self.name}-{i}") for i in range(self.workers)
                ]
        finally:
            self.queue.shut_down()  # stopped, or cancelled on lost leadership: no more work either way
            log.info("controller %s stopped", self.name)

    async def stop(self, grace: float = 30.0) -> None:
        """Take no new work, let in-flight reconciles finish for up to `grace` seconds, then cancel them."""
        self._stopping = True
        try:
            await wait_with_deadline(self._clock, self.queue.shut_down_with_drain(), grace)
        except TimeoutError:
            log.warning("controller %s: reconciles still running after %g s; cancelling", self.name, grace)
        for task in self._tasks:
            task.cancel()

    async def _worker(self) -> None:
        while not self._stopping:
            try:
                request = await self.queue.get()
            except QueueShutDown:
                return
            try:
                await self._process(request)
            finally:
                self.queue.done(request)

    async def _process(self, request: Request) -> None:
        token = reconcile_context.set(ReconcileContext(self.name, str(request), secrets.token_hex(4)))
        start = self._clock.monotonic()
        if self._metrics:
            self._metrics.active_workers.labels(self.name).inc()
        try:
            result = await self._call(request)
        except TerminalError as err:
            self._count("error", error=True, terminal=True)
            log.error("reconcile of %s failed permanently, not retrying: %s", request, err)
            self.queue.forget(request)
        except Exception as err:
            self._count("error", error=True)
            self._log_error(request, err)
            self.queue.add_rate_limited(request)
        else:
            self._apply(request, result)
        finally:
            if self._metrics:
                self._metrics.active_workers.labels(self.name).dec()
                self._metrics.reconcile_time.labels(self.name).observe(self._clock.monotonic() - start)
            reconcile_context.reset(token)

    async def _call(self, request: Request) -> Result:
        if self._timeout is None:
            result = await self.reconciler.reconcile(request)
        else:
            result = await wait_with_deadline(self._clock, self.reconciler.reconcile(request), self._timeout)
        if not isinstance(result, Result):
            raise TypeError(f"{type(self.reconciler).__name__}.reconcile returned {result!r}, not a Result")
        return result

    def _apply(self, request: Request, result: Result) -> None:
        self.queue.forget(request)
        if result.requeue_after is None:
            self._count("success")
        else:
            self._count("requeue" if result.requeue_after == 0 else "requeue_after")
            self.queue.add_after(request, result.requeue_after)

    def _log_error(self, request: Request, err: Exception) -> None:
        retries = self.queue.num_requeues(request)
        extra: Mapping[str, Any] = {"retries": retries}
        if isinstance(err, ApiError | TimeoutError):
            log.warning("reconcile of %s failed (retry %d): %s", request, retries, err, extra=extra)
        else:  # a bug: keep the traceback
            log.error("reconcile of %s raised (retry %d)", request, retries, exc_info=err, extra=extra)

    def _count(self, result: str, *, error: bool = False, terminal: bool = False) -> None:
        if self._metrics:
            self._metrics.reconcile_total.labels(self.name, result).inc()
            if error:
                self._metrics.reconcile_errors.labels(self.name).inc()
            if terminal:
                self._metrics.terminal_errors.labels(self.name).inc()
