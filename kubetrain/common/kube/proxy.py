"""Which proxy a connection to the API server goes through, chosen as client-go chooses it.

client-go takes the kubeconfig's `proxy-url` when there is one, else Go's `http.ProxyFromEnvironment`
(golang.org/x/net/http/httpproxy). Its rules, followed here:

- `HTTPS_PROXY` for an https server, `HTTP_PROXY` for an http one; the upper-case name first, then the
  lower-case one. `HTTP_PROXY` is ignored when `REQUEST_METHOD` is set (a CGI process: the variable can
  come from a request's `Proxy:` header).
- A proxy written without a scheme is `http://`. `http://` and `https://` proxies are supported (an
  https proxy is reached over TLS with the client's TLS settings, as Go does); others are refused.
- No proxy for `localhost` or a loopback address, nor for a host that `NO_PROXY` (or `no_proxy`) names:
  a comma-separated list of `*` (no proxy at all), IP addresses, CIDR blocks, or domain names with an
  optional port; `example.com` matches it and its subdomains, `.example.com` (or `*.example.com`) only
  the subdomains.

The environment is read once, when the client is built.
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

__all__ = ["Proxy", "proxy_from_environment"]

_SCHEMES = ("http", "https")
_Ip = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Proxy:
    """A proxy's address, whether it is reached over TLS, and its `Proxy-Authorization` (Basic) if any."""

    host: str
    port: int
    tls: bool = False
    authorization: str | None = None

    @classmethod
    def parse(cls, url: str, *, source: str = "proxy-url") -> Proxy:
        """`[http|https]://[user:password@]host[:port]`; ValueError naming `source` otherwise."""
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in _SCHEMES or not parts.hostname:
            raise ValueError(
                f"{source} {url!r}: only http://host:port and https://host:port proxies are supported"
            )
        auth = None
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            auth = f"Basic {base64.b64encode(pair).decode()}"
        tls = parts.scheme == "https"
        return cls(parts.hostname, parts.port or (443 if tls else 80), tls, auth)


def proxy_from_environment(server: str, env: Mapping[str, str]) -> Proxy | None:
    """The proxy `env` names for requests to `server` (an http(s) URL), or None for a direct connection."""
    parts = urlsplit(server)
    tls = parts.scheme == "https"
    names: tuple[str, ...]
    if tls:
        names = ("HTTPS_PROXY", "https_proxy")
    elif "REQUEST_METHOD" in env:
        names = ()
    else:
        names = ("HTTP_PROXY", "http_proxy")
    url = next((env[name] for name in names if env.get(name)), "")
    host = (parts.hostname or "").lower()
    if not url or not _use_proxy(host, parts.port or (443 if tls else 80), env):
        return None
    return Proxy.parse(url, source=next(name for name in names if env.get(name)))


def _use_proxy(host: str, port: int, env: Mapping[str, str]) -> bool:
    if host == "localhost":
        return False
    ip = _ip(host)
    if ip is not None and ip.is_loopback:
        return False
    no_proxy = env.get("NO_PROXY") or env.get("no_proxy") or ""
    entries = [entry.strip().lower() for entry in no_proxy.split(",") if entry.strip()]
    return not any(_excludes(entry, host, ip, port) for entry in entries)


def _excludes(entry: str, host: str, ip: _Ip | None, port: int) -> bool:
    """Whether one NO_PROXY entry covers host:port."""
    if entry == "*":
        return True
    if "/" in entry:
        try:
            return ip is not None and ip in ipaddress.ip_network(entry, strict=False)
        except ValueError:
            return False
    name, entry_port = _split_port(entry)
    if entry_port is not None and entry_port != port:
        return False
    if (entry_ip := _ip(name)) is not None:
        return ip == entry_ip
    if name.startswith("*."):
        name = name[1:]
    if name.startswith("."):
        return host.endswith(name)
    return host == name or host.endswith(f".{name}")


def _split_port(entry: str) -> tuple[str, int | None]:
    if entry.startswith("["):  # [v6]:port
        addr, _, rest = entry[1:].partition("]")
        return addr, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    name, colon, port = entry.rpartition(":")
    if colon and port.isdigit() and ":" not in name:
        return name, int(port)
    return entry, None


def _ip(host: str) -> _Ip | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
