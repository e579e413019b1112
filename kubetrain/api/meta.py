"""Building blocks shared by every API model: the two model bases, time and quantity types, object metadata.

Two bases exist because the wire has two kinds of objects. Our own CRD types (`WireModel`) reject unknown
fields, as the API server prunes or rejects them. Kubernetes' own types that we embed (`KubeModel`: object
metadata, the pod template) keep every field we do not model, so a job read and written back loses nothing.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    Strict,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel

__all__ = [
    "Int32",
    "Int64",
    "KubeModel",
    "ObjectMeta",
    "OwnerReference",
    "Quantity",
    "Time",
    "WireModel",
    "format_time",
]

_WIRE_DUMP: dict[str, Any] = {"mode": "json", "by_alias": True, "exclude_unset": True}


class WireModel(BaseModel):
    """Base of our own CRD types: camelCase on the wire, unknown fields rejected, immutable.

    Dump with `to_wire()`: only the fields that were set (read from the wire, passed to the constructor or
    filled by defaulting) are written, so a round trip is lossless, explicit nulls included.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON-compatible wire form (camelCase keys, RFC 3339 times), as the API server stores it."""
        return self.model_dump(**_WIRE_DUMP)


class KubeModel(WireModel):
    """Base of Kubernetes' own embedded types: fields we do not model are kept as they were."""

    model_config = ConfigDict(extra="allow")


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with a `Z`, as Kubernetes writes `metav1.Time`; sub-second digits only when present."""
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value.isoformat() + "Z"  # isoformat leaves out a zero microsecond, as Kubernetes does


def _parse_time(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str):
        raise ValueError("must be a time string; write it like 2026-01-02T03:04:05Z (RFC 3339)")
    try:
        parsed = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        raise ValueError(f"{value!r} is not a time; write it like 2026-01-02T03:04:05Z (RFC 3339)") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


Time = Annotated[
    datetime,
    PlainValidator(_parse_time),
    PlainSerializer(format_time, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""A `metav1.Time`: an aware `datetime` in Python, `2026-01-02T03:04:05Z` on the wire."""

_QUANTITY = re.compile(
    r"^[+-]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def _check_quantity(value: Any) -> int | float | str:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError("must be a quantity; write it like 2, 500m, 1.5 or 4Gi")
    if isinstance(value, str) and not _QUANTITY.match(value):
        raise ValueError(f"{value!r} is not a quantity; write it like 2, 500m, 1.5 or 4Gi")
    return value


Quantity = Annotated[
    int | float | str,
    PlainValidator(_check_quantity),
    WithJsonSchema({"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}),
]
"""A `resource.Quantity`: kept as written (number or string), checked against the Kubernetes syntax."""

Int32 = Annotated[
    int, Strict(), Field(ge=-(2**31), le=2**31 - 1), WithJsonSchema({"type": "integer", "format": "int32"})
]
"""An integer written as a number on the wire (`"3"` and `true` are rejected, as the API server does)."""
Int64 = Annotated[
    int, Strict(), Field(ge=-(2**63), le=2**63 - 1), WithJsonSchema({"type": "integer", "format": "int64"})
]


class OwnerReference(KubeModel):
    """`metav1.OwnerReference`, which the controllers read to find the job that owns a pod."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KubeModel):
    """`metav1.ObjectMeta`: the fields the operator reads or writes; the rest (managedFields, ...) is kept."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: Int64 | None = None
    creation_timestamp: Time | None = None
    deletion_timestamp: Time | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None
    managed_fields: list[dict[str, Any]] | None = None
