"""A job's own `metadata` checked as the API server checks every object's ObjectMeta on create.

Why: a CRD's schema says nothing of `metadata` (beyond `name`); the API server validates it with its
built-in ObjectMeta rules, so local validation repeats the ones a user can get wrong: unknown fields
(strict field validation), the name or generateName as an RFC 1123 subdomain, the namespace as a DNS label,
label keys and values, and annotation keys and total size. Server-populated fields (uid, resourceVersion,
managedFields, ...) are accepted as written: on create the server ignores or overwrites them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from kubetrain.api.errors import FieldError

__all__ = ["metadata_errors"]

_FIELDS = frozenset(
    {
        "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
        "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
        "ownerReferences", "finalizers", "managedFields",
    }
)  # fmt: skip
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_ANNOTATIONS_MAX = 256 * 1024


def metadata_errors(metadata: Any) -> list[FieldError]:
    """The problems the API server finds in an object's `metadata` on create (unknown fields first)."""
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        return [FieldError("metadata", "must be a mapping", "write it as `key: value` lines")]
    return list(_errors(metadata))


def _errors(metadata: dict[str, Any]) -> Iterator[FieldError]:
    for key in metadata:
        if key not in _FIELDS:
            yield FieldError(f"metadata.{key}", f"unknown field `{key}`", "remove it")
    name, generate = metadata.get("name"), metadata.get("generateName")
    for field, value in (
        ("name", name),
        ("generateName", generate),
        ("namespace", metadata.get("namespace")),
    ):
        if value is not None and not isinstance(value, str):
            yield FieldError(f"metadata.{field}", "must be a string", "write it as text")
    if not name and not generate:
        yield FieldError("metadata.name", "is required (or metadata.generateName)", "set metadata.name")
    if isinstance(name, str) and name and not _subdomain(name):
        yield FieldError("metadata.name", f"{name!r} is not a lower-case RFC 1123 subdomain", "rename it")
    if isinstance(generate, str) and generate and not name and not _subdomain(generate.rstrip("-") or "a"):
        yield FieldError(
            "metadata.generateName", f"{generate!r} does not start an RFC 1123 subdomain", "correct it"
        )
    namespace = metadata.get("namespace")
    if isinstance(namespace, str) and namespace and not (len(namespace) <= 63 and _LABEL.match(namespace)):
        yield FieldError("metadata.namespace", f"{namespace!r} is not a DNS label", "correct it")
    yield from _labels(metadata.get("labels"))
    yield from _annotations(metadata.get("annotations"))


def _subdomain(text: str) -> bool:
    return len(text) <= 253 and _SUBDOMAIN.match(text) is not None


def _qualified(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and not (prefix and _subdomain(prefix)):
        return False
    return len(name) <= 63 and _NAME_PART.match(name) is not None


def _string_map(value: Any, field: str) -> Iterator[FieldError]:
    if value is not None and not (
        isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    ):
        yield FieldError(f"metadata.{field}", "must map strings to strings", 'quote values, e.g. "true"')


def _labels(labels: Any) -> Iterator[FieldError]:
    problems = list(_string_map(labels, "labels"))
    yield from problems
    if problems or not labels:
        return
    for key, value in labels.items():
        if not _qualified(key):
            yield FieldError("metadata.labels", f"label key {key!r} is not a qualified name", "correct it")
        if value and not (len(value) <= 63 and _NAME_PART.match(value)):
            yield FieldError("metadata.labels", f"label value {value!r} is not valid", "correct it")


def _annotations(annotations: Any) -> Iterator[FieldError]:
    problems = list(_string_map(annotations, "annotations"))
    yield from problems
    if problems or not annotations:
        return
    for key in annotations:
        if not _qualified(key.lower()):
            yield FieldError(
                "metadata.annotations", f"annotation key {key!r} is not a qualified name", "fix it"
            )
    if sum(len(k) + len(v) for k, v in annotations.items()) > _ANNOTATIONS_MAX:
        yield FieldError("metadata.annotations", "are larger than 256 KiB in total", "shorten them")
