"""The operator image's Dockerfile, checked without a Docker engine: what it is built from and how it runs.

A reproducible, least-privileged image is a promise to whoever deploys it: an exactly pinned base, a
numeric non-root user that matches the Deployment's runAsUser, no training framework inside, and
`kubetrain operator` as what it runs.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "Dockerfile"
DEPLOYMENT = ROOT / "manifests" / "base" / "operator" / "deployment.yaml"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order; continuation lines joined, comments dropped."""
    joined: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not line or (line.startswith("#") and not pending):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    result = []
    for line in joined:
        keyword, _, rest = line.partition(" ")
        result.append((keyword.upper(), rest.strip()))
    return result


def _final_stage() -> list[tuple[str, str]]:
    instructions = _instructions()
    last_from = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    return instructions[last_from:]


def test_every_base_image_is_an_exact_python_release() -> None:
    """The base is a build argument (hack/images.sh passes a Debian base where no registry is reachable);
    its default, what a plain `docker build` uses, is pinned."""
    defaults = dict(a.partition("=")[::2] for k, a in _instructions() if k == "ARG" and "=" in a)
    bases = [
        re.sub(r"^\$\{(\w+)\}$", lambda m: defaults.get(m[1], m[0]), args.split()[0])
        for keyword, args in _instructions()
        if keyword == "FROM"
    ]
    assert bases, "no FROM"
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    minimum = tuple(int(part) for part in requires.removeprefix(">=").split("."))
    for base in bases:
        match = re.fullmatch(r"(?:docker\.io/library/)?python:(\d+)\.(\d+)\.(\d+)-slim-([a-z]+)", base)
        assert match, f"{base} is not pinned to an exact python:X.Y.Z-slim-<debian release> tag"
        assert (int(match[1]), int(match[2])) >= minimum, f"{base} is older than requires-python {requires}"


def test_the_image_runs_as_the_numeric_non_root_user_of_the_deployment() -> None:
    users = [args for keyword, args in _final_stage() if keyword == "USER"]
    assert users, "the final stage sets no USER: the operator would run as root"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) > 0, f"USER {users[-1]} must be a numeric non-root uid"
    assert not gid or (gid.isdigit() and int(gid) > 0)
    pod = yaml.safe_load(DEPLOYMENT.read_text())["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == int(uid)


def test_the_image_runs_kubetrain_operator() -> None:
    stage = dict(_final_stage())
    entrypoint = json.loads(stage["ENTRYPOINT"])  # exec form: signals reach the operator, not a shell
    command = json.loads(stage.get("CMD", "[]"))
    assert entrypoint + command == ["kubetrain", "operator"]
    container = yaml.safe_load(DEPLOYMENT.read_text())["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][0] == "operator", "the Deployment's args replace CMD and must keep `operator`"


def test_the_image_installs_the_wheel_without_any_training_framework() -> None:
    installs = [args for keyword, args in _final_stage() if keyword == "RUN" and "pip install" in args]
    assert installs, "the final stage installs nothing"
    frameworks = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for args in installs:
        assert "kubetrain-" in args and ".whl" in args, args
        assert "[" not in args, f"extras installed: {args}"
        for extra, requirements in frameworks.items():
            for requirement in requirements:
                name = re.split(r"[<>=~!\[ ]", requirement)[0]
                assert name not in args.split(), f"{name} (extra {extra}) installed into the operator image"


def test_the_build_copies_only_what_exists() -> None:
    for keyword, args in _instructions():
        if keyword == "COPY" and "--from" not in args:
            *sources, _ = args.split()
            for source in sources:
                assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"


def test_the_wheel_enters_the_final_image_by_copy_so_a_new_wheel_rebuilds_it() -> None:
    """podman and buildah leave a bind mount out of a layer's cache key: a wheel mounted from the build
    stage let the image keep an older operator after the code changed (the node tier found it)."""
    final = _final_stage()
    assert not [args for keyword, args in final if keyword == "RUN" and "type=bind" in args]
    copied = [args for keyword, args in final if keyword == "COPY" and "--from=build" in args]
    assert copied and "/wheels" in copied[0]
