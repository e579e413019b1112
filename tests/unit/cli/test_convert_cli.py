"""`kubetrain convert`: files, directories and stdin in; v2beta1 out; notes on stderr; all or nothing."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
import yaml

from kubetrain.cli import main

V1_DIR = Path(__file__).resolve().parents[1] / "api" / "mpijob_v1"

NAMESPACE = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: research\n"
V2_JOB = (Path(__file__).resolve().parents[3] / "examples" / "mpi" / "mpi-allreduce-openmpi.yaml").read_text()


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["convert", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A repository-like directory: v1 jobs in a subfolder, one beside a Namespace, one v2beta1 job."""
    root = tmp_path / "jobs"
    (root / "hpc").mkdir(parents=True)
    shutil.copy(V1_DIR / "intel-mpi-listed.yaml", root / "hpc" / "intel.yaml")
    (root / "mnist.yaml").write_text(NAMESPACE + "---\n" + (V1_DIR / "horovod-tensorflow.yaml").read_text())
    (root / "already-v2.yaml").write_text(V2_JOB)
    (root / "README.md").write_text("not a job")
    return root


def _kinds(text: str) -> list[tuple[str, str]]:
    return [(d["apiVersion"], d["kind"]) for d in yaml.safe_load_all(text) if d]


def test_a_directory_converts_into_an_output_tree_of_the_same_names(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "v2"
    code, out, err = _run(capsys, str(tree), "--output-dir", str(out_dir))
    assert code == 0, err
    assert out == ""
    written = sorted(str(p.relative_to(out_dir)) for p in out_dir.rglob("*") if p.is_file())
    assert written == ["already-v2.yaml", "hpc/intel.yaml", "mnist.yaml"]
    # The Namespace stays beside its job; the List's two jobs are converted; v2beta1 input is kept as is.
    v2 = ("kubeflow.org/v2beta1", "MPIJob")
    assert _kinds((out_dir / "mnist.yaml").read_text()) == [("v1", "Namespace"), v2]
    assert _kinds((out_dir / "hpc" / "intel.yaml").read_text()) == [v2, v2]
    assert list(yaml.safe_load_all((out_dir / "already-v2.yaml").read_text())) == list(
        yaml.safe_load_all(V2_JOB)
    )
    assert "converted 3 MPIJob(s)" in err
    # Notes name the file, the job and the v1 field.
    assert f"{tree / 'hpc' / 'intel.yaml'}: MPIJob 'impi-bench': spec.mainContainer: dropped:" in err


def test_stdout_and_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO((V1_DIR / "elastic-horovodrun.yaml").read_text()))
    code, out, err = _run(capsys, "-")
    assert code == 0, err
    [job] = list(yaml.safe_load_all(out))
    assert job["apiVersion"] == "kubeflow.org/v2beta1"
    assert job["metadata"]["name"] == "elastic-resnet"
    assert "-: MPIJob 'elastic-resnet': spec: check:" in err


def test_an_invalid_result_writes_nothing_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = yaml.safe_load((V1_DIR / "horovod-tensorflow.yaml").read_text())
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["replicas"] = 2
    source = tmp_path / "two-launchers.yaml"
    source.write_text(yaml.safe_dump(job))
    out_dir = tmp_path / "out"
    code, _, err = _run(capsys, str(source), "--output-dir", str(out_dir))
    assert code == 1
    assert not out_dir.exists()
    assert "not valid; nothing written" in err
    assert "spec.mpiReplicaSpecs.Launcher.replicas" in err


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"\xff\xfe not utf-8", "not UTF-8"),
        (b"a: [unclosed", "not valid YAML"),
        (NAMESPACE.encode(), "no kubeflow.org/v1 MPIJob found"),
    ],
)
def test_unusable_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, expected: str
) -> None:
    source = tmp_path / "input.yaml"
    source.write_bytes(content)
    code, out, err = _run(capsys, str(source))
    assert code == 2
    assert out == ""
    assert expected in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_a_missing_path_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, str(tmp_path / "nope.yaml"))
    assert code == 2
    assert "nope.yaml: no such file or directory" in err
