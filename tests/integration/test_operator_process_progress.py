"""`kubetrain operator --progress-bind-address` as a process on the real control plane: it serves the
training-progress endpoint over TLS with the certificate it made itself, publishes that certificate to the
job's namespace as the `kubetrain-progress-ca` ConfigMap (a certificate someone adds there is dropped, and
a deleted ConfigMap is written again, with no restart), gives the job's new pods Kubeflow Trainer's env and
the projected volume (the token with the job's own audience), and a report sent with a TokenRequest token
bound to the job's pod, verified against the published CA, is answered 200 and lands in the job's status at
once. A report that waits out the interval is written with the job's verdict; the job's gauges go when it
is deleted. A job annotated `kubetrain.io/progress: "false"` gets neither env nor volume."""

from __future__ import annotations

import datetime
import http.client
import json
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubetrain.common.servingcert import generate
from kubetrain.testing import ControlPlane, Outcome
from kubetrain.testing.operator_process import OperatorProcess
from kubetrain.testing.process import free_port, wait_until

pytestmark = pytest.mark.integration

METRICS = [{"name": "loss", "value": "0.5"}]
ENV = {"KUBEFLOW_TRAINER_SERVER_URL", "KUBEFLOW_TRAINER_SERVER_TOKEN", "KUBEFLOW_TRAINER_SERVER_CA_CERT"}
CA = "kubetrain-progress-ca"


def _job(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    spec = {"containers": [{"name": "pytorch", "image": "trainer:1"}]}
    master = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": spec}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"pytorchReplicaSpecs": {"Master": master}},
    }


def _get(plane: ControlPlane, namespace: str, *what: str) -> Any:
    done = plane.kubectl("get", *what, "-o", "json", namespace=namespace, check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def _eventually(what: str, read: Callable[[], Any], op: OperatorProcess, timeout: float = 60) -> Any:
    """What `read()` returns once it returns something (the operator must keep running meanwhile)."""
    got: list[Any] = []
    wait_until(what, lambda: bool(got.append(read()) or got[-1]), timeout=timeout, processes=[op.process])
    return got[-1]


def _post(port: int, ca: Path, path: str, token: str, percent: int = 42) -> int:
    context = ssl.create_default_context(cafile=str(ca))
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    body = {"trainerStatus": {"progressPercentage": percent, "metrics": METRICS}}
    connection.request("POST", path, body=json.dumps(body).encode(), headers=headers)
    status = connection.getresponse().status
    connection.close()
    return status


def test_the_operator_serves_progress_over_tls_and_injects_new_pods(
    crds: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    plane = crds
    port = free_port()
    flags = [f"--namespace={namespace}", "--no-leader-elect", "--enable=pytorchjob"]
    progress = [f"--progress-bind-address=127.0.0.1:{port}", f"--progress-url=https://127.0.0.1:{port}"]
    op = OperatorProcess(plane.kubeconfig, [*flags, *progress, "--progress-interval=600"], workdir=tmp_path)
    with op:
        op.wait_ready()
        for job in (_job("mnist"), _job("quiet", {"kubetrain.io/progress": "false"})):
            plane.kubectl("apply", "-f", "-", namespace=namespace, input=json.dumps(job))
        pod = _eventually("the job's pod", lambda: _get(plane, namespace, "pod", "mnist-master-0"), op)
        (container,) = pod["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        path = f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/mnist/status"
        assert env["KUBEFLOW_TRAINER_SERVER_URL"] == f"https://127.0.0.1:{port}{path}"
        assert env.keys() >= ENV
        (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "kubetrain-progress"]
        audience = volume["projected"]["sources"][0]["serviceAccountToken"]["audience"]
        assert audience == f"kubetrain-progress{path.removeprefix('/apis')}"

        quiet = _eventually("the opted-out pod", lambda: _get(plane, namespace, "pod", "quiet-master-0"), op)
        assert not ENV & {e["name"] for c in quiet["spec"]["containers"] for e in c.get("env") or ()}

        ca = tmp_path / "ca.crt"
        ca.write_text(_ca_copies_are_kept_whole(plane, namespace, op))
        token = plane.kubectl(
            "create", "token", "default", "--bound-object-kind=Pod", "--bound-object-name=mnist-master-0",
            f"--audience={audience}", "--duration=10m", namespace=namespace,
        ).stdout.strip()  # fmt: skip
        assert _post(port, ca, path, token) == 200
        assert _post(port, ca, path, "forged") == 401
        assert _progress(plane, namespace, op)["progressPercentage"] == 42, "a job's first report: at once"
        status = _progress(plane, namespace, op)
        assert status["metrics"] == METRICS and "lastUpdatedTime" in status
        assert _post(port, ca, path, token, percent=90) == 200  # checked, then waits out the 600 s interval
        metrics = op.metrics()
        assert 'kubetrain_progress_requests_total{result="accepted"} 1.0' in metrics
        assert 'kubetrain_progress_requests_total{result="early"} 1.0' in metrics
        assert _progress(plane, namespace, op)["progressPercentage"] == 42
        plane.finish_pod(namespace, "mnist-master-0", Outcome.SUCCEEDED)
        job = _eventually("the job finished", lambda: _finished(plane, namespace), op)
        assert job["status"]["trainerStatus"]["progressPercentage"] == 90, "written with the verdict"
        assert _gauge(op.metrics()), "the job's gauges while it exists"
        plane.kubectl("delete", "pytorchjob", "mnist", namespace=namespace)
        _eventually("the deleted job's gauges gone", lambda: not _gauge(op.metrics()), op)
        assert op.terminate() == 0, op.process.log_tail()


def _ca_copies_are_kept_whole(plane: ControlPlane, namespace: str, op: OperatorProcess) -> str:
    """The CA bundle the operator publishes to `namespace`, after checking that a certificate someone adds
    there is dropped, and that the ConfigMap deleted is written again (the operator watches its copies)."""
    published = _eventually("the CA ConfigMap", lambda: _get(plane, namespace, "configmap", CA), op)
    bundle = published["data"]["ca.crt"]
    now = datetime.datetime.now(datetime.UTC)
    pem = generate(["127.0.0.1"], common_name="not-ours", valid=datetime.timedelta(days=1), ca=True, now=now)
    users = pem[: pem.index(b"-----BEGIN PRIVATE KEY-----")].decode()  # a valid CA, not the operator's
    patch = json.dumps({"data": {"ca.crt": bundle + users, "more.crt": users}})
    plane.kubectl("patch", "configmap", CA, "--type=merge", "-p", patch, namespace=namespace)
    _eventually(
        "the added certificate dropped",
        lambda: (_get(plane, namespace, "configmap", CA) or {}).get("data") == {"ca.crt": bundle},
        op,
    )
    plane.kubectl("delete", "configmap", CA, namespace=namespace)
    restored = _eventually(
        "the deleted ConfigMap restored", lambda: _get(plane, namespace, "configmap", CA), op
    )
    assert restored["data"] == {"ca.crt": bundle}
    return str(bundle)


def _finished(plane: ControlPlane, namespace: str) -> Any:
    job = _get(plane, namespace, "pytorchjob", "mnist") or {}
    conditions = (job.get("status") or {}).get("conditions") or ()
    return job if any(c["type"] == "Succeeded" and c["status"] == "True" for c in conditions) else None


def _progress(plane: ControlPlane, namespace: str, op: OperatorProcess) -> Any:
    """The job's trainerStatus, once it has one."""

    def read() -> Any:
        job = _get(plane, namespace, "pytorchjob", "mnist") or {}
        return (job.get("status") or {}).get("trainerStatus")

    return _eventually("the report in the job's status", read, op)


def _gauge(metrics: str) -> list[str]:
    return [line for line in metrics.splitlines() if line.startswith("kubetrain_job_progress_percent{")]
