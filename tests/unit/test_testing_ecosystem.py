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


# A stand-in for `go`: `mod download -json M@V` answers with a module tree under $FAKE_MODS, `mod download`
# (the module's dependencies) and `build` are logged with the directory they ran in; `build -o OUT` writes
# OUT (its directory too, as go does).
FAKE_GO = """#!/usr/bin/env bash
set -eu
echo "$* @ $PWD" >>"$FAKE_GO_LOG"
if [ "$1 $2 ${3:-}" = "mod download -json" ]; then
  mkdir -p "$FAKE_MODS/m" && echo "module m" >"$FAKE_MODS/m/go.mod" && chmod -R a-w "$FAKE_MODS/m"
  printf '{\\n\\t"Dir": "%s",\\n}\\n' "$FAKE_MODS/m"
elif [ "$1" = build ]; then
  while [ "$1" != -o ]; do shift; done
  mkdir -p "$(dirname "$2")" && printf '#!/bin/sh\\n' >"$2" && chmod +x "$2"
fi
"""


def test_download_only_fetches_the_modules_and_leaves_the_build_to_the_next_run(tmp_path: Path) -> None:
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "go").write_text(FAKE_GO)
    (fake / "go").chmod(0o755)
    log = tmp_path / "go.log"
    cache = tmp_path / "cache"
    env = {
        "PATH": f"{fake}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "KUBETRAIN_ECOSYSTEM_DIR": str(cache),
        "FAKE_MODS": str(tmp_path / "mods"),
        "FAKE_GO_LOG": str(log),
    }
    version = components(env)["kueue"].version
    out = script(env, "--download", "kueue")
    assert "kueue" in out and "modules downloaded" in out
    calls = log.read_text().splitlines()
    commands = [c.split(" @ ")[0] for c in calls]
    assert commands == [f"mod download -json sigs.k8s.io/kueue@{version}", "mod download"]
    assert not calls[1].endswith(str(tmp_path / "mods" / "m")), "not in the read-only module cache"
    with pytest.raises(MissingComponentError):
        find_component("kueue", env)  # downloaded, not built

    out = script(env, "kueue")
    assert any(c.startswith("build ") for c in log.read_text().splitlines())
    assert find_component("kueue", env).binary == cache / f"kueue-{version}" / "bin" / "kueue"
