"""XGBoostJobController's hooks: the collective's env per field (as training-operator v1.9's SetPodEnv
renders it), the master role, validation and the verdict."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.common.job import JobState, ServiceMode
from kubetrain.controllers.settings import ControllerSettings
from kubetrain.controllers.xgboost import XGBoostJobController
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

CTL = XGBoostJobController
SPECS = {"Master": replicas(1, container("xgboost")), "Worker": replicas(3, container("xgboost"))}
ALONE = {"Master": replicas(1, container("xgboost"))}


def pod_env(
    specs: dict[str, Any],
    rtype: str,
    index: int,
    *,
    name: str = "job",
    container_index: int = 0,
    mode: ServiceMode | None = None,
) -> dict[str, str]:
    ctl = controller(CTL, None if mode is None else ControllerSettings(service_mode=mode))
    return env(pod(ctl, job(CTL, specs, name=name), rtype, index), container_index)


def test_the_env_in_the_training_operators_order() -> None:
    assert list(pod_env(SPECS, "Worker", 1).items()) == [
        ("MASTER_PORT", "9999"),
        ("MASTER_ADDR", "job-master-0.job"),
        ("WORLD_SIZE", "4"),
        ("RANK", "2"),
        ("PYTHONUNBUFFERED", "1"),
        ("WORKER_PORT", "9999"),
        ("WORKER_ADDRS", "job-worker-0.job,job-worker-1.job,job-worker-2.job"),
    ]


@pytest.mark.parametrize(("rtype", "index"), [("Master", 0), ("Worker", 0), ("Worker", 2)])
def test_master_addr_is_the_masters_name_under_the_jobs_service_in_every_pod(rtype: str, index: int) -> None:
    assert pod_env(SPECS, rtype, index, name="iris")["MASTER_ADDR"] == "iris-master-0.iris"


def test_per_replica_services_give_the_training_operators_short_service_names() -> None:
    got = pod_env(SPECS, "Worker", 0, name="iris", mode=ServiceMode.REPLICA)
    assert got["MASTER_ADDR"] == "iris-master-0"
    assert got["WORKER_ADDRS"] == "iris-worker-0,iris-worker-1,iris-worker-2"


def test_master_port_defaults_to_9999_the_xgboostjob_port() -> None:
    assert pod_env(SPECS, "Worker", 0)["MASTER_PORT"] == "9999"


def test_master_port_is_the_masters_own_xgboostjob_port_in_every_pod() -> None:
    specs = {**SPECS, "Master": replicas(1, container("xgboost", port=("xgboostjob-port", 1234)))}
    assert pod_env(specs, "Master", 0)["MASTER_PORT"] == pod_env(specs, "Worker", 2)["MASTER_PORT"] == "1234"


def test_another_port_name_does_not_change_the_master_port() -> None:
    specs = {**SPECS, "Master": replicas(1, container("xgboost", port=("metrics", 9090)))}
    assert pod_env(specs, "Worker", 0)["MASTER_PORT"] == "9999"


@pytest.mark.parametrize("workers", [1, 2, 5])
def test_world_size_is_every_replica_of_the_job_master_included(workers: int) -> None:
    specs = {**SPECS, "Worker": replicas(workers, container("xgboost"))}
    assert pod_env(specs, "Master", 0)["WORLD_SIZE"] == str(workers + 1)


def test_rank_is_0_for_the_master_and_index_plus_1_for_a_worker() -> None:
    ranks = [pod_env(SPECS, "Master", 0)["RANK"]] + [pod_env(SPECS, "Worker", i)["RANK"] for i in range(3)]
    assert ranks == ["0", "1", "2", "3"]


def test_pythonunbuffered_is_set() -> None:
    assert pod_env(SPECS, "Master", 0)["PYTHONUNBUFFERED"] == "1"


def test_worker_port_is_the_workers_own_xgboostjob_port() -> None:
    specs = {**SPECS, "Worker": replicas(2, container("xgboost", port=("xgboostjob-port", 4321)))}
    assert pod_env(specs, "Master", 0)["WORKER_PORT"] == "4321"
    assert pod_env(specs, "Master", 0)["MASTER_PORT"] == "9999"


def test_worker_addrs_name_world_size_minus_1_workers_the_same_in_every_pod() -> None:
    everywhere = {
        pod_env(SPECS, t, i)["WORKER_ADDRS"] for t, i in [("Master", 0), ("Worker", 0), ("Worker", 2)]
    }
    assert everywhere == {"job-worker-0.job,job-worker-1.job,job-worker-2.job"}


def test_a_lone_master_gets_no_worker_variables() -> None:
    got = pod_env(ALONE, "Master", 0)
    assert (got["WORLD_SIZE"], got["RANK"]) == ("1", "0")
    assert "WORKER_PORT" not in got and "WORKER_ADDRS" not in got


def test_a_master_with_zero_workers_is_alone() -> None:
    specs = {**ALONE, "Worker": replicas(0, container("xgboost"))}
    got = pod_env(specs, "Master", 0)
    assert got["WORLD_SIZE"] == "1" and "WORKER_ADDRS" not in got


def test_every_container_gets_the_env_and_keeps_its_own() -> None:
    sidecar = container("sidecar", env=[{"name": "KEEP", "value": "me"}])
    specs = {**SPECS, "Worker": replicas(2, container("xgboost"), sidecar)}
    main, side = pod_env(specs, "Worker", 1), pod_env(specs, "Worker", 1, container_index=1)
    assert side == {"KEEP": "me", **main}


def test_the_master_has_the_master_role_and_no_worker_does() -> None:
    ctl, xgbjob = controller(CTL), job(CTL, SPECS)
    roles = [ctl.is_master(xgbjob, "Master", 0)] + [ctl.is_master(xgbjob, "Worker", i) for i in range(3)]
    assert roles == [True, False, False, False]


# --- validation, as the training-operator's XGBoostJob webhook ---------------------------------------------
def _errors(specs: dict[str, Any]) -> list[str]:
    return [
        e.path for e in controller(CTL).validate(CTL.kind.model.model_validate(job_manifest(CTL.kind, specs)))
    ]


def test_a_job_without_a_master_is_invalid() -> None:
    assert _errors({"Worker": replicas(2, container("xgboost"))}) == ["spec.xgbReplicaSpecs.Master"]


def test_more_than_one_master_is_invalid() -> None:
    assert _errors({**SPECS, "Master": replicas(2, container("xgboost"))}) == [
        "spec.xgbReplicaSpecs.Master.replicas"
    ]


def test_every_replica_type_needs_a_container_named_xgboost() -> None:
    specs = {**SPECS, "Worker": replicas(2, container("main"))}
    assert _errors(specs) == ["spec.xgbReplicaSpecs.Worker.template.spec.containers"]


@pytest.mark.parametrize("name", ["MASTER_ADDR", "RANK", "WORLD_SIZE", "WORKER_ADDRS"])
def test_a_user_set_collective_variable_is_refused(name: str) -> None:
    owned = container("xgboost", env=[{"name": name, "value": "x"}])
    assert _errors({**SPECS, "Worker": replicas(2, owned)}) == [
        "spec.xgbReplicaSpecs.Worker.template.spec.containers[0].env[0].name"
    ]


def test_an_unknown_replica_type_is_invalid() -> None:
    assert _errors({**SPECS, "Chief": replicas(1, container("xgboost"))}) == ["spec.xgbReplicaSpecs.Chief"]


# --- the verdict -----------------------------------------------------------------------------------------
VERDICTS = [
    VerdictCase(
        "the master succeeded",
        SPECS,
        observed(Master=counts(1, succeeded=1), Worker=counts(3, active=3)),
        JobState.SUCCEEDED,
    ),
    VerdictCase(
        "workers done, the master still running",
        SPECS,
        observed(Master=counts(1, active=1), Worker=counts(3, succeeded=3)),
        JobState.RUNNING,
    ),
    VerdictCase(
        "workers running, the master not yet",
        SPECS,
        observed(Master=counts(1), Worker=counts(3, active=3)),
        JobState.PENDING,
    ),
    VerdictCase(
        "a worker failed for good",
        SPECS,
        observed(Master=counts(1, active=1), Worker=counts(3, active=2, failed=1)),
        JobState.FAILED,
        "Worker",
    ),
    VerdictCase(
        "the master failed for good",
        SPECS,
        observed(Master=counts(1, failed=1), Worker=counts(3, active=3)),
        JobState.FAILED,
        "Master",
    ),
    VerdictCase(
        "the master succeeded as a worker failed: the model exists",
        SPECS,
        observed(Master=counts(1, succeeded=1), Worker=counts(3, failed=1, succeeded=2)),
        JobState.SUCCEEDED,
    ),
]


@pytest.mark.parametrize("case", VERDICTS, ids=lambda c: c.name)
def test_verdict(case: VerdictCase) -> None:
    check_verdict(CTL, case)
