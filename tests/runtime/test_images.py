"""The trainer images and the operator image, built by `hack/images.sh` and run for real (marker `images`).

The example jobs, unchanged, run under `kubetrain run --local --runtime container`: each pod is a container
of the image the example names, with the env the operator renders (TF_CONFIG, MASTER_ADDR, the MPI
hostfile and SSH Secret) and nothing rewritten; pods find each other by their Service DNS names on the
run's network, and the MPI launchers reach their workers over the images' sshd. Each must Succeed with
every rank learning and ending with the same weights, every result line coming from a container podman
started (its event log), and every container it started removed. The operator image must start against a
real API server and answer its health probes.

Needs podman (hack/images.sh installs it with apt, with runc: hack/containers.conf). Where containers
cannot run, these tests FAIL and say why; deselect them with `-m "not images"` only on such a machine.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.operator import install_crds
from kubetrain.testing.process import free_port

from .test_local_examples import ACCURACY, EXAMPLES, Expect, finish, job_of, kubetrain_run, results

pytestmark = pytest.mark.images

ROOT = Path(__file__).resolve().parents[2]
VERSION = "0.1.0"
OPERATOR_IMAGE = f"docker.io/kubetrain/kubetrain-operator:{VERSION}"
IN_CONTAINERS = {
    "pytorch/pytorch-ddp.yaml": Expect(4),  # master + 3 workers, DDP over gloo
    "tensorflow/tf-multiworker-mirrored.yaml": Expect(4),  # 4 workers, MultiWorkerMirroredStrategy
    "mpi/mpi-allreduce-openmpi.yaml": Expect(3),  # Open MPI over sshd; the launcher runs a rank too
    "mpi/mpi-horovod-openmpi.yaml": Expect(4),  # Horovod on torch, 2 workers x 2 slots
    "mpi/mpi-mpich.yaml": Expect(2),  # MPICH's Hydra over sshd
    "mpi/mpi-intel.yaml": Expect(4),  # Intel MPI (impi-rt) over sshd, 2 workers x 2 ranks
}


@pytest.fixture(scope="session")
def images(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Every image built (hack/images.sh: warm, only what changed), and podman able to run them: the env
    for commands that use podman."""
    env = {
        **os.environ,
        "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF", str(ROOT / "hack/containers.conf")),
    }
    log = tmp_path_factory.mktemp("images") / "images.log"
    with log.open("w") as out:
        built = subprocess.run(
            ["bash", "hack/images.sh"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, check=False
        )
    if built.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-40:])
        pytest.fail(
            f"bash hack/images.sh failed (exit {built.returncode}); its last lines:\n{tail}", pytrace=False
        )
    podman = shutil.which("podman")
    if podman is None:
        pytest.fail(
            "hack/images.sh built without podman, which these tests run containers with", pytrace=False
        )
    probe = subprocess.run(
        [podman, "run", "--rm", "--pull=never", "localhost/kubetrain/python:3.11", "true"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if probe.returncode != 0:
        pytest.fail(
            "podman builds but cannot run a container on this machine (runtime, cgroups, namespaces): "
            f"{probe.stderr.strip()}\nSee hack/containers.conf; deselect with -m 'not images' only where no "
            "container can run.",
            pytrace=False,
        )
    yield {**env, "PODMAN": podman}


@pytest.mark.parametrize("example", sorted(IN_CONTAINERS))
def test_example_learns_in_containers_of_its_images(
    example: str, images: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expect, path = IN_CONTAINERS[example], EXAMPLES / example
    monkeypatch.setenv("CONTAINERS_CONF", images["CONTAINERS_CONF"])  # for the CLI's podman client
    since = int(time.time()) - 1
    proc = kubetrain_run(path, tmp_path, "--runtime", "container", timeout=expect.timeout)
    output = finish(proc, expect.timeout)
    kind, namespace, name = job_of(path)
    last = output.rstrip().splitlines()[-1]
    assert last.startswith(f"{kind} {namespace}/{name} Succeeded ({kind}Succeeded): "), output[-6000:]
    found = results(output)
    assert len(found) == expect.results, f"expected {expect.results} result lines:\n{output[-6000:]}"
    for result in found:
        assert result["accuracy"] >= ACCURACY, f"{result['pod']} learned too little: {result}"
    assert len({r["weights_sha256"] for r in found}) == 1, f"replicas ended with different weights: {found}"
    started, removed = _lifecycle(images, since, f"-{name}-")
    outside = {r["pod"] for r in found} - {c.split("-", 2)[2] for c in started}
    assert started and not outside, f"result lines of pods no container ran: {outside}; started: {started}"
    assert removed == started, f"containers started, never removed: {started - removed}"
    left = _podman(images, "ps", "-a", "--format", "{{.Names}}")
    assert f"-{name}-" not in left, f"containers left behind: {left}"


def test_ctrl_c_removes_every_container_and_the_network(
    images: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTAINERS_CONF", images["CONTAINERS_CONF"])
    proc = kubetrain_run(EXAMPLES / "mpi/mpi-allreduce-openmpi.yaml", tmp_path, "--runtime", "container")
    assert proc.stdout is not None
    seen: list[str] = []
    end = time.monotonic() + 180
    try:
        while time.monotonic() < end and not any("Server listening" in line for line in seen):
            ready, _, _ = select.select([proc.stdout], [], [], 1.0)
            seen.append(proc.stdout.readline() if ready else "")
        running = _podman(images, "ps", "--format", "{{.Names}}")
    finally:
        proc.send_signal(signal.SIGINT)  # also when the wait failed: nothing of the run may stay behind
        output = "".join(seen) + finish(proc, 60)
    assert "-mpi-allreduce-worker-" in running, output[-4000:]
    assert proc.returncode == 130, output[-4000:]
    assert "-mpi-allreduce-" not in _podman(images, "ps", "-a", "--format", "{{.Names}}")
    run_id = running.split("kubetrain-", 1)[1].split("-", 1)[0]
    assert f"kubetrain-{run_id}" not in _podman(images, "network", "ls", "--format", "{{.Name}}")


def _lifecycle(images: dict[str, str], since: int, part: str) -> tuple[set[str], set[str]]:
    """The containers whose names contain `part` that podman started, and those it removed, since `since`
    (seconds since the epoch), from its event log: `kubetrain-<run>-<pod>` each."""
    out = _podman(images, "events", "--stream=false", f"--since={since}", "--filter", "type=container",
                  "--format", "json")  # fmt: skip
    events = [json.loads(line) for line in out.splitlines() if line.strip()]
    seen = {(e.get("Status"), e.get("Name", "")) for e in events if part in e.get("Name", "")}
    return {n for s, n in seen if s == "start"}, {n for s, n in seen if s == "remove"}


def _podman(images: dict[str, str], *args: str) -> str:
    done = subprocess.run([images["PODMAN"], *args], env=images, capture_output=True, text=True, check=True)
    return done.stdout


def test_the_operator_image_starts_and_answers_its_health_probes(
    images: dict[str, str], control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    install_crds(control_plane)
    kubeconfig = tmp_path / "kubeconfig"
    shutil.copyfile(control_plane.kubeconfig, kubeconfig)
    kubeconfig.chmod(0o644)  # the image's user is 65532
    health, metrics, name = free_port(), free_port(), f"kubetrain-operator-{namespace}"
    argv = [
        images["PODMAN"], "run", "-d", "--pull=never", "--name", name, "--network", "host",
        "--read-only", "-v", f"{kubeconfig}:/etc/kubetrain/kubeconfig:ro", OPERATOR_IMAGE, "operator",
        "--kubeconfig=/etc/kubetrain/kubeconfig", f"--namespace={namespace}",
        f"--leader-election-namespace={namespace}", f"--health-probe-bind-address=127.0.0.1:{health}",
        f"--metrics-bind-address=127.0.0.1:{metrics}",
    ]  # fmt: skip
    subprocess.run(argv, env=images, check=True, capture_output=True)
    try:
        assert _get(health, "/healthz", deadline=90) == 200
        assert _get(health, "/readyz", deadline=90) == 200
        inspect = [images["PODMAN"], "inspect", "--format", "{{.Config.User}}", name]
        user = subprocess.run(inspect, env=images, capture_output=True, text=True, check=True).stdout.strip()
        assert user == "65532:65532"
    finally:
        podman = images["PODMAN"]
        logs = subprocess.run([podman, "logs", name], env=images, capture_output=True, text=True, check=False)
        subprocess.run([podman, "rm", "-f", "-t", "0", name], env=images, capture_output=True, check=False)
        print(logs.stdout[-3000:], logs.stderr[-3000:])


def _get(port: int, path: str, *, deadline: float) -> int:
    end, last = time.monotonic() + deadline, 0
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
                last = int(answer.status)
                if last == 200:
                    return last
        except OSError:
            pass
        time.sleep(1)
    return last
