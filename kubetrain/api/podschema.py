"""The core/v1 PodTemplateSpec as a structural CRD schema, so the API server validates pod templates.

Why: a job's pod templates are where users make most mistakes (a misspelt container field, `ports: "x"`).
The Kubeflow CRDs catch them at `kubectl apply`, but their files are ~600 KB and need server-side apply.
We build the schema from Kubernetes' own OpenAPI definitions (shipped per version by PyPI's
`kubernetes-validate`, a dev dependency: generation needs it, the committed YAML is the product) and
keep it small enough for client-side `kubectl apply`, whose last-applied annotation must stay under
256 KiB.

Decisions (each keeps full validation of every pod field while trimming bytes):
- Every `$ref` is inlined; a reference cycle (none exists in core/v1 today) is cut to
  `type: object` + `x-kubernetes-preserve-unknown-fields`, so generation never loops.
- Descriptions inside the pod template are kept, shortened to their first sentences (at most
  `SUMMARY_LIMIT` characters), only for the fields users write most (`DESCRIBED`: the fields of the
  template, the pod spec, containers, resources, env, ports, volumes, mounts, tolerations), so that
  `kubectl explain tfjob.spec.tfReplicaSpecs.template.spec.containers.image` says something. Every
  description in full would make each CRD ~300 KB of last-applied JSON, past the 256 KiB limit;
  docs/validation.md has the measured figures. `kubectl explain pod.spec` documents the rest.
- `nullable: true` exactly where Kubernetes' Go types write `null` (`GO_NULLS`): fields without
  `omitempty` that are pointers, slices or maps, and every `metav1.Time` (`creationTimestamp: null` in
  every template a Go client or webhook writes). The API server drops a non-nullable `null` only while
  decoding the request body; a `null` that a mutating webhook's patch puts back is validated, and a
  non-nullable field rejects it with `Invalid value: "null"` (Kueue's webhook did exactly that).
  Elsewhere `type: [X, "null"]` becomes `type: X`: native pods accept any `null`, but only these come from
  real clients, and each `nullable` costs bytes of the 256 KiB budget. Required fields stay non-nullable
  even where Go can write `null` (`containers`): such an object is invalid anyway.
- IntOrString and Quantity become `x-kubernetes-int-or-string: true` with the `anyOf` integer/string
  pair the API server allows; quantities also carry the quantity pattern, so `memory: 2 GB` is rejected.
  A CRD cannot say "number or string", so `cpu: 0.5` must be written `"0.5"` or `500m` (as with the
  Kubeflow CRDs); the API server's message names the field and the accepted types.
- `x-kubernetes-list-type`, `-list-map-keys` and `-map-type` are kept (CRDs accept them); strategic
  merge markers (`x-kubernetes-patch-*`) and `x-kubernetes-unions` are dropped (CRDs reject them).
  A list-map key must be required or defaulted in a CRD: the two optional keys of core/v1
  (`ports[].protocol`, `imagePullSecrets[].name`) get the defaults the native API applies.
- The template's `metadata` holds what a pod template may carry (labels, annotations, name,
  generateName, namespace, finalizers, creationTimestamp); the server-populated ObjectMeta
  fields (managedFields, ownerReferences, uid, ...) make no sense in a template and are left out.
- Fields the server's pod validation restricts to a closed set (`imagePullPolicy`, port `protocol`, ...)
  get that set as an `enum` (`podenums.py`), so the job, not each of its pods, is refused.
- `ephemeralContainers` is kept: the native API rejects it at pod creation; dropping it here would
  change which job YAML the API server accepts compared with Kubeflow.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

from kubetrain.api.podenums import POD_ENUMS

__all__ = [
    "DESCRIBED",
    "GO_NULLS",
    "KUBERNETES_SCHEMA_VERSION",
    "POD_TEMPLATE",
    "QUANTITY_PATTERN",
    "SUMMARY_LIMIT",
    "SchemaSourceError",
    "kubernetes_schema",
    "pod_template_schema",
]

KUBERNETES_SCHEMA_VERSION = "v1.37.0"
_SOURCE_PACKAGE = "kubernetes_validate"  # PyPI kubernetes-validate, pinned in the dev group

Schema = dict[str, Any]

POD_TEMPLATE = "io.k8s.api.core.v1.PodTemplateSpec"
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"

# The quantity grammar of k8s.io/apimachinery (resource.Quantity), as a regular expression.
_DECIMAL = r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
QUANTITY_PATTERN = rf"^(\+|-)?{_DECIMAL}(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?{_DECIMAL}))?$"

# Optional list-map keys and the default the native API applies to them (a CRD requires one).
_MAP_KEY_DEFAULTS: dict[tuple[str, str], str] = {
    ("io.k8s.api.core.v1.ContainerPort", "protocol"): "TCP",
    ("io.k8s.api.core.v1.LocalObjectReference", "name"): "",
}

GO_NULLS: frozenset[tuple[str, str]] = frozenset(
    {
        ("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "creationTimestamp"),
        ("io.k8s.api.core.v1.GRPCAction", "service"),
        ("io.k8s.api.core.v1.ProjectedVolumeSource", "sources"),
        ("io.k8s.api.core.v1.TypedLocalObjectReference", "apiGroup"),
        ("io.k8s.api.core.v1.TypedObjectReference", "apiGroup"),
    }
)
"""(definition, property) pairs that Go's encoding/json writes as `null` for an unset optional field.

Found by walking core/v1 PodTemplateSpec of k8s.io/api v0.37.0 with Go reflection (`tools/gonulls`, checked
by tests/integration/test_go_nulls_source.py): every field whose zero value marshals as `null` (a
`metav1.Time`; a pointer, slice or map without `omitempty`) and that the OpenAPI definition does not mark
required.
"""

_CORE = "io.k8s.api.core.v1."
DESCRIBED: frozenset[str] = frozenset(
    _CORE + name
    for name in (
        "PodTemplateSpec",
        "PodSpec",
        "Container",
        "ResourceRequirements",
        "EnvVar",
        "ContainerPort",
        "Volume",
        "VolumeMount",
        "Toleration",
    )
)
"""Definitions whose fields keep a (shortened) description."""
SUMMARY_LIMIT = 160
"""Characters of a kept description: whole sentences, at least the first."""
_SENTENCE = re.compile(r".+?[.!?](?=\s+[A-Z`(]|$)")


def _summary(text: str) -> str:
    """The leading sentences of `text` that fit in `SUMMARY_LIMIT` characters (always the first one)."""
    text = " ".join(text.split())
    out = ""
    for match in _SENTENCE.finditer(text):
        sentence = match.group(0).strip()
        if out and len(out) + 1 + len(sentence) > SUMMARY_LIMIT:
            break
        out = f"{out} {sentence}" if out else sentence
    return out or text


# Keywords copied as they are; anything not listed here or handled below stops generation.
_COPIED = (
    "format",
    "enum",
    "minimum",
    "maximum",
    "pattern",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
)
_KEPT_EXTENSIONS = ("x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type")
_DROPPED = frozenset(
    {
        "description",
        "x-kubernetes-patch-strategy",
        "x-kubernetes-patch-merge-key",
        "x-kubernetes-unions",
    }
)
_HANDLED = frozenset({"$ref", "type", "properties", "items", "additionalProperties", "required"})


class SchemaSourceError(Exception):
    """The Kubernetes OpenAPI definitions are missing or hold something this converter does not know."""


def _int_or_string() -> Schema:
    return {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}


def _quantity() -> Schema:
    return {**_int_or_string(), "pattern": QUANTITY_PATTERN}


def _template_metadata() -> Schema:
    string_map = {"type": "object", "additionalProperties": {"type": "string"}}
    return {
        "type": "object",
        "properties": {
            "annotations": string_map,
            "creationTimestamp": {"type": "string", "format": "date-time", "nullable": True},
            "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "generateName": {"type": "string"},
            "labels": string_map,
            "name": {"type": "string"},
            "namespace": {"type": "string"},
        },
    }


_OVERRIDES = {_INT_OR_STRING: _int_or_string, _QUANTITY: _quantity, _OBJECT_META: _template_metadata}


@cache
def _definitions() -> dict[str, Schema]:
    try:
        root = resources.files(_SOURCE_PACKAGE) / "kubernetes-json-schema"
        path = root / f"{KUBERNETES_SCHEMA_VERSION}-local" / "_definitions.json"
        document: Schema = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ModuleNotFoundError) as exc:
        raise SchemaSourceError(
            f"Kubernetes {KUBERNETES_SCHEMA_VERSION} schemas not found; install the dev group "
            "(`bash hack/setup.sh`), which pins kubernetes-validate"
        ) from exc
    definitions: dict[str, Schema] = document["$defs"]
    return definitions


def _single_type(node: Schema, where: str) -> str | None:
    declared = node.get("type")
    if declared is None:
        return None
    names = [declared] if isinstance(declared, str) else [t for t in declared if t != "null"]
    if len(names) != 1:
        raise SchemaSourceError(f"{where}: cannot express type {declared!r} in a structural schema")
    return str(names[0])


class _Inliner:
    """Resolves `$ref`s depth-first, remembering the path of definitions to cut cycles."""

    def __init__(self, definitions: dict[str, Schema]) -> None:
        self._definitions = definitions
        self._stack: list[str] = []

    def definition(self, name: str) -> Schema:
        if name in _OVERRIDES:
            return _OVERRIDES[name]()
        if name in self._stack:
            return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        self._stack.append(name)
        try:
            return self.node(self._definitions[name], name)
        finally:
            self._stack.pop()

    def node(self, node: Schema, where: str) -> Schema:
        if "$ref" in node:
            return self.definition(str(node["$ref"]).rsplit("/", 1)[-1])
        unknown = set(node) - _HANDLED - _DROPPED - set(_COPIED) - set(_KEPT_EXTENSIONS)
        if unknown:
            raise SchemaSourceError(f"{where}: unsupported keywords {sorted(unknown)}")
        out: Schema = {}
        kind = _single_type(node, where)
        if kind is not None:
            out["type"] = kind
        if "properties" in node:
            out["properties"] = {
                k: self.node(v, f"{where}.{k}") for k, v in sorted(node["properties"].items())
            }
            for name, field in out["properties"].items():
                if (where, name) in GO_NULLS:
                    field["nullable"] = True
                if (where, name) in POD_ENUMS:
                    field["enum"] = list(POD_ENUMS[where, name])
                if where in DESCRIBED and node["properties"][name].get("description"):
                    field["description"] = _summary(node["properties"][name]["description"])
        if isinstance(node.get("additionalProperties"), dict):
            out["additionalProperties"] = self.node(node["additionalProperties"], f"{where}.*")
        if "items" in node:
            out["items"] = self.node(node["items"], f"{where}[]")
        if node.get("required"):
            out["required"] = sorted(node["required"])
        out.update({k: node[k] for k in (*_COPIED, *_KEPT_EXTENSIONS) if k in node})
        if out.get("x-kubernetes-list-type") == "map":
            _default_map_keys(out, node, where)
        return out


def _default_map_keys(out: Schema, source: Schema, where: str) -> None:
    items: Schema = out["items"]
    item_name = str(source["items"].get("$ref", "")).rsplit("/", 1)[-1]
    for key in out["x-kubernetes-list-map-keys"]:
        if key in items.get("required", []):
            continue
        if (item_name, key) not in _MAP_KEY_DEFAULTS:
            raise SchemaSourceError(f"{where}: list-map key {key!r} is optional and has no known default")
        items["properties"][key] = {**items["properties"][key], "default": _MAP_KEY_DEFAULTS[item_name, key]}


@cache
def _cached_schema(name: str) -> str:
    if name not in _definitions() and name not in _OVERRIDES:
        raise SchemaSourceError(f"no Kubernetes definition named {name!r} in {KUBERNETES_SCHEMA_VERSION}")
    return json.dumps(_Inliner(_definitions()).definition(name))


def kubernetes_schema(name: str) -> Schema:
    """A fresh structural schema of the Kubernetes definition `name`, e.g. `io.k8s.api.core.v1.PodSpec`.

    Object metadata anywhere inside becomes the pod-template metadata described above.
    """
    schema: Schema = json.loads(_cached_schema(name))
    return schema


def pod_template_schema() -> Schema:
    """A fresh structural schema of a core/v1 PodTemplateSpec (the caller may mutate it)."""
    return kubernetes_schema(POD_TEMPLATE)
