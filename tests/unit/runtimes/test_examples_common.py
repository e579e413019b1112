"""The lines the example trainers print for tests and users: `kubetrain-train` when a rank trains."""

from __future__ import annotations

import json
import time

import pytest

from kubetrain.runtimes.examples.common import TRAIN_PREFIX, TrainSignal


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
