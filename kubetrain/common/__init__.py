"""The reusable operator library, knowing nothing of TF, PyTorch or MPI.

The runtime (errors, clock, reconcile, queue, controller, informers via kube/, leader election,
manager, events, metrics, expectations), the replica-job template (job/), and the way to run an
operator of one's own kinds: `run(MyController)` (flags) or `Operator([MyController], config)`.

Those three names load on first use, so that importing one leaf module (`kubetrain.common.errors`)
does not load the whole runtime.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubetrain.common.cmdline import run
    from kubetrain.common.operator import Operator, OperatorConfig

__all__ = ["Operator", "OperatorConfig", "run"]

_HOMES = {"run": "kubetrain.common.cmdline", "Operator": "kubetrain.common.operator"}
_HOMES["OperatorConfig"] = _HOMES["Operator"]


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module 'kubetrain.common' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
