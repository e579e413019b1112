"""The CRDs' `nullable` fields are exactly those that Go clients write as `null` (read from the Go types).

`tools/gonulls` walks, with Go reflection, the types a Go webhook uses to write our objects (k8s.io/api
core/v1 PodTemplateSpec, training-operator v1.9.4 and mpi-operator v0.8.0 job types, pinned in its go.mod)
and prints every field encoding/json writes as `null` when unset. When a Kubernetes or Kubeflow upgrade adds
one, this test names it. Go is required (it also builds the control plane's binaries): without it the test
fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kubetrain.api.common import JobCondition
from kubetrain.api.crd import _GO_NULLS
from kubetrain.api.podschema import GO_NULLS, KUBERNETES_SCHEMA_VERSION, kubernetes_schema

pytestmark = pytest.mark.integration

TOOL = Path(__file__).resolve().parents[2] / "tools" / "gonulls"
KUBEFLOW_MAPS = {
    "tfReplicaSpecs",
    "pytorchReplicaSpecs",
    "jaxReplicaSpecs",
    "xgbReplicaSpecs",
    "paddleReplicaSpecs",
    "mpiReplicaSpecs",
}
"""Written as null only when nil, i.e. for a job without replica specs, which is invalid (crd.py says why)."""


@pytest.fixture(scope="module")
def go_nulls() -> list[tuple[str, str, str]]:
    go = shutil.which("go")
    assert go is not None, "the `go` command is needed (install Go, as hack/testbin.sh does)"
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"}
    result = subprocess.run(
        [go, "run", "."], cwd=TOOL, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert result.returncode == 0, result.stderr
    return [tuple(line.split("\t")) for line in result.stdout.splitlines()]  # type: ignore[misc]


def test_the_tool_reads_the_kubernetes_version_the_schemas_come_from() -> None:
    pinned = re.search(r"^\s*k8s\.io/api v(\S+)$", (TOOL / "go.mod").read_text(), re.MULTILINE)
    assert pinned is not None
    assert f"v1.{pinned.group(1).split('.', 1)[1]}" == KUBERNETES_SCHEMA_VERSION


def test_pod_template_nullables_are_the_optional_go_nulls(go_nulls: list[tuple[str, str, str]]) -> None:
    optional = set()
    for definition, field, _ in go_nulls:
        if definition.startswith("io.k8s.") and field not in kubernetes_schema(definition).get(
            "required", []
        ):
            optional.add((definition, field))
    assert optional == set(GO_NULLS)


def test_kubeflow_nullables_are_the_condition_times(go_nulls: list[tuple[str, str, str]]) -> None:
    kubeflow = [(d, f, why) for d, f, why in go_nulls if d.startswith("com.github.kubeflow.")]
    times = {f for d, f, why in kubeflow if why == "time"}
    assert {d.rsplit(".", 1)[1] for d, f, why in kubeflow if why == "time"} == {"JobCondition"}
    assert times == set(_GO_NULLS[JobCondition])
    assert {f for d, f, why in kubeflow if why != "time"} == KUBEFLOW_MAPS
