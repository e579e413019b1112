"""The committed CRD manifests: in step with the models, installable with client-side apply, complete.

Users install `manifests/crds/*.yaml` with plain `kubectl apply -f`; these tests pin what that gives them
(names, columns, subresources) and fail when a model changed without `kubetrain crds` being run.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api import JAXJOB, KINDS, KindInfo, ValidationRule, podschema
from kubetrain.api.crd import GENERATED_HEADER, crd_file_name, custom_resource_definition, generate_crds
from kubetrain.cli import main

ROOT = Path(__file__).resolve().parents[3]
CRD_DIR = ROOT / "manifests" / "crds"
LAST_APPLIED_LIMIT = 256 * 1024  # bytes of all annotations together, enforced by the API server
REGENERATE = "run `kubetrain crds` and commit manifests/crds/"


@functools.cache
def _load(info: KindInfo) -> dict[str, Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # only speed differs
    document: dict[str, Any] = yaml.load((CRD_DIR / crd_file_name(info)).read_text(encoding="utf-8"), loader)
    return document


def _committed(info: KindInfo) -> dict[str, Any]:
    return copy.deepcopy(_load(info))


def _version(info: KindInfo) -> dict[str, Any]:
    (version,) = _committed(info)["spec"]["versions"]
    return dict(version)


def test_committed_crds_match_the_models() -> None:
    generated = generate_crds()
    assert sorted(generated) == sorted(crd_file_name(info) for info in KINDS)
    for name, text in generated.items():
        path = CRD_DIR / name
        assert path.is_file(), f"{path} is missing: {REGENERATE}"
        assert path.read_bytes() == text.encode(), f"{path} differs from the models: {REGENERATE}"


def test_no_stale_generated_crds_are_left() -> None:
    expected = {crd_file_name(info) for info in KINDS}
    first_line = "# " + GENERATED_HEADER.splitlines()[0]
    generated_on_disk = {p.name for p in CRD_DIR.glob("*.yaml") if p.read_text().startswith(first_line)}
    assert generated_on_disk == expected, f"stale generated files in {CRD_DIR}: remove them"


def test_generation_is_byte_identical_in_a_fresh_process(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    command = [sys.executable, "-m", "kubetrain.cli", "crds", "--output-dir", str(tmp_path)]
    subprocess.run(command, check=True, capture_output=True, env=env, cwd=tmp_path)
    for info in KINDS:
        name = crd_file_name(info)
        assert (tmp_path / name).read_bytes() == (CRD_DIR / name).read_bytes(), name


def test_check_passes_on_the_committed_files(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crds", "--check", "--output-dir", str(CRD_DIR)]) == 0
    assert capsys.readouterr().err == ""


def test_check_names_the_files_that_differ(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crds", "--output-dir", str(tmp_path)]) == 0
    edited = tmp_path / crd_file_name(KINDS[0])
    edited.write_text(edited.read_text().replace("type: integer", "type: number", 1))
    missing = tmp_path / crd_file_name(KINDS[1])
    missing.unlink()
    capsys.readouterr()
    assert main(["crds", "--check", "--output-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert str(edited) in err and str(missing) in err and "kubetrain crds" in err
    assert str(tmp_path / crd_file_name(KINDS[2])) not in err


def test_crds_install_with_client_side_apply() -> None:
    for info in KINDS:
        path = CRD_DIR / crd_file_name(info)
        assert path.stat().st_size < LAST_APPLIED_LIMIT, f"{path} is {path.stat().st_size} bytes"
        # client-side apply stores the object as compact JSON in the last-applied-configuration annotation
        annotation = json.dumps(_committed(info), separators=(",", ":"))
        assert len(annotation.encode()) < LAST_APPLIED_LIMIT, path


@pytest.mark.parametrize("info", KINDS, ids=lambda info: info.kind)
def test_crd_identity_comes_from_the_kind_registry(info: KindInfo) -> None:
    crd = _committed(info)
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == f"{info.plural}.{info.group}"
    spec = crd["spec"]
    assert spec["group"] == "kubeflow.org" == info.group
    assert spec["scope"] == "Namespaced"
    names = spec["names"]
    assert (names["kind"], names["plural"], names["singular"]) == (info.kind, info.plural, info.singular)
    assert names["listKind"] == f"{info.kind}List"
    assert names.get("shortNames", []) == list(info.short_names)
    assert names.get("categories", []) == list(info.categories)
    version = _version(info)
    assert version["name"] == ("v2beta1" if info.kind == "MPIJob" else "v1")
    assert version["served"] is True and version["storage"] is True


@pytest.mark.parametrize("info", KINDS, ids=lambda info: info.kind)
def test_every_kind_has_state_and_age_columns_and_a_status_subresource(info: KindInfo) -> None:
    version = _version(info)
    columns = {column["name"]: column for column in version["additionalPrinterColumns"]}
    assert columns["State"]["jsonPath"] == ".status.conditions[-1:].type"
    assert columns["State"]["type"] == "string"
    assert columns["Age"] == {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    assert version["subresources"]["status"] == {}


SCALED = ("PyTorchJob", "JAXJob", "PaddleJob")


@pytest.mark.parametrize("kind", SCALED)
def test_the_workers_of_pytorchjob_jaxjob_and_paddlejob_have_a_scale_subresource_as_in_kubeflow(
    kind: str,
) -> None:
    (info,) = [info for info in KINDS if info.kind == kind]
    assert _version(info)["subresources"]["scale"] == {
        "specReplicasPath": f".spec.{info.replica_specs_field}.Worker.replicas",
        "statusReplicasPath": ".status.replicaStatuses.Worker.active",
        "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
    }


def test_the_other_kinds_have_no_scale_subresource() -> None:
    others = [info for info in KINDS if info.kind not in SCALED]
    assert all("scale" not in _version(info)["subresources"] for info in others)


@pytest.mark.parametrize("info", KINDS, ids=lambda info: info.kind)
def test_unknown_replica_types_are_refused_by_a_cel_rule(info: KindInfo) -> None:
    schema = _version(info)["schema"]["openAPIV3Schema"]
    specs = schema["properties"]["spec"]["properties"][info.replica_specs_field]
    (rule,) = [r for r in specs["x-kubernetes-validations"] if "must be replica types" in r["message"]]
    listed = rule["rule"].split("[", 1)[1].rstrip("])").split(", ")
    assert sorted(listed) == sorted(f"'{rtype.lower()}'" for rtype in info.replica_types)
    assert specs["maxProperties"] == len(info.replica_types), "bounds the CEL cost estimate"


def test_mpijob_conditions_are_a_list_map_keyed_by_type() -> None:
    (mpi,) = [info for info in KINDS if info.kind == "MPIJob"]
    schema = _version(mpi)["schema"]["openAPIV3Schema"]
    conditions = schema["properties"]["status"]["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert "type" in conditions["items"]["required"]


@pytest.mark.parametrize("info", KINDS, ids=lambda info: info.kind)
def test_files_are_plain_yaml_that_say_how_they_are_generated(info: KindInfo) -> None:
    text = (CRD_DIR / crd_file_name(info)).read_text()
    assert text.startswith("# Generated by `kubetrain crds`")
    events = list(yaml.parse(text, Loader=yaml.SafeLoader))
    assert not [e for e in events if isinstance(e, yaml.AliasEvent) or getattr(e, "anchor", None)], (
        "anchors and aliases trip up some manifest tools"
    )


def test_missing_kubernetes_schemas_give_a_readable_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    podschema._definitions.cache_clear()
    podschema._cached_schema.cache_clear()
    monkeypatch.setattr(podschema, "_SOURCE_PACKAGE", "kubernetes_validate_not_installed")
    try:
        assert main(["crds", "--output-dir", str(tmp_path)]) == 2
    finally:
        podschema._definitions.cache_clear()
        podschema._cached_schema.cache_clear()
    err = capsys.readouterr().err
    assert "kubetrain crds: Kubernetes v1.37.0 schemas not found" in err and "hack/setup.sh" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("info", KINDS, ids=lambda info: info.kind)
def test_every_cel_rule_message_names_its_field(info: KindInfo) -> None:
    rules: list[dict[str, Any]] = []

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            rules.extend(node.get("x-kubernetes-validations", []))
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(_version(info)["schema"]["openAPIV3Schema"])
    assert len(rules) >= 6
    for rule in rules:
        assert rule["message"].startswith(("spec.", "metadata.")), rule


def _own_kind(*rules: ValidationRule) -> KindInfo:
    return replace(JAXJOB, group="example.dev", kind="NapJob", plural="", singular="", operator_name="",
                   controller_name="", managed_by_values=(), label_prefix="", validations=rules)  # fmt: skip


def test_a_kind_of_ones_own_carries_its_cel_rules_where_at_says() -> None:
    on_job = ValidationRule(rule="size(self.metadata.name) <= 20", message="metadata.name: at most 20")
    on_specs = ValidationRule(
        rule="self.all(k, !has(self[k].replicas) || self[k].replicas <= 4)",
        message="spec.jaxReplicaSpecs: at most 4 replicas; lower replicas",
        at="spec.jaxReplicaSpecs",
        field_path=".Worker",
    )
    schema = custom_resource_definition(_own_kind(on_job, on_specs))["spec"]["versions"][0]["schema"]
    root = schema["openAPIV3Schema"]
    specs = root["properties"]["spec"]["properties"]["jaxReplicaSpecs"]
    assert root["x-kubernetes-validations"][-1] == {"rule": on_job.rule, "message": on_job.message}
    assert specs["x-kubernetes-validations"][-1] == {
        "rule": on_specs.rule, "message": on_specs.message, "fieldPath": ".Worker"
    }  # fmt: skip


def test_a_rule_at_no_field_is_refused_naming_the_fix() -> None:
    bad = ValidationRule(rule="true", message="-", at="spec.jaxReplicaSpec")
    with pytest.raises(
        ValueError, match=r"at='spec.jaxReplicaSpec' names no field .* 'spec.jaxReplicaSpecs'"
    ):
        custom_resource_definition(_own_kind(bad))
