"""`--runtime container`: the engine command line a pod becomes, the DNS names it answers to, the image
check before anything runs (with a stand-in engine: a script that knows no image)."""

from __future__ import annotations

import itertools
import os
import stat
from pathlib import Path

import pytest

from kubetrain.cli import main
from kubetrain.runtimes.local.container import (
    ContainerEngine,
    ImageMissing,
    Mount,
    container_mounts,
    dns_names,
    images_of,
)

ENGINE = ContainerEngine("/usr/bin/podman", "abc123")


def worker_pod() -> dict[str, object]:
    return {
        "metadata": {"name": "mpi-worker-0", "namespace": "team"},
        "spec": {
            "hostname": "mpi-worker-0",
            "subdomain": "mpi",
            "securityContext": {"runAsUser": 1000},
            "containers": [
                {
                    "name": "mpi",
                    "image": "docker.io/kubetrain/trainer-mpi:0.1.0",
                    "command": ["/usr/sbin/sshd", "-De"],
                    "args": ["-f", "/home/mpiuser/.sshd_config"],
                    "securityContext": {"runAsGroup": 1000},
                    "volumeMounts": [
                        {"name": "ssh-auth", "mountPath": "/home/mpiuser/.ssh", "readOnly": True}
                    ],
                }
            ],
        },
    }


def test_a_pod_answers_to_every_name_the_operator_writes_for_it() -> None:
    names = dns_names(worker_pod())
    assert "mpi-worker-0.mpi.team.svc" in names  # the MPI hostfile's form (<host>.<job>.<ns>.svc)
    assert {"mpi-worker-0", "mpi-worker-0.team.svc", "mpi-worker-0.mpi.team.svc.cluster.local"} <= set(names)


def test_the_run_command_carries_env_names_only_and_the_pods_own_settings() -> None:
    pod = worker_pod()
    container = pod["spec"]["containers"][0]  # type: ignore[index]
    mounts = [Mount(Path("/run/x/ssh"), "/home/mpiuser/.ssh", read_only=True)]
    argv = ENGINE.run_argv(pod, container, {"SECRET": "s3cret", "K_MPI_JOB_ROLE": "worker"}, mounts)
    assert "s3cret" not in " ".join(argv)  # values travel in the client's environment
    assert argv[:3] == ["/usr/bin/podman", "run", "--rm"] and "--pull=never" in argv
    pairs = list(itertools.pairwise(argv))
    for pair in [
        ("--name", "kubetrain-abc123-mpi-worker-0"),
        ("--network", "kubetrain-abc123"),
        ("--hostname", "mpi-worker-0"),
        ("--network-alias", "mpi-worker-0.mpi.team.svc"),
        ("-e", "SECRET"),
        ("-v", "/run/x/ssh:/home/mpiuser/.ssh:ro"),
        ("--user", "1000:1000"),
        ("--entrypoint", "/usr/sbin/sshd"),
    ]:
        assert pair in pairs, pair
    assert argv[-4:] == ["docker.io/kubetrain/trainer-mpi:0.1.0", "-De", "-f", "/home/mpiuser/.sshd_config"]


def test_args_without_command_keep_the_images_entrypoint() -> None:
    pod = worker_pod()
    container = {"name": "c", "image": "img", "args": ["--epochs", "1"]}
    argv = ENGINE.run_argv(pod, container, {}, [])
    assert "--entrypoint" not in argv and argv[-3:] == ["img", "--epochs", "1"]


def test_empty_dirs_become_writable_for_a_non_root_image(tmp_path: Path) -> None:
    pod = {
        "spec": {"volumes": [{"name": "ckpt", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "c"}}]}
    }
    container = {
        "volumeMounts": [{"name": "ckpt", "mountPath": "/ckpt"}, {"name": "cfg", "mountPath": "/etc/c"}]
    }
    (tmp_path / "ckpt").mkdir(mode=0o755)
    (tmp_path / "cfg").mkdir(mode=0o755)
    mounts = container_mounts(pod, container, [("/ckpt", tmp_path / "ckpt"), ("/etc/c", tmp_path / "cfg")])
    assert [m.flag() for m in mounts] == [f"{tmp_path}/ckpt:/ckpt", f"{tmp_path}/cfg:/etc/c"]
    assert stat.S_IMODE((tmp_path / "ckpt").stat().st_mode) == 0o777
    assert stat.S_IMODE((tmp_path / "cfg").stat().st_mode) == 0o755


def fake_engine(tmp_path: Path, known: str = "") -> Path:
    """A `podman` that knows only the image `known`."""
    script = tmp_path / "bin" / "podman"
    script.parent.mkdir()
    script.write_text(
        f'#!/bin/sh\n[ "$1 $2" = "image inspect" ] && [ "$3" = "{known}" ] && exit 0\nexit 125\n'
    )
    script.chmod(0o755)
    return script


JOB = {
    "spec": {
        "pytorchReplicaSpecs": {
            "Master": {
                "template": {"spec": {"containers": [{"image": "docker.io/kubetrain/trainer-pytorch:0.1.0"}]}}
            },
            "Worker": {"template": {"spec": {"containers": [{"image": "example.org/own:1"}]}}},
        }
    }
}


def test_missing_images_are_named_with_how_to_get_them(tmp_path: Path) -> None:
    engine = ContainerEngine(str(fake_engine(tmp_path, known="example.org/own:1")), "r")
    assert images_of(JOB) == ["docker.io/kubetrain/trainer-pytorch:0.1.0", "example.org/own:1"]
    with pytest.raises(ImageMissing) as err:
        engine.check_images(JOB)
    assert str(err.value) == (
        "docker.io/kubetrain/trainer-pytorch:0.1.0: not in podman's local storage (a local run never pulls): "
        "build them with `bash hack/images.sh` in a kubetrain checkout"
    )


def test_the_cli_stops_before_running_anything_when_an_image_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{fake_engine(tmp_path).parent}{os.pathsep}{os.environ['PATH']}")
    job = tmp_path / "job.yaml"
    job.write_text(
        "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: t}\nspec:\n  pytorchReplicaSpecs:\n"
        "    Master:\n      template:\n        spec:\n          containers:\n"
        "          - {name: pytorch, image: 'docker.io/kubetrain/trainer-pytorch:0.1.0'}\n"
    )
    code = main(["run", "--local", "--runtime", "container", "--engine", "podman", str(job)])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("kubetrain run: docker.io/kubetrain/trainer-pytorch:0.1.0: not in podman's local")
    assert "bash hack/images.sh" in err


def test_no_engine_on_path_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ValueError, match="--runtime container needs docker on PATH"):
        ContainerEngine.detect("r", "docker")


@pytest.mark.parametrize(
    ("engine", "flags"),
    [
        ("podman", ["--device", "nvidia.com/gpu=1", "--device", "nvidia.com/gpu=3"]),
        ("docker", ["--gpus", '"device=1,3"']),
    ],
)
def test_a_pods_gpus_become_the_containers_devices_numbered_from_zero_inside(
    engine: str, flags: list[str]
) -> None:
    gpus = ContainerEngine(f"/usr/bin/{engine}", "r")
    env = gpus.container_env({"NVIDIA_VISIBLE_DEVICES": "1,3", "CUDA_VISIBLE_DEVICES": "1,3", "A": "b"})
    assert env == {"NVIDIA_VISIBLE_DEVICES": "1,3", "A": "b"}  # inside, the two GPUs are 0 and 1
    argv = gpus.run_argv(worker_pod(), {"name": "c", "image": "img"}, env, [])
    assert " ".join(flags) in " ".join(argv)
    none = gpus.run_argv(worker_pod(), {"name": "c", "image": "img"}, {"NVIDIA_VISIBLE_DEVICES": ""}, [])
    assert "--device" not in none and "--gpus" not in none
