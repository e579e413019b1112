"""Objects a framework needs beside pods and Services (ConfigMaps, Secrets, HPAs, launcher Jobs, ...).

A framework only says what should exist (`extra_objects` hook, pure); the template makes it so, the
same way for every kind: missing objects are created owned by the job, objects that drifted from their
desired fields are merge-patched (unless `update=False`, e.g. for a Secret whose key is generated once),
and objects of the declared resources that the job owns but no longer wants are deleted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import final

from kubetrain.common.job.children import ChildWriter
from kubetrain.common.job.compare import contains
from kubetrain.common.job.facts import blind_key
from kubetrain.common.kube import jsonwire, objects
from kubetrain.common.kube.resources import Obj, Resource

__all__ = ["ExtraObject", "blind_key", "owned", "sync_extras"]


@final
@dataclass(frozen=True, slots=True)
class ExtraObject:
    """One object a framework wants to exist while the job runs (or is suspended).

    `body` needs `metadata.name`; namespace, the controlling ownerReference and the job's labels are
    added by the template. `update=False`: create once, never patch (generated keys, immutable specs).
    `blind=True`: create once and never read it back, not even to see that it exists (the operator may
    not read Secrets): the job's ledger records it as created, AlreadyExists counts as present, and the
    owner reference removes it with the job. Its resource need not be in `extra_resources`.
    """

    resource: Resource
    body: Obj
    update: bool = True
    blind: bool = False

    @property
    def name(self) -> str:
        return objects.name(self.body)

    @property
    def key(self) -> str:
        """How the ledger names it: `secrets/pi-ssh`."""
        return blind_key(self.resource, self.name)


def owned(body: Obj, *, namespace: str, owner: Obj, labels: Mapping[str, str]) -> Obj:
    """A copy of `body` in the job's namespace, controlled by the job and carrying its labels."""
    result = jsonwire.copy(body)
    meta = result.setdefault("metadata", {})
    meta["namespace"] = namespace
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    meta["ownerReferences"] = [owner]
    return result


async def sync_extras(
    writer: ChildWriter,
    desired: Sequence[ExtraObject],
    observed: Mapping[Resource, Mapping[str, Obj]],
    *,
    namespace: str,
    owner: Obj,
    labels: Mapping[str, str],
) -> frozenset[str]:
    """Create, patch and delete so that the owned objects of `observed`'s resources are `desired`.

    Returns the keys of the blind objects that exist now (created, or found to exist already)."""
    wanted: set[tuple[Resource, str]] = set()
    made: set[str] = set()
    for extra in desired:
        if extra.blind:
            body = owned(extra.body, namespace=namespace, owner=owner, labels=labels)
            if await writer.create(extra.resource, body, blind=True):
                made.add(extra.key)
            continue
        if extra.resource not in observed:
            raise ValueError(
                f"extra object {extra.name} is a {extra.resource}, not in the controller's extra_resources"
            )
        wanted.add((extra.resource, extra.name))
        body = owned(extra.body, namespace=namespace, owner=owner, labels=labels)
        current = observed[extra.resource].get(extra.name)
        if current is None:
            await writer.create(extra.resource, body)
        elif extra.update and not contains(current, body):
            await writer.patch(extra.resource, extra.name, body)
    for resource, by_name in observed.items():
        for name, obj in by_name.items():
            if (resource, name) not in wanted and not objects.is_deleting(obj):
                await writer.delete(resource, name, uid=objects.uid(obj))
    return frozenset(made)
