"""Every example job, through the real controller: exactly the objects it creates, against reviewed snapshots.

A snapshot lives at `snapshots/<framework>/<example stem>.yaml`; `KUBETRAIN_UPDATE_SNAPSHOTS=1` rewrites
them (see snapshot.py). The controller of an example is the registry's controller for its kind, so a new
example under a framework folder listed here is covered without touching this file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.controllers.registry import load_controller, resolve_kinds
from kubetrain.controllers.settings import ConfiguredJobController, ControllerSettings

from .snapshot import EXAMPLES, SNAPSHOTS, assert_snapshot, render_snapshot

FRAMEWORKS = ("tensorflow", "pytorch", "jax", "xgboost", "paddle")
"""Example folders whose jobs are snapshotted here (one folder per framework)."""

CASES = sorted(path for framework in FRAMEWORKS for path in (EXAMPLES / framework).glob("*.yaml"))
GANG = ControllerSettings(gang_scheduler="scheduler-plugins-scheduler")
"""Examples with a schedulingPolicy are also snapshotted under gang scheduling (`<stem>.gang.yaml`):
scheduler-plugins, whose PodGroup does not hold back pod creation, so pods and PodGroup show together."""


def _doc(example: Path) -> dict[str, Any]:
    doc: dict[str, Any] = next(
        d
        for d in yaml.safe_load_all(example.read_text())
        if d and d["apiVersion"].startswith("kubeflow.org/")
    )
    return doc


def _controller(example: Path) -> type[ConfiguredJobController[Any]]:
    return load_controller(resolve_kinds([_doc(example)["kind"]])[0])


GANG_CASES = [p for p in CASES if (_doc(p)["spec"].get("runPolicy") or {}).get("schedulingPolicy")]


def test_every_framework_has_examples() -> None:
    for framework in FRAMEWORKS:
        assert any(p.parent.name == framework for p in CASES), f"no examples in examples/{framework}"


@pytest.mark.parametrize("example", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
async def test_example_creates_exactly_the_snapshot(example: Path) -> None:
    rendered = await render_snapshot(example, _controller(example))
    assert_snapshot(SNAPSHOTS / example.parent.name / f"{example.stem}.yaml", rendered)


def test_some_example_has_a_scheduling_policy() -> None:
    assert GANG_CASES, "no example exercises gang scheduling: the PodGroup snapshots would be empty"


@pytest.mark.parametrize("example", GANG_CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
async def test_example_under_gang_scheduling_creates_exactly_the_snapshot(example: Path) -> None:
    rendered = await render_snapshot(example, _controller(example), settings=GANG)
    assert_snapshot(SNAPSHOTS / example.parent.name / f"{example.stem}.gang.yaml", rendered)
