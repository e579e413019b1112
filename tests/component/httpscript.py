"""A scripted socket server for HttpClient tests: each test hands it the exact bytes to answer.

Dumb on purpose, so that what the client does with chunked bodies, dropped connections and odd heads is
fixed by the test, not by some server's habits.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from kubetrain.common.kube.http import HttpClient

Script = Callable[["Server", asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


@dataclass
class Server:
    """Runs `script(self, reader, writer, n)` for connection n = 0, 1, ...; records the requests."""

    script: Script
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    port: int = 0
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        n, self.connections = self.connections, self.connections + 1
        self.writers.append(writer)
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await self.script(self, reader, writer, n)
        writer.close()

    async def read_request(self, reader: asyncio.StreamReader) -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        request = head + (await reader.readexactly(length) if length else b"")
        self.requests.append(request)
        return request


@contextlib.asynccontextmanager
async def serving(script: Script, ssl_context: ssl.SSLContext | None = None) -> AsyncIterator[Server]:
    srv = Server(script)
    server = await asyncio.start_server(srv.handle, "127.0.0.1", 0, ssl=ssl_context)
    srv.port = server.sockets[0].getsockname()[1]
    try:
        yield srv
    finally:
        server.close()
        for writer in srv.writers:
            writer.close()
        await asyncio.gather(*(w.wait_closed() for w in srv.writers), return_exceptions=True)
        await server.wait_closed()


def ok(body: bytes = b'{"ok":true}', *extra: str) -> bytes:
    head = ["HTTP/1.1 200 OK", "Content-Type: application/json", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def keep_answering(answer: bytes) -> Script:
    async def script(me: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _n: int) -> None:
        while True:
            await me.read_request(reader)
            writer.write(answer)
            await writer.drain()

    return script


@contextlib.asynccontextmanager
async def client_of(script: Script, **options: object) -> AsyncIterator[tuple[Server, HttpClient]]:
    async with serving(script) as srv:
        client = HttpClient(f"http://127.0.0.1:{srv.port}", **options)  # type: ignore[arg-type]
        try:
            yield srv, client
        finally:
            await client.close()


async def get(client: HttpClient, path: str = "/api", **options: object) -> tuple[int, bytes]:
    async with client.open("GET", path, **options) as resp:  # type: ignore[arg-type]
        return resp.status, await resp.read()
