"""Pure helpers of the SDK: reading jobs from what users hand us, and reading a job's state.

What a user may pass as a job: YAML text, a path to a YAML file, a decoded mapping, or a model. Every
form is validated with `kubetrain.api` before anything is sent, so a mistake is reported with the field
and its fix instead of a half-created job. The state helpers read `status.conditions` the way the CRD's
State printer column and the Kubeflow SDK do.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from kubetrain.api import (
    AnyJob,
    ConditionStatus,
    FieldError,
    InvalidJobError,
    JobCondition,
    TrainingJob,
    load_jobs,
    load_valid_jobs,
    parse_job,
)
from kubetrain.api.load import MAX_INPUT_BYTES, decode_job_bytes, parse_valid_job

__all__ = [
    "JobSource",
    "condition",
    "job_state",
    "reached",
    "read_job_file",
    "read_jobs",
    "replica_label",
]

JobSource = str | os.PathLike[str] | Mapping[str, Any] | TrainingJob[Any]
"""A job as users hold it: YAML text (it has a newline), a file path, a decoded mapping or a model."""


def read_jobs(source: JobSource) -> list[AnyJob]:
    """Every job in `source`, each validated; `InvalidJobError` lists every problem of every document.

    The jobs are returned as written (not defaulted): the operator defaults them, as for `kubectl apply`.
    """
    if isinstance(source, TrainingJob | Mapping):
        data = source.to_wire() if isinstance(source, TrainingJob) else source
        _check_operator_rules([parse_valid_job(data)], None)
        return [parse_job(data)]  # returned as written, not defaulted
    text, origin = _text_of(source)
    try:
        valid = load_valid_jobs(text)
    except InvalidJobError as error:
        raise InvalidJobError(error.errors, subject=origin) from None
    _check_operator_rules(valid, origin)
    jobs = load_jobs(text)
    if not jobs:
        raise InvalidJobError(
            [FieldError("", "holds no job", "write a TFJob, PyTorchJob or MPIJob document")], subject=origin
        )
    return jobs


def _check_operator_rules(jobs: list[AnyJob], origin: str | None) -> None:
    """What the operator would fail the (defaulted, valid) jobs for, checked with its own code; the error
    is about `origin`, or about the job by kind and name when there are several or no origin."""
    # The one import of the controllers' layer in the SDK (pyproject's import contracts list it): the
    # operator's rules are run, not restated. Imported here: only a job being validated needs them.
    from kubetrain.controllers.checks import check_operator_rules  # noqa: PLC0415

    for job in jobs:
        named = f"{job.KIND} {job.name!r}" if job.name else job.KIND
        subject = f"{origin}: {named}" if origin and len(jobs) > 1 else origin or named
        check_operator_rules(job, subject=subject)


def _text_of(source: str | os.PathLike[str]) -> tuple[str, str]:
    if isinstance(source, str) and "\n" in source:
        return source, "the YAML"
    return read_job_file(source), str(source)


def read_job_file(path: str | os.PathLike[str]) -> str:
    """The text of a job file; `InvalidJobError` naming the file if it cannot be read, is too large
    (`kubetrain.api.load.MAX_INPUT_BYTES`) or is not UTF-8."""
    try:
        with Path(path).open("rb") as file:
            data = file.read(MAX_INPUT_BYTES + 1)  # never more than the limit, whatever the file's size
    except OSError as error:
        reason = error.strerror or str(error)
        raise InvalidJobError(
            [
                FieldError(
                    "", f"cannot be read ({reason})", "give the path of a job YAML file, or the YAML text"
                )
            ],
            subject=str(path),
        ) from None
    return decode_job_bytes(data, str(path))


def condition(job: TrainingJob[Any], kind: str) -> JobCondition | None:
    """The condition of type `kind` in the job's status, if any."""
    for cond in (job.status.conditions if job.status else None) or []:
        if cond.type == kind:
            return cond
    return None


def job_state(job: TrainingJob[Any]) -> str:
    """The type of the last condition, as the CRD's State column shows it; "" before the first one."""
    conditions = (job.status.conditions if job.status else None) or []
    return str(conditions[-1].type) if conditions else ""


def reached(job: TrainingJob[Any], expected: Collection[str]) -> str | None:
    """The first of `expected` that is a True condition of the job, or None."""
    for wanted in expected:
        cond = condition(job, wanted)
        if cond is not None and cond.status == ConditionStatus.TRUE:
            return wanted
    return None


def replica_label(pod_name: str, job_name: str) -> str:
    """`worker-0` for pod `{job}-worker-0`: the replica a pod runs, used to prefix its log lines."""
    prefix = f"{job_name}-"
    return (
        pod_name[len(prefix) :] if pod_name.startswith(prefix) and len(pod_name) > len(prefix) else pod_name
    )
