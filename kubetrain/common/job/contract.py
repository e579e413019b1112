"""`JobContract`: what the reconcile steps need of a job kind's controller, in one place.

The steps behind `JobController.reconcile()` (`sync`, `observe`, `render`, `report`) receive the controller
they run for; this Protocol is all they may use of it, and all a new kind implements (by subclassing
`JobController`, which satisfies it): the kind's identity, the pure hooks, and the few services the
template wires (API client, caches, clock, Events, metrics, expectations, the write fence, the ledger's
keys not written yet).

It is a leaf: it imports no step and not the controller, so `common/job` has no import circle (an
import-linter contract keeps the steps off `controller`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from kubetrain.api import FieldError, KindInfo, TrainingJob

if TYPE_CHECKING:
    from kubetrain.common.clock import Clock
    from kubetrain.common.events import EventRecorder
    from kubetrain.common.expectations import Expectations
    from kubetrain.common.job.extras import ExtraObject
    from kubetrain.common.job.facts import Observed
    from kubetrain.common.job.fence import WriteFence
    from kubetrain.common.job.gang import GangScheduling
    from kubetrain.common.job.ledger import Unwritten
    from kubetrain.common.job.queueing import Queueing
    from kubetrain.common.job.restartmode import GangRestartChooser
    from kubetrain.common.job.services import ServiceMode
    from kubetrain.common.job.verdict import Verdict
    from kubetrain.common.kube.client import ApiClient
    from kubetrain.common.kube.resources import Obj, Resource
    from kubetrain.common.kube.store import Store
    from kubetrain.common.metrics import Metrics
    from kubetrain.common.progress.inject import ProgressInjection

__all__ = ["JobContract"]

JobT = TypeVar("JobT", bound=TrainingJob[Any])


class JobContract(Protocol[JobT]):
    """A job kind's controller as the reconcile steps see it."""

    # identity ------------------------------------------------------------------------------------------
    @property
    def kind(self) -> KindInfo:
        """Group, version, plural, replica types, default container and port, labels, managedBy values."""

    @property
    def framework(self) -> str:
        """The `framework` label of the job metrics."""

    @property
    def extra_resources(self) -> tuple[Resource, ...]:
        """Resources of the objects `extra_objects` returns."""

    @property
    def service_modes(self) -> tuple[ServiceMode, ...]:
        """The service modes the kind supports."""

    def job_resource(self) -> Resource: ...

    def replica_types(self, job: JobT) -> list[str]: ...

    def service_mode_of(self, job: JobT) -> ServiceMode: ...

    def podset_types(self, job: JobT) -> list[str]: ...

    # the hooks: pure, synchronous, typed -----------------------------------------------------------------
    def default(self, job: JobT) -> JobT: ...

    def validate(self, job: JobT) -> Sequence[FieldError]: ...

    def configure_pod(self, job: JobT, rtype: str, index: int, pod: Obj) -> Obj: ...

    def verdict(self, job: JobT, observed: Observed) -> Verdict: ...

    def is_master(self, job: JobT, rtype: str, index: int) -> bool: ...

    def wants_service(self, job: JobT, rtype: str) -> bool: ...

    def ready_to_create(self, job: JobT, rtype: str, observed: Observed) -> bool: ...

    def gang_members(self, job: JobT, rtype: str) -> int: ...

    def restarts_with_gang(self, job: JobT, rtype: str) -> bool: ...

    def extra_objects(self, job: JobT, observed: Observed) -> Sequence[ExtraObject]: ...

    # services the template wires -------------------------------------------------------------------------
    @property
    def api(self) -> ApiClient: ...

    @property
    def cache(self) -> Mapping[Resource, Store]: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def recorder(self) -> EventRecorder: ...

    @property
    def metrics(self) -> Metrics | None: ...

    @property
    def expectations(self) -> Expectations: ...

    @property
    def gang(self) -> GangScheduling | None: ...

    @property
    def terminating_timeout(self) -> float: ...

    @property
    def progress(self) -> ProgressInjection | None:
        """Where new pods report training progress (KEP-2779); None: they get no reporting env."""

    @property
    def queueing(self) -> Queueing | None:
        """The Kueue integration, when it manages this kind; None: queue labels change nothing here."""

    @property
    def gang_restart(self) -> GangRestartChooser:
        """How a new job's gang restarts: in place or by recreating its pods (`--gang-restart`)."""

    @property
    def fence(self) -> WriteFence: ...

    @property
    def unwritten(self) -> Unwritten: ...
