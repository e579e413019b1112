"""The shipped kustomizations: each renders, the operator runs locked down, and its rights are the least.

What a cluster admin relies on when applying `manifests/base` (or an overlay): no exec into pods, no
wildcard, no cluster-wide rights in the namespaced install, a hardened pod, and the flags that make each
overlay do what it says. The real API server's view of the same objects is in
tests/integration/test_manifests.py.
"""

from __future__ import annotations

import argparse
import copy
import functools
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api import KINDS
from kubetrain.api.crd import crd_file_name
from kubetrain.cli import build_parser
from kubetrain.cli.operator.options import options_from_args
from kubetrain.common.job.labels import JOB_NAME_LABEL
from kubetrain.testing import binaries

ROOT = Path(__file__).resolve().parents[3]
MANIFESTS = ROOT / "manifests"
OVERLAYS = {
    "base": MANIFESTS / "base",
    "namespaced": MANIFESTS / "overlays" / "namespaced",
    "volcano": MANIFESTS / "overlays" / "volcano",
    "scheduler-plugins": MANIFESTS / "overlays" / "scheduler-plugins",
}

Obj = dict[str, Any]


def kubectl() -> Path:
    path = binaries.testbin_dir() / "kubectl"
    if not path.is_file():
        pytest.fail(f"kubectl is not built at {path}; {binaries.BUILD_HINT}", pytrace=False)
    return path


def render(directory: Path) -> list[Obj]:
    """`kubectl kustomize DIRECTORY`, decoded (a copy: tests may not spoil each other's objects)."""
    return copy.deepcopy(_render(directory))


@functools.cache
def _render(directory: Path) -> list[Obj]:
    # About 2 s a render (three big CRDs), so each directory is rendered once per run.
    result = subprocess.run(
        [str(kubectl()), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"kubectl kustomize {directory} failed:\n{result.stderr}"
    return [doc for doc in yaml.load_all(result.stdout, Loader=yaml.CSafeLoader) if doc]


def of_kind(objects: list[Obj], kind: str) -> list[Obj]:
    return [obj for obj in objects if obj["kind"] == kind]


def one(objects: list[Obj], kind: str, name: str) -> Obj:
    found = [obj for obj in of_kind(objects, kind) if obj["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def rules(objects: list[Obj]) -> Iterator[tuple[str, Obj]]:
    """Every RBAC rule with the Role or ClusterRole holding it."""
    for obj in objects:
        if obj["kind"] in ("Role", "ClusterRole"):
            for rule in obj.get("rules") or []:
                yield f"{obj['kind']} {obj['metadata']['name']}", rule


def operator_container(objects: list[Obj]) -> Obj:
    deployment = one(objects, "Deployment", "kubetrain-operator")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "operator")


@pytest.fixture(scope="module", params=sorted(OVERLAYS))
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[Obj]]:
    return request.param, render(OVERLAYS[request.param])


def test_each_kustomization_renders_the_crds_and_the_operator(rendered: tuple[str, list[Obj]]) -> None:
    _, objects = rendered
    crds = {obj["metadata"]["name"] for obj in of_kind(objects, "CustomResourceDefinition")}
    assert crds == {info.crd_name for info in KINDS}
    for kind in ("Namespace", "ServiceAccount", "Deployment", "Service"):
        assert of_kind(objects, kind), f"no {kind}"


def test_the_crds_are_the_generated_files_unchanged(rendered: tuple[str, list[Obj]]) -> None:
    _, objects = rendered
    for info in KINDS:
        generated = yaml.load((MANIFESTS / "crds" / crd_file_name(info)).read_text(), Loader=yaml.CSafeLoader)
        shipped = one(objects, "CustomResourceDefinition", info.crd_name)
        assert shipped["spec"] == generated["spec"]


def test_no_rule_grants_exec_wildcards_or_rbac_escalation(rendered: tuple[str, list[Obj]]) -> None:
    _, objects = rendered
    for holder, rule in rules(objects):
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule.get(field, []), f"{holder} has a wildcard in {field}: {rule}"
        resources = set(rule.get("resources", []))
        assert not resources & {"pods/exec", "pods/attach", "pods/portforward", "nodes/proxy"}, holder
        assert not resources & {"serviceaccounts", "roles", "rolebindings", "clusterroles"}, holder
        assert not resources & {"clusterrolebindings", "serviceaccounts/token"}, holder
        assert not set(rule.get("verbs", [])) & {"escalate", "bind", "impersonate"}, holder


def _operator_rules(objects: list[Obj]) -> list[Obj]:
    bound = {
        binding["roleRef"]["name"]
        for binding in objects
        if binding["kind"] in ("RoleBinding", "ClusterRoleBinding")
        and any(
            s["kind"] == "ServiceAccount" and s["name"] == "kubetrain-operator" for s in binding["subjects"]
        )
    }
    return [rule for holder, rule in rules(objects) if holder.split()[1] in bound]


def test_the_operator_may_not_rewrite_secrets_or_pods(rendered: tuple[str, list[Obj]]) -> None:
    # MPI SSH keys are generated once; pods are created and deleted, never edited by the operator.
    _, objects = rendered
    for rule in _operator_rules(objects):
        if {"secrets", "pods"} & set(rule["resources"]):
            assert not {"update", "patch"} & set(rule["verbs"]), rule


@pytest.mark.parametrize("overlay", ["base", "namespaced"])
def test_the_operator_cannot_read_any_secret(overlay: str) -> None:
    # MPI SSH keys are created blind (create only); no rule lets the operator read anyone's credentials.
    granted = [
        rule
        for rule in _operator_rules(render(OVERLAYS[overlay]))
        if {"secrets", "*"} & set(rule["resources"]) and set(rule.get("apiGroups") or ()) & {"", "*"}
    ]
    assert granted, "the operator still creates the MPI SSH Secrets"
    for rule in granted:
        assert set(rule["verbs"]) == {"create"}, f"{overlay} grants {rule['verbs']} on Secrets"


def test_leases_are_granted_only_in_the_operators_namespace(rendered: tuple[str, list[Obj]]) -> None:
    _, objects = rendered
    for holder, rule in rules(objects):
        if "leases" in rule.get("resources", ()):
            assert holder.startswith("Role "), f"{holder} grants leases cluster-wide"
    role = one(objects, "Role", "kubetrain-operator-leader-election")
    deployment = one(objects, "Deployment", "kubetrain-operator")
    assert role["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    named = [r for r in role["rules"] if "update" in r["verbs"]]
    assert named and all(r.get("resourceNames") == ["kubetrain-operator"] for r in named)
    assert "--leader-election-id=kubetrain-operator" in operator_container(objects)["args"]


def test_the_operator_pod_is_hardened(rendered: tuple[str, list[Obj]]) -> None:
    _, objects = rendered
    pod = one(objects, "Deployment", "kubetrain-operator")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "kubetrain-operator"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    context = operator_container(objects)["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"]
    assert "add" not in context["capabilities"]
    assert context.get("privileged", False) is False


def test_the_operator_has_probes_resources_and_leader_election(rendered: tuple[str, list[Obj]]) -> None:
    _, objects = rendered
    container = operator_container(objects)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert f"--health-probe-bind-address=:{ports['health']}" in container["args"]
    assert f"--metrics-bind-address=:{ports['metrics']}" in container["args"]
    for bound in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][bound]), bound
    assert container["args"][0] == "operator"
    assert "--leader-elect=true" in container["args"]
    service = one(objects, "Service", "kubetrain-operator-metrics")
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"


def test_the_namespaced_install_has_no_cluster_wide_rights() -> None:
    objects = render(OVERLAYS["namespaced"])
    assert not of_kind(objects, "ClusterRoleBinding")
    assert not of_kind(objects, "ClusterRole")
    deployment = one(objects, "Deployment", "kubetrain-operator")
    assert "--namespace=$(POD_NAMESPACE)" in operator_container(objects)["args"]
    namespace = deployment["metadata"]["namespace"]
    for obj in objects:
        if obj["kind"] not in ("CustomResourceDefinition", "Namespace"):
            assert obj["metadata"]["namespace"] == namespace, obj["metadata"]["name"]


def _rule_set(rule_list: list[Obj]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rule_list
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_namespaced_role_grants_what_the_cluster_role_grants() -> None:
    cluster = one(render(OVERLAYS["base"]), "ClusterRole", "kubetrain-operator")
    role = one(render(OVERLAYS["namespaced"]), "Role", "kubetrain-operator")
    assert _rule_set(role["rules"]) == _rule_set(cluster["rules"])


def test_the_namespaced_install_follows_a_users_namespace(tmp_path: Path) -> None:
    overlay = os.path.relpath(OVERLAYS["namespaced"], tmp_path)
    (tmp_path / "kustomization.yaml").write_text(f"namespace: team-a\nresources:\n- {overlay}\n")
    objects = render(tmp_path)
    assert one(objects, "Namespace", "team-a")
    for obj in objects:
        if obj["kind"] not in ("CustomResourceDefinition", "Namespace"):
            assert obj["metadata"]["namespace"] == "team-a", obj["metadata"]["name"]
        for subject in obj.get("subjects", []):
            assert subject["namespace"] == "team-a"


@pytest.mark.parametrize(
    ("overlay", "group", "scheduler"),
    [
        ("volcano", "scheduling.volcano.sh", "volcano"),
        ("scheduler-plugins", "scheduling.x-k8s.io", "scheduler-plugins-scheduler"),
    ],
)
def test_gang_overlays_pass_the_scheduler_and_grant_its_podgroups(
    overlay: str, group: str, scheduler: str
) -> None:
    objects = render(OVERLAYS[overlay])
    assert f"--gang-scheduler-name={scheduler}" in operator_container(objects)["args"]
    granted = _rule_set(_operator_rules(objects))
    assert {(group, "podgroups", verb) for verb in ("create", "get", "list", "watch", "delete")} <= granted


def test_the_default_install_grants_no_podgroups() -> None:
    objects = render(OVERLAYS["base"])
    assert not [rule for _, rule in rules(objects) if "podgroups" in rule.get("resources", ())]
    assert not [a for a in operator_container(objects)["args"] if a.startswith("--gang-scheduler-name")]


def test_users_with_edit_may_manage_jobs_and_viewers_may_read_them() -> None:
    objects = render(OVERLAYS["base"])
    edit = one(objects, "ClusterRole", "kubetrain-edit")
    view = one(objects, "ClusterRole", "kubetrain-view")
    assert edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    plurals = {info.plural for info in KINDS}
    assert {(("kubeflow.org"), p, "create") for p in plurals} <= _rule_set(edit["rules"])
    assert not {v for _, _, v in _rule_set(view["rules"])} - {"get", "list", "watch"}


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    return {
        name
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name in action.choices
    }


EXPECTED_SETTINGS = {
    # overlay: (namespaces served, gang scheduler)
    "base": (None, ""),
    "namespaced": (("kubetrain-system",), ""),
    "volcano": (None, "volcano"),
    "scheduler-plugins": (None, "scheduler-plugins-scheduler"),
}


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_the_deployment_flags_mean_what_the_overlay_says(overlay: str) -> None:
    parser = build_parser()
    assert "operator" in _commands(parser), "`kubetrain operator` is not in kubetrain.cli.COMMAND_MODULES"
    container = operator_container(render(OVERLAYS[overlay]))
    # The kubelet expands $(POD_NAMESPACE) from the downward-API env var the Deployment declares.
    assert {
        "name": "POD_NAMESPACE",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
    } in container["env"]
    args = [arg.replace("$(POD_NAMESPACE)", "kubetrain-system") for arg in container["args"]]
    options = options_from_args(parser.parse_args(args), environ={"POD_NAMESPACE": "kubetrain-system"})
    assert (options.namespaces, options.settings.gang_scheduler) == EXPECTED_SETTINGS[overlay]
    assert options.leader_election is not None
    assert (options.leader_election.namespace, options.leader_election.name) == (
        "kubetrain-system",
        "kubetrain-operator",
    )
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert options.health_address == ("", ports["health"])
    assert options.metrics_address == ("", ports["metrics"])
    objects = render(OVERLAYS[overlay])
    if overlay == "namespaced":  # its TokenReviews would need a cluster-wide right
        assert options.progress is None and not of_kind(objects, "ClusterRole")
        return
    assert options.progress is not None
    assert options.progress.address == ("", ports["progress"])
    service = one(objects, "Service", "kubetrain-operator")
    assert service["spec"]["ports"][0]["targetPort"] == "progress"
    assert (
        options.progress.url
        == f"https://kubetrain-operator.kubetrain-system.svc:{service['spec']['ports'][0]['port']}"
    )
    progress = one(objects, "ClusterRole", "kubetrain-operator-progress")
    assert _rule_set(progress["rules"]) == {("authentication.k8s.io", "tokenreviews", "create")}


def test_scrapes_of_metrics_are_checked_where_the_install_may_and_readers_have_a_role() -> None:
    base = render(OVERLAYS["base"])
    granted = {
        (rule["apiGroups"][0], rule["resources"][0]) for _, rule in rules(base) if "create" in rule["verbs"]
    }
    assert {
        ("authentication.k8s.io", "tokenreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
    } <= granted
    reader = one(base, "ClusterRole", "kubetrain-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert "--metrics-secure=false" not in operator_container(base)["args"]
    namespaced = render(OVERLAYS["namespaced"])
    assert "--metrics-secure=false" in operator_container(namespaced)["args"], "no TokenReview rights there"


def test_the_network_policy_lets_only_scrapers_and_training_pods_reach_the_operator(
    rendered: tuple[str, list[Obj]],
) -> None:
    """Issue 35: no NetworkPolicy was shipped, so anyone on the pod network reached every port. The probe
    port gets no rule (NetworkPolicy never blocks the node's own kubelet); metrics come from the monitoring
    namespace or one labelled for it; progress from pods that carry a job's name label, in any namespace."""
    _, objects = rendered
    policy = one(objects, "NetworkPolicy", "kubetrain-operator")["spec"]
    template = one(objects, "Deployment", "kubetrain-operator")["spec"]["template"]
    assert policy["podSelector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    assert policy["policyTypes"] == ["Ingress"], "the operator's own calls to the API server stay open"
    ports = {p["name"] for p in operator_container(objects)["ports"]}
    by_port = {port["port"]: rule["from"] for rule in policy["ingress"] for port in rule["ports"]}
    assert set(by_port) == ports - {"health"}
    scrapers = [peer["namespaceSelector"]["matchLabels"] for peer in by_port["metrics"]]
    assert scrapers == [
        {"kubernetes.io/metadata.name": "monitoring"},
        {"kubetrain.io/metrics-scraper": "true"},
    ]
    assert all(set(peer) == {"namespaceSelector"} for peer in by_port["metrics"])
    (pods,) = by_port["progress"]
    assert pods["namespaceSelector"] == {}
    assert pods["podSelector"]["matchExpressions"] == [{"key": JOB_NAME_LABEL, "operator": "Exists"}]
