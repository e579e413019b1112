"""The public names of kubetrain.common.job are deliberate: this test pins them (change it with the API)."""

from __future__ import annotations

import inspect

import kubetrain.common.job as job
from kubetrain.common.job import JobController

PUBLIC = [
    "DEFAULT_TERMINATING_TIMEOUT",
    "JOB_NAME_LABEL",
    "JOB_ROLE_LABEL",
    "LEDGER_ANNOTATION",
    "MASTER_ROLE",
    "OPERATOR_NAME_LABEL",
    "REPLICA_INDEX_LABEL",
    "REPLICA_TYPE_LABEL",
    "VOLCANO",
    "ExtraObject",
    "GangScheduling",
    "JobContract",
    "JobController",
    "JobState",
    "JobT",
    "Observed",
    "PodFacts",
    "PodPhase",
    "ReplicaCounts",
    "ServiceMode",
    "Verdict",
    "add_job_controller",
    "default_verdict",
    "is_failed",
    "is_finished",
    "is_retryable_exit_code",
    "is_succeeded",
    "is_suspended",
    "job_labels",
    "replica_labels",
    "replica_name",
    "watch_job_resources",
]

HOOKS = {
    "default": "(self, job: 'JobT') -> 'JobT'",
    "validate": "(self, job: 'JobT') -> 'Sequence[FieldError]'",
    "configure_pod": "(self, job: 'JobT', rtype: 'str', index: 'int', pod: 'Obj') -> 'Obj'",
    "verdict": "(self, job: 'JobT', observed: 'Observed') -> 'Verdict'",
    "is_master": "(self, job: 'JobT', rtype: 'str', index: 'int') -> 'bool'",
    "wants_service": "(self, job: 'JobT', rtype: 'str') -> 'bool'",
    "ready_to_create": "(self, job: 'JobT', rtype: 'str', observed: 'Observed') -> 'bool'",
    "gang_members": "(self, job: 'JobT', rtype: 'str') -> 'int'",
    "extra_objects": "(self, job: 'JobT', observed: 'Observed') -> 'Sequence[ExtraObject]'",
}


def test_public_names() -> None:
    assert sorted(job.__all__) == sorted(PUBLIC)
    for name in job.__all__:
        assert hasattr(job, name), name


def test_hook_signatures() -> None:
    for name, signature in HOOKS.items():
        assert str(inspect.signature(getattr(JobController, name))) == signature, name


def test_reconcile_is_final() -> None:
    assert getattr(JobController.reconcile, "__final__", False)


def test_every_hook_is_in_the_contract_with_the_same_signature() -> None:
    """JobContract is what a kind implements: it lists each hook exactly as JobController defines it."""
    for name, signature in HOOKS.items():
        assert str(inspect.signature(getattr(job.JobContract, name))) == signature, name
