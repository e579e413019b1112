"""The TokenReview fallback for the tokens the issuer's keys cannot settle: only those are reviewed, for the
job's own audience; the answer counts only for that audience (defect 6); one review per token and
audience, refusals cached too; past the bounded reviews a token is refused at once (`ReviewsBusy`, 503)
rather than queued; a review nobody waits for any more is cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import jwt
import pytest

from kubetrain.common.errors import TransportError
from kubetrain.common.kube.authn import ReviewsBusy, TokenAuthenticator
from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.resources import Obj
from kubetrain.common.progress.review import ProgressAuthenticator
from kubetrain.common.progress.tokens import IssuerKeys, TokenVerifier
from kubetrain.common.testing import FakeClock

AUDIENCE = "kubetrain-progress/kubeflow.org/v1/namespaces/team-a/pytorchjobs/mnist/status"
OTHER = "kubetrain-progress/kubeflow.org/v1/namespaces/team-a/pytorchjobs/other/status"


class Reviews(InMemoryApiClient):
    """The API server's TokenReview answers: `audiences` is what it says the token was valid for."""

    def __init__(self, audiences: list[str], gate: asyncio.Event | None = None) -> None:
        super().__init__(clock=FakeClock())
        self.audiences, self.gate = audiences, gate
        self.sent: list[Obj] = []

    async def create(self, res: object, namespace: str | None, body: Obj, *, read_back: bool = True) -> Obj:
        self.sent.append(body["spec"])
        if self.gate is not None:
            await self.gate.wait()
        user = {"username": "system:serviceaccount:team-a:default"}
        return {"status": {"authenticated": True, "user": user, "audiences": self.audiences}}


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(100):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("never came true")


async def _no_keys(path: str) -> Obj:
    raise TransportError("the API server cannot be read")


def _progress(api: Reviews, **bounds: int) -> ProgressAuthenticator:
    """The endpoint's authenticator whose keys settle nothing (none could be read): every JWT is reviewed."""
    clock = FakeClock()
    verifier = TokenVerifier(IssuerKeys(_no_keys, clock=clock), clock=clock)
    return ProgressAuthenticator(verifier, TokenAuthenticator(api, clock=clock, **bounds))


ELSEWHERE_KEY = "the key of an issuer this operator does not know"


def _jwt(subject: str = "a") -> str:
    return jwt.encode({"iss": "https://elsewhere", "sub": subject}, ELSEWHERE_KEY, algorithm="HS256")


async def test_an_answer_for_another_audience_is_a_refusal() -> None:
    """A server that ignores spec.audiences answers with its own: that token is not meant for this job."""
    ignoring = Reviews(["https://kubernetes.default.svc"])
    assert await _progress(ignoring).authenticate(_jwt(), AUDIENCE) is None
    assert ignoring.sent == [{"token": _jwt(), "audiences": [AUDIENCE]}], "asked for the job's audience"
    honouring = _progress(Reviews([AUDIENCE]))
    identity = await honouring.authenticate(_jwt(), AUDIENCE)
    assert identity is not None and identity.audiences == (AUDIENCE,)
    assert honouring.unsettled == 1


async def test_only_a_token_the_keys_cannot_settle_is_reviewed() -> None:
    api = Reviews([AUDIENCE])
    assert await _progress(api).authenticate("not-a-jwt", AUDIENCE) is None
    assert api.sent == [], "a token no issuer would sign is refused without asking the API server"


async def test_answers_are_cached_per_audience_refusals_too() -> None:
    api = Reviews([AUDIENCE])
    progress = _progress(api)
    for _ in range(5):
        assert await progress.authenticate(_jwt(), OTHER) is None
        assert await progress.authenticate(_jwt(), AUDIENCE) is not None
    assert [spec["audiences"] for spec in api.sent] == [[OTHER], [AUDIENCE]]


async def test_past_the_bounded_reviews_a_token_is_refused_at_once_not_queued() -> None:
    gate = asyncio.Event()
    api = Reviews([AUDIENCE], gate)
    progress = _progress(api, concurrency=2, backlog=2)
    waiting = [asyncio.ensure_future(progress.authenticate(_jwt(f"t{i}"), AUDIENCE)) for i in range(4)]
    await _until(lambda: len(api.sent) == 2)
    with pytest.raises(ReviewsBusy):
        await progress.authenticate(_jwt("one-more"), AUDIENCE)
    assert len(api.sent) == 2 and progress.reviews.reviewing == 4
    gate.set()
    assert all(await asyncio.gather(*waiting))
    assert len(api.sent) == 4


async def test_a_review_nobody_waits_for_is_cancelled() -> None:
    gate = asyncio.Event()
    api = Reviews([AUDIENCE], gate)
    progress = _progress(api, concurrency=1, backlog=0)
    waiter = asyncio.ensure_future(progress.authenticate(_jwt("t"), AUDIENCE))
    await _until(lambda: len(api.sent) == 1)
    waiter.cancel()  # the connection closed
    await _until(lambda: not progress.reviews.reviewing)
    gate.set()
    assert await progress.authenticate(_jwt("t2"), AUDIENCE) is not None, "the slot was given back"
