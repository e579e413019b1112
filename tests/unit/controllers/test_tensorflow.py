"""TFJobController's hooks: TF_CONFIG per replica, the master role, and the success/failure verdict."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubetrain.common.job import JobState, ServiceMode
from kubetrain.controllers.settings import ControllerSettings
from kubetrain.controllers.tensorflow import TFJobController

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
    succeeded_pod,
)


def tf_config(ctl: TFJobController, tfjob: Any, rtype: str, index: int) -> dict[str, Any] | None:
    value = env(pod(ctl, tfjob, rtype, index)).get("TF_CONFIG")
    return None if value is None else dict(json.loads(value))


def addresses(rtype: str, count: int, suffix: str = "job.ns.svc", port: int = 2222) -> list[str]:
    return [f"job-{rtype}-{i}.{suffix}:{port}" for i in range(count)]


# --- TF_CONFIG ---------------------------------------------------------------------------------------
PS_CHIEF_EVAL = {"PS": replicas(2), "Worker": replicas(3), "Chief": replicas(1), "Evaluator": replicas(1)}


@pytest.mark.parametrize(
    ("rtype", "index"), [("PS", 0), ("PS", 1), ("Worker", 0), ("Worker", 2), ("Chief", 0), ("Evaluator", 0)]
)
def test_every_replica_gets_the_whole_cluster_and_its_own_task(rtype: str, index: int) -> None:
    ctl = controller(TFJobController)
    assert tf_config(ctl, job(TFJobController, PS_CHIEF_EVAL), rtype, index) == {
        "cluster": {
            "chief": addresses("chief", 1),
            "evaluator": addresses("evaluator", 1),
            "ps": addresses("ps", 2),
            "worker": addresses("worker", 3),
        },
        "task": {"type": rtype.lower(), "index": index},
        "environment": "cloud",
    }


def test_tf_config_is_compact_json_with_sorted_cluster_keys_like_kubeflow() -> None:
    ctl = controller(TFJobController)
    tfjob = job(TFJobController, {"Worker": replicas(2), "PS": replicas(1)})
    assert env(pod(ctl, tfjob, "Worker", 1))["TF_CONFIG"] == (
        '{"cluster":{"ps":["job-ps-0.job.ns.svc:2222"],'
        '"worker":["job-worker-0.job.ns.svc:2222","job-worker-1.job.ns.svc:2222"]},'
        '"task":{"type":"worker","index":1},"environment":"cloud"}'
    )


def test_per_replica_services_give_kubeflows_addresses() -> None:
    ctl = controller(TFJobController, ControllerSettings(service_mode=ServiceMode.REPLICA))
    config = tf_config(ctl, job(TFJobController, {"Worker": replicas(2), "PS": replicas(1)}), "Worker", 1)
    assert config is not None
    assert config["cluster"] == {
        "ps": addresses("ps", 1, suffix="ns.svc"),
        "worker": addresses("worker", 2, suffix="ns.svc"),
    }


def test_master_is_its_own_cluster_key() -> None:
    ctl = controller(TFJobController)
    config = tf_config(ctl, job(TFJobController, {"Master": replicas(1), "Worker": replicas(1)}), "Master", 0)
    assert config is not None
    assert config["cluster"] == {"master": addresses("master", 1), "worker": addresses("worker", 1)}
    assert config["task"] == {"type": "master", "index": 0}


def test_a_custom_cluster_domain_ends_every_address() -> None:
    ctl = controller(TFJobController, ControllerSettings(cluster_domain="corp.example"))
    config = tf_config(ctl, job(TFJobController, {"Worker": replicas(2)}), "Worker", 0)
    assert config is not None
    assert config["cluster"] == {"worker": addresses("worker", 2, suffix="job.ns.svc.corp.example")}


def test_each_replica_type_uses_its_own_tfjob_port() -> None:
    ps = replicas(1, container("tensorflow", port=("tfjob-port", 3333)))
    ctl = controller(TFJobController)
    config = tf_config(ctl, job(TFJobController, {"PS": ps, "Worker": replicas(1)}), "Worker", 0)
    assert config is not None
    assert config["cluster"] == {"ps": addresses("ps", 1, port=3333), "worker": addresses("worker", 1)}


@pytest.mark.parametrize(
    "specs",
    [{"Worker": replicas(1)}, {"Chief": replicas(1)}, {"Chief": replicas(1), "Worker": replicas(0)}],
    ids=["one-worker", "one-chief", "chief-and-zero-workers"],
)
def test_a_single_replica_job_gets_no_tf_config(specs: dict[str, Any]) -> None:
    ctl = controller(TFJobController)
    tfjob = job(TFJobController, specs)
    rtype = next(t for t, s in specs.items() if s["replicas"])
    assert "TF_CONFIG" not in env(pod(ctl, tfjob, rtype, 0))


def test_tf_config_goes_to_the_tensorflow_container_only_and_keeps_user_env() -> None:
    sidecar = container("logger", env=[{"name": "A", "value": "1"}])
    main = container("tensorflow", env=[{"name": "B", "value": "2"}])
    ctl = controller(TFJobController)
    configured = pod(ctl, job(TFJobController, {"Worker": replicas(2, sidecar, main)}), "Worker", 1)
    assert env(configured, 0) == {"A": "1"}
    assert list(env(configured, 1)) == ["B", "TF_CONFIG"]


def test_a_lone_unnamed_container_is_the_tensorflow_container() -> None:
    ctl = controller(TFJobController)
    configured = pod(ctl, job(TFJobController, {"Worker": replicas(2, container())}), "Worker", 0)
    assert configured["spec"]["containers"][0]["name"] == "tensorflow"
    assert "TF_CONFIG" in env(configured)


@pytest.mark.parametrize(
    ("rtype", "index", "expected"),
    [
        (
            "Worker",
            1,
            {"sparseCluster": {"worker": {"1": "job-worker-1.job.ns.svc:2222"}, "ps": addresses("ps", 2)}},
        ),
        ("PS", 1, {"sparseCluster": {"worker": {}, "ps": ["job-ps-1.job.ns.svc:2222"]}}),
        ("Chief", 0, {"sparseCluster": {"worker": {}, "ps": []}}),
    ],
)
def test_dynamic_workers_get_the_sparse_cluster(rtype: str, index: int, expected: dict[str, Any]) -> None:
    ctl = controller(TFJobController)
    specs = {"Chief": replicas(1), "PS": replicas(2), "Worker": replicas(3)}
    config = tf_config(ctl, job(TFJobController, specs, enableDynamicWorker=True), rtype, index)
    assert config == {**expected, "task": {"type": rtype.lower(), "index": index}}


# --- the master role ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("specs", "rtype", "index", "master"),
    [
        ({"Chief": replicas(1), "Worker": replicas(2)}, "Chief", 0, True),
        ({"Chief": replicas(1), "Worker": replicas(2)}, "Worker", 0, False),
        ({"Master": replicas(1), "Worker": replicas(2)}, "Master", 0, True),
        ({"PS": replicas(1), "Worker": replicas(2)}, "Worker", 0, True),
        ({"PS": replicas(1), "Worker": replicas(2)}, "Worker", 1, False),
        ({"PS": replicas(1), "Worker": replicas(2)}, "PS", 0, False),
        ({"Worker": replicas(2), "Evaluator": replicas(1)}, "Evaluator", 0, False),
    ],
)
def test_the_chief_else_worker_0_has_the_master_role(
    specs: dict[str, Any], rtype: str, index: int, master: bool
) -> None:
    ctl = controller(TFJobController)
    assert ctl.is_master(job(TFJobController, specs), rtype, index) is master


# --- the verdict -----------------------------------------------------------------------------------------
CHIEF_JOB = {"Chief": replicas(1), "PS": replicas(1), "Worker": replicas(2), "Evaluator": replicas(1)}
WORKERS_JOB = {"PS": replicas(1), "Worker": replicas(3)}
W0_DONE = {0: succeeded_pod(0)}

VERDICTS = [
    VerdictCase(
        "chief succeeded: done, workers and PS still running",
        CHIEF_JOB,
        observed(Chief=counts(1, succeeded=1), PS=counts(1, active=1), Worker=counts(2, active=2)),
        JobState.SUCCEEDED,
    ),
    VerdictCase(
        "chief running", CHIEF_JOB, observed(Chief=counts(1, active=1), Worker=counts(2)), JobState.RUNNING
    ),
    VerdictCase(
        "workers running but the chief not yet: still pending",
        CHIEF_JOB,
        observed(Chief=counts(1), Worker=counts(2, active=2)),
        JobState.PENDING,
    ),
    VerdictCase(
        "all workers succeeded but the chief has not: not done",
        CHIEF_JOB,
        observed(Chief=counts(1, active=1), Worker=counts(2, succeeded=2)),
        JobState.RUNNING,
    ),
    VerdictCase(
        "evaluator succeeded alone: ignored for success",
        CHIEF_JOB,
        observed(Chief=counts(1, active=1), Evaluator=counts(1, succeeded=1)),
        JobState.RUNNING,
    ),
    VerdictCase(
        "no chief: worker 0 succeeded is enough by default",
        WORKERS_JOB,
        observed(PS=counts(1, active=1), Worker=counts(3, active=2, succeeded=1, pods=W0_DONE)),
        JobState.SUCCEEDED,
    ),
    VerdictCase(
        "no chief: another worker succeeding is not",
        WORKERS_JOB,
        observed(Worker=counts(3, active=2, succeeded=1, pods={1: succeeded_pod(1)})),
        JobState.RUNNING,
    ),
    VerdictCase(
        "AllWorkers: worker 0 alone is not enough",
        WORKERS_JOB,
        observed(Worker=counts(3, active=2, succeeded=1, pods=W0_DONE)),
        JobState.RUNNING,
        fields={"successPolicy": "AllWorkers"},
    ),
    VerdictCase(
        "AllWorkers: every worker succeeded",
        WORKERS_JOB,
        observed(PS=counts(1, active=1), Worker=counts(3, succeeded=3)),
        JobState.SUCCEEDED,
        fields={"successPolicy": "AllWorkers"},
    ),
    VerdictCase(
        "PS running alone: pending (parameter servers never complete)",
        WORKERS_JOB,
        observed(PS=counts(1, active=1), Worker=counts(3)),
        JobState.PENDING,
    ),
    VerdictCase(
        "a PS failed for good",
        WORKERS_JOB,
        observed(PS=counts(1, failed=1), Worker=counts(3, active=3)),
        JobState.FAILED,
        "PS",
    ),
    VerdictCase(
        "a worker failed for good",
        WORKERS_JOB,
        observed(PS=counts(1, active=1), Worker=counts(3, active=2, failed=1)),
        JobState.FAILED,
        "Worker",
    ),
    VerdictCase(
        "an evaluator failed for good (Kubeflow fails the job)",
        CHIEF_JOB,
        observed(Chief=counts(1, active=1), Evaluator=counts(1, failed=1)),
        JobState.FAILED,
        "Evaluator",
    ),
    VerdictCase(
        "dynamic workers: a failed worker is tolerated",
        CHIEF_JOB,
        observed(Chief=counts(1, active=1), Worker=counts(2, active=1, failed=1)),
        JobState.RUNNING,
        fields={"enableDynamicWorker": True},
    ),
    VerdictCase(
        "dynamic workers: a failed PS is not",
        CHIEF_JOB,
        observed(Chief=counts(1, active=1), PS=counts(1, failed=1)),
        JobState.FAILED,
        "PS",
        fields={"enableDynamicWorker": True},
    ),
    VerdictCase(
        "chief succeeded as a PS is seen failed: the result exists",
        CHIEF_JOB,
        observed(Chief=counts(1, succeeded=1), PS=counts(1, failed=1)),
        JobState.SUCCEEDED,
    ),
]


@pytest.mark.parametrize("case", VERDICTS, ids=lambda c: c.name)
def test_verdict(case: VerdictCase) -> None:
    check_verdict(TFJobController, case)


def test_an_in_place_gang_restart_waits_for_every_type_but_the_evaluator() -> None:
    ctl = controller(TFJobController)
    tfjob = job(TFJobController, {"Chief": replicas(1), "Worker": replicas(2), "Evaluator": replicas(1)})
    assert [ctl.restarts_with_gang(tfjob, t) for t in ("Chief", "Worker", "Evaluator")] == [True, True, False]
