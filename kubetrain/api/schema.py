"""Pydantic JSON schema -> structural OpenAPI v3 schema, the only form a CustomResourceDefinition accepts.

Why: pydantic writes JSON Schema 2020-12 (`$ref`/`$defs`, `anyOf [X, null]` for optional fields, `title`,
numeric `exclusiveMinimum`); the API server wants a structural schema: every node typed, no `$ref`, no
`anyOf` except the int-or-string pair, boolean `exclusiveMinimum`. This module does that translation and
nothing else, so that the CRD assembly (`crd.py`) reads as a description of the CRDs.

Choices:
- Optional fields are simply not `required`; `nullable` is kept only where a model asks for it (`crd.py`
  marks the fields Go clients write as `null`): the API server drops a `null` for a non-nullable field
  while decoding a request, but rejects one that a mutating webhook puts back.
- Defaults are never emitted. The operator defaults in memory (`kubetrain.api` defaulting), as Kubeflow's
  v1 operator does; server-side defaults would change what users see stored and would freeze today's
  defaults into every object.
- `additionalProperties: false` (our models forbid unknown fields) is dropped: a CRD prunes unknown fields,
  and `kubectl apply` (strict field validation) reports them. An untyped free-form map becomes
  `x-kubernetes-preserve-unknown-fields`; a bare `type: object` stays bare (the object's own `metadata`).
- A node carrying `KUBERNETES_REF` is replaced by that Kubernetes definition (see `podschema.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["KUBERNETES_REF", "StructuralSchemaError", "to_structural"]

Schema = dict[str, Any]

KUBERNETES_REF = "x-kubetrain-kubernetes-ref"
"""Marker key: the node is the Kubernetes definition its value names, e.g. `io.k8s.api.core.v1.PodSpec`."""

_COPIED = (
    "description",
    "enum",
    "format",
    "minimum",
    "maximum",
    "pattern",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-validations",
    "nullable",
)
_DROPPED = frozenset({"title", "default", "examples", "$defs", "propertyNames"})
_HANDLED = frozenset(
    {"$ref", "anyOf", "type", "properties", "items", "additionalProperties", "required", "exclusiveMinimum"}
)
_NULL = {"type": "null"}


class StructuralSchemaError(Exception):
    """A model uses a JSON-schema construct that has no structural form; the message names the node."""


def to_structural(schema: Schema, *, kubernetes: Callable[[str], Schema]) -> Schema:
    """The structural form of a pydantic JSON schema; `kubernetes(name)` supplies marked Kubernetes types."""
    return _Converter(schema.get("$defs", {}), kubernetes).node(schema, "<root>")


class _Converter:
    def __init__(self, definitions: dict[str, Schema], kubernetes: Callable[[str], Schema]) -> None:
        self._definitions = definitions
        self._kubernetes = kubernetes
        self._stack: list[str] = []

    def node(self, node: Schema, where: str) -> Schema:
        if KUBERNETES_REF in node:
            return self._kubernetes(str(node[KUBERNETES_REF]))
        if "$ref" in node:
            return self._reference(node, where)
        if "anyOf" in node:
            return self._any_of(node, where)
        unknown = set(node) - _HANDLED - _DROPPED - set(_COPIED)
        if unknown:
            raise StructuralSchemaError(f"{where}: unsupported JSON-schema keywords {sorted(unknown)}")
        out: Schema = {k: node[k] for k in _COPIED if k in node}
        kind = node.get("type")
        if not isinstance(kind, str) and not out.get("x-kubernetes-preserve-unknown-fields"):
            raise StructuralSchemaError(f"{where}: no single type ({kind!r}); give the field a concrete type")
        if kind is not None:
            out["type"] = kind
        if "exclusiveMinimum" in node:
            out.update(minimum=node["exclusiveMinimum"], exclusiveMinimum=True)
        if kind == "object":
            self._object(node, out, where)
        elif kind == "array":
            out["items"] = self.node(node.get("items", {}), f"{where}[]")
        return out

    def _object(self, node: Schema, out: Schema, where: str) -> None:
        properties: dict[str, Schema] = node.get("properties", {})
        if properties:
            out["properties"] = {k: self.node(v, f"{where}.{k}") for k, v in sorted(properties.items())}
            if node.get("required"):
                out["required"] = sorted(node["required"])
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            if properties:
                raise StructuralSchemaError(f"{where}: both properties and a schema for extra keys")
            out["additionalProperties"] = self.node(extra, f"{where}.*")
        elif not properties and extra is True:
            out["x-kubernetes-preserve-unknown-fields"] = True

    def _reference(self, node: Schema, where: str) -> Schema:
        name = str(node["$ref"]).rsplit("/", 1)[-1]
        if name in self._stack:
            return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        self._stack.append(name)
        try:
            out = self.node(self._definitions[name], f"{where}<{name}>")
        finally:
            self._stack.pop()
        if "description" in node:
            out["description"] = node["description"]
        return out

    def _any_of(self, node: Schema, where: str) -> Schema:
        choices = [choice for choice in node["anyOf"] if choice != _NULL]
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        if node.get("x-kubernetes-int-or-string"):
            return {**{k: rest[k] for k in _COPIED if k in rest}, "anyOf": choices}
        if len(choices) != 1:
            raise StructuralSchemaError(f"{where}: a union of {len(choices)} types has no structural form")
        inner = self.node(choices[0], where)
        if "description" in rest:
            inner["description"] = rest["description"]
        return {**{k: rest[k] for k in _COPIED if k in rest and k != "description"}, **inner}
