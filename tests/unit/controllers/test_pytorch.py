"""PyTorchJobController's hooks: the torch/torchrun env, the init container, the HPA and the verdict."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.common.job import JobState, ServiceMode
from kubetrain.common.kube.resources import HPAS
from kubetrain.controllers.pytorch import INIT_CONTAINER_NAME, PyTorchJobController
from kubetrain.controllers.settings import ControllerSettings

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

CTL = PyTorchJobController
DDP = {"Master": replicas(1), "Worker": replicas(3)}


def torch_env(specs: dict[str, Any], rtype: str, index: int, **fields: Any) -> dict[str, str]:
    return env(pod(controller(CTL), job(CTL, specs, **fields), rtype, index))


# --- env --------------------------------------------------------------------------------------------------
def test_master_and_workers_get_the_static_rendezvous_in_kubeflow_order() -> None:
    assert list(torch_env(DDP, "Worker", 2).items()) == [
        ("PYTHONUNBUFFERED", "1"),
        ("MASTER_PORT", "23456"),
        ("PET_MASTER_PORT", "23456"),
        ("MASTER_ADDR", "job-master-0.job"),
        ("PET_MASTER_ADDR", "job-master-0.job"),
        ("WORLD_SIZE", "4"),
        ("RANK", "3"),
        ("PET_NODE_RANK", "3"),
        ("PET_NPROC_PER_NODE", "auto"),
        ("PET_NNODES", "4"),
    ]


@pytest.mark.parametrize(
    ("rtype", "index", "rank"), [("Master", 0, "0"), ("Worker", 0, "1"), ("Worker", 2, "3")]
)
def test_rank_is_the_index_plus_one_for_workers(rtype: str, index: int, rank: str) -> None:
    got = torch_env(DDP, rtype, index)
    assert (got["RANK"], got["PET_NODE_RANK"]) == (rank, rank)


def test_master_port_is_the_masters_pytorchjob_port() -> None:
    master = replicas(1, container("pytorch", port=("pytorchjob-port", 29500)))
    got = torch_env({"Master": master, "Worker": replicas(1)}, "Worker", 0)
    assert (got["MASTER_PORT"], got["PET_MASTER_PORT"]) == ("29500", "29500")


def test_every_container_gets_the_env_and_keeps_its_own() -> None:
    two = replicas(1, container("pytorch"), container("sidecar", env=[{"name": "X", "value": "y"}]))
    configured = pod(controller(CTL), job(CTL, {"Master": replicas(1), "Worker": two}), "Worker", 0)
    assert env(configured, 0)["RANK"] == "1"
    assert env(configured, 1)["RANK"] == "1"
    assert next(iter(env(configured, 1))) == "X"


@pytest.mark.parametrize(
    ("nproc", "world_size"), [("auto", "4"), ("cpu", "4"), ("gpu", "4"), ("1", "4"), ("2", "8"), ("8", "32")]
)
def test_world_size_counts_processes_per_node_when_it_is_a_number(nproc: str, world_size: str) -> None:
    got = torch_env(DDP, "Master", 0, nprocPerNode=nproc)
    assert (got["PET_NPROC_PER_NODE"], got["WORLD_SIZE"]) == (nproc, world_size)


def _gpu_replicas(count: int, gpus: int, command: list[str] | None = None) -> dict[str, Any]:
    limits = {"resources": {"limits": {"nvidia.com/gpu": gpus}}}
    return replicas(count, container("pytorch", command=command or ["python", "train.py"], **limits))


TORCHRUN = ["torchrun", "train.py"]


@pytest.mark.parametrize(
    ("nproc", "command"),
    [
        ("gpu", None),
        ("gpu", TORCHRUN),
        ("auto", TORCHRUN),
        ("auto", ["python", "-m", "torch.distributed.run"]),
    ],
)
def test_gpu_and_auto_under_torchrun_resolve_to_the_pods_gpu_limit(
    nproc: str, command: list[str] | None
) -> None:
    """torchrun counts the GPUs the pod sees, which the device plugin makes its nvidia.com/gpu limit."""
    specs = {"Master": _gpu_replicas(1, 4, command), "Worker": _gpu_replicas(3, 4, command)}
    for rtype in ("Master", "Worker"):
        got = torch_env(specs, rtype, 0, nprocPerNode=nproc)
        assert (got["PET_NPROC_PER_NODE"], got["WORLD_SIZE"]) == ("4", "16")


def test_the_default_auto_keeps_one_process_per_pod_without_torchrun() -> None:
    """Kubeflow's default `auto` on a plain `python` pod with GPUs: one process per pod, WORLD_SIZE = pods."""
    specs = {"Master": _gpu_replicas(1, 4), "Worker": _gpu_replicas(3, 4)}
    got = torch_env(specs, "Worker", 0, nprocPerNode="auto")
    assert (got["PET_NPROC_PER_NODE"], got["WORLD_SIZE"]) == ("auto", "4")


def test_nproc_resolves_per_replica_type_and_a_pod_without_gpus_keeps_the_word() -> None:
    specs = {"Master": _gpu_replicas(1, 2), "Worker": replicas(2)}
    master = torch_env(specs, "Master", 0, nprocPerNode="gpu")
    worker = torch_env(specs, "Worker", 0, nprocPerNode="gpu")
    assert (master["PET_NPROC_PER_NODE"], worker["PET_NPROC_PER_NODE"]) == ("2", "gpu")
    assert master["WORLD_SIZE"] == worker["WORLD_SIZE"] == "4"  # 1 x 2 + 2 x 1


def test_cpu_and_numbers_ignore_gpu_limits() -> None:
    specs = {"Master": _gpu_replicas(1, 4), "Worker": _gpu_replicas(1, 4)}
    assert torch_env(specs, "Master", 0, nprocPerNode="cpu")["PET_NPROC_PER_NODE"] == "cpu"
    assert torch_env(specs, "Master", 0, nprocPerNode="2")["WORLD_SIZE"] == "4"


def test_without_a_master_there_is_no_static_rendezvous() -> None:
    assert torch_env({"Worker": replicas(3)}, "Worker", 1) == {
        "PYTHONUNBUFFERED": "1",
        "PET_NPROC_PER_NODE": "auto",
        "PET_NNODES": "3",
    }


ELASTIC = {"Worker": replicas(2)}


def test_elastic_defaults_rendezvous_on_worker_0() -> None:
    got = torch_env(ELASTIC, "Worker", 1, elasticPolicy={"minReplicas": 1, "maxReplicas": 4})
    assert got == {
        "PYTHONUNBUFFERED": "1",
        "PET_NPROC_PER_NODE": "auto",
        "PET_RDZV_ENDPOINT": "job-worker-0.job:23456",
        "PET_RDZV_BACKEND": "c10d",
        "PET_NNODES": "1:4",
    }


def test_elastic_with_every_option() -> None:
    policy = {
        "minReplicas": 2,
        "maxReplicas": 5,
        "rdzvBackend": "etcd-v2",
        "rdzvHost": "etcd.infra",
        "rdzvPort": 2379,
        "rdzvId": "run-7",
        "rdzvConf": [{"key": "timeout", "value": "900"}, {"key": "last_call", "value": "30"}],
        "maxRestarts": 3,
        "standalone": True,
    }
    got = torch_env(ELASTIC, "Worker", 0, elasticPolicy=policy, nprocPerNode="2")
    assert got == {
        "PYTHONUNBUFFERED": "1",
        "PET_NPROC_PER_NODE": "2",
        "PET_RDZV_ENDPOINT": "etcd.infra:2379",
        "PET_RDZV_BACKEND": "etcd-v2",
        "PET_NNODES": "2:5",
        "PET_MAX_RESTARTS": "3",
        "PET_RDZV_ID": "run-7",
        "PET_RDZV_CONF": "timeout=900,last_call=30",
        "PET_STANDALONE": "",
    }


def test_elastic_bounds_default_to_the_worker_count() -> None:
    assert torch_env(ELASTIC, "Worker", 0, elasticPolicy={})["PET_NNODES"] == "2:2"


def test_the_deprecated_elastic_nproc_per_node_still_reaches_torchrun() -> None:
    got = torch_env(ELASTIC, "Worker", 0, elasticPolicy={"nProcPerNode": 3})
    assert got["PET_NPROC_PER_NODE"] == "3"


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        ({"rdzvHost": "etcd.infra:2379"}, "spec.elasticPolicy.rdzvHost"),
        ({"rdzvConf": [{"key": "hosts", "value": "a,b"}]}, "spec.elasticPolicy.rdzvConf"),
    ],
)
def test_an_elastic_policy_torchrun_could_not_read_is_invalid(policy: dict[str, Any], field: str) -> None:
    errors = controller(CTL).validate(job(CTL, ELASTIC, elasticPolicy=policy))
    assert [e.path for e in errors] == [field]
    assert "cannot read" in errors[0].message and errors[0].fix


def test_a_valid_job_has_no_validation_errors() -> None:
    policy = {"rdzvHost": "[fd00::1]", "rdzvPort": 2379, "rdzvConf": [{"key": "timeout", "value": "60"}]}
    assert list(controller(CTL).validate(job(CTL, ELASTIC, elasticPolicy=policy))) == []
    assert list(controller(CTL).validate(job(CTL, DDP))) == []


def test_per_replica_services_give_kubeflows_master_and_rendezvous_names() -> None:
    ctl = controller(CTL, ControllerSettings(service_mode=ServiceMode.REPLICA))
    master = env(pod(ctl, job(CTL, DDP), "Worker", 0))
    assert (master["MASTER_ADDR"], master["PET_MASTER_ADDR"]) == ("job-master-0", "job-master-0")
    elastic = env(
        pod(ctl, job(CTL, ELASTIC, elasticPolicy={"minReplicas": 1, "maxReplicas": 4}), "Worker", 1)
    )
    assert elastic["PET_RDZV_ENDPOINT"] == "job-worker-0:23456"


# --- the init container ---------------------------------------------------------------------------------
def test_workers_wait_for_the_master_name_with_the_configured_image_and_tries() -> None:
    settings = ControllerSettings(pytorch_init_image="registry.local/busybox:1", pytorch_init_max_tries=7)
    user_init = {"name": "fetch-data", "image": "fetch:1"}
    worker = replicas(2)
    worker["template"]["spec"]["initContainers"] = [user_init]
    configured = pod(
        controller(CTL, settings), job(CTL, {"Master": replicas(1), "Worker": worker}), "Worker", 1
    )
    first, init = configured["spec"]["initContainers"]
    assert first == user_init
    assert (init["name"], init["image"]) == (INIT_CONTAINER_NAME, "registry.local/busybox:1")
    script = init["command"][-1]
    assert "nslookup job-master-0.job;" in script and "-ge 7" in script
    assert init["resources"] == {
        "limits": {"cpu": "100m", "memory": "20Mi"},
        "requests": {"cpu": "50m", "memory": "10Mi"},
    }


@pytest.mark.parametrize(
    ("specs", "rtype"), [(DDP, "Master"), ({"Worker": replicas(2)}, "Worker")], ids=["master", "no-master"]
)
def test_no_init_container_on_the_master_or_without_one(specs: dict[str, Any], rtype: str) -> None:
    assert "initContainers" not in pod(controller(CTL), job(CTL, specs), rtype, 0)["spec"]


# --- the master role and the HPA ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("specs", "rtype", "index", "master"),
    [
        (DDP, "Master", 0, True),
        (DDP, "Worker", 0, False),
        ({"Worker": replicas(2)}, "Worker", 0, True),
        ({"Worker": replicas(2)}, "Worker", 1, False),
    ],
)
def test_the_master_else_worker_0_has_the_master_role(
    specs: dict[str, Any], rtype: str, index: int, master: bool
) -> None:
    assert controller(CTL).is_master(job(CTL, specs), rtype, index) is master


CPU_METRIC = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
}


def test_an_elastic_job_with_metrics_gets_an_hpa_on_its_scale_subresource() -> None:
    policy = {"minReplicas": 1, "maxReplicas": 3, "metrics": [CPU_METRIC]}
    extras = controller(CTL).extra_objects(job(CTL, ELASTIC, elasticPolicy=policy), observed())
    assert [(e.resource, e.body) for e in extras] == [
        (
            HPAS,
            {
                "apiVersion": "autoscaling/v2",
                "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "job"},
                "spec": {
                    "scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "job"},
                    "minReplicas": 1,
                    "maxReplicas": 3,
                    "metrics": [CPU_METRIC],
                },
            },
        )
    ]


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"elasticPolicy": {"minReplicas": 1, "maxReplicas": 3}},
        {
            "elasticPolicy": {"minReplicas": 1, "maxReplicas": 3, "metrics": [CPU_METRIC]},
            "runPolicy": {"suspend": True},
        },
    ],
    ids=["not-elastic", "no-metrics", "suspended"],
)
def test_no_hpa(fields: dict[str, Any]) -> None:
    assert list(controller(CTL).extra_objects(job(CTL, ELASTIC, **fields), observed())) == []


# --- the verdict -----------------------------------------------------------------------------------------
ELASTIC_POLICY = {"elasticPolicy": {"minReplicas": 1, "maxReplicas": 3}}
WORKERS = {"Worker": replicas(3)}

VERDICTS = [
    VerdictCase(
        "master succeeded: done, workers still running",
        DDP,
        observed(Master=counts(1, succeeded=1), Worker=counts(3, active=3)),
        JobState.SUCCEEDED,
    ),
    VerdictCase(
        "master running", DDP, observed(Master=counts(1, active=1), Worker=counts(3)), JobState.RUNNING
    ),
    VerdictCase(
        "workers running, master not yet",
        DDP,
        observed(Master=counts(1), Worker=counts(3, active=3)),
        JobState.PENDING,
    ),
    VerdictCase(
        "workers all succeeded but the master has not",
        DDP,
        observed(Master=counts(1, active=1), Worker=counts(3, succeeded=3)),
        JobState.RUNNING,
    ),
    VerdictCase(
        "no master: all workers succeeded",
        WORKERS,
        observed(Worker=counts(3, succeeded=3)),
        JobState.SUCCEEDED,
    ),
    VerdictCase(
        "no master: one worker succeeded is not enough",
        WORKERS,
        observed(Worker=counts(3, active=2, succeeded=1)),
        JobState.RUNNING,
    ),
    VerdictCase(
        "elastic: any worker succeeding ends the job",
        WORKERS,
        observed(Worker=counts(3, active=2, succeeded=1)),
        JobState.SUCCEEDED,
        fields=ELASTIC_POLICY,
    ),
    VerdictCase(
        "a worker failed for good",
        DDP,
        observed(Master=counts(1, active=1), Worker=counts(3, active=2, failed=1)),
        JobState.FAILED,
        "Worker",
    ),
    VerdictCase(
        "the master failed for good", DDP, observed(Master=counts(1, failed=1)), JobState.FAILED, "Master"
    ),
    VerdictCase(
        "master succeeded as a worker is seen failed",
        DDP,
        observed(Master=counts(1, succeeded=1), Worker=counts(3, failed=1)),
        JobState.SUCCEEDED,
    ),
]


@pytest.mark.parametrize("case", VERDICTS, ids=lambda c: c.name)
def test_verdict(case: VerdictCase) -> None:
    check_verdict(CTL, case)
