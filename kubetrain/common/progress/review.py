"""The TokenReview of a token the issuer's keys cannot settle, on a budget of its own.

Most tokens are settled by `kubetrain.common.progress.tokens` without asking the API server. The rest (a
token of another issuer the API server also accepts, a key the keys do not list yet, no keys at all) are
sent to the API server in a TokenReview for the job's audience, here:
- through the client the caller gives (its own rate limit, apart from the controllers' and the status
  writes'), at most `max_pending` reviews at once: a token past that is refused at once (the pod retries
  later), so a stranger's made-up tokens never build a queue;
- one review per token and audience at a time, its answer cached `ttl` seconds (refusals too), never past
  the token's own `exp`;
- a review whose every waiter has gone (the connections closed) is cancelled;
- an answer counts only when the API server says the token was authenticated for the job's audience
  (`status.audiences` holds it): a server that ignores `spec.audiences` answers with its own.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging

from kubetrain.common.clock import Clock, SystemClock
from kubetrain.common.kube.authn import TOKEN_REVIEWS, Identity, token_expiry
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.progress.tokens import TokenVerifier, Unsettled

__all__ = ["ProgressAuthenticator", "ReviewBudget"]

log = logging.getLogger(__name__)


class ReviewBudget:
    """`review(token, audience)`: the Identity the API server gives the token for `audience`, or None."""

    def __init__(
        self,
        api: ApiClient,
        *,
        max_pending: int = 32,
        ttl: float = 60.0,
        size: int = 4096,
        clock: Clock | None = None,
    ) -> None:
        self._api, self._max, self._ttl, self._size = api, max_pending, ttl, size
        self._clock = clock or SystemClock()
        self._answers: dict[bytes, tuple[float, Identity | None]] = {}
        self._running: dict[bytes, tuple[asyncio.Task[Identity | None], list[int]]] = {}
        self.reviews = 0
        """TokenReviews sent so far."""
        self.turned_away = 0
        """Tokens refused because `max_pending` reviews were under way."""

    @property
    def running(self) -> int:
        """Reviews under way."""
        return len(self._running)

    async def review(self, token: str, audience: str) -> Identity | None:
        key = hashlib.sha256(f"{audience}\n{token}".encode()).digest()
        cached = self._answers.get(key)
        if cached is not None and cached[0] > self._clock.monotonic():
            return cached[1]
        running = self._running.get(key)
        if running is None:
            if len(self._running) >= self._max:
                self.turned_away += 1
                return None
            running = (asyncio.ensure_future(self._review(key, token, audience)), [0])
            self._running[key] = running
            running[0].add_done_callback(lambda _: self._running.pop(key, None))
        task, waiters = running
        waiters[0] += 1
        try:
            return await asyncio.shield(task)
        finally:
            waiters[0] -= 1
            if waiters[0] == 0 and not task.done():
                task.cancel()  # nobody waits for it any more

    async def _review(self, key: bytes, token: str, audience: str) -> Identity | None:
        self.reviews += 1
        answer = await self._api.create(
            TOKEN_REVIEWS, None, {"spec": {"token": token, "audiences": [audience]}}
        )
        status = answer.get("status") or {}
        identity = None
        if status.get("authenticated") and audience in (status.get("audiences") or ()):
            identity = Identity.from_review(status)
        elif status.get("authenticated"):
            log.warning("a TokenReview accepted a progress token, but not for its audience %s", audience)
        self._keep(key, identity, token)
        return identity

    def _keep(self, key: bytes, identity: Identity | None, token: str) -> None:
        now, ttl = self._clock.monotonic(), self._ttl
        expires = token_expiry(token)
        if expires is not None:
            ttl = min(ttl, expires - self._clock.now().timestamp())
        if ttl <= 0:
            return
        if len(self._answers) >= self._size:
            self._answers = {k: v for k, v in self._answers.items() if v[0] > now}
            while len(self._answers) >= self._size:
                del self._answers[next(iter(self._answers))]
        self._answers[key] = (now + ttl, identity)


class ProgressAuthenticator:
    """`authenticate(token, audience)`: the token verified with the issuer's keys, or, only when they cannot
    settle it, reviewed by the API server within the budget (`unsettled` counts those)."""

    def __init__(self, verifier: TokenVerifier, budget: ReviewBudget) -> None:
        self._verifier, self._budget = verifier, budget
        self.unsettled = 0

    async def authenticate(self, token: str, audience: str) -> Identity | None:
        verdict = await self._verifier.verify(token, audience)
        if isinstance(verdict, Unsettled):
            self.unsettled += 1
            return await self._budget.review(token, audience)
        return verdict
