"""Snapshots of what a controller creates for an example job: rendered, normalised, compared, rewritten.

`render_snapshot(example, controller)` submits the example (as `kubectl apply` would: the YAML as written)
to the in-memory API server, runs the real controller in an `InProcessOperator` on a FakeClock for a few
reconciles (no pod ever runs), and returns every object the job owns, of every resource the controller
watches (pods, Services, PodGroups, ConfigMaps, Secrets, HPAs, ...), as one YAML text: sorted by kind then
name, with volatile fields replaced by placeholders (uids, resourceVersions, timestamps, Secret data).

An example submitted suspended (for Kueue to admit) would create nothing; it is rendered as admitted
(`suspend: false`), and the header says so. With `running=True` every pod is then made Running and Ready
(as a kubelet would) and the operator reconciles again, to show what exists only once pods run (an MPI
launcher created under WaitForWorkersReady, the hosts up right now); pod status stays out of the YAML.

`assert_snapshot(path, text)` compares with the reviewed file; `KUBETRAIN_UPDATE_SNAPSHOTS=1` rewrites it
instead. A missing snapshot fails: a new one must be written on purpose, then reviewed by a human.
"""

from __future__ import annotations

import copy
import difflib
import os
from pathlib import Path
from typing import Any

import yaml

from kubetrain.common.kube import objects
from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.resources import PODS, SECRETS, Obj
from kubetrain.common.testing import FakeClock
from kubetrain.controllers.settings import ConfiguredJobController, ControllerSettings
from kubetrain.testing.operator import InProcessOperator

__all__ = ["EXAMPLES", "SNAPSHOTS", "UPDATE_ENV", "assert_snapshot", "normalise", "render_snapshot"]

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
UPDATE_ENV = "KUBETRAIN_UPDATE_SNAPSHOTS"
RECONCILES = 5
"""Virtual-time steps the operator gets: enough for create, observe and status to settle."""

_VOLATILE_META = {"uid": "<uid>", "resourceVersion": "<resourceVersion>", "creationTimestamp": "<timestamp>"}


async def render_snapshot(
    example: Path,
    controller: type[ConfiguredJobController[Any]],
    *,
    settings: ControllerSettings | None = None,
    running: bool = False,
) -> str:
    """The normalised YAML of everything `controller` creates for the job in `example`."""
    body = next(
        d
        for d in yaml.safe_load_all(example.read_text())
        if d and d["apiVersion"].startswith("kubeflow.org/")
    )  # the job, not the PVC beside it
    namespace = body.setdefault("metadata", {}).setdefault("namespace", "default")
    suspended = bool((body.get("spec", {}).get("runPolicy") or {}).get("suspend"))
    if suspended:
        body["spec"]["runPolicy"]["suspend"] = False
    clock = FakeClock()
    job_resource = controller.job_resource()
    api = InMemoryApiClient(clock=clock, status_subresources=[job_resource])
    operator = InProcessOperator(api, [controller], settings=settings, clock=clock)
    operator.start()
    try:
        job = await api.create(job_resource, namespace, body)
        for _ in range(RECONCILES):
            await clock.advance(0.1)
        if running:
            await _run_pods(api, namespace, clock)
        owned = [
            obj
            # Secrets are created blind (never watched), so they are listed here besides the watched ones
            for resource in dict.fromkeys([*controller.resources_for(operator.settings.gang), SECRETS])
            if resource != job_resource
            for obj in (await api.list(resource, namespace)).items
            if (objects.controller_of(obj) or {}).get("uid") == objects.uid(job)
        ]
    finally:
        operator.manager.stop()
        await clock.advance(0.1)
        await operator.stop()
    return _header(example, controller, operator.settings, suspended, running) + normalise(owned)


async def _run_pods(api: InMemoryApiClient, namespace: str, clock: FakeClock) -> None:
    """Play the kubelet until no new pod appears: every pod Running and Ready."""
    done: set[str] = set()
    while True:
        pods = [p for p in (await api.list(PODS, namespace)).items if objects.name(p) not in done]
        if not pods:
            return
        for pod in pods:
            ready = [{"type": "Ready", "status": "True"}]
            await api.patch(
                PODS, namespace, objects.name(pod), {"status": {"phase": "Running", "conditions": ready}}
            )
            done.add(objects.name(pod))
        for _ in range(RECONCILES):
            await clock.advance(0.1)


def normalise(owned: list[Obj]) -> str:
    """`owned` as multi-document YAML, sorted by kind then name, volatile fields replaced."""
    docs = [_scrub(obj) for obj in sorted(owned, key=lambda o: (str(o.get("kind")), objects.name(o)))]
    return "---\n".join(yaml.dump(doc, Dumper=_Dumper, sort_keys=True, width=110) for doc in docs)


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (a hostfile, a script) as `|` blocks, readable line by line in a review."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def assert_snapshot(path: Path, text: str) -> None:
    """Compare `text` with the snapshot at `path`, or rewrite it when KUBETRAIN_UPDATE_SNAPSHOTS=1."""
    if os.environ.get(UPDATE_ENV) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    if not path.exists():
        raise AssertionError(f"no snapshot {path}: run with {UPDATE_ENV}=1 to write it, then review it")
    expected = path.read_text()
    if expected != text:
        diff = difflib.unified_diff(
            expected.splitlines(), text.splitlines(), "snapshot", "rendered", lineterm="", n=2
        )
        raise AssertionError(
            f"{path} differs from what the controller creates ({UPDATE_ENV}=1 rewrites it; review it):\n"
            + "\n".join(diff)
        )


def _header(
    example: Path,
    controller: type[ConfiguredJobController[Any]],
    settings: ControllerSettings,
    suspended: bool,
    running: bool,
) -> str:
    lines = [
        f"# What {controller.__name__} creates for {example.relative_to(ROOT)}.",
        "# Generated by tests/unit/controllers/snapshot.py; "
        f"{UPDATE_ENV}=1 rewrites it. Review every change.",
    ]
    if settings != ControllerSettings():
        lines.append(f"# Operator settings: {settings}")
    if suspended:
        lines.append(
            "# The example is submitted suspended; shown here as admitted (runPolicy.suspend: false)."
        )
    if running:
        lines.append("# Shown once every pod is Running and Ready (pod status left out).")
    return "\n".join(lines) + "\n"


def _scrub(obj: Obj) -> dict[str, Any]:
    doc: dict[str, Any] = copy.deepcopy(dict(obj))
    meta = doc.get("metadata") or {}
    for key, placeholder in _VOLATILE_META.items():
        if key in meta:
            meta[key] = placeholder
    meta.pop("managedFields", None)
    meta.pop("generation", None)
    if doc.get("kind") == PODS.kind:
        doc.pop("status", None)
    for ref in meta.get("ownerReferences") or ():
        ref["uid"] = "<uid>"
    if doc.get("kind") == SECRETS.kind:
        for field in ("data", "stringData"):
            if field in doc:
                doc[field] = {key: "<generated>" for key in doc[field] or {}}
    return doc
