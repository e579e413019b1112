"""Values the API server's pod validation refuses are refused with the job: by the CRD and by `submit`.

The reported case: a PyTorchJob with `imagePullPolicy: Sometimes` passed `kubetrain submit` and the CRD,
then every one of its pods was refused (422). The real API server's verdict on the same jobs is in
tests/integration/test_crds_apiserver.py.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api import InvalidJobError, load_jobs, load_valid_jobs
from kubetrain.api.podenums import POD_ENUMS
from kubetrain.api.podschema import _definitions, pod_template_schema

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "pytorch" / "pytorch-ddp.yaml"
CONTAINER = "spec.pytorchReplicaSpecs.Master.template.spec.containers[0]"


def _job() -> dict[str, Any]:
    job: dict[str, Any] = load_jobs(EXAMPLE.read_text())[0].to_wire()
    return job


def _container(job: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"][
        "containers"
    ][0]
    return container


@pytest.mark.parametrize(("definition", "field"), sorted(POD_ENUMS))
def test_every_listed_field_is_a_string_of_the_kubernetes_definitions(definition: str, field: str) -> None:
    node = _definitions()[definition]["properties"][field]  # a rename upstream fails here
    assert node.get("type") in ("string", ["string", "null"])


def test_the_pod_schema_carries_the_enums() -> None:
    container = pod_template_schema()["properties"]["spec"]["properties"]["containers"]["items"]["properties"]
    assert container["imagePullPolicy"]["enum"] == ["Always", "IfNotPresent", "Never", ""]
    protocol = container["ports"]["items"]["properties"]["protocol"]
    assert (protocol["enum"], protocol["default"]) == (["TCP", "UDP", "SCTP", ""], "TCP")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("imagePullPolicy", "Sometimes"),
        ("terminationMessagePolicy", "Always"),
        ("restartPolicy", "Sometimes"),
    ],
)
def test_load_refuses_a_value_no_pod_accepts_naming_the_field(field: str, value: str) -> None:
    job = _job()
    _container(job)[field] = value
    with pytest.raises(InvalidJobError) as raised:
        load_valid_jobs(yaml.safe_dump(job))
    (error,) = [e for e in raised.value.errors if e.path == f"{CONTAINER}.{field}"]
    assert f'"{value}"' in error.message


@pytest.mark.parametrize("value", ["IfNotPresent", "Never", "Always", ""])
def test_load_accepts_every_pull_policy_a_pod_accepts(value: str) -> None:
    job = _job()
    _container(job)["imagePullPolicy"] = value
    assert load_valid_jobs(yaml.safe_dump(job))


def test_a_bad_port_protocol_and_dns_policy_are_refused() -> None:
    job = _job()
    _container(job)["ports"] = [{"containerPort": 23456, "protocol": "tcp"}]
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["dnsPolicy"] = "Cluster"
    with pytest.raises(InvalidJobError) as raised:
        load_valid_jobs(yaml.safe_dump(job))
    assert {e.path for e in raised.value.errors} >= {
        f"{CONTAINER}.ports[0].protocol",
        "spec.pytorchReplicaSpecs.Worker.template.spec.dnsPolicy",
    }


def test_submit_says_which_field_and_what_is_allowed(tmp_path: Path) -> None:
    job = copy.deepcopy(_job())
    _container(job)["imagePullPolicy"] = "Sometimes"
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    result = subprocess.run(
        [sys.executable, "-m", "kubetrain.cli", "submit", "--dry-run=client", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert f"{CONTAINER}.imagePullPolicy" in result.stderr
    assert '"IfNotPresent"' in result.stderr, result.stderr
