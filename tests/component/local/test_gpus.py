"""`kubetrain run --local` hands out GPUs like a device plugin, on a machine whose GPUs a test invents.

A fake `nvidia-smi` on PATH prints the inventory; TMPDIR is per test, so the machine-wide GPU claims of
the runs in one test are shared with each other and with nothing else. The containers print what a CUDA
program would see (CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES) and the torch env the operator rendered.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import python, pytorch_job, replica

SHOW = python(
    "import os; e = os.environ; print('SEES', repr(e['CUDA_VISIBLE_DEVICES']), e['NVIDIA_VISIBLE_DEVICES'], "
    "e.get('PET_NPROC_PER_NODE', '-'), e.get('WORLD_SIZE', '-'), flush=True)"
)
UUIDS = [f"GPU-0000000{i}-1111-2222-3333-44444444444{i}" for i in range(3)]


def gpus(count: int) -> dict[str, Any]:
    return {"resources": {"limits": {"nvidia.com/gpu": count}}}


@pytest.fixture
def machine(tmp_path: Path) -> dict[str, str]:
    """The environment of a machine with 3 (fake) GPUs; runs started with it share GPU claims."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    rows = "\n".join(f"{i}, {u}, NVIDIA H100 80GB HBM3, 81559" for i, u in enumerate(UUIDS))
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncat <<'EOF'\n{rows}\nEOF\n")
    smi.chmod(0o755)
    (tmp_path / "tmp").mkdir()
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TMPDIR": str(tmp_path / "tmp")}


def start(tmp_path: Path, env: dict[str, str], job: dict[str, Any], *args: str) -> subprocess.Popen[str]:
    path = tmp_path / f"{job['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(job))
    argv = [
        sys.executable,
        "-m",
        "kubetrain.cli",
        "run",
        "--local",
        "--plain",
        "--linger",
        "0.5",
        *args,
        str(path),
    ]
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path, env=env
    )


def seen(out: str) -> dict[str, list[str]]:
    """Pod name -> what its container saw (the words after SEES)."""
    found = {}
    for line in out.splitlines():
        if " SEES " in line:
            pod = line.split("]")[0].split("/")[1]
            found[pod] = line.split(" SEES ", 1)[1].split()
    return found


def test_each_pod_sees_only_its_own_gpus_and_a_pod_without_a_limit_sees_none(
    tmp_path: Path, machine: dict[str, str]
) -> None:
    job = pytorch_job(
        "ddp",
        {
            "Master": replica(SHOW, **gpus(1)),
            "Worker": replica(SHOW, replicas=2, **gpus(1)),
        },
    )
    job["spec"]["nprocPerNode"] = "gpu"
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"] = {}
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 1
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0].update(gpus(2))
    proc = start(tmp_path, machine, job)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    views = seen(out)
    master_cvd = views["ddp-master-0"][0].strip("'").split(",")
    assert len(master_cvd) == 2 and set(master_cvd) <= set(UUIDS), out
    assert views["ddp-master-0"][1] == ",".join(master_cvd)
    assert views["ddp-worker-0"][:2] == ["''", "void"], out
    # nprocPerNode: gpu is the pod's own limit: 2 on the master; the worker has none, so it stays `gpu`
    # (torchrun says so) and counts 1: WORLD_SIZE = 2 + 1.
    assert views["ddp-master-0"][2:] == ["2", "3"], out
    assert views["ddp-worker-0"][2:] == ["gpu", "3"], out
    assert "nvidia.com/gpu: GPU " in out  # the run says which pod holds which GPU


def test_gpus_selects_the_devices_a_run_may_use(tmp_path: Path, machine: dict[str, str]) -> None:
    job = pytorch_job("pick", {"Master": replica(SHOW, **gpus(1))})
    proc = start(tmp_path, machine, job, "--gpus", "2")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert seen(out)["pick-master-0"][0] == repr(UUIDS[2])


@pytest.mark.parametrize(
    ("specs", "expected"),
    [
        ({"Master": replica(SHOW, **gpus(4))}, "a Master pod requests nvidia.com/gpu: 4, but 3 GPU(s)"),
        (
            {"Master": replica(SHOW, **gpus(1)), "Worker": replica(SHOW, replicas=3, **gpus(1))},
            "request nvidia.com/gpu: 4 in all and must run at once, but 3 GPU(s)",
        ),
    ],
)
def test_a_job_that_can_never_fit_is_refused_before_anything_starts(
    tmp_path: Path, machine: dict[str, str], specs: dict[str, Any], expected: str
) -> None:
    proc = start(tmp_path, machine, pytorch_job("big", specs))
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    assert expected in out
    assert "Fix: " in out
    assert "started pid" not in out and " SEES " not in out
    assert "Traceback" not in out


def test_gpus_none_makes_any_gpu_request_unfit(tmp_path: Path, machine: dict[str, str]) -> None:
    proc = start(
        tmp_path, machine, pytorch_job("nogpu", {"Master": replica(SHOW, **gpus(1))}), "--gpus", "none"
    )
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    assert "requests nvidia.com/gpu: 1, but 0 GPU(s)" in out


def test_a_pod_waits_unschedulable_while_another_run_holds_the_gpus(
    tmp_path: Path, machine: dict[str, str]
) -> None:
    release = tmp_path / "release"
    holder = python(
        "import os, time; print('holding', flush=True)\n"
        f"while not os.path.exists({str(release)!r}): time.sleep(0.1)"
    )
    first = start(tmp_path, machine, pytorch_job("first", {"Master": replica(holder, **gpus(3))}))
    second = None
    try:
        _wait_for(first, "holding")
        second = start(tmp_path, machine, pytorch_job("second", {"Master": replica(SHOW, **gpus(1))}))
        waiting = _wait_for(second, "Unschedulable")
        release.touch()  # the first run's pod ends and frees its GPUs
        rest, _ = second.communicate(timeout=120)
        first.communicate(timeout=60)
    finally:
        release.touch()
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
    out = waiting + rest
    assert first.returncode == 0
    assert second.returncode == 0, out
    assert "Pending (Unschedulable): 0/1 nodes are available: 1 Insufficient nvidia.com/gpu" in out
    assert " SEES " not in waiting  # nothing ran while the GPUs were held
    assert seen(out)["second-master-0"][0].strip("'") in UUIDS


def _wait_for(proc: subprocess.Popen[str], text: str) -> str:
    """The output of `proc` up to and including the first line containing `text`."""
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while not lines or text not in lines[-1]:
        line = proc.stdout.readline()
        assert line and time.monotonic() < deadline, f"no {text!r} in:\n" + "".join(lines)
        lines.append(line)
    return "".join(lines)


def test_an_elastic_job_needs_only_its_minimum_to_fit(tmp_path: Path, machine: dict[str, str]) -> None:
    """4 one-GPU workers on 3 GPUs: never all at once, but minReplicas 2 can train, so the job runs."""
    job = pytorch_job("elastic", {"Worker": replica(SHOW, replicas=4, **gpus(1))})
    job["spec"]["elasticPolicy"] = {"minReplicas": 2, "maxReplicas": 4}
    proc = start(tmp_path, machine, job)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert "must run at once" not in out
    assert len(seen(out)) >= 2
