"""The TokenReview fallback for the tokens the issuer's keys cannot settle: its answer counts only for the
job's audience (defect 6), one review per token, refusals cached too, and at most `max_pending` at once (a
flood of junk tokens is turned away, not queued)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.resources import Obj
from kubetrain.common.progress.review import ReviewBudget
from kubetrain.common.testing import FakeClock

AUDIENCE = "kubetrain-progress/kubeflow.org/v1/namespaces/team-a/pytorchjobs/mnist/status"


class Reviews(InMemoryApiClient):
    """The API server's TokenReview answers: `audiences` is what it says the token was valid for."""

    def __init__(self, audiences: list[str], gate: asyncio.Event | None = None) -> None:
        super().__init__(clock=FakeClock())
        self.audiences, self.gate, self.sent = audiences, gate, 0

    async def create(self, res: object, namespace: str | None, body: Obj, *, read_back: bool = True) -> Obj:
        self.sent += 1
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


async def test_an_answer_for_another_audience_is_a_refusal() -> None:
    """A server that ignores spec.audiences answers with its own: that token is not meant for this job."""
    ignoring = ReviewBudget(Reviews(["https://kubernetes.default.svc"]), clock=FakeClock())
    assert await ignoring.review("t", AUDIENCE) is None
    honouring = ReviewBudget(Reviews([AUDIENCE]), clock=FakeClock())
    identity = await honouring.review("t", AUDIENCE)
    assert identity is not None and identity.audiences == (AUDIENCE,)


async def test_answers_are_cached_refusals_too() -> None:
    api = Reviews(["other"])
    budget = ReviewBudget(api, clock=FakeClock())
    for _ in range(5):
        assert await budget.review("junk", AUDIENCE) is None
    assert api.sent == 1


async def test_at_most_max_pending_reviews_at_once_the_rest_turned_away() -> None:
    gate = asyncio.Event()
    api = Reviews([AUDIENCE], gate)
    budget = ReviewBudget(api, max_pending=4, clock=FakeClock())
    waiting = [asyncio.ensure_future(budget.review(f"t{i}", AUDIENCE)) for i in range(4)]
    await _until(lambda: api.sent == 4)
    assert await budget.review("one-more", AUDIENCE) is None
    assert budget.turned_away == 1 and api.sent == 4
    gate.set()
    assert all(await asyncio.gather(*waiting))


async def test_a_review_nobody_waits_for_is_cancelled() -> None:
    gate = asyncio.Event()
    api = Reviews([AUDIENCE], gate)
    budget = ReviewBudget(api, max_pending=1, clock=FakeClock())
    waiter = asyncio.ensure_future(budget.review("t", AUDIENCE))
    await _until(lambda: api.sent == 1)
    waiter.cancel()  # the connection closed
    await _until(lambda: not budget.running)
    gate.set()
    assert await budget.review("t2", AUDIENCE) is not None, "the slot was given back"
