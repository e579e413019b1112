"""Pods' tokens verified in the operator, as Kubeflow Trainer does: the issuer's keys read from the API
server's discovery document and JWKS, then signature, issuer, audience, expiry and the bound pod checked
locally. A token of another issuer or an unknown key is left to a TokenReview (UNSETTLED); an unknown key id
makes the keys be read again, at most once per `min_gap`. The real API server's keys are the integration
tier's (test_progress_tokens.py)."""

from __future__ import annotations

import base64
import subprocess
import sys
import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from kubetrain.common.errors import TransportError
from kubetrain.common.kube.resources import Obj
from kubetrain.common.progress.tokens import DISCOVERY_PATH, JWKS_PATH, UNSETTLED, IssuerKeys, TokenVerifier
from kubetrain.common.testing import FakeClock

ISSUER = "https://kubernetes.default.svc.cluster.local"
AUDIENCE = "kubetrain-progress/kubeflow.org/v1/namespaces/team-a/pytorchjobs/mnist/status"


class ApiServer:
    """The discovery document and the JWKS, as the API server serves them; `keys` may rotate."""

    def __init__(self) -> None:
        self.keys: dict[str, rsa.RSAPrivateKey] = {"k1": _key()}
        self.reads: list[str] = []
        self.down = False

    async def fetch(self, path: str) -> Obj:
        self.reads.append(path)
        if self.down:
            raise TransportError("connection refused")
        if path == DISCOVERY_PATH:
            return {"issuer": ISSUER, "jwks_uri": f"{ISSUER}{JWKS_PATH}"}
        assert path == JWKS_PATH
        return {"keys": [_public(kid, key) for kid, key in self.keys.items()]}

    def token(self, kid: str = "k1", **change: Any) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": ISSUER, "aud": [AUDIENCE], "sub": "system:serviceaccount:team-a:default",
            "iat": now, "nbf": now, "exp": now + 3600,
            "kubernetes.io": {"namespace": "team-a", "pod": {"name": "mnist-master-0", "uid": "u-1"}},
        }  # fmt: skip
        claims.update(change)
        claims = {k: v for k, v in claims.items() if v is not None}
        return jwt.encode(claims, self.keys.get(kid) or _key(), algorithm="RS256", headers={"kid": kid})


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _public(kid: str, key: rsa.RSAPrivateKey) -> dict[str, Any]:
    jwk: dict[str, Any] = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    return {**jwk, "kid": kid, "alg": "RS256", "use": "sig"}


@pytest.fixture
async def server() -> ApiServer:
    return ApiServer()


async def _verifier(server: ApiServer, clock: FakeClock | None = None) -> tuple[TokenVerifier, IssuerKeys]:
    keys = IssuerKeys(server.fetch, clock=clock or FakeClock(), min_gap=30.0)
    await keys.load()
    return TokenVerifier(keys), keys


async def test_a_projected_token_for_the_jobs_audience_is_verified_with_its_pod(server: ApiServer) -> None:
    verifier, _ = await _verifier(server)
    identity = await verifier.verify(server.token(), AUDIENCE)
    assert identity is not UNSETTLED and identity is not None
    assert identity.username == "system:serviceaccount:team-a:default"
    assert (identity.pod_name, identity.pod_uid) == ("mnist-master-0", "u-1")
    assert server.reads == [DISCOVERY_PATH, JWKS_PATH], "read once, then every token is checked here"


@pytest.mark.parametrize(
    "change",
    [
        {"aud": ["kubetrain-progress/kubeflow.org/v1/namespaces/team-a/pytorchjobs/other/status"]},
        {"aud": ["https://kubernetes.default.svc"]},
        {"exp": -60, "iat": -3700, "nbf": -3700},
        {"nbf": 600},
        {"kubernetes.io": {"namespace": "team-a", "pod": {"name": "mnist-master-0"}}},
        {"kubernetes.io": {"namespace": "team-a"}},
        {"exp": None},
    ],
    ids=["another job", "the API server", "expired", "not yet", "no pod uid", "no pod", "no expiry"],
)
async def test_a_token_the_keys_refuse_is_refused(server: ApiServer, change: dict[str, Any]) -> None:
    # times are given as seconds from now, made into timestamps here: a value made at collection would drift
    # (a "not yet" token collected ten minutes before it runs is valid by then)
    now = int(time.time())
    timed = ("exp", "iat", "nbf")
    change = {k: now + v if k in timed and isinstance(v, int) else v for k, v in change.items()}
    verifier, _ = await _verifier(server)
    assert await verifier.verify(server.token(**change), AUDIENCE) is None


async def test_a_forged_signature_and_junk_are_refused(server: ApiServer) -> None:
    verifier, _ = await _verifier(server)
    header, claims, _signature = server.token().split(".")
    forged = f"{header}.{claims}.{server.token(sub='x').split('.')[2]}"
    assert await verifier.verify(forged, AUDIENCE) is None
    assert await verifier.verify("not-a-jwt", AUDIENCE) is None
    assert await verifier.verify("[[[[.[[[[.[[[[", AUDIENCE) is None
    nested = base64.urlsafe_b64encode(b"[" * 5000).decode().rstrip("=")
    assert await verifier.verify(f"{nested}.{nested}.x", AUDIENCE) is None, "no RecursionError escapes"
    header = base64.urlsafe_b64encode(b'{"alg":"RS256","kid":"k1"}').decode().rstrip("=")
    assert await verifier.verify(f"{header}.{nested}.x", AUDIENCE) is None


async def test_another_issuer_or_no_keys_is_left_to_a_token_review(server: ApiServer) -> None:
    verifier, _ = await _verifier(server)
    assert await verifier.verify(server.token(iss="https://old-issuer"), AUDIENCE) is UNSETTLED
    server.down = True
    cold, _ = await _verifier(server)
    assert await cold.verify(server.token(), AUDIENCE) is UNSETTLED


async def test_a_rotated_key_is_read_at_once_and_unknown_ones_at_most_once_per_gap(server: ApiServer) -> None:
    clock = FakeClock()
    verifier, keys = await _verifier(server, clock)
    await clock.advance(31.0)
    server.keys["k2"] = _key()  # the API server signs with a new key
    assert await verifier.verify(server.token("k2"), AUDIENCE) is not None
    assert keys.loads == 2
    for _ in range(100):  # a stranger's made-up key ids: one read per gap, however many
        assert await verifier.verify(server.token("made-up"), AUDIENCE) is UNSETTLED
    assert keys.loads == 2, "read a moment ago: not again"
    await clock.advance(30.0)
    assert await verifier.verify(server.token("made-up"), AUDIENCE) is UNSETTLED
    assert keys.loads == 3


def test_reading_the_keys_loads_neither_pyjwt_nor_cryptography() -> None:
    """At rest (no report yet) the operator stays small: PyJWT and cryptography come with the first token."""
    script = (
        "import asyncio, sys\n"
        "from kubetrain.common.progress.tokens import IssuerKeys, TokenVerifier\n"
        "async def fetch(path):\n"
        "    return {'issuer': 'https://x'} if 'well-known' in path else {'keys': [{'kid': 'k', 'kty': 'RSA',"
        " 'n': 'sXch', 'e': 'AQAB', 'alg': 'RS256'}]}\n"
        "keys = IssuerKeys(fetch)\n"
        "asyncio.run(keys.load())\n"
        "TokenVerifier(keys)\n"
        "assert keys.issuer == 'https://x'\n"
        "print(sorted(m for m in ('jwt', 'cryptography') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
