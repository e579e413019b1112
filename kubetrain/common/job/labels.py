"""Names and labels of the objects a job owns, in one place, because users and tools match on them.

Kubeflow's conventions, kept exactly: a pod and its headless Service are both named
`{job}-{replica type in lower case}-{index}`, and carry the `training.kubeflow.org/*` labels below. Those
are the built-in kinds' labels; another kind's are the same names under its `KindInfo.label_prefix`
(by default its group: `example.dev/job-name`), which every function here takes as `prefix`.
Names are deterministic on purpose: "create if absent" plus AlreadyExists-is-success makes creation
idempotent, whatever the cache shows.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubetrain.common.kube import objects
from kubetrain.common.kube.resources import Obj
from kubetrain.common.kube.selectors import format_labels

__all__ = [
    "JOB_NAME_LABEL",
    "JOB_ROLE_LABEL",
    "KUBEFLOW_PREFIX",
    "MASTER_ROLE",
    "OPERATOR_NAME_LABEL",
    "REPLICA_INDEX_LABEL",
    "REPLICA_TYPE_LABEL",
    "is_template_child",
    "job_labels",
    "label_key",
    "replica_index",
    "replica_labels",
    "replica_name",
    "replica_selector",
]

KUBEFLOW_PREFIX = "training.kubeflow.org/"
OPERATOR_NAME_LABEL = KUBEFLOW_PREFIX + "operator-name"
JOB_NAME_LABEL = KUBEFLOW_PREFIX + "job-name"
REPLICA_TYPE_LABEL = KUBEFLOW_PREFIX + "replica-type"
REPLICA_INDEX_LABEL = KUBEFLOW_PREFIX + "replica-index"
JOB_ROLE_LABEL = KUBEFLOW_PREFIX + "job-role"
MASTER_ROLE = "master"


def label_key(name: str, prefix: str = KUBEFLOW_PREFIX) -> str:
    """The key of label `name` (`job-name`, `replica-type`, ...) under `prefix`."""
    return prefix + name


def replica_name(job_name: str, rtype: str, index: int) -> str:
    """`{job}-{rtype lower}-{index}`: the name of the pod and of the Service of one replica."""
    return f"{job_name}-{rtype.lower()}-{index}"


def job_labels(operator_name: str, job_name: str, *, prefix: str = KUBEFLOW_PREFIX) -> dict[str, str]:
    """The labels every object of a job carries."""
    return {prefix + "operator-name": operator_name, prefix + "job-name": job_name}


def replica_labels(
    operator_name: str,
    job_name: str,
    rtype: str,
    index: int,
    *,
    master: bool = False,
    prefix: str = KUBEFLOW_PREFIX,
) -> dict[str, str]:
    """The labels of one replica's pod (the Service of the replica selects exactly these, minus job-role)."""
    labels = job_labels(operator_name, job_name, prefix=prefix)
    labels[prefix + "replica-type"] = rtype.lower()
    labels[prefix + "replica-index"] = str(index)
    if master:
        labels[prefix + "job-role"] = MASTER_ROLE
    return labels


def replica_selector(operator_name: str, job_name: str, rtype: str, *, prefix: str = KUBEFLOW_PREFIX) -> str:
    """The label selector of every pod of one replica type (`replicaStatuses.*.selector`)."""
    labels = job_labels(operator_name, job_name, prefix=prefix)
    labels[prefix + "replica-type"] = rtype.lower()
    return format_labels(labels)


def replica_index(labels: Mapping[str, str], *, prefix: str = KUBEFLOW_PREFIX) -> int | None:
    """The replica index a pod or Service is labelled with, or None when absent or not a number."""
    raw = labels.get(prefix + "replica-index", "")
    return int(raw) if raw.isdigit() else None


def is_template_child(obj: Obj, *, prefix: str = KUBEFLOW_PREFIX) -> bool:
    """Whether a pod or Service a job owns is one the template manages: a replica's (labelled with its
    index), or the job's own Service (named like the job it is labelled with). Other owned objects of
    those resources are the framework's `extra_objects`."""
    labels = objects.labels(obj)
    return prefix + "replica-index" in labels or labels.get(prefix + "job-name") == objects.name(obj)
