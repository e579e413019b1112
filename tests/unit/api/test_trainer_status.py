"""`status.trainerStatus` (KEP-2779): the same field and bounds on all six kinds, in the models and the CRDs.

The CRD bounds are what the API server enforces against any writer; the models' bounds are what the
operator's endpoint checks before it writes. Both must refuse the same reports.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import ValidationError

from kubetrain.api import (
    KINDS,
    MAX_METRIC_NAME,
    MAX_METRIC_VALUE,
    MAX_METRICS,
    JobStatus,
    KindInfo,
    TrainerMetric,
    TrainerStatus,
    latest_metric,
)
from kubetrain.api.crd import crd_file_name

CRD_DIR = Path(__file__).resolve().parents[3] / "manifests" / "crds"

GOOD = {
    "progressPercentage": 42,
    "estimatedRemainingSeconds": 310,
    "metrics": [{"name": "loss", "value": "0.0412"}, {"name": "accuracy", "value": "0.97"}],
    "lastUpdatedTime": "2026-01-02T03:04:05Z",
}
BAD = [
    ({"progressPercentage": 101}, "progressPercentage"),
    ({"progressPercentage": -1}, "progressPercentage"),
    ({"estimatedRemainingSeconds": -5}, "estimatedRemainingSeconds"),
    ({"metrics": [{"name": f"m{i}", "value": "1"} for i in range(MAX_METRICS + 1)]}, "metrics"),
    ({"metrics": [{"name": "n" * (MAX_METRIC_NAME + 1), "value": "1"}]}, "metrics.0.name"),
    ({"metrics": [{"name": "loss", "value": "9" * (MAX_METRIC_VALUE + 1)}]}, "metrics.0.value"),
    ({"metrics": [{"name": "", "value": "1"}]}, "metrics.0.name"),
    ({"metrics": [{"name": "loss", "value": 0.5}]}, "metrics.0.value"),
]


@functools.cache
def _status_schema(info: KindInfo) -> dict[str, Any]:
    crd = yaml.safe_load((CRD_DIR / crd_file_name(info)).read_text(encoding="utf-8"))
    (version,) = crd["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    return schema


def _crd_errors(info: KindInfo, trainer_status: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(_status_schema(info))
    errors = validator.iter_errors({"trainerStatus": trainer_status})
    return [".".join(map(str, e.absolute_path)) for e in errors]


def test_the_model_reads_and_writes_keps_wire_form() -> None:
    status = JobStatus.model_validate({"trainerStatus": GOOD})
    assert status.trainer_status is not None
    assert status.trainer_status.progress_percentage == 42
    assert status.to_wire() == {"trainerStatus": GOOD}


@pytest.mark.parametrize(("change", "field"), BAD, ids=[field for _, field in BAD])
def test_the_model_refuses_out_of_bounds_reports_naming_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        TrainerStatus.model_validate({**GOOD, **change})
    assert field.split(".", maxsplit=1)[0] in str(caught.value)


@pytest.mark.parametrize("info", KINDS, ids=lambda info: info.kind)
def test_every_kinds_crd_accepts_a_report_and_refuses_each_bound(info: KindInfo) -> None:
    assert _crd_errors(info, copy.deepcopy(GOOD)) == []
    for change, field in BAD:
        assert _crd_errors(info, {**GOOD, **change}) == [f"trainerStatus.{field}"], field


@pytest.mark.parametrize("info", KINDS, ids=lambda info: info.kind)
def test_every_kind_prints_progress_and_eta(info: KindInfo) -> None:
    crd = yaml.safe_load((CRD_DIR / crd_file_name(info)).read_text(encoding="utf-8"))
    (version,) = crd["spec"]["versions"]
    columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
    assert columns["Progress"]["jsonPath"] == ".status.trainerStatus.progressPercentage"
    assert columns["ETA"]["jsonPath"] == ".status.trainerStatus.estimatedRemainingSeconds"
    names = [c["name"] for c in version["additionalPrinterColumns"]]
    assert names == ["State", "Progress", "ETA", "Age"]


@pytest.mark.parametrize(
    ("names", "shown"),
    [
        (["lr", "accuracy", "loss"], "loss"),
        (["lr", "val_accuracy"], "val_accuracy"),
        (["lr", "train_loss", "accuracy"], "accuracy"),
        (["lr", "train_loss"], "train_loss"),
        (["lr"], "lr"),
    ],
)
def test_the_one_line_view_shows_the_loss_else_the_accuracy(names: list[str], shown: str) -> None:
    status = TrainerStatus(metrics=[TrainerMetric(name=n, value="1") for n in names])
    metric = latest_metric(status)
    assert metric is not None and metric.name == shown


def test_no_metrics_shows_none() -> None:
    assert latest_metric(None) is None
    assert latest_metric(TrainerStatus(progress_percentage=3)) is None
