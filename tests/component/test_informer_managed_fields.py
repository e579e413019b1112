"""An informer's cache holds no `metadata.managedFields`, and it asks the client not to decode them.

managedFields is often half an object's bytes and most of its small dicts; no controller reads it. The
default informer asks for objects without it on every list and watch (the real client then never builds
it: tests/integration/test_kube_client.py); an informer given its own transform gets whole objects.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.informer import Informer
from kubetrain.common.kube.resources import CONFIGMAPS, Obj
from kubetrain.common.testing import FakeClock, settle

_FIELDS = [{"manager": "someone", "operation": "Update", "fieldsV1": {"f:data": {"f:v": {}}}}]


def cm(name: str) -> Obj:
    return {"metadata": {"name": name, "managedFields": _FIELDS}, "data": {"v": "1"}}


class Asked:
    """The fake, noting the `managed_fields` of each list and watch."""

    def __init__(self, api: InMemoryApiClient) -> None:
        self.api = api
        self.asked: list[tuple[str, bool]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.api, name)

    async def list(self, *args: Any, managed_fields: bool = True, **kwargs: Any) -> Any:
        self.asked.append(("list", managed_fields))
        return await self.api.list(*args, managed_fields=managed_fields, **kwargs)

    def watch(self, *args: Any, managed_fields: bool = True, **kwargs: Any) -> Any:
        self.asked.append(("watch", managed_fields))
        return self.api.watch(*args, managed_fields=managed_fields, **kwargs)


async def cached(informer: Informer, fake: InMemoryApiClient) -> list[Obj]:
    task = asyncio.ensure_future(informer.run())
    try:
        await asyncio.wait_for(informer.wait_synced(), 1)
        await fake.create(CONFIGMAPS, "ns", cm("live"))
        await settle()
        return sorted(informer.store, key=lambda o: str(o["metadata"]["name"]))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_the_default_informer_asks_for_objects_without_managed_fields() -> None:
    clock = FakeClock()
    fake = InMemoryApiClient(clock=clock)
    await fake.create(CONFIGMAPS, "ns", cm("listed"))
    api = Asked(fake)
    informer = Informer(api, CONFIGMAPS, clock=clock, namespace="ns")  # type: ignore[arg-type]
    objs = await cached(informer, fake)
    assert [o["metadata"]["name"] for o in objs] == ["listed", "live"]
    assert all("managedFields" not in o["metadata"] for o in objs)
    assert [o["data"] for o in objs] == [{"v": "1"}] * 2, "nothing else is left out"
    # the fake refuses the streaming list (a watch), then lists and watches: each asked the same
    assert api.asked == [("watch", False), ("list", False), ("watch", False)]


async def test_an_informer_with_its_own_transform_gets_whole_objects() -> None:
    clock = FakeClock()
    fake = InMemoryApiClient(clock=clock)
    await fake.create(CONFIGMAPS, "ns", cm("listed"))
    api = Asked(fake)
    seen: list[Obj] = []

    def keep(obj: Obj) -> Obj:
        seen.append(obj)
        return obj

    informer = Informer(api, CONFIGMAPS, clock=clock, namespace="ns", transform=keep)  # type: ignore[arg-type]
    objs = await cached(informer, fake)
    assert [o["metadata"]["managedFields"] for o in objs] == [_FIELDS] * 2
    assert seen and all(o["metadata"]["managedFields"] == _FIELDS for o in seen)
    assert {managed for _, managed in api.asked} == {True}
