"""A hostile client of the operator's three listeners, run as a process of its own by the hostile tier.

`python flood.py CONFIG_JSON` runs every attack below at once, each bounded in count and all of them in
time (`seconds`), and prints one JSON line: per attack, how many requests it made and the answers it saw
(HTTP status, or "closed" when the server closed the connection first). It comes from many loopback
addresses (127.0.0.2 and up, `peers` of them), as many pods would:

- junk bearer tokens on /metrics and on the progress endpoint, nine requests in ten abandoned (the
  connection reset) as soon as they are sent: every one is a token the operator has never seen;
- a valid token's report, then reports of 5,000 nested `[` (about 5 KB) and oversized bodies;
- heads with too many header fields, and heads past 16 KiB;
- slowloris: connections that send a byte of their head, or of their body, now and then and never finish;
- slow readers: pipelined requests whose answers are never read;
- connections opened in a loop and left silent (the caps must close the oldest).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import secrets
import ssl
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

Counts = collections.Counter[str]
Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]

_TLS = ssl.create_default_context()
_TLS.check_hostname, _TLS.verify_mode = False, ssl.CERT_NONE


GENUINE_POD = "127.0.0.254"
"""The source address of the one genuine report, outside the attackers' 127.0.0.2 and up."""


class Flood:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.deadline = time.monotonic() + float(config["seconds"])
        self.peers = itertools.cycle(f"127.0.0.{n}" for n in range(2, 2 + int(config["peers"])))
        self.seen: dict[str, Counts] = collections.defaultdict(collections.Counter)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    async def connect(self, port: int, *, tls: bool, source: str | None = None) -> Connection:
        """A connection from the next attacking address, or from `source` (a pod of its own). Attackers
        give up after 5 s. A pod waits as its client does: Transformers' `urlopen(..., timeout=5)` and the
        Kubeflow SDK's `timeout=5` bound each socket operation, not the whole exchange, so the TCP connect
        and the TLS handshake's two reads may take 5 s each (on a loaded machine the flood's first wave
        of handshakes can hold the operator's loop longer than 5 s in all)."""
        return await asyncio.wait_for(
            asyncio.open_connection(
                "127.0.0.1", port, ssl=_TLS if tls else None, local_addr=(source or next(self.peers), 0)
            ),
            5 if source is None else 15,
        )

    @contextlib.asynccontextmanager
    async def held(self, port: int, *, tls: bool) -> AsyncIterator[Connection | None]:
        """A connection, aborted when done; None when it cannot be opened."""
        try:
            reader, writer = await self.connect(port, tls=tls)
        except (OSError, TimeoutError):
            self.seen["connect-failed"][str(port)] += 1
            yield None
            return
        try:
            yield reader, writer
        finally:
            writer.transport.abort()

    async def ask(
        self,
        attack: str,
        port: int,
        request: bytes,
        *,
        tls: bool,
        abandon: bool = False,
        source: str | None = None,
    ) -> None:
        """One request on a new connection; its answer's status counted (or abandoned at once)."""
        try:
            reader, writer = await self.connect(port, tls=tls, source=source)
        except TimeoutError:
            self.seen[attack]["connect-timeout"] += 1
            return
        except OSError:
            self.seen[attack]["connect-failed"] += 1
            return
        try:
            writer.write(request)
            await writer.drain()
            if abandon:
                self.seen[attack]["abandoned"] += 1
                return
            line = await asyncio.wait_for(reader.readline(), 10)
            self.seen[attack][
                line.split(b" ")[1].decode() if line.startswith(b"HTTP/1.1 ") else "closed"
            ] += 1
        except (OSError, TimeoutError, ssl.SSLError, IndexError):
            self.seen[attack]["closed"] += 1
        finally:
            writer.transport.abort()

    async def repeat(self, attack: str, count: int, workers: int, make: Any) -> None:
        """`count` requests in all by `workers` at once, until done or out of time."""
        sent = itertools.count()

        async def worker() -> None:
            while next(sent) < count and self.left() > 0:
                await make()

        await asyncio.gather(*(worker() for _ in range(workers)))

    # the attacks -----------------------------------------------------------------------------------------
    async def junk_metrics(self) -> None:
        port = self.config["metrics_port"]

        counter = itertools.count()

        async def one() -> None:
            token = f"junk-{secrets.token_hex(16)}"
            head = f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
            await self.ask("junk-metrics", port, head.encode(), tls=True, abandon=next(counter) % 10 > 0)

        await self.repeat("junk-metrics", self.config["junk"], 16, one)

    async def junk_progress(self) -> None:
        port, path = self.config["progress_port"], self.config["progress_path"]

        counter = itertools.count()

        async def one() -> None:
            token = f"junk-{secrets.token_hex(16)}"
            abandon = next(counter) % 10 > 0  # one in ten waits for its answer: 401, or 503 when saturated
            await self.ask("junk-progress", port, post(path, b"{}", token), tls=True, abandon=abandon)

        await self.repeat("junk-progress", self.config["junk"], 16, one)

    async def bodies(self) -> None:
        """A valid report first (so that the next ones arrive before the job's write is due), then bodies
        that must be refused: 5,000 nested [ and an oversized one."""
        port, path, token = self.config["progress_port"], self.config["progress_path"], self.config["token"]
        valid = json.dumps({"trainerStatus": {"progressPercentage": 10}}).encode()
        # from an address no attack uses, as a real pod's own IP: the caps that cut the attackers off (their
        # connections closed, even mid-handshake) must leave it alone
        await self.ask("valid-report", port, post(path, valid, token), tls=True, source=GENUINE_POD)
        for n in range(int(self.config["bodies"])):
            if self.left() <= 0:
                return
            if n % 2:
                await self.ask(
                    "oversized-body", port, post(path, b"[" + b" " * 17_000 + b"]", token), tls=True
                )
            else:
                await self.ask("nested-body", port, post(path, b"[" * 5000, token), tls=True)

    async def header_floods(self) -> None:
        ports = [(self.config["health_port"], False), (self.config["metrics_port"], True)]
        many = "".join(f"X-{n}: v\r\n" for n in range(200))
        big = "X-Big: " + "a" * 17_000 + "\r\n"  # past the 16 KiB head

        async def one(n: int = 0) -> None:
            port, tls = ports[n % 2]
            head = f"GET /healthz HTTP/1.1\r\nHost: x\r\n{many if n % 3 else big}\r\n"
            await self.ask("header-flood", port, head.encode(), tls=tls)

        counter = itertools.count()
        await self.repeat("header-flood", self.config["header_floods"], 4, lambda: one(next(counter)))

    async def slowloris(self, port: int, *, tls: bool, body: bool = False) -> None:
        """Connections that dribble a byte of their head (or, `body`, of a declared 10 KB body) every half
        second; each one must be cut off."""
        start = b"GET /healthz HTTP/1.1\r\nX: "
        if body:
            start = (
                f"POST {self.config['progress_path']} HTTP/1.1\r\nHost: x\r\nContent-Length: 10000\r\n\r\n"
            )
            start = start.encode()

        async def one() -> None:
            async with self.held(port, tls=tls) as connection:
                if connection is None:
                    return
                reader, writer = connection
                try:
                    writer.write(start)
                    while self.left() > 0 and not reader.at_eof():
                        writer.write(b"a")
                        await writer.drain()
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(reader.read(1024), 0.5)
                    self.seen["slowloris"]["cut" if reader.at_eof() else "held-to-the-end"] += 1
                except (OSError, ssl.SSLError):
                    self.seen["slowloris"]["cut"] += 1

        await asyncio.gather(*(one() for _ in range(int(self.config["slowloris"]))))

    async def slow_readers(self) -> None:
        """Pipelined requests whose answers are never read, the connection held until the end."""
        port = self.config["health_port"]
        request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" * 2000

        async def one() -> None:
            async with self.held(port, tls=False) as connection:
                if connection is None:
                    return
                writer = connection[1]
                writer.write(request)
                while self.left() > 0 and not writer.transport.is_closing():
                    await asyncio.sleep(0.5)
                self.seen["slow-reader"]["held"] += 1

        await asyncio.gather(*(one() for _ in range(8)))

    async def silent_connections(self) -> None:
        """Connections opened in a loop on every port and left silent, TLS handshakes never begun included
        (the caps close the oldest)."""
        ports = [self.config["health_port"], self.config["metrics_port"], self.config["progress_port"]]
        held: list[asyncio.StreamWriter] = []
        for n in range(int(self.config["silent"])):
            if self.left() <= 0:
                break
            with contextlib.suppress(OSError, TimeoutError, ssl.SSLError):
                held.append((await self.connect(ports[n % 3], tls=False))[1])
        self.seen["silent"]["opened"] = len(held)
        for writer in held:
            writer.transport.abort()

    async def run(self) -> dict[str, Counts]:
        await asyncio.gather(
            self.junk_metrics(),
            self.junk_progress(),
            self.bodies(),
            self.header_floods(),
            self.slowloris(self.config["health_port"], tls=False),
            self.slowloris(self.config["progress_port"], tls=True),
            self.slowloris(self.config["progress_port"], tls=True, body=True),
            self.slow_readers(),
            self.silent_connections(),
        )
        return self.seen


def post(path: str, body: bytes, token: str) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
    head += f"Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


if __name__ == "__main__":
    started = time.monotonic()
    seen = asyncio.run(Flood(json.loads(sys.argv[1])).run())
    print(json.dumps({"seconds": time.monotonic() - started, "seen": seen}))
