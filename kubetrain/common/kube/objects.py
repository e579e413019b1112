"""Small, total accessors over raw object dicts, so that callers never chain `.get("metadata", {})`.

Every reader returns a neutral value ("" or an empty mapping) when a field is absent, and never
mutates its argument.
"""

from collections.abc import Mapping
from typing import Any

from kubetrain.common.kube.resources import Obj
from kubetrain.common.reconcile import Request

__all__ = [
    "annotations",
    "controller_of",
    "generation",
    "is_deleting",
    "labels",
    "name",
    "namespace",
    "owner_reference",
    "request_for",
    "resource_version",
    "uid",
]


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    if type(meta) is dict:  # what decoded JSON always holds; the ABC check below is the slow path
        return meta
    return meta if isinstance(meta, Mapping) else {}


def name(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("name") or "")


def namespace(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("namespace") or "")


def uid(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("uid") or "")


def resource_version(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("resourceVersion") or "")


def generation(obj: Mapping[str, Any]) -> int:
    return int(_meta(obj).get("generation") or 0)


def labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _meta(obj).get("labels") or {}


def annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _meta(obj).get("annotations") or {}


def is_deleting(obj: Mapping[str, Any]) -> bool:
    """True once the API server has set `deletionTimestamp` (the object waits on finalizers or grace)."""
    return bool(_meta(obj).get("deletionTimestamp"))


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ownerReference with `controller: true`, if any (there is at most one)."""
    for ref in _meta(obj).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref  # type: ignore[no-any-return]
    return None


def request_for(obj: Mapping[str, Any]) -> Request:
    return Request(namespace(obj), name(obj))


def owner_reference(
    owner: Mapping[str, Any], *, controller: bool = True, block_owner_deletion: bool = True
) -> Obj:
    """An ownerReference to `owner` (which must carry apiVersion, kind, metadata.name and metadata.uid)."""
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": name(owner),
        "uid": uid(owner),
        "controller": controller,
        "blockOwnerDeletion": block_owner_deletion,
    }
