"""The request connections of one `HttpClient`: at most `limit` open, idle ones reused last-in first-out.

A request takes an idle connection if one is fresh (not closed by the server, idle less than
`idle_timeout` seconds), else a slot to open a new one; with every slot taken it waits. A connection
given back while requests wait goes straight to the first of them (no new handshake for it); one closed
frees its slot for the first waiter. Streams (watches) are not counted: `HttpClient` keeps them apart, but
a stream starts on an idle connection when there is one (`detach`), and its connection comes back to the
pool when it ends cleanly and a slot is free (`adopt`): each TLS connection holds about 250 KiB (asyncio's
SSL buffer among it), which an idle operator's 20-odd watches would otherwise double.
"""

from __future__ import annotations

import asyncio
from collections import deque

from kubetrain.common.kube.httpmessage import Conn

__all__ = ["Pool"]


class Pool:
    def __init__(self, limit: int, idle_timeout: float) -> None:
        self._limit = limit
        self._idle_timeout = idle_timeout
        self._held = 0  # slots taken: open connections and those being opened
        self._waiters: deque[asyncio.Future[Conn | None]] = deque()
        self._idle: list[Conn] = []
        self.open: set[Conn] = set()

    async def take(self) -> Conn | None:
        """A reusable connection (marked `reused`), or None: a slot is reserved, open one and `add()` it
        (or `free_slot()` if that fails)."""
        if (conn := self._pooled()) is not None:
            return conn
        if self._held < self._limit:
            self._held += 1
            return None
        waiter: asyncio.Future[Conn | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            handed = await waiter
        except BaseException:
            self._cancel_wait(waiter)
            raise
        if handed is not None:
            handed.reused = True
        return handed

    def add(self, conn: Conn) -> None:
        self.open.add(conn)

    def detach(self) -> Conn | None:
        """A fresh idle connection taken out of the pool, its slot freed (for a stream), or None."""
        conn = self._pooled()
        if conn is not None:
            self.open.discard(conn)
            self.free_slot()
        return conn

    def adopt(self, conn: Conn) -> bool:
        """Take a stream's connection, its stream read to the end, into the pool if a slot is free."""
        if self._held >= self._limit or self._waiters:
            return False
        self._held += 1
        self.open.add(conn)
        self.give_back(conn)
        return True

    def give_back(self, conn: Conn) -> None:
        """A connection whose response was read to its end and that may carry another request."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)  # handed over, still counted
                return
        conn.idle_since = asyncio.get_running_loop().time()
        self._idle.append(conn)

    def drop(self, conn: Conn) -> None:
        if conn in self.open:
            self.open.discard(conn)
            self.free_slot()
        conn.close()

    def free_slot(self) -> None:
        """A slot is freed: the first waiter takes it (and opens a connection), else it is given back."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._held -= 1

    def close(self) -> list[Conn]:
        """Forget the idle connections; the open ones (idle or in use), for the caller to close."""
        self._idle = []
        return list(self.open)

    def _pooled(self) -> Conn | None:
        now = asyncio.get_running_loop().time()
        while self._idle:
            conn = self._idle.pop()
            if conn.usable() and now - conn.idle_since < self._idle_timeout:
                conn.reused = True
                return conn
            self.drop(conn)
        return None

    def _cancel_wait(self, waiter: asyncio.Future[Conn | None]) -> None:
        """A waiter gave up: what it was handed (a connection or a slot) goes to the next one."""
        if waiter in self._waiters:
            self._waiters.remove(waiter)
        elif waiter.done() and not waiter.cancelled():
            handed = waiter.result()
            if handed is None:
                self.free_slot()
            elif handed.usable():
                self.give_back(handed)
            else:
                self.drop(handed)
