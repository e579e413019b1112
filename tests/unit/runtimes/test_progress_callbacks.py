"""The framework callbacks turn each framework's progress and logs into reports.

Transformers and Lightning are not installed here: their callbacks are driven the way those trainers call
them (duck-typed), on the plain base. Keras and XGBoost are tested in tests/runtime with the real
frameworks.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kubetrain.runtimes.progress import callbacks


class Reports:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> None:
        self.calls.append(kwargs)


class _Scalar:
    """A tensor-like 0-d value (torch and numpy scalars have `item()`)."""

    def __init__(self, value: float) -> None:
        self.value = value

    def item(self) -> float:
        return self.value


def test_transformers_reports_global_step_of_max_steps_and_the_logged_numbers() -> None:
    reports = Reports()
    callback = callbacks.TransformersProgress(report=reports)
    state = SimpleNamespace(global_step=50, max_steps=200, epoch=1.25)
    callback.on_log(None, state, None, logs={"loss": 0.31, "learning_rate": 5e-5, "note": "text"})
    assert reports.calls == [
        {"step": 50, "total": 200, "loss": 0.31, "learning_rate": 5e-5, "epoch": 1.25},
    ]


def test_lightning_reports_after_each_batch_with_its_callback_metrics() -> None:
    reports = Reports()
    callback = callbacks.LightningProgress(report=reports)
    trainer = SimpleNamespace(
        global_step=30,
        estimated_stepping_batches=120,
        current_epoch=2,
        callback_metrics={"train_loss": _Scalar(0.25), "val_acc": _Scalar(0.875)},
    )
    callback.on_train_batch_end(trainer, None, None, None, 7)
    assert reports.calls == [{"step": 30, "total": 120, "train_loss": 0.25, "val_acc": 0.875, "epoch": 2}]


def test_an_infinite_step_estimate_reports_no_total() -> None:
    reports = Reports()
    trainer = SimpleNamespace(
        global_step=3, estimated_stepping_batches=float("inf"), current_epoch=0, callback_metrics={}
    )
    callbacks.LightningProgress(report=reports).on_train_batch_end(trainer, None)
    assert reports.calls == [{"step": 3, "total": None, "epoch": 0}]


def test_callback_classes_are_named_as_imported() -> None:
    assert callbacks.TransformersProgress.__name__ == "TransformersProgress"
    assert callbacks.TransformersProgress is callbacks.TransformersProgress  # built once
