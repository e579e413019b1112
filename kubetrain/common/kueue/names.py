"""Kueue's names, as Kueue v0.19 spells them: the Workload API, its labels and condition types, and the
Workload name Kueue's own job integrations give a job.

The name matters: a cluster that moves a kind from Kueue's built-in integration to kubetrain's (or back)
finds the job's Workload under the same name, so neither side makes a second one. Kueue builds it as
`<kind in lower case>-<job name>-<5 hex digits>`, the prefix cut to fit 253 characters, the digits the
start of the SHA-1 of `kind`, `group`, job name and job uid, each on its own line
(`pkg/controller/jobframework/workload_names.go`).
"""

from __future__ import annotations

import hashlib

from kubetrain.common.kube.resources import Resource

__all__ = [
    "ADMITTED",
    "EVICTED",
    "FINISHED",
    "JOB_UID_LABEL",
    "PODSET_LABEL",
    "PODS_READY",
    "PRIORITY_CLASSES",
    "PRIORITY_CLASS_LABEL",
    "QUEUE_LABEL",
    "QUOTA_RESERVED",
    "REQUEUED",
    "RESOURCE_FLAVORS",
    "RESOURCE_IN_USE",
    "WORKLOADS",
    "WORKLOAD_PRIORITY_CLASSES",
    "podset_name",
    "workload_name",
]

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
"""The version Kueue v0.19 stores Workloads in."""
WORKLOADS = Resource(GROUP, VERSION, "workloads", "Workload")
RESOURCE_FLAVORS = Resource(GROUP, VERSION, "resourceflavors", "ResourceFlavor", namespaced=False)
WORKLOAD_PRIORITY_CLASSES = Resource(
    GROUP, VERSION, "workloadpriorityclasses", "WorkloadPriorityClass", namespaced=False
)
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
"""The job label that names its LocalQueue: the one thing a user writes to have a job queued."""
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
"""The job label that names a WorkloadPriorityClass (it wins over any pod PriorityClass)."""
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
PODSET_LABEL = "kueue.x-k8s.io/podset"
RESOURCE_IN_USE = "kueue.x-k8s.io/resource-in-use"
"""The finalizer Kueue's own integrations put on their Workloads (kubetrain's have none)."""
"""The label Kueue puts on each admitted pod: the name of its pod set."""

QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
EVICTED = "Evicted"
REQUEUED = "Requeued"
PODS_READY = "PodsReady"
FINISHED = "Finished"

_HASH_LENGTH = 5
_MAX_NAME = 253


def workload_name(*, kind: str, group: str, job_name: str, job_uid: str) -> str:
    """The name Kueue's `GetWorkloadNameForOwnerWithGVK` gives the Workload of this job."""
    prefix = f"{kind.lower()}-{job_name}"[: _MAX_NAME - 1 - _HASH_LENGTH]
    digest = hashlib.sha1(f"{kind}\n{group}\n{job_name}\n{job_uid}".encode(), usedforsecurity=False)
    return f"{prefix}-{digest.hexdigest()[:_HASH_LENGTH]}"


def podset_name(rtype: str) -> str:
    """The pod set of a replica type: its name in lower case (Kueue's `NewPodSetReference`)."""
    return rtype.lower()
