"""The operator installed exactly as README says, `kubectl apply -k manifests/base`, on a real node: its pod
starts from the operator image under the shipped securityContext (non-root, read-only root filesystem, no
capabilities), becomes Ready through its own probes, holds the leader Lease, reaches the API server through
the `kubernetes` Service, and serves /metrics through its Service. Nothing runs the operator on the host."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any

import pytest

from kubetrain.testing.node_plane import NodePlane
from kubetrain.testing.process import wait_until

from .conftest import NAMESPACE, OPERATOR, OPERATOR_IMAGE
from .conftest import kubectl_json as _json

pytestmark = pytest.mark.node


@pytest.fixture
def installed(node_plane: NodePlane, operator_installed: dict[str, Any]) -> dict[str, Any]:
    """The operator's pod as it is now: another test of the tier may have rolled the Deployment since the
    install (the Kueue example restarts the operator once Kueue runs, as docs/ecosystem.md says)."""
    rollout = ("rollout", "status", f"deployment/{OPERATOR}", "--timeout=300s")
    node_plane.kubectl(*rollout, namespace=NAMESPACE, timeout=320)
    pods = _json(node_plane, "get", "pods", "-l", "app.kubernetes.io/component=operator")["items"]
    current = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    assert len(current) == 1, [p["metadata"]["name"] for p in pods]
    return dict(current[0])


def test_operator_pod_runs_from_its_image_under_the_shipped_security_context(
    node_plane: NodePlane, installed: dict[str, Any]
) -> None:
    assert installed["spec"]["nodeName"] == node_plane.node.name
    (status,) = installed["status"]["containerStatuses"]
    assert status["ready"] is True
    assert status["restartCount"] == 0, node_plane.kubectl(
        "logs", installed["metadata"]["name"], "--previous", namespace=NAMESPACE, check=False
    ).stdout
    assert status["image"] == OPERATOR_IMAGE
    # The process really runs as 65532 on a read-only root: read from inside the container by the kubelet.
    name = installed["metadata"]["name"]
    probe = "id -u; touch /probe 2>&1 || true; touch /tmp/probe && echo tmp-writable"
    out = node_plane.kubectl("exec", name, "--", "sh", "-c", probe, namespace=NAMESPACE).stdout
    assert out.splitlines()[0] == "65532"
    assert "Read-only file system" in out
    assert "tmp-writable" in out


def test_operator_holds_the_lease_and_logs_through_the_kubelet(
    node_plane: NodePlane, installed: dict[str, Any]
) -> None:
    pod = installed["metadata"]["name"]

    def holder() -> str:
        lease = _json(node_plane, "get", "lease", OPERATOR)
        return str(lease["spec"].get("holderIdentity") or "")

    wait_until("the operator leads", lambda: holder().startswith(pod), timeout=60)
    logs = node_plane.kubectl("logs", pod, namespace=NAMESPACE).stdout.splitlines()
    records = [json.loads(line) for line in logs if line.startswith("{")]
    assert records, logs[-20:]


def test_metrics_are_scraped_through_the_service(node_plane: NodePlane, installed: dict[str, Any]) -> None:
    """HTTPS by default: a scrape without a token is refused, one by a ServiceAccount bound to the shipped
    ClusterRole kubetrain-metrics-reader is served (TokenReview and SubjectAccessReview by the operator)."""
    service = _json(node_plane, "get", "service", f"{OPERATOR}-metrics")
    url = f"https://{service['spec']['clusterIP']}:8080/metrics"
    node_plane.kubectl("create", "serviceaccount", "scraper", namespace=NAMESPACE)
    node_plane.kubectl(
        "create", "clusterrolebinding", "scraper-reads-metrics", "--clusterrole=kubetrain-metrics-reader",
        f"--serviceaccount={NAMESPACE}:scraper",
    )  # fmt: skip
    token = node_plane.kubectl("create", "token", "scraper", namespace=NAMESPACE).stdout.strip()
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE  # the operator's self-signed pair
    found: list[str] = []

    def status(headers: dict[str, str]) -> int:
        request = urllib.request.Request(url, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=5, context=insecure) as response:
                found[:] = response.read().decode().splitlines()
                return int(response.status)
        except urllib.error.HTTPError as err:
            return err.code

    def leading() -> bool:
        ok = status({"Authorization": f"Bearer {token}"}) == 200
        return ok and 'leader_election_master_status{name="kubetrain-operator"} 1.0' in found

    wait_until(f"{url} says the operator leads", leading, timeout=60)
    assert status({}) == 401
