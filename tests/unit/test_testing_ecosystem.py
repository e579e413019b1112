"""hack/ecosystem.sh and kubetrain.testing.ecosystem agree on where each pinned component's build lives,
a cached build is never rebuilt, and a missing one fails naming the command that builds it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kubetrain.testing.binaries import repo_root
from kubetrain.testing.ecosystem import MissingComponentError, components, ecosystem_dir, find_component

SCRIPT = repo_root() / "hack" / "ecosystem.sh"


def script(env: dict[str, str], *args: str) -> str:
    out = subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, check=True)
    return out.stdout


def fake_build(root: Path, name: str, version: str) -> None:
    directory = root / f"{name}-{version}"
    (directory / "bin").mkdir(parents=True)
    (directory / "bin" / name).write_text("#!/bin/sh\n")
    (directory / "bin" / name).chmod(0o755)
    (directory / "stamp").write_text("built\n")


def test_script_and_module_agree_on_the_cache_root(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "c")}
    assert (
        Path(script(env, "--print-dir").strip()) == ecosystem_dir(env) == tmp_path / "c/kubetrain/ecosystem"
    )


def test_every_pinned_component_names_a_module_version_and_package() -> None:
    pinned = components()
    assert {"kueue", "scheduler-plugins"} <= set(pinned)
    for component in pinned.values():
        assert component.version.startswith("v") and component.package.startswith("./cmd/")
        assert component.directory.name == f"{component.name}-{component.version}"


def test_cached_components_are_not_rebuilt_and_are_found(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBETRAIN_ECOSYSTEM_DIR": str(tmp_path)}
    pinned = components(env)
    for component in pinned.values():
        fake_build(tmp_path, component.name, component.version)
    out = script(env)  # no `go` on this PATH: a rebuild would fail
    assert out.count(": cached") == len(pinned)
    assert (
        find_component("kueue", env).binary == tmp_path / f"kueue-{pinned['kueue'].version}" / "bin" / "kueue"
    )


def test_a_missing_component_names_the_build_command(tmp_path: Path) -> None:
    with pytest.raises(MissingComponentError, match=r"bash hack/ecosystem\.sh"):
        find_component("kueue", {"KUBETRAIN_ECOSYSTEM_DIR": str(tmp_path)})
    with pytest.raises(MissingComponentError, match="known: kueue"):
        find_component("volcano", {"KUBETRAIN_ECOSYSTEM_DIR": str(tmp_path)})
