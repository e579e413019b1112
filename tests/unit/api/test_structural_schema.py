"""The pydantic -> structural schema conversion: what a model author gets when a field has no CRD form."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import BaseModel, Field

from kubetrain.api.podschema import QUANTITY_PATTERN, SUMMARY_LIMIT, kubernetes_schema, pod_template_schema
from kubetrain.api.schema import KUBERNETES_REF, StructuralSchemaError, to_structural


def _structural(model: type[BaseModel]) -> dict[str, Any]:
    return to_structural(model.model_json_schema(by_alias=True), kubernetes=kubernetes_schema)


class _Node(BaseModel):
    name: str
    children: list[_Node] | None = None


class _Limits(BaseModel):
    """Bounds."""

    count: int | None = Field(default=3, gt=0, description="How many.")
    ratio: float = 0.5


def test_optional_fields_become_plain_typed_fields_without_defaults() -> None:
    schema = _structural(_Limits)
    assert schema == {
        "description": "Bounds.",
        "type": "object",
        "properties": {
            "count": {"description": "How many.", "type": "integer", "minimum": 0, "exclusiveMinimum": True},
            "ratio": {"type": "number"},
        },
    }


def test_a_recursive_model_is_cut_instead_of_looping() -> None:
    schema = _structural(_Node)
    assert schema["properties"]["name"] == {"type": "string"}
    children = schema["properties"]["children"]
    assert children == {
        "type": "array",
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    }


def test_a_union_without_structural_form_names_the_field() -> None:
    class Bad(BaseModel):
        port: int | str

    with pytest.raises(StructuralSchemaError, match=r"port: a union of 2 types"):
        _structural(Bad)


def test_a_marked_node_becomes_the_kubernetes_definition() -> None:
    schema = to_structural(
        {"type": "object", "properties": {"t": {KUBERNETES_REF: "io.k8s.api.core.v1.PodTemplateSpec"}}},
        kubernetes=kubernetes_schema,
    )
    assert schema["properties"]["t"] == pod_template_schema()


def test_pod_template_schema_has_no_refs_and_no_nulls() -> None:
    text = str(pod_template_schema())
    for needle in ("$ref", "'null'", "x-kubernetes-patch", "oneOf"):
        assert needle not in text


def test_only_the_most_used_fields_keep_a_short_description() -> None:
    spec = pod_template_schema()["properties"]["spec"]["properties"]
    container = spec["containers"]["items"]["properties"]
    assert container["image"]["description"] == "Container image name."
    assert container["imagePullPolicy"]["description"].startswith("Image pull policy. One of Always, Never")
    assert spec["restartPolicy"]["description"].startswith("Restart policy for all containers")
    described = _descriptions(pod_template_schema())
    long_ones = [text for text in described if len(text) > SUMMARY_LIMIT]
    assert all(re.search(r"[.!?]\s+[A-Z`(]", text) is None for text in long_ones), (
        "only a first sentence may be long"
    )
    probe = container["livenessProbe"]["properties"]
    assert "description" not in probe["periodSeconds"], "Probe is not among the described definitions"


def _descriptions(node: object) -> list[str]:
    if isinstance(node, dict):
        own = [node["description"]] if isinstance(node.get("description"), str) else []
        return own + [text for value in node.values() for text in _descriptions(value)]
    if isinstance(node, list):
        return [text for value in node for text in _descriptions(value)]
    return []


def test_optional_list_map_keys_get_the_native_defaults() -> None:
    pod = pod_template_schema()["properties"]["spec"]["properties"]
    port = pod["containers"]["items"]["properties"]["ports"]["items"]["properties"]
    assert {k: v for k, v in port["protocol"].items() if k != "description"} == {
        "type": "string",
        "enum": ["TCP", "UDP", "SCTP", ""],
        "default": "TCP",
    }
    assert pod["imagePullSecrets"]["items"]["properties"]["name"] == {"type": "string", "default": ""}


def test_quantities_and_int_or_strings() -> None:
    container = pod_template_schema()["properties"]["spec"]["properties"]["containers"]["items"]["properties"]
    memory = container["resources"]["properties"]["limits"]["additionalProperties"]
    assert memory == {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
        "pattern": QUANTITY_PATTERN,
    }
    port = container["livenessProbe"]["properties"]["httpGet"]["properties"]["port"]
    assert port == {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
