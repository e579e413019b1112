"""Jobs rewritten by a Go webhook are accepted: the CRDs take the `null`s that Go's encoding/json writes.

Kueue's mutating webhook (like any Go webhook or client) decodes a job into Go structs and encodes it back:
every pod template gains `metadata.creationTimestamp: null`, a gRPC probe without a service gains
`service: null`, a condition without an update time gains `lastUpdateTime: null`. The API server drops such
nulls while decoding a request, but not those a webhook's patch puts back, so only a real webhook shows
whether the CRD schema accepts them (before `nullable`, every create was rejected with
`creationTimestamp: Invalid value: "null"`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from kubetrain.api import KINDS, KindInfo
from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.webhook import MutatingWebhook, mutating_webhook, wait_until_called

pytestmark = pytest.mark.integration


def _go_pod_template(template: dict[str, Any]) -> None:
    """What encoding/json writes for a core/v1 PodTemplateSpec whose optional pointers are unset."""
    template.setdefault("metadata", {})["creationTimestamp"] = None
    for container in template["spec"]["containers"]:
        container.setdefault("resources", {})  # a struct: never omitted
        probe = container.get("livenessProbe", {}).get("grpc")
        if probe is not None and "service" not in probe:
            probe["service"] = None  # *string without omitempty
    for volume in template["spec"].get("volumes", []):
        claim = volume.get("ephemeral", {}).get("volumeClaimTemplate")
        if claim is None:
            continue
        claim.setdefault("metadata", {})["creationTimestamp"] = None
        source = claim["spec"].get("dataSource")
        if source is not None and "apiGroup" not in source:
            source["apiGroup"] = None  # *string without omitempty


def _go_round_trip(job: dict[str, Any], info: KindInfo) -> dict[str, Any]:
    """The job as a Go webhook using the Kubeflow types writes it back."""
    out = copy.deepcopy(job)
    out["metadata"]["creationTimestamp"] = None
    out["spec"].setdefault("runPolicy", {})  # a struct in the Go types
    for spec in out["spec"][info.replica_specs_field].values():
        _go_pod_template(spec["template"])
    for condition in out.get("status", {}).get("conditions", []):
        condition.setdefault("lastUpdateTime", None)  # metav1.Time: `omitempty` does not omit a struct
        condition.setdefault("lastTransitionTime", None)
    out.setdefault("status", {})
    return out


def _patch(request: dict[str, Any]) -> list[dict[str, Any]]:
    """A JSONPatch that replaces every top-level part of the object with its Go round trip."""
    job = request["object"]
    info = next(info for info in KINDS if info.kind == job["kind"])
    rewritten = _go_round_trip(job, info)
    return [
        {"op": "add", "path": f"/{key}", "value": rewritten[key]} for key in ("metadata", "spec", "status")
    ]


def _job(info: KindInfo, name: str) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "busybox:1.36",
        "livenessProbe": {"grpc": {"port": 9000}},
    }
    volume = {
        "name": "scratch",
        "ephemeral": {
            "volumeClaimTemplate": {
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                    "dataSource": {"kind": "PersistentVolumeClaim", "name": "seed"},
                }
            }
        },
    }
    template = {"spec": {"containers": [container], "volumes": [volume]}}
    replicas = {
        rtype: {"replicas": 1, "template": copy.deepcopy(template)} for rtype in info.replica_types[:2]
    }
    return {
        "apiVersion": info.api_version,
        "kind": info.kind,
        "metadata": {"name": name},
        "spec": {info.replica_specs_field: replicas},
    }


@pytest.fixture(scope="module")
def go_webhook(
    crds: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[MutatingWebhook, str]]:
    """A namespace whose job creates and status updates pass through a Go-style round-trip webhook."""
    namespace = crds.create_namespace("go-nulls-")
    resources = [info.plural for info in KINDS] + [f"{info.plural}/status" for info in KINDS]
    rules = [
        {
            "apiGroups": ["kubeflow.org"],
            "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE"],
            "resources": resources,
        }
    ]
    workdir = tmp_path_factory.mktemp("webhook-pki")
    try:
        with mutating_webhook(
            crds, namespace, rules, _patch, workdir=workdir, name="kubetrain-go-nulls"
        ) as hook:
            probe = json.dumps(_job(KINDS[0], "probe"))
            wait_until_called(
                hook,
                lambda: crds.kubectl(
                    "create", "--dry-run=server", "-f", "-", namespace=namespace, input=probe, check=False
                ),
            )
            yield hook, namespace
    finally:
        crds.delete_namespace(namespace)


def _create(plane: ControlPlane, namespace: str, job: dict[str, Any]) -> tuple[int, str]:
    result = plane.kubectl("create", "-f", "-", namespace=namespace, input=json.dumps(job), check=False)
    return result.returncode, result.stdout + result.stderr


def _get(plane: ControlPlane, namespace: str, info: KindInfo, name: str) -> dict[str, Any]:
    out = plane.kubectl("get", f"{info.plural}.{info.group}", name, "-o", "json", namespace=namespace).stdout
    job: dict[str, Any] = json.loads(out)
    return job


@pytest.mark.parametrize("info", KINDS, ids=lambda info: info.kind)
def test_a_job_rewritten_by_a_go_webhook_is_created(
    crds: ControlPlane, go_webhook: tuple[MutatingWebhook, str], info: KindInfo
) -> None:
    hook, namespace = go_webhook
    name = f"go-{info.singular}"
    code, out = _create(crds, namespace, _job(info, name))
    assert code == 0, out
    assert any(r["operation"] == "CREATE" and r["name"] == name for r in hook.requests), "webhook not called"
    stored = _get(crds, namespace, info, name)
    for rtype, spec in stored["spec"][info.replica_specs_field].items():
        template = spec["template"]
        assert "creationTimestamp" in template["metadata"], f"{rtype}: the webhook's null was not kept"
        assert template["metadata"]["creationTimestamp"] is None
        container = template["spec"]["containers"][0]
        assert container["livenessProbe"]["grpc"] == {"port": 9000, "service": None}
        claim = template["spec"]["volumes"][0]["ephemeral"]["volumeClaimTemplate"]
        assert claim["spec"]["dataSource"]["apiGroup"] is None


@pytest.mark.parametrize("info", KINDS, ids=lambda info: info.kind)
def test_a_status_written_by_a_go_client_is_accepted(
    crds: ControlPlane, go_webhook: tuple[MutatingWebhook, str], info: KindInfo
) -> None:
    _, namespace = go_webhook
    name = f"go-status-{info.singular}"
    code, out = _create(crds, namespace, _job(info, name))
    assert code == 0, out
    job = _get(crds, namespace, info, name)
    job["status"] = {"conditions": [{"type": "Created", "status": "True", "reason": f"{info.kind}Created"}]}
    result = crds.kubectl(
        "replace", "--subresource=status", "-f", "-", namespace=namespace, input=json.dumps(job), check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    condition = _get(crds, namespace, info, name)["status"]["conditions"][0]
    assert condition["lastUpdateTime"] is None and condition["lastTransitionTime"] is None
    assert condition["reason"] == f"{info.kind}Created"
