"""`kubetrain run --local` on real GPUs: NCCL jobs learn, and a job that cannot fit fails fast and clearly.

These need NVIDIA GPUs (found as the runner finds them: NVML or nvidia-smi) and skip with the reason
elsewhere; the same allocation logic is proven without GPUs in tests/component/local/test_gpus.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.runtimes.local.gpus import discover

from .test_local_examples import ACCURACY, finish, kubetrain_run, results

pytestmark = [pytest.mark.runtime, pytest.mark.gpu]

GPUS = len(discover())


def need(count: int) -> None:
    if count > GPUS:
        pytest.skip(f"needs {count} NVIDIA GPU(s); NVML/nvidia-smi found {GPUS} on this machine")


def nccl_job(tmp_path: Path, name: str, specs: dict[str, int], launcher: str = "python", **spec: Any) -> Path:
    """A DDP PyTorchJob over NCCL: replica type -> replicas, each pod with one GPU."""
    container: dict[str, Any] = {
        "name": "pytorch",
        "image": "docker.io/kubetrain/trainer-pytorch:0.1.0",
        "command": [launcher, "-m", "kubetrain.runtimes.examples.pytorch_ddp"],
        "args": ["--epochs", "6", "--backend", "nccl", "--timeout", "120"],
        "resources": {"limits": {"nvidia.com/gpu": 1}},
    }
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            **spec,
            "pytorchReplicaSpecs": {
                rtype: {
                    "replicas": count,
                    "restartPolicy": "OnFailure",
                    "template": {"spec": {"containers": [container]}},
                }
                for rtype, count in specs.items()
            },
        },
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def check_learned(output: str, name: str, ranks: int) -> None:
    assert output.rstrip().splitlines()[-1].startswith(f"PyTorchJob default/{name} Succeeded"), output[-6000:]
    found = results(output)
    assert len(found) == ranks, output[-6000:]
    assert {r["backend"] for r in found} == {"nccl"}
    assert min(r["accuracy"] for r in found) >= ACCURACY, found
    assert len({r["weights_sha256"] for r in found}) == 1, found


def test_one_pod_nccl_job_learns(tmp_path: Path) -> None:
    need(1)
    proc = kubetrain_run(nccl_job(tmp_path, "nccl-one", {"Master": 1}), tmp_path, timeout=300)
    output = finish(proc, 300)
    assert proc.returncode == 0, output[-6000:]
    check_learned(output, "nccl-one", 1)


def test_torchrun_with_nproc_per_node_gpu_starts_one_process_per_allocated_gpu(tmp_path: Path) -> None:
    """`nprocPerNode: gpu` resolves from the pod's own allocation (its nvidia.com/gpu), as torchrun does."""
    need(1)
    path = nccl_job(tmp_path, "nccl-torchrun", {"Worker": 1}, launcher="torchrun", nprocPerNode="gpu")
    proc = kubetrain_run(path, tmp_path, timeout=300)
    output = finish(proc, 300)
    assert proc.returncode == 0, output[-6000:]
    check_learned(output, "nccl-torchrun", 1)


def test_two_pods_on_one_gpu_fail_fast_before_nccl(tmp_path: Path) -> None:
    need(1)
    path = nccl_job(tmp_path, "nccl-crowded", {"Master": 1, "Worker": 1})
    proc = kubetrain_run(path, tmp_path, "--gpus", "0", timeout=120)
    output = finish(proc, 120)
    assert proc.returncode == 1, output[-6000:]
    assert "request nvidia.com/gpu: 2 in all and must run at once, but 1 GPU(s)" in output
    assert "started pid" not in output and "NCCL" not in output


def test_two_pod_nccl_job_learns_on_two_gpus(tmp_path: Path) -> None:
    need(2)
    proc = kubetrain_run(nccl_job(tmp_path, "nccl-two", {"Master": 1, "Worker": 1}), tmp_path, timeout=300)
    output = finish(proc, 300)
    assert proc.returncode == 0, output[-6000:]
    check_learned(output, "nccl-two", 2)
