"""TF_CONFIG: the exact document the training-operator renders, read back, and the strategy it implies."""

from __future__ import annotations

import json
import re

import pytest

from kubetrain.podcontract import ContractError, StrategyKind, TFConfig, TFTask

PS_CLUSTER = {
    "worker": ("job-worker-0.ns.svc:2222", "job-worker-1.ns.svc:2222"),
    "ps": ("job-ps-0.ns.svc:2222",),
    "chief": ("job-chief-0.ns.svc:2222",),
}


def test_render_is_byte_for_byte_the_operators_document() -> None:
    config = TFConfig(cluster=PS_CLUSTER, task=TFTask("worker", 1))
    assert config.render() == (
        '{"cluster":{"chief":["job-chief-0.ns.svc:2222"],"ps":["job-ps-0.ns.svc:2222"],'
        '"worker":["job-worker-0.ns.svc:2222","job-worker-1.ns.svc:2222"]},'
        '"task":{"type":"worker","index":1},"environment":"cloud"}'
    )


@pytest.mark.parametrize(
    "task", [TFTask("worker", 0), TFTask("worker", 1), TFTask("ps", 0), TFTask("chief", 0)]
)
def test_render_then_parse_round_trips(task: TFTask) -> None:
    config = TFConfig(cluster=PS_CLUSTER, task=task)
    back = TFConfig.parse(config.render())
    assert back == config
    assert back.address == PS_CLUSTER[task.type][task.index]


def test_parse_reads_what_tensorflow_reads_without_environment() -> None:
    config = TFConfig.parse(
        '{"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, "task": {"type": "worker"}}'
    )
    assert config.task == TFTask("worker", 0)
    assert config.environment is None
    assert json.loads(config.render()) == {
        "cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]},
        "task": {"type": "worker", "index": 0},
    }


def test_from_env_is_none_for_a_non_distributed_job() -> None:
    assert TFConfig.from_env({}) is None
    assert TFConfig.from_env({"TF_CONFIG": " "}) is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "not a JSON object"),
        ('{"task": {"type": "worker", "index": 0}}', "no 'cluster'"),
        ('{"sparseCluster": {"worker": {"0": "a:1"}}, "task": {"type": "worker"}}', "sparseCluster"),
        ('{"cluster": {"worker": "a:1"}, "task": {"type": "worker"}}', "not a list"),
        ('{"cluster": {"worker": ["a"]}, "task": {"type": "worker"}}', "host:port"),
        ('{"cluster": {"worker": ["a:99999"]}, "task": {"type": "worker"}}', "above 65535"),
        ('{"cluster": {"worker": ["a:1"]}}', "'task' is missing"),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"index": 0}}', "task.type"),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": "0"}}', "not an integer"),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 1}}', "not in the cluster"),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "ps", "index": 0}}', "not in the cluster"),
    ],
)
def test_malformed_tf_config_names_the_variable_and_the_fix(text: str, says: str) -> None:
    with pytest.raises(ContractError) as err:
        TFConfig.parse(text)
    assert err.value.variable == "TF_CONFIG"
    assert says in str(err.value)
    assert "operator sets TF_CONFIG" in err.value.fix


def test_an_evaluator_may_stay_outside_the_cluster() -> None:
    config = TFConfig(cluster={"worker": ("a:1", "b:1")}, task=TFTask("evaluator", 0))
    assert config.address is None
    assert config.strategy_kind() is StrategyKind.EVALUATOR


@pytest.mark.parametrize(
    ("cluster", "task", "kind"),
    [
        ({"worker": ("a:1",)}, TFTask("worker", 0), StrategyKind.DEFAULT),
        ({"worker": ("a:1", "b:1")}, TFTask("worker", 1), StrategyKind.MULTI_WORKER_MIRRORED),
        ({"chief": ("c:1",), "worker": ("a:1",)}, TFTask("chief", 0), StrategyKind.MULTI_WORKER_MIRRORED),
        ({"worker": ("a:1",), "evaluator": ("e:1",)}, TFTask("worker", 0), StrategyKind.DEFAULT),
        (PS_CLUSTER, TFTask("chief", 0), StrategyKind.PARAMETER_SERVER),
        (PS_CLUSTER, TFTask("ps", 0), StrategyKind.PARAMETER_SERVER),
    ],
)
def test_strategy_follows_from_the_cluster(
    cluster: dict[str, tuple[str, ...]], task: TFTask, kind: StrategyKind
) -> None:
    assert TFConfig(cluster=cluster, task=task).strategy_kind() is kind


@pytest.mark.parametrize(
    "cluster",
    [
        {"ps": ("p:1",), "worker": ("a:1",)},
        {"ps": ("p:1",), "chief": ("c:1",)},
        {"ps": ("p:1",), "worker": ()},
    ],
)
def test_parameter_server_clusters_nobody_can_coordinate_are_refused_with_the_fix(
    cluster: dict[str, tuple[str, ...]],
) -> None:
    config = TFConfig(cluster=cluster, task=TFTask("ps", 0))
    with pytest.raises(ContractError, match=re.escape("add `Chief: {replicas: 1}`")):
        config.strategy_kind()


def test_without_a_chief_worker_zero_coordinates_the_parameter_servers() -> None:
    """The TF1-era PS + Worker TFJob (worker 0 succeeding ends the job) under ParameterServerStrategy."""
    cluster = {"ps": ("p0:1", "p1:1"), "worker": ("w0:1", "w1:1", "w2:1")}
    views = {
        (t, i): TFConfig(cluster=cluster, task=TFTask(t, i)).with_coordinator()
        for t, i in (("worker", 0), ("worker", 1), ("worker", 2), ("ps", 1))
    }
    expected = {"chief": ("w0:1",), "ps": ("p0:1", "p1:1"), "worker": ("w1:1", "w2:1")}
    assert all(dict(v.cluster) == expected for v in views.values())
    assert [v.task for v in views.values()] == [
        TFTask("chief", 0),
        TFTask("worker", 0),
        TFTask("worker", 1),
        TFTask("ps", 1),
    ]
    assert views[("worker", 2)].address == "w2:1"
    assert (
        TFConfig(cluster=cluster, task=TFTask("worker", 1)).strategy_kind() is StrategyKind.PARAMETER_SERVER
    )
    with_chief = TFConfig(cluster=PS_CLUSTER, task=TFTask("worker", 1))
    assert with_chief.with_coordinator() is with_chief


def test_chief_is_the_chief_else_worker_zero() -> None:
    with_chief = {"chief": ("c:1",), "worker": ("a:1", "b:1")}
    assert TFConfig(cluster=with_chief, task=TFTask("chief", 0)).is_chief
    assert not TFConfig(cluster=with_chief, task=TFTask("worker", 0)).is_chief
    workers = {"worker": ("a:1", "b:1")}
    assert TFConfig(cluster=workers, task=TFTask("worker", 0)).is_chief
    assert not TFConfig(cluster=workers, task=TFTask("worker", 1)).is_chief


def test_sparse_document_matches_the_operators_dynamic_worker_shape() -> None:
    worker = TFConfig(cluster=PS_CLUSTER, task=TFTask("worker", 1))
    assert json.loads(worker.render_sparse()) == {
        "sparseCluster": {"worker": {"1": "job-worker-1.ns.svc:2222"}, "ps": ["job-ps-0.ns.svc:2222"]},
        "task": {"type": "worker", "index": 1},
    }
    ps = TFConfig(cluster=PS_CLUSTER, task=TFTask("ps", 0))
    assert json.loads(ps.render_sparse())["sparseCluster"] == {"worker": {}, "ps": ["job-ps-0.ns.svc:2222"]}


def test_the_cluster_cannot_be_changed_after_construction() -> None:
    config = TFConfig(cluster={"worker": ["a:1"]}, task=TFTask("worker", 0))  # type: ignore[dict-item]
    assert config.cluster["worker"] == ("a:1",)
    with pytest.raises(TypeError):
        config.cluster["ps"] = ("p:1",)  # type: ignore[index]


def test_id_in_cluster_numbers_the_chief_first_then_the_workers() -> None:
    cluster = {"chief": ("c:1",), "worker": ("a:1", "b:1"), "evaluator": ("e:1",)}
    ids = {
        (t, i): TFConfig(cluster=cluster, task=TFTask(t, i)).id_in_cluster
        for t, i in (("chief", 0), ("worker", 0), ("worker", 1), ("evaluator", 0))
    }
    assert ids == {("chief", 0): 0, ("worker", 0): 1, ("worker", 1): 2, ("evaluator", 0): None}
    assert TFConfig(cluster={"worker": ("a:1", "b:1")}, task=TFTask("worker", 1)).id_in_cluster == 1
