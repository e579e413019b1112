"""Kueue installed after kubetrain: while the Workload API is not served, look for it again every 30 s,
and once it is, stop the operator so that its Deployment restarts it with the integration on.

The integration is decided at start-up (`integration.resolve`): a managed kind's controller is built with
its Workload informer and the queueing step, and a Manager's informers are fixed once it runs. Without a
second look, an operator that started before Kueue (the usual order on a new cluster, or Kueue briefly
unavailable) would run every job labelled with a queue at once, outside every quota, for its whole life.
Restarting is the robust way to turn the integration on, as controller-runtime operators do when an API
they need appears: the process stops with a line that says why (exit code 1), and the new process finds
the API at start-up. Each re-check is one list of ResourceFlavors; it is cancelled with the Manager.

A refusal (Forbidden) is about RBAC, not about Kueue being absent, and is not re-checked: the start-up line
names what to apply, and the operator reads it again when restarted. With `--kueue-integration=none`
nothing is checked.
"""

from __future__ import annotations

import asyncio
import logging

from kubetrain.common.errors import ApiError, Forbidden, NotFound
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kueue.integration import NONE
from kubetrain.common.kueue.names import QUEUE_LABEL, RESOURCE_FLAVORS

__all__ = ["RECHECK_SECONDS", "KueueServed", "restart_when_served"]

log = logging.getLogger("kubetrain.kueue")

RECHECK_SECONDS = 30.0
"""How often an operator without Kueue's Workload API looks for it again."""


class KueueServed(RuntimeError):
    """Kueue's Workload API is served now, and this operator started without it: it must restart."""


async def restart_when_served(api: ApiClient, setting: str) -> None:
    """A Manager runnable for an operator whose integration is off (`setting`: its `--kueue-integration`):
    never returns; raises `KueueServed` once the Workload API is served, which stops the Manager."""
    if setting.strip().lower() == NONE:
        await asyncio.Event().wait()  # nothing to look for: a runnable lives as long as the Manager
    absent = await _absent(api)
    if absent:
        log.warning(
            "Kueue integration: off while Kueue's API is not served: jobs labelled %s are not queued and "
            "run at once, outside any Kueue quota; looking for the API again every %.0f s, and restarting "
            "with the integration on once it is served",
            QUEUE_LABEL,
            RECHECK_SECONDS,
        )
    while absent:
        await asyncio.sleep(RECHECK_SECONDS)
        absent = await _absent(api)
    served = KueueServed(
        "Kueue's Workload API (kueue.x-k8s.io/v1beta2) is served now; the operator stops so that it "
        "restarts with the Kueue integration on"
    )
    log.warning("Kueue integration: %s", served)
    raise served


async def _absent(api: ApiClient) -> bool:
    """Whether the Workload API is still worth looking for (not served, or the server did not answer);
    a refusal idles for good (see the module)."""
    try:
        await api.list(RESOURCE_FLAVORS, managed_fields=False)
    except Forbidden:  # start-up logged what to apply
        await asyncio.Event().wait()
    except NotFound:
        return True
    except ApiError as err:
        log.debug("Kueue integration: looking for Kueue's API: %s", err)
        return True
    return False
