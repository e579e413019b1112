"""The test plane's Kueue configuration: Kueue's own default, changed only where a test plane must differ and
by the recipe a user is told to add (kubetrain.testing.kueue)."""

from __future__ import annotations

from typing import Any

import yaml

from kubetrain.testing.kueue import RECIPE, configuration

DEFAULT: dict[str, Any] = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "health": {"healthProbeBindAddress": ":8081"},
    "leaderElection": {"leaderElect": True, "resourceName": "x"},
    "clientConnection": {"qps": 300, "burst": 500},
    "integrations": {"frameworks": ["batch/job", "kubeflow.org/mpijob", "pod"]},
}
LISTENERS = {"health": {"healthProbeBindAddress": "127.0.0.1:1"}, "leaderElection": {"leaderElect": False}}


def recipe() -> dict[str, list[str]]:
    found: dict[str, list[str]] = yaml.safe_load(RECIPE.read_text())["integrations"]
    return found


def test_kueues_default_is_kept_but_where_a_test_plane_must_differ() -> None:
    config = configuration(DEFAULT, LISTENERS)
    assert config["health"] == LISTENERS["health"] and config["leaderElection"] == {"leaderElect": False}
    assert config["clientConnection"] == DEFAULT["clientConnection"], "Kueue's own client limits stay"
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert config["integrations"]["frameworks"][:3] == DEFAULT["integrations"]["frameworks"]
    assert "waitForPodsReady" not in config
    assert DEFAULT["integrations"]["frameworks"] == ["batch/job", "kubeflow.org/mpijob", "pod"], "not mutated"


def test_the_recipe_is_added_to_kueues_lists() -> None:
    config = configuration(DEFAULT, LISTENERS)
    for key, values in recipe().items():
        assert set(values) <= set(config["integrations"][key]), key


def test_a_kind_switched_back_on_in_kueue_leaves_external_frameworks() -> None:
    """Kueue refuses a kind that is both built in and external (a Duplicate error at start)."""
    config = configuration(DEFAULT, LISTENERS, frameworks_on=["kubeflow.org/pytorchjob"],
                           wait_for_pods_ready={"timeout": "5s"})  # fmt: skip
    assert "kubeflow.org/pytorchjob" in config["integrations"]["frameworks"]
    external = config["integrations"].get("externalFrameworks", [])
    assert not [e for e in external if e.lower().startswith("pytorchjob.")]
    assert config["waitForPodsReady"] == {"timeout": "5s"}
