"""The local network: every replica is 127.0.0.1, and every (replica, port) gets a local port of its own.

In a cluster the operator addresses replicas by their headless Service's DNS name and the same port on
every pod (`tf-worker-1.ns.svc:2222`). Locally those names do not resolve, and all replicas share one
address, so the environment and arguments each replica receives are rewritten, consistently for all of
them, from one table of (replica, port) -> local port. What is rewritten, wherever it appears in an env
value or an argument:

- `host:port` where `host` names a replica (`<pod>`, `<pod>.<ns>`, `<pod>.<ns>.svc[.<domain>]`, and the
  job-Service/StatefulSet form `<pod>.<subdomain>[.<ns>.svc[.<domain>]]`) -> `127.0.0.1:<local port>`;
  this covers TF_CONFIG, PET_RDZV_ENDPOINT and any user variable of that shape;
- `localhost:port`, `127.0.0.1:port` and `0.0.0.0:port`, when `port` is a declared port of the pod's own
  main container -> the same host with that replica's local port (a process talking to itself);
- an env value that is exactly a replica's host name -> `127.0.0.1`, and its sibling port variable
  (`X_ADDR`/`X_HOST` next to `X_PORT`, e.g. MASTER_ADDR and MASTER_PORT) -> that replica's local port;
- an argument that is exactly a host name, or `--flag=host` -> `127.0.0.1`.

Not rewritten (documented limits): a port a program hard-codes without it appearing in its env or args,
and files. MPI hostfiles keep the pod names on purpose: the local remote-shell agent ignores host names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Container, Mapping
from dataclasses import dataclass, field, replace

__all__ = ["LOCAL_ADDRESS", "Hosts", "Network", "ReplicaNames"]

LOCAL_ADDRESS = "127.0.0.1"
_SELF_ALIASES = frozenset({"localhost", "127.0.0.1", "0.0.0.0"})
_HOST_PORT = re.compile(r"(?<![\w.-])([A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?):(\d{1,5})(?![\w])")
_ADDR_SUFFIXES = ("_ADDR", "_ADDRESS", "_HOST", "_HOSTNAME")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class Hosts:
    """The replica names (each a pod and its Service) of one job in one namespace, and the pods' own
    host names where they differ (`spec.hostname`, e.g. the MPI launcher's `<job>-launcher`)."""

    namespace: str
    replicas: Container[str]
    """Answers "is this a replica's name?"; `ReplicaNames` does it without listing every replica."""
    aliases: Mapping[str, str] = field(default_factory=dict)
    """host name -> replica."""
    subdomain: str = ""
    """The pods' subdomain (the job's Service), under which `<pod>.<subdomain>` alone names a replica."""

    def replica_of(self, host: str) -> str | None:
        """The replica a DNS name designates, or None (see the module docstring for the forms)."""
        first, _, rest = host.lower().rstrip(".").partition(".")
        replica = first if first in self.replicas else self.aliases.get(first)
        if replica is None:
            return None
        if self._namespace_suffix(rest) or (self.subdomain and rest == self.subdomain):
            return replica
        sub, _, after = rest.partition(".")
        return replica if _LABEL.match(sub) and after and self._namespace_suffix(after) else None

    def _namespace_suffix(self, rest: str) -> bool:
        ns = self.namespace
        return rest in ("", ns, f"{ns}.svc") or rest.startswith(f"{ns}.svc.")


@dataclass(frozen=True)
class ReplicaNames(Container[str]):
    """The names `<job>-<rtype>-<index>` of a job's replicas, as a membership test: it costs the same for
    ten replicas as for ten thousand, so a replica count never sizes the local runner's memory."""

    job: str
    counts: Mapping[str, int]
    """Replicas per replica type (lower case)."""

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        for rtype, count in self.counts.items():
            prefix = f"{self.job}-{rtype}-"
            index = name[len(prefix) :]
            if name.startswith(prefix) and index.isdigit() and str(int(index)) == index:
                return int(index) < count
        return False


@dataclass
class Network:
    """The (replica, port) -> local port table of one local run, filled on demand by `allocate`."""

    hosts: Hosts
    allocate: Callable[[], int]
    own_ports: dict[str, frozenset[int]] = field(default_factory=dict)
    """Declared container ports of each replica's main container: what a self-address may refer to."""
    _ports: dict[tuple[str, int], int] = field(default_factory=dict)

    def declare(self, replica: str, ports: Collection[int], *, hostname: str = "") -> None:
        """Record the ports `replica`'s main container declares (and allocate their local ports), and the
        pod's own host name when it has one."""
        if hostname and hostname != replica and hostname not in self.hosts.aliases:
            self.hosts = replace(self.hosts, aliases={**self.hosts.aliases, hostname: replica})
        self.own_ports[replica] = frozenset(ports)
        for port in sorted(ports):
            self.local_port(replica, port)

    def local_port(self, replica: str, port: int) -> int:
        """The local port standing for `port` of `replica` (allocated the first time it is asked for)."""
        key = (replica, port)
        if key not in self._ports:
            self._ports[key] = self.allocate()
        return self._ports[key]

    @property
    def table(self) -> Mapping[tuple[str, int], int]:
        return dict(self._ports)

    # rewriting --------------------------------------------------------------------------------------
    def rewrite_env(self, env: Mapping[str, str], *, own: str) -> dict[str, str]:
        """The env of replica `own` with every address rewritten (see the module docstring)."""
        out = {name: self.rewrite_text(value, own=own) for name, value in env.items()}
        for name, value in env.items():
            host = value.strip()
            replica = self.hosts.replica_of(host) if host else None
            if replica is not None:
                out[name] = LOCAL_ADDRESS
            elif host.lower() in _SELF_ALIASES:
                replica = own  # e.g. a master told to listen on localhost:MASTER_PORT
            port_name = _port_partner(name, env) if replica is not None else None
            if replica is not None and port_name is not None:
                out[port_name] = str(self.local_port(replica, int(env[port_name].strip())))
        return out

    def rewrite_args(self, args: list[str], *, own: str) -> list[str]:
        """The arguments of replica `own`, rewritten like env values; bare host names too."""
        return [self._rewrite_arg(arg, own) for arg in args]

    def rewrite_text(self, text: str, *, own: str) -> str:
        """Every `host:port` in `text` that designates a replica (or the replica itself) made local."""

        def replace(match: re.Match[str]) -> str:
            host, port = match.group(1), int(match.group(2))
            if port > 65535:
                return match.group(0)
            replica = self.hosts.replica_of(host)
            if replica is not None:
                return f"{LOCAL_ADDRESS}:{self.local_port(replica, port)}"
            if host.lower() in _SELF_ALIASES and port in self.own_ports.get(own, ()):
                return f"{host}:{self.local_port(own, port)}"
            return match.group(0)

        return _HOST_PORT.sub(replace, text)

    def _rewrite_arg(self, arg: str, own: str) -> str:
        flag, sep, value = arg.partition("=")
        if sep and flag.startswith("-") and self.hosts.replica_of(value) is not None:
            return f"{flag}={LOCAL_ADDRESS}"
        if self.hosts.replica_of(arg) is not None:
            return LOCAL_ADDRESS
        return self.rewrite_text(arg, own=own)


def _port_partner(name: str, env: Mapping[str, str]) -> str | None:
    """`X_PORT` for an `X_ADDR`-like variable, when it is set to a port number."""
    for suffix in _ADDR_SUFFIXES:
        if name.endswith(suffix):
            candidate = name[: -len(suffix)] + "_PORT"
            value = env.get(candidate, "").strip()
            if value.isdigit() and 0 < int(value) <= 65535:
                return candidate
    return None
