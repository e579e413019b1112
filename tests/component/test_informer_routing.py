"""Handlers routed by controller kind: each is told only of the objects its kind controls.

An informer shared by every kind's controller (`Manager.labelled_informer`) carries all kinds' pods; a
handler added with `controlled_by=(group, kind)` must hear of exactly the objects whose controlling owner
is of that kind, before or after the change, and an unrouted handler of everything, in the order added.
"""

from __future__ import annotations

import asyncio

from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.informer import Informer
from kubetrain.common.kube.resources import PODS, Obj
from kubetrain.common.testing import FakeClock, settle

TF = ("kubeflow.org", "TFJob")
MPI = ("kubeflow.org", "MPIJob")


class Log:
    def __init__(self, name: str, into: list[tuple[str, str, str]]) -> None:
        self.name, self.into = name, into

    def on_add(self, obj: Obj) -> None:
        self.into.append((self.name, "add", obj["metadata"]["name"]))

    def on_update(self, old: Obj, new: Obj) -> None:
        self.into.append((self.name, "update", new["metadata"]["name"]))

    def on_delete(self, obj: Obj) -> None:
        self.into.append((self.name, "delete", obj["metadata"]["name"]))


def owned(name: str, owner: tuple[str, str] | None, *, controller: bool = True, version: str = "v1") -> Obj:
    meta: Obj = {"name": name, "labels": {}}
    if owner is not None:
        group, kind = owner
        meta["ownerReferences"] = [
            {
                "apiVersion": f"{group}/{version}",
                "kind": kind,
                "name": "j",
                "uid": "u",
                "controller": controller,
            }
        ]
    return {"metadata": meta, "spec": {}}


async def test_each_routed_handler_hears_only_of_its_own_kinds_objects() -> None:
    clock = FakeClock()
    api = InMemoryApiClient(clock=clock)
    informer = Informer(api, PODS, clock=clock, namespace="ns")
    heard: list[tuple[str, str, str]] = []
    informer.add_handler(Log("tf", heard), controlled_by=TF)
    informer.add_handler(Log("all", heard))
    informer.add_handler(Log("mpi", heard), controlled_by=MPI)
    task = asyncio.ensure_future(informer.run())
    try:
        await asyncio.wait_for(informer.wait_synced(), 1)
        await api.create(PODS, "ns", owned("tf-0", TF))
        await api.create(PODS, "ns", owned("mpi-0", MPI))
        await api.create(PODS, "ns", owned("bare", None))
        await api.create(PODS, "ns", owned("other-group", ("example.com", "TFJob")))
        await api.create(PODS, "ns", owned("not-controller", TF, controller=False))
        await api.create(PODS, "ns", owned("tf-v2", TF, version="v2"))
        await settle()
        assert heard == [
            ("tf", "add", "tf-0"),
            ("all", "add", "tf-0"),
            ("all", "add", "mpi-0"),
            ("mpi", "add", "mpi-0"),
            ("all", "add", "bare"),
            ("all", "add", "other-group"),
            ("all", "add", "not-controller"),
            ("tf", "add", "tf-v2"),
            ("all", "add", "tf-v2"),
        ]
        heard.clear()
        await api.patch(PODS, "ns", "mpi-0", {"spec": {"x": 1}})
        await api.delete(PODS, "ns", "tf-0")
        await settle()
        assert heard == [
            ("all", "update", "mpi-0"),
            ("mpi", "update", "mpi-0"),
            ("tf", "delete", "tf-0"),
            ("all", "delete", "tf-0"),
        ]
        heard.clear()
        # adopted by another kind: both kinds hear of it (the one it left and the one it joined)
        await api.patch(
            PODS,
            "ns",
            "mpi-0",
            {"metadata": {"ownerReferences": owned("x", TF)["metadata"]["ownerReferences"]}},
        )
        await settle()
        assert heard == [("tf", "update", "mpi-0"), ("all", "update", "mpi-0"), ("mpi", "update", "mpi-0")]
        heard.clear()
        # a handler added once the cache is full is told of what is there, routed the same way
        informer.add_handler(Log("late-mpi", heard), controlled_by=MPI)
        assert heard == []
        informer.add_handler(Log("late-tf", heard), controlled_by=TF)
        assert sorted(heard) == [("late-tf", "add", "mpi-0"), ("late-tf", "add", "tf-v2")]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
