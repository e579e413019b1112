"""Training-progress status writes, coalesced: the latest report wins, one write per job per interval.

Pods may report every second, and a 500-job cluster with several reporting ranks per job would otherwise
write thousands of statuses a minute. The `Coalescer` keeps only each job's latest accepted report and
writes it at most once per interval, as a JSON merge patch of `status.trainerStatus` alone, so it never
touches the conditions the reconciles write. A report replaces the whole `trainerStatus`: a field it leaves
out is written as null (`replacing`), as Kubeflow's server-side apply of the whole status does. A job's
first report is written at once; a report that arrives within the interval replaces the one waiting
(counted in `kubetrain_progress_coalesced_total`) and is written when the interval is over. A report
waiting when its job finishes is written by the reconcile that finishes the job, in the same status write
as the verdict (`pending`, `written`), so the job is never seen finished with an older progress; one that
comes in meanwhile is written at once (`flush`): the last report before the end always lands.

The interval is `interval` (10 s by default: `--progress-interval`) while few jobs report, and grows with
their number so that the writes stay within `writes_per_second` (a share of the writes' client budget): N
reporting jobs are written every max(interval, N / writes_per_second) seconds (500 jobs at 15 writes a
second: every 33 s). `retry_after(key)` says when a job's next write is due, which the endpoint tells the
pod, so that pods send about one report per write.

Every report is parsed and checked when it arrives (`read_report`: JSON nested at most `MAX_DEPTH`
levels, a `trainerStatus` within bounds), so only valid statuses ever wait here. A write that fails for a
reason no one foresaw (not an `ApiError`) is logged with its traceback and counted as an error, and the
loop goes on with the other jobs: one bad report never stops the writes of every job.

The writes go through an `ApiClient` of their own (the caller gives it a rate limit of its own, as the
Events' client has), so a flood of progress never delays a reconcile's writes. A write that fails is
logged and dropped (a newer report will come, or the job is gone).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from pydantic import ValidationError

from kubetrain.api import KindInfo, TrainerStatus
from kubetrain.api.trainerstatus import from_report, replacing
from kubetrain.common.clock import Clock, SystemClock
from kubetrain.common.errors import ApiError
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.resources import Resource
from kubetrain.common.progress.gauges import ProgressGauges

__all__ = ["MAX_DEPTH", "Coalescer", "JobKey", "ProgressGauges", "Received", "parse_report", "read_report"]

log = logging.getLogger(__name__)

QUIET = 3
"""Intervals without a write after which a job no longer counts as reporting."""


@dataclass(frozen=True)
class JobKey:
    info: KindInfo
    namespace: str
    name: str

    @property
    def resource(self) -> Resource:
        return Resource(self.info.group, self.info.version, self.info.plural, self.info.kind)


@dataclass(frozen=True)
class Received:
    """A report's body as it arrived at `at`, not yet parsed."""

    body: bytes
    at: datetime


MAX_DEPTH = 32
"""The deepest nesting of arrays and objects a report may have (a `trainerStatus` needs 4)."""
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _depth(body: bytes) -> int:
    """How deep the arrays and objects of a JSON text nest (brackets inside strings do not count)."""
    depth = deepest = 0
    for bracket in _STRINGS.sub(b"", body).translate(None, _NOT_BRACKETS):
        depth += 1 if bracket in b"[{" else -1
        deepest = max(deepest, depth)
    return deepest


def read_report(received: Received) -> TrainerStatus | str:
    """The `trainerStatus` of a body `{"trainerStatus": {...}}` as Kubeflow's clients send it (`from_report`),
    within bounds and stamped with its arrival; or what is wrong with the body, in words for the pod (never
    an exception, whatever the bytes)."""
    if _depth(received.body) > MAX_DEPTH:
        return f"the body nests arrays or objects deeper than {MAX_DEPTH} levels"
    try:
        document: Any = json.loads(received.body)
    except (ValueError, RecursionError) as err:
        return f"the body is not JSON: {err}"
    try:
        return from_report(document, received.at)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in ("trainerStatus", *first["loc"]))
        return f"{where}: {first['msg']}"
    except (ValueError, TypeError, RecursionError) as err:
        return str(err)


def parse_report(received: Received) -> TrainerStatus | None:
    """`read_report`'s status, or None when the body is not a valid report."""
    status = read_report(received)
    return status if isinstance(status, TrainerStatus) else None


class Coalescer:
    """Latest report per job; `run()` writes them, each job at most once per `interval()` seconds."""

    def __init__(
        self,
        api: ApiClient,
        *,
        interval: float = 10.0,
        writes_per_second: float | None = None,
        clock: Clock | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self._api, self._interval, self._clock = api, interval, clock or SystemClock()
        self._rate = writes_per_second
        self._pending: dict[JobKey, TrainerStatus] = {}
        self._written_at: dict[JobKey, float] = {}
        self._pruned_at = -math.inf
        self._wake = asyncio.Event()
        self._coalesced = Counter(
            "kubetrain_progress_coalesced",
            "Reports replaced by a newer one of the same job before they were written",
            registry=registry,
        )
        self._gauges = ProgressGauges(registry)
        self._writes = Counter(
            "kubetrain_progress_status_writes",
            "Status writes of training progress, by result",
            ["result"],
            registry=registry,
        )

    def interval(self) -> float:
        """Seconds between two writes of one job: `interval`, or longer when so many jobs report that
        their writes would exceed `writes_per_second`."""
        if self._rate is None:
            return self._interval
        return max(self._interval, len(self._written_at) / self._rate)

    def retry_after(self, key: JobKey) -> float:
        """Seconds until the job's next write is due (a full interval when one is due now: it is written
        at once, and the next waits an interval)."""
        interval = self.interval()
        left = self._left(key, self._clock.monotonic(), interval)
        return left if left > 0 else interval

    def waiting(self, key: JobKey) -> bool:
        """Whether the job's next write is not due yet (a report now would wait, or be replaced)."""
        return self._left(key, self._clock.monotonic(), self.interval()) > 0

    def _left(self, key: JobKey, now: float, interval: float) -> float:
        """Seconds from `now` until the job may be written again (<= 0: now; never written: -inf)."""
        return self._written_at.get(key, -math.inf) + interval - now

    def offer(self, key: JobKey, status: TrainerStatus) -> None:
        """Keep `status` as the job's latest report (replacing one still waiting)."""
        if key in self._pending:
            self._coalesced.inc()
        self._pending[key] = status
        self._wake.set()

    def flush(self, key: JobKey) -> None:
        """The job is finishing: write its waiting report (if any) now, not after the interval."""
        if key in self._pending:
            self._written_at.pop(key, None)
            self._wake.set()

    @property
    def final_reports(self) -> Coalescer:
        """This coalescer as the `FinalReports` of `ProgressInjection`."""
        return self

    def pending(self, key: JobKey) -> TrainerStatus | None:
        """The job's report waiting to be written, or None."""
        return self._pending.get(key)

    def written(self, key: JobKey, status: TrainerStatus) -> None:
        """`status` was written with the job's verdict (`FinalReports`): it no longer waits, unless a newer
        report has replaced it meanwhile."""
        if self._pending.get(key) is status:
            del self._pending[key]
            self._written_at[key] = self._clock.monotonic()
            self._writes.labels("written").inc()
            self._gauges.show(key, status)

    def forget(self, key: JobKey) -> None:
        """The job is gone: drop what waits for it and its write time (bounded memory)."""
        self._pending.pop(key, None)
        self._written_at.pop(key, None)
        self._gauges.remove(key)

    def due(self) -> tuple[list[JobKey], float | None]:
        """The jobs whose report may be written now, and the seconds until the next one may."""
        now, interval = self._clock.monotonic(), self.interval()
        ready: list[JobKey] = []
        wait: float | None = None
        for key in self._pending:
            left = self._left(key, now, interval)
            if left <= 0:
                ready.append(key)
            else:
                wait = left if wait is None else min(wait, left)
        return ready, wait

    async def write_due(self) -> float | None:
        """Write every report that is due; returns the seconds until the next one is."""
        self._forget_quiet()
        ready, wait = self.due()
        for key in ready:
            status = self._pending.pop(key)
            self._written_at[key] = self._clock.monotonic()
            await self._write(key, status)
        return wait

    def _forget_quiet(self) -> None:
        """Drop the write times of jobs not written for `QUIET` intervals (finished, or no longer reporting):
        they no longer count as reporting jobs, and a report from one is written at once again."""
        now = self._clock.monotonic()
        if now < self._pruned_at + self._interval:
            return
        self._pruned_at = now
        horizon = now - QUIET * self.interval()
        for key in [k for k, at in self._written_at.items() if at < horizon and k not in self._pending]:
            del self._written_at[key]

    async def _write(self, key: JobKey, status: TrainerStatus) -> None:
        try:
            patch = {"status": {"trainerStatus": replacing(status)}}
            await self._api.patch(key.resource, key.namespace, key.name, patch, subresource="status")
            self._gauges.show(key, status)
        except ApiError as error:
            self._writes.labels("error").inc()
            log.info("progress of %s %s/%s not written: %s", key.info.kind, key.namespace, key.name, error)
            return
        except Exception:  # a bug, not the API server: logged loudly, and the other jobs are still written
            self._writes.labels("error").inc()
            log.exception("progress of %s %s/%s not written", key.info.kind, key.namespace, key.name)
            return
        self._writes.labels("written").inc()

    async def run(self) -> None:
        """Write reports as they come due, until cancelled. Waiting reports are written after their
        interval; a new job's first report wakes the loop at once."""
        while True:
            self._wake.clear()
            wait = await self.write_due()
            await self._idle(wait)

    async def _idle(self, wait: float | None) -> None:
        """Until `wait` seconds have passed (None: forever) or an offer or a flush wakes the loop."""
        woken = asyncio.ensure_future(self._wake.wait())
        slept = asyncio.ensure_future(self._clock.sleep(wait)) if wait is not None else None
        try:
            await asyncio.wait(
                [t for t in (woken, slept) if t is not None], return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for task in (woken, slept):
                if task is not None:
                    task.cancel()
