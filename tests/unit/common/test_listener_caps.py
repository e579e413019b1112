"""The overall connection cap under a flood from many addresses: the victim is the peer holding most, and
among equals the one that connected last: a pod that opened its one connection before the flood keeps it."""

from __future__ import annotations

from typing import Any

from kubetrain.common.listener import _Peers


class Conn:
    def __init__(self, name: str) -> None:
        self.name, self.cancelled = name, False

    def cancel(self) -> None:
        self.cancelled = True


def test_a_flood_of_single_connections_from_many_addresses_never_evicts_the_pod_that_came_first() -> None:
    peers = _Peers(per_peer=8, total=3)
    pod = Conn("pod")
    peers.admit("10.0.0.9", pod)  # type: ignore[arg-type]
    flood: list[Any] = []
    for n in range(50):
        conn = Conn(f"attacker-{n}")
        flood.append(conn)
        peers.admit(f"127.0.0.{n + 2}", conn)  # type: ignore[arg-type]
    assert not pod.cancelled, "the pod's one connection was evicted by a tie with the attackers"
    assert sum(c.cancelled for c in flood) == 48 and peers.count == 3


def test_the_peer_holding_most_is_evicted_first() -> None:
    peers = _Peers(per_peer=8, total=4)
    pod, many = Conn("pod"), [Conn(f"loop-{n}") for n in range(3)]
    peers.admit("10.0.0.9", pod)  # type: ignore[arg-type]
    for conn in many:
        peers.admit("127.0.0.2", conn)  # type: ignore[arg-type]
    peers.admit("127.0.0.3", Conn("late"))  # type: ignore[arg-type]
    assert many[0].cancelled and not pod.cancelled
