"""JobController: the reconcile template for any replica-based training job.

A new kind is a `JobController` subclass with its identity (`kind`, `framework`) and a few pure hooks;
see `controller.JobController`. Everything else here is what those hooks receive or return, plus the
pure building blocks (names and labels, policies, conditions, PodGroups) for tests and tools.
"""

from kubetrain.common.job.contract import JobContract
from kubetrain.common.job.controller import JobController, JobT
from kubetrain.common.job.extras import ExtraObject
from kubetrain.common.job.facts import Observed, PodFacts, PodPhase, ReplicaCounts
from kubetrain.common.job.gang import VOLCANO, GangScheduling
from kubetrain.common.job.labels import (
    JOB_NAME_LABEL,
    JOB_ROLE_LABEL,
    MASTER_ROLE,
    OPERATOR_NAME_LABEL,
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
    job_labels,
    replica_labels,
    replica_name,
)
from kubetrain.common.job.ledger import LEDGER_ANNOTATION
from kubetrain.common.job.policy import DEFAULT_TERMINATING_TIMEOUT, is_retryable_exit_code
from kubetrain.common.job.services import ServiceMode
from kubetrain.common.job.status import is_failed, is_finished, is_succeeded, is_suspended
from kubetrain.common.job.verdict import JobState, Verdict, default_verdict
from kubetrain.common.job.wiring import add_job_controller, watch_job_resources

__all__ = [
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
