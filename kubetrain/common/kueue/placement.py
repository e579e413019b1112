"""Where an admitted job's pods go: what Kueue's admission adds to each pod set's pods.

For each pod set, from the Workload's `status.admission.podSetAssignments`: the node labels and tolerations
of the ResourceFlavors assigned to it, the `kueue.x-k8s.io/podset` label, and then what admission checks
add (`status.admissionChecks[].podSetUpdates`: labels, annotations, node selector, tolerations). This is
what Kueue's integrations write into a job's pod templates when they start it
(`pkg/podset/podset.go: FromAssignment, Merge`); kubetrain adds it to each pod as it renders it instead, so
the job's spec is never rewritten and nothing needs restoring after an eviction.

A key that the template already sets to another value is a conflict that no retry resolves (Kueue fails
such a Workload with `FailedToStart`): `PlacementConflict` names the pod set, the field and the key.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, final

from kubetrain.common.kube.resources import Obj
from kubetrain.common.kueue.names import PODSET_LABEL

__all__ = ["Placement", "PlacementConflict", "assigned_flavors", "place_pod", "placements"]


class PlacementConflict(ValueError):
    """The admission asks for a value that the pod template already sets otherwise."""


@final
@dataclass(frozen=True, slots=True)
class Placement:
    """What one pod set's pods get on admission."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Obj, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    def merged(self, other: Placement, *, where: str) -> Placement:
        """This placement with `other` added; a key set to two values is a `PlacementConflict`."""
        return Placement(
            node_selector=_union(self.node_selector, other.node_selector, f"{where}: nodeSelector"),
            tolerations=_tolerations(self.tolerations, other.tolerations),
            labels=_union(self.labels, other.labels, f"{where}: labels"),
            annotations=_union(self.annotations, other.annotations, f"{where}: annotations"),
        )


def assigned_flavors(workload: Mapping[str, Any]) -> set[str]:
    """The names of every ResourceFlavor the Workload's admission assigns."""
    admission = (workload.get("status") or {}).get("admission") or {}
    return {
        str(flavor)
        for assignment in admission.get("podSetAssignments") or ()
        for flavor in (assignment.get("flavors") or {}).values()
    }


def placements(workload: Mapping[str, Any], flavors: Mapping[str, Mapping[str, Any]]) -> dict[str, Placement]:
    """Each admitted pod set's `Placement`, by pod-set name; `flavors`: ResourceFlavor objects by name
    (KeyError for an assigned flavor missing from it)."""
    status = workload.get("status") or {}
    result = {}
    for assignment in (status.get("admission") or {}).get("podSetAssignments") or ():
        name = str(assignment.get("name") or "")
        placed = Placement(labels={PODSET_LABEL: name})
        for flavor in dict.fromkeys((assignment.get("flavors") or {}).values()):
            spec = flavors[str(flavor)].get("spec") or {}
            found = Placement(
                node_selector=spec.get("nodeLabels") or {}, tolerations=tuple(spec.get("tolerations") or ())
            )
            placed = placed.merged(found, where=f"pod set {name}, flavor {flavor}")
        for check in status.get("admissionChecks") or ():
            for update in check.get("podSetUpdates") or ():
                if update.get("name") == name:
                    placed = placed.merged(
                        _update(update), where=f"pod set {name}, admission check {check.get('name')}"
                    )
        result[name] = placed
    return result


def place_pod(pod: Obj, placement: Placement, *, where: str) -> Obj:
    """`pod` (changed in place and returned) with `placement` added; `where` names the pod set's template
    in a `PlacementConflict`."""
    meta, spec = pod.setdefault("metadata", {}), pod.setdefault("spec", {})
    current = Placement(
        node_selector=spec.get("nodeSelector") or {},
        tolerations=tuple(spec.get("tolerations") or ()),
        labels=meta.get("labels") or {},
        annotations=meta.get("annotations") or {},
    )
    merged = current.merged(placement, where=where)
    for key, value, target in (
        ("nodeSelector", merged.node_selector, spec),
        ("labels", merged.labels, meta),
        ("annotations", merged.annotations, meta),
    ):
        if value:
            target[key] = dict(value)
    if merged.tolerations:
        spec["tolerations"] = [copy.deepcopy(t) for t in merged.tolerations]
    return pod


def _update(update: Mapping[str, Any]) -> Placement:
    return Placement(
        node_selector=update.get("nodeSelector") or {},
        tolerations=tuple(update.get("tolerations") or ()),
        labels=update.get("labels") or {},
        annotations=update.get("annotations") or {},
    )


def _union(first: Mapping[str, str], second: Mapping[str, str], where: str) -> dict[str, str]:
    for key, value in second.items():
        if key in first and first[key] != value:
            raise PlacementConflict(
                f"{where}: Kueue's admission sets {key}={value!r}, the pod template has "
                f"{key}={first[key]!r}; remove {key} from the template, or use a queue whose flavors agree"
            )
    return {**first, **second}


def _tolerations(first: tuple[Obj, ...], second: tuple[Obj, ...]) -> tuple[Obj, ...]:
    return first + tuple(t for t in second if t not in first)
