"""kubetrain.runtimes.jax: what it hands `jax.distributed` from the JAXJob env (a stand-in jax records it)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from kubetrain.podcontract import ContractError
from kubetrain.runtimes import jax as kt_jax

ENV = {
    "COORDINATOR_ADDRESS": "job-worker-0",
    "COORDINATOR_PORT": "6666",
    "NUM_PROCESSES": "4",
    "PROCESS_ID": "3",
}


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """A stand-in `jax` module whose `distributed` records initialize and shutdown."""
    recorded: list[tuple[str, dict[str, Any]]] = []
    distributed = types.SimpleNamespace(
        initialize=lambda **kwargs: recorded.append(("initialize", kwargs)),
        shutdown=lambda: recorded.append(("shutdown", {})),
    )
    monkeypatch.setitem(sys.modules, "jax", types.SimpleNamespace(distributed=distributed))
    return recorded


def test_the_jaxjob_env_becomes_initialize_arguments_and_shutdown_follows(
    calls: list[tuple[str, dict[str, Any]]],
) -> None:
    with kt_jax.distributed(timeout_s=60, env=ENV) as ctx:
        assert (ctx.process_id, ctx.num_processes, ctx.coordinator) == (3, 4, "job-worker-0:6666")
        assert ctx.distributed and not ctx.is_chief
    assert calls == [
        (
            "initialize",
            {
                "coordinator_address": "job-worker-0:6666",
                "num_processes": 4,
                "process_id": 3,
                "initialization_timeout": 60,
            },
        ),
        ("shutdown", {}),
    ]


def test_without_the_env_the_process_runs_alone_and_jax_is_not_touched(
    calls: list[tuple[str, dict[str, Any]]],
) -> None:
    with kt_jax.distributed(env={}) as ctx:
        assert (ctx.process_id, ctx.num_processes, ctx.coordinator, ctx.is_chief) == (0, 1, None, True)
    assert calls == []


def test_half_the_env_is_a_contract_error_before_jax_is_called(
    calls: list[tuple[str, dict[str, Any]]],
) -> None:
    with pytest.raises(ContractError, match="PROCESS_ID: not set"):
        kt_jax.init_distributed(env={k: v for k, v in ENV.items() if k != "PROCESS_ID"})
    assert calls == []
