"""The sizes the operator refuses to grow with: bounds on what one job may make it hold or write.

The operator's memory and time must follow the objects that exist, never a number a user typed: one
job asking for two billion replicas must not take the operator (and so every other user's jobs) down.
The CRDs carry a `maximum` on replica counts; these are the same bounds, enforced again by the operator
for jobs stored under an older CRD that lacked it, and for what the schema cannot see (the size of a
rendered hostfile, the number of writes per reconcile).
"""

from __future__ import annotations

from typing import Any

from kubetrain.api import MAX_REPLICAS, FieldError, KindInfo, TrainingJob

__all__ = ["CONFIGMAP_MAX_BYTES", "CREATES_PER_RECONCILE", "MAX_REPLICAS", "oversized"]

# MAX_REPLICAS (kubetrain.api): most replicas of one replica type, the CRDs' `maximum` (docs/validation.md).

CREATES_PER_RECONCILE = 500
"""Most pods (and most Services) created in one reconcile; the rest follow in the next ones, which the
creations themselves trigger. The batch/v1 Job controller caps a sync at 500 pods the same way. Bodies are
rendered batch by batch, so memory follows the batch, not the replica count."""

CONFIGMAP_MAX_BYTES = 1024 * 1024
"""A ConfigMap's data may not exceed 1 MiB (the API server rejects it: `ConfigMap "x" is invalid`)."""


def oversized(info: KindInfo, job: TrainingJob[Any]) -> list[FieldError]:
    """Replica counts above `MAX_REPLICAS`: the job fails with this, before anything is sized by them."""
    return [
        FieldError(
            f"spec.{info.replica_specs_field}.{rtype}.replicas",
            f"is {spec.replicas}, more than the {MAX_REPLICAS} replicas one replica type may have",
            f"use at most {MAX_REPLICAS} (split the work over several jobs), and upgrade the CRDs: "
            "they state this maximum, so the API server rejects such a job on submission",
        )
        for rtype, spec in job.replica_specs.items()
        if (spec.replicas or 0) > MAX_REPLICAS
    ]
