"""The decisions of the operator's training-progress endpoint (KEP-2779), apart from its transport.

A request is `POST /apis/<group>/<version>/namespaces/{ns}/<plural>/{name}/status` with a bearer token and
the body `{"trainerStatus": {...}}`. `StatusReports.handle` answers it, checking, in this order and
before anything is written:

1. the path names one of the kinds (404), the body is at most `MAX_BODY_BYTES` (413);
2. the token is one the API server accepts for the operator's audience, by a cached TokenReview (401);
3. the token is a projected ServiceAccount token bound to a pod of the job's namespace, and that pod
   belongs to the job in the URL: its job-name label and its controlling owner are the job (403). A pod of
   another job or namespace, a token of no pod and a forged or expired token are all refused;
4. the job exists and has not finished (404, 409: reports for a finished job are refused);
5. the body is JSON nested at most `MAX_DEPTH` levels and a `trainerStatus` within the bounds of
   `kubetrain.api.TrainerStatus` (400, the message naming what is wrong). Every body is parsed and checked
   here, on receipt: nothing unchecked is kept for later.

Accepted reports go to the `Coalescer` (202), which writes at most one status per job per interval; the
answer's `Retry-After` says when the job's next write is due, and the pods' helper sends nothing before.

A report is cheap once its token has been reviewed: a token the authenticator reviewed recently is taken
from its cache (`peek`, no TokenReview, no wait), the pod and job checks read informer caches, and the body
(at most 16 KiB) is parsed in tens of microseconds. A report that arrives before its job's next write is
due replaces the one waiting (counted as `early`). So a pod that reports faster than asked, or a flood with
a valid token, costs a TLS record, an HTTP parse, a JSON parse and a few lookups per request: no
TokenReview and no status write beyond the one per interval. When the authenticator's reviews are
saturated (`ReviewsBusy`), the answer is 503 with a `Retry-After` at once. Each answer is counted in
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
from kubetrain.common.job.labels import JOB_NAME_LABEL
from kubetrain.common.job.status import is_finished
from kubetrain.common.kube import objects
from kubetrain.common.kube.authn import Identity, ReviewsBusy, bearer_token
from kubetrain.common.kube.resources import Obj
from kubetrain.common.progress.coalesce import Coalescer, JobKey, Received, read_report
from kubetrain.podcontract.progress import MAX_BODY_BYTES

__all__ = ["Answer", "Authenticator", "StatusReports"]

_PATH = re.compile(
    r"^/apis/([a-z0-9.-]+)/([a-z0-9]+)/namespaces/([a-z0-9-]{1,63})/([a-z]+)/([a-z0-9.-]{1,253})/status$"
)
_SERVICE_ACCOUNT = "system:serviceaccount:"


class Authenticator(Protocol):
    """`kubetrain.common.kube.authn.TokenAuthenticator`, with the operator's audience."""

    async def authenticate(self, token: str) -> Identity | None: ...

    def peek(self, token: str) -> Identity | None:
        """The cached answer for a token accepted recently, without asking the API server (None when
        there is none: not reviewed lately, or refused)."""
        ...


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
        jobs: Callable[[KindInfo], Lookup],
        pods: Lookup,
        coalescer: Coalescer,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self._authn, self._jobs, self._pods, self._coalescer = authenticator, jobs, pods, coalescer
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
        token = bearer_token(authorization)
        identity = None
        if token:
            try:
                identity = self._authn.peek(token) or await self._authn.authenticate(token)
            except ReviewsBusy as busy:
                message = "too many tokens under review; retry later"
                return Answer(HTTPStatus.SERVICE_UNAVAILABLE, message, "busy", busy.retry_after)
        if identity is None:
            return Answer(
                HTTPStatus.UNAUTHORIZED, "a valid token with the operator's audience", "unauthenticated"
            )
        job = self._jobs(info)(namespace, name)
        if not self._pod_of(identity, job, namespace, name):
            return Answer(
                HTTPStatus.FORBIDDEN, f"the token's pod is not a pod of {info.kind} {name}", "forbidden"
            )
        assert job is not None  # _pod_of is False without a job
        if _finished(job):
            return Answer(HTTPStatus.CONFLICT, f"{info.kind} {namespace}/{name} has finished", "finished")
        status = read_report(Received(body, datetime.now(UTC).replace(microsecond=0)))
        if isinstance(status, str):
            return Answer(HTTPStatus.BAD_REQUEST, status, "invalid")
        key = JobKey(info, namespace, name)
        early = self._coalescer.waiting(key)  # it will wait, or be replaced by a newer one
        self._coalescer.offer(key, status)
        return self._accepted(key, "early" if early else "accepted")

    def _accepted(self, key: JobKey, result: str) -> Answer:
        wait = self._coalescer.retry_after(key)
        return Answer(HTTPStatus.ACCEPTED, f"accepted; the next is written in {wait:.0f} s", result, wait)

    def _pod_of(self, identity: Identity, job: Obj | None, namespace: str, name: str) -> bool:
        """The token's pod is in the job's namespace, labelled with the job's name and controlled by it."""
        if job is None or not identity.username.startswith(f"{_SERVICE_ACCOUNT}{namespace}:"):
            return False
        pod = self._pods(namespace, identity.pod_name or "") if identity.pod_name else None
        if pod is None or (identity.pod_uid and objects.uid(pod) != identity.pod_uid):
            return False
        owners = (pod.get("metadata") or {}).get("ownerReferences") or ()
        controlled = any(o.get("controller") and o.get("uid") == objects.uid(job) for o in owners)
        return controlled and objects.labels(pod).get(JOB_NAME_LABEL) == name


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
