"""The one error the runtime contract raises: the environment a replica received is missing or malformed.

It names the variable, what is wrong with it, and what the operator (or whoever starts the process by hand)
should have set, so that a pod's log tells the user how to fix the job rather than showing a traceback.
"""

from __future__ import annotations

__all__ = ["ContractError"]


class ContractError(ValueError):
    """An environment variable or document that the operator renders is missing or malformed."""

    def __init__(self, variable: str, problem: str, fix: str) -> None:
        self.variable = variable
        self.problem = problem
        self.fix = fix
        super().__init__(f"{variable}: {problem}. {fix}")
