"""`kubetrain run`: bad input is refused with one clear line (exit 2) before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetrain.cli import main

JOB = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: tiny
{namespace}spec:
  runPolicy:
    suspend: {suspend}
  pytorchReplicaSpecs:
    Master:
      replicas: {replicas}
      template:
        spec:
          containers:
            - name: pytorch
              image: any
              command: ["python", "-c", "pass"]
"""


def write(
    tmp_path: Path, *, replicas: int = 1, suspend: str = "false", namespace: str = "", extra: str = ""
) -> Path:
    path = tmp_path / "job.yaml"
    ns = f"  namespace: {namespace}\n" if namespace else ""
    path.write_text(JOB.format(replicas=replicas, suspend=suspend, namespace=ns) + extra)
    return path


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["run", *args])
    return code, capsys.readouterr().err


def test_local_is_required(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run([str(write(tmp_path))], capsys)
    assert (code, err) == (
        2,
        "kubetrain run: only local runs exist: add --local (to run on a cluster, use `kubetrain submit`)\n",
    )


def test_an_invalid_job_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(["--local", str(write(tmp_path, replicas=2))], capsys)
    assert code == 2
    assert "spec.pytorchReplicaSpecs.Master.replicas" in err
    assert "Traceback" not in err


def test_a_file_with_two_jobs_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(
        tmp_path, extra="---\n" + JOB.format(replicas=1, suspend="false", namespace="").replace("tiny", "two")
    )
    code, err = run(["--local", str(path)], capsys)
    assert code == 2
    assert "holds 2 jobs: `run --local` runs exactly one; split the file" in err


def test_a_suspended_job_needs_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(["--local", str(write(tmp_path, suspend="true"))], capsys)
    assert code == 2
    assert "spec.runPolicy.suspend is true, so nothing would run: pass --resume" in err


def test_namespaces_must_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(["--local", "-n", "b", str(write(tmp_path, namespace="a"))], capsys)
    assert code == 2
    assert "metadata.namespace is 'a' but --namespace is 'b'" in err


def test_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(["--local", str(tmp_path / "nope.yaml")], capsys)
    assert code == 2
    assert f"{tmp_path / 'nope.yaml'}: cannot be read (No such file or directory)" in err


def test_help_says_images_are_ignored_and_lists_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    assert "images are ignored" in out
    assert "0    the job Succeeded" in out
