"""Small parsers for the scalar values in the contract (integers, `host:port`), raising ContractError.

Every parser takes the variable name and a fix hint, so that each error says which variable is wrong and
what should have been set.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kubetrain.podcontract.errors import ContractError

__all__ = [
    "check_host",
    "check_port",
    "format_host_port",
    "optional",
    "parse_host_port",
    "parse_int",
    "require",
]

_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)$")
"""A DNS name or IPv4 address, or an IPv6 address in brackets: what may stand before `:port`."""


def require(env: Mapping[str, str], name: str, fix: str) -> str:
    """The value of `name`, which must be set and not empty."""
    value = env.get(name)
    if value is None or value.strip() == "":
        raise ContractError(name, "not set" if value is None else "set but empty", fix)
    return value.strip()


def optional(env: Mapping[str, str], name: str) -> str | None:
    """The stripped value of `name`, or None when it is unset or empty."""
    value = env.get(name)
    return value.strip() if value is not None and value.strip() != "" else None


def parse_int(value: str, name: str, fix: str, *, minimum: int = 0) -> int:
    """A decimal integer >= minimum."""
    try:
        number = int(value.strip(), 10)
    except ValueError:
        raise ContractError(name, f"{value!r} is not an integer", fix) from None
    if number < minimum:
        raise ContractError(name, f"{number} is less than {minimum}", fix)
    return number


def parse_host_port(value: str, name: str, fix: str) -> tuple[str, int]:
    """`host:port` or `[v6addr]:port` -> (host, port), port in 1..65535."""
    host, sep, port_text = value.strip().rpartition(":")
    if not sep or not host:
        raise ContractError(name, f"{value!r} is not of the form host:port", fix)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ContractError(name, f"{value!r}: an IPv6 address must be written [addr]:port", fix)
    port = parse_int(port_text, name, fix, minimum=1)
    if port > 65535:
        raise ContractError(name, f"port {port} is above 65535", fix)
    return host, port


def format_host_port(host: str, port: int) -> str:
    """The inverse of parse_host_port."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def check_host(host: str, name: str, fix: str) -> None:
    """`host` is a host name or address without a port (IPv6 in brackets)."""
    if not _HOST.match(host):
        raise ContractError(name, f"{host!r} is not a host name or address", fix)


def check_port(port: int, name: str, fix: str) -> None:
    """`port` is in 1..65535."""
    if not 1 <= port <= 65535:
        raise ContractError(name, f"port {port} is outside 1..65535", fix)
