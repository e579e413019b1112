"""The operator's own verdict on a job, before anything is sent: what `<Kind>FailedValidation` would say.

Why: README promises that a job `kubetrain submit` accepts is accepted by the operator. The operator fails
a job for its spec in one place, `JobController.job_errors` (the API's rules, replica bounds, the
service-mode annotation, and each kind's own hook, e.g. PyTorchJob's rendered env or MPIJob's hostfile
size). `operator_errors` runs that same method, on the kind's controller class built over an empty
in-memory API (nothing is read or written: the rules are pure), so `submit`, `run --local` and
`TrainingClient` cannot drift from the operator: a rule added to a controller is checked on both sides.

The rules that depend on the operator's flags (`--cluster-domain` in MPI host names) are checked with
the defaults unless `settings` says otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from kubetrain.api import AnyJob, FieldError, InvalidJobError
from kubetrain.common.clock import SystemClock
from kubetrain.common.events import EventType, ObjectRef
from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.store import Store
from kubetrain.controllers.registry import load_controller
from kubetrain.controllers.settings import DEFAULT_SETTINGS, ConfiguredJobController, ControllerSettings

__all__ = ["check_operator_rules", "operator_errors"]


class _Unrecorded:
    """An EventRecorder for a controller that never reconciles."""

    def record(
        self, obj: Mapping[str, Any] | ObjectRef, event_type: EventType, reason: str, message: str
    ) -> None:
        return None


@cache
def _controller(kind: str, settings: ControllerSettings) -> ConfiguredJobController[Any]:
    cls = load_controller(kind)
    stores = {resource: Store() for resource in cls.resources_for(settings.gang)}
    return cls(
        settings=settings,
        api=InMemoryApiClient(),
        cache=stores,
        clock=SystemClock(),
        recorder=_Unrecorded(),
    )


def operator_errors(job: AnyJob, settings: ControllerSettings = DEFAULT_SETTINGS) -> list[FieldError]:
    """Why the operator would fail `job` with `<Kind>FailedValidation`; empty when it would not."""
    controller = _controller(job.KIND, settings)
    return controller.job_errors(controller.default(job))


def check_operator_rules(job: AnyJob, *, subject: str) -> None:
    """`InvalidJobError` (about `subject`) listing `operator_errors(job)`, if there are any."""
    errors = operator_errors(job)
    if errors:
        raise InvalidJobError(errors, subject=subject)
