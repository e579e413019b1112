"""The env a controller renders parses back, with `kubetrain.podcontract`, into what the pod must know.

Both sides share one definition; these tests make sure the controller uses it the way the code in the pods
reads it: every replica of every TF and PyTorch example, plus the variants the examples do not cover.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import load_valid_jobs
from kubetrain.controllers.pytorch import PyTorchJobController
from kubetrain.controllers.tensorflow import TFJobController
from kubetrain.podcontract import (
    ContractError,
    MasterEnv,
    RendezvousEnv,
    StrategyKind,
    TFConfig,
    TFTask,
    TorchEnv,
    TorchProcess,
)

from .hooks import controller, env, job, pod, replicas
from .snapshot import EXAMPLES


def replicas_of(example: Path) -> list[tuple[Any, str, int]]:
    """Every replica of the example's job, placed in `default` unless it names its namespace."""
    (loaded,) = load_valid_jobs(example.read_text())
    meta = loaded.metadata.model_copy(update={"namespace": loaded.namespace or "default"})
    loaded = loaded.model_copy(update={"metadata": meta})
    return [
        (loaded, rtype, i) for rtype, spec in loaded.replica_specs.items() for i in range(spec.replicas or 0)
    ]


TF_REPLICAS = [r for p in sorted((EXAMPLES / "tensorflow").glob("*.yaml")) for r in replicas_of(p)]
TORCH_REPLICAS = [r for p in sorted((EXAMPLES / "pytorch").glob("*.yaml")) for r in replicas_of(p)]


def _id(replica: tuple[Any, str, int]) -> str:
    return f"{replica[0].name}/{replica[1]}-{replica[2]}"


# --- TFJob -------------------------------------------------------------------------------------
@pytest.mark.parametrize("replica", TF_REPLICAS, ids=_id)
def test_tf_config_of_every_example_replica_parses_to_its_cluster_and_task(
    replica: tuple[Any, str, int],
) -> None:
    tfjob, rtype, index = replica
    ctl = controller(TFJobController)
    config = TFConfig.from_env(env(pod(ctl, tfjob, rtype, index)))
    assert config is not None
    assert config.task == TFTask(type=rtype.lower(), index=index)
    assert config.environment == "cloud"
    pod_name = f"{tfjob.name}-{rtype.lower()}-{index}"
    assert config.address == f"{pod_name}.{tfjob.name}.{tfjob.namespace}.svc:2222"
    assert {t: len(a) for t, a in config.cluster.items()} == {
        t.lower(): s.replicas for t, s in tfjob.replica_specs.items()
    }
    assert config.is_chief is ctl.is_master(tfjob, rtype, index)


@pytest.mark.parametrize(
    ("specs", "rtype", "strategy"),
    [
        ({"Worker": replicas(4)}, "Worker", StrategyKind.MULTI_WORKER_MIRRORED),
        ({"Chief": replicas(1), "Worker": replicas(2)}, "Chief", StrategyKind.MULTI_WORKER_MIRRORED),
        (
            {"Chief": replicas(1), "PS": replicas(2), "Worker": replicas(2)},
            "Chief",
            StrategyKind.PARAMETER_SERVER,
        ),
        (
            {"Chief": replicas(1), "Worker": replicas(2), "Evaluator": replicas(1)},
            "Evaluator",
            StrategyKind.EVALUATOR,
        ),
    ],
)
def test_tf_config_implies_the_strategy_the_pod_builds(
    specs: dict[str, Any], rtype: str, strategy: StrategyKind
) -> None:
    config = TFConfig.from_env(env(pod(controller(TFJobController), job(TFJobController, specs), rtype, 0)))
    assert config is not None and config.strategy_kind() is strategy


def test_a_single_replica_tfjob_reads_as_no_tf_config() -> None:
    tfjob = job(TFJobController, {"Worker": replicas(1)})
    assert TFConfig.from_env(env(pod(controller(TFJobController), tfjob, "Worker", 0))) is None


def test_the_dynamic_worker_form_is_refused_with_a_clear_error() -> None:
    tfjob = job(TFJobController, {"Chief": replicas(1), "Worker": replicas(2)}, enableDynamicWorker=True)
    with pytest.raises(ContractError, match="sparseCluster"):
        TFConfig.from_env(env(pod(controller(TFJobController), tfjob, "Worker", 1)))


# --- PyTorchJob --------------------------------------------------------------------------------
@pytest.mark.parametrize("replica", TORCH_REPLICAS, ids=_id)
def test_torch_env_of_every_example_replica_parses_back_to_itself(replica: tuple[Any, str, int]) -> None:
    pytorchjob, rtype, index = replica
    rendered = env(pod(controller(PyTorchJobController), pytorchjob, rtype, index))
    parsed = TorchEnv.parse(rendered)
    assert parsed.render() == rendered
    total = sum(s.replicas for s in pytorchjob.replica_specs.values())
    if "Master" in pytorchjob.replica_specs:
        assert parsed.master is not None
        assert (parsed.master.addr, parsed.master.rank) == (
            f"{pytorchjob.name}-master-0.{pytorchjob.name}",
            _rank(rtype, index),
        )
    if pytorchjob.spec.elastic_policy is None:
        assert parsed.nnodes == total


def _rank(rtype: str, index: int) -> int:
    return index + 1 if rtype == "Worker" else index


def test_a_ddp_worker_process_reads_its_rank_world_size_and_master() -> None:
    ddp = job(PyTorchJobController, {"Master": replicas(1), "Worker": replicas(3)})
    rendered = env(pod(controller(PyTorchJobController), ddp, "Worker", 1))
    assert TorchProcess.from_env(rendered) == TorchProcess(
        rank=2, world_size=4, master_addr="job-master-0.job", master_port=23456
    )


def test_multi_process_nodes_parse_to_the_process_count() -> None:
    ddp = job(PyTorchJobController, {"Master": replicas(1), "Worker": replicas(1)}, nprocPerNode="4")
    parsed = TorchEnv.parse(env(pod(controller(PyTorchJobController), ddp, "Master", 0)))
    assert parsed == TorchEnv(
        nproc_per_node="4",
        nnodes=2,
        master=MasterEnv(addr="job-master-0.job", port=23456, world_size=8, rank=0),
    )


def test_an_elastic_job_parses_to_its_rendezvous() -> None:
    policy = {
        "minReplicas": 1,
        "maxReplicas": 3,
        "rdzvId": "run-1",
        "rdzvConf": [{"key": "timeout", "value": "60"}],
        "maxRestarts": 2,
    }
    elastic = job(PyTorchJobController, {"Worker": replicas(2)}, elasticPolicy=policy)
    parsed = TorchEnv.parse(env(pod(controller(PyTorchJobController), elastic, "Worker", 1)))
    assert parsed == TorchEnv(
        nproc_per_node="auto",
        rendezvous=RendezvousEnv(
            endpoint="job-worker-0.job:23456",
            min_nodes=1,
            max_nodes=3,
            run_id="run-1",
            conf=(("timeout", "60"),),
            max_restarts=2,
        ),
    )
