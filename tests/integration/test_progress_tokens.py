"""The progress endpoint's checks with real tokens: TokenRequest issues projected tokens bound to pods, for
each job's own audience; the endpoint verifies them with the real API server's service-account keys (its
discovery document and JWKS), sends no TokenReview for them, and reports are written to the real job's
status subresource. A token the keys cannot settle goes to a real TokenReview for the job's audience.
Refused and counted, with nothing written: a wrong audience, another job's audience, a token whose pod is
gone, a forged token, an expired token, a pod of another job, a pod of another namespace, an oversized
body; and a flood is coalesced (one write per interval).

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
from kubetrain.common.errors import TransportError
from kubetrain.common.kube.authn import TokenAuthenticator
from kubetrain.common.kube.resources import PODS, Obj
from kubetrain.common.kube.rest import KubeApiClient
from kubetrain.common.progress import Coalescer, JobKey, StatusReports
from kubetrain.common.progress.inject import token_audience
from kubetrain.common.progress.review import ProgressAuthenticator
from kubetrain.common.progress.tokens import IssuerKeys, TokenVerifier
from kubetrain.testing import ControlPlane

pytestmark = pytest.mark.integration

PREFIX = "kubetrain-progress"
JOBS = JobKey(PYTORCHJOB, "", "").resource
BODY = json.dumps(
    {"trainerStatus": {"progressPercentage": 42, "metrics": [{"name": "loss", "value": "0.5"}]}}
)


def _path(namespace: str, name: str) -> str:
    return f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/{name}/status"


def _audience(namespace: str, name: str) -> str:
    return token_audience(PREFIX, api_version="kubeflow.org/v1", plural="pytorchjobs", namespace=namespace,
                          name=name)  # fmt: skip


async def _no_keys(path: str) -> Obj:
    raise TransportError(f"{path}: unreachable")


class CountedReviews:
    """The real API server, as the TokenReviews reach it: each one counted."""

    def __init__(self, api: KubeApiClient) -> None:
        self.api, self.sent = api, 0

    async def create(self, *args: Any, **kw: Any) -> Obj:
        self.sent += 1
        return await self.api.create(*args, **kw)


class Cluster:
    """The real API server, read into the caches the endpoint looks at."""

    def __init__(self, plane: ControlPlane, api: KubeApiClient, *, keys: bool = True) -> None:
        self.plane, self.api = plane, api
        self.jobs: dict[tuple[str, str], Obj] = {}
        self.pods: dict[tuple[str, str], Obj] = {}
        self.registry = CollectorRegistry()
        self.coalescer = Coalescer(api, interval=10.0, registry=self.registry)
        self.keys = IssuerKeys(api.get_path if keys else _no_keys)
        self.reviews = CountedReviews(api)
        reviews = TokenAuthenticator(self.reviews)  # type: ignore[arg-type]  # create() is all it uses
        self.authenticator = ProgressAuthenticator(TokenVerifier(self.keys), reviews)
        self.endpoint = StatusReports(
            self.authenticator,
            audience=PREFIX,
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
        labels = {"training.kubeflow.org/job-name": name, "training.kubeflow.org/replica-type": "master",
                  "training.kubeflow.org/replica-index": "0"}  # fmt: skip
        pod = {
            "metadata": {"name": pod_name, "labels": labels, "ownerReferences": [owner]},
            "spec": {"containers": [{"name": "pytorch", "image": "x"}]},
        }  # fmt: skip
        self.pods[(namespace, pod_name)] = await self.api.create(PODS, namespace, pod)
        return pod_name

    def token(self, namespace: str, pod: str, *, audience: str | None = None) -> str:
        """A projected-style token from TokenRequest, bound to `pod`, for `audience` (default: the audience
        of the job `pod` belongs to, `<job>-master-0`)."""
        audience = audience or _audience(namespace, pod.removesuffix("-master-0"))
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
    cluster = Cluster(crds, api)
    await cluster.keys.load()
    yield cluster
    await api.close()


async def test_a_token_bound_to_the_jobs_pod_is_verified_locally_and_the_report_written(
    cluster: Cluster, namespace: str
) -> None:
    assert cluster.keys.issuer, "the API server's discovery document names its issuer"
    pod = await cluster.job_with_pod(namespace, "mnist")
    answer = await cluster.endpoint.handle(
        _path(namespace, "mnist"), cluster.token(namespace, pod), BODY.encode()
    )
    assert answer.status == HTTPStatus.OK, answer
    await cluster.coalescer.write_due()
    stored = await cluster.progress(namespace, "mnist")
    assert stored["progressPercentage"] == 42 and stored["metrics"] == [{"name": "loss", "value": "0.5"}]
    assert (cluster.reviews.sent, cluster.authenticator.unsettled) == (0, 0), "no TokenReview"


async def test_a_token_the_keys_cannot_settle_is_reviewed_by_the_api_server_for_the_jobs_audience(
    crds: ControlPlane, namespace: str
) -> None:
    api = await KubeApiClient.connect(str(crds.kubeconfig))
    try:
        cluster = Cluster(crds, api, keys=False)
        await cluster.keys.load()  # fails: no keys, every token is unsettled
        pod = await cluster.job_with_pod(namespace, "mnist")
        path = _path(namespace, "mnist")
        good = await cluster.endpoint.handle(path, cluster.token(namespace, pod), BODY.encode())
        other = cluster.token(namespace, pod, audience=_audience(namespace, "other"))
        refused = await cluster.endpoint.handle(path, other, BODY.encode())
    finally:
        await api.close()
    assert (good.status, refused.status) == (HTTPStatus.OK, HTTPStatus.UNAUTHORIZED)
    assert cluster.reviews.sent == 2 and cluster.authenticator.unsettled == 2


async def test_foreign_and_forged_reports_are_refused_counted_and_write_nothing(
    cluster: Cluster, crds: ControlPlane, namespace: str
) -> None:
    pod = await cluster.job_with_pod(namespace, "mnist")
    other_pod = await cluster.job_with_pod(namespace, "other")
    elsewhere = crds.create_namespace()
    far_pod = await cluster.job_with_pod(elsewhere, "mnist")
    gone = await cluster.job_with_pod(namespace, "gone")
    gone_token = cluster.token(namespace, gone)
    await cluster.api.delete(PODS, namespace, gone)  # its token's signature stays good: its pod is gone
    del cluster.pods[(namespace, gone)]  # as the informer's cache sees it
    good = cluster.token(namespace, pod)
    forged = good[:-8] + ("A" * 8 if not good.endswith("A" * 8) else "B" * 8)
    path = _path(namespace, "mnist")
    cases = {
        "wrong audience": (
            cluster.token(namespace, pod, audience="someone-else"),
            BODY,
            HTTPStatus.UNAUTHORIZED,
        ),
        "another job's audience": (
            cluster.token(namespace, pod, audience=_audience(namespace, "other")),
            BODY,
            HTTPStatus.UNAUTHORIZED,
        ),
        "forged signature": (forged, BODY, HTTPStatus.UNAUTHORIZED),
        # a pod may ask for any audience: `other`'s asking for mnist's is still not mnist's
        "pod of another job": (
            cluster.token(namespace, other_pod, audience=_audience(namespace, "mnist")),
            BODY,
            HTTPStatus.FORBIDDEN,
        ),
        "pod of another namespace": (
            cluster.token(elsewhere, far_pod, audience=_audience(namespace, "mnist")),
            BODY,
            HTTPStatus.FORBIDDEN,
        ),
        "oversized body": (good, "{" + " " * 20_000 + "}", HTTPStatus.REQUEST_ENTITY_TOO_LARGE),
    }
    for case, (token, body, code) in cases.items():
        answer = await cluster.endpoint.handle(path, token, body.encode())
        assert answer.status == code, (case, answer)
    answer = await cluster.endpoint.handle(_path(namespace, "gone"), gone_token, BODY.encode())
    assert answer.status == HTTPStatus.FORBIDDEN, ("pod deleted", answer)
    await cluster.coalescer.write_due()
    assert await cluster.progress(namespace, "mnist") is None
    assert await cluster.progress(namespace, "gone") is None
    assert cluster.count("kubetrain_progress_requests_total", result="unauthenticated") == 3
    assert cluster.count("kubetrain_progress_requests_total", result="forbidden") == 3
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
    assert answer.status == HTTPStatus.OK, answer
    await cluster.coalescer.write_due()
    assert (await cluster.progress(namespace, "mnist"))["progressPercentage"] == 42


async def test_a_flood_is_coalesced_into_one_write_per_interval(cluster: Cluster, namespace: str) -> None:
    pod = await cluster.job_with_pod(namespace, "mnist")
    token = cluster.token(namespace, pod)
    for percent in range(200):
        body = json.dumps({"trainerStatus": {"progressPercentage": percent // 2}}).encode()
        answer = await cluster.endpoint.handle(_path(namespace, "mnist"), token, body)
        assert answer.status == HTTPStatus.OK
        if percent == 0:
            await cluster.coalescer.write_due()  # the first report goes at once
    assert await cluster.coalescer.write_due() is not None  # the rest waits for the interval
    assert (await cluster.progress(namespace, "mnist"))["progressPercentage"] == 0
    assert cluster.count("kubetrain_progress_status_writes_total", result="written") == 1
    assert cluster.count("kubetrain_progress_coalesced_total") == 198
