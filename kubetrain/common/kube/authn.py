"""Who is calling, and may they: bearer tokens checked by the API server, with a small cache.

Endpoints the operator serves to other pods (`/metrics`; a training-progress endpoint) must not trust
the network. As controller-runtime's `filters.WithAuthenticationAndAuthorization` does, a caller's
bearer token is sent to the API server in a `TokenReview` (who is it?) and the answer in a
`SubjectAccessReview` (may it do this?). Both answers are cached for a while, so a scraper every 15 s
costs the API server nothing after its first scrape: a token 1 minute (allowed or not), an allowed
access 5 minutes, a denied one 30 seconds, as controller-runtime's defaults.

`Identity` carries what a TokenReview says, the bound pod's name included (for a projected
ServiceAccount token: `user.extra["authentication.kubernetes.io/pod-name"]`), and `TokenAuthenticator`
takes the `audiences` the token must be meant for (empty: the API server's own; a caller may name others
per token, e.g. each job's own). An answer counts only when the API server says the token was valid for
one of them (`status.audiences`): an API server that ignores `spec.audiences` answers with its own.

Anyone who can reach a listener can send tokens, so the reviews are bounded: a `TokenAuthenticator` runs
its reviews on a client of its own (never the controllers': its rate limit is not theirs), at most
`concurrency` at once, with at most `backlog` more tokens waiting for a slot; past that, `authenticate`
raises `ReviewsBusy` at once (the listener answers 503) and nothing is queued. A review is cancelled when
the last caller waiting for it gives up (its connection closed), so abandoned requests leave no work
behind. Refusals are cached as accepted tokens are (by a hash of the token), so a junk token repeated costs
one review a minute.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Generic, TypeVar

from kubetrain.common.clock import Clock, SystemClock
from kubetrain.common.errors import ApiError, KubetrainError
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.resources import Obj, Resource

__all__ = [
    "POD_NAME_EXTRA",
    "POD_UID_EXTRA",
    "SUBJECT_ACCESS_REVIEWS",
    "TOKEN_REVIEWS",
    "AccessAuthorizer",
    "BearerGuard",
    "Identity",
    "NonResourceAccess",
    "ResourceAccess",
    "ReviewsBusy",
    "TokenAuthenticator",
    "bearer_token",
    "token_expiry",
]

TOKEN_REVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False)
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False
)
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"

log = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class Identity:
    """An authenticated caller, as the API server's TokenReview named it."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    audiences: tuple[str, ...] = ()
    """The audiences of the request the token was found valid for."""

    @property
    def pod_name(self) -> str | None:
        """The pod a projected ServiceAccount token is bound to (None for other tokens)."""
        return next(iter(self.extra.get(POD_NAME_EXTRA, ())), None)

    @property
    def pod_uid(self) -> str | None:
        return next(iter(self.extra.get(POD_UID_EXTRA, ())), None)

    @classmethod
    def from_review(cls, status: Obj) -> Identity:
        user = status.get("user") or {}
        extra = {str(k): tuple(v or ()) for k, v in (user.get("extra") or {}).items()}
        return cls(
            username=str(user.get("username", "")),
            uid=str(user.get("uid", "")),
            groups=tuple(user.get("groups") or ()),
            extra=extra,
            audiences=tuple(status.get("audiences") or ()),
        )


@dataclass(frozen=True)
class NonResourceAccess:
    """A request for a URL that is not an API resource, e.g. GET /metrics (verb in lower case)."""

    path: str
    verb: str = "get"

    def spec(self) -> Obj:
        return {"nonResourceAttributes": {"path": self.path, "verb": self.verb}}


@dataclass(frozen=True)
class ResourceAccess:
    """A verb on an API resource (its subresource and name optional), in a namespace or cluster-wide."""

    verb: str
    resource: str
    group: str = ""
    namespace: str = ""
    name: str = ""
    subresource: str = ""

    def spec(self) -> Obj:
        attrs = {
            "verb": self.verb,
            "group": self.group,
            "resource": self.resource,
            "namespace": self.namespace,
            "name": self.name,
            "subresource": self.subresource,
        }
        return {"resourceAttributes": {k: v for k, v in attrs.items() if v}}


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header value (None when there is none)."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def token_expiry(token: str) -> float | None:
    """The `exp` claim (seconds since the epoch) of a JWT, read without checking its signature: only ever
    used to keep a cached answer of the API server, which did check it, no longer than the token lives.
    None when the token is not a JWT or has no numeric `exp`."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (binascii.Error, ValueError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None


class _TtlCache(Generic[K, V]):
    """At most `size` answers, each kept for the seconds given when stored; the oldest goes first."""

    def __init__(self, clock: Clock, size: int) -> None:
        self._clock = clock
        self._size = size
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K) -> V | None:
        hit = self._items.get(key)
        if hit is None:
            return None
        if hit[0] <= self._clock.monotonic():
            del self._items[key]
            return None
        return hit[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        self._items[key] = (self._clock.monotonic() + ttl, value)
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


class ReviewsBusy(KubetrainError):
    """Too many tokens under review at once: the caller is refused now (503 with `Retry-After`)."""

    retry_after = 1.0


class _Review:
    """One token's review under way, and how many callers wait for it."""

    def __init__(self, task: asyncio.Task[Identity | None]) -> None:
        self.task = task
        self.waiters = 0


class TokenAuthenticator:
    """`authenticate(token)`: the caller's Identity, or None when the API server does not accept it.

    `api`: a client of the authenticator's own (see the module docstring). `audiences`: what the token
    must be meant for (a TokenReview's `spec.audiences`); empty means the API server's own. An accepted
    token is cached `ttl` seconds, a refused one `refusal_ttl`, by a hash of the token (never the token
    itself), at most `size` of them. Errors talking to the API server (`ApiError`) are raised, not cached.
    An accepted JWT is never kept past its own `exp`. Callers that ask about a token whose review is under
    way wait for that review (one TokenReview per token, however many requests carry it meanwhile); the
    review is cancelled when the last of them gives up. At most `concurrency` reviews run at once and
    `backlog` wait; a new token past that raises `ReviewsBusy`.
    """

    def __init__(
        self,
        api: ApiClient,
        *,
        audiences: Sequence[str] = (),
        ttl: float = 60.0,
        refusal_ttl: float = 60.0,
        size: int = 4096,
        concurrency: int = 4,
        backlog: int = 64,
        clock: Clock | None = None,
    ) -> None:
        self._api = api
        self._audiences = list(audiences)
        self._ttl, self._refusal_ttl = ttl, refusal_ttl
        self._clock = clock or SystemClock()
        self._cache: _TtlCache[bytes, Identity | bool] = _TtlCache(self._clock, size)
        self._reviewing: dict[bytes, _Review] = {}
        self._slots = asyncio.Semaphore(concurrency)
        self._most = concurrency + backlog

    @property
    def reviewing(self) -> int:
        """Tokens under review or waiting for a slot now."""
        return len(self._reviewing)

    def peek(self, token: str, *, audiences: Sequence[str] | None = None) -> Identity | None:
        """The cached Identity of a token accepted within the ttl (and before its `exp`), without asking
        the API server; None when none is cached (never reviewed lately, or refused). `audiences`: as for
        `authenticate`."""
        cached = self._cache.get(_key(token, self._wanted(audiences)))
        return cached if isinstance(cached, Identity) else None

    async def authenticate(self, token: str, *, audiences: Sequence[str] | None = None) -> Identity | None:
        """The token's Identity, or None when refused. `audiences` (None: the authenticator's own) is what
        this token must be meant for; answers are cached per token and audiences."""
        wanted = self._wanted(audiences)
        key = _key(token, wanted)
        cached = self._cache.get(key)
        if cached is not None:
            return cached if isinstance(cached, Identity) else None
        review = self._reviewing.get(key) or self._start(key, token, wanted)
        review.waiters += 1
        try:
            return await asyncio.shield(review.task)  # one caller giving up does not end it for the others
        finally:
            review.waiters -= 1
            if review.waiters == 0 and not review.task.done():  # the last one gave up: so does the review
                review.task.cancel()
                self._forget(key, review)

    def _wanted(self, audiences: Sequence[str] | None) -> tuple[str, ...]:
        return tuple(self._audiences if audiences is None else audiences)

    def _start(self, key: bytes, token: str, audiences: tuple[str, ...]) -> _Review:
        if len(self._reviewing) >= self._most:
            raise ReviewsBusy(f"{len(self._reviewing)} tokens under review already")
        review = _Review(asyncio.ensure_future(self._review(key, token, audiences)))
        self._reviewing[key] = review
        review.task.add_done_callback(functools.partial(self._reviewed, key, review))
        return review

    def _forget(self, key: bytes, review: _Review) -> None:
        if self._reviewing.get(key) is review:
            del self._reviewing[key]

    def _reviewed(self, key: bytes, review: _Review, task: asyncio.Task[Identity | None]) -> None:
        self._forget(key, review)
        if not task.cancelled():
            task.exception()  # retrieved here too: every caller may have given up waiting

    async def _review(self, key: bytes, token: str, audiences: tuple[str, ...]) -> Identity | None:
        spec: Obj = {"token": token}
        if audiences:
            spec["audiences"] = list(audiences)
        async with self._slots:
            review = await self._api.create(TOKEN_REVIEWS, None, {"spec": spec})
        identity = _accepted(review.get("status") or {}, audiences)
        ttl = self._ttl if identity is not None else self._refusal_ttl
        if identity is not None:
            expires = token_expiry(token)
            if expires is not None:
                ttl = min(ttl, expires - self._clock.now().timestamp())
        if ttl > 0:
            self._cache.put(key, identity or False, ttl)
        return identity


def _key(token: str, audiences: tuple[str, ...]) -> bytes:
    """The cache key of a token's answer for `audiences` (a hash: the token itself is never kept)."""
    return hashlib.sha256("\n".join((*audiences, token)).encode()).digest()


def _accepted(status: Obj, audiences: tuple[str, ...]) -> Identity | None:
    """A TokenReview's Identity when it authenticated the token for one of `audiences` (any, when none)."""
    if not status.get("authenticated"):
        return None
    identity = Identity.from_review(status)
    if audiences and not set(audiences) & set(identity.audiences):
        log.warning("a TokenReview accepted a token, but not for its audiences %s", ", ".join(audiences))
        return None
    return identity


class AccessAuthorizer:
    """`allowed(identity, access)`: the API server's SubjectAccessReview answer, cached.

    An allowed answer is kept `allow_ttl` seconds, a denied one `deny_ttl`. Errors (`ApiError`) are raised.
    """

    def __init__(
        self,
        api: ApiClient,
        *,
        allow_ttl: float = 300.0,
        deny_ttl: float = 30.0,
        size: int = 1024,
        clock: Clock | None = None,
    ) -> None:
        self._api = api
        self._allow_ttl = allow_ttl
        self._deny_ttl = deny_ttl
        self._cache: _TtlCache[tuple[object, ...], bool] = _TtlCache(clock or SystemClock(), size)

    async def allowed(self, identity: Identity, access: NonResourceAccess | ResourceAccess) -> bool:
        key = (identity.username, identity.uid, identity.groups, tuple(identity.extra.items()), access)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        spec: Obj = {"user": identity.username, "groups": list(identity.groups), **access.spec()}
        if identity.uid:
            spec["uid"] = identity.uid
        if identity.extra:
            spec["extra"] = {k: list(v) for k, v in identity.extra.items()}
        review = await self._api.create(SUBJECT_ACCESS_REVIEWS, None, {"spec": spec})
        allowed = bool((review.get("status") or {}).get("allowed"))
        self._cache.put(key, allowed, self._allow_ttl if allowed else self._deny_ttl)
        return allowed


class BearerGuard:
    """controller-runtime's `filters.WithAuthenticationAndAuthorization` for one endpoint's requests.

    Called with the request's Authorization header and path: None when the caller may GET the path (as a
    nonResourceURL), else the status to answer: 401 without a token or with one the API server does not
    accept, 403 when RBAC does not allow it, 500 when the API server could not be asked, 503 when too many
    tokens are under review already (`ReviewsBusy`).
    """

    def __init__(self, authenticator: TokenAuthenticator, authorizer: AccessAuthorizer) -> None:
        self._authn = authenticator
        self._authz = authorizer

    async def __call__(self, authorization: str | None, path: str) -> HTTPStatus | None:
        token = bearer_token(authorization)
        if token is None:
            return HTTPStatus.UNAUTHORIZED
        try:
            who = await self._authn.authenticate(token)
            if who is None:
                return HTTPStatus.UNAUTHORIZED
            if await self._authz.allowed(who, NonResourceAccess(path)):
                return None
        except ReviewsBusy:
            return HTTPStatus.SERVICE_UNAVAILABLE
        except ApiError as err:
            log.warning("cannot check a request for %s with the API server: %s", path, err)
            return HTTPStatus.INTERNAL_SERVER_ERROR
        log.debug("%s may not get %s", who.username, path)
        return HTTPStatus.FORBIDDEN
