"""Proxies as client-go uses them: HTTPS_PROXY/HTTP_PROXY/NO_PROXY from the environment, https:// proxies.

Issue 22, defect 5. A CONNECT proxy on loopback tunnels to a TLS server on loopback; the API server's
name (`api.internal`) is never resolved, so a request that reaches the server went through the proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from httpscript import keep_answering, ok, serving

from kubetrain.common.kube.credentials import Credentials
from kubetrain.common.kube.http import HttpClient
from kubetrain.common.kube.resources import NAMESPACES
from kubetrain.common.kube.rest import KubeApiClient
from kubetrain.testing.certs import ServingTls, make_serving_tls

NAMESPACE = b'{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"default"}}'


@dataclass
class ConnectProxy:
    """Answers CONNECT with 200 and pipes the bytes to `backend` (a loopback port); records each head."""

    backend: int
    heads: list[bytes] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        self.heads.append(head)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.backend)
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer), return_exceptions=True)
        for w in (writer, up_writer):
            w.transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.transport.abort()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> ServingTls:
    return make_serving_tls(tmp_path_factory.mktemp("tls"), "proxy-test")


def server_tls(pki: ServingTls) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(pki.crt, pki.key)
    return ctx


@contextlib.asynccontextmanager
async def proxied_api(pki: ServingTls, *, proxy_tls: bool) -> AsyncIterator[tuple[ConnectProxy, int]]:
    async with serving(keep_answering(ok(NAMESPACE)), server_tls(pki)) as api:
        proxy = ConnectProxy(api.port)
        server = await asyncio.start_server(
            proxy.handle, "127.0.0.1", 0, ssl=server_tls(pki) if proxy_tls else None
        )
        try:
            yield proxy, server.sockets[0].getsockname()[1]
        finally:
            server.close()


def api_client(pki: ServingTls) -> KubeApiClient:
    creds = Credentials("https://api.internal:6443", ca_file=str(pki.ca_crt), tls_server_name="localhost")
    return KubeApiClient(creds)


async def test_https_proxy_from_the_environment_carries_requests(
    pki: ServingTls, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with proxied_api(pki, proxy_tls=False) as (proxy, port):
        monkeypatch.setenv("HTTPS_PROXY", f"127.0.0.1:{port}")
        monkeypatch.setenv("NO_PROXY", "localhost,.cluster.local,10.0.0.0/8")
        client = api_client(pki)
        try:
            assert (await client.get(NAMESPACES, None, "default"))["metadata"]["name"] == "default"
        finally:
            await client.close()
    assert proxy.heads[0].startswith(b"CONNECT api.internal:6443 HTTP/1.1\r\nHost: api.internal:6443\r\n")


async def test_no_proxy_naming_the_server_means_a_direct_connection(
    pki: ServingTls, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(keep_answering(ok(NAMESPACE)), server_tls(pki)) as api:
        monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # the discard port: nothing listens
        monkeypatch.setenv("no_proxy", "example.com,localhost")
        creds = Credentials(f"https://localhost:{api.port}", ca_file=str(pki.ca_crt))
        client = KubeApiClient(creds)
        try:
            assert (await client.get(NAMESPACES, None, "default"))["metadata"]["name"] == "default"
        finally:
            await client.close()


async def test_an_https_proxy_is_reached_over_tls_and_tunnels_tls(pki: ServingTls) -> None:
    async with proxied_api(pki, proxy_tls=True) as (proxy, port):
        client = HttpClient(
            "https://api.internal:6443", proxy=f"https://127.0.0.1:{port}", server_name="localhost",
            ssl_context=ssl.create_default_context(cafile=str(pki.ca_crt)),
        )  # fmt: skip
        try:
            async with client.open("GET", "/api/v1/namespaces/default") as resp:
                assert (resp.status, await resp.read()) == (200, NAMESPACE)
        finally:
            await client.close()
    assert proxy.heads[0].startswith(b"CONNECT api.internal:6443 HTTP/1.1\r\n")
