"""The test-support pieces that need no running plane: where the binaries are looked for (the same rule
as hack/testbin.sh), the fixture's failure when they are missing, the kwok helpers' input checks, and the
readers of an audit log and of an operator's /metrics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kubetrain.testing import binaries, components, process
from kubetrain.testing.audit import created
from kubetrain.testing.binaries import COMPONENTS, MissingBinariesError, find_binaries, repo_root
from kubetrain.testing.certs import Pki
from kubetrain.testing.kwok import (
    ANNOTATION_EXIT_CODE,
    ANNOTATION_OUTCOME,
    ANNOTATION_RUN_FOR,
    FAKE_NODE_LABEL,
    GPU_RESOURCE,
    FakeNode,
    Outcome,
    outcome_annotations,
)
from kubetrain.testing.operator_process import OperatorProcess

ROOT = repo_root()


def script_dir(env: dict[str, str]) -> Path:
    out = subprocess.run(
        ["bash", str(ROOT / "hack" / "testbin.sh"), "--print-dir"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def test_python_and_build_script_agree_on_the_binary_directory(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    expected = script_dir(env)
    assert binaries.testbin_dir(env) == expected
    assert expected.parent == tmp_path / "cache" / "kubetrain" / "testbin"
    assert expected.name.startswith("k8s-v1.")


def test_testbin_dir_override_is_honoured_by_both(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "KUBETRAIN_TESTBIN_DIR": str(tmp_path / "bins")}
    assert binaries.testbin_dir(env) == tmp_path / "bins" == script_dir(env)


def test_missing_binaries_name_themselves_and_the_build_command(tmp_path: Path) -> None:
    (tmp_path / "etcd").write_text("#!/bin/sh\n")
    (tmp_path / "etcd").chmod(0o755)
    with pytest.raises(MissingBinariesError) as err:
        find_binaries({"KUBETRAIN_TESTBIN_DIR": str(tmp_path)})
    message = str(err.value)
    assert "bash hack/testbin.sh" in message
    assert "kube-apiserver" in message
    assert "etcd," not in message


def test_all_binaries_present_are_found(tmp_path: Path) -> None:
    for name in COMPONENTS:
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    assert find_binaries({"KUBETRAIN_TESTBIN_DIR": str(tmp_path)}).kubectl == tmp_path / "kubectl"


def test_fixture_fails_instead_of_skipping_when_binaries_are_missing(tmp_path: Path) -> None:
    (tmp_path / "test_needs_plane.py").write_text("def test_it(control_plane):\n    pass\n")
    env = {**os.environ, "KUBETRAIN_TESTBIN_DIR": str(tmp_path / "nothing-here")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "kubetrain.testing.pytest_plugin",
            "-p",
            "no:cacheprovider",
            "-q",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "1 error" in result.stdout
    assert "skipped" not in result.stdout
    assert "bash hack/testbin.sh" in result.stdout


def test_outcome_annotations_for_a_failure_with_exit_code() -> None:
    assert outcome_annotations(Outcome.FAILED, exit_code=137, run_for="5s") == {
        ANNOTATION_OUTCOME: "Failed",
        ANNOTATION_EXIT_CODE: "137",
        ANNOTATION_RUN_FOR: "5s",
    }


@pytest.mark.parametrize(
    ("outcome", "code", "hint"),
    [
        (Outcome.SUCCEEDED, 3, "Outcome.FAILED"),
        (Outcome.FAILED, 300, "0..255"),
        (Outcome.FAILED, -1, "0..255"),
    ],
)
def test_outcome_annotations_reject_impossible_exit_codes(outcome: Outcome, code: int, hint: str) -> None:
    with pytest.raises(ValueError, match="exit_code") as err:
        outcome_annotations(outcome, exit_code=code)
    assert hint in str(err.value)


def test_fake_node_is_managed_by_kwok_and_has_gpu_capacity() -> None:
    manifest = FakeNode("n1", cpu="8", memory="32Gi", gpus=4, labels={"pool": "a"}).manifest()
    assert manifest["metadata"]["labels"][FAKE_NODE_LABEL] == "true"
    assert manifest["metadata"]["labels"]["pool"] == "a"
    assert manifest["status"]["capacity"] == {"cpu": "8", "memory": "32Gi", "pods": "110", GPU_RESOURCE: "4"}
    assert manifest["status"]["allocatable"] == manifest["status"]["capacity"]
    assert GPU_RESOURCE not in FakeNode("cpu-only", gpus=0).manifest()["status"]["capacity"]


def test_only_orphaned_plane_directories_are_swept(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan = process.make_owned_tempdir("kubetrain-cp-", str(tmp_path))
    (orphan / process.OWNER_FILE).write_text(str(dead.pid))
    alive = process.make_owned_tempdir("kubetrain-cp-", str(tmp_path))
    unstamped = tmp_path / "kubetrain-cp-manual"
    unstamped.mkdir()

    removed = process.sweep_orphaned_tempdirs("kubetrain-cp-", [str(tmp_path)])

    assert removed == [orphan]
    assert alive.is_dir()
    assert unstamped.is_dir()


def test_kube_controller_manager_runs_extra_controllers_once_after_its_own(tmp_path: Path) -> None:
    pki = make_pki_stub(tmp_path)
    bins = binaries.Binaries(tmp_path)
    plain = components.kcm_args(bins, tmp_path / "k", pki)
    more = components.kcm_args(bins, tmp_path / "k", pki, ["job-controller", "namespace-controller"])
    flag = next(a for a in plain if a.startswith("--controllers="))
    assert flag == f"--controllers={','.join(components.CONTROLLERS)}"
    assert f"{flag},job-controller" in more
    assert len(more) == len(plain)


def make_pki_stub(directory: Path) -> Pki:
    return Pki(
        *(directory / name for name in ("ca.crt", "ca.key", "s.crt", "s.key", "a.crt", "a.key", "sa", "sp"))
    )


def test_created_counts_each_object_a_201_create_made_and_nothing_else(tmp_path: Path) -> None:
    def event(name: str, code: int, **ref: str) -> str:
        object_ref = {"resource": "pods", "namespace": "ns", "name": name, **ref}
        return json.dumps({"verb": "create", "objectRef": object_ref, "responseStatus": {"code": code}})

    log = tmp_path / "audit.log"
    log.write_text("\n".join([
        event("a", 201), event("a", 409), event("a", 201), event("b", 201),
        event("b", 201, namespace="other"), event("b", 201, resource="services"),
        event("b", 201, subresource="binding"), '{"verb": "create", "objectRef": {"na',
    ]))  # fmt: skip
    assert created(log, "pods", "ns") == {"a": 2, "b": 1}


def test_an_operators_samples_are_summed_over_the_labels_asked_for() -> None:
    class Scraped(OperatorProcess):
        def __init__(self) -> None:
            pass

        def metrics(self) -> str:
            return (
                "# TYPE kubetrain_jobs_skipped_total counter\n"
                'kubetrain_jobs_skipped_total{job_namespace="a",reason="managed_by"} 3.0\n'
                'kubetrain_jobs_skipped_total{job_namespace="b",reason="managed_by"} 1.0\n'
                'kubetrain_jobs_skipped_created{job_namespace="b",reason="managed_by"} 1.7e+09\n'
                "workqueue_depth 2.0\n"
            )

    op = Scraped()
    assert op.sample("kubetrain_jobs_skipped_total") == 4
    assert op.sample("kubetrain_jobs_skipped_total", job_namespace="a") == 3
    assert op.sample("kubetrain_jobs_skipped_total", job_namespace="c") == 0
    assert op.sample("workqueue_depth") == 2
