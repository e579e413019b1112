"""PaddleJobController's hooks: the paddle.distributed.launch env per field in both modes (collective and
parameter-server), as the training-operator v1.9.4 renders it, the master role, and the verdict."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.common.job import JobState, ServiceMode
from kubetrain.controllers.paddle import PaddleJobController
from kubetrain.controllers.settings import ControllerSettings
from kubetrain.testing.operator import job_manifest

from .hooks import VerdictCase, check_verdict, container, controller, counts, job, observed, pod, replicas

CTL = PaddleJobController
COLLECTIVE = {"Worker": replicas(3, container("paddle"))}
PS = {"Master": replicas(2, container("paddle")), "Worker": replicas(3, container("paddle"))}
POD_IP = {"name": "POD_IP_DUMMY", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def entries(
    specs: dict[str, Any],
    rtype: str,
    index: int,
    *,
    name: str = "job",
    mode: ServiceMode = ServiceMode.JOB,
    container_index: int = 0,
) -> list[dict[str, Any]]:
    """The env entries of one container of replica `rtype`/`index`, in order."""
    ctl = controller(CTL, ControllerSettings(service_mode=mode))
    got: list[dict[str, Any]] = pod(ctl, job(CTL, specs, name=name), rtype, index)["spec"]["containers"][
        container_index
    ].get("env", [])
    return got


def values(specs: dict[str, Any], rtype: str, index: int, **kw: Any) -> dict[str, str]:
    """The plain values of those entries (the downward-API one left out)."""
    return {e["name"]: e["value"] for e in entries(specs, rtype, index, **kw) if "value" in e}


# --- collective mode (no Master) ------------------------------------------------------------------------
def test_worker_0_serves_the_rendezvous_at_its_own_pod_ip_in_the_training_operators_order() -> None:
    assert entries(COLLECTIVE, "Worker", 0, name="mnist") == [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "PADDLE_JOB_ID", "value": "mnist"},
        {"name": "PADDLE_NNODES", "value": "3"},
        POD_IP,
        {"name": "PADDLE_MASTER", "value": "$(POD_IP_DUMMY):36543"},
    ]


@pytest.mark.parametrize("index", [1, 2])
def test_the_other_workers_reach_worker_0_under_the_jobs_service(index: int) -> None:
    assert entries(COLLECTIVE, "Worker", index, name="mnist") == [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "PADDLE_JOB_ID", "value": "mnist"},
        {"name": "PADDLE_NNODES", "value": "3"},
        {"name": "PADDLE_MASTER", "value": "mnist-worker-0.mnist:36543"},
    ]


def test_per_replica_services_give_the_training_operators_short_service_name() -> None:
    got = values(COLLECTIVE, "Worker", 1, name="mnist", mode=ServiceMode.REPLICA)
    assert got["PADDLE_MASTER"] == "mnist-worker-0:36543"


def test_worker_0s_own_endpoint_does_not_depend_on_the_service_mode() -> None:
    by_mode = [entries(COLLECTIVE, "Worker", 0, mode=mode) for mode in ServiceMode]
    assert by_mode[0] == by_mode[1]


def test_the_master_port_is_the_workers_own_master_port() -> None:
    specs = {"Worker": replicas(2, container("paddle", port=("master", 4321)))}
    assert values(specs, "Worker", 1)["PADDLE_MASTER"] == "job-worker-0.job:4321"
    assert values(specs, "Worker", 0)["PADDLE_MASTER"] == "$(POD_IP_DUMMY):4321"


def test_another_port_name_does_not_change_the_master_port() -> None:
    specs = {"Worker": replicas(2, container("paddle", port=("metrics", 9090)))}
    assert values(specs, "Worker", 1)["PADDLE_MASTER"] == "job-worker-0.job:36543"


def test_no_server_or_trainer_count_in_collective_mode() -> None:
    for index in range(3):
        assert {"PADDLE_SERVER_NUM", "PADDLE_TRAINER_NUM"}.isdisjoint(values(COLLECTIVE, "Worker", index))


@pytest.mark.parametrize("count", [1, 2, 5])
def test_nnodes_is_every_replica_of_the_job(count: int) -> None:
    specs = {"Worker": replicas(count, container("paddle"))}
    assert values(specs, "Worker", 0)["PADDLE_NNODES"] == str(count)


def test_job_id_is_the_jobs_name() -> None:
    assert values(COLLECTIVE, "Worker", 2, name="ocr-train")["PADDLE_JOB_ID"] == "ocr-train"


def test_every_container_gets_the_env_and_keeps_its_own() -> None:
    sidecar = container("sidecar", env=[{"name": "KEEP", "value": "me"}])
    specs = {"Worker": replicas(2, container("paddle"), sidecar)}
    main, side = entries(specs, "Worker", 0), entries(specs, "Worker", 0, container_index=1)
    assert side == [{"name": "KEEP", "value": "me"}, *main]


# --- parameter-server mode (a Master) --------------------------------------------------------------------
def test_master_0_serves_the_rendezvous_and_runs_one_server() -> None:
    assert entries(PS, "Master", 0, name="ctr") == [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "PADDLE_JOB_ID", "value": "ctr"},
        {"name": "PADDLE_NNODES", "value": "5"},
        POD_IP,
        {"name": "PADDLE_MASTER", "value": "$(POD_IP_DUMMY):36543"},
        {"name": "PADDLE_SERVER_NUM", "value": "1"},
    ]


def test_the_other_masters_are_servers_that_reach_master_0() -> None:
    assert entries(PS, "Master", 1, name="ctr") == [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "PADDLE_JOB_ID", "value": "ctr"},
        {"name": "PADDLE_NNODES", "value": "5"},
        {"name": "PADDLE_MASTER", "value": "ctr-master-0.ctr:36543"},
        {"name": "PADDLE_SERVER_NUM", "value": "1"},
    ]


@pytest.mark.parametrize("index", [0, 1, 2])
def test_every_worker_is_a_trainer_that_reaches_master_0_worker_0_included(index: int) -> None:
    assert entries(PS, "Worker", index, name="ctr") == [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "PADDLE_JOB_ID", "value": "ctr"},
        {"name": "PADDLE_NNODES", "value": "5"},
        {"name": "PADDLE_MASTER", "value": "ctr-master-0.ctr:36543"},
        {"name": "PADDLE_TRAINER_NUM", "value": "1"},
    ]


def test_parameter_server_mode_under_per_replica_services() -> None:
    got = values(PS, "Worker", 2, name="ctr", mode=ServiceMode.REPLICA)
    assert got["PADDLE_MASTER"] == "ctr-master-0:36543"


def test_the_master_port_in_parameter_server_mode_is_the_masters() -> None:
    specs = {
        "Master": replicas(1, container("paddle", port=("master", 5555))),
        "Worker": replicas(2, container("paddle", port=("master", 6666))),
    }
    assert values(specs, "Worker", 0)["PADDLE_MASTER"] == "job-master-0.job:5555"
    assert values(specs, "Master", 0)["PADDLE_MASTER"] == "$(POD_IP_DUMMY):5555"


def test_a_user_env_of_the_same_name_is_replaced_not_duplicated() -> None:
    specs = {"Worker": replicas(2, container("paddle", env=[{"name": "POD_IP_DUMMY", "value": "x"}]))}
    got = entries(specs, "Worker", 0)
    assert [e["name"] for e in got].count("POD_IP_DUMMY") == 1 and POD_IP in got


# --- roles, validation --------------------------------------------------------------------------------------
def test_every_master_pod_has_the_master_role_as_in_kubeflow() -> None:
    ctl, paddlejob = controller(CTL), job(CTL, PS)
    assert [ctl.is_master(paddlejob, "Master", i) for i in range(2)] == [True, True]
    assert [ctl.is_master(paddlejob, "Worker", i) for i in range(3)] == [False, False, False]


def test_no_pod_has_the_master_role_in_collective_mode_as_in_kubeflow() -> None:
    ctl, paddlejob = controller(CTL), job(CTL, COLLECTIVE)
    assert not any(ctl.is_master(paddlejob, "Worker", i) for i in range(3))


def test_a_user_set_paddle_variable_is_refused_by_validation() -> None:
    owned = container("paddle", env=[{"name": "PADDLE_NNODES", "value": "7"}])
    errors = controller(CTL).validate(
        CTL.kind.model.model_validate(_manifest({"Worker": replicas(2, owned)}))
    )
    assert [e.path for e in errors] == [
        "spec.paddleReplicaSpecs.Worker.template.spec.containers[0].env[0].name"
    ]


def test_a_job_without_a_container_named_paddle_is_invalid_as_in_kubeflow() -> None:
    errors = controller(CTL).validate(
        CTL.kind.model.model_validate(_manifest({"Worker": replicas(1, container("main"), container("b"))}))
    )
    assert [e.path for e in errors] == ["spec.paddleReplicaSpecs.Worker.template.spec.containers"]


@pytest.mark.parametrize("port", [0, 65536])
def test_a_master_port_paddle_master_cannot_carry_is_refused_naming_it(port: int) -> None:
    specs = {"Worker": replicas(2, container("paddle", port=("master", port)))}
    errors = controller(CTL).validate(CTL.kind.model.model_validate(_manifest(specs)))
    path = "spec.paddleReplicaSpecs.Worker.template.spec.containers[0].ports[0].containerPort"
    assert [e.path for e in errors] == [path]
    assert str(port) in errors[0].message and "1..65535" in errors[0].fix


def test_several_masters_are_valid_they_are_parameter_servers() -> None:
    assert controller(CTL).validate(CTL.kind.model.model_validate(_manifest(PS))) == []


def test_defaults_restart_on_failure_one_replica_and_the_master_port() -> None:
    bare = {"Worker": {"template": {"spec": {"containers": [{"name": "paddle", "image": "i"}]}}}}
    spec = job(CTL, bare).replica_specs["Worker"]
    assert (spec.replicas, spec.restart_policy) == (1, "OnFailure")
    assert [(p.name, p.container_port) for p in spec.template.spec.containers[0].ports] == [("master", 36543)]


@pytest.mark.parametrize(
    "policy,bounds",
    [
        ({}, (3, 3)),
        ({"minReplicas": 2}, (2, 2)),
        ({"maxReplicas": 4}, (4, 4)),
        ({"minReplicas": 1, "maxReplicas": 5}, (1, 5)),
    ],
)
def test_elastic_policy_bounds_default_as_in_kubeflow(
    policy: dict[str, int], bounds: tuple[int, int]
) -> None:
    elastic = job(CTL, COLLECTIVE, elasticPolicy=policy).spec.elastic_policy
    assert (elastic.min_replicas, elastic.max_replicas) == bounds


def _manifest(specs: dict[str, Any]) -> dict[str, Any]:
    return job_manifest(CTL.kind, specs)


# --- the verdict -----------------------------------------------------------------------------------------
VERDICTS = [
    VerdictCase(
        "collective: all workers succeeded",
        COLLECTIVE,
        observed(Worker=counts(3, succeeded=3)),
        JobState.SUCCEEDED,
    ),
    VerdictCase(
        "collective: worker 0 alone succeeding is not enough",
        COLLECTIVE,
        observed(Worker=counts(3, active=2, succeeded=1)),
        JobState.RUNNING,
    ),
    VerdictCase("collective: nothing running yet", COLLECTIVE, observed(Worker=counts(3)), JobState.PENDING),
    VerdictCase(
        "collective: a worker failed for good",
        COLLECTIVE,
        observed(Worker=counts(3, active=2, failed=1)),
        JobState.FAILED,
        "Worker",
    ),
    VerdictCase(
        "ps: every master succeeded, workers still running",
        PS,
        observed(Master=counts(2, succeeded=2), Worker=counts(3, active=3)),
        JobState.SUCCEEDED,
    ),
    VerdictCase(
        "ps: workers all succeeded but the masters run on",
        PS,
        observed(Master=counts(2, active=2), Worker=counts(3, succeeded=3)),
        JobState.RUNNING,
    ),
    VerdictCase(
        "ps: only workers running is not Running",
        PS,
        observed(Master=counts(2), Worker=counts(3, active=3)),
        JobState.PENDING,
    ),
    VerdictCase(
        "ps: a worker failed for good",
        PS,
        observed(Master=counts(2, active=2), Worker=counts(3, active=2, failed=1)),
        JobState.FAILED,
        "Worker",
    ),
    VerdictCase(
        "ps: a master failed for good",
        PS,
        observed(Master=counts(2, active=1, failed=1), Worker=counts(3, active=3)),
        JobState.FAILED,
        "Master",
    ),
]


@pytest.mark.parametrize("case", VERDICTS, ids=lambda c: c.name)
def test_verdict(case: VerdictCase) -> None:
    check_verdict(CTL, case)
