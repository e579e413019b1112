"""The Workload of a queued job, in the shape Kueue's own kubeflow integration builds.

One pod set per replica type, in the kind's pod-set order, named after the type in lower case, with the
type's replica count and its pod template as the user wrote it; the job's LocalQueue as `queueName`; the
priority Kueue would give it (`priority.py` resolves it). The Workload is controlled by the job (so it goes
when the job goes) and labelled with the job's uid, as Kueue labels its own, and with the operator-name
label of the kind, which marks it as kubetrain's: the operator caches only Workloads with that label, and a
Workload of the job without it was made by Kueue's own integration (`decide.py`).

No `minCount`: Kueue's kubeflow integration sets none (not even for an elastic PyTorchJob), and a cluster
that moves between Kueue's integration and ours must find the same Workloads (docs/ecosystem.md).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, final

from kubetrain.common.kube.resources import Obj
from kubetrain.common.kueue.names import JOB_UID_LABEL, WORKLOADS, podset_name

__all__ = ["PodSetSource", "Priority", "build_workload", "priority_class_name", "render_podsets"]


@final
@dataclass(frozen=True, slots=True)
class PodSetSource:
    """One replica type as the Workload shows it: its name, pod count and pod template (wire form)."""

    rtype: str
    count: int
    template: Mapping[str, Any]


@final
@dataclass(frozen=True, slots=True)
class Priority:
    """What the Workload says of priority: the class it came from (None: no class) and its value."""

    value: int
    group: str = ""
    kind: str = ""
    name: str = ""

    def wire(self) -> Obj:
        spec: Obj = {"priority": self.value}
        if self.name:
            spec["priorityClassRef"] = {"group": self.group, "kind": self.kind, "name": self.name}
        return spec


def priority_class_name(raw_job: Mapping[str, Any], podsets: Sequence[PodSetSource]) -> str:
    """The pod PriorityClass of the job as Kueue reads it: `runPolicy.schedulingPolicy.priorityClass`,
    else the first `priorityClassName` among the templates, in pod-set order; "" when none names one."""
    spec = raw_job.get("spec") or {}
    policy = (spec.get("runPolicy") or {}).get("schedulingPolicy") or {}
    if policy.get("priorityClass"):
        return str(policy["priorityClass"])
    for podset in podsets:
        name = (podset.template.get("spec") or {}).get("priorityClassName")
        if name:
            return str(name)
    return ""


def render_podsets(podsets: Sequence[PodSetSource]) -> list[Obj]:
    """The Workload's `spec.podSets`: name (the replica type in lower case), count, template."""
    return [
        {"name": podset_name(p.rtype), "count": p.count, "template": copy.deepcopy(dict(p.template))}
        for p in podsets
    ]


def build_workload(
    *,
    name: str,
    raw_job: Mapping[str, Any],
    owner: Obj,
    queue: str,
    podsets: Sequence[PodSetSource],
    priority: Priority,
    labels: Mapping[str, str],
) -> Obj:
    """The Workload `name` of `raw_job` (its metadata is read), controlled by `owner` (an ownerReference
    with controller=true), carrying `labels` and the job's uid label."""
    meta = raw_job.get("metadata") or {}
    return {
        "apiVersion": WORKLOADS.api_version,
        "kind": WORKLOADS.kind,
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace"),
            "labels": {**labels, JOB_UID_LABEL: meta.get("uid", "")},
            "ownerReferences": [owner],
        },
        "spec": {
            "queueName": queue,
            "podSets": render_podsets(podsets),
            **priority.wire(),
        },
    }
