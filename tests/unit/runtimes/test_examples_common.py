"""What the example trainers share: the `kubetrain-train` line when a rank trains, and their checkpoints."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits as sklearn_digits

from kubetrain.runtimes.examples import checkpoint
from kubetrain.runtimes.examples.common import TRAIN_PREFIX, TrainSignal, load_digits, parse_args


def train_lines(out: str) -> list[dict[str, object]]:
    return [json.loads(line.removeprefix(TRAIN_PREFIX)) for line in out.splitlines()]


def test_a_rank_signals_the_first_step_of_each_epoch_only(capsys: pytest.CaptureFixture[str]) -> None:
    before = time.time()
    signal = TrainSignal(rank=2)
    for epoch in (3, 4):  # resumed at epoch 3: its first step is the first line
        for step in range(1, 4):
            signal.stepped(epoch, epoch * 3 + step)
    lines = train_lines(capsys.readouterr().out)
    assert [(x["rank"], x["epoch"], x["step"]) for x in lines] == [(2, 3, 10), (2, 4, 13)]
    assert all(before <= float(str(x["time"])) <= time.time() for x in lines)


def arrays(value: float) -> list[np.ndarray]:
    return [np.full((2, 3), value, np.float32), np.full(3, value, np.float32)]


def test_the_newest_complete_checkpoint_is_resumed_and_two_are_kept(tmp_path: Path) -> None:
    assert checkpoint.newest(tmp_path / "none") is None and checkpoint.newest(None) is None
    for epochs in (1, 2, 3):
        checkpoint.save(tmp_path, checkpoint.Checkpoint(epochs, arrays(epochs), arrays(-epochs)))
    (tmp_path / ".epoch-00004.npz.tmp").write_bytes(b"half a file")  # a writer killed mid-write
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".epoch-00004.npz.tmp", "epoch-00002.npz", "epoch-00003.npz",
    ]  # fmt: skip
    found = checkpoint.newest(tmp_path)
    assert found is not None and found.epochs == 3
    assert all(np.array_equal(a, b) for a, b in zip(found.model, arrays(3), strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(found.optimizer, arrays(-3), strict=True))
    assert found.model[0].dtype == np.float32


def test_the_result_line_says_where_a_run_resumed_and_the_drill_fires_once() -> None:
    resumed = checkpoint.Checkpoint(3, [], [])
    assert checkpoint.resume_fields(None, 6) == {"resumed_from": None, "epochs_trained": 6}
    assert checkpoint.resume_fields(resumed, 6) == {"resumed_from": 3, "epochs_trained": 3}
    args = parse_args("t", ["--exit-at-epoch", "3"])
    assert checkpoint.drill_once(args, None).exit_at_epoch == 3
    assert checkpoint.drill_once(args, resumed).exit_at_epoch is None
    assert checkpoint.drill_once(args, checkpoint.Checkpoint(2, [], [])).exit_at_epoch == 3


def test_an_epochs_order_depends_on_the_seed_and_epoch_only() -> None:
    first = checkpoint.epoch_order(50, 0, 4)
    np.random.seed(123)  # a process-global generator changes nothing
    assert np.array_equal(first, checkpoint.epoch_order(50, 0, 4))
    assert not np.array_equal(first, checkpoint.epoch_order(50, 0, 5))
    assert sorted(first.tolist()) == list(range(50))


def test_the_digits_are_scikit_learns_read_without_importing_it() -> None:
    code = (
        "import sys, json; from kubetrain.runtimes.examples.common import load_digits; d = load_digits(); "
        "print(json.dumps(['sklearn' in sys.modules, d.x_train.shape, d.x_test.shape]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [False, [1437, 64], [360, 64]], "a rank's start pays no scikit-learn import"

    data, theirs = load_digits(), sklearn_digits()
    order = np.random.default_rng(0).permutation(len(theirs.data))
    x, y = theirs.data[order].astype(np.float32), theirs.target[order]
    mean, std = x[360:].mean(axis=0), x[360:].std(axis=0) + 1.0
    assert np.array_equal(data.x_train, ((x[360:] - mean) / std).astype(np.float32))
    assert np.array_equal(data.x_test, ((x[:360] - mean) / std).astype(np.float32))
    assert (data.y_train.tolist(), data.y_test.tolist()) == (y[360:].tolist(), y[:360].tolist())
