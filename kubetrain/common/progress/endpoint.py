"""The decisions of the operator's training-progress endpoint (KEP-2779), apart from its transport.

A request is `POST /apis/<group>/<version>/namespaces/{ns}/<plural>/{name}/status` with a bearer token and
the body `{"trainerStatus": {...}}`, as Kubeflow Trainer's status server takes it. `StatusReports.handle`
answers it, checking, in this order and before anything is written:

1. the path names one of the kinds (404), the body is at most `MAX_BODY_BYTES` (413);
2. the token is a projected ServiceAccount token for this job's own audience (`token_audience`), verified
   with the API server's signing keys, or, when they cannot settle it, by a TokenReview within a budget
   of its own (`kubetrain.common.progress.review`) (401; 503 when the API server could not be asked, or
   at once when too many tokens already wait for a review: `ReviewsBusy`);
3. the token's pod is a replica of the job in the URL (`kubetrain.common.progress.binding`) (403): a pod of
   another job or namespace, a token of no pod, and a forged or expired token are all refused;
4. the job exists and has not finished (404, 409: reports for a finished job are refused);
5. the body is JSON nested at most `MAX_DEPTH` levels and a `trainerStatus` as Kubeflow's clients send it
   (`kubetrain.api.trainerstatus.from_report`), within the bounds of `kubetrain.api.TrainerStatus` (400,
   the message naming what is wrong). Every body is parsed and checked here, on receipt: nothing unchecked
   is kept for later.

Accepted reports go to the `Coalescer` and are answered 200 (Hugging Face Transformers' `KubeflowCallback`
and the Kubeflow SDK count nothing else a success), which writes at most one status per job per interval;
the answer's `Retry-After` says when the job's next write is due, and the pods' own helper sends nothing
before (Kubeflow's clients send at most one report per 5 s, whatever the answer says).

A report is cheap: verifying a token is a signature check in this process (a token only a TokenReview can
settle is reviewed once and its answer cached), the pod and job checks read informer caches, and the body
(at most 16 KiB) is parsed in tens of microseconds. A report that arrives before its job's next write is
due replaces the one waiting (counted as `early`). So a pod that reports faster than asked, or a flood with
a valid token, costs a TLS record, an HTTP parse, a signature check, a JSON parse and a few lookups per
request: no TokenReview and no status write beyond the one per interval. When the reviews are saturated
(`ReviewsBusy`), the answer is 503 with a `Retry-After` at once. Each answer is counted in
`kubetrain_progress_requests_total{result}`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter

from kubetrain.api import KINDS, JobConditionType, JobStatus, KindInfo
from kubetrain.common.errors import ApiError
from kubetrain.common.job.status import is_finished
from kubetrain.common.kube.authn import Identity, ReviewsBusy, bearer_token
from kubetrain.common.kube.resources import Obj
from kubetrain.common.progress.binding import is_replica_of
from kubetrain.common.progress.coalesce import Coalescer, JobKey, Received, read_report
from kubetrain.common.progress.inject import token_audience
from kubetrain.podcontract.progress import MAX_BODY_BYTES

__all__ = ["Answer", "Authenticator", "StatusReports"]

_PATH = re.compile(
    r"^/apis/([a-z0-9.-]+)/([a-z0-9]+)/namespaces/([a-z0-9-]{1,63})/([a-z]+)/([a-z0-9.-]{1,253})/status$"
)


class Authenticator(Protocol):
    """`kubetrain.common.progress.review.ProgressAuthenticator`: the token's Identity for `audience`, or
    None; `ReviewsBusy` when too many tokens wait for a TokenReview, ApiError when the API server had to
    be asked and could not be."""

    async def authenticate(self, token: str, audience: str) -> Identity | None: ...


Lookup = Callable[[str, str], Obj | None]
"""(namespace, name) -> the cached object, or None."""


@dataclass(frozen=True)
class Answer:
    status: HTTPStatus
    message: str
    result: str
    """The `result` label it is counted under: accepted, not_found, too_large, unauthenticated, ..."""
    retry_after: float | None = None
    """Seconds the pod should wait before its next report (the `Retry-After` header)."""

    def body(self) -> bytes:
        return json.dumps({"message": self.message}).encode()


class StatusReports:
    """The endpoint's checks (see the module docstring); `jobs(kind)` and `pods` read informer caches."""

    def __init__(
        self,
        authenticator: Authenticator,
        *,
        audience: str,
        jobs: Callable[[KindInfo], Lookup],
        pods: Lookup,
        coalescer: Coalescer,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self._authn, self._jobs, self._pods, self._coalescer = authenticator, jobs, pods, coalescer
        self._audience = audience
        """The prefix of each job's token audience (`token_audience`)."""
        self._requests = Counter(
            "kubetrain_progress_requests",
            "Training-progress reports received, by result (accepted or why refused)",
            ["result"],
            registry=registry,
        )

    async def handle(self, path: str, authorization: str | None, body: bytes) -> Answer:
        answer = await self._decide(path, authorization, body)
        self._requests.labels(answer.result).inc()
        return answer

    async def _decide(self, path: str, authorization: str | None, body: bytes) -> Answer:
        target = _target(path)
        if target is None:
            return Answer(HTTPStatus.NOT_FOUND, "not a job's status path", "not_found")
        if len(body) > MAX_BODY_BYTES:
            return Answer(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"at most {MAX_BODY_BYTES} bytes", "too_large")
        info, namespace, name = target
        try:
            identity = await self._identity(info, namespace, name, authorization)
        except ReviewsBusy as busy:
            message = "too many tokens under review; retry later"
            return Answer(HTTPStatus.SERVICE_UNAVAILABLE, message, "busy", busy.retry_after)
        except ApiError as err:
            return Answer(
                HTTPStatus.SERVICE_UNAVAILABLE, f"cannot check the token now: {err}", "unavailable", 10
            )
        if identity is None:
            return Answer(HTTPStatus.UNAUTHORIZED, "a valid token with the job's audience", "unauthenticated")
        job = self._jobs(info)(namespace, name)
        pod = self._pods(namespace, identity.pod_name) if identity.pod_name else None
        if job is None or not is_replica_of(identity, pod, job, info):
            return Answer(
                HTTPStatus.FORBIDDEN, f"the token's pod is not a pod of {info.kind} {name}", "forbidden"
            )
        if _finished(job):
            return Answer(HTTPStatus.CONFLICT, f"{info.kind} {namespace}/{name} has finished", "finished")
        status = read_report(Received(body, datetime.now(UTC).replace(microsecond=0)))
        if isinstance(status, str):
            return Answer(HTTPStatus.BAD_REQUEST, status, "invalid")
        key = JobKey(info, namespace, name)
        early = self._coalescer.waiting(key)  # it will wait, or be replaced by a newer one
        self._coalescer.offer(key, status)
        return self._accepted(key, "early" if early else "accepted")

    async def _identity(
        self, info: KindInfo, namespace: str, name: str, authorization: str | None
    ) -> Identity | None:
        token = bearer_token(authorization)
        if not token:
            return None
        audience = token_audience(
            self._audience, api_version=info.api_version, plural=info.plural, namespace=namespace, name=name
        )
        return await self._authn.authenticate(token, audience)

    def _accepted(self, key: JobKey, result: str) -> Answer:
        wait = self._coalescer.retry_after(key)
        return Answer(HTTPStatus.OK, f"accepted; the next is written in {wait:.0f} s", result, wait)


def _target(path: str) -> tuple[KindInfo, str, str] | None:
    match = _PATH.match(path)
    if match is None:
        return None
    group, version, namespace, plural, name = match.groups()
    for info in KINDS:
        if (info.group, info.version, info.plural) == (group, version, plural):
            return info, namespace, name
    return None


_FINAL = (JobConditionType.SUCCEEDED, JobConditionType.FAILED)


def _finished(job: Obj) -> bool:
    """Whether the job has a true Succeeded or Failed condition (what `is_finished` reads, without
    validating the whole status on every report)."""
    conditions = (job.get("status") or {}).get("conditions") or ()
    return is_finished(JobStatus.model_validate({"conditions": [c for c in conditions if _final(c)]}))


def _final(condition: object) -> bool:
    return isinstance(condition, dict) and condition.get("type") in _FINAL
