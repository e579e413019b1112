"""A job checked against a CRD's structural schema as the API server checks it, with strict field validation.

Why: local validation (`run --local`, `submit`, `TrainingClient`) promises "what passes here is accepted
there". The pydantic models keep unknown pod fields (so a round trip loses nothing) and know nothing of the
Kubernetes pod schema, so the generated CRD schema itself is the rule book: this module walks a decoded job
beside any structural schema (whatever `kubetrain crds` generated) and reports what the API server would:

- unknown fields (what `kubectl` reports with `--validate=strict`; `x-kubernetes-preserve-unknown-fields`
  and `additionalProperties` allow them);
- a `null` where the schema is not `nullable`: the API server drops it, so it counts as unset;
- types, `x-kubernetes-int-or-string`, `enum`, `pattern`, length, item and property counts, `minimum`,
  `maximum`, `required`, and the uniqueness of `x-kubernetes-list-type: set` items and `map` keys.

Paths are written as `FieldError` paths (`spec.tfReplicaSpecs.Worker.template.spec.containers[0].image`).
Pure and generic: the schema is data; nothing here knows a job's kinds or fields.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from kubetrain.api.errors import FieldError
from kubetrain.api.wire_errors import format_path

__all__ = ["Loc", "SchemaReport", "prune_nulls", "schema_errors"]

Schema = dict[str, Any]
Loc = tuple[int | str, ...]
_Found = tuple[FieldError, bool]

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}
_SHOWN = {"string": "a string", "integer": "a whole number", "number": "a number", "boolean": "true or false"}
_SHOWN |= {"object": "a mapping", "array": "a list"}


@dataclass(frozen=True)
class SchemaReport:
    """The problems found, and whether one of them stops the API server from evaluating CEL rules.

    A wrong type, a missing required field, a value outside an enum, or a string, list or map over its
    maximum size "blocks" CEL: the server reports those alone and skips the rules.
    """

    errors: tuple[FieldError, ...]
    blocks_cel: bool


def schema_errors(value: Any, schema: Schema, loc: Loc = ()) -> SchemaReport:
    """Every problem of `value` against the structural `schema`, in document order."""
    found = list(_check(value, schema, loc))
    return SchemaReport(tuple(error for error, _ in found), any(blocking for _, blocking in found))


def prune_nulls(value: Any, schema: Schema) -> Any:
    """`value` without the nulls the API server drops (non-nullable fields), as CEL rules then see it."""
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        out = {}
        for key, item in value.items():
            sub = properties.get(key, extra if isinstance(extra, dict) else {})
            if item is None and not sub.get("nullable"):
                continue
            out[key] = prune_nulls(item, sub)
        return out
    if isinstance(value, list):
        return [prune_nulls(item, schema.get("items", {})) for item in value]
    return value


def _check(value: Any, schema: Schema, loc: Loc) -> Iterator[_Found]:
    if value is None and schema.get("nullable"):
        return
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, dict):
            yield from _check(value, {"type": "integer"}, loc)
            return
        if not _is(value, "integer") and not isinstance(value, str):
            yield _error(
                loc,
                f"must be a whole number or a string, got {_shown(value)}",
                'write e.g. 2 or "2"',
                blocking=True,
            )
            return
        if isinstance(value, str):
            yield from _string(value, schema, loc)
        return
    kind = schema.get("type")
    if kind is None:
        return
    if not _is(value, kind):
        yield _error(loc, f"must be {_SHOWN[kind]}, got {_shown(value)}", _type_fix(kind), blocking=True)
        if isinstance(value, dict):  # strict decoding names each key of a mapping no field declares
            for key in value:
                yield _error((*loc, key), f"unknown field `{key}`", "remove it")
        return
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(json.dumps(v) for v in schema["enum"])
        yield _error(loc, f"{json.dumps(value)} is not allowed", f"use one of {allowed}", blocking=True)
    if kind == "string":
        yield from _string(value, schema, loc)
    elif kind in ("integer", "number"):
        yield from _number(value, schema, loc)
    elif kind == "object":
        yield from _object(value, schema, loc)
    elif kind == "array":
        yield from _array(value, schema, loc)


def _is(value: Any, kind: str) -> bool:
    if isinstance(value, bool):
        return kind == "boolean"
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES[kind])


_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def _string(value: str, schema: Schema, loc: Loc) -> Iterator[_Found]:
    if schema.get("format") == "date-time" and not _DATE_TIME.match(value):
        yield _error(
            loc, f"{json.dumps(value)} is not a time", "write e.g. 2026-01-02T03:04:05Z", blocking=True
        )
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        yield _error(
            loc,
            f"may have at most {schema['maxLength']} characters, got {len(value)}",
            "shorten it",
            blocking=True,
        )
    if "minLength" in schema and len(value) < schema["minLength"]:
        yield _error(loc, f"must have at least {schema['minLength']} characters", "lengthen it")
    if "pattern" in schema and _regex(schema["pattern"]).search(value) is None:
        yield _error(loc, f"{json.dumps(value)} does not match {schema['pattern']}", "correct the value")


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


_FORMAT_BOUNDS = {"int32": 2**31, "int64": 2**63}


def _number(value: float, schema: Schema, loc: Loc) -> Iterator[_Found]:
    bound = _FORMAT_BOUNDS.get(schema.get("format", ""))
    if bound is not None and not -bound <= value < bound:
        yield _error(loc, f"must fit in {schema['format']}, got {value}", "use a smaller number")
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and (value < low or (value == low and schema.get("exclusiveMinimum"))):
        relation = ">" if schema.get("exclusiveMinimum") else ">="
        yield _error(loc, f"must be {relation} {low}, got {value}", "use a larger number")
    if high is not None and (value > high or (value == high and schema.get("exclusiveMaximum"))):
        relation = "<" if schema.get("exclusiveMaximum") else "<="
        yield _error(loc, f"must be {relation} {high}, got {value}", "use a smaller number")


def _nullable(key: str, properties: dict[str, Schema], extra: Any) -> bool:
    sub = properties.get(key, extra if isinstance(extra, dict) else {})
    return bool(sub.get("nullable"))


def _object(value: dict[str, Any], schema: Schema, loc: Loc) -> Iterator[_Found]:
    properties: dict[str, Schema] = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    preserve = schema.get("x-kubernetes-preserve-unknown-fields") or extra is True
    for key, item in value.items():
        sub = properties.get(key, extra if isinstance(extra, dict) else None)
        if sub is None:
            if not preserve:
                yield _error((*loc, key), f"unknown field `{key}`", _known_fix(key, properties))
            continue
        if item is None and not sub.get("nullable"):
            continue  # the API server drops it: unset
        yield from _check(item, sub, (*loc, key))
    present = {key for key, item in value.items() if item is not None or _nullable(key, properties, extra)}
    for key in schema.get("required", []):
        if key not in present:
            yield _error((*loc, key), "is required", f"add `{key}`", blocking=True)
    count = len(present)  # the dropped nulls are not counted, by the API server either
    if "maxProperties" in schema and count > schema["maxProperties"]:
        yield _error(
            loc,
            f"may have at most {schema['maxProperties']} entries, got {count}",
            "remove some",
            blocking=True,
        )
    if "minProperties" in schema and count < schema["minProperties"]:
        yield _error(loc, f"must have at least {schema['minProperties']} entries", "add one")


def _known_fix(key: str, properties: dict[str, Schema]) -> str:
    if not properties:
        return "remove it"
    close = difflib.get_close_matches(key, list(properties), n=1)
    hint = f"did you mean `{close[0]}`? " if close else ""
    return f"{hint}remove it, or use a known field: {', '.join(sorted(properties))}"


def _array(value: list[Any], schema: Schema, loc: Loc) -> Iterator[_Found]:
    items: Schema = schema.get("items", {})
    for index, item in enumerate(value):
        if item is None and not items.get("nullable"):
            yield _error(
                (*loc, index),
                f"must be {_SHOWN.get(items.get('type', ''), 'set')}, got null",
                "remove it",
                blocking=True,
            )
            continue
        yield from _check(item, items, (*loc, index))
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        yield _error(
            loc,
            f"may have at most {schema['maxItems']} items, got {len(value)}",
            "remove some",
            blocking=True,
        )
    if "minItems" in schema and len(value) < schema["minItems"]:
        yield _error(loc, f"must have at least {schema['minItems']} items", "add one")
    yield from _uniqueness(value, schema, loc)


def _uniqueness(value: list[Any], schema: Schema, loc: Loc) -> Iterator[_Found]:
    list_type = schema.get("x-kubernetes-list-type")
    if list_type not in ("set", "map"):
        return
    keys: list[str] = schema.get("x-kubernetes-list-map-keys", [])
    defaults = {k: schema.get("items", {}).get("properties", {}).get(k, {}).get("default") for k in keys}
    seen: set[str] = set()
    for index, item in enumerate(value):
        if list_type == "map":
            if not isinstance(item, dict):
                continue
            identity = json.dumps([item.get(k, defaults[k]) for k in keys])
        else:
            identity = json.dumps(item, sort_keys=True)
        if identity in seen:
            what = ", ".join(keys) if keys else "value"
            yield _error((*loc, index), f"duplicate entry (same {what} as an earlier one)", "keep only one")
        seen.add(identity)


def _error(loc: Loc, message: str, fix: str, *, blocking: bool = False) -> _Found:
    return FieldError(format_path(loc), message, fix), blocking


def _type_fix(kind: str) -> str:
    return {
        "string": 'write it as text; quote numbers and booleans in YAML, e.g. "2"',
        "integer": "write a whole number without quotes, e.g. 2",
        "number": "write a number without quotes",
        "boolean": "write true or false without quotes",
        "object": "write it as `key: value` lines",
        "array": "write it as a YAML list (`- item` lines)",
    }[kind]


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."
