"""Go clients write `null` for unset times and some optional pointers; the CRDs and the models accept them.

The real API server check (a Go-style webhook) is tests/integration/test_go_client_nulls.py; these pin the
schema nodes offline, so a change in the converter that loses a `nullable` fails here first.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api import KINDS, KindInfo, check_job, parse_job
from kubetrain.api.crd import custom_resource_definition
from kubetrain.api.podschema import GO_NULLS, kubernetes_schema, pod_template_schema


def _spec_schema(info: KindInfo) -> dict[str, Any]:
    (version,) = custom_resource_definition(info)["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def test_template_creation_timestamp_is_nullable() -> None:
    metadata = pod_template_schema()["properties"]["metadata"]["properties"]
    assert metadata["creationTimestamp"] == {"type": "string", "format": "date-time", "nullable": True}


@pytest.mark.parametrize(("definition", "field"), sorted(GO_NULLS))
def test_every_go_null_field_is_nullable(definition: str, field: str) -> None:
    assert kubernetes_schema(definition)["properties"][field].get("nullable") is True


def test_other_fields_are_not_nullable() -> None:
    pod = pod_template_schema()["properties"]["spec"]["properties"]
    assert "nullable" not in pod["containers"], "required: a Go null there is an invalid job anyway"
    assert "nullable" not in pod["hostNetwork"]
    assert str(pod_template_schema()).count("'nullable'") > len(
        GO_NULLS
    )  # one per place a definition is used


@pytest.mark.parametrize("info", KINDS, ids=lambda info: info.kind)
def test_condition_times_are_nullable(info: KindInfo) -> None:
    condition = _spec_schema(info)["properties"]["status"]["properties"]["conditions"]["items"]["properties"]
    for name in ("lastUpdateTime", "lastTransitionTime"):
        assert condition[name] == {"type": "string", "format": "date-time", "nullable": True}
    assert "nullable" not in condition["reason"]


@pytest.mark.parametrize("info", KINDS, ids=lambda info: info.kind)
def test_a_job_as_go_writes_it_is_valid(info: KindInfo) -> None:
    template = {
        "metadata": {"creationTimestamp": None},
        "spec": {
            "containers": [
                {
                    "name": info.default_container_name or "main",
                    "image": "busybox",
                    "livenessProbe": {"grpc": {"port": 1, "service": None}},
                }
            ]
        },
    }
    job = parse_job(
        {
            "apiVersion": info.api_version,
            "kind": info.kind,
            "metadata": {"name": "go", "creationTimestamp": None},
            "spec": {
                "runPolicy": {},
                info.replica_specs_field: {
                    rtype: {"replicas": 1, "template": template} for rtype in info.replica_types[:2]
                },
            },
            "status": {"conditions": [{"type": "Created", "status": "True", "lastUpdateTime": None}]},
        }
    )
    check_job(job)
    spec = next(iter(job.replica_specs.values()))
    assert spec.template.metadata is not None and spec.template.metadata.creation_timestamp is None
