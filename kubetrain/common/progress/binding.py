"""Whether a verified token's pod is a replica of the job whose status it reports.

A projected token names its pod by name and uid, and the API server signed both. The pod itself, though,
is only as trustworthy as whoever created it: anyone who may create pods in the namespace can give one the
job's labels and an owner reference to the job. So a pod counts as the job's only when the controller
itself counts it as one of the job's replicas:
- the token names the pod's uid (a token without one is refused, never waved through), and the pod of
  that name in the informer's cache has that uid (not a pod deleted and created again under the name);
- the pod is in the job's namespace, controlled by the job (its controller owner reference is the job's
  uid) and labelled with the job's name;
- its name is the one the controller gives the replica its labels name (`{job}-{type}-{index}`), and that
  replica type and index exist in the job's spec.
A pod that passes is one the controller would adopt and run as that replica, whoever made it: its report
is no less true than its training.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubetrain.api import KindInfo
from kubetrain.common.job.labels import label_key, replica_index, replica_name
from kubetrain.common.kube import objects
from kubetrain.common.kube.authn import Identity
from kubetrain.common.kube.resources import Obj

__all__ = ["SERVICE_ACCOUNT_PREFIX", "is_replica_of"]

SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


def is_replica_of(identity: Identity, pod: Obj | None, job: Obj, info: KindInfo) -> bool:
    """Whether `pod` (the cache's pod named by the token, or None) is a replica of `job` (see above)."""
    namespace, name = objects.namespace(job), objects.name(job)
    if pod is None or not identity.pod_uid or objects.uid(pod) != identity.pod_uid:
        return False
    if not identity.username.startswith(f"{SERVICE_ACCOUNT_PREFIX}{namespace}:"):
        return False
    if objects.namespace(pod) != namespace or not _controlled_by(pod, objects.uid(job)):
        return False
    labels = objects.labels(pod)
    if labels.get(label_key("job-name", info.label_prefix)) != name:
        return False
    rtype = labels.get(label_key("replica-type", info.label_prefix), "")
    index = replica_index(labels, prefix=info.label_prefix)
    if not rtype or index is None or objects.name(pod) != replica_name(name, rtype, index):
        return False
    return index < _replicas(job, info, rtype)


def _controlled_by(pod: Obj, uid: str) -> bool:
    owners = (pod.get("metadata") or {}).get("ownerReferences") or ()
    return bool(uid) and any(o.get("controller") is True and o.get("uid") == uid for o in owners)


def _replicas(job: Obj, info: KindInfo, rtype: str) -> int:
    """How many replicas of `rtype` (matched without case, as the labels lower it) the spec asks for."""
    specs: Mapping[str, Any] = (job.get("spec") or {}).get(info.replica_specs_field) or {}
    for declared, spec in specs.items():
        if declared.lower() == rtype.lower():
            replicas = (spec or {}).get("replicas")
            return int(replicas) if isinstance(replicas, int) else info.default_replicas.get(declared, 1)
    return 0
