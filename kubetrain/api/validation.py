"""Validation of a job as the operator would run it: every problem found, each naming the field and the fix.

The Kubeflow operators validate after defaulting (MPI) or in a webhook (TF, PyTorch); we always check the
defaulted job, so `validate(job)` gives the same answer whether or not the caller defaulted first. The rules
shared by every kind live here, the per-kind ones in `validation_kinds`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, TypeVar

from kubetrain.api.common import ReplicaSpec, RunPolicy, TrainingJob
from kubetrain.api.defaults import apply_defaults
from kubetrain.api.errors import FieldError, InvalidJobError
from kubetrain.api.kinds import MPIJOB, KindInfo, kind_info
from kubetrain.api.owned_env import configured_containers, owned_env_names
from kubetrain.api.pod import Container
from kubetrain.api.validation_kinds import kind_errors

__all__ = ["DNS1035_MAX", "check_job", "validate"]

JobT = TypeVar("JobT", bound=TrainingJob[Any])

DNS1035_MAX = 63
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_GENERATED_SUFFIX = 5  # the API server appends 5 random characters to generateName
_MAX_PORT = 65535


def validate(job: TrainingJob[Any], *, kind: KindInfo | None = None) -> list[FieldError]:
    """Every problem of `job` after defaulting, in a stable order; an empty list means the job is valid.

    `kind` is the job's `KindInfo` (any kind's); None looks it up among the built-in kinds.
    """
    info = kind or kind_info(job)
    defaulted = apply_defaults(job, kind=info)
    return [
        *_metadata_errors(info, defaulted),
        *_replica_specs_errors(info, defaulted),
        *_run_policy_errors(info, defaulted.run_policy),
        *kind_errors(defaulted),
    ]


def check_job(job: JobT, *, kind: KindInfo | None = None) -> JobT:
    """The defaulted job, if it is valid; otherwise `InvalidJobError` listing every problem."""
    info = kind or kind_info(job)
    errors = validate(job, kind=info)
    if errors:
        raise InvalidJobError(errors, subject=f"{info.kind} {job.name!r}" if job.name else info.kind)
    return apply_defaults(job, kind=info)


def _metadata_errors(info: KindInfo, job: TrainingJob[Any]) -> Iterator[FieldError]:
    name, generate = job.metadata.name, job.metadata.generate_name
    if not name and not generate:
        yield FieldError("metadata.name", "is required", "set metadata.name, e.g. `mnist-train`")
        return
    if name and not _DNS1035.match(name):
        yield FieldError(
            "metadata.name",
            f"{name!r} is not a DNS-1035 label (lower-case letters, digits and '-', starting with a letter "
            "and ending with a letter or digit), which the pod and Service names built from it require",
            f"use e.g. {_suggest_name(name)!r}",
        )
        return
    if not name and generate and not _DNS1035.match(generate + "a"):
        yield FieldError(
            "metadata.generateName",
            f"{generate!r} does not start a DNS-1035 label",
            f"use e.g. {_suggest_name(generate) + '-'!r}",
        )
        return
    yield from _derived_name_errors(info, job, len(name) if name else len(generate or "") + _GENERATED_SUFFIX)


def _derived_name_errors(info: KindInfo, job: TrainingJob[Any], name_length: int) -> Iterator[FieldError]:
    longest = ""
    for rtype, spec in job.replica_specs.items():
        count = spec.replicas or 0
        if info is MPIJOB and rtype in info.master_types:
            suffix = f"-{rtype.lower()}"
        elif count > 0:
            suffix = f"-{rtype.lower()}-{count - 1}"
        else:
            continue
        longest = max(longest, suffix, key=len)
    extra = 0 if job.metadata.name else _GENERATED_SUFFIX
    if name_length + len(longest) > DNS1035_MAX:
        field = "metadata.name" if job.metadata.name else "metadata.generateName"
        yield FieldError(
            field,
            f"is too long: pod and Service names such as `<name>{longest}` would have "
            f"{name_length + len(longest)} characters, more than the {DNS1035_MAX} a DNS label allows",
            f"shorten it to at most {DNS1035_MAX - len(longest) - extra} characters",
        )


def _suggest_name(name: str) -> str:
    text = re.sub(r"[^a-z0-9-]+", "-", name.lower())
    text = re.sub(r"^[^a-z]+", "", text).rstrip("-")
    return (text or "job")[:DNS1035_MAX].rstrip("-")


def _replica_specs_errors(info: KindInfo, job: TrainingJob[Any]) -> Iterator[FieldError]:
    field = f"spec.{info.replica_specs_field}"
    specs = job.replica_specs
    if not specs:
        yield FieldError(
            field, "is required", f"add at least one replica type: {', '.join(info.replica_types)}"
        )
        return
    for rtype in info.required_types:
        if rtype not in specs:
            yield FieldError(f"{field}.{rtype}", "is required", f"add a {rtype} with replicas: 1")
    for rtype, spec in specs.items():
        path = f"{field}.{rtype}"
        if rtype not in info.replica_types:
            yield _replica_type_error(info, path, rtype)
            continue
        yield from _replica_count_errors(info, path, rtype, spec)
        yield from _template_errors(info, job, path, rtype, spec)


def _replica_type_error(info: KindInfo, path: str, rtype: str) -> FieldError:
    canonical = info.canonical_replica_type(rtype)
    if canonical is not None:
        return FieldError(
            path,
            f"`{rtype}` and `{canonical}` are the same replica type (keys ignore case)",
            f"merge them into a single `{canonical}` entry",
        )
    return FieldError(
        path,
        f"unknown replica type `{rtype}` for {info.kind}",
        f"use one of {', '.join(info.replica_types)}",
    )


def _replica_count_errors(info: KindInfo, path: str, rtype: str, spec: ReplicaSpec) -> Iterator[FieldError]:
    replicas = spec.replicas
    if replicas is None:
        return
    if replicas < 0:
        yield FieldError(f"{path}.replicas", f"must be >= 0, got {replicas}", "set replicas to 0 or more")
    elif rtype in info.master_types and replicas != 1:
        yield FieldError(
            f"{path}.replicas",
            f"exactly one {rtype} replica is allowed per {info.kind}, got {replicas}",
            "set replicas: 1" + ("; run more replicas as Workers" if "Worker" in info.replica_types else ""),
        )


def _template_errors(
    info: KindInfo, job: TrainingJob[Any], path: str, rtype: str, spec: ReplicaSpec
) -> Iterator[FieldError]:
    pod_path = f"{path}.template.spec"
    containers = spec.template.spec.containers
    wanted = info.default_container_name
    if not containers:
        example = f" named `{wanted}`" if wanted else ""
        yield FieldError(
            f"{pod_path}.containers", "has no container", f"add a container{example} with an image"
        )
        return
    if wanted and all(container.name != wanted for container in containers):
        yield FieldError(
            f"{pod_path}.containers",
            f"no container is named `{wanted}`, the container the {info.kind} operator configures",
            f"name the training container `{wanted}`",
        )
    yield from _container_errors(f"{pod_path}.containers", containers, require_image=True)
    yield from _container_errors(
        f"{pod_path}.initContainers", spec.template.spec.init_containers or [], False
    )
    owned = owned_env_names(job, rtype, kind=info)
    for index in configured_containers(job, containers, kind=info):
        yield from _owned_env_errors(f"{pod_path}.containers[{index}]", containers[index], owned)
    yield from _port_errors(info, f"{pod_path}.containers", containers)


def _port_errors(info: KindInfo, path: str, containers: list[Container]) -> Iterator[FieldError]:
    """The kind's port on its main container is one the operator can render into the env (MASTER_PORT,
    COORDINATOR_PORT, PADDLE_MASTER, ...): the CRDs, like Kubeflow's, leave `containerPort` unbounded, and a
    pod with such a port would be refused anyway."""
    index = info.default_container_index(containers)
    if index is None or not info.default_port_name:
        return
    for number, port in enumerate(containers[index].ports or ()):
        if port.name == info.default_port_name and not 1 <= port.container_port <= _MAX_PORT:
            yield FieldError(
                f"{path}[{index}].ports[{number}].containerPort",
                f"is {port.container_port}: the `{port.name}` port must be in 1..{_MAX_PORT}",
                f"set a port number in 1..{_MAX_PORT}, or remove the port for the default "
                f"{info.default_port}",
            )


def _container_errors(path: str, containers: list[Container], require_image: bool) -> Iterator[FieldError]:
    seen: set[str] = set()
    for index, container in enumerate(containers):
        here = f"{path}[{index}]"
        if not container.name:
            yield FieldError(f"{here}.name", "is required", "give every container a name")
        elif container.name in seen:
            yield FieldError(
                f"{here}.name", f"`{container.name}` is used twice", "give each container its own name"
            )
        seen.add(container.name)
        if require_image and not container.image:
            yield FieldError(
                f"{here}.image", "is required", "set the container image, e.g. `docker.io/org/trainer:1.0`"
            )


def _owned_env_errors(path: str, container: Container, owned: frozenset[str]) -> Iterator[FieldError]:
    for index, env in enumerate(container.env or []):
        if env.name in owned:
            yield FieldError(
                f"{path}.env[{index}].name",
                f"`{env.name}` is set by the operator for every replica",
                "remove it; to change what the operator renders, change the job spec instead",
            )


def _run_policy_errors(info: KindInfo, policy: RunPolicy) -> Iterator[FieldError]:
    path = "spec.runPolicy"
    for field, alias, low in (
        ("ttl_seconds_after_finished", "ttlSecondsAfterFinished", 0),
        ("active_deadline_seconds", "activeDeadlineSeconds", 1),
        ("backoff_limit", "backoffLimit", 0),
    ):
        value = getattr(policy, field)
        if value is not None and value < low:
            yield FieldError(
                f"{path}.{alias}", f"must be >= {low}, got {value}", f"set it to {low} or more, or remove it"
            )
    if policy.managed_by is not None and policy.managed_by not in info.managed_by_values:
        yield FieldError(
            f"{path}.managedBy",
            f"{policy.managed_by!r} is not a controller that manages {info.kind}s",
            f"use one of {', '.join(info.managed_by_values)}, or remove it",
        )
    scheduling = policy.scheduling_policy
    if scheduling is not None:
        for alias, value in (
            ("minAvailable", scheduling.min_available),
            ("scheduleTimeoutSeconds", scheduling.schedule_timeout_seconds),
        ):
            if value is not None and value < 0:
                yield FieldError(
                    f"{path}.schedulingPolicy.{alias}", f"must be >= 0, got {value}", "set it to 0 or more"
                )
