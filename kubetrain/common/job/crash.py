"""Unexpected errors in a controller's hooks or reconcile steps: retried a few times, then shown on the job.

A hook is pure: given the same job, it raises again. So after `ERROR_ATTEMPTS` tries in a row (the work
queue's per-item backoff between them) the job is failed with `Failed/<Kind>ReconcileError`, whose message
(and the Warning Event of the same reason) names the hook and the error, instead of being retried for ever
with nothing to see but an empty State. Every try is counted in `kubetrain_job_hook_errors_total`; the
operator's log has each traceback. API errors are not this: they are the server's, retried with backoff.
"""

from __future__ import annotations

import traceback
from types import TracebackType

from kubetrain.common.reconcile import Request

__all__ = ["ERROR_ATTEMPTS", "HOOKS", "ErrorBudget", "failing_hook"]

ERROR_ATTEMPTS = 5
"""Reconciles of one job in a row that may raise before the job is failed."""

HOOKS = frozenset(
    {
        "default", "validate", "configure_pod", "verdict", "is_master", "wants_service", "ready_to_create",
        "gang_members", "extra_objects", "replica_types", "service_mode_of",
    }
)  # fmt: skip
"""The JobController methods a kind overrides (the JobContract's hooks)."""


class ErrorBudget:
    """Consecutive unexpected errors per job; a reconcile that returns forgets them."""

    def __init__(self, attempts: int = ERROR_ATTEMPTS) -> None:
        if attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {attempts}")
        self.attempts = attempts
        self._errors: dict[Request, int] = {}

    def failed(self, request: Request) -> bool:
        """Count one error of `request`; True when its budget is spent (and then forget it)."""
        count = self._errors.get(request, 0) + 1
        if count < self.attempts:
            self._errors[request] = count
            return False
        self._errors.pop(request, None)
        return True

    def forget(self, request: Request) -> None:
        self._errors.pop(request, None)


def failing_hook(err: BaseException, owner: object) -> str:
    """The name of the hook of `owner` that raised `err` (the outermost one on the traceback), else
    `reconcile`: a step of the template itself."""
    tb: TracebackType | None = err.__traceback__
    for frame, _ in traceback.walk_tb(tb):
        if frame.f_code.co_name in HOOKS and frame.f_locals.get("self") is owner:
            return frame.f_code.co_name
    return "reconcile"
