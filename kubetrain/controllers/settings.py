"""Operator-wide settings of the framework controllers, and the one way to build a controller with them.

The operator's flags (cluster domain, gang scheduler, PyTorch init container) are decided once at start-up
and are the same for every job; they reach the controllers as one frozen `ControllerSettings` value
instead of module globals or environment variables read at reconcile time (Kubeflow reads
`CUSTOM_CLUSTER_DOMAIN` from its own environment), so tests can run several configurations side by side.

Usage (the operator entry point)::

    settings = ControllerSettings(cluster_domain="cluster.local", gang_scheduler="volcano")
    add_controller(manager, TFJobController, settings, recorder=recorder)

`ConfiguredJobController` is the base of every framework controller: it takes `settings=` and hands the
gang-scheduling part to the `JobController` template, so the two can never disagree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, final

from kubetrain.common.events import EventRecorder
from kubetrain.common.job import GangScheduling, JobController, JobT, ServiceMode, add_job_controller
from kubetrain.common.manager import Manager

__all__ = [
    "DEFAULT_PYTORCH_INIT_IMAGE",
    "DEFAULT_PYTORCH_INIT_MAX_TRIES",
    "ConfiguredJobController",
    "ControllerSettings",
    "add_controller",
]

DEFAULT_PYTORCH_INIT_IMAGE = "alpine:3.10"
"""Kubeflow's `--pytorch-init-container-image` default: any image with `nslookup` and `sleep` works."""
DEFAULT_PYTORCH_INIT_MAX_TRIES = 100
"""Kubeflow's `--pytorch-init-container-max-tries` default (one try every 2 s)."""

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerSettings:
    """What the operator tells every framework controller. The defaults match Kubeflow's defaults, but
    for `service_mode`."""

    cluster_domain: str = ""
    """DNS suffix after `<service>.<namespace>.svc`, e.g. `cluster.local` (Kubeflow: `CUSTOM_CLUSTER_DOMAIN`
    for TFJob, `--cluster-domain` for MPIJob). Empty: addresses end in `.svc`, which the pod's DNS search
    path resolves on any cluster."""
    gang_scheduler: str = ""
    """Gang scheduler name (`volcano`, or a scheduler-plugins name such as `scheduler-plugins-scheduler`);
    empty disables gang scheduling (no PodGroups)."""
    pytorch_init_image: str = DEFAULT_PYTORCH_INIT_IMAGE
    """Image of the `init-pytorch` container that makes PyTorch workers wait for the master's DNS name."""
    pytorch_init_max_tries: int = DEFAULT_PYTORCH_INIT_MAX_TRIES
    """How many `nslookup` tries (2 s apart) `init-pytorch` makes before it fails the pod."""
    service_mode: ServiceMode = ServiceMode.JOB
    """How TFJob and PyTorchJob pods get DNS names: `job`, one headless Service per job (pods are
    `{pod}.{job}`), or `replica`, Kubeflow's Service per replica (pods are `{pod}`). MPIJob always has the
    job's Service, as in the mpi-operator."""

    def __post_init__(self) -> None:
        if self.cluster_domain and not _DNS_SUBDOMAIN.match(self.cluster_domain):
            raise ValueError(
                f"cluster domain {self.cluster_domain!r} is not a DNS name: "
                "use lower-case labels joined by dots, with no leading or trailing dot (e.g. cluster.local)"
            )
        if not self.pytorch_init_image.strip():
            raise ValueError("the PyTorch init container image must not be empty (e.g. alpine:3.10)")
        if self.pytorch_init_max_tries < 1:
            raise ValueError(
                f"the PyTorch init container max tries must be >= 1, got {self.pytorch_init_max_tries}"
            )

    @property
    def gang(self) -> GangScheduling | None:
        """The template's gang-scheduling setting, or None when gang scheduling is off."""
        return GangScheduling(self.gang_scheduler) if self.gang_scheduler else None

    def service_host(self, service: str, namespace: str) -> str:
        """The DNS name of a Service: `<service>.<namespace>.svc[.<cluster_domain>]`."""
        host = f"{service}.{namespace}.svc"
        return f"{host}.{self.cluster_domain}" if self.cluster_domain else host


DEFAULT_SETTINGS = ControllerSettings()


class ConfiguredJobController(JobController[JobT]):
    """A `JobController` that also holds the operator's `ControllerSettings` (as `self.settings`).

    `options` are the template's constructor arguments. `gang` and `service_mode` come from the settings;
    passing a different one as well is an error rather than a silent choice between the two.
    """

    def __init__(self, *, settings: ControllerSettings = DEFAULT_SETTINGS, **options: Any) -> None:
        for option, value in (("gang", settings.gang), ("service_mode", settings.service_mode)):
            given = options.setdefault(option, value)
            if given != value:
                raise ValueError(
                    f"{option}={given!r} disagrees with settings.{option}={value!r}; set it in the settings"
                )
        super().__init__(**options)
        self.settings = settings

    def replica_host(self, job: JobT, rtype: str, index: int) -> str:
        """The full DNS name of replica `rtype`/`index`: its `replica_address`, `.<ns>.svc[.<domain>]`."""
        return self.settings.service_host(self.replica_address(job, rtype, index), job.namespace)


def add_controller(
    manager: Manager,
    cls: type[ConfiguredJobController[Any]],
    settings: ControllerSettings,
    *,
    recorder: EventRecorder,
    workers: int = 1,
    **options: Any,
) -> ConfiguredJobController[Any]:
    """Build `cls` with `settings` on the manager's client, informers, clock and metrics, and run it there.

    `options` go to the `JobController` template (e.g. `terminating_timeout`).
    """
    controller = add_job_controller(
        manager,
        cls,
        recorder=recorder,
        workers=workers,
        gang=settings.gang,
        settings=settings,
        service_mode=settings.service_mode,
        **options,
    )
    assert isinstance(controller, ConfiguredJobController)
    return controller
