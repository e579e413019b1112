"""JSON to and from the API server: faster than json, without losing what json kept."""

from __future__ import annotations

import json

import pytest

from kubetrain.common.kube import jsonwire


def test_a_watch_event_decodes_from_bytes_and_text() -> None:
    pod = b'{"kind":"Pod","metadata":{"name":"j-worker-0","labels":{"a":"\xc3\xa9"}}}'
    line = b'{"type":"MODIFIED","object":' + pod + b"}"
    assert jsonwire.loads(line) == json.loads(line)
    assert jsonwire.loads(line.decode()) == json.loads(line)


def test_an_integer_past_64_bits_still_decodes() -> None:
    """A CRD that keeps unknown fields may carry any JSON number; orjson would make this one a float."""
    assert jsonwire.loads(b'{"spec":{"seed":123456789012345678901234567890}}') == {
        "spec": {"seed": 123456789012345678901234567890}
    }


def test_malformed_json_raises_a_value_error() -> None:
    with pytest.raises(ValueError, match="truncated"):
        jsonwire.loads(b'{"kind": "Pod",')


def test_a_body_encodes_compactly_as_utf8() -> None:
    body = {"metadata": {"name": "j", "annotations": {"note": "é"}}, "spec": {"replicas": 2}}
    encoded = jsonwire.dumps(body)
    assert isinstance(encoded, bytes)
    assert json.loads(encoded) == body
    assert b" " not in encoded


def test_what_json_encoded_still_encodes() -> None:
    """Integer keys and integers past 64 bits: json took both, so callers that relied on it keep working."""
    body = {"data": {1: "one"}, "big": 2**70}
    assert json.loads(jsonwire.dumps(body)) == {"data": {"1": "one"}, "big": 2**70}
