"""A job's gang failure policy: what it says, whether it is valid, and which rule a failure matches.

Data-parallel training is a gang: when one rank dies, its peers cannot go on. The per-replica restart
policies of Kubeflow's kinds restart the one dead pod and leave its peers blocked in a collective. A job
opts in to gang handling with one annotation, whose JSON value this module parses and checks:

    kubetrain.io/failure-policy: {"maxGangRestarts": 3, "progressDeadlineSeconds": 600,
        "rules": [{"action": "RestartGang", "onExitCodes": [137, 143]},
                  {"action": "Ignore", "onReasons": ["Evicted"]},
                  {"action": "FailJob", "replicaTypes": ["Worker"], "onExitCodes": [1]}]}

It is an annotation, not a `runPolicy` field, so that the Kubeflow SDK, Kueue and every other client of
the `kubeflow.org` schema read and write such jobs unchanged (docs/failure-policy.md says why).

A rule matches a failure when every selector it names matches (within one selector, any listed value
does); a rule without selectors matches every failure. The first matching rule decides; a failure no
rule matches is handled as it would be without a policy (the replica's restartPolicy, backoffLimit).
Matching is pure: `rule_for(policy, failure)`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, final

from pydantic import Field, ValidationError

from kubetrain.api import FieldError
from kubetrain.api.meta import WireModel
from kubetrain.api.wire_errors import from_validation_error

__all__ = [
    "FAILURE_POLICY_ANNOTATION",
    "MAX_GANG_RESTARTS_DEFAULT",
    "Action",
    "Failure",
    "FailurePolicy",
    "FailureReason",
    "FailureRule",
    "policy_errors",
    "read_policy",
    "rule_for",
]

FAILURE_POLICY_ANNOTATION = "kubetrain.io/failure-policy"
MAX_GANG_RESTARTS_DEFAULT = 3
"""Gang restarts allowed when the policy does not say: JobSet's and Volcano's defaults are of this size."""

_FIELD = f"metadata.annotations[{FAILURE_POLICY_ANNOTATION}]"


class Action(StrEnum):
    """What a matching rule does with the failure."""

    RESTART_GANG = "RestartGang"
    """Delete every pod of the job at once and recreate them: one gang restart, not a backoffLimit one."""
    FAIL_JOB = "FailJob"
    """The job fails at once, with reason `<Kind>FailedByPolicy`."""
    IGNORE = "Ignore"
    """The failed pod is replaced (a restarted container stays); backoffLimit is not charged."""


class FailureReason(StrEnum):
    """The reasons the operator tells apart (besides any other `status.reason` a pod reports)."""

    EVICTED = "Evicted"
    OOM_KILLED = "OOMKilled"
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    NODE_LOST = "NodeLost"
    PROGRESS_STALLED = "ProgressStalled"
    """`status.trainerStatus` did not advance within `progressDeadlineSeconds`."""


ExitCode = Annotated[int, Field(ge=0, le=255)]


@final
class FailureRule(WireModel):
    """One rule: selectors (all that are given must match) and the action."""

    action: Action
    on_exit_codes: Annotated[list[ExitCode], Field(min_length=1)] | None = None
    on_reasons: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)] | None = None
    replica_types: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)] | None = None


@final
class FailurePolicy(WireModel):
    """The whole policy: rules in order, the gang-restart limit, the progress deadline."""

    rules: Annotated[list[FailureRule], Field(max_length=32)] = []
    max_gang_restarts: Annotated[int, Field(ge=0)] = MAX_GANG_RESTARTS_DEFAULT
    progress_deadline_seconds: Annotated[int, Field(ge=1)] | None = None


@final
@dataclass(frozen=True, slots=True)
class Failure:
    """One failure of one rank, as the rules see it."""

    replica_type: str
    pod: str
    exit_code: int | None = None
    reason: str = ""
    container_restart: bool = False
    """A container of a pod that stays restarted (OnFailure/Always), rather than the pod failing."""

    def describe(self) -> str:
        how = "restarted its container" if self.container_restart else "failed"
        code = f", exit code {self.exit_code}" if self.exit_code is not None else ""
        why = f", reason {self.reason}" if self.reason else ""
        return f"pod {self.pod} ({self.replica_type}) {how}{code}{why}"


def read_policy(annotations: Mapping[str, str] | None) -> FailurePolicy | None:
    """The job's policy; None without the annotation (or, unreachable for a validated job, a bad one)."""
    raw = (annotations or {}).get(FAILURE_POLICY_ANNOTATION)
    if raw is None:
        return None
    try:
        return FailurePolicy.model_validate(json.loads(raw))
    except (ValueError, ValidationError):
        return None


def policy_errors(annotations: Mapping[str, str] | None, replica_types: list[str]) -> list[FieldError]:
    """What is wrong with the job's policy annotation (none when absent), each naming its field."""
    raw = (annotations or {}).get(FAILURE_POLICY_ANNOTATION)
    if raw is None:
        return []
    try:
        data = json.loads(raw)
    except ValueError as err:
        return [FieldError(_FIELD, f"is not JSON ({err})", "write a JSON object, see docs/failure-policy.md")]
    try:
        policy = FailurePolicy.model_validate(data)
    except ValidationError as err:
        return [_under(e) for e in from_validation_error(err, FailurePolicy)]
    return _unknown_types(policy, replica_types)


def _under(error: FieldError) -> FieldError:
    path = f"{_FIELD}.{error.path}" if error.path else _FIELD
    return FieldError(path, error.message, error.fix)


def _unknown_types(policy: FailurePolicy, replica_types: list[str]) -> list[FieldError]:
    errors = []
    for i, rule in enumerate(policy.rules):
        for j, rtype in enumerate(rule.replica_types or ()):
            if rtype not in replica_types:
                errors.append(
                    FieldError(
                        f"{_FIELD}.rules[{i}].replicaTypes[{j}]",
                        f"{rtype!r} is not a replica type of this job",
                        f"use one of {', '.join(replica_types)}",
                    )
                )
    return errors


def rule_for(policy: FailurePolicy, failure: Failure) -> tuple[int, FailureRule] | None:
    """The first rule that matches `failure`, with its position; None when none does."""
    for i, rule in enumerate(policy.rules):
        if _matches(rule, failure):
            return i, rule
    return None


def _matches(rule: FailureRule, failure: Failure) -> bool:
    if rule.replica_types is not None and failure.replica_type not in rule.replica_types:
        return False
    if rule.on_exit_codes is not None and failure.exit_code not in rule.on_exit_codes:
        return False
    return rule.on_reasons is None or failure.reason in rule.on_reasons
