"""Local validation equal to the API server's: a decoded job checked as the installed CRDs check it on create.

Why: `kubetrain run --local`, `submit` and `TrainingClient` promise that what passes here is accepted by
a cluster with our CRDs. Three layers, each generic over what the CRD holds, give the same verdict as the
API server with `fieldValidation=Strict` (a differential test holds them to it):

1. the object's `metadata`, as the server validates every ObjectMeta (`metacheck`);
2. the CRD's structural schema, unknown fields included (`schemacheck`);
3. the CRD's CEL rules (`celcheck`), skipped, as on the server, when layer 2 found a blocking error.

The schemas are the generated CRDs' `openAPIV3Schema`s, shipped in the package as JSON (`crdschemas/`):
generating them needs the Kubernetes definitions (a dev dependency), so `kubetrain crds` writes them beside
the manifests and `kubetrain crds --check` fails when they differ. Semantic rules a CRD cannot express
stay in `validation.py`, which runs after these.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from kubetrain.api.celcheck import cel_errors
from kubetrain.api.crd import _subresources
from kubetrain.api.errors import FieldError
from kubetrain.api.kinds import KINDS, KindInfo, lookup_kind
from kubetrain.api.metacheck import metadata_errors
from kubetrain.api.schemacheck import schema_errors

__all__ = ["SCHEMA_DIR", "crd_schema", "generated_schemas", "schema_file_name", "server_errors"]

Schema = dict[str, Any]

SCHEMA_DIR = "crdschemas"
"""The package directory (in `kubetrain.api`) holding each kind's generated `openAPIV3Schema`."""
_GENERATED_SUFFIX = "x2x2x"  # the API server appends 5 random characters to a generateName


def schema_file_name(info: KindInfo) -> str:
    """`tfjobs.json`: the packaged schema file of a kind."""
    return f"{info.plural}.json"


@cache
def _schema_text(info: KindInfo) -> str:
    return (resources.files("kubetrain.api") / SCHEMA_DIR / schema_file_name(info)).read_text("utf-8")


def crd_schema(info: KindInfo) -> Schema:
    """The `openAPIV3Schema` of the kind's generated CRD, as shipped in the package (a fresh copy)."""
    schema: Schema = json.loads(_schema_text(info))
    return schema


@cache
def _cached_schema(info: KindInfo) -> Schema:
    return crd_schema(info)


def server_errors(data: Mapping[str, Any]) -> list[FieldError]:
    """What the API server would reject in the decoded job `data` on create; [] for an unknown kind."""
    kind = data.get("kind")
    info = lookup_kind(kind) if isinstance(kind, str) else None
    if info is None or info not in KINDS or data.get("apiVersion") != info.api_version:
        return []  # parse_job says what is wrong
    schema = _cached_schema(info)
    metadata = data.get("metadata")
    errors = metadata_errors(metadata)
    body = {key: value for key, value in data.items() if key != "metadata"}
    report = schema_errors(body, schema)
    errors.extend(report.errors)
    errors.extend(_scale_errors(info, body))
    if not report.blocks_cel and isinstance(metadata, dict):
        name = metadata.get("name") or f"{metadata.get('generateName') or ''}{_GENERATED_SUFFIX}"
        errors.extend(cel_errors({**body, "metadata": {"name": name}}, schema))
    return errors


def _scale_errors(info: KindInfo, body: Mapping[str, Any]) -> list[FieldError]:
    """The scale subresource's replicas path must be readable: no mapping on the way may be a scalar."""
    scale = _subresources(info).get("scale")
    if scale is None:
        return []
    parts = scale["specReplicasPath"].lstrip(".").split(".")
    node: Any = body
    for part in parts[:-1]:
        if not isinstance(node, Mapping):
            return []  # reported where the wrong type is
        node = node.get(part)
        if node is not None and not isinstance(node, Mapping):
            where = ".".join(parts)
            return [
                FieldError(where, f"cannot be read for `kubectl scale`: {part} is not a mapping", "fix it")
            ]
    return []


def generated_schemas() -> dict[str, str]:
    """File name -> JSON text of each kind's `openAPIV3Schema`, generated afresh (needs the dev group).

    Descriptions are left out: validation never reads them, and they are most of the bytes.
    """
    from kubetrain.api.crd import custom_resource_definition  # noqa: PLC0415 (generation only)

    out = {}
    for info in KINDS:
        schema = custom_resource_definition(info)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        text = json.dumps(_undocumented(schema), sort_keys=True, separators=(",", ":"))
        out[schema_file_name(info)] = text + "\n"
    return out


def _undocumented(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _undocumented(v) for k, v in node.items() if k != "description" or isinstance(v, dict)}
    if isinstance(node, list):
        return [_undocumented(item) for item in node]
    return node
