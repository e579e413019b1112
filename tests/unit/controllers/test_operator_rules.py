"""What the operator fails a job for (`<Kind>FailedValidation`), `submit`, `run --local` and `TrainingClient`
refuse before anything is sent, with the operator's own code (`kubetrain.controllers.checks`).

Two halves keep it so: the operator fails a job for its spec only through `JobController.job_errors`
(checked on the source, so a rule added anywhere else fails here), and every client entry point runs that
method (checked by adding a rule to a controller and seeing each entry point refuse with it).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api import FieldError, InvalidJobError, PyTorchJob, load_jobs
from kubetrain.cli import main
from kubetrain.cli.exitcodes import ExitCode
from kubetrain.cli.run import _load
from kubetrain.client.jobs import read_jobs
from kubetrain.controllers.checks import operator_errors
from kubetrain.controllers.pytorch import PyTorchJobController

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "kubetrain"
DDP = ROOT / "examples" / "pytorch" / "pytorch-ddp.yaml"
MODE = "metadata.annotations[kubetrain.io/service-mode]"


def _mpijob() -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "mpi", "image": "trainer:1"}]}}
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi", "annotations": {"kubetrain.io/service-mode": "replica"}},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": pod},
                "Worker": {"replicas": 2, "template": pod},
            }
        },
    }


def _elastic_with_a_port_in_rdzv_host() -> dict[str, Any]:
    job: dict[str, Any] = load_jobs(DDP.read_text())[0].to_wire()
    job["spec"]["pytorchReplicaSpecs"].pop("Master")
    job["spec"]["elasticPolicy"] = {"rdzvHost": "etcd.infra:2379", "minReplicas": 1, "maxReplicas": 3}
    return job


def _entry_points(
    job: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Iterator[tuple[str, str]]:
    """(entry point, what it said) for each way a user hands kubetrain a job before it is sent."""
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    calls = (
        ("TrainingClient", lambda: read_jobs(job)),
        ("run --local", lambda: _load(path, None, resume=False)),
    )
    for name, call in calls:
        with pytest.raises(InvalidJobError) as raised:
            call()
        yield name, str(raised.value)
    capsys.readouterr()
    assert main(["submit", "--dry-run=client", str(path)]) == ExitCode.USAGE
    yield "submit", capsys.readouterr().err


def _bad_failure_policy() -> dict[str, Any]:
    job: dict[str, Any] = load_jobs(DDP.read_text())[0].to_wire()
    job["metadata"]["annotations"] = {"kubetrain.io/failure-policy": '{"rules": [{"action": "Reboot"}]}'}
    return job


@pytest.mark.parametrize(
    ("job", "field"),
    [
        (_mpijob(), MODE),
        (_elastic_with_a_port_in_rdzv_host(), "spec.elasticPolicy.rdzvHost"),
        (_bad_failure_policy(), "metadata.annotations[kubetrain.io/failure-policy].rules[0].action"),
    ],
    ids=["mpijob-service-mode", "pytorch-rdzv-host", "failure-policy"],
)
def test_what_the_operator_fails_every_entry_point_refuses(
    job: dict[str, Any], field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    said = dict(_entry_points(job, tmp_path, capsys))
    assert set(said) == {"TrainingClient", "run --local", "submit"}
    for name, text in said.items():
        assert field in text, f"{name}: {text}"


def test_a_valid_job_passes_the_operators_rules() -> None:
    (job,) = read_jobs(DDP)
    assert operator_errors(job) == []


def test_a_rule_added_to_a_controller_is_checked_by_every_entry_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def stricter(self: PyTorchJobController, job: PyTorchJob) -> Sequence[FieldError]:
        return [FieldError("spec.runPolicy", "breaks a new operator rule", "follow it")]

    monkeypatch.setattr(PyTorchJobController, "validate", stricter)
    said = dict(_entry_points(load_jobs(DDP.read_text())[0].to_wire(), tmp_path, capsys))
    for name, text in said.items():
        assert "spec.runPolicy: breaks a new operator rule" in text, f"{name}: {text}"


def _calls(function: ast.AST, names: set[str]) -> Iterator[str]:
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in names:
                yield called


def _failing_sites() -> set[tuple[str, str, str]]:
    """(module, function, call) for every call that fails a job for its spec: `invalid(...)` on the
    status builder or the sync, and `reject(...)`."""
    sites = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                sites |= {(module, node.name, call) for call in _calls(node, {"invalid", "reject"})}
    return sites


def test_the_operator_fails_a_job_for_its_spec_only_through_job_errors() -> None:
    """A new rule written anywhere but in `job_errors` (or the hooks it calls) adds a call site here."""
    assert _failing_sites() == {
        ("kubetrain.common.job.controller", "_reconcile", "reject"),  # the model does not parse: so does
        ("kubetrain.common.job.controller", "_sync", "invalid"),  # ... every client (parse_job)
        ("kubetrain.common.job.controller", "_unexpected", "reject"),  # a hook that keeps raising: not a
        ("kubetrain.common.job.sync", "invalid", "invalid"),  # rule of the spec (<Kind>ReconcileError)
    }
    source = (PACKAGE / "common" / "job" / "controller.py").read_text()
    sync = next(
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.AsyncFunctionDef) and node.name == "_sync"
    )
    assigned = {
        ast.unparse(target): ast.unparse(node.value)
        for node in ast.walk(sync)
        if isinstance(node, ast.Assign)
        for target in node.targets
    }
    invalid = [
        ast.unparse(n) for n in ast.walk(sync) if isinstance(n, ast.Call) and "invalid" in ast.unparse(n.func)
    ]
    assert (assigned.get("errors"), invalid) == ("self.job_errors(sync.job)", ["sync.invalid(errors)"])
