"""Progress callbacks for Keras, Hugging Face Transformers, PyTorch Lightning and XGBoost.

    model.fit(x, y, epochs=10, callbacks=[KerasProgress()])
    Trainer(..., callbacks=[TransformersProgress()])
    lightning.Trainer(..., callbacks=[LightningProgress()])
    xgboost.train(params, dtrain, num_boost_round=50, callbacks=[XGBoostProgress(total=50)])

Each one turns the framework's own notion of progress (epochs, global steps, boosting rounds) and its
latest logged metrics into `kubetrain.runtimes.progress.report`, which never raises and never blocks.

The frameworks are not dependencies: each class is built on first use (`from ... import KerasProgress`)
on the framework's callback base class when the framework is installed, and on a plain base otherwise (the
hooks are the same duck-typed methods, so a framework that only calls them is served either way).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from typing import Any

from kubetrain.runtimes import progress

__all__ = ["KerasProgress", "LightningProgress", "TransformersProgress", "XGBoostProgress"]

Report = Callable[..., None]

# Declared for readers and checkers; `__getattr__` builds each on first use.
KerasProgress: type
TransformersProgress: type
LightningProgress: type
XGBoostProgress: type


def _base(*candidates: str) -> type:
    """The framework's callback base class (`module:Name`, the first importable), else `object`."""
    for candidate in candidates:
        module, name = candidate.split(":")
        try:
            found: type = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        return found
    return object


def _scalars(logs: Mapping[str, Any] | None) -> dict[str, Any]:
    """The numeric entries of a framework's logs (tensors and numpy scalars included), by name."""
    kept = {}
    for key, value in (logs or {}).items():
        if isinstance(value, bool | str) or (value is None):
            continue
        if isinstance(value, int | float) or hasattr(value, "item") or hasattr(value, "numpy"):
            kept[str(key)] = _plain(value)
    return kept


def _plain(value: Any) -> Any:
    for method in ("item", "numpy"):
        convert = getattr(value, method, None)
        if callable(convert):
            try:
                return float(convert())
            except (TypeError, ValueError, RuntimeError):
                return value
    return value


def _keras(base: type) -> type:
    class KerasProgress(base):  # type: ignore[misc]
        """Reports after every epoch: epoch of epochs, and the epoch's logs (loss, accuracy, val_*)."""

        def __init__(self, report: Report | None = None) -> None:
            super().__init__()
            self._report = report or progress.report

        def on_epoch_end(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
            total = (getattr(self, "params", None) or {}).get("epochs")
            self._report(step=epoch + 1, total=total, epoch=epoch + 1, **_scalars(logs))

        def on_train_end(self, logs: Mapping[str, Any] | None = None) -> None:
            progress.flush()

    return KerasProgress


def _transformers(base: type) -> type:
    class TransformersProgress(base):  # type: ignore[misc]
        """Reports on every log: global step of max steps, epoch, and the logged metrics."""

        def __init__(self, report: Report | None = None) -> None:
            super().__init__()
            self._report = report or progress.report

        def on_log(
            self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None, **_: Any
        ) -> None:
            metrics = _scalars(logs)
            metrics.setdefault("epoch", getattr(state, "epoch", None) or 0)
            self._report(step=state.global_step, total=state.max_steps or None, **metrics)

        def on_train_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            progress.flush()

    return TransformersProgress


def _lightning(base: type) -> type:
    class LightningProgress(base):  # type: ignore[misc]
        """Reports after every training batch: global step of the estimated steps, and callback_metrics."""

        def __init__(self, report: Report | None = None) -> None:
            super().__init__()
            self._report = report or progress.report

        def on_train_batch_end(self, trainer: Any, pl_module: Any, *_: Any, **__: Any) -> None:
            total = getattr(trainer, "estimated_stepping_batches", None)
            total = total if isinstance(total, int | float) and total != float("inf") else None
            metrics = _scalars(getattr(trainer, "callback_metrics", None))
            metrics.setdefault("epoch", trainer.current_epoch)
            self._report(step=trainer.global_step, total=total, **metrics)

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            progress.flush()

    return LightningProgress


def _xgboost(base: type) -> type:
    class XGBoostProgress(base):  # type: ignore[misc]
        """Reports after every boosting round: round of `total`, and each eval set's latest metric
        (`train-logloss`, `test-merror`, ...)."""

        def __init__(self, total: int | None = None, report: Report | None = None) -> None:
            super().__init__()
            self._total, self._report = total, report or progress.report

        def after_iteration(self, model: Any, epoch: int, evals_log: Mapping[str, Any]) -> bool:
            metrics = {
                f"{data}-{metric}": values[-1]
                for data, by_metric in (evals_log or {}).items()
                for metric, values in by_metric.items()
                if values
            }
            self._report(step=epoch + 1, total=self._total, round=epoch + 1, **_scalars(metrics))
            return False  # never stops training

        def after_training(self, model: Any) -> Any:
            progress.flush()
            return model

    return XGBoostProgress


_BUILDERS: dict[str, tuple[Callable[[type], type], tuple[str, ...]]] = {
    "KerasProgress": (_keras, ("keras.callbacks:Callback",)),  # tf_keras under TF_USE_LEGACY_KERAS
    "TransformersProgress": (_transformers, ("transformers:TrainerCallback",)),
    "LightningProgress": (
        _lightning,
        ("lightning.pytorch.callbacks:Callback", "pytorch_lightning.callbacks:Callback"),
    ),
    "XGBoostProgress": (_xgboost, ("xgboost.callback:TrainingCallback",)),
}
_built: dict[str, type] = {}


def __getattr__(name: str) -> type:
    """Build a callback class on first use, on its framework's base class (see the module docstring)."""
    if name not in _BUILDERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _built:
        build, bases = _BUILDERS[name]
        if name == "KerasProgress" and os.environ.get("TF_USE_LEGACY_KERAS", "").lower() in ("1", "true"):
            bases = ("tf_keras.callbacks:Callback", *bases)  # tf.keras is Keras 2 then: its base class
        cls = build(_base(*bases))
        cls.__qualname__, cls.__module__ = name, __name__
        _built[name] = cls
    return _built[name]
