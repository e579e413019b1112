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


_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "j-worker-0",
        "namespace": "ns",
        "resourceVersion": "12",
        "labels": {"training.kubeflow.org/job-name": "j"},
        "managedFields": [{"manager": "kubetrain", "fieldsV1": {"f:spec": {"f:containers": {}}}}],
        "ownerReferences": [{"kind": "PyTorchJob", "name": "j", "controller": True}],
    },
    "spec": {"containers": [{"name": "main", "image": "busybox"}], "seed": 2**70},
    "status": {"phase": "Running"},
}


def _without_managed_fields(obj: dict[str, object]) -> dict[str, object]:
    lean = json.loads(json.dumps(obj))
    del lean["metadata"]["managedFields"]
    return lean  # type: ignore[no-any-return]


@pytest.mark.parametrize("event_type", ["ADDED", "MODIFIED", "DELETED"])
def test_a_watch_event_without_managed_fields_keeps_everything_else(event_type: str) -> None:
    line = json.dumps({"type": event_type, "object": _POD}).encode()
    assert jsonwire.loads_watch_event(line, managed_fields=False) == {
        "type": event_type,
        "object": _without_managed_fields(_POD),
    }
    assert jsonwire.loads_watch_event(line) == json.loads(line)


def test_bookmarks_and_error_events_decode_without_managed_fields() -> None:
    """A BOOKMARK's object has only metadata; an ERROR's is a Status, with no metadata at all."""
    bookmark = b'{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"7"}}}'
    error = b'{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}}'
    for line in (bookmark, error):
        assert jsonwire.loads_watch_event(line, managed_fields=False) == json.loads(line)


_META = {
    "name": "j",
    "generateName": "j-",
    "namespace": "ns",
    "selfLink": "/x",
    "uid": "u",
    "resourceVersion": "3",
    "generation": 2,
    "creationTimestamp": "2026-11-28T00:00:00Z",
    "deletionTimestamp": "2026-11-28T00:01:00Z",
    "deletionGracePeriodSeconds": 30,
    "labels": {"a": "b"},
    "annotations": {"c": "d"},
    "ownerReferences": [{"kind": "MPIJob", "name": "j"}],
    "finalizers": ["f"],
    "managedFields": [{"manager": "m"}],
}


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(
            {"apiVersion": "v1", "kind": "Pod", "metadata": _META, "spec": {}, "status": {}}, id="pod"
        ),
        pytest.param(
            {"kind": "ConfigMap", "metadata": _META, "data": {"h": "x"}, "immutable": True}, id="configmap"
        ),
        pytest.param({"kind": "Secret", "metadata": _META, "type": "Opaque", "binaryData": {}}, id="secret"),
        pytest.param(
            {"kind": "Event", "metadata": _META, "reason": "Created", "count": 1}, id="other-members"
        ),
        pytest.param(
            {"kind": "X", "metadata": {**_META, "shardKey": "s"}, "spec": {}}, id="future-meta-field"
        ),
        pytest.param({"kind": "X", "spec": {"metadata": {"managedFields": 1}}}, id="nested-metadata-kept"),
        pytest.param({"kind": "X", "metadata": {"name": None, "managedFields": None}}, id="null-members"),
        pytest.param({"kind": "X"}, id="no-meta"),
        pytest.param({}, id="empty"),
    ],
)
def test_only_managed_fields_are_left_out_whatever_members_an_object_has(obj: dict[str, object]) -> None:
    """Objects of the shape most events have take the fast path, the others the general one: either
    way the object is the whole one without `metadata.managedFields`, and nothing else is lost."""
    whole = jsonwire.loads_watch_event(json.dumps({"type": "MODIFIED", "object": obj}).encode())
    meta = whole["object"].get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    lean = jsonwire.loads_watch_event(
        json.dumps({"type": "MODIFIED", "object": obj}).encode(), managed_fields=False
    )
    assert lean == whole
    page = json.dumps({"metadata": {"resourceVersion": "9"}, "items": [_POD, obj]}).encode()
    listed = jsonwire.loads_list(page, managed_fields=False)
    assert listed == {
        "metadata": {"resourceVersion": "9"},
        "items": [_without_managed_fields(_POD), whole["object"]],
    }


def test_a_list_page_without_managed_fields() -> None:
    page = {"kind": "PodList", "metadata": {"resourceVersion": "40", "continue": "c"}, "items": [_POD, _POD]}
    data = json.dumps(page).encode()
    assert jsonwire.loads_list(data, managed_fields=False) == {
        "metadata": {"resourceVersion": "40", "continue": "c"},
        "items": [_without_managed_fields(_POD)] * 2,
    }
    assert jsonwire.loads_list(data) == page
    assert jsonwire.loads_list(b'{"kind":"PodList","metadata":{},"items":null}', managed_fields=False) == {
        "metadata": {},
        "items": [],
    }


@pytest.mark.parametrize(
    ("line", "complaint"),
    [
        (b'{"type":"ADDED","object":{"metadata":', "truncated"),
        (b'{"object":{}}', "missing required field `type`"),
        (b'{"type":"ADDED","object":[1]}', "Expected `object`"),
        (b'{"type":"ADDED","object":{"metadata":"x"}}', "Expected `object`"),
        (b'{"type":"ADDED","object":{"metadata":null}}', "Expected `object`, got `null`"),
    ],
)
def test_a_malformed_event_raises_a_value_error(line: bytes, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        jsonwire.loads_watch_event(line, managed_fields=False)


def test_a_copy_is_deep_and_equal() -> None:
    template = {"metadata": {"labels": {"a": "1"}}, "spec": {"containers": [{"name": "main", "env": []}]}}
    before = json.loads(json.dumps(template))
    copied = jsonwire.copy(template)
    assert copied == template
    copied["metadata"]["labels"]["b"] = "2"
    copied["spec"]["containers"][0]["env"].append({"name": "X"})
    assert template == before
