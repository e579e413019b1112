"""The old name of `kubetrain.podcontract`, kept because users' training scripts import it.

README told users that `kubetrain.runtimes.contract` parses a pod's environment with the standard library
alone, so training images import it by that name. The definition moved to the bottom floor of the package,
`kubetrain.podcontract` (every floor uses it); this module re-exports its public names and nothing else.
New code, ours included, imports `kubetrain.podcontract`.
"""

from __future__ import annotations

from kubetrain.podcontract import *  # noqa: F403  (the same names, one definition)
from kubetrain.podcontract import __all__  # noqa: F401  (the same list)
