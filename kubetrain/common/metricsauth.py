"""How an operator's metrics listener serves: HTTPS with each scrape checked, as controller-runtime does.

By default the metrics listener serves HTTPS (a self-signed pair made at start, or the `tls.crt` and
`tls.key` of a certificate directory), and a scrape is served only to a bearer token that the API server
accepts (TokenReview) and that RBAC lets `get` the nonResourceURL `/metrics` (SubjectAccessReview): the
shipped ClusterRole `kubetrain-metrics-reader` grants it. The reviews go through `api`, the operator's
client for reviews (never the controllers'), a few at a time (`_REVIEWS`, `_BACKLOG`). Not secure
(`--metrics-secure=false`, the one way to opt out): plain, open HTTP on the metrics port, for those who
front the listener otherwise. The probe port never serves /metrics.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from kubetrain.common.errors import KubetrainError
from kubetrain.common.httpserver import Guard
from kubetrain.common.kube.authn import AccessAuthorizer, BearerGuard, TokenAuthenticator
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.servingcert import serving_context

__all__ = ["MetricsSecurity", "MetricsSetupError", "metrics_security"]

_REVIEWS, _BACKLOG = 2, 8
"""TokenReviews of scrapers' tokens at once, and more waiting: a Prometheus scrapes with one token (cached a
minute), so more distinct tokens than this at once are a flood, answered 503 at once (docs/metrics.md)."""


@dataclass(frozen=True)
class MetricsSecurity:
    """What the metrics listener serves with: a guard on each scrape and a TLS context (None: open, plain)."""

    guard: Guard | None = None
    tls: ssl.SSLContext | None = None


class MetricsSetupError(KubetrainError):
    """The metrics listener's certificate cannot be had; `usage` when the configuration names a bad one."""

    def __init__(self, message: str, *, usage: bool) -> None:
        super().__init__(message)
        self.usage = usage


async def metrics_security(*, secure: bool, cert_path: str | None, api: ApiClient) -> MetricsSecurity:
    """The guard and TLS context of a secure listener, or none; MetricsSetupError when the certificate
    cannot be loaded (`usage`) or made."""
    if not secure:
        return MetricsSecurity()
    try:
        tls = await serving_context(cert_path)
    except (ValueError, OSError, ssl.SSLError) as err:
        raise MetricsSetupError(str(err), usage=True) from err
    except RuntimeError as err:
        raise MetricsSetupError(str(err), usage=False) from err
    reviews = TokenAuthenticator(api, concurrency=_REVIEWS, backlog=_BACKLOG)
    return MetricsSecurity(BearerGuard(reviews, AccessAuthorizer(api)), tls)
