"""JAXJobController's hooks: the jax.distributed env per field, the master role, and the verdict."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.common.job import JobState, ServiceMode
from kubetrain.controllers.jax import JAXJobController
from kubetrain.controllers.settings import ControllerSettings
from kubetrain.testing.operator import job_manifest

from .hooks import (
    VerdictCase,
    check_verdict,
    container,
    controller,
    counts,
    env,
    job,
    observed,
    pod,
    replicas,
)

CTL = JAXJobController
WORKERS = {"Worker": replicas(3, container("jax"))}


def worker_env(
    specs: dict[str, Any], index: int, *, name: str = "job", container_index: int = 0
) -> dict[str, str]:
    jaxjob = job(CTL, specs, name=name)
    return env(pod(controller(CTL), jaxjob, "Worker", index), container_index)


def test_the_env_in_the_training_operators_order() -> None:
    assert list(worker_env(WORKERS, 2).items()) == [
        ("PYTHONUNBUFFERED", "1"),
        ("COORDINATOR_PORT", "6666"),
        ("COORDINATOR_ADDRESS", "job-worker-0.job"),
        ("NUM_PROCESSES", "3"),
        ("PROCESS_ID", "2"),
    ]


@pytest.mark.parametrize("index", [0, 1, 2])
def test_coordinator_address_is_worker_0s_name_under_the_jobs_service_for_every_worker(index: int) -> None:
    assert worker_env(WORKERS, index, name="mnist")["COORDINATOR_ADDRESS"] == "mnist-worker-0.mnist"


def test_per_replica_services_give_the_training_operators_short_service_name() -> None:
    ctl = controller(CTL, ControllerSettings(service_mode=ServiceMode.REPLICA))
    got = env(pod(ctl, job(CTL, WORKERS, name="mnist"), "Worker", 1))
    assert got["COORDINATOR_ADDRESS"] == "mnist-worker-0"


def test_coordinator_port_defaults_to_6666_the_jaxjob_port() -> None:
    assert worker_env({"Worker": replicas(2, container("jax"))}, 1)["COORDINATOR_PORT"] == "6666"


def test_coordinator_port_is_the_workers_own_jaxjob_port() -> None:
    specs = {"Worker": replicas(2, container("jax", port=("jaxjob-port", 1234)))}
    assert worker_env(specs, 1)["COORDINATOR_PORT"] == "1234"


def test_another_port_name_does_not_change_the_coordinator_port() -> None:
    specs = {"Worker": replicas(2, container("jax", port=("metrics", 9090)))}
    assert worker_env(specs, 0)["COORDINATOR_PORT"] == "6666"


@pytest.mark.parametrize("count", [1, 2, 5])
def test_num_processes_is_every_replica_of_the_job(count: int) -> None:
    assert worker_env({"Worker": replicas(count, container("jax"))}, 0)["NUM_PROCESSES"] == str(count)


@pytest.mark.parametrize("index", [0, 1, 4])
def test_process_id_is_the_replica_index(index: int) -> None:
    assert worker_env({"Worker": replicas(5, container("jax"))}, index)["PROCESS_ID"] == str(index)


def test_pythonunbuffered_is_set() -> None:
    assert worker_env(WORKERS, 0)["PYTHONUNBUFFERED"] == "1"


def test_every_container_gets_the_env_and_keeps_its_own() -> None:
    sidecar = container("sidecar", env=[{"name": "KEEP", "value": "me"}])
    specs = {"Worker": replicas(2, container("jax"), sidecar)}
    main, side = worker_env(specs, 1), worker_env(specs, 1, container_index=1)
    assert side == {"KEEP": "me", **main}


def test_worker_0_has_the_master_role() -> None:
    ctl, jaxjob = controller(CTL), job(CTL, WORKERS)
    assert [ctl.is_master(jaxjob, "Worker", i) for i in range(3)] == [True, False, False]


def test_a_user_set_coordinator_variable_is_refused_by_validation() -> None:
    owned = container("jax", env=[{"name": "PROCESS_ID", "value": "7"}])
    errors = controller(CTL).validate(
        CTL.kind.model.model_validate(_manifest({"Worker": replicas(2, owned)}))
    )
    assert [e.path for e in errors] == ["spec.jaxReplicaSpecs.Worker.template.spec.containers[0].env[0].name"]


def test_a_job_without_a_container_named_jax_is_invalid_as_in_kubeflow() -> None:
    errors = controller(CTL).validate(
        CTL.kind.model.model_validate(_manifest({"Worker": replicas(1, container("main"), container("b"))}))
    )
    assert [e.path for e in errors] == ["spec.jaxReplicaSpecs.Worker.template.spec.containers"]


def _manifest(specs: dict[str, Any]) -> dict[str, Any]:
    return job_manifest(CTL.kind, specs)


# --- the verdict -----------------------------------------------------------------------------------------
VERDICTS = [
    VerdictCase(
        "all workers succeeded", WORKERS, observed(Worker=counts(3, succeeded=3)), JobState.SUCCEEDED
    ),
    VerdictCase(
        "worker 0 alone succeeding is not enough",
        WORKERS,
        observed(Worker=counts(3, active=2, succeeded=1)),
        JobState.RUNNING,
    ),
    VerdictCase("workers running", WORKERS, observed(Worker=counts(3, active=3)), JobState.RUNNING),
    VerdictCase("nothing running yet", WORKERS, observed(Worker=counts(3)), JobState.PENDING),
    VerdictCase(
        "a worker failed for good",
        WORKERS,
        observed(Worker=counts(3, active=2, failed=1)),
        JobState.FAILED,
        "Worker",
    ),
]


@pytest.mark.parametrize("case", VERDICTS, ids=lambda c: c.name)
def test_verdict(case: VerdictCase) -> None:
    check_verdict(CTL, case)
