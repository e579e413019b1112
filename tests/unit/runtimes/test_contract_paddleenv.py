"""PaddleEnv: the PaddleJob env rendered per field, read back from a pod's resolved env, and refused with the
variable's name when it is missing or malformed."""

from __future__ import annotations

import pytest

from kubetrain.podcontract import ContractError, PaddleEnv, PaddleRole

POD_IP = {"fieldRef": {"fieldPath": "status.podIP"}}


def test_a_peer_of_a_collective_job_renders_three_values_and_pythonunbuffered() -> None:
    env = PaddleEnv(job_id="mnist", nnodes=2, master_host="mnist-worker-0.mnist", master_port=36543)
    assert list(env.render().items()) == [
        ("PYTHONUNBUFFERED", "1"),
        ("PADDLE_JOB_ID", "mnist"),
        ("PADDLE_NNODES", "2"),
        ("PADDLE_MASTER", "mnist-worker-0.mnist:36543"),
    ]


def test_the_rendezvous_pod_gets_its_ip_from_the_downward_api_just_before_paddle_master() -> None:
    env = PaddleEnv(job_id="mnist", nnodes=2, master_host=None, master_port=36543)
    assert list(env.render().items())[3:] == [
        ("POD_IP_DUMMY", POD_IP),
        ("PADDLE_MASTER", "$(POD_IP_DUMMY):36543"),
    ]


@pytest.mark.parametrize(
    "role,extra", [(PaddleRole.SERVER, "PADDLE_SERVER_NUM"), (PaddleRole.TRAINER, "PADDLE_TRAINER_NUM")]
)
def test_parameter_server_roles_add_one_count(role: PaddleRole, extra: str) -> None:
    rendered = PaddleEnv(job_id="j", nnodes=3, master_host="j-master-0", master_port=1, role=role).render()
    assert list(rendered)[-1] == extra and rendered[extra] == "1"
    other = {"PADDLE_SERVER_NUM", "PADDLE_TRAINER_NUM"} - {extra}
    assert other.isdisjoint(rendered)


def test_an_ipv6_master_is_written_in_brackets() -> None:
    assert PaddleEnv(job_id="j", nnodes=1, master_host="fd00::5", master_port=80).master == "[fd00::5]:80"


@pytest.mark.parametrize("role", [None, PaddleRole.SERVER, PaddleRole.TRAINER])
def test_parse_reads_back_what_a_peer_was_rendered(role: PaddleRole | None) -> None:
    env = PaddleEnv(job_id="ctr", nnodes=5, master_host="ctr-master-0.ctr", master_port=36543, role=role)
    rendered = {k: v for k, v in env.render().items() if isinstance(v, str)}
    assert PaddleEnv.parse(rendered) == env


def test_parse_of_the_rendezvous_pod_sees_the_expanded_pod_ip() -> None:
    resolved = {"PADDLE_JOB_ID": "j", "PADDLE_NNODES": "2", "PADDLE_MASTER": "10.1.2.3:36543"}
    assert PaddleEnv.parse(resolved) == PaddleEnv("j", 2, "10.1.2.3", 36543)


def test_from_env_is_none_outside_a_paddlejob() -> None:
    assert PaddleEnv.from_env({"HOME": "/root"}) is None


@pytest.mark.parametrize(
    "env,variable",
    [
        ({"PADDLE_NNODES": "2", "PADDLE_JOB_ID": "j"}, "PADDLE_MASTER"),
        ({"PADDLE_MASTER": "h:1", "PADDLE_JOB_ID": "j"}, "PADDLE_NNODES"),
        ({"PADDLE_MASTER": "h:1", "PADDLE_NNODES": "2"}, "PADDLE_JOB_ID"),
        ({"PADDLE_MASTER": "h", "PADDLE_NNODES": "2", "PADDLE_JOB_ID": "j"}, "PADDLE_MASTER"),
        ({"PADDLE_MASTER": "h:0", "PADDLE_NNODES": "2", "PADDLE_JOB_ID": "j"}, "PADDLE_MASTER"),
        ({"PADDLE_MASTER": "h:1", "PADDLE_NNODES": "0", "PADDLE_JOB_ID": "j"}, "PADDLE_NNODES"),
        ({"PADDLE_MASTER": "h:1", "PADDLE_NNODES": "two", "PADDLE_JOB_ID": "j"}, "PADDLE_NNODES"),
        ({"PADDLE_MASTER": "$(POD_IP_DUMMY):1", "PADDLE_NNODES": "2", "PADDLE_JOB_ID": "j"}, "PADDLE_MASTER"),
        (
            {"PADDLE_MASTER": "h:1", "PADDLE_NNODES": "2", "PADDLE_JOB_ID": "j", "PADDLE_SERVER_NUM": "x"},
            "PADDLE_SERVER_NUM",
        ),
        (
            {
                "PADDLE_MASTER": "h:1",
                "PADDLE_NNODES": "2",
                "PADDLE_JOB_ID": "j",
                "PADDLE_SERVER_NUM": "1",
                "PADDLE_TRAINER_NUM": "1",
            },
            "PADDLE_SERVER_NUM",
        ),
    ],
)
def test_a_missing_or_malformed_value_names_the_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ContractError) as caught:
        PaddleEnv.from_env(env)
    assert caught.value.variable == variable
    assert caught.value.fix


@pytest.mark.parametrize(
    "kwargs,variable",
    [
        ({"job_id": ""}, "PADDLE_JOB_ID"),
        ({"nnodes": 0}, "PADDLE_NNODES"),
        ({"master_port": 70000}, "PADDLE_MASTER"),
        ({"master_host": "a b"}, "PADDLE_MASTER"),
    ],
)
def test_the_operator_side_refuses_what_the_launcher_could_not_read(
    kwargs: dict[str, object], variable: str
) -> None:
    fields: dict[str, object] = {"job_id": "j", "nnodes": 1, "master_host": "h", "master_port": 1}
    with pytest.raises(ContractError) as caught:
        PaddleEnv(**(fields | kwargs))  # type: ignore[arg-type]
    assert caught.value.variable == variable
