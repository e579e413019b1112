"""What the integration tests share: the committed CRDs installed on the session's control plane."""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubetrain.api import KINDS
from kubetrain.testing.controlplane import ControlPlane

CRD_DIR = Path(__file__).resolve().parents[2] / "manifests" / "crds"


@pytest.fixture(autouse=True)
def _collect_garbage_after() -> Iterator[None]:
    """Collect garbage once the test's other fixtures (its event loop too) are gone, so that a socket or
    transport the test, or the operator under it, left open is reported against this test. Without it,
    the warning surfaces whenever the collector next runs, failing some later test."""
    yield
    gc.collect()


def established(plane: ControlPlane, crd: str) -> bool:
    status = json.loads(plane.kubectl("get", "crd", crd, "-o", "json").stdout).get("status") or {}
    return any(c["type"] == "Established" and c["status"] == "True" for c in status.get("conditions") or [])


@pytest.fixture(scope="module")
def crds(control_plane: ControlPlane) -> ControlPlane:
    """The CRDs applied as users do, client-side (`kubectl apply -f manifests/crds/`), and Established."""
    control_plane.kubectl("apply", "-f", str(CRD_DIR))
    deadline = time.monotonic() + 60
    for info in KINDS:
        # `kubectl wait` fails outright while a new CRD has no conditions yet, so poll instead.
        while not established(control_plane, info.crd_name):
            assert time.monotonic() < deadline, f"{info.crd_name} not Established after 60 s"
            time.sleep(0.2)
    return control_plane
