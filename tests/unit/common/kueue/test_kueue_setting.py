"""Which kinds the operator's Kueue integration takes, decided once at start-up from the flag, the Workload
API being served, and Kueue's own configuration (read over the dumb in-memory API client)."""

from __future__ import annotations

import logging

import pytest

from kubetrain.api import KINDS, MPIJOB
from kubetrain.common.cmdline import config_from_args, operator_parser
from kubetrain.common.errors import Forbidden, NotFound
from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.resources import CONFIGMAPS
from kubetrain.common.kueue import RESOURCE_FLAVORS, resolve

ALL = frozenset(k.kind for k in KINDS)
CONFIG = """
integrations:
  frameworks:
  - batch/job
  - kubeflow.org/tfjob
  externalFrameworks:
  - PyTorchJob.v1.kubeflow.org
waitForPodsReady:
  timeout: 5m
"""


async def _api(config: str | None) -> InMemoryApiClient:
    api = InMemoryApiClient()
    if config is not None:
        body = {
            "metadata": {"name": "kueue-manager-config"},
            "data": {"controller_manager_config.yaml": config},
        }
        await api.create(CONFIGMAPS, "kueue-system", body)
    return api


async def test_auto_takes_the_kinds_kueues_configuration_does_not_integrate() -> None:
    found = await resolve(await _api(CONFIG), "auto", KINDS)
    assert found is not None
    assert found.kinds == ALL - {"TFJob"}
    assert found.adopt and found.pods_ready


async def test_auto_without_kueues_configuration_assumes_v019s_defaults(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = await _api(None)
    api.fail("get", Forbidden("configmaps is forbidden", reason="Forbidden"), resource=CONFIGMAPS)
    with caplog.at_level(logging.INFO, logger="kubetrain.kueue"):
        found = await resolve(api, "auto", KINDS)
    assert found is not None and found.kinds == ALL - {MPIJOB.kind}
    assert not found.adopt, "cannot tell a moved cluster from one where Kueue's integration is on"
    assert "assuming Kueue v0.19's default configuration" in caplog.text
    assert "forbidden" not in caplog.text, "a refusal is named, not quoted (e2e tests read quotes as denials)"


async def test_an_explicit_list_and_none() -> None:
    found = await resolve(await _api(CONFIG), frozenset({"TFJob"}), KINDS)
    assert found is not None and found.kinds == {"TFJob"} and not found.adopt
    assert await resolve(await _api(CONFIG), "none", KINDS) is None


async def test_a_namespaced_operator_may_not_read_flavors_and_runs_without(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = await _api(CONFIG)
    denied = 'resourceflavors is forbidden: User "system:serviceaccount:ns:op" cannot list resource'
    api.fail("list", Forbidden(denied, reason="Forbidden"), resource=RESOURCE_FLAVORS)
    with caplog.at_level(logging.INFO, logger="kubetrain.kueue"):
        assert await resolve(api, "auto", KINDS) is None
    assert "namespaced-reader" in caplog.text and "cannot list" not in caplog.text


async def test_no_workload_api_means_off(caplog: pytest.LogCaptureFixture) -> None:
    api = await _api(CONFIG)
    api.fail("list", NotFound("the server could not find the requested resource"), resource=RESOURCE_FLAVORS)
    with caplog.at_level(logging.INFO, logger="kubetrain.kueue"):
        assert await resolve(api, "auto", KINDS) is None
    assert "Kueue is not installed" in caplog.text


def test_the_flags_reach_the_config_and_a_bad_config_name_is_named() -> None:
    args = operator_parser().parse_args(["--kueue-integration=PyTorchJob", "--kueue-config=k/cfg"])
    config = config_from_args(args, lease_name="x")
    assert (config.kueue_integration, config.kueue_config) == ("PyTorchJob", "k/cfg")
    assert config_from_args(operator_parser().parse_args([]), lease_name="x").kueue_integration == "auto"
    with pytest.raises(ValueError, match=r"--kueue-config='cfg': write NAMESPACE/NAME"):
        config_from_args(operator_parser().parse_args(["--kueue-config=cfg"]), lease_name="x")
