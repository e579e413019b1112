"""A progress token checked with the issuer's keys, and, only when they cannot settle it, by a TokenReview.

Most tokens are settled by `kubetrain.common.progress.tokens` without asking the API server. The rest (a
token of another issuer the API server also accepts, a key the keys do not list yet, no keys at all) are
sent to the API server in a TokenReview for the job's audience by a `TokenAuthenticator`
(`kubetrain.common.kube.authn`), the bounded one every listener shares the design of:
- through the client the caller gives it (its own rate limit, apart from the controllers' and the status
  writes'), a few reviews at once and a bounded backlog: a token past that raises `ReviewsBusy` at once
  (the endpoint answers 503 and the pod retries later), so a stranger's made-up tokens never build a queue;
- one review per token and audience at a time, its answer cached (refusals too), never past the token's
  own `exp`;
- a review whose every waiter has gone (the connections closed) is cancelled;
- an answer counts only when the API server says the token was authenticated for the job's audience
  (`status.audiences` holds it): a server that ignores `spec.audiences` answers with its own.
"""

from __future__ import annotations

from kubetrain.common.kube.authn import Identity, TokenAuthenticator
from kubetrain.common.progress.tokens import TokenVerifier, Unsettled

__all__ = ["ProgressAuthenticator"]


class ProgressAuthenticator:
    """`authenticate(token, audience)`: the token verified with the issuer's keys, or, only when they cannot
    settle it, reviewed by `reviews` (`unsettled` counts those). Raises `ReviewsBusy` when the reviews are
    saturated, `ApiError` when the API server could not answer one."""

    def __init__(self, verifier: TokenVerifier, reviews: TokenAuthenticator) -> None:
        self._verifier, self.reviews = verifier, reviews
        self.unsettled = 0

    async def authenticate(self, token: str, audience: str) -> Identity | None:
        verdict = await self._verifier.verify(token, audience)
        if not isinstance(verdict, Unsettled):
            return verdict
        self.unsettled += 1
        audiences = (audience,)
        return self.reviews.peek(token, audiences=audiences) or await self.reviews.authenticate(
            token, audiences=audiences
        )
