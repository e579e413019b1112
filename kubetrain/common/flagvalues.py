"""The values of an operator's flags, checked: addresses, namespaces, booleans, the leader Lease.

`kubetrain.common.cmdline` declares the flags every operator has; these turn what was typed into typed
values before anything connects, so that a typo is one line naming the flag and the fix (`FlagError`),
never a traceback from deep inside the operator. `kubetrain operator` uses the same rules for the same
flags, so both spell their errors alike.
"""

from __future__ import annotations

import argparse
import ipaddress
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: building a parser needs none of the runtime
    from kubetrain.common.leader import LeaderElectionConfig

__all__ = [
    "DNS_SUBDOMAIN",
    "SERVICE_ACCOUNT_NAMESPACE_FILE",
    "Address",
    "BoolFlag",
    "FlagError",
    "leader_election",
    "own_namespace",
    "parse_address",
    "parse_namespaces",
    "split_list",
]

SERVICE_ACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

Address = tuple[str, int]
"""(host, port) to listen on; host "" means every interface."""


class FlagError(ValueError):
    """A flag has a bad value; the message names the flag and the fix."""


class BoolFlag(argparse.Action):
    """`--flag` or `--flag=true|false` (Go flag style, as Kubernetes Deployments write it)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs="?", metavar="true|false", **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        if values is None:
            setattr(namespace, self.dest, True)
            return
        text = str(values).strip().lower()
        if text not in ("true", "false", "1", "0", "yes", "no"):
            parser.error(f"{option_string}={values}: write {self.option_strings[0]}=true or =false")
        setattr(namespace, self.dest, text in ("true", "1", "yes"))


def parse_address(flag: str, text: str) -> Address | None:
    """`[HOST]:PORT` (IPv6 as `[::1]:8080`) -> (host, port); `0` -> None (off). FlagError names `flag`."""
    text = text.strip()
    if text == "0":
        return None
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise FlagError(f"{flag}={text!r}: write [HOST]:PORT, e.g. :8081 or 127.0.0.1:8081, or 0 to disable")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if host and host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError as err:
            raise FlagError(f"{flag}={text!r}: the host must be an IP address or empty (all)") from err
    return host, int(port_text)


def split_list(values: Sequence[str] | None) -> list[str]:
    """A repeatable flag's values, each of which may be comma-separated, as one list."""
    return [part.strip() for value in values or () for part in value.split(",") if part.strip()]


def parse_namespaces(values: Sequence[str] | None) -> tuple[str, ...] | None:
    """`--namespace` (repeated or comma-separated) -> the namespaces watched; None: every namespace."""
    names = split_list(values)
    if values and not names:
        raise FlagError("--namespace is empty: name a namespace, or leave the flag out for all namespaces")
    for name in names:
        if not _DNS_LABEL.match(name):
            raise FlagError(
                f"--namespace={name!r}: not a namespace name (lower-case letters, digits and '-', at most 63)"
            )
    return tuple(dict.fromkeys(names)) or None


def leader_election(
    args: argparse.Namespace, *, lease_name: str, environ: Mapping[str, str]
) -> LeaderElectionConfig:
    """The Lease of the parsed `--leader-election-*` flags (its name `lease_name` unless
    --leader-election-id names one; its namespace from the flag, $POD_NAMESPACE or the pod's own)."""
    from kubetrain.common.leader import LeaderElectionConfig, default_identity  # noqa: PLC0415

    namespace = args.leader_election_namespace or environ.get("POD_NAMESPACE") or own_namespace()
    if not namespace:
        raise FlagError(
            "--leader-election-namespace is needed outside a cluster: name the namespace of the Lease "
            "(or run a single replica with --no-leader-elect)"
        )
    if not _DNS_LABEL.match(namespace):
        raise FlagError(f"--leader-election-namespace={namespace!r}: not a namespace name")
    name = args.leader_election_id or lease_name
    if not DNS_SUBDOMAIN.match(name):
        raise FlagError(f"--leader-election-id={name!r}: not a valid Lease name")
    try:
        return LeaderElectionConfig(
            namespace=namespace,
            name=name,
            identity=default_identity(),
            lease_duration=args.leader_election_lease_duration,
            renew_deadline=args.leader_election_renew_deadline,
            retry_period=args.leader_election_retry_period,
        )
    except ValueError as err:
        raise FlagError(
            f"--leader-election-retry-period/-renew-deadline/-lease-duration: {err}; "
            "each must be shorter than the next"
        ) from err


def own_namespace() -> str:
    """The namespace of the pod this runs in ("" outside a cluster)."""
    try:
        return SERVICE_ACCOUNT_NAMESPACE_FILE.read_text(encoding="utf-8").strip()
    except OSError:
        return ""
