"""Free local ports for the replicas of local runs, so that no two replicas, and no two runs, collide.

In a cluster every pod has its own IP, so all workers of a TFJob listen on the same port 2222. Locally all
replicas share 127.0.0.1, so each (replica, port) needs a port of its own, and two `kubetrain run --local`
at once must not pick the same one. The OS cannot help here: a port is chosen when the run starts but
bound later, by the training process. So the allocator:

- picks candidates below the kernel's ephemeral range (`ip_local_port_range`), where the OS never puts
  the random source ports of outgoing connections (gloo, gRPC and MPI open many);
- checks the port can be bound right now (wildcard address, so it also clashes with 127.0.0.1 binds);
- claims it (`claims.Claims`: an exclusively created file `<port>` holding the owner's pid, in a directory
  shared by all runs on the machine; a claim whose pid is gone is stale and is taken over).

`release()` removes the claims of this allocator; a crashed run's claims expire with its pid.
"""

from __future__ import annotations

import errno
import random
import socket
from collections.abc import Iterator
from pathlib import Path

from kubetrain.runtimes.local.claims import Claims
from kubetrain.runtimes.local.claims import default_claims_dir as claims_dir

__all__ = ["DEFAULT_PORT_RANGE", "PortAllocator", "PortsExhausted", "default_claims_dir", "safe_port_range"]

DEFAULT_PORT_RANGE = (20000, 32767)
"""Where candidates come from: below Linux's default ephemeral range (32768-60999)."""


class PortsExhausted(RuntimeError):
    """No free, unclaimed port is left in the range."""


def default_claims_dir() -> Path:
    """The claims directory shared by every local run of this user on this machine."""
    return claims_dir("ports")


def safe_port_range(
    wanted: tuple[int, int] = DEFAULT_PORT_RANGE,
    ephemeral_file: Path = Path("/proc/sys/net/ipv4/ip_local_port_range"),
) -> tuple[int, int]:
    """`wanted`, cut below the kernel's ephemeral range when the two overlap (unchanged when unreadable)."""
    low, high = wanted
    try:
        eph_low = int(ephemeral_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return wanted
    if low < eph_low <= high:
        high = eph_low - 1
    return (low, high)


class PortAllocator:
    """Hands out ports that are bindable now and claimed by this process; see the module docstring."""

    def __init__(
        self,
        *,
        claims_dir: Path | None = None,
        port_range: tuple[int, int] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._dir = claims_dir if claims_dir is not None else default_claims_dir()
        self._claims = Claims(self._dir)
        self._low, self._high = port_range if port_range is not None else safe_port_range()
        if not 1 <= self._low <= self._high <= 65535:
            raise ValueError(f"port range {self._low}-{self._high} is not within 1-65535")
        self._rng = rng or random.Random()
        self._claimed: list[int] = []

    @property
    def claimed(self) -> tuple[int, ...]:
        return tuple(self._claimed)

    def allocate(self) -> int:
        """A port no other run has claimed and nothing is bound to; claimed until `release()`."""
        self._dir.mkdir(parents=True, exist_ok=True)
        for port in self._candidates():
            if port in self._claimed or not _bindable(port):
                continue
            if self._claims.claim(str(port)):
                self._claimed.append(port)
                return port
        raise PortsExhausted(
            f"no free port in {self._low}-{self._high}: stop other local runs, "
            f"or remove stale claims in {self._dir}"
        )

    def release(self) -> None:
        """Drop every claim this allocator made."""
        for port in self._claimed:
            self._claims.release(str(port))
        self._claimed.clear()

    def _candidates(self) -> Iterator[int]:
        size = self._high - self._low + 1
        start = self._rng.randrange(size)
        for offset in range(size):
            yield self._low + (start + offset) % size


def _bindable(port: int) -> bool:
    for family, address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.bind((address, port))
        except OSError as err:
            if family == socket.AF_INET6 and err.errno in (errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL):
                continue  # no IPv6 on this machine: the IPv4 check decides
            return False
    return True
