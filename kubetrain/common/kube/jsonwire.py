"""JSON to and from the API server, by msgspec.

Every watch event, list and answer the operator reads is decoded here, and every body it sends is encoded
here. Against the standard library's json, msgspec decodes a pod's watch event (about 5 KB) in half the
time and encodes a pod's create body in a ninth (`python bench/json_codecs.py`; bench/README.md). orjson
is as fast, but decodes an integer past 64 bits as a float, silently; msgspec keeps it exact, as json
does, and encodes whatever json encoded here (integer keys as strings).

Watch events and list pages can be read without `metadata.managedFields` (`managed_fields=False`), the
field an informer drops anyway: it is about half of a pod's bytes and most of its small dicts, and it is
never built. A watch event's object is decoded in one call against a typed shape, `_Object`: the members
an object of the core API or of a CRD has at its top level (`apiVersion`, `kind`, `metadata`, `spec`,
`status`, `data`, ...), with `metadata` as the fields of an ObjectMeta and `managedFields` skipped as raw
JSON. List pages are read the same way, item by item. Both shapes refuse a member they do not name, so an
object with any other member (an Event, a Role, a field a later Kubernetes adds to ObjectMeta), or a page
holding one, is decoded the general way instead: split into its members as raw JSON, and only those
kept decoded. Nothing is ever dropped but `managedFields`. A pod's watch event captured from the bench's
kwok cluster (7.0 KB, 3.1 KB of it managedFields) costs 26 us typed, 36 us split and 43 us decoded whole
and then trimmed; `python bench/json_codecs.py` times it on a smaller synthetic pod.

Malformed JSON, or an event or page of the wrong shape, raises `msgspec.DecodeError`, a `ValueError`.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

__all__ = ["copy", "dumps", "loads", "loads_list", "loads_metadata", "loads_watch_event"]

T = TypeVar("T")

_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()
_members = msgspec.json.Decoder(dict[str, msgspec.Raw])


class _Event(msgspec.Struct):
    type: str
    object: dict[str, msgspec.Raw] = msgspec.field(default_factory=dict)


class _Meta(msgspec.Struct, forbid_unknown_fields=True):
    """The fields of an ObjectMeta (Kubernetes 1.36), `managedFields` kept raw (skipped, not built)."""

    name: Any = UNSET
    generateName: Any = UNSET
    namespace: Any = UNSET
    selfLink: Any = UNSET
    uid: Any = UNSET
    resourceVersion: Any = UNSET
    generation: Any = UNSET
    creationTimestamp: Any = UNSET
    deletionTimestamp: Any = UNSET
    deletionGracePeriodSeconds: Any = UNSET
    labels: Any = UNSET
    annotations: Any = UNSET
    ownerReferences: Any = UNSET
    finalizers: Any = UNSET
    managedFields: msgspec.Raw | UnsetType = UNSET


class _Object(msgspec.Struct, forbid_unknown_fields=True):
    """The top-level members of the objects informers usually hold: pods, Services, ConfigMaps,
    Secrets and custom resources."""

    apiVersion: Any = UNSET
    kind: Any = UNSET
    metadata: _Meta | UnsetType = UNSET
    spec: Any = UNSET
    status: Any = UNSET
    data: Any = UNSET
    binaryData: Any = UNSET
    stringData: Any = UNSET
    immutable: Any = UNSET
    type: Any = UNSET


class _TypedEvent(msgspec.Struct):
    type: str
    object: _Object


_META_FIELDS = tuple(f for f in _Meta.__struct_fields__ if f != "managedFields")
_OBJECT_FIELDS = _Object.__struct_fields__


class _TypedPage(msgspec.Struct):
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    items: list[_Object] | None = None


class _Page(msgspec.Struct):
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    items: list[dict[str, msgspec.Raw]] | None = None


class _Head(msgspec.Struct):
    metadata: dict[str, msgspec.Raw] = msgspec.field(default_factory=dict)


_event = msgspec.json.Decoder(_Event)
_head = msgspec.json.Decoder(_Head)
_typed_event = msgspec.json.Decoder(_TypedEvent)
_typed_page = msgspec.json.Decoder(_TypedPage)
_page = msgspec.json.Decoder(_Page)


def loads(data: bytes | str) -> Any:
    """The JSON value in `data` (UTF-8 bytes or text)."""
    return _decoder.decode(data)


def dumps(value: object) -> bytes:
    """`value` as compact UTF-8 JSON."""
    return _encoder.encode(value)


def copy(value: T) -> T:
    """A deep copy of JSON data (an object as the API server sends it, a template's wire form), made by
    encoding and decoding it: 1.7 us for a pod template where `copy.deepcopy` takes 11 us. Only for JSON
    data: a tuple comes back a list, and a non-string key a string."""
    copied: T = _decoder.decode(_encoder.encode(value))
    return copied


def loads_metadata(data: bytes | str) -> dict[str, Any]:
    """`{"metadata": {...}}` of the object in `data`, without `managedFields`; its other members are skipped,
    not decoded (a job's answer to a status patch, when only its new resourceVersion is wanted)."""
    return {"metadata": _lean_metadata(_head.decode(data).metadata)}


def loads_watch_event(data: bytes | str, *, managed_fields: bool = True) -> dict[str, Any]:
    """One watch event, `{"type": ..., "object": {...}}`; `managed_fields=False` leaves out the object's
    `metadata.managedFields` without decoding it."""
    if managed_fields:
        event: dict[str, Any] = _decoder.decode(data)
        return event
    try:
        typed = _typed_event.decode(data)
    except msgspec.ValidationError:  # a member `_Object` or `_Meta` does not name (or no object at all)
        lean = _event.decode(data)
        return {"type": lean.type, "object": _without_managed_fields(lean.object)}
    return {"type": typed.type, "object": _plain(typed.object)}


def loads_list(data: bytes | str, *, managed_fields: bool = True) -> dict[str, Any]:
    """One page of a list, `{"metadata": {...}, "items": [...]}` (other members are not kept when
    `managed_fields=False`, which leaves out each item's `metadata.managedFields` without decoding it)."""
    if managed_fields:
        page: dict[str, Any] = _decoder.decode(data)
        return page
    try:
        typed = _typed_page.decode(data)
    except msgspec.ValidationError:  # an item with a member `_Object` or `_Meta` does not name
        lean = _page.decode(data)
        return {
            "metadata": lean.metadata,
            "items": [_without_managed_fields(item) for item in lean.items or ()],
        }
    return {"metadata": typed.metadata, "items": [_plain(item) for item in typed.items or ()]}


def _plain(obj: _Object) -> dict[str, Any]:
    """The typed object as the dict the general decoding gives, without `metadata.managedFields`."""
    plain = {}
    for field in _OBJECT_FIELDS:
        value = getattr(obj, field)
        if value is UNSET:
            continue
        if field == "metadata":
            value = {key: member for key in _META_FIELDS if (member := getattr(value, key)) is not UNSET}
        plain[field] = value
    return plain


def _without_managed_fields(members: dict[str, msgspec.Raw]) -> dict[str, Any]:
    """An object split into raw members, decoded without `metadata.managedFields` (the general path)."""
    return {
        key: _lean_metadata(_members.decode(raw)) if key == "metadata" else _decoder.decode(raw)
        for key, raw in members.items()
    }


def _lean_metadata(members: dict[str, msgspec.Raw]) -> dict[str, Any]:
    """An ObjectMeta split into raw members, decoded without `managedFields`."""
    return {key: _decoder.decode(raw) for key, raw in members.items() if key != "managedFields"}
