"""`GangRestartMode`: how a failure policy's gang restart restarts a job's pods (`--gang-restart`).

A leaf, apart from `kubetrain.common.job`, so that the command line (`kubetrain.common.cmdline`) can offer
the flag's values without loading the reconcile template. What each mode does, and how `auto` decides:
`kubetrain.common.job.inplace` and `kubetrain.common.job.restartmode`.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["GangRestartMode"]


class GangRestartMode(StrEnum):
    """How a gang restart restarts the pods (`--gang-restart`, and the job's ledger `gang.mode`)."""

    IN_PLACE = "in-place"
    """The kubelet restarts every container of each rank's pod in its sandbox: no new pods."""
    RECREATE = "recreate"
    """The operator deletes every pod of the job and creates them again."""
    AUTO = "auto"
    """In place when a Ready node declares `RestartAllContainersOnContainerExits`, else recreate."""
