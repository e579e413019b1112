"""One informer over a chosen set of namespaces, for an operator that may not (or should not) watch them all.

The API server lists and watches either one namespace or all of them; an operator limited to a few
namespaces (each with its own RoleBinding, no cluster-wide rights) needs one list+watch per namespace.
`MultiNamespaceInformer` runs one plain `Informer` per namespace and merges them into one store and one
stream of handler calls, so controllers see a single informer, exactly as with one namespace. It is
synced once every namespace is. Cached objects are shared with the per-namespace stores, not copied.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubetrain.common.clock import Clock
from kubetrain.common.kube import objects
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.informer import Informer
from kubetrain.common.kube.resources import Obj, Resource

__all__ = ["MultiNamespaceInformer"]


def _unchanged(obj: Obj) -> Obj:
    return obj


class MultiNamespaceInformer(Informer):
    """An `Informer` of `resource` in each of `namespaces`, merged. `options` go to each member Informer."""

    def __init__(
        self,
        api: ApiClient,
        resource: Resource,
        *,
        clock: Clock,
        namespaces: Sequence[str],
        label_selector: str | Mapping[str, str] | None = None,
        field_selector: str | None = None,
        transform: Callable[[Obj], Obj] | None = None,
        **options: Any,
    ) -> None:
        if not namespaces:
            raise ValueError("MultiNamespaceInformer needs at least one namespace")
        # Members transform each object once; the merged store keeps what they cached.
        super().__init__(
            api, resource, clock=clock, label_selector=label_selector, field_selector=field_selector,
            transform=_unchanged,
        )  # fmt: skip
        self.namespaces = tuple(dict.fromkeys(namespaces))
        self.members = [self._member(ns, transform, options) for ns in self.namespaces]
        for member in self.members:
            member.add_handler(_Merge(self))

    def _member(self, namespace: str, transform: Callable[[Obj], Obj] | None, options: Any) -> Informer:
        return Informer(
            self.api, self.resource, clock=self._clock, namespace=namespace,
            label_selector=self.label_selector, field_selector=self.field_selector, transform=transform,
            **options,
        )  # fmt: skip

    async def run(self) -> None:
        """Run every member until cancelled; a member that dies takes the others down with it, and its
        error is raised as it is (a member's CacheSyncError names its namespace)."""
        # not a TaskGroup: it would wrap the error in an ExceptionGroup
        tasks = [
            asyncio.create_task(member.run(), name=f"informer-{self.resource}-{member.namespace}")
            for member in self.members
        ]
        tasks.append(asyncio.create_task(self._synced_when_members_are()))
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                if (err := task.exception()) is not None:
                    raise err
            raise RuntimeError(f"the informers of {self.resource} returned")  # members never return
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _synced_when_members_are(self) -> None:
        for member in self.members:
            await member.wait_synced()
        self._synced.set()


class _Merge:
    """Forwards a member's changes into the merged informer (its store, then its handlers)."""

    def __init__(self, merged: MultiNamespaceInformer) -> None:
        self._merged = merged

    def on_add(self, obj: Obj) -> None:
        self._merged._apply(obj)

    def on_update(self, old: Obj, new: Obj) -> None:
        self._merged._apply(new)

    def on_delete(self, obj: Obj) -> None:
        self._merged._removed(objects.namespace(obj), objects.name(obj), obj)
