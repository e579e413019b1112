"""How `kubetrain operator` serves /metrics: HTTPS with each scrape checked, as controller-runtime does.

By default (`--metrics-secure`) the metrics listener serves HTTPS (a self-signed pair made at start, or
`--metrics-cert-path`'s), and a scrape is served only to a bearer token that the API server accepts
(TokenReview) and that RBAC lets `get` the nonResourceURL `/metrics` (SubjectAccessReview): the shipped
ClusterRole `kubetrain-metrics-reader` grants it. `--metrics-secure=false` serves plain, open HTTP.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from kubetrain.cli.exitcodes import ExitCode
from kubetrain.cli.operator_options import OperatorOptions
from kubetrain.common.httpserver import Guard
from kubetrain.common.kube.authn import AccessAuthorizer, BearerGuard, TokenAuthenticator
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.servingcert import serving_context

__all__ = ["MetricsSecurity", "MetricsSetupError", "metrics_security"]


@dataclass(frozen=True)
class MetricsSecurity:
    guard: Guard | None = None
    tls: ssl.SSLContext | None = None


class MetricsSetupError(Exception):
    def __init__(self, code: ExitCode, message: str) -> None:
        super().__init__(message)
        self.code = code


async def metrics_security(options: OperatorOptions, api: ApiClient) -> MetricsSecurity:
    """What the metrics listener serves with; MetricsSetupError when the certificate cannot be had."""
    if options.metrics_address is None or not options.metrics_secure:
        return MetricsSecurity()
    try:
        tls = await serving_context(options.metrics_cert_path)
    except (ValueError, OSError, ssl.SSLError) as err:
        raise MetricsSetupError(ExitCode.USAGE, str(err)) from err
    except RuntimeError as err:
        raise MetricsSetupError(ExitCode.FAILED, str(err)) from err
    return MetricsSecurity(BearerGuard(TokenAuthenticator(api), AccessAuthorizer(api)), tls)
