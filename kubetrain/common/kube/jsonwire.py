"""JSON to and from the API server, by msgspec.

Every watch event, list and answer the operator reads is decoded here, and every body it sends is encoded
here. Against the standard library's json, msgspec decodes a pod's watch event (about 5 KB) in half the
time and encodes a pod's create body in a ninth (`python bench/json_codecs.py`; bench/README.md). orjson
is as fast, but decodes an integer past 64 bits as a float, silently; msgspec keeps it exact, as json
does, and encodes whatever json encoded here (integer keys as strings).

Malformed JSON raises `msgspec.DecodeError`, a `ValueError`.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["dumps", "loads"]

_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()


def loads(data: bytes | str) -> Any:
    """The JSON value in `data` (UTF-8 bytes or text)."""
    return _decoder.decode(data)


def dumps(value: object) -> bytes:
    """`value` as compact UTF-8 JSON."""
    return _encoder.encode(value)
