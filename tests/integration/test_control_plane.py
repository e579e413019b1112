"""The test control plane is a real Kubernetes: CRDs install and validate, RBAC decides, the garbage
collector cascades, the scheduler places pods on kwok nodes by their capacity, and kwok plays the kubelet
(Running, then Failed with the exit code a test chose)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from kubetrain.testing import ControlPlane, Outcome
from kubetrain.testing.kwok import ANNOTATION_OUTCOME, ANNOTATION_RUN_FOR, DEFAULT_NODES, GPU_RESOURCE

pytestmark = pytest.mark.integration

GROUP = "cp-test.kubetrain.dev"
CRD_NAME = f"widgets.{GROUP}"
CRD_YAML = f"""\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {CRD_NAME}
spec:
  group: {GROUP}
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {{type: integer, minimum: 1}}
              color: {{type: string, enum: [red, blue]}}
"""


def widget(name: str, spec: dict[str, Any]) -> str:
    return json.dumps(
        {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}
    )


def pod(name: str, *, gpus: int = 0, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    limits = {GPU_RESOURCE: str(gpus)} if gpus else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "trainer",
                    "image": "example.invalid/trainer:1",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": limits},
                }
            ],
        },
    }


def get_json(plane: ControlPlane, *args: str, namespace: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(plane.kubectl("get", *args, "-o", "json", namespace=namespace).stdout)
    return result


def eventually(what: str, check: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def widget_crd(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("crd") / "widget-crd.yaml"
    path.write_text(CRD_YAML)
    control_plane.kubectl("apply", "-f", str(path))
    control_plane.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s")
    return CRD_NAME


def test_crd_installs_with_kubectl_apply(control_plane: ControlPlane, namespace: str, tmp_path: Path) -> None:
    path = tmp_path / "crd.yaml"
    path.write_text(CRD_YAML)
    applied = control_plane.kubectl("apply", "-f", str(path))
    assert CRD_NAME in applied.stdout
    control_plane.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s")

    control_plane.kubectl(
        "apply", "-f", "-", input=widget("good", {"size": 3, "color": "red"}), namespace=namespace
    )
    stored = get_json(control_plane, "widget", "good", namespace=namespace)
    assert stored["spec"] == {"size": 3, "color": "red"}
    assert stored["metadata"]["uid"]


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ({"size": "big"}, "spec.size", "must be of type integer"),
        ({"size": 0}, "spec.size", "should be greater than or equal to 1"),
        ({"size": 2, "color": "green"}, "spec.color", "Unsupported value"),
        ({"color": "red"}, "spec.size", "Required value"),
    ],
)
def test_malformed_custom_object_is_rejected_naming_the_field(
    control_plane: ControlPlane,
    widget_crd: str,
    namespace: str,
    spec: dict[str, Any],
    field: str,
    message: str,
) -> None:
    result = control_plane.kubectl(
        "apply", "-f", "-", input=widget("bad", spec), namespace=namespace, check=False
    )
    assert result.returncode != 0
    assert "is invalid" in result.stderr
    assert field in result.stderr
    assert message in result.stderr
    missing = control_plane.kubectl("get", "widget", "bad", namespace=namespace, check=False)
    assert "NotFound" in missing.stderr


def test_rbac_denies_an_unbound_service_account_and_allows_it_once_bound(
    control_plane: ControlPlane, namespace: str
) -> None:
    sa = control_plane.kubeconfig_for_service_account(namespace, "reader")
    denied = control_plane.kubectl("get", "configmaps", namespace=namespace, kubeconfig=sa, check=False)
    assert denied.returncode != 0
    assert "Forbidden" in denied.stderr
    assert f"system:serviceaccount:{namespace}:reader" in denied.stderr

    control_plane.kubectl(
        "create", "role", "cm-reader", "--verb=get,list", "--resource=configmaps", namespace=namespace
    )
    control_plane.kubectl(
        "create", "rolebinding", "reader", "--role=cm-reader", f"--serviceaccount={namespace}:reader",
        namespace=namespace,
    )  # fmt: skip

    def allowed() -> bool:
        return (
            control_plane.kubectl(
                "get", "configmaps", namespace=namespace, kubeconfig=sa, check=False
            ).returncode
            == 0
        )

    eventually("the RoleBinding to take effect", allowed, timeout=30.0)
    # The binding grants exactly what the Role says, nothing more.
    secrets = control_plane.kubectl("get", "secrets", namespace=namespace, kubeconfig=sa, check=False)
    assert secrets.returncode != 0
    assert "Forbidden" in secrets.stderr


def test_deleting_an_owner_garbage_collects_its_dependents(
    control_plane: ControlPlane, namespace: str
) -> None:
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}, "data": {"k": "v"}}
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(owner), namespace=namespace)
    uid = get_json(control_plane, "configmap", "owner", namespace=namespace)["metadata"]["uid"]
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}
    child = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "child", "ownerReferences": [ref]}}
    worker = pod("worker")
    worker["metadata"]["ownerReferences"] = [ref]
    for obj in (child, worker):
        control_plane.kubectl("apply", "-f", "-", input=json.dumps(obj), namespace=namespace)
    control_plane.wait_for_pod_phase(namespace, "worker", "Running")

    control_plane.kubectl("delete", "configmap", "owner", namespace=namespace)

    def gone(kind: str, name: str) -> bool:
        result = control_plane.kubectl("get", kind, name, namespace=namespace, check=False)
        return result.returncode != 0 and "NotFound" in result.stderr

    eventually("the dependent ConfigMap to be collected", lambda: gone("configmap", "child"))
    # A bound pod is deleted gracefully; kwok (as the kubelet) confirms, so the object really goes away.
    eventually("the dependent Pod to be collected", lambda: gone("pod", "worker"))


def test_pod_runs_on_a_kwok_node_and_fails_with_exit_code_137(
    control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(pod("trainer-0", gpus=1)), namespace=namespace)

    running = control_plane.wait_for_pod_phase(namespace, "trainer-0", "Running")
    assert running["spec"]["nodeName"] in {node.name for node in DEFAULT_NODES}
    assert running["status"]["podIP"]
    assert "running" in running["status"]["containerStatuses"][0]["state"]

    control_plane.finish_pod(namespace, "trainer-0", Outcome.FAILED, exit_code=137)

    failed = control_plane.wait_for_pod_phase(namespace, "trainer-0", "Failed")
    state = failed["status"]["containerStatuses"][0]["state"]
    assert state["terminated"]["exitCode"] == 137
    assert "running" not in state
    exit_code = control_plane.kubectl(
        "get", "pod", "trainer-0", "-o", "jsonpath={.status.containerStatuses[0].state.terminated.exitCode}",
        namespace=namespace,
    )  # fmt: skip
    assert exit_code.stdout == "137"


def test_pod_finishes_by_itself_after_run_for(control_plane: ControlPlane, namespace: str) -> None:
    annotations = {ANNOTATION_OUTCOME: "Succeeded", ANNOTATION_RUN_FOR: "2s"}
    control_plane.kubectl(
        "apply", "-f", "-", input=json.dumps(pod("short", annotations=annotations)), namespace=namespace
    )

    control_plane.wait_for_pod_phase(namespace, "short", "Running")
    done = control_plane.wait_for_pod_phase(namespace, "short", "Succeeded", timeout=30.0)
    assert done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


def test_scheduler_respects_gpu_capacity_of_fake_nodes(control_plane: ControlPlane, namespace: str) -> None:
    too_big = max(int(node.gpus) for node in DEFAULT_NODES) + 1
    control_plane.kubectl(
        "apply", "-f", "-", input=json.dumps(pod("greedy", gpus=too_big)), namespace=namespace
    )

    def unschedulable() -> bool:
        conditions = get_json(control_plane, "pod", "greedy", namespace=namespace)["status"].get(
            "conditions", []
        )
        return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions)

    eventually("the scheduler to report the pod Unschedulable", unschedulable, timeout=30.0)
    placed = get_json(control_plane, "pod", "greedy", namespace=namespace)
    assert "nodeName" not in placed["spec"]
    assert placed["status"]["phase"] == "Pending"


HOLD = "sim.kubetrain.dev/hold"
"""A finalizer of the test's own: it keeps a deleted pod in sight, so what kwok does with it can be read."""


def kwok_deleted(plane: ControlPlane, namespace: str, name: str) -> bool:
    """kwok's log says it sent a DELETE for the pod `namespace/name` (by name: kwok sends no UID)."""
    lines = plane.logs()["kwok"].read_text(errors="replace").splitlines()
    return any("Delete pod" in line and f"{namespace}/{name}" in line for line in lines)


def test_kwok_completes_a_graceful_deletion_but_never_deletes_what_the_api_server_removes_itself(
    control_plane: ControlPlane, namespace: str
) -> None:
    """kwok deletes by name, with no UID precondition. A DELETE of a pod that the API server removes itself
    (grace period 0: here a Failed pod) can arrive after that pod is gone and remove its same-named
    replacement: the operator saw that replacement vanish while running and counted a restart that never
    happened (the PaddleJob eviction test's flake: `Created pod: low-worker-0` twice, 90 ms apart).
    A finalizer holds the Failed pod here, so kwok's answer to its deletion can be read in kwok's log."""
    plane = control_plane
    graceful = pod("graceful")
    plane.kubectl("apply", "-f", "-", input=json.dumps(graceful), namespace=namespace)
    plane.wait_for_pod_phase(namespace, "graceful", "Running")
    plane.kubectl("delete", "pod", "graceful", "--wait=false", namespace=namespace)  # a 30 s grace period
    ended = "kwok, playing the kubelet, ends the grace period"
    eventually(ended, lambda: kwok_deleted(plane, namespace, "graceful"))

    held = pod("held")
    held["metadata"]["finalizers"] = [HOLD]
    plane.kubectl("apply", "-f", "-", input=json.dumps(held), namespace=namespace)
    plane.wait_for_pod_phase(namespace, "held", "Running")
    plane.finish_pod(namespace, "held", Outcome.FAILED, exit_code=137)
    plane.wait_for_pod_phase(namespace, "held", "Failed")
    plane.kubectl("delete", "pod", "held", "--wait=false", namespace=namespace)
    deleting = get_json(plane, "pod", "held", namespace=namespace)["metadata"]
    assert deleting["deletionGracePeriodSeconds"] == 0, "the API server removes a Failed pod at once"
    # kwok reads pod events in order: once it has run (and finished) a pod created after that deletion, it
    # has looked at the deleted pod too.
    plane.kubectl("apply", "-f", "-", input=json.dumps(pod("later")), namespace=namespace)
    plane.wait_for_pod_phase(namespace, "later", "Running")
    plane.finish_pod(namespace, "later", Outcome.SUCCEEDED)
    plane.wait_for_pod_phase(namespace, "later", "Succeeded")
    try:
        assert not kwok_deleted(plane, namespace, "held"), "kwok sent a DELETE by name for a pod going away"
    finally:
        patch = json.dumps({"metadata": {"finalizers": None}})
        plane.kubectl("patch", "pod", "held", "--type=merge", "-p", patch, namespace=namespace)
