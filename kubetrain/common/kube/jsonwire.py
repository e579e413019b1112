"""JSON to and from the API server, by msgspec.

Every watch event, list and answer the operator reads is decoded here, and every body it sends is encoded
here. Against the standard library's json, msgspec decodes a pod's watch event (about 5 KB) in half the
time and encodes a pod's create body in a ninth (`python bench/json_codecs.py`; bench/README.md). orjson
is as fast, but decodes an integer past 64 bits as a float, silently; msgspec keeps it exact, as json
does, and encodes whatever json encoded here (integer keys as strings).

Watch events and list pages can be read without `metadata.managedFields` (`managed_fields=False`), the
field an informer drops anyway: it is about half of a pod's bytes and most of its small dicts. Each
object is split into its members as raw JSON first, and only the members kept are decoded, so the
dropped field is never built. A pod's watch event captured from the bench's kwok cluster (7.0 KB, 3.1 KB
of it managedFields) costs 36 us instead of 43 us decoded whole and then trimmed; `python
bench/json_codecs.py` times it on a smaller synthetic pod.

Malformed JSON, or an event or page of the wrong shape, raises `msgspec.DecodeError`, a `ValueError`.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

__all__ = ["copy", "dumps", "loads", "loads_list", "loads_watch_event"]

T = TypeVar("T")

_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()
_members = msgspec.json.Decoder(dict[str, msgspec.Raw])


class _Event(msgspec.Struct):
    type: str
    object: dict[str, msgspec.Raw] = msgspec.field(default_factory=dict)


class _Page(msgspec.Struct):
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    items: list[dict[str, msgspec.Raw]] | None = None


_event = msgspec.json.Decoder(_Event)
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


def loads_watch_event(data: bytes | str, *, managed_fields: bool = True) -> dict[str, Any]:
    """One watch event, `{"type": ..., "object": {...}}`; `managed_fields=False` leaves out the object's
    `metadata.managedFields` without decoding it."""
    if managed_fields:
        event: dict[str, Any] = _decoder.decode(data)
        return event
    lean = _event.decode(data)
    return {"type": lean.type, "object": _without_managed_fields(lean.object)}


def loads_list(data: bytes | str, *, managed_fields: bool = True) -> dict[str, Any]:
    """One page of a list, `{"metadata": {...}, "items": [...]}` (other members are not kept when
    `managed_fields=False`, which leaves out each item's `metadata.managedFields` without decoding it)."""
    if managed_fields:
        page: dict[str, Any] = _decoder.decode(data)
        return page
    lean = _page.decode(data)
    return {"metadata": lean.metadata, "items": [_without_managed_fields(item) for item in lean.items or ()]}


def _without_managed_fields(members: dict[str, msgspec.Raw]) -> dict[str, Any]:
    obj = {}
    for key, raw in members.items():
        if key == "metadata":
            meta = _members.decode(raw)
            obj[key] = {k: _decoder.decode(v) for k, v in meta.items() if k != "managedFields"}
        else:
            obj[key] = _decoder.decode(raw)
    return obj
