"""The operator's progress endpoint over the in-memory API server: what is accepted is answered 200 and
written, coalesced, replacing the whole `trainerStatus`; what is refused (wrong or missing token, a token of
another job's audience, a pod of another job or namespace or not the job's replica, a token without a pod
uid, a finished job, a bad or oversized body, a path of no job) is counted and writes nothing. Token checks
against the real API server (its keys, TokenRequest, TokenReview) are the integration tier's."""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from kubetrain.api import PYTORCHJOB, TFJOB, KindInfo, TrainerStatus
from kubetrain.common.errors import TransportError
from kubetrain.common.kube.authn import POD_NAME_EXTRA, POD_UID_EXTRA, Identity, ReviewsBusy
from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.resources import Obj
from kubetrain.common.progress import Coalescer, JobKey, StatusReports
from kubetrain.common.progress.inject import token_audience
from kubetrain.common.testing import FakeClock

JOBS = JobKey(PYTORCHJOB, "team-a", "mnist").resource
PATH = "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/mnist/status"
REPORT = {"progressPercentage": 42, "metrics": [{"name": "loss", "value": "0.5"}]}


def _body(**change: Any) -> bytes:
    return json.dumps({"trainerStatus": {**REPORT, **change}}).encode()


PREFIX = "kubetrain-progress"


def _audience(namespace: str = "team-a", name: str = "mnist", info: KindInfo = PYTORCHJOB) -> str:
    return token_audience(
        PREFIX, api_version=info.api_version, plural=info.plural, namespace=namespace, name=name
    )


class Tokens:
    """The verified tokens, by token: a projected token names its pod (name and uid) and one audience."""

    def __init__(self) -> None:
        self.known: dict[str, tuple[Identity, str]] = {}
        self.asked: list[str] = []
        """The audiences each request was checked for."""

    def issue(
        self, token: str, namespace: str, pod: str | None, *, audience: str | None = None, uid: bool = True
    ) -> str:
        extra = {POD_NAME_EXTRA: (pod,), POD_UID_EXTRA: (_uid(namespace, pod),)} if pod else {}
        if not uid:
            extra.pop(POD_UID_EXTRA, None)
        identity = Identity(f"system:serviceaccount:{namespace}:default", extra=extra)
        self.known[token] = (identity, audience or _audience(namespace))
        return f"Bearer {token}"

    async def authenticate(self, token: str, audience: str) -> Identity | None:
        self.asked.append(audience)
        if token == "review-busy":
            raise ReviewsBusy("68 tokens under review already")
        if token == "review-failed":
            raise TransportError("the API server did not answer")
        identity, meant_for = self.known.get(token, (None, ""))
        return identity if meant_for == audience else None


def _uid(namespace: str, pod: str | None) -> str:
    return f"uid-{namespace}-{pod}"


class Plane:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.api = InMemoryApiClient(clock=self.clock, status_subresources=[JOBS])
        self.jobs: dict[tuple[str, str, str], Obj] = {}
        self.pods: dict[tuple[str, str], Obj] = {}
        self.tokens = Tokens()
        self.registry = CollectorRegistry()
        self.coalescer = Coalescer(self.api, interval=10.0, clock=self.clock, registry=self.registry)
        self.endpoint = StatusReports(
            self.tokens,
            audience=PREFIX,
            jobs=lambda info: lambda ns, name: self.jobs.get((info.kind, ns, name)),
            pods=lambda ns, name: self.pods.get((ns, name)),
            coalescer=self.coalescer,
            registry=self.registry,
        )

    async def job(self, info: KindInfo, namespace: str, name: str) -> Obj:
        specs = {info.replica_types[0]: {"replicas": 1, "template": {"spec": {"containers": []}}}}
        body = {
            "apiVersion": info.api_version,
            "kind": info.kind,
            "metadata": {"name": name},
            "spec": {info.replica_specs_field: specs},
        }
        resource = JobKey(info, namespace, name).resource
        created = await self.api.create(resource, namespace, body)
        self.jobs[(info.kind, namespace, name)] = created
        return created

    def pod(
        self, job: Obj, name: str, *, job_name: str | None = None, rtype: str = "master", index: str = "0"
    ) -> None:
        """A pod the job controls, labelled as the controller labels replica `rtype` `index`."""
        meta = job["metadata"]
        owner = {"kind": job["kind"], "name": meta["name"], "uid": meta["uid"], "controller": True}
        prefix = "training.kubeflow.org/"
        labels = {f"{prefix}job-name": job_name or meta["name"], f"{prefix}replica-type": rtype,
                  f"{prefix}replica-index": index}  # fmt: skip
        pod = {"metadata": {"name": name, "namespace": meta["namespace"], "labels": labels,
                            "uid": _uid(meta["namespace"], name), "ownerReferences": [owner]}}  # fmt: skip
        self.pods[(meta["namespace"], name)] = pod

    async def stored_progress(self, namespace: str = "team-a", name: str = "mnist") -> Any:
        job = await self.api.get(JOBS, namespace, name)
        return (job.get("status") or {}).get("trainerStatus")

    def count(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0


@pytest.fixture
async def plane() -> Plane:
    plane = Plane()
    job = await plane.job(PYTORCHJOB, "team-a", "mnist")
    plane.pod(job, "mnist-master-0")
    return plane


async def test_a_report_of_the_jobs_own_pod_is_written_to_its_status(plane: Plane) -> None:
    token = plane.tokens.issue("good", "team-a", "mnist-master-0")
    answer = await plane.endpoint.handle(PATH, token, _body())
    assert answer.status == HTTPStatus.OK
    await plane.coalescer.write_due()
    stored = await plane.stored_progress()
    assert stored["progressPercentage"] == 42 and stored["metrics"] == REPORT["metrics"]
    assert stored["lastUpdatedTime"].endswith("Z")
    assert plane.count("kubetrain_progress_requests_total", result="accepted") == 1


async def test_reports_are_coalesced_latest_wins_one_write_per_interval(plane: Plane) -> None:
    token = plane.tokens.issue("good", "team-a", "mnist-master-0")
    await plane.endpoint.handle(PATH, token, _body(progressPercentage=1))
    await plane.coalescer.write_due()  # the first report is written at once
    for percent in range(2, 7):
        await plane.endpoint.handle(PATH, token, _body(progressPercentage=percent))
    assert await plane.coalescer.write_due() == pytest.approx(10.0)  # nothing due yet
    assert (await plane.stored_progress())["progressPercentage"] == 1
    await plane.clock.advance(10.0)
    await plane.coalescer.write_due()
    assert (await plane.stored_progress())["progressPercentage"] == 6
    assert plane.count("kubetrain_progress_status_writes_total", result="written") == 2
    assert plane.count("kubetrain_progress_coalesced_total") == 4


async def test_the_status_write_leaves_the_conditions_alone(plane: Plane) -> None:
    conditions = [{"type": "Running", "status": "True", "reason": "PyTorchJobRunning"}]
    await plane.api.patch(
        JOBS, "team-a", "mnist", {"status": {"conditions": conditions}}, subresource="status"
    )
    token = plane.tokens.issue("good", "team-a", "mnist-master-0")
    await plane.endpoint.handle(PATH, token, _body())
    await plane.coalescer.write_due()
    job = await plane.api.get(JOBS, "team-a", "mnist")
    assert job["status"]["conditions"] == conditions and job["status"]["trainerStatus"]


async def _refused(plane: Plane, path: str, authorization: str | None, body: bytes) -> HTTPStatus:
    answer = await plane.endpoint.handle(path, authorization, body)
    await plane.coalescer.write_due()
    assert await plane.stored_progress() is None, "a refused report must write nothing"
    assert plane.count("kubetrain_progress_status_writes_total", result="written") == 0
    return answer.status


async def test_no_token_or_an_unknown_one_is_unauthenticated(plane: Plane) -> None:
    assert await _refused(plane, PATH, None, _body()) == HTTPStatus.UNAUTHORIZED
    assert await _refused(plane, PATH, "Bearer forged", _body()) == HTTPStatus.UNAUTHORIZED
    assert plane.count("kubetrain_progress_requests_total", result="unauthenticated") == 2


async def test_a_token_that_cannot_be_reviewed_now_is_answered_503_with_retry_after(plane: Plane) -> None:
    """Past the bounded TokenReviews the pod is told to come back at once (nothing queued); an API server
    that cannot answer is not taken for a refusal either."""
    busy = await plane.endpoint.handle(PATH, "Bearer review-busy", _body())
    assert (busy.status, busy.retry_after) == (HTTPStatus.SERVICE_UNAVAILABLE, 1.0)
    failed = await plane.endpoint.handle(PATH, "Bearer review-failed", _body())
    assert failed.status == HTTPStatus.SERVICE_UNAVAILABLE and failed.retry_after
    assert plane.count("kubetrain_progress_requests_total", result="busy") == 1
    assert plane.count("kubetrain_progress_requests_total", result="unavailable") == 1
    await plane.coalescer.write_due()
    assert await plane.stored_progress() is None


async def test_a_pod_of_another_job_or_namespace_or_no_pod_is_forbidden(plane: Plane) -> None:
    other = await plane.job(PYTORCHJOB, "team-a", "other")
    plane.pod(other, "other-master-0")
    elsewhere = await plane.job(PYTORCHJOB, "team-b", "mnist")
    plane.pod(elsewhere, "mnist-master-0")
    impostor = await plane.job(TFJOB, "team-a", "impostor")
    plane.pod(impostor, "fake-0", job_name="mnist")  # labelled as mnist's, owned by another job
    cases = [
        plane.tokens.issue("other-job", "team-a", "other-master-0"),
        # a pod may ask for any audience: one of team-b asking for this job's is still not this job's
        plane.tokens.issue("other-namespace", "team-b", "mnist-master-0", audience=_audience()),
        plane.tokens.issue("no-pod", "team-a", None),
        plane.tokens.issue("gone-pod", "team-a", "mnist-worker-9"),
        plane.tokens.issue("mislabelled", "team-a", "fake-0"),
    ]
    for token in cases:
        assert await _refused(plane, PATH, token, _body()) == HTTPStatus.FORBIDDEN, token
    assert plane.count("kubetrain_progress_requests_total", result="forbidden") == len(cases)


async def test_a_token_for_another_jobs_audience_is_unauthenticated(plane: Plane) -> None:
    """Each job's tokens have an audience of their own: a token of the job `other` cannot report for
    `mnist`, even from a pod of `mnist` (a pod spec can ask for any audience)."""
    token = plane.tokens.issue("other-audience", "team-a", "mnist-master-0", audience=_audience(name="other"))
    assert await _refused(plane, PATH, token, _body()) == HTTPStatus.UNAUTHORIZED
    assert plane.tokens.asked == [_audience()]
    assert _audience() == "kubetrain-progress/kubeflow.org/v1/namespaces/team-a/pytorchjobs/mnist/status"


async def test_a_pod_that_only_copies_the_labels_and_owner_or_a_token_without_a_pod_uid_is_forbidden(
    plane: Plane,
) -> None:
    """Defect 7: labels and an owner reference can be copied by anyone who may create pods, so the pod must
    also be the replica the controller would run under that name, and the token must name its uid."""
    job = plane.jobs[("PyTorchJob", "team-a", "mnist")]
    plane.pod(job, "copycat", rtype="master", index="0")  # the job's labels and owner, not its replica name
    plane.pod(job, "mnist-master-1", rtype="master", index="1")  # an index the spec does not have
    plane.pod(job, "mnist-worker-0", rtype="worker", index="0")  # a replica type the spec does not have
    cases = [
        plane.tokens.issue("copycat", "team-a", "copycat"),
        plane.tokens.issue("index", "team-a", "mnist-master-1"),
        plane.tokens.issue("rtype", "team-a", "mnist-worker-0"),
        plane.tokens.issue("no-uid", "team-a", "mnist-master-0", uid=False),
    ]
    for token in cases:
        assert await _refused(plane, PATH, token, _body()) == HTTPStatus.FORBIDDEN, token
    plane.pods[("team-a", "mnist-master-0")]["metadata"]["uid"] = "recreated"  # same name, another pod
    token = plane.tokens.issue("old-pod", "team-a", "mnist-master-0")
    assert await _refused(plane, PATH, token, _body()) == HTTPStatus.FORBIDDEN


async def test_a_report_replaces_the_whole_status_so_a_stale_eta_is_gone(plane: Plane) -> None:
    token = plane.tokens.issue("good", "team-a", "mnist-master-0")
    await plane.endpoint.handle(PATH, token, _body(progressPercentage=5, estimatedRemainingSeconds=10))
    await plane.coalescer.write_due()
    assert (await plane.stored_progress())["estimatedRemainingSeconds"] == 10
    await plane.clock.advance(10.0)
    await plane.endpoint.handle(
        PATH, token, json.dumps({"trainerStatus": {"progressPercentage": 20}}).encode()
    )
    await plane.coalescer.write_due()
    stored = await plane.stored_progress()
    assert stored["progressPercentage"] == 20
    assert "estimatedRemainingSeconds" not in stored and "metrics" not in stored, stored


async def test_kubeflows_clients_body_is_accepted_as_they_send_it_and_answered_200(plane: Plane) -> None:
    """The body of Transformers' KubeflowCallback and the Kubeflow SDK: their own `lastUpdatedTime` (ISO
    8601 with an offset), string values, and (SDK) up to 256 metrics, of which the first 16 are kept."""
    token = plane.tokens.issue("good", "team-a", "mnist-master-0")
    metrics = [{"name": f"m{i}", "value": str(i / 3)} for i in range(40)]
    sent = {"lastUpdatedTime": "2026-11-28T21:00:00.123456+00:00", "progressPercentage": 99,
            "estimatedRemainingSeconds": 3, "metrics": metrics}  # fmt: skip
    answer = await plane.endpoint.handle(PATH, token, json.dumps({"trainerStatus": sent}).encode())
    assert answer.status == HTTPStatus.OK, answer
    await plane.coalescer.write_due()
    stored = await plane.stored_progress()
    assert stored["progressPercentage"] == 99 and stored["estimatedRemainingSeconds"] == 3
    assert stored["metrics"] == metrics[:16]
    assert stored["lastUpdatedTime"] != sent["lastUpdatedTime"], "the time the operator received it"


async def test_a_finished_job_refuses_reports(plane: Plane) -> None:
    done = [{"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded"}]
    plane.jobs[("PyTorchJob", "team-a", "mnist")]["status"] = {"conditions": done}
    token = plane.tokens.issue("good", "team-a", "mnist-master-0")
    assert await _refused(plane, PATH, token, _body()) == HTTPStatus.CONFLICT


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (_body(progressPercentage=101), HTTPStatus.BAD_REQUEST),
        (b'{"progress": 1}', HTTPStatus.BAD_REQUEST),
        (b"not json", HTTPStatus.BAD_REQUEST),
        (b"{" + b" " * 20_000 + b"}", HTTPStatus.REQUEST_ENTITY_TOO_LARGE),
    ],
    ids=["out of bounds", "no trainerStatus", "not json", "oversized"],
)
async def test_bad_bodies_are_refused(plane: Plane, body: bytes, code: HTTPStatus) -> None:
    token = plane.tokens.issue("good", "team-a", "mnist-master-0")
    assert await _refused(plane, PATH, token, body) == code


@pytest.mark.parametrize(
    "path",
    [
        "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/mnist",
        "/apis/kubeflow.org/v1/namespaces/team-a/widgets/mnist/status",
        "/apis/kubeflow.org/v2beta1/namespaces/team-a/pytorchjobs/mnist/status",
    ],
)
async def test_a_path_of_no_job_is_not_found(plane: Plane, path: str) -> None:
    token = plane.tokens.issue("good", "team-a", "mnist-master-0")
    assert await _refused(plane, path, token, _body()) == HTTPStatus.NOT_FOUND


async def test_the_writer_loop_writes_the_first_report_at_once_and_the_latest_after_the_interval(
    plane: Plane,
) -> None:
    token = plane.tokens.issue("good", "team-a", "mnist-master-0")
    writer = asyncio.ensure_future(plane.coalescer.run())
    try:
        await plane.endpoint.handle(PATH, token, _body(progressPercentage=10))
        await plane.clock.advance(0)
        assert (await plane.stored_progress())["progressPercentage"] == 10
        await plane.endpoint.handle(PATH, token, _body(progressPercentage=20))
        await plane.endpoint.handle(PATH, token, _body(progressPercentage=30))
        await plane.clock.advance(9.9)
        assert (await plane.stored_progress())["progressPercentage"] == 10
        await plane.clock.advance(0.1)
        assert (await plane.stored_progress())["progressPercentage"] == 30
    finally:
        writer.cancel()


async def test_a_flush_writes_the_waiting_report_at_once_and_wakes_the_writer_loop(plane: Plane) -> None:
    token = plane.tokens.issue("good", "team-a", "mnist-master-0")
    writer = asyncio.ensure_future(plane.coalescer.run())
    key = JobKey(PYTORCHJOB, "team-a", "mnist")
    try:
        await plane.endpoint.handle(PATH, token, _body(progressPercentage=10))
        await plane.clock.advance(0)
        await plane.endpoint.handle(PATH, token, _body(progressPercentage=99))
        await plane.clock.advance(1)
        assert (await plane.stored_progress())["progressPercentage"] == 10, "the interval holds it"
        plane.coalescer.flush(key)  # the job finishes
        await plane.clock.advance(0)
        assert (await plane.stored_progress())["progressPercentage"] == 99
        plane.coalescer.flush(key)  # nothing waits: nothing written
        await plane.clock.advance(0)
        assert (
            plane.registry.get_sample_value("kubetrain_progress_status_writes_total", {"result": "written"})
            == 2
        )
    finally:
        writer.cancel()


async def test_each_jobs_progress_and_numeric_metrics_are_gauges_removed_with_the_job(plane: Plane) -> None:
    token = plane.tokens.issue("good", "team-a", "mnist-master-0")
    metrics = [{"name": "loss", "value": "0.5"}, {"name": "note", "value": "warm-up"}]
    await plane.endpoint.handle(PATH, token, _body(metrics=metrics))
    await plane.coalescer.write_due()
    job = {"job_namespace": "team-a", "job_name": "mnist", "kind": "PyTorchJob"}
    assert plane.count("kubetrain_job_progress_percent", **job) == 42
    assert plane.count("kubetrain_job_metric", **job, metric="loss") == 0.5
    assert plane.registry.get_sample_value("kubetrain_job_metric", {**job, "metric": "note"}) is None
    await plane.clock.advance(10)
    await plane.endpoint.handle(PATH, token, _body(metrics=[{"name": "accuracy", "value": "0.9"}]))
    await plane.coalescer.write_due()
    assert plane.registry.get_sample_value("kubetrain_job_metric", {**job, "metric": "loss"}) is None
    plane.coalescer.forget(JobKey(PYTORCHJOB, "team-a", "mnist"))
    text = generate_latest(plane.registry).decode()
    assert 'job_name="mnist"' not in text


async def test_a_flood_costs_no_token_review_and_no_write_beyond_one_per_interval(
    plane: Plane,
) -> None:
    token = plane.tokens.issue("good", "team-a", "mnist-master-0")
    first = await plane.endpoint.handle(PATH, token, _body(progressPercentage=1))
    await plane.coalescer.write_due()
    assert first.status == HTTPStatus.OK and first.retry_after == pytest.approx(10.0)
    answers = [await plane.endpoint.handle(PATH, token, _body(progressPercentage=2)) for _ in range(998)]
    last = await plane.endpoint.handle(PATH, token, _body(progressPercentage=3))
    assert {a.status for a in answers} == {HTTPStatus.OK}
    assert plane.count("kubetrain_progress_requests_total", result="early") == 999
    await plane.clock.advance(4.0)
    assert await plane.coalescer.write_due() == pytest.approx(6.0)
    assert plane.count("kubetrain_progress_status_writes_total", result="written") == 1
    assert last.retry_after == pytest.approx(10.0), "the pod is told when the next write is due"
    await plane.clock.advance(6.0)
    await plane.coalescer.write_due()
    assert (await plane.stored_progress())["progressPercentage"] == 3
    assert plane.count("kubetrain_progress_status_writes_total", result="written") == 2


@pytest.mark.parametrize(
    "body, why",
    [
        (b"[" * 5000, "deeper than 32 levels"),  # about 5 KB: under the size cap, over json's recursion
        (b'{"trainerStatus": {"metrics": ' + b"[" * 31 + b"1" + b"]" * 31 + b"}}", "deeper than 32 levels"),
        (_body(progressPercentage=101), "trainerStatus.progressPercentage: Input should be less than"),
        (b'{"trainerStatus": [1]}', '{"trainerStatus": {...}}'),
        (b"\xff\xfe", "not JSON"),
    ],
    ids=["nested-5000", "nested-in-a-field", "out-of-bounds", "not-an-object", "not-utf8"],
)  # fmt: skip
async def test_an_early_report_is_checked_on_receipt_and_refused_naming_the_problem(
    plane: Plane, body: bytes, why: str
) -> None:
    """Issue 35, defect 1: a report that came before its job's write was due was kept unparsed and answered
    202; 5,000 nested [ then raised RecursionError in the writer loop, which stopped the operator."""
    token = plane.tokens.issue("good", "team-a", "mnist-master-0")
    await plane.endpoint.handle(PATH, token, _body(progressPercentage=1))
    await plane.coalescer.write_due()
    early = await plane.endpoint.handle(PATH, token, body)
    assert (early.status, why in early.message) == (HTTPStatus.BAD_REQUEST, True), early.message
    await plane.clock.advance(10.0)
    await plane.coalescer.write_due()
    assert (await plane.stored_progress())["progressPercentage"] == 1
    assert plane.count("kubetrain_progress_requests_total", result="invalid") == 1


class Exploding(InMemoryApiClient):
    """A client whose status patch of one job fails with a bug (not an API error)."""

    async def patch(self, resource: Any, namespace: Any, name: str, *args: Any, **kw: Any) -> Obj:
        if name == "bad":
            raise RuntimeError("a bug in the write path")
        return await super().patch(resource, namespace, name, *args, **kw)


async def test_a_write_that_raises_is_logged_and_the_writer_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Whatever one report does, the loop that writes every job's progress does not die (it is a runnable of
    the Manager: its end would stop every controller); the bug is logged with its traceback."""
    clock, registry = FakeClock(), CollectorRegistry()
    api = Exploding(clock=clock, status_subresources=[JOBS])
    coalescer = Coalescer(api, interval=10.0, clock=clock, registry=registry)
    for name in ("bad", "good"):
        await api.create(
            JOBS,
            "team-a",
            {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name}},
        )
    writer = asyncio.ensure_future(coalescer.run())
    try:
        coalescer.offer(JobKey(PYTORCHJOB, "team-a", "bad"), TrainerStatus(progress_percentage=5))
        coalescer.offer(JobKey(PYTORCHJOB, "team-a", "good"), TrainerStatus(progress_percentage=7))
        await clock.advance(0)
        job = await api.get(JOBS, "team-a", "good")
        assert job["status"]["trainerStatus"]["progressPercentage"] == 7
        assert not writer.done(), "the writer loop is still running"
        assert registry.get_sample_value("kubetrain_progress_status_writes_total", {"result": "error"}) == 1
        logged = [r for r in caplog.records if r.exc_info and "team-a/bad" in r.getMessage()]
        assert logged and str(logged[0].exc_info[1]) == "a bug in the write path"  # type: ignore[index]
    finally:
        writer.cancel()


async def test_the_interval_grows_with_the_reporting_jobs_so_writes_stay_within_their_rate() -> None:
    clock, registry = FakeClock(), CollectorRegistry()
    api = InMemoryApiClient(clock=clock, status_subresources=[JOBS])
    coalescer = Coalescer(api, interval=10.0, writes_per_second=2.0, clock=clock, registry=registry)
    keys = [JobKey(PYTORCHJOB, "team-a", f"job-{i}") for i in range(60)]
    for key in keys:
        job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": key.name}}
        await api.create(JOBS, "team-a", job)
        coalescer.offer(key, TrainerStatus(progress_percentage=1))
    await coalescer.write_due()  # first reports: at once
    assert coalescer.interval() == pytest.approx(30.0)  # 60 jobs at 2 writes a second
    assert coalescer.retry_after(keys[0]) == pytest.approx(30.0)
    for second in range(1, 61):
        for key in keys:
            coalescer.offer(key, TrainerStatus(progress_percentage=second))
        await clock.advance(1.0)
        await coalescer.write_due()
    written = registry.get_sample_value("kubetrain_progress_status_writes_total", {"result": "written"})
    assert written == 60 + 2 * 60, "each job written every 30 s, not every 10 s"
