"""The progress endpoint's checks with real tokens: TokenRequest issues projected tokens bound to pods, the
real API server reviews them (TokenReview, with the operator's audience), and reports are written to the
real job's status subresource. Refused and counted, with nothing written: a wrong audience, a token whose
pod is gone (the API server invalidates it), a forged token, an expired token, a pod of another job, a pod
of another namespace, an oversized body and a flood (coalesced: one write per interval).

TokenRequest issues tokens for at least 10 minutes, so the expired one is a TokenRequest token whose
claims are signed again with the test plane's ServiceAccount key, its times moved into the past; the same
claims signed the same way with times around now are accepted, so the refusal is the expiry's alone."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from http import HTTPStatus
from typing import Any

import jwt
import pytest
from prometheus_client import CollectorRegistry

from kubetrain.api import PYTORCHJOB, KindInfo
from kubetrain.common.kube.authn import TokenAuthenticator
from kubetrain.common.kube.resources import PODS, Obj
from kubetrain.common.kube.rest import KubeApiClient
from kubetrain.common.progress import Coalescer, JobKey, StatusReports
from kubetrain.testing import ControlPlane

pytestmark = pytest.mark.integration

AUDIENCE = "kubetrain-progress"
JOBS = JobKey(PYTORCHJOB, "", "").resource
BODY = json.dumps(
    {"trainerStatus": {"progressPercentage": 42, "metrics": [{"name": "loss", "value": "0.5"}]}}
)


def _path(namespace: str, name: str) -> str:
    return f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/{name}/status"


class Cluster:
    """The real API server, read into the caches the endpoint looks at."""

    def __init__(self, plane: ControlPlane, api: KubeApiClient) -> None:
        self.plane, self.api = plane, api
        self.jobs: dict[tuple[str, str], Obj] = {}
        self.pods: dict[tuple[str, str], Obj] = {}
        self.registry = CollectorRegistry()
        self.coalescer = Coalescer(api, interval=10.0, registry=self.registry)
        self.endpoint = StatusReports(
            TokenAuthenticator(api, audiences=[AUDIENCE]),
            jobs=self._job_lookup,
            pods=lambda ns, name: self.pods.get((ns, name)),
            coalescer=self.coalescer,
            registry=self.registry,
        )

    def _job_lookup(self, info: KindInfo) -> Any:
        return lambda ns, name: self.jobs.get((ns, name)) if info is PYTORCHJOB else None

    async def job_with_pod(self, namespace: str, name: str) -> str:
        """A PyTorchJob and its master pod (controlled by it, labelled as the operator does)."""
        specs = {
            "Master": {
                "replicas": 1,
                "template": {"spec": {"containers": [{"name": "pytorch", "image": "x"}]}},
            }
        }
        job = await self.api.create(
            JOBS, namespace, {"metadata": {"name": name}, "spec": {"pytorchReplicaSpecs": specs}}
        )
        self.jobs[(namespace, name)] = job
        owner = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": name,
                 "uid": job["metadata"]["uid"], "controller": True}  # fmt: skip
        pod_name = f"{name}-master-0"
        pod = {
            "metadata": {"name": pod_name, "labels": {"training.kubeflow.org/job-name": name},
                         "ownerReferences": [owner]},
            "spec": {"containers": [{"name": "pytorch", "image": "x"}]},
        }  # fmt: skip
        self.pods[(namespace, pod_name)] = await self.api.create(PODS, namespace, pod)
        return pod_name

    def token(self, namespace: str, pod: str, *, audience: str = AUDIENCE) -> str:
        """A projected-style token from TokenRequest, bound to `pod`, for `audience`."""
        done = self.plane.kubectl(
            "create", "token", "default", "--bound-object-kind=Pod", f"--bound-object-name={pod}",
            f"--audience={audience}", "--duration=10m", namespace=namespace,
        )  # fmt: skip
        return f"Bearer {done.stdout.strip()}"

    def resigned(self, bearer: str, *, issued: float, expires: float) -> str:
        """`bearer`'s claims (its pod, ServiceAccount and audience) with `iat`/`nbf` at now + `issued` and
        `exp` at now + `expires` seconds, signed with the key the API server issues its tokens with."""
        token = bearer.removeprefix("Bearer ")
        header = jwt.get_unverified_header(token)
        claims = jwt.decode(token, options={"verify_signature": False})
        now = int(time.time())
        claims.update(iat=now + int(issued), nbf=now + int(issued), exp=now + int(expires))
        key = (self.plane.workdir / "pki" / "sa.key").read_bytes()
        kid = {"kid": header["kid"]} if "kid" in header else None
        return "Bearer " + jwt.encode(claims, key, algorithm=header["alg"], headers=kid)

    async def progress(self, namespace: str, name: str) -> Any:
        job = await self.api.get(JOBS, namespace, name)
        return (job.get("status") or {}).get("trainerStatus")

    def count(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0


@pytest.fixture
async def cluster(crds: ControlPlane) -> AsyncIterator[Cluster]:
    api = await KubeApiClient.connect(str(crds.kubeconfig))
    yield Cluster(crds, api)
    await api.close()


async def test_a_token_bound_to_the_jobs_pod_is_reviewed_and_the_report_written(
    cluster: Cluster, namespace: str
) -> None:
    pod = await cluster.job_with_pod(namespace, "mnist")
    answer = await cluster.endpoint.handle(
        _path(namespace, "mnist"), cluster.token(namespace, pod), BODY.encode()
    )
    assert answer.status == HTTPStatus.ACCEPTED, answer
    await cluster.coalescer.write_due()
    stored = await cluster.progress(namespace, "mnist")
    assert stored["progressPercentage"] == 42 and stored["metrics"] == [{"name": "loss", "value": "0.5"}]


async def test_foreign_and_forged_reports_are_refused_counted_and_write_nothing(
    cluster: Cluster, crds: ControlPlane, namespace: str
) -> None:
    pod = await cluster.job_with_pod(namespace, "mnist")
    other_pod = await cluster.job_with_pod(namespace, "other")
    elsewhere = crds.create_namespace()
    far_pod = await cluster.job_with_pod(elsewhere, "mnist")
    gone = await cluster.job_with_pod(namespace, "gone")
    gone_token = cluster.token(namespace, gone)
    await cluster.api.delete(PODS, namespace, gone)  # the API server invalidates tokens bound to it
    good = cluster.token(namespace, pod)
    forged = good[:-8] + ("A" * 8 if not good.endswith("A" * 8) else "B" * 8)
    path = _path(namespace, "mnist")
    cases = {
        "wrong audience": (
            cluster.token(namespace, pod, audience="someone-else"),
            BODY,
            HTTPStatus.UNAUTHORIZED,
        ),
        "forged signature": (forged, BODY, HTTPStatus.UNAUTHORIZED),
        "pod deleted": (gone_token, BODY, HTTPStatus.UNAUTHORIZED),
        "pod of another job": (cluster.token(namespace, other_pod), BODY, HTTPStatus.FORBIDDEN),
        "pod of another namespace": (cluster.token(elsewhere, far_pod), BODY, HTTPStatus.FORBIDDEN),
        "oversized body": (good, "{" + " " * 20_000 + "}", HTTPStatus.REQUEST_ENTITY_TOO_LARGE),
    }
    for case, (token, body, code) in cases.items():
        answer = await cluster.endpoint.handle(path, token, body.encode())
        assert answer.status == code, (case, answer)
    await cluster.coalescer.write_due()
    assert await cluster.progress(namespace, "mnist") is None
    assert cluster.count("kubetrain_progress_requests_total", result="unauthenticated") == 3
    assert cluster.count("kubetrain_progress_requests_total", result="forbidden") == 2
    assert cluster.count("kubetrain_progress_requests_total", result="too_large") == 1
    assert cluster.count("kubetrain_progress_status_writes_total", result="written") == 0


async def test_an_expired_token_is_refused_counted_and_writes_nothing(
    cluster: Cluster, namespace: str
) -> None:
    pod = await cluster.job_with_pod(namespace, "mnist")
    issued = cluster.token(namespace, pod)
    path = _path(namespace, "mnist")
    expired = cluster.resigned(issued, issued=-1200, expires=-600)
    answer = await cluster.endpoint.handle(path, expired, BODY.encode())
    assert answer.status == HTTPStatus.UNAUTHORIZED, answer
    await cluster.coalescer.write_due()
    assert await cluster.progress(namespace, "mnist") is None
    assert cluster.count("kubetrain_progress_requests_total", result="unauthenticated") == 1
    assert cluster.count("kubetrain_progress_status_writes_total", result="written") == 0
    valid = cluster.resigned(issued, issued=-60, expires=600)  # the same claims and key, not expired
    answer = await cluster.endpoint.handle(path, valid, BODY.encode())
    assert answer.status == HTTPStatus.ACCEPTED, answer
    await cluster.coalescer.write_due()
    assert (await cluster.progress(namespace, "mnist"))["progressPercentage"] == 42


async def test_a_flood_is_coalesced_into_one_write_per_interval(cluster: Cluster, namespace: str) -> None:
    pod = await cluster.job_with_pod(namespace, "mnist")
    token = cluster.token(namespace, pod)  # one TokenReview: the answer is cached
    for percent in range(200):
        body = json.dumps({"trainerStatus": {"progressPercentage": percent // 2}}).encode()
        answer = await cluster.endpoint.handle(_path(namespace, "mnist"), token, body)
        assert answer.status == HTTPStatus.ACCEPTED
        if percent == 0:
            await cluster.coalescer.write_due()  # the first report goes at once
    assert await cluster.coalescer.write_due() is not None  # the rest waits for the interval
    assert (await cluster.progress(namespace, "mnist"))["progressPercentage"] == 0
    assert cluster.count("kubetrain_progress_status_writes_total", result="written") == 1
    assert cluster.count("kubetrain_progress_coalesced_total") == 198
