"""XGBoostJob env: what the operator renders and what one XGBoost process reads (XGBoostEnv), per field."""

from __future__ import annotations

import pytest

from kubetrain.podcontract import ContractError, XGBoostEnv

ENV = XGBoostEnv(
    master_addr="job-master-0",
    master_port=9999,
    world_size=3,
    rank=2,
    worker_port=9999,
    worker_addrs=("job-worker-0", "job-worker-1"),
)
RENDERED = {
    "MASTER_PORT": "9999",
    "MASTER_ADDR": "job-master-0",
    "WORLD_SIZE": "3",
    "RANK": "2",
    "PYTHONUNBUFFERED": "1",
    "WORKER_PORT": "9999",
    "WORKER_ADDRS": "job-worker-0,job-worker-1",
}
ALONE = XGBoostEnv(master_addr="job-master-0", master_port=9999, world_size=1, rank=0)


def test_render_in_the_training_operators_order() -> None:
    assert list(ENV.render().items()) == list(RENDERED.items())


def test_a_lone_master_renders_no_worker_variables() -> None:
    assert ALONE.render() == {
        "MASTER_PORT": "9999",
        "MASTER_ADDR": "job-master-0",
        "WORLD_SIZE": "1",
        "RANK": "0",
        "PYTHONUNBUFFERED": "1",
    }


@pytest.mark.parametrize("env", [ENV, ALONE])
def test_parse_reads_back_what_render_wrote(env: XGBoostEnv) -> None:
    assert XGBoostEnv.parse(env.render()) == env
    assert XGBoostEnv.from_env(env.render()) == env


def test_only_rank_0_is_the_master() -> None:
    assert ALONE.is_master and not ENV.is_master


def test_no_xgboostjob_env_means_a_single_process() -> None:
    assert XGBoostEnv.from_env({"PATH": "/bin"}) is None


@pytest.mark.parametrize("missing", ["MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"])
def test_half_the_env_names_the_missing_variable(missing: str) -> None:
    env = {k: v for k, v in RENDERED.items() if k != missing}
    with pytest.raises(ContractError) as err:
        XGBoostEnv.from_env(env)
    assert (err.value.variable, err.value.problem) == (missing, "not set")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MASTER_PORT", "http"),
        ("MASTER_PORT", "0"),
        ("MASTER_PORT", "70000"),
        ("WORLD_SIZE", "0"),
        ("WORLD_SIZE", "three"),
        ("RANK", "-1"),
        ("RANK", "3"),
        ("MASTER_ADDR", "job-master-0:9999"),
        ("MASTER_ADDR", "job master"),
        ("WORKER_PORT", "70000"),
        ("WORKER_ADDRS", "job-worker-0"),
        ("WORKER_ADDRS", "job-worker-0,job worker-1"),
    ],
)
def test_a_malformed_value_names_its_variable(variable: str, value: str) -> None:
    with pytest.raises(ContractError) as err:
        XGBoostEnv.parse({**RENDERED, variable: value})
    assert err.value.variable == variable
    assert "MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK" in err.value.fix


def test_worker_variables_come_with_more_than_one_replica_and_only_then() -> None:
    without = {k: v for k, v in RENDERED.items() if k != "WORKER_PORT"}
    with pytest.raises(ContractError) as err:
        XGBoostEnv.parse(without)
    assert (err.value.variable, err.value.problem) == ("WORKER_PORT", "must be set when WORLD_SIZE is 3")
    with pytest.raises(ContractError) as err:
        XGBoostEnv.parse({**ALONE.render(), "WORKER_PORT": "9999"})
    assert err.value.variable == "WORKER_PORT"
