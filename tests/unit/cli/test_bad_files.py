"""Every bad job file, through the real `kubetrain` console script: one line naming the file, exit code 2.

A user who hands `submit` or `run --local` a file that is not UTF-8, not YAML, nested a thousand levels
deep, far too large, holding several jobs where one is expected, or of another kind must get one line that
says which file and what is wrong, never a Python traceback (issue 12, B4). These run the installed
console script as a subprocess, exactly as a user does; no cluster is involved (`submit --dry-run=client`
stops after local validation, and nothing of these files gets that far).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from kubetrain.api.load import MAX_DEPTH, MAX_INPUT_BYTES

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "pytorch" / "pytorch-ddp.yaml"
COMMANDS = {"submit": ["submit", "--dry-run=client"], "run": ["run", "--local"]}

TF_HEAD = "apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata:\n  name: "


def _deep_block(levels: int) -> bytes:
    return ("a:\n" + "".join("  " * i + "b:\n" for i in range(1, levels)) + "  " * levels + "x: 1\n").encode()


BAD_FILES: dict[str, tuple[Callable[[], bytes], str]] = {
    "latin-1": (lambda: (TF_HEAD + "caf").encode() + b"\xe9\n", "not UTF-8 text (byte 0xe9 at line 4"),
    "not-yaml": (lambda: b"apiVersion: [kubeflow.org/v1\nkind: TFJob\n", "not valid YAML at line"),
    "deep-block": (lambda: _deep_block(1000), f"nested too deeply at line {MAX_DEPTH}, "),
    "deep-flow": (lambda: b"[" * 1000 + b"]" * 1000 + b"\n", "nested too deeply at line 1"),
    "deep-spec": (
        lambda: (TF_HEAD + "x\nspec:\n").encode() + b"  a: " + b"{b: " * 990 + b"1" + b"}" * 990 + b"\n",
        "nested too deeply",
    ),
    "too-large": (
        lambda: (TF_HEAD + "x\n#").encode() + b"a" * MAX_INPUT_BYTES + b"\n",
        "larger than 3 MiB, the most the API server accepts",
    ),
    "other-kind": (
        lambda: b"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n",
        "holds no job; write a TFJob, PyTorchJob or MPIJob document",  # a Pod is left to kubectl
    ),
    "other-version": (
        lambda: b"apiVersion: kubeflow.org/v2\nkind: TFJob\nmetadata: {name: x}\n",
        "is invalid: apiVersion: TFJob is not served as 'kubeflow.org/v2'; set apiVersion: kubeflow.org/v1",
    ),
    "a-list": (lambda: b"- a\n- b\n", "a job must be a mapping"),
}


def kubetrain(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """The console script of this interpreter's environment, importing this tree's `kubetrain`."""
    script = Path(sys.executable).parent / "kubetrain"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [str(script), *args], input=stdin, capture_output=True, env=env, timeout=60, check=False
    )


def _one_line_error(result: subprocess.CompletedProcess[bytes], command: str) -> str:
    stderr = result.stderr.decode()
    assert "Traceback" not in stderr
    assert result.returncode == 2, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"kubetrain {command}: ")
    return lines[0]


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_file_is_one_line_naming_the_file(tmp_path: Path, command: str, case: str) -> None:
    content, expected = BAD_FILES[case]
    path = tmp_path / f"{case}.yaml"
    path.write_bytes(content())
    line = _one_line_error(kubetrain(*COMMANDS[command], str(path)), command)
    assert line.startswith(f"kubetrain {command}: {path}")
    assert expected in line


def test_submit_from_standard_input_names_it(tmp_path: Path) -> None:
    line = _one_line_error(
        kubetrain("submit", "--dry-run=client", "-", stdin=b"kind: TFJob\nx: \xff\n"), "submit"
    )
    assert line.startswith("kubetrain submit: standard input: not UTF-8 text (byte 0xff at line 2, column 4)")


def test_run_local_refuses_several_jobs_in_one_file(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    text = EXAMPLE.read_text()
    path.write_text(text + "---\n" + text.replace("name: pytorch-ddp\n", "name: pytorch-ddp-2\n", 1))
    line = _one_line_error(kubetrain("run", "--local", str(path)), "run")
    assert f"{path} holds 2 jobs: `run --local` runs exactly one; split the file" in line


def test_submit_takes_several_jobs_in_one_file(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    text = EXAMPLE.read_text()
    path.write_text(text + "---\n" + text.replace("name: pytorch-ddp\n", "name: pytorch-ddp-2\n", 1))
    result = kubetrain("submit", "--dry-run=client", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().splitlines() == [
        "pytorchjob.kubeflow.org/pytorch-ddp valid (client dry run)",
        "pytorchjob.kubeflow.org/pytorch-ddp-2 valid (client dry run)",
    ]


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    for command in sorted(COMMANDS):
        line = _one_line_error(kubetrain(*COMMANDS[command], str(tmp_path / "nope.yaml")), command)
        assert "nope.yaml: cannot be read (No such file or directory)" in line
