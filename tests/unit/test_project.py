"""The project's promises to a new user: the README's commands are the ones CI and the scripts run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    head = text[: text.find("\n## ", text.find("\n## ") + 1)]  # the first section or two: "near the top"
    return re.findall(r"^\s*(bash hack/\S+\.sh.*)$", head, flags=re.M)


def test_readme_names_the_test_command_that_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    ci_cmd = re.search(r"^exec (bash hack/\S+)", ci, flags=re.M)
    assert ci_cmd, ".ci/run must exec the test command"
    assert ci_cmd.group(1) in _readme_commands(), "README's test command and .ci/run differ"


def test_readme_commands_exist() -> None:
    commands = _readme_commands()
    assert len(commands) >= 2, f"README must give the main-job and the test command near the top: {commands}"
    for cmd in commands:
        script = ROOT / cmd.split()[1]
        assert script.is_file(), f"README names {script}, which does not exist"


def test_console_script_prints_help() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kubetrain.cli", "--help"], capture_output=True, text=True, check=True
    )
    assert "usage: kubetrain" in out.stdout


def test_readme_install_command_is_the_one_the_e2e_tests_run() -> None:
    """The e2e tier installs with `kubectl <INSTALL> manifests/base`; the README shows users the same."""
    shipped = (ROOT / "tests" / "e2e" / "shipped.py").read_text()
    words = re.search(r"^INSTALL = \((.*)\)$", shipped, flags=re.M)
    assert words, "tests/e2e/shipped.py must define INSTALL, the kubectl words of the install command"
    command = " ".join(["kubectl", *re.findall(r'"([^"]+)"', words.group(1)), "manifests/base"])
    readme = (ROOT / "README.md").read_text()
    shown = re.findall(r"^\s*(kubectl apply\b.*manifests/base)\b", readme, flags=re.M)
    assert shown == [command], f"README shows {shown}; the e2e tests run {command!r}"
    assert "--server-side" not in command, "plain client-side apply is what we promise works"


def test_readme_refers_to_nothing_outside_the_repository() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "/work/" not in readme
    for target in re.findall(r"\]\(([^)]+)\)|`(\.\./[^`\s]+)`", readme):
        path = next(t for t in target if t)
        if "://" in path:
            continue
        resolved = (ROOT / path.split("#")[0]).resolve()
        assert resolved.is_relative_to(ROOT) and resolved.exists(), f"README links {path}"


def test_the_quickstart_installs_only_the_project_and_torch() -> None:
    """README's first command installs what its job needs and no other framework (the test command
    installs them all): the example and `run --local` must not need more than the `torch` extra."""
    lines = (ROOT / "hack" / "quickstart.sh").read_text().splitlines()
    script = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    installs = re.findall(r"^\s*(?:python -m pip|uv pip) install .*$", script, flags=re.M)
    assert [line.split()[-1] for line in installs] == ['"$uv_pin"', '".[torch]"'], installs
    assert "frameworks" not in script and "setup.sh" not in script
    probe = (
        "import sys, kubetrain.cli.run, kubetrain.runtimes.examples.pytorch_ddp, sklearn.datasets; "
        "print(*sorted(m for m in sys.modules if '.' not in m))"
    )
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    others = {"tensorflow", "jax", "paddle", "xgboost", "mpi4py", "horovod", "tf_keras"}
    assert loaded & others == set(), "the quickstart's job needs only torch"


def test_the_test_command_runs_every_tier_in_exactly_one_group() -> None:
    """hack/test.sh runs the tiers as parallel pytest sessions (PYTEST_GROUPS): a tier left out of every group
    would silently never run, one in two groups would run twice."""
    script = (ROOT / "hack" / "test.sh").read_text()
    block = re.search(r"^PYTEST_GROUPS=\(\n(.*?)^\)", script, flags=re.M | re.S)
    assert block, "hack/test.sh must define PYTEST_GROUPS=( ... )"
    grouped = [path for line in re.findall(r'"([^"]+)"', block.group(1)) for path in line.split()]
    tiers = sorted(
        f"tests/{d.name}" for d in (ROOT / "tests").iterdir() if d.is_dir() and any(d.rglob("test_*.py"))
    )
    assert sorted(grouped) == tiers, f"PYTEST_GROUPS {grouped} against the tiers {tiers}"
