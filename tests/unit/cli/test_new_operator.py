"""`kubetrain new-operator` and the SleepJob example made with it: users' projects, type-checked from outside.

The generated project and examples/operators/sleepjob must pass `mypy --strict` as a user's project would
run it: from the project's directory, with its own pyproject.toml, kubetrain found as installed by the way
the project's README gives (this checkout's editable install, as `hack/setup.sh` makes it: no MYPYPATH, no
PYTHONPATH). An editable install through an import hook is invisible to mypy, which then reports
kubetrain as missing; pyproject's `package-dir` keeps it a plain .pth entry. Their tests on the test plane
run in tests/integration/test_operator_projects.py.
"""

from __future__ import annotations

import ast
import io
import os
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest
import yaml

from kubetrain.cli import main
from kubetrain.cli.scaffold import ProjectNames, render_project, write_project
from kubetrain.testing import binaries

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "operators" / "sleepjob"
SLEEPJOB = ProjectNames("SleepJob", "example.dev", ("Sleeper",))
EDITED = {
    Path("sleepjob/kind.py"),
    Path("examples/sleepjob.yaml"),
    Path("tests/test_operator.py"),
    Path("config/crd/sleepjobs.example.dev.yaml"),
}
"""The example's files that differ from what the scaffold writes: its hook and CEL rule, the CRD that
carries the rule, a bigger sample, checks of both."""


_NOT_CODE = (
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
)


def lines_of_code(source: str) -> int:
    """Lines holding code: not blank, not only a comment, not a docstring."""
    docstrings = {
        line
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    }
    code = {
        token.start[0]
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type
        not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
        and token.type != tokenize.ENDMARKER
    }
    return len(code - docstrings)


def test_the_example_kind_is_at_most_60_lines_of_code() -> None:
    assert lines_of_code((EXAMPLE / "sleepjob" / "kind.py").read_text()) <= 60


def test_the_example_is_the_scaffold_with_a_hook_filled() -> None:
    rendered = render_project(SLEEPJOB)
    for relative, text in rendered.items():
        if relative not in EDITED:
            assert (EXAMPLE / relative).read_text() == text, (
                f"{relative} differs from what the scaffold writes"
            )


def test_the_command_writes_the_project_and_names_a_bad_argument(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "nap"
    argv = ["new-operator", "NapJob", "--group", "example.dev", "--replica-types", "Master,Worker", "--dir"]
    assert main([*argv, str(target)]) == 0
    assert (target / "config" / "crd" / "napjobs.example.dev.yaml").is_file()
    assert 'MASTER = "Master"\nWORKER = "Worker"' in (target / "napjob" / "kind.py").read_text()
    assert main([*argv, str(target)]) == 2  # not empty
    assert "is not empty; name a new directory" in capsys.readouterr().err
    assert main(["new-operator", "sleepJob", "--group", "example.dev", "--replica-types", "A"]) == 2
    assert "kind 'sleepJob': write it in CamelCase" in capsys.readouterr().err
    assert main(["new-operator", "SleepJob", "--group", "kubeflow.org", "--replica-types", "A"]) == 2
    assert "--group 'kubeflow.org': write a DNS domain you own" in capsys.readouterr().err


def mypy_strict(project: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}  # the install alone
    command = [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache)]
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, check=False)


def test_the_example_and_a_fresh_project_pass_mypy_strict_as_a_user_runs_it(tmp_path: Path) -> None:
    fresh = tmp_path / "nap"
    write_project(ProjectNames("NapJob", "example.dev", ("Master", "Worker")), fresh)
    for project in (EXAMPLE, fresh):
        done = mypy_strict(project, tmp_path / "mypy-cache")
        assert done.returncode == 0, f"{project}:\n{done.stdout}{done.stderr}"
        assert "Success: no issues found in 4 source files" in done.stdout


def test_the_manifests_render_the_crd_rbac_and_deployment_in_one_namespace() -> None:
    kubectl = binaries.testbin_dir() / "kubectl"
    if not kubectl.is_file():
        pytest.fail(f"kubectl is not built at {kubectl}; {binaries.BUILD_HINT}", pytrace=False)
    done = subprocess.run(
        [str(kubectl), "kustomize", str(EXAMPLE / "config")], capture_output=True, text=True, check=True
    )
    objects = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(done.stdout)}
    assert set(objects) == {
        ("Namespace", "sleepjob-system"),
        ("CustomResourceDefinition", "sleepjobs.example.dev"),
        ("ServiceAccount", "sleepjob-operator"),
        ("ClusterRole", "sleepjob-operator"),
        ("ClusterRoleBinding", "sleepjob-operator"),
        ("Deployment", "sleepjob-operator"),
    }
    binding = objects["ClusterRoleBinding", "sleepjob-operator"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "sleepjob-operator", "namespace": "sleepjob-system"}
    ]
    pod = objects["Deployment", "sleepjob-operator"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "sleepjob-operator"
    assert "--leader-elect" in pod["containers"][0]["args"]


def test_an_install_mypy_cannot_see_is_named_with_its_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["new-operator", "NapJob", "--group", "example.dev", "--replica-types", "Worker", "--dir"]
    assert main([*argv, str(tmp_path / "a")]) == 0
    assert "import hook" not in capsys.readouterr().err  # this checkout's install is a plain path
    hook = type("_EditableFinder", (), {"__module__": "__editable___kubetrain_0_1_0_finder"})
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, hook])
    assert main([*argv, str(tmp_path / "b")]) == 0
    assert "an import hook, which mypy cannot follow" in capsys.readouterr().err
