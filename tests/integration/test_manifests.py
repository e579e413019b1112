"""The shipped manifests applied to a real API server: the operator's ServiceAccount may do exactly its job.

`kubectl auth can-i` asks the real RBAC authorizer, so these tests pin what the YAML-level unit tests
cannot: that the rules, bindings and namespaces kustomize produces add up to the intended rights (and no
more), that the operator's pod passes the `restricted` Pod Security level its namespace enforces, and
that the aggregated roles give namespace users the jobs. The operator itself does not run here (the test
plane has no Deployment controller); running it under these rights is the e2e tier's job.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.testing.controlplane import ControlPlane

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
SYSTEM = "kubetrain-system"
OPERATOR = f"system:serviceaccount:{SYSTEM}:kubetrain-operator"

Obj = dict[str, Any]


def render(plane: ControlPlane, directory: Path) -> list[Obj]:
    """The kustomization without its CRDs (other tests own those; they are the same files)."""
    out = plane.kubectl("kustomize", str(directory)).stdout
    docs = [d for d in yaml.load_all(out, Loader=yaml.CSafeLoader) if d]
    return [d for d in docs if d["kind"] != "CustomResourceDefinition"]


def apply(plane: ControlPlane, objects: list[Obj]) -> None:
    text = "\n---\n".join(json.dumps(obj) for obj in objects)
    plane.kubectl("apply", "--server-side", "--field-manager=kubetrain-test", "-f", "-", input=text)


def remove(plane: ControlPlane, objects: list[Obj]) -> None:
    text = "\n---\n".join(json.dumps(obj) for obj in objects if obj["kind"] != "Namespace")
    plane.kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", input=text)


def can(plane: ControlPlane, user: str, request: str) -> bool:
    """Ask the API server's authorizer (a SubjectAccessReview: no discovery, so uninstalled CRDs count too).

    `request` reads `VERB RESOURCE[.GROUP][/SUBRESOURCE] [named NAME] [in NAMESPACE]`, or `VERB /PATH` for
    a URL that is not a resource.
    """
    verb, target, *rest = request.split()
    words = dict(zip(rest[::2], rest[1::2], strict=True))
    resource, _, subresource = target.partition("/")
    plural, _, group = resource.partition(".")
    attributes = {"verb": verb, "group": group, "resource": plural, "subresource": subresource}
    attributes |= {"name": words.get("named", ""), "namespace": words.get("in", "")}
    groups = ["system:authenticated"]
    if user.startswith("system:serviceaccount:"):
        groups += ["system:serviceaccounts", f"system:serviceaccounts:{user.split(':')[2]}"]
    asked: dict[str, Any] = {"resourceAttributes": attributes}
    if target.startswith("/"):
        asked = {"nonResourceAttributes": {"verb": verb, "path": target}}
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": groups, **asked},
    }
    answer = plane.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(review)).stdout
    return bool(json.loads(answer)["status"].get("allowed"))


@pytest.fixture(scope="module")
def base(control_plane: ControlPlane) -> Iterator[list[Obj]]:
    objects = render(control_plane, MANIFESTS / "base")
    apply(control_plane, objects)
    yield objects
    remove(control_plane, objects)


ALLOWED = [
    "list tfjobs.kubeflow.org",
    "watch mpijobs.kubeflow.org",
    "patch pytorchjobs.kubeflow.org/status in team-x",
    "patch tfjobs.kubeflow.org in team-x",
    "delete tfjobs.kubeflow.org in team-x",
    "update mpijobs.kubeflow.org/finalizers in team-x",
    "watch pods",
    "create pods in team-x",
    "delete pods in team-x",
    "create services in team-x",
    "create secrets in team-x",
    "patch configmaps in team-x",
    "get configmaps in team-x",  # the progress CA bundle, read before it is patched
    "watch configmaps",  # the progress CA copies, written again when changed or deleted
    "get /.well-known/openid-configuration",  # the progress endpoint verifies pods' tokens with the
    "get /openid/v1/jwks",  # service-account issuer's keys
    "create tokenreviews.authentication.k8s.io",  # ... and reviews the few those keys cannot settle
    "patch events in team-x",
    "create horizontalpodautoscalers.autoscaling in team-x",
    f"create leases.coordination.k8s.io in {SYSTEM}",
    f"update leases.coordination.k8s.io named kubetrain-operator in {SYSTEM}",
    # Kueue (docs/ecosystem.md): the Workloads it makes and drives, what it reads to place and rank them
    "create workloads.kueue.x-k8s.io in team-x",
    "watch workloads.kueue.x-k8s.io",
    "patch workloads.kueue.x-k8s.io in team-x",
    "patch workloads.kueue.x-k8s.io/status in team-x",
    "get resourceflavors.kueue.x-k8s.io",
    "list resourceflavors.kueue.x-k8s.io",
    "get workloadpriorityclasses.kueue.x-k8s.io",
    "list priorityclasses.scheduling.k8s.io",
    "get configmaps named kueue-manager-config in kueue-system",
    "list nodes",  # --gang-restart=auto: does a kubelet declare RestartAllContainersOnContainerExits?
]
DENIED = [
    "create pods/exec in team-x",
    "create pods/attach in team-x",
    "patch pods in team-x",
    "update secrets in team-x",
    "patch secrets in team-x",
    "get secrets in team-x",
    "list secrets",
    "watch secrets",
    "delete secrets in team-x",
    "create serviceaccounts in team-x",
    "create serviceaccounts/token in team-x",
    "create roles.rbac.authorization.k8s.io in team-x",
    "create tfjobs.kubeflow.org in team-x",
    "update tfjobs.kubeflow.org in team-x",
    "update tfjobs.kubeflow.org/status in team-x",
    "create leases.coordination.k8s.io in team-x",
    f"update leases.coordination.k8s.io named someone-elses in {SYSTEM}",
    "watch nodes",  # read once in a while, never cached
    "get nodes",
    "patch nodes",
    "create jobs.batch in team-x",  # the MPIJob launcher is a Pod, not a batch Job
    "create podgroups.scheduling.volcano.sh in team-x",
    "delete workloads.kueue.x-k8s.io in team-x",  # the garbage collector deletes a Workload with its job
    "update workloads.kueue.x-k8s.io/status in team-x",
    "create resourceflavors.kueue.x-k8s.io",
    "patch workloadpriorityclasses.kueue.x-k8s.io",
    "watch resourceflavors.kueue.x-k8s.io",
    "create localqueues.kueue.x-k8s.io in team-x",
    "create podgroups.scheduling.x-k8s.io in team-x",
]


@pytest.mark.parametrize("request_", ALLOWED, ids=str)
def test_the_operator_may_do_its_job(control_plane: ControlPlane, base: list[Obj], request_: str) -> None:
    assert can(control_plane, OPERATOR, request_)


@pytest.mark.parametrize("request_", DENIED, ids=str)
def test_the_operator_may_do_nothing_else(
    control_plane: ControlPlane, base: list[Obj], request_: str
) -> None:
    assert not can(control_plane, OPERATOR, request_)


def _pod_from_deployment(objects: list[Obj], name: str) -> Obj:
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    template = deployment["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**template["metadata"], "name": name},
        "spec": template["spec"],
    }


def test_the_operator_pod_passes_the_restricted_pod_security_level(
    control_plane: ControlPlane, base: list[Obj]
) -> None:
    pod = _pod_from_deployment(base, "operator-psa-check")
    accepted = control_plane.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(pod), namespace=SYSTEM, check=False
    )
    assert accepted.returncode == 0, accepted.stderr
    pod["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = (
        True  # proves PSA is enforcing
    )
    refused = control_plane.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(pod), namespace=SYSTEM, check=False
    )
    assert refused.returncode != 0 and "violates PodSecurity" in refused.stderr


def test_namespace_users_get_the_jobs_through_the_built_in_roles(
    control_plane: ControlPlane, base: list[Obj], namespace: str
) -> None:
    for user, role in (("alice", "edit"), ("bob", "view")):
        control_plane.kubectl(
            "create", "rolebinding", user, f"--clusterrole={role}", f"--user={user}", namespace=namespace
        )
    deadline = time.monotonic() + 30  # the aggregation controller fills `edit` and `view` asynchronously
    while not can(control_plane, "alice", f"create pytorchjobs.kubeflow.org in {namespace}"):
        assert time.monotonic() < deadline, "kubetrain-edit was not aggregated into edit"
        time.sleep(0.5)
    assert can(control_plane, "alice", f"delete mpijobs.kubeflow.org in {namespace}")
    assert can(control_plane, "bob", f"list tfjobs.kubeflow.org in {namespace}")
    assert not can(control_plane, "bob", f"create tfjobs.kubeflow.org in {namespace}")
    assert not can(control_plane, "alice", "create tfjobs.kubeflow.org in default")


def test_the_namespaced_install_confines_the_operator_to_its_namespace(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    overlay = os.path.relpath(MANIFESTS / "overlays" / "namespaced", tmp_path)
    (tmp_path / "kustomization.yaml").write_text(f"namespace: {namespace}\nresources:\n- {overlay}\n")
    objects = render(control_plane, tmp_path)
    apply(control_plane, objects)
    try:
        operator = f"system:serviceaccount:{namespace}:kubetrain-operator"
        lease = "leases.coordination.k8s.io named kubetrain-operator"
        assert can(control_plane, operator, f"create pods in {namespace}")
        assert can(control_plane, operator, f"watch tfjobs.kubeflow.org in {namespace}")
        assert can(control_plane, operator, f"update {lease} in {namespace}")
        assert not can(control_plane, operator, "create pods in default")
        assert not can(control_plane, operator, "list tfjobs.kubeflow.org")
        assert not can(control_plane, operator, "get secrets in default")
    finally:
        remove(control_plane, objects)


def test_the_volcano_overlay_adds_only_podgroups(control_plane: ControlPlane, base: list[Obj]) -> None:
    names = {(o["kind"], o["metadata"]["name"]) for o in base}
    extra = [
        o
        for o in render(control_plane, MANIFESTS / "overlays" / "volcano")
        if (o["kind"], o["metadata"]["name"]) not in names
    ]
    assert {o["kind"] for o in extra} == {"ClusterRole", "ClusterRoleBinding"}
    apply(control_plane, extra)
    try:
        assert can(control_plane, OPERATOR, "create podgroups.scheduling.volcano.sh in team-x")
        assert can(control_plane, OPERATOR, "watch podgroups.scheduling.volcano.sh")
        assert not can(control_plane, OPERATOR, "create queues.scheduling.volcano.sh in team-x")
        assert not can(control_plane, OPERATOR, "create podgroups.scheduling.x-k8s.io in team-x")
    finally:
        remove(control_plane, extra)


@pytest.mark.parametrize("overlay", ["base", "overlays/namespaced", "overlays/volcano"])
def test_the_network_policy_is_valid_and_stored_as_shipped(
    control_plane: ControlPlane, base: list[Obj], overlay: str
) -> None:
    """The API server validates the shipped NetworkPolicy (named ports, selectors) and keeps it as written:
    a server-side dry run of each install's policy, and the base's policy read back."""
    (policy,) = [o for o in render(control_plane, MANIFESTS / overlay) if o["kind"] == "NetworkPolicy"]
    policy["metadata"]["namespace"] = SYSTEM  # the overlays' own namespaces do not exist here
    text = json.dumps(policy)
    control_plane.kubectl(
        "apply", "--dry-run=server", "--server-side", "--field-manager=kubetrain-test", "-f", "-", input=text
    )
    stored = json.loads(
        control_plane.kubectl("get", "networkpolicy", "kubetrain-operator", "-n", SYSTEM, "-o", "json").stdout
    )
    (shipped,) = [o for o in base if o["kind"] == "NetworkPolicy"]
    assert stored["spec"] == shipped["spec"]
