"""The GPU inventory and allocator of local runs: parsing, selection, exclusivity across runs, fitting."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from kubetrain.runtimes.local.gpus import (
    Gpu,
    GpuAllocator,
    GpuFitError,
    Unschedulable,
    check_fit,
    gpu_env,
    parse_nvidia_smi,
    select_gpus,
)
from kubetrain.runtimes.local.podstatus import unschedulable_status

SMI = """\
0, GPU-aaaaaaaa-0000-0000-0000-000000000000, NVIDIA H100 80GB HBM3, 81559
1, GPU-bbbbbbbb-0000-0000-0000-000000000000, NVIDIA H100 80GB HBM3, 81559
"""
INVENTORY = parse_nvidia_smi(SMI)


def test_nvidia_smi_rows_become_gpus() -> None:
    assert (
        Gpu(0, "GPU-aaaaaaaa-0000-0000-0000-000000000000", "NVIDIA H100 80GB HBM3", 81559),
        Gpu(1, "GPU-bbbbbbbb-0000-0000-0000-000000000000", "NVIDIA H100 80GB HBM3", 81559),
    ) == INVENTORY
    assert parse_nvidia_smi("No devices were found\n") == ()


def test_select_by_index_uuid_all_and_none() -> None:
    assert select_gpus(INVENTORY, None) == INVENTORY
    assert select_gpus(INVENTORY, "all") == INVENTORY
    assert select_gpus(INVENTORY, "none") == ()
    assert select_gpus(INVENTORY, "1") == (INVENTORY[1],)
    assert select_gpus(INVENTORY, f"{INVENTORY[1].uuid},0") == (INVENTORY[1], INVENTORY[0])
    with pytest.raises(ValueError, match=r"no GPU '7' on this machine \(found: 0 \(GPU-a"):
        select_gpus(INVENTORY, "0,7")


def test_two_runs_never_share_a_gpu_and_a_released_gpu_is_handed_out_again(tmp_path: Path) -> None:
    run_a = GpuAllocator(INVENTORY, claims_dir=tmp_path)
    run_b = GpuAllocator(INVENTORY, claims_dir=tmp_path)
    held_a = run_a.allocate("pod-a", 1)
    assert run_a.allocate("pod-a", 1) == held_a  # the same pod asking again (a retry) gets the same GPU
    held_b = run_b.allocate("pod-b", 1)
    assert set(held_a).isdisjoint(held_b)
    with pytest.raises(Unschedulable, match=r"0/1 nodes are available: 1 Insufficient nvidia.com/gpu"):
        run_b.allocate("pod-c", 1)
    run_a.release("pod-a")
    assert run_b.allocate("pod-c", 1) == held_a
    assert run_b.allocate("pod-d", 0) == ()


def test_a_partial_allocation_is_given_back(tmp_path: Path) -> None:
    run_a = GpuAllocator(INVENTORY, claims_dir=tmp_path)
    run_b = GpuAllocator(INVENTORY, claims_dir=tmp_path)
    run_a.allocate("one", 1)
    with pytest.raises(Unschedulable, match="requests 2, 1 free of 2"):
        run_b.allocate("two", 2)
    run_a.release_all()
    assert len(run_b.allocate("two", 2)) == 2


def test_the_env_shows_only_the_pods_gpus() -> None:
    assert gpu_env(INVENTORY[:1]) == {
        "CUDA_VISIBLE_DEVICES": INVENTORY[0].uuid,
        "NVIDIA_VISIBLE_DEVICES": INVENTORY[0].uuid,
    }
    assert gpu_env(()) == {"CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "void"}


def test_fit_counts_each_pod_and_the_whole_gang() -> None:
    check_fit({"Master": (1, 1), "Worker": (1, 1), "Evaluator": (0, 3)}, INVENTORY)
    with pytest.raises(GpuFitError, match=r"a Worker pod requests nvidia.com/gpu: 3, but 2 GPU\(s\)"):
        check_fit({"Worker": (3, 1)}, INVENTORY)
    with pytest.raises(GpuFitError, match=r"3 GPU pod\(s\) request nvidia.com/gpu: 3 in all"):
        check_fit({"Master": (1, 1), "Worker": (1, 2)}, INVENTORY)


def test_unschedulable_status_is_what_the_scheduler_writes() -> None:
    status = unschedulable_status("0/1 nodes are available", now=datetime(2026, 1, 1, tzinfo=UTC))
    assert status["phase"] == "Pending"
    [condition] = status["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )
    assert condition["message"] == "0/1 nodes are available"
