"""`kubetrain operator`'s training-progress flags (`--progress-*`) turned into `ProgressOptions`.

Kept apart from `options` (which calls `progress_options` and names the flag of a ValueError in
its one-line message) so that each module stays small; nothing here connects or imports operator code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import final
from urllib.parse import urlsplit

__all__ = ["SERVICE", "ProgressOptions", "progress_options"]

SERVICE = "kubetrain-operator"
"""The Service in front of the operator's pods (manifests/base/operator/service.yaml) that the default
--progress-url names."""


@final
@dataclass(frozen=True, slots=True)
class ProgressOptions:
    """The training-progress endpoint (KEP-2779): where it listens, how pods reach it."""

    address: tuple[str, int]
    url: str
    audience: str
    interval: float
    hosts: tuple[str, ...]
    """The serving certificate's names: the URL's host, then the Service's DNS names."""
    max_connections: int = 1024
    idle_timeout: float = 120.0
    namespace: str = ""
    """The operator's own namespace ("" outside a cluster), where the replicas register their certificates."""


def progress_options(
    address: tuple[str, int],
    *,
    url: str | None,
    audience: str,
    interval: float,
    namespace: str,
    domain: str,
    max_connections: int = 1024,
    idle_timeout: float = 120.0,
) -> ProgressOptions:
    """The options for an endpoint bound to `address` in an operator of `namespace` ("" outside a
    cluster); ValueError names the flag at fault."""
    if not 0 < interval <= 3600:
        raise ValueError(f"--progress-interval={interval:g}: write seconds from 1 to 3600")
    if not 1 <= max_connections <= 65536:
        raise ValueError(
            f"--progress-max-connections={max_connections}: write a number from 1 to 65536, above the "
            "number of pods that report"
        )
    if not 0 < idle_timeout <= 3600:
        raise ValueError(f"--progress-idle-timeout={idle_timeout:g}: write seconds from 1 to 3600")
    if not audience.strip():
        raise ValueError("--progress-audience is empty: name the audience of the pods' tokens")
    url = _url(url, namespace, address[1])
    hostname = urlsplit(url).hostname or ""
    return ProgressOptions(
        address=address,
        url=url,
        audience=audience.strip(),
        interval=float(interval),
        max_connections=max_connections,
        idle_timeout=float(idle_timeout),
        hosts=tuple(dict.fromkeys((hostname, *_service_names(namespace, domain)))),
        namespace=namespace,
    )


def _url(given: str | None, namespace: str, port: int) -> str:
    url = (given or "").strip().rstrip("/")
    if not url:
        if not namespace:
            raise ValueError(
                "--progress-url is needed outside a cluster: write how pods reach the endpoint, "
                "e.g. https://HOST:8443 (or --progress-bind-address=0)"
            )
        url = f"https://{SERVICE}.{namespace}.svc:{port}"
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname or parts.path:
        raise ValueError(f"--progress-url={url!r}: write https://HOST[:PORT], with no path")
    return url


def _service_names(namespace: str, domain: str) -> list[str]:
    """The names pods may use for the Service in `namespace` (none outside a cluster)."""
    if not namespace:
        return []
    return [
        SERVICE,
        f"{SERVICE}.{namespace}",
        f"{SERVICE}.{namespace}.svc",
        f"{SERVICE}.{namespace}.svc.{domain}",
    ]
