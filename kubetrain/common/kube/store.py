"""The informer's cache: objects by namespace/name, plus secondary indexes for cheap owned-object lookups.

Reads are what reconcilers use instead of the API server. A read returns the cached dict itself, not
a copy: treat it as read-only (deep-copy before changing it and sending it back). Only the informer
writes to the store. Everything runs on one event loop, so no locking is needed.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from kubetrain.common.kube import objects
from kubetrain.common.kube.resources import Obj
from kubetrain.common.kube.selectors import label_matcher
from kubetrain.common.reconcile import Request

__all__ = [
    "INDEX_CONTROLLER_UID",
    "INDEX_JOB_NAME",
    "JOB_NAME_LABEL",
    "IndexFn",
    "Store",
    "by_controller_uid",
    "by_namespaced_label",
]

IndexFn = Callable[[Obj], Iterable[str]]
"""Maps an object to the index values it is filed under (none, one or several)."""

INDEX_CONTROLLER_UID = "controller-uid"
INDEX_JOB_NAME = "job-name"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"


def by_controller_uid(obj: Obj) -> Iterable[str]:
    """Index value: the uid of the controlling ownerReference (`by_index(INDEX_CONTROLLER_UID, job_uid)`)."""
    ref = objects.controller_of(obj)
    return (str(ref["uid"]),) if ref and ref.get("uid") else ()


def by_namespaced_label(label: str) -> IndexFn:
    """Index values `"{namespace}/{value of label}"`, e.g. by_namespaced_label(JOB_NAME_LABEL)."""

    def index(obj: Obj) -> Iterable[str]:
        value = objects.labels(obj).get(label)
        return (f"{objects.namespace(obj)}/{value}",) if value is not None else ()

    return index


class Store:
    """Objects keyed by `Request(namespace, name)`, with named secondary indexes.

    Two indexes are always present: INDEX_CONTROLLER_UID (controller owner uid) and INDEX_JOB_NAME
    (`"{namespace}/{training.kubeflow.org/job-name label}"`). `add_index` adds more, indexing existing
    objects too.
    """

    def __init__(self) -> None:
        self._items: dict[Request, Obj] = {}
        self._index_fns: dict[str, IndexFn] = {}
        self._indexes: dict[str, dict[str, dict[Request, Obj]]] = {}
        self.add_index(INDEX_CONTROLLER_UID, by_controller_uid)
        self.add_index(INDEX_JOB_NAME, by_namespaced_label(JOB_NAME_LABEL))

    # reads ------------------------------------------------------------------------------------------
    def get(self, namespace: str, name: str) -> Obj | None:
        """The cached object or None. Read-only."""
        return self._items.get(Request(namespace, name))

    def list(
        self, namespace: str | None = None, *, label_selector: str | Mapping[str, str] | None = None
    ) -> list[Obj]:
        """Cached objects in `namespace` (all when None) that match `label_selector`. Read-only."""
        match = label_matcher(label_selector)
        return [
            o for k, o in self._items.items() if (namespace is None or k.namespace == namespace) and match(o)
        ]

    def by_index(self, index: str, value: str) -> builtins.list[Obj]:
        """Objects filed under `value` in the named index (KeyError for an unknown index). Read-only."""
        return list(self._indexes[index].get(value, {}).values())

    def list_keys(self) -> builtins.list[Request]:
        """A snapshot of the keys (safe to iterate while the store changes)."""
        return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Obj]:
        return iter(list(self._items.values()))

    def __contains__(self, key: Any) -> bool:
        return key in self._items

    def add_index(self, name: str, fn: IndexFn) -> None:
        """Register (or replace) an index and file every cached object under it."""
        self._index_fns[name] = fn
        self._indexes[name] = {}
        for key, obj in self._items.items():
            self._file(name, key, obj)

    # writes (informer only) ------------------------------------------------------------------------
    def upsert(self, obj: Obj) -> Obj | None:
        """Store `obj`; return the previous state or None."""
        key = objects.request_for(obj)
        old = self._items.get(key)
        self._items[key] = obj
        for name, fn in self._index_fns.items():
            values = tuple(fn(obj))
            if old is not None and (before := tuple(fn(old))) != values:  # usually equal: owner, labels kept
                self._unfile_one(name, key, before)
            self._file(name, key, obj, values)
        return old

    def remove(self, namespace: str, name: str) -> Obj | None:
        """Drop an object; return its last known state or None."""
        key = Request(namespace, name)
        old = self._items.pop(key, None)
        if old is not None:
            self._unfile(key, old)
        return old

    def _file(self, index: str, key: Request, obj: Obj, values: Iterable[str] | None = None) -> None:
        """File `obj` under `values` (default: what the index says of it), replacing its earlier state."""
        for value in self._index_fns[index](obj) if values is None else values:
            self._indexes[index].setdefault(value, {})[key] = obj

    def _unfile(self, key: Request, obj: Obj) -> None:
        for name, fn in self._index_fns.items():
            self._unfile_one(name, key, fn(obj))

    def _unfile_one(self, index: str, key: Request, values: Iterable[str]) -> None:
        for value in values:
            bucket = self._indexes[index].get(value)
            if bucket is not None:
                bucket.pop(key, None)
                if not bucket:
                    del self._indexes[index][value]
