"""TokenAuthenticator and AccessAuthorizer over a scripted API: what they send, what they cache, how long.

The real API server's answers (a ServiceAccount token accepted, RBAC deciding) are tested in
tests/integration/test_operator_metrics.py; here the reviews are scripted so the cache's lifetimes can be
driven on a fake clock.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from kubetrain.common.errors import ServerError
from kubetrain.common.kube.authn import (
    SUBJECT_ACCESS_REVIEWS,
    TOKEN_REVIEWS,
    AccessAuthorizer,
    BearerGuard,
    Identity,
    NonResourceAccess,
    ResourceAccess,
    ReviewsBusy,
    TokenAuthenticator,
    bearer_token,
    token_expiry,
)
from kubetrain.common.kube.resources import Obj, Resource
from kubetrain.common.testing import FakeClock

POD_SA = {
    "username": "system:serviceaccount:team:trainer",
    "uid": "u-1",
    "groups": ["system:serviceaccounts", "system:serviceaccounts:team"],
    "extra": {"authentication.kubernetes.io/pod-name": ["job-worker-0"]},
}


class ScriptedApi:
    """Answers creates of reviews with `status`; records each spec sent."""

    def __init__(self, status: Obj | Exception) -> None:
        self.status = status
        self.sent: list[tuple[Resource, Obj]] = []

    async def create(self, res: Resource, namespace: str | None, body: Obj) -> Obj:
        assert namespace is None
        self.sent.append((res, body["spec"]))
        if isinstance(self.status, Exception):
            raise self.status
        return {**body, "status": self.status}


def authenticator(api: ScriptedApi, clock: FakeClock, **kw: Any) -> TokenAuthenticator:
    return TokenAuthenticator(api, clock=clock, **kw)  # type: ignore[arg-type]


async def test_an_accepted_token_names_the_caller_and_its_pod() -> None:
    api = ScriptedApi({"authenticated": True, "user": POD_SA, "audiences": ["kubetrain"]})
    auth = authenticator(api, FakeClock(), audiences=["kubetrain"])
    who = await auth.authenticate("tok")
    assert who is not None
    assert who.username == "system:serviceaccount:team:trainer"
    assert who.pod_name == "job-worker-0"
    assert who.audiences == ("kubetrain",)
    assert api.sent == [(TOKEN_REVIEWS, {"token": "tok", "audiences": ["kubetrain"]})]


class SlowApi(ScriptedApi):
    """A ScriptedApi whose answers wait until `answer` is set (a loaded API server)."""

    def __init__(self, status: Obj | Exception) -> None:
        super().__init__(status)
        self.answer = asyncio.Event()

    async def create(self, res: Resource, namespace: str | None, body: Obj) -> Obj:
        self.sent.append((res, body["spec"]))
        await self.answer.wait()
        self.sent.pop()
        return await super().create(res, namespace, body)


async def test_requests_with_a_token_under_review_wait_for_that_one_review() -> None:
    api = SlowApi({"authenticated": True, "user": POD_SA})
    auth = authenticator(api, FakeClock())
    callers = [asyncio.ensure_future(auth.authenticate("tok")) for _ in range(10)]
    for _ in range(100):  # until the first caller's review is in flight (a few yields)
        if api.sent:
            break
        await asyncio.sleep(0)
    assert len(api.sent) == 1, "the first caller's review is in flight, the other nine wait on it"
    callers[0].cancel()  # a client that gave up: the review goes on for the others
    await asyncio.sleep(0)
    assert len(api.sent) == 1 and not any(c.done() for c in callers[1:]), "the review goes on"
    api.answer.set()
    found = await asyncio.gather(*callers[1:])
    assert {who.username for who in found if who} == {POD_SA["username"]} and all(found)
    assert len(api.sent) == 1, "one TokenReview for ten requests carrying the token"
    assert await auth.authenticate("tok") == found[0]  # and then cached
    assert len(api.sent) == 1


class GatedApi:
    """Reviews that wait until `answer` is set; counts the requests in flight, and those cancelled."""

    def __init__(self) -> None:
        self.answer = asyncio.Event()
        self.in_flight = self.most = self.cancelled = self.sent = 0

    async def create(self, res: Resource, namespace: str | None, body: Obj) -> Obj:
        self.sent += 1
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await self.answer.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1
        return {**body, "status": {"authenticated": False}}


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_reviews_are_bounded_and_a_new_token_past_the_backlog_is_refused_at_once() -> None:
    """Issue 35, defects 2 and 3: every junk token cost a TokenReview, queued without bound."""
    api = GatedApi()
    auth = authenticator(api, FakeClock(), concurrency=2, backlog=3)  # type: ignore[arg-type]
    callers = [asyncio.ensure_future(auth.authenticate(f"junk-{n}")) for n in range(5)]
    await settle()
    assert (api.in_flight, auth.reviewing) == (2, 5), "two reviews at once, three waiting for a slot"
    with pytest.raises(ReviewsBusy):
        await auth.authenticate("junk-5")
    joined = asyncio.ensure_future(auth.authenticate("junk-4"))  # a token under review is no new work
    api.answer.set()
    assert await asyncio.gather(*callers, joined) == [None] * 6
    assert (api.sent, api.most, auth.reviewing) == (5, 2, 0)
    assert await auth.authenticate("junk-0") is None and api.sent == 5, "a refusal is cached"


async def test_a_review_is_cancelled_when_its_last_caller_gives_up() -> None:
    """A request whose client went away takes its review with it, whether in flight or waiting."""
    api = GatedApi()
    auth = authenticator(api, FakeClock(), concurrency=1, backlog=1)  # type: ignore[arg-type]
    in_flight = [asyncio.ensure_future(auth.authenticate("a")) for _ in range(2)]
    waiting = asyncio.ensure_future(auth.authenticate("b"))
    await settle()
    assert (api.sent, auth.reviewing) == (1, 2)
    in_flight[0].cancel()
    await settle()
    assert api.cancelled == 0, "another caller still waits for the review of a"
    in_flight[1].cancel()
    waiting.cancel()
    await settle()
    assert (api.cancelled, api.in_flight, auth.reviewing) == (1, 0, 0)
    assert api.sent == 1, "the review of b never went out"
    api.answer.set()
    assert await auth.authenticate("c") is None  # the slots are free again


async def test_answers_are_cached_for_a_minute_refused_ones_too() -> None:
    clock = FakeClock()
    api = ScriptedApi({"authenticated": False, "error": "invalid bearer token"})
    auth = authenticator(api, clock)
    assert await auth.authenticate("bad") is None
    assert await auth.authenticate("bad") is None
    assert len(api.sent) == 1
    await clock.advance(61)
    assert await auth.authenticate("bad") is None
    assert len(api.sent) == 2


def jwt(claims: Obj) -> str:
    """A token shaped as a JWT (header.claims.signature); only the API server checks its signature."""
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"eyJhbGciOiJSUzI1NiJ9.{body}.c2ln"


async def test_an_accepted_token_is_not_cached_past_its_own_expiry() -> None:
    clock = FakeClock()
    api = ScriptedApi({"authenticated": True, "user": POD_SA})
    auth = authenticator(api, clock)
    soon = jwt({"exp": int(clock.now().timestamp()) + 20})
    assert await auth.authenticate(soon) is not None
    assert await auth.authenticate(soon) is not None
    assert len(api.sent) == 1
    await clock.advance(21)  # inside the minute the cache keeps answers, past the token's exp
    api.status = {"authenticated": False, "error": "token has expired"}
    assert await auth.authenticate(soon) is None
    assert len(api.sent) == 2
    later = jwt({"exp": int(clock.now().timestamp()) + 3600})
    api.status = {"authenticated": True, "user": POD_SA}
    await auth.authenticate(later)
    await clock.advance(59)
    await auth.authenticate(later)
    assert len(api.sent) == 3  # a long-lived token keeps the usual minute


@pytest.mark.parametrize(
    ("token", "expiry"),
    [
        (jwt({"exp": 1700000000}), 1700000000.0),
        (jwt({"exp": "soon"}), None),
        (jwt({"exp": True}), None),
        (jwt({"sub": "x"}), None),
        ("opaque-token", None),
        ("a.!!!.c", None),
        ("a.bm90IGpzb24.c", None),
    ],
)
def test_token_expiry_reads_only_a_numeric_exp(token: str, expiry: float | None) -> None:
    assert token_expiry(token) == expiry


async def test_an_api_failure_is_raised_and_not_cached() -> None:
    api = ScriptedApi(ServerError("down", status=503))
    auth = authenticator(api, FakeClock())
    for _ in range(2):
        with pytest.raises(ServerError):
            await auth.authenticate("tok")
    assert len(api.sent) == 2


async def test_the_cache_is_bounded_oldest_first() -> None:
    api = ScriptedApi({"authenticated": True, "user": POD_SA})
    auth = authenticator(api, FakeClock(), size=2)
    for token in ("a", "b", "c", "a"):
        await auth.authenticate(token)
    assert [spec["token"] for _, spec in api.sent] == ["a", "b", "c", "a"]


async def test_access_reviews_send_the_identity_and_cache_allow_longer_than_deny() -> None:
    clock = FakeClock()
    api = ScriptedApi({"allowed": False})
    authz = AccessAuthorizer(api, clock=clock)  # type: ignore[arg-type]
    who = Identity.from_review({"user": POD_SA})
    metrics = NonResourceAccess("/metrics")
    assert not await authz.allowed(who, metrics)
    assert api.sent[0] == (
        SUBJECT_ACCESS_REVIEWS,
        {
            "user": POD_SA["username"],
            "uid": "u-1",
            "groups": POD_SA["groups"],
            "extra": POD_SA["extra"],
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
        },
    )
    api.status = {"allowed": True}
    await clock.advance(29)
    assert not await authz.allowed(who, metrics)  # the denial is still cached
    await clock.advance(2)
    assert await authz.allowed(who, metrics)
    await clock.advance(299)
    assert await authz.allowed(who, metrics)
    assert len(api.sent) == 2


async def test_resource_access_names_only_what_is_set() -> None:
    api = ScriptedApi({"allowed": True})
    authz = AccessAuthorizer(api, clock=FakeClock())  # type: ignore[arg-type]
    access = ResourceAccess("get", "pytorchjobs", group="kubeflow.org", namespace="team", name="job")
    assert await authz.allowed(Identity("alice"), access)
    assert api.sent[0][1]["resourceAttributes"] == {
        "verb": "get",
        "group": "kubeflow.org",
        "resource": "pytorchjobs",
        "namespace": "team",
        "name": "job",
    }


@pytest.mark.parametrize(
    ("header", "token"),
    [("Bearer abc", "abc"), ("bearer  abc ", "abc"), ("Basic abc", None), ("Bearer", None), (None, None)],
)
def test_bearer_token(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


class TwoReviews(ScriptedApi):
    """A TokenReview answered `token`, a SubjectAccessReview `access`."""

    def __init__(self, token: Obj, access: Obj | Exception) -> None:
        super().__init__(token)
        self.access = access

    async def create(self, res: Resource, namespace: str | None, body: Obj) -> Obj:
        if res is TOKEN_REVIEWS:
            return await super().create(res, namespace, body)
        if isinstance(self.access, Exception):
            raise self.access
        return {"status": self.access}


@pytest.mark.parametrize(
    ("header", "token", "access", "expected"),
    [
        (None, {"authenticated": True, "user": POD_SA}, {"allowed": True}, 401),
        ("Basic dTpw", {"authenticated": True, "user": POD_SA}, {"allowed": True}, 401),
        ("Bearer t", {"authenticated": False}, {"allowed": True}, 401),
        ("Bearer t", {"authenticated": True, "user": POD_SA}, {"allowed": False}, 403),
        ("Bearer t", {"authenticated": True, "user": POD_SA}, ServerError("down", status=503), 500),
        ("Bearer t", {"authenticated": True, "user": POD_SA}, {"allowed": True}, None),
    ],
)
async def test_bearer_guard_answers_as_controller_runtime(
    header: str | None, token: Obj, access: Obj | Exception, expected: int | None
) -> None:
    api = TwoReviews(token, access)
    guard = BearerGuard(authenticator(api, FakeClock()), AccessAuthorizer(api, clock=FakeClock()))  # type: ignore[arg-type]
    assert await guard(header, "/metrics") == expected
