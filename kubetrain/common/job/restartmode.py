"""Which way a new job's gang restarts: in place, or by recreating its pods (`--gang-restart`).

In place needs a kubelet that knows `RestartAllContainers`. Such a kubelet says so in its Node's
`status.declaredFeatures` (`RestartAllContainersOnContainerExits`, NodeDeclaredFeatures, beta in 1.36), and
the scheduler then places a pod that uses the action only on nodes that declare it. `auto` chooses in place
when at least one Ready node declares it; where only some nodes do, the scheduler keeps such jobs on those.

The nodes are read lazily, only when a job with a failure policy needs a decision, and the answer is
kept for `CACHE_SECONDS`. An operator that may not list nodes (the single-namespace install has no
cluster-wide rights) or cannot reach them recreates, and says so once in its log. The decision is made
once per job and kept in its ledger (`GangState.mode`): a running gang never changes its way of restarting,
whatever the nodes or an operator restart say later.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from kubetrain.common.clock import Clock
from kubetrain.common.errors import ApiError
from kubetrain.common.gangrestart import GangRestartMode
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.resources import NODES

__all__ = ["CACHE_SECONDS", "RESTART_ALL_FEATURE", "GangRestartChooser", "declares_restart_all"]

log = logging.getLogger("kubetrain.operator")

RESTART_ALL_FEATURE = "RestartAllContainersOnContainerExits"
CACHE_SECONDS = 300.0
"""How long one reading of the nodes decides for new jobs (a list of every node is not cheap)."""


def declares_restart_all(node: Mapping[str, Any]) -> bool:
    """Whether `node` is Ready and its kubelet declares `RestartAllContainersOnContainerExits`."""
    status = node.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ()
    )
    return ready and RESTART_ALL_FEATURE in (status.get("declaredFeatures") or ())


class GangRestartChooser:
    """`mode()`: in place or recreate, for a job deciding now, from the setting and (auto) the nodes."""

    def __init__(self, setting: GangRestartMode, api: ApiClient, clock: Clock) -> None:
        self.setting = setting
        self._api = api
        self._clock = clock
        self._lock = asyncio.Lock()
        self._known: tuple[float, GangRestartMode] | None = None
        self._warned = False

    async def mode(self) -> GangRestartMode:
        if self.setting is not GangRestartMode.AUTO:
            return self.setting
        async with self._lock:  # one list at a time, however many jobs decide at once
            now = self._clock.monotonic()
            if self._known is None or now - self._known[0] >= CACHE_SECONDS:
                self._known = (now, await self._read())
            return self._known[1]

    async def _read(self) -> GangRestartMode:
        try:
            nodes = await self._api.list(NODES, managed_fields=False)
        except ApiError as err:
            if not self._warned:
                log.warning("gang restarts recreate pods: cannot list nodes (%s)", err)
                self._warned = True
            return GangRestartMode.RECREATE
        if any(declares_restart_all(n) for n in nodes.items):
            return GangRestartMode.IN_PLACE
        return GangRestartMode.RECREATE
