"""The Manager's labelled informers: the controllers that each want the objects with their own value of a
label share one list and one watch per resource, scope and label key.

What a user relies on: one informer (one list, one watch per namespace) however many values are asked
for; its store holds the objects of every value asked for and nothing else; a scope of several
namespaces keeps working; a value asked for once the manager runs is refused with a message that says
when to ask, since the informer already watches with its selector.
"""

from __future__ import annotations

import asyncio

import pytest

from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.resources import PODS, SERVICES
from kubetrain.common.manager import Manager
from kubetrain.common.testing import FakeClock, settle

KEY = "training.kubeflow.org/operator-name"
OTHER_KEY = "example.dev/operator-name"


def pod(name: str, labels: dict[str, str]) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": labels}}


async def cluster(*namespaces: str) -> tuple[FakeClock, InMemoryApiClient]:
    clock = FakeClock()
    api = InMemoryApiClient(clock=clock)
    for ns in namespaces:
        for value in ("a", "b", "c"):
            await api.create(PODS, ns, pod(value, {KEY: value}))
        await api.create(PODS, ns, pod("other-key", {OTHER_KEY: "a"}))
        await api.create(PODS, ns, pod("unlabelled", {}))
    return clock, api


def names(manager: Manager, resource: object = PODS) -> list[list[str]]:
    return [sorted(str(k) for k in i.store.list_keys()) for i in manager.informers if i.resource == resource]


async def test_the_values_of_one_key_share_one_informer_that_selects_them_all() -> None:
    clock, api = await cluster("ns", "elsewhere")
    manager = Manager(api, clock=clock, http_address=None, namespace="ns")
    b = manager.labelled_informer(PODS, key=KEY, value="b")
    a = manager.labelled_informer(PODS, key=KEY, value="a")
    assert manager.labelled_informer(PODS, key=KEY, value="a") is a is b
    other = manager.labelled_informer(PODS, key=OTHER_KEY, value="a")
    exact = manager.informer(PODS, label_selector={KEY: "c"})  # exact selectors: as before, their own
    services = manager.labelled_informer(SERVICES, key=KEY, value="a")
    assert len({id(i) for i in (a, other, exact, services)}) == 4
    task = asyncio.ensure_future(manager.run())
    await settle()

    assert a.label_selector == f"{KEY} in (a,b)"
    assert sorted(str(k) for k in a.store.list_keys()) == ["ns/a", "ns/b"]
    assert sorted(str(k) for k in other.store.list_keys()) == ["ns/other-key"]
    assert sorted(str(k) for k in exact.store.list_keys()) == ["ns/c"]
    # the fake does not stream lists: each informer's streaming watch is refused, then it lists and watches
    assert (api.count("list", PODS), api.count("watch", PODS)) == (3, 6), "a, the other key, c"
    await api.create(PODS, "ns", pod("b2", {KEY: "b"}))
    await api.create(PODS, "ns", pod("c2", {KEY: "c"}))
    await settle()
    assert sorted(str(k) for k in a.store.list_keys()) == ["ns/a", "ns/b", "ns/b2"]
    manager.stop()
    await asyncio.wait_for(task, 5)


async def test_several_namespaces_list_and_watch_each_with_the_shared_selector() -> None:
    clock, api = await cluster("x", "y", "z")
    manager = Manager(api, clock=clock, http_address=None, namespace=["x", "y"])
    for value in ("c", "a"):
        informer = manager.labelled_informer(PODS, key=KEY, value=value)
    task = asyncio.ensure_future(manager.run())
    await settle()

    assert names(manager) == [["x/a", "x/c", "y/a", "y/c"]]
    # per namespace: the refused streaming list, the list and the watch (the fake does not stream lists)
    assert (api.count("list", PODS), api.count("watch", PODS)) == (2, 4), "one of each per namespace"
    await api.create(PODS, "y", pod("a2", {KEY: "a"}))
    await api.create(PODS, "y", pod("b2", {KEY: "b"}))
    await settle()
    assert "y/a2" in {str(k) for k in informer.store.list_keys()}
    assert "y/b2" not in {str(k) for k in informer.store.list_keys()}
    manager.stop()
    await asyncio.wait_for(task, 5)


async def test_a_value_asked_for_after_the_start_is_refused_with_the_fix() -> None:
    clock, api = await cluster("ns")
    manager = Manager(api, clock=clock, http_address=None)
    informer = manager.labelled_informer(PODS, key=KEY, value="a")
    task = asyncio.ensure_future(manager.run())
    await settle()

    assert manager.labelled_informer(PODS, key=KEY, value="a") is informer, "a value it has: fine"
    with pytest.raises(RuntimeError, match=r"value='b'\) after the manager started.*before Manager.run"):
        manager.labelled_informer(PODS, key=KEY, value="b")
    with pytest.raises(RuntimeError, match="after the manager started"):
        manager.labelled_informer(SERVICES, key=KEY, value="a")
    manager.stop()
    await asyncio.wait_for(task, 5)


def test_a_value_a_selector_cannot_carry_is_refused() -> None:
    manager = Manager(InMemoryApiClient(), http_address=None)
    with pytest.raises(ValueError, match=r"value='a,b'.*must be a label value"):
        manager.labelled_informer(PODS, key=KEY, value="a,b")
