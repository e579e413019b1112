"""The Keras and XGBoost progress callbacks inside real training (the frameworks are required here)."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import pytest
import xgboost

from kubetrain.runtimes.progress import callbacks

pytestmark = pytest.mark.runtime


class Reports:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> None:
        self.calls.append(kwargs)


def _data() -> tuple[Any, Any]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    return x, (x[:, 0] > 0).astype(np.int64)


def test_xgboost_reports_every_round_with_each_eval_sets_metric() -> None:
    x, y = _data()
    reports = Reports()
    callback = callbacks.XGBoostProgress(total=5, report=reports)
    assert isinstance(callback, xgboost.callback.TrainingCallback)
    train = xgboost.DMatrix(x, label=y)
    params = {"objective": "binary:logistic", "eval_metric": "logloss", "nthread": 1}
    xgboost.train(params, train, num_boost_round=5, evals=[(train, "train")], callbacks=[callback])
    assert [(c["step"], c["total"]) for c in reports.calls] == [(i, 5) for i in range(1, 6)]
    losses = [c["train-logloss"] for c in reports.calls]
    assert all(isinstance(v, float) for v in losses) and losses[-1] < losses[0]


def test_keras_reports_every_epoch_with_loss_and_accuracy() -> None:
    x, y = _data()
    reports = Reports()
    callback = callbacks.KerasProgress(report=reports)
    assert isinstance(callback, keras.callbacks.Callback)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, epochs=3, batch_size=16, verbose=0, callbacks=[callback])
    assert [(c["step"], c["total"], c["epoch"]) for c in reports.calls] == [(1, 3, 1), (2, 3, 2), (3, 3, 3)]
    assert all(isinstance(c["loss"], float) and 0 <= c["accuracy"] <= 1 for c in reports.calls)
