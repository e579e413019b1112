"""JAXJob env: what the operator renders and what one JAX process reads (JaxEnv), field by field."""

from __future__ import annotations

import pytest

from kubetrain.podcontract import ContractError, JaxEnv

ENV = JaxEnv(coordinator_address="job-worker-0", coordinator_port=6666, num_processes=3, process_id=2)
RENDERED = {
    "PYTHONUNBUFFERED": "1",
    "COORDINATOR_PORT": "6666",
    "COORDINATOR_ADDRESS": "job-worker-0",
    "NUM_PROCESSES": "3",
    "PROCESS_ID": "2",
}


def test_render_in_the_training_operators_order() -> None:
    assert list(ENV.render().items()) == list(RENDERED.items())


def test_parse_reads_back_what_render_wrote() -> None:
    assert JaxEnv.parse(ENV.render()) == ENV
    assert JaxEnv.from_env(RENDERED) == ENV


def test_coordinator_is_what_jax_distributed_initialize_takes() -> None:
    assert ENV.coordinator == "job-worker-0:6666"
    v6 = JaxEnv(coordinator_address="[fd00::1]", coordinator_port=6666, num_processes=1, process_id=0)
    assert v6.coordinator == "[fd00::1]:6666"


def test_no_jaxjob_env_means_a_single_process() -> None:
    assert JaxEnv.from_env({"PATH": "/bin"}) is None


@pytest.mark.parametrize(
    "missing", ["COORDINATOR_ADDRESS", "COORDINATOR_PORT", "NUM_PROCESSES", "PROCESS_ID"]
)
def test_half_the_env_names_the_missing_variable(missing: str) -> None:
    env = {k: v for k, v in RENDERED.items() if k != missing}
    with pytest.raises(ContractError) as err:
        JaxEnv.from_env(env)
    assert (err.value.variable, err.value.problem) == (missing, "not set")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("COORDINATOR_PORT", "http"),
        ("COORDINATOR_PORT", "0"),
        ("COORDINATOR_PORT", "70000"),
        ("NUM_PROCESSES", "0"),
        ("NUM_PROCESSES", "two"),
        ("PROCESS_ID", "-1"),
        ("PROCESS_ID", "3"),
        ("COORDINATOR_ADDRESS", "job-worker-0:6666"),
        ("COORDINATOR_ADDRESS", "job worker"),
    ],
)
def test_a_malformed_value_names_its_variable(variable: str, value: str) -> None:
    with pytest.raises(ContractError) as err:
        JaxEnv.parse({**RENDERED, variable: value})
    assert err.value.variable == variable
    assert "COORDINATOR_ADDRESS, COORDINATOR_PORT, NUM_PROCESSES and PROCESS_ID" in err.value.fix
