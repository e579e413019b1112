"""The local twin of the API server's checks: structural schema, CEL rules, ObjectMeta; and where it is used.

The schema and rule layers are generic, so they are first tested on schemas and CEL rules written here;
then on the generated CRDs: the packaged schemas equal a fresh generation, every rule of every CRD
compiles and runs on each kind's example, and the entry points users call (`load_valid_jobs`,
`read_jobs`, hence `submit`, `run --local` and `TrainingClient`) reject what the API server rejects.
What the real API server says about thousands of jobs is compared in
tests/integration/test_validation_differential.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api import KINDS, InvalidJobError, load_valid_jobs
from kubetrain.api.celcheck import cel_errors, is_transition_rule
from kubetrain.api.metacheck import metadata_errors
from kubetrain.api.schemacheck import schema_errors
from kubetrain.api.servercheck import crd_schema, generated_schemas, server_errors
from kubetrain.client.jobs import read_jobs

ROOT = Path(__file__).resolve().parents[3]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 5, "pattern": "^[a-z]+$"},
        "count": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 10},
        "policy": {"type": "string", "enum": ["Always", "Never"]},
        "when": {"type": "string", "format": "date-time"},
        "size": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "maybe": {"type": "string", "nullable": True},
        "ports": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["port", "protocol"],
            "items": {
                "type": "object",
                "required": ["port"],
                "properties": {
                    "port": {"type": "integer"},
                    "protocol": {"type": "string", "default": "TCP"},
                },
            },
        },
        "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
        "specs": {
            "type": "object",
            "maxProperties": 2,
            "additionalProperties": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
            "x-kubernetes-validations": [
                {
                    "rule": "self.all(k, k.lowerAscii() in ['worker', 'ps'])",
                    "message": "specs keys are Worker or PS; rename the others",
                },
                {"rule": "self == oldSelf", "message": "immutable"},
            ],
        },
    },
    "required": ["name"],
    "x-kubernetes-validations": [
        {
            "rule": "!has(self.count) || !has(self.specs) || self.specs.all(k, "
            "!has(self.specs[k].replicas) || self.specs[k].replicas <= self.count)",
            "message": "no replica count above count; raise count",
            "fieldPath": ".count",
        },
        {"rule": "size(self.specs) > 0", "message": "a spec is needed"},
    ],
}


def _paths(value: dict[str, Any]) -> list[str]:
    report = schema_errors(value, SCHEMA)
    return [error.path for error in report.errors]


def test_a_valid_value_has_no_schema_errors() -> None:
    value = {
        "name": "ab",
        "count": 3,
        "policy": "Never",
        "when": "2026-01-02T03:04:05Z",
        "size": "2Gi",
        "labels": {"a/b": "c"},
        "free": {"anything": {"at": ["all"]}},
        "maybe": None,
        "ports": [{"port": 1}, {"port": 1, "protocol": "UDP"}],
        "tags": ["a", "b"],
        "specs": {"Worker": {"replicas": 2}},
    }
    report = schema_errors(value, SCHEMA)
    assert report.errors == ()
    assert cel_errors(value, SCHEMA) == []


@pytest.mark.parametrize(
    ("change", "path", "blocks_cel"),
    [
        ({"bogus": 1}, "bogus", False),
        ({"specs": {"Worker": {"replica": 1}}}, "specs.Worker.replica", False),
        ({"name": 5}, "name", True),
        ({"name": "ABC"}, "name", False),
        ({"name": "abcdef"}, "name", True),
        ({"count": 11}, "count", False),
        ({"count": -1}, "count", False),
        ({"count": 2**31}, "count", False),
        ({"count": 1.5}, "count", True),
        ({"policy": "Sometimes"}, "policy", True),
        ({"when": "yesterday"}, "when", True),
        ({"size": 1.5}, "size", True),
        ({"labels": {"a": 1}}, "labels.a", True),
        ({"labels": {"a/b": 1}}, 'labels["a/b"]', True),
        ({"ports": [{"port": 1}, {"port": 1, "protocol": "TCP"}]}, "ports[1]", False),
        ({"ports": [{"protocol": "TCP"}]}, "ports[0].port", True),
        ({"tags": ["a", "a"]}, "tags[1]", False),
        ({"tags": [None]}, "tags[0]", True),
        ({"specs": {"a": {}, "b": {}, "c": {}}}, "specs", True),
        ({"name": {"x": 1}}, "name.x", True),
    ],
)
def test_schema_errors_name_the_field(change: dict[str, Any], path: str, blocks_cel: bool) -> None:
    report = schema_errors({"name": "ab", **change}, SCHEMA)
    assert path in [error.path for error in report.errors]
    assert report.blocks_cel is blocks_cel


def test_a_null_is_unset_unless_nullable() -> None:
    assert _paths({"name": "ab", "count": None}) == []
    assert _paths({"name": None}) == ["name"]  # required, and the null is dropped
    # a dropped null is no entry either: the API server counts maxProperties after dropping it
    assert _paths({"name": "ab", "specs": {"Worker": {}, "PS": {}, "x": None}}) == []


def test_cel_rules_report_at_their_field_with_message_and_fix() -> None:
    errors = cel_errors({"name": "ab", "count": 1, "specs": {"Worker": {"replicas": 2}, "Other": {}}}, SCHEMA)
    assert [(e.path, e.message, e.fix) for e in errors] == [
        ("count", "no replica count above count", "raise count"),
        ("specs", "specs keys are Worker or PS", "rename the others"),
    ]


def test_a_rule_that_cannot_be_evaluated_rejects() -> None:
    (error,) = cel_errors({"name": "ab"}, SCHEMA)  # self.specs is missing: size(self.specs) errors
    assert error.path == ""
    assert error.message.startswith("a spec is needed (the rule could not be evaluated")


def test_transition_rules_are_skipped_on_create() -> None:
    assert is_transition_rule("self == oldSelf")
    assert not is_transition_rule("self.oldSelfish == 1")


def test_object_metadata_as_the_api_server_checks_it() -> None:
    metadata = {"name": "ok", "labels": {"app": "x"}, "annotations": {"a.b/c": "long " * 9}}
    assert metadata_errors(metadata) == []
    found = {
        e.path
        for e in metadata_errors({"name": "Bad_Name", "bogus": 1, "labels": {"a b": "c"}, "namespace": "A"})
    }
    assert found == {"metadata.name", "metadata.bogus", "metadata.labels", "metadata.namespace"}
    assert [e.path for e in metadata_errors({})] == ["metadata.name"]


def test_the_packaged_schemas_are_the_generated_ones() -> None:
    fresh = generated_schemas()
    for info in KINDS:
        packaged = (ROOT / "kubetrain" / "api" / "crdschemas" / f"{info.plural}.json").read_text()
        assert packaged == fresh[f"{info.plural}.json"], "run `kubetrain crds` and commit the result"
        assert crd_schema(info)["properties"]["spec"]["x-kubernetes-validations"] is not None


def _example(kind: str) -> dict[str, Any]:
    for path in sorted((ROOT / "examples").glob("*/*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):  # a file may carry the PVC its job mounts
            if document.get("kind") == kind:
                return document  # type: ignore[no-any-return]
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", [info.kind for info in KINDS])
def test_every_rule_of_the_generated_crds_runs_on_an_example(kind: str) -> None:
    info = next(info for info in KINDS if info.kind == kind)
    rules: list[str] = []

    def collect(node: dict[str, Any]) -> None:
        rules.extend(rule["rule"] for rule in node.get("x-kubernetes-validations", []))
        for child in node.get("properties", {}).values():
            collect(child)
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                collect(node[key])

    collect(crd_schema(info))
    assert rules, "the CRD has CEL rules"
    assert server_errors(_example(kind)) == []  # every create-time rule compiled, ran and passed


def test_what_users_call_rejects_what_the_server_rejects() -> None:
    job = _example("TFJob")
    container = next(iter(job["spec"]["tfReplicaSpecs"].values()))["template"]["spec"]["containers"][0]
    container["bogusField"] = 1
    container["terminationMessagePolicy"] = 5  # kubetrain's models keep pod fields they do not name
    expected = {
        "spec.tfReplicaSpecs.Chief.template.spec.containers[0].bogusField",
        "spec.tfReplicaSpecs.Chief.template.spec.containers[0].terminationMessagePolicy",
    }
    for check in (lambda: load_valid_jobs(yaml.safe_dump(job)), lambda: read_jobs(job)):
        with pytest.raises(InvalidJobError) as raised:
            check()
        assert {e.path for e in raised.value.errors} >= expected


def test_has_of_a_missing_parent_is_an_error_as_in_the_api_server() -> None:
    schema = {"type": "object", "x-kubernetes-validations": [{"rule": "!has(self.spec.x)", "message": "m"}]}
    assert cel_errors({"spec": {}}, schema) == []
    (error,) = cel_errors({}, schema)  # cel-go: no such key `spec`; the server rejects the object
    assert "could not be evaluated" in error.message
