"""The pods' projected tokens, verified in the operator against the API server's signing keys.

Why: a TokenReview per token costs the API server a request and the report a round trip, and at the start
of 500 jobs the reviews queue behind one another past the pods' timeout. Kubeflow Trainer verifies each
token itself (OIDC, go-oidc), and so does this module, with PyJWT:
- `IssuerKeys` reads the service-account issuer's discovery document (`/.well-known/openid-configuration`)
  and its keys (`/openid/v1/jwks`) from the API server (RBAC: the ClusterRole
  `system:service-account-issuer-discovery`), at start, every `refresh` seconds, and again when a token
  names a key it does not know (at most once per `min_gap` seconds, however many tokens ask: a stranger's
  made-up key ids cost the API server nothing more);
- `TokenVerifier.verify(token, audience)` checks the signature, the issuer, the audience (each job's own),
  the expiry and the not-before time, and requires the claims a projected token carries (`sub`, the pod's
  name and uid in `kubernetes.io`). It answers an `Identity` (as a TokenReview's, the pod's name and uid in
  its `extra`), None for a token it refuses, or `UNSETTLED` for one the keys cannot settle: another issuer
  (the API server may accept several), a key id still unknown after a refresh, or no keys yet (the API
  server unreachable at start). Only those go to a TokenReview (`kubetrain.common.progress.review`).
PyJWT needs `cryptography` for RS256 and ES256, which takes about 9 MiB once imported: the documents are
read at start as plain JSON, and PyJWT imported with the first token to verify, so an operator whose pods
do not report (or that serves no progress endpoint) never loads it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from kubetrain.common.clock import Clock, SystemClock
from kubetrain.common.errors import ApiError
from kubetrain.common.kube.authn import POD_NAME_EXTRA, POD_UID_EXTRA, Identity
from kubetrain.common.kube.resources import Obj

__all__ = ["DISCOVERY_PATH", "JWKS_PATH", "UNSETTLED", "IssuerKeys", "TokenVerifier", "Unsettled"]

log = logging.getLogger(__name__)

DISCOVERY_PATH: Final = "/.well-known/openid-configuration"
JWKS_PATH: Final = "/openid/v1/jwks"
"""Where the API server serves its keys (whatever host the discovery document's `jwks_uri` names, which a
pod-less operator outside the cluster may not reach)."""
LEEWAY: Final = 10.0
"""Seconds of clock difference allowed between the API server that signed and this process."""

Fetch = Callable[[str], Awaitable[Obj]]
"""GET a JSON document from the API server by path (`KubeApiClient.get_path`)."""


class Unsettled:
    """A token the keys cannot settle (see the module docstring)."""

    def __repr__(self) -> str:
        return "UNSETTLED"


UNSETTLED: Final = Unsettled()


class IssuerKeys:
    """The issuer and its keys, by key id; `load()` reads both again (see the module docstring)."""

    def __init__(
        self, fetch: Fetch, *, clock: Clock | None = None, refresh: float = 3600.0, min_gap: float = 30.0
    ) -> None:
        self._fetch, self._clock = fetch, clock or SystemClock()
        self._refresh, self._min_gap = refresh, min_gap
        self.issuer: str | None = None
        self._jwks: dict[str, Obj] = {}
        """The keys as read, by key id."""
        self._keys: dict[str, Any] = {}
        """The `jwt.PyJWK` of each key id asked for so far (None: one PyJWT cannot use)."""
        self._loaded_at: float | None = None
        self._loading: asyncio.Task[None] | None = None
        self.loads = 0
        """Reads of the keys so far (successful or not)."""

    def key(self, kid: str) -> Any | None:
        """The `jwt.PyJWK` of `kid`, or None (also for a key PyJWT cannot use)."""
        if kid not in self._keys and kid in self._jwks:
            import jwt  # noqa: PLC0415  (with cryptography: only once a token is verified)

            try:
                self._keys[kid] = jwt.PyJWK.from_dict(self._jwks[kid])
            except (jwt.PyJWKError, jwt.InvalidKeyError) as err:
                log.warning("service-account key %s cannot be used: %s", kid, err)
                self._keys[kid] = None
        return self._keys.get(kid)

    async def load(self) -> None:
        """Read the discovery document and the keys (one read at a time: callers share it). A failure is
        logged and the keys known so far are kept."""
        if self._loading is None:
            self._loading = asyncio.ensure_future(self._load())
            self._loading.add_done_callback(self._loaded)
        await asyncio.shield(self._loading)

    def _loaded(self, task: asyncio.Task[None]) -> None:
        self._loading = None

    async def _load(self) -> None:
        self.loads += 1
        self._loaded_at = self._clock.monotonic()
        try:
            discovery = await self._fetch(DISCOVERY_PATH)
            keys = (await self._fetch(JWKS_PATH)).get("keys")
        except ApiError as err:
            log.warning("cannot read the service-account issuer's keys from the API server: %s", err)
            return
        jwks = {str(k["kid"]): k for k in keys or () if isinstance(k, dict) and k.get("kid")}
        if not jwks:
            log.warning("the API server's JWKS lists no usable key")
            return
        self.issuer = str(discovery.get("issuer") or "") or None
        self._jwks, self._keys = jwks, {k: v for k, v in self._keys.items() if k in jwks}
        log.info("service-account issuer %s: %d signing keys", self.issuer, len(self._jwks))

    async def refresh_for(self, kid: str) -> None:
        """A token names `kid`, unknown: read the keys again, unless they were read within `min_gap`."""
        if kid in self._jwks:
            return
        if self._loaded_at is None or self._clock.monotonic() - self._loaded_at >= self._min_gap:
            await self.load()

    async def run(self) -> None:
        """Read the keys now, then every `refresh` seconds (retried sooner, after `min_gap`, while none are
        known), until cancelled."""
        while True:
            await self.load()
            await self._clock.sleep(self._refresh if self._jwks else self._min_gap)


class TokenVerifier:
    """`verify(token, audience)`: see the module docstring."""

    def __init__(self, keys: IssuerKeys, *, clock: Clock | None = None) -> None:
        self._keys, self._clock = keys, clock or SystemClock()

    async def verify(self, token: str, audience: str) -> Identity | Unsettled | None:
        import jwt  # noqa: PLC0415  (see IssuerKeys._load)

        try:
            header = jwt.get_unverified_header(token)
            issuer = jwt.decode(token, options={"verify_signature": False}).get("iss")
        except (jwt.InvalidTokenError, ValueError, RecursionError):
            return None  # not a JWT at all (or JSON nested past the parser): no issuer would take it
        kid = header.get("kid")
        if self._keys.issuer is None or issuer != self._keys.issuer or not isinstance(kid, str):
            return UNSETTLED
        await self._keys.refresh_for(kid)
        key = self._keys.key(kid)
        if key is None:
            return UNSETTLED
        try:
            claims = jwt.decode(
                token,
                key=key.key,
                algorithms=[key.algorithm_name],
                audience=audience,
                issuer=issuer,
                leeway=LEEWAY,
                options={"require": ["exp", "iat", "sub", "aud", "iss"]},
            )
        except jwt.InvalidTokenError as err:
            log.debug("progress token refused: %s", err)
            return None
        return _identity(claims, audience)


def _identity(claims: Mapping[str, Any], audience: str) -> Identity | None:
    """The Identity a projected token's claims stand for; None when it names no pod by name and uid."""
    kube = claims.get("kubernetes.io")
    pod = kube.get("pod") if isinstance(kube, Mapping) else None
    if not isinstance(pod, Mapping) or not pod.get("name") or not pod.get("uid"):
        return None
    extra = {POD_NAME_EXTRA: (str(pod["name"]),), POD_UID_EXTRA: (str(pod["uid"]),)}
    return Identity(username=str(claims["sub"]), extra=extra, audiences=(audience,))
