"""hack/gobuild.sh, the build step of hack/testbin.sh and hack/node.sh, driven with a stand-in `go` that
records its calls: the commands of one module come from one `go build`, a binary that prints the wrong
version is never installed, and the two k8s.io/kubernetes builds (the control plane's, the node's) take
turns, so that the second finds the packages they share compiled instead of compiling them beside the
first."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

from kubetrain.testing.binaries import repo_root

LIB = repo_root() / "hack" / "gobuild.sh"

# A stand-in for `go`: `go build -o OUT PKG...` logs its packages and its start and end times, waits
# FAKE_GO_SECONDS, then writes one executable per package that prints FAKE_GO_VERSION.
FAKE_GO = textwrap.dedent("""\
    #!/usr/bin/env bash
    set -eu
    case "$1 ${2:-}" in
      "env GOCACHE") echo "$FAKE_GOCACHE"; exit 0 ;;
      "env GOPROXY") echo off; exit 0 ;;
      "list -m") echo 2026-01-02T03:04:05Z; exit 0 ;;
    esac
    [ "$1" = build ] || { echo "fake go: unexpected: $*" >&2; exit 2; }
    shift
    out= pkgs=()
    while [ $# -gt 0 ]; do
      case "$1" in
        -o) out="$2"; shift 2 ;;
        -*) shift ;;
        *) pkgs+=("$1"); shift ;;
      esac
    done
    echo "start $(date +%s.%N) ${pkgs[*]}" >>"$FAKE_GO_LOG"
    sleep "${FAKE_GO_SECONDS:-0}"
    for p in "${pkgs[@]}"; do
      target="$out"
      case "$out" in */) target="$out$(basename "$p")" ;; esac
      printf '#!/bin/sh\\necho "%s"\\n' "$FAKE_GO_VERSION" >"$target"
      chmod +x "$target"
    done
    echo "end $(date +%s.%N) ${pkgs[*]}" >>"$FAKE_GO_LOG"
    """)

K8S_SPECS = (
    "kube-apiserver|k8s.io/kubernetes/cmd/kube-apiserver|Kubernetes v1.36.3|--version",
    "kubectl|k8s.io/kubernetes/cmd/kubectl|Client Version: v1.36.3|version --client",
)


def fake_env(tmp_path: Path, version: str, seconds: float = 0) -> dict[str, str]:
    fake = tmp_path / "fakebin"
    fake.mkdir(exist_ok=True)
    (fake / "go").write_text(FAKE_GO)
    (fake / "go").chmod(0o755)
    return {
        "PATH": f"{fake}:{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "FAKE_GOCACHE": str(tmp_path / "gocache"),
        "FAKE_GO_LOG": str(tmp_path / "go.log"),
        "FAKE_GO_VERSION": version,
        "FAKE_GO_SECONDS": str(seconds),
    }


def gb_build(env: dict[str, str], bin_dir: Path, *args: str) -> subprocess.Popen[str]:
    script = f'set -euo pipefail; . "{LIB}"; gb_label=test gb_bin="$1"; shift; gb_build "$@"'
    return subprocess.Popen(
        ["bash", "-c", script, "gb", str(bin_dir), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def run(env: dict[str, str], bin_dir: Path, *args: str) -> tuple[int, str]:
    proc = gb_build(env, bin_dir, *args)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out


def go_calls(tmp_path: Path) -> list[list[str]]:
    log = tmp_path / "go.log"
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


def test_the_commands_of_one_module_come_from_one_go_build_and_are_stamped(tmp_path: Path) -> None:
    env = fake_env(tmp_path, "Kubernetes v1.36.3 / Client Version: v1.36.3")
    bins = tmp_path / "bin"
    bins.mkdir()
    rc, out = run(env, bins, "--k8s", str(tmp_path), "tags", "-X a=b", *K8S_SPECS)
    assert rc == 0, out
    starts = [call[2:] for call in go_calls(tmp_path) if call[0] == "start"]
    assert starts == [["k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kubectl"]]
    for name in ("kube-apiserver", "kubectl"):
        assert os.access(bins / name, os.X_OK)
        assert "v1.36.3" in (bins / f"{name}.stamp").read_text()
    assert not (bins / ".build").exists()

    rc, out = run(env, bins, "--k8s", str(tmp_path), "tags", "", *K8S_SPECS)
    assert rc == 0, out
    assert len([c for c in go_calls(tmp_path) if c[0] == "start"]) == 1, "built ones are not built again"
    assert "kubectl: cached" in out


def test_a_binary_printing_another_version_is_not_installed(tmp_path: Path) -> None:
    env = fake_env(tmp_path, "Kubernetes v1.35.0")
    bins = tmp_path / "bin"
    bins.mkdir()
    rc, out = run(env, bins, str(tmp_path), "", "", K8S_SPECS[0])
    assert rc != 0
    assert "kube-apiserver built but 'kube-apiserver --version' printed 'Kubernetes v1.35.0'" in out
    assert "expected 'Kubernetes v1.36.3'" in out
    assert not (bins / "kube-apiserver").exists() and not (bins / "kube-apiserver.stamp").exists()


def test_the_two_k8s_builds_take_turns_so_the_second_reuses_the_shared_packages(tmp_path: Path) -> None:
    env = fake_env(tmp_path, "Kubernetes v1.36.3", seconds=1.5)
    (tmp_path / "plane").mkdir()
    (tmp_path / "node").mkdir()
    node_specs = ("kubelet|k8s.io/kubernetes/cmd/kubelet|Kubernetes v1.36.3|--version",)
    plane = gb_build(env, tmp_path / "plane", "--k8s", str(tmp_path), "", "", K8S_SPECS[0])
    node = gb_build(env, tmp_path / "node", "--k8s", str(tmp_path), "", "", *node_specs)
    outs = [p.communicate(timeout=60)[0] for p in (plane, node)]
    assert [plane.returncode, node.returncode] == [0, 0], outs
    times = {(c[0], c[2]): float(c[1]) for c in go_calls(tmp_path)}
    spans = sorted(
        (times[("start", p)], times[("end", p)])
        for p in ("k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kubelet")
    )
    assert spans[1][0] >= spans[0][1], f"the k8s builds overlapped: {spans}"
    assert any("waiting for the other k8s.io/kubernetes build" in out for out in outs)
