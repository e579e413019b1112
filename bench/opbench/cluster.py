"""What the harness itself does on the cluster (as the admin): CRDs, namespaces, job submission, watches.

The harness's own client is given a generous rate limit: it must never be what slows a run down.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import yaml

from kubetrain.common.errors import AlreadyExists, Gone, NotFound, TooManyRequests
from kubetrain.common.kube.client import ApiClient, WatchEventType
from kubetrain.common.kube.resources import NAMESPACES, SERVICE_ACCOUNTS, Obj, Resource

__all__ = [
    "apply_crds",
    "create_namespace",
    "delete_namespace",
    "follow",
    "load_crds",
    "submit",
    "wait_for",
]

CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False)
_POLL = 0.2


async def wait_for(what: str, check: Callable[[], Awaitable[bool]], *, within: float) -> None:
    """Poll `check` until it returns True; TimeoutError naming `what` after `within` seconds."""
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {within:.0f} s waiting for {what}")
        await asyncio.sleep(_POLL)


def load_crds(directory: Path) -> list[Obj]:
    """Every CustomResourceDefinition in `directory`/*.yaml (e.g. manifests/crds)."""
    docs = [doc for path in sorted(directory.glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text())]
    return [doc for doc in docs if doc and doc.get("kind") == "CustomResourceDefinition"]


async def apply_crds(api: ApiClient, crds: list[Obj], *, within: float = 60.0) -> list[str]:
    """Create (or replace) `crds` and wait until each is Established and its objects can be listed; returns
    their names.

    Established is not enough: for a moment after it, the API server answers the new resource with 429
    "storage is (re)initializing". The first subject would meet that and pay retries the later ones never
    see (kubetrain ran first: 6 refused lists at N = 100), so the harness waits it out before any run."""
    names = []
    for crd in crds:
        name = str(crd["metadata"]["name"])
        try:
            await api.create(CRDS, None, crd)
        except AlreadyExists:
            current = await api.get(CRDS, None, name)
            version = current["metadata"]["resourceVersion"]
            await api.replace(
                CRDS, None, name, {**crd, "metadata": {**crd["metadata"], "resourceVersion": version}}
            )
        names.append(name)
    for name in names:
        await wait_for(f"CRD {name} Established", functools.partial(_established, api, name), within=within)
    for crd in crds:
        await wait_for(
            f"CRD {crd['metadata']['name']} served", functools.partial(_served, api, crd), within=within
        )
    return names


async def _established(api: ApiClient, name: str) -> bool:
    conditions = ((await api.get(CRDS, None, name)).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


async def _served(api: ApiClient, crd: Obj) -> bool:
    spec = crd["spec"]
    version = next(v["name"] for v in spec["versions"] if v.get("storage"))
    names = spec["names"]
    resource = Resource(spec["group"], version, names["plural"], names["kind"], spec["scope"] == "Namespaced")
    try:
        await api.list(resource, label_selector="kubetrain.dev/bench=never-set")
    except (TooManyRequests, NotFound):
        return False
    return True


async def create_namespace(api: ApiClient, name: str, *, within: float = 60.0) -> None:
    """Create `name` and wait for its `default` ServiceAccount (pods cannot be created before it exists)."""
    await api.create(NAMESPACES, None, {"metadata": {"name": name}})
    await wait_for(
        f"ServiceAccount {name}/default",
        lambda: _exists(api, SERVICE_ACCOUNTS, name, "default"),
        within=within,
    )


async def delete_namespace(api: ApiClient, name: str, *, within: float) -> bool:
    """Delete `name` and wait until it is gone; False if it is still there after `within` seconds."""
    with contextlib.suppress(NotFound):
        await api.delete(NAMESPACES, None, name)
    try:
        await wait_for(f"namespace {name} gone", lambda: _gone(api, name), within=within)
    except TimeoutError:
        return False
    return True


async def _exists(api: ApiClient, res: Resource, namespace: str, name: str) -> bool:
    try:
        await api.get(res, namespace, name)
    except NotFound:
        return False
    return True


async def _gone(api: ApiClient, name: str) -> bool:
    return not await _exists(api, NAMESPACES, "", name)


async def submit(
    api: ApiClient, res: Resource, namespace: str, bodies: list[Obj], *, concurrency: int
) -> None:
    """Create `bodies` with at most `concurrency` requests in flight."""
    gate = asyncio.Semaphore(concurrency)

    async def one(body: Obj) -> None:
        async with gate:
            await api.create(res, namespace, body)

    async with asyncio.TaskGroup() as group:
        for body in bodies:
            group.create_task(one(body))


async def follow(
    api: ApiClient,
    res: Resource,
    namespace: str,
    observe: Callable[[Obj, float], None],
    listed: asyncio.Event,
) -> None:
    """List, then watch `res` in `namespace` forever, calling `observe(object, time.monotonic())` for every
    object seen (deletions excluded); `listed` is set once the first list is done. Relists on 410 Gone."""
    version = ""
    while True:
        if not version:
            found = await api.list(res, namespace)
            now = time.monotonic()
            for item in found.items:
                observe(item, now)
            version = found.resource_version
            listed.set()
        try:
            async for event in api.watch(res, namespace, resource_version=version, timeout_seconds=240):
                version = str(event.object.get("metadata", {}).get("resourceVersion") or version)
                if event.type not in (WatchEventType.BOOKMARK, WatchEventType.DELETED):
                    observe(event.object, time.monotonic())
        except Gone:
            version = ""
