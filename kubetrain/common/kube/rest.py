"""`KubeApiClient`: the ApiClient over HTTP, for any Resource (CRDs included), on plain JSON dicts.

Credentials come from `credentials` (in-cluster config and kubeconfig files; kubernetes_asyncio only for
exec/auth-provider plugins, imported then). The requests are made here, on our own HTTP/1.1 client
(`kubetrain.common.kube.http`), because we need what kubernetes_asyncio's generated API does not give:
every status mapped to our error tree with the server's `Status` reason, a streaming watch with
bookmarks and in-stream ERROR events, a client-side QPS/burst limiter (a token bucket on the injected
clock) in front of every request, and client-go's `rest_client_requests_total{code,method,host}` counted
on every request (watches included; code "<error>" when no HTTP answer came back), with its latency and
rate-limiter wait histograms.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from kubetrain.common.clock import Clock, SystemClock
from kubetrain.common.errors import ApiError, TooManyRequests, TransportError, error_from_status
from kubetrain.common.kube import jsonwire
from kubetrain.common.kube.client import (
    DEFAULT_FIELD_MANAGER,
    JsonPatch,
    LabelSelector,
    ObjectList,
    PatchType,
    Propagation,
    WatchEvent,
    WatchEventType,
)
from kubetrain.common.kube.credentials import Credentials, load_credentials
from kubetrain.common.kube.http import HttpClient, Response
from kubetrain.common.kube.proxy import proxy_from_environment
from kubetrain.common.kube.resources import Obj, Resource
from kubetrain.common.kube.selectors import format_labels
from kubetrain.common.metrics import REST_ERROR_CODE, Metrics
from kubetrain.common.ratelimit import TokenBucket

__all__ = ["Credentials", "KubeApiClient", "load_credentials"]

_PAGE = 500
_MAX_LINE = 64 * 1024 * 1024  # a watch event larger than this is not a Kubernetes object
_EVENT_TYPES = {member.value: member for member in WatchEventType}  # a lookup, where a call costs 1 us


def _selector(selector: LabelSelector | None) -> str | None:
    if selector is None:
        return None
    return format_labels(selector) if isinstance(selector, Mapping) else selector


class KubeApiClient:
    """The real ApiClient (see `kubetrain.common.kube.client.ApiClient` for the contract).

    `qps`/`burst` bound the request rate of this client (watches count once, when they start).
    `metrics`, when given, counts every request in `rest_client_requests_total`.
    Build it inside a running event loop (`await KubeApiClient.connect(...)`), close it with `close()`.
    """

    def __init__(
        self,
        credentials: Credentials,
        *,
        qps: float = 50.0,
        burst: int = 100,
        clock: Clock | None = None,
        request_timeout: float = 30.0,
        user_agent: str = "kubetrain",
        metrics: Metrics | None = None,
    ) -> None:
        self._cfg = credentials
        self._base = credentials.host.rstrip("/")
        self._clock = clock or SystemClock()
        self._limiter = TokenBucket(qps, burst, clock=self._clock)
        self._timeout = request_timeout
        self._user_agent = user_agent
        self._metrics = metrics
        self._host = urlsplit(self._base).netloc  # client-go's `host` label: the server's host:port
        tls = credentials.ssl_context() if self._base.startswith("https:") else None
        proxy = credentials.proxy or proxy_from_environment(self._base, os.environ)
        name = credentials.tls_server_name
        self._http = HttpClient(self._base, ssl_context=tls, server_name=name, proxy=proxy)

    @classmethod
    async def connect(
        cls, kubeconfig: str | None = None, *, context: str | None = None, **options: Any
    ) -> KubeApiClient:
        """A client from `kubeconfig` (or in-cluster config); `options` go to the constructor."""
        return cls(await load_credentials(kubeconfig, context=context), **options)

    async def close(self) -> None:
        """Close every connection (watches in progress end with a TransportError). Idempotent."""
        await self._http.close()

    # verbs ------------------------------------------------------------------------------------------
    async def get(self, res: Resource, namespace: str | None, name: str) -> Obj:
        return _with_kind(res, await self._request("GET", res.path(namespace, name)))

    async def get_path(self, path: str) -> Obj:
        """GET a JSON document that is not an API object (`/.well-known/openid-configuration`,
        `/openid/v1/jwks`), within this client's rate limit."""
        return await self._request("GET", path, parse=json.loads, accept=_DOCUMENTS)

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: LabelSelector | None = None,
        field_selector: str | None = None,
        managed_fields: bool = True,
    ) -> ObjectList:
        params = {
            "labelSelector": _selector(label_selector),
            "fieldSelector": field_selector,
            "limit": str(_PAGE),
        }
        items: list[Obj] = []

        def parse(data: bytes) -> Obj:
            return jsonwire.loads_list(data, managed_fields=managed_fields)

        while True:
            page = await self._request("GET", res.path(namespace), params=params, parse=parse)
            items.extend(_with_kind(res, item) for item in page.get("items") or ())
            meta = page.get("metadata") or {}
            if not meta.get("continue"):
                return ObjectList(items, str(meta.get("resourceVersion", "")))
            params["continue"] = meta["continue"]

    async def create(self, res: Resource, namespace: str | None, body: Obj, *, read_back: bool = True) -> Obj:
        body = {"apiVersion": res.api_version, "kind": res.kind, **body}
        params = {"fieldManager": DEFAULT_FIELD_MANAGER}
        return await self._request("POST", res.path(namespace), params=params, body=body, decode=read_back)

    async def replace(
        self, res: Resource, namespace: str | None, name: str, body: Obj, *, subresource: str | None = None
    ) -> Obj:
        body = {"apiVersion": res.api_version, "kind": res.kind, **body}
        params = {"fieldManager": DEFAULT_FIELD_MANAGER}
        return await self._request("PUT", res.path(namespace, name, subresource), params=params, body=body)

    async def patch(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        body: Obj | JsonPatch,
        *,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
        field_manager: str = DEFAULT_FIELD_MANAGER,
        force: bool = False,
        read_back: bool = True,
    ) -> Obj:
        params = {
            "fieldManager": field_manager,
            "force": "true" if force and patch_type is PatchType.APPLY else None,
        }
        path = res.path(namespace, name, subresource)
        parse = jsonwire.loads if read_back else jsonwire.loads_metadata
        return await self._request(
            "PATCH", path, params=params, body=body, content_type=str(patch_type), parse=parse
        )

    async def delete(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        *,
        propagation: Propagation = Propagation.BACKGROUND,
        uid_precondition: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        options: Obj = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": str(propagation)}
        if uid_precondition:
            options["preconditions"] = {"uid": uid_precondition}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        await self._request("DELETE", res.path(namespace, name), body=options)

    async def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        label_selector: LabelSelector | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        allow_bookmarks: bool = True,
        send_initial_events: bool = False,
        managed_fields: bool = True,
    ) -> AsyncGenerator[WatchEvent, None]:
        params = {
            "watch": "true",
            "resourceVersion": resource_version or None,
            "allowWatchBookmarks": "true" if allow_bookmarks or send_initial_events else None,
            "sendInitialEvents": "true" if send_initial_events else None,
            "resourceVersionMatch": "NotOlderThan" if send_initial_events else None,
            "timeoutSeconds": str(timeout_seconds),
            "labelSelector": _selector(label_selector),
            "fieldSelector": field_selector,
        }
        path = res.path(namespace)
        read = timeout_seconds + 30
        async with self._open_stream("GET", path, params=params, read=read) as resp:
            async for line in _lines(resp):
                event = jsonwire.loads_watch_event(line, managed_fields=managed_fields)
                if event.get("type") == "ERROR":
                    raise error_from_status(0, event.get("object") or {})
                kind = _EVENT_TYPES.get(event["type"])
                if kind is None:
                    raise ValueError(f"{event['type']!r} is not a watch event type")
                yield WatchEvent(kind, event.get("object") or {})

    # plumbing ---------------------------------------------------------------------------------------
    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | None] | None = None,
        body: object = None,
        content_type: str = "application/json",
        decode: bool = True,
        parse: Callable[[bytes], Obj] = jsonwire.loads,
        accept: str = "application/json",
    ) -> Obj:
        """One rate-limited request, answered within the client's timeout; the answer's JSON (by `parse`),
        `{}` when empty or not wanted (`decode=False`: read, so the connection is reused, but not parsed: a
        pod's answer is most of the cost of a request on our side). An error answer raises its ApiError."""
        query, data, headers, queued, sent = await self._prepare(params, body, content_type, accept)
        code: int | str = REST_ERROR_CODE
        try:
            async with asyncio.timeout(self._timeout):
                resp, answer = await self._http.fetch(method, path, query, headers, data)
            code = resp.status
        except TimeoutError as err:
            raise TransportError(f"{method} {path}: no answer within {self._timeout} s") from err
        finally:
            self._count(code, method, queued, sent)
        if resp.status >= 400:
            raise _error(resp, answer)
        return parse(answer) if answer and decode else {}

    @contextlib.asynccontextmanager
    async def _open_stream(
        self, method: str, path: str, *, params: Mapping[str, str | None], read: float
    ) -> AsyncIterator[Response]:
        """One rate-limited streamed request (a watch); yields the response once its head is read within
        the client's timeout, else raises the mapped error. `read`: how long the body may go without a
        chunk (a watch's server ends it after timeoutSeconds, so silence beyond is a dead line)."""
        query, _, headers, queued, sent = await self._prepare(params, None, "application/json")
        counted = False
        try:
            async with self._http.open(
                method, path, query=query, headers=headers, head_timeout_s=self._timeout, stream=True
            ) as resp:
                counted = True
                self._count(resp.status, method, queued, sent)
                if resp.status >= 400:
                    try:
                        answer = await resp.read()
                    except TransportError:
                        answer = b""
                    raise _error(resp, answer)
                resp.read_timeout = read
                yield resp
        finally:
            if not counted:
                self._count(REST_ERROR_CODE, method, queued, sent)

    async def _prepare(
        self,
        params: Mapping[str, str | None] | None,
        body: object,
        content_type: str,
        accept: str = "application/json",
    ) -> tuple[dict[str, str], bytes | None, dict[str, str], float, float]:
        """The query (unset parameters left out), the encoded body and the headers of a request, once the
        rate limiter lets it go; with the times it was queued and let go."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        data = jsonwire.dumps(body) if body is not None else None
        queued = self._clock.monotonic()
        await self._limiter.wait()
        sent = self._clock.monotonic()
        return query, data, await self._headers(content_type, accept), queued, sent

    def _count(self, code: int | str, method: str, queued: float, sent: float) -> None:
        if self._metrics is not None:
            now = self._clock.monotonic()
            self._metrics.rest_request(code, method, self._host, waited=sent - queued, took=now - sent)

    async def _headers(self, content_type: str, accept: str) -> dict[str, str]:
        headers = {"Accept": accept, "Content-Type": content_type, "User-Agent": self._user_agent}
        headers.update(await self._cfg.headers())
        return headers


_DOCUMENTS = "application/json, application/jwk-set+json"
"""What `get_path` accepts: the discovery document is JSON, the JWKS `application/jwk-set+json`."""


def _error(resp: Response, data: bytes) -> ApiError:
    """The ApiError of an error answer, from its Status body when it has one."""
    try:
        text = data.decode("utf-8", "replace")
        body: Any = json.loads(text) if text.startswith("{") else text
    except ValueError:
        body = None
    err = error_from_status(resp.status, body)
    if isinstance(err, TooManyRequests):
        retry_after = resp.headers.get("retry-after", "")
        err.retry_after = float(retry_after) if retry_after.isdigit() else None
    return err


async def _lines(resp: Response) -> AsyncGenerator[bytes, None]:
    """Newline-delimited JSON of any line length, however the server cut it into chunks."""
    pending: list[bytes] = []
    size = 0
    async for chunk in resp.chunks():
        start = 0
        while (cut := chunk.find(b"\n", start)) >= 0:
            line = b"".join((*pending, chunk[start:cut])) if pending else chunk[start:cut]
            pending, size, start = [], 0, cut + 1
            if line.strip():
                yield line
        if start < len(chunk):
            pending.append(chunk[start:])
            size += len(chunk) - start
            if size > _MAX_LINE:
                raise TransportError(f"watch event larger than {_MAX_LINE} bytes")
    if pending and (rest := b"".join(pending)).strip():
        yield rest


def _with_kind(res: Resource, obj: Obj) -> Obj:
    """List items come without apiVersion/kind; ownerReferences and events need them."""
    obj.setdefault("apiVersion", res.api_version)
    obj.setdefault("kind", res.kind)
    return obj
