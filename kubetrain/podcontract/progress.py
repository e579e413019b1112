"""The progress-report contract of Kubeflow Trainer (KEP-2779): the env a reporting pod receives and the body.

Why here: the operator injects these variables and reads these bodies; the helpers in the pod
(`kubetrain.runtimes.progress`) and the local runner build and read them too. One stdlib-only definition
keeps the three in step, and the API models take their bounds from it.

The env, named as Kubeflow Trainer's `trainjobstatus` plugin names it (so that Hugging Face Transformers'
`KubeflowCallback` and the Kubeflow SDK's `update_trainjob_status` find it unchanged):
- `KUBEFLOW_TRAINER_SERVER_URL`: where to POST, `https://<operator>/apis/<group>/<version>/namespaces/{ns}/
  {plural}/{name}/status` (`https://127.0.0.1:<port>/...` under `kubetrain run --local`);
- `KUBEFLOW_TRAINER_SERVER_CA_CERT`: the path of the CA bundle that signs the endpoint's certificate;
- `KUBEFLOW_TRAINER_SERVER_TOKEN`: the path of the pod's projected service-account token (re-read often:
  the kubelet rotates it).

The body: `{"trainerStatus": {"lastUpdatedTime": "2026-...+00:00", "progressPercentage": 42,
"estimatedRemainingSeconds": 310, "metrics": [{"name": "loss", "value": "0.0412"}]}}`. A receiver accepts
it as Transformers and the SDK send it (their `lastUpdatedTime` included, though the receiver records when
it received the report) and answers 200: both count nothing else a success.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "CA_CERT_ENV",
    "MAX_BODY_BYTES",
    "MAX_METRICS",
    "MAX_METRIC_NAME",
    "MAX_METRIC_VALUE",
    "TOKEN_ENV",
    "URL_ENV",
    "metric_value",
    "report_body",
    "status_path",
]

URL_ENV: Final = "KUBEFLOW_TRAINER_SERVER_URL"
CA_CERT_ENV: Final = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
TOKEN_ENV: Final = "KUBEFLOW_TRAINER_SERVER_TOKEN"

MAX_METRICS: Final = 16
"""The most metrics one status holds: a loss, an accuracy, a learning rate and a few more, never a history.
A report with more (the Kubeflow SDK sends up to 256) keeps its first `MAX_METRICS`."""
MAX_METRIC_NAME: Final = 64
"""The longest metric name kept (`val_accuracy`, `train/loss`...); a longer one is cut."""
MAX_METRIC_VALUE: Final = 64
"""The longest metric value kept: a number written as a string, with room for a unit; a longer one is cut."""
MAX_BODY_BYTES: Final = 16 * 1024
"""The largest body a receiver reads: a full report at the bounds above is under 3 KiB."""


def status_path(api_version: str, namespace: str, plural: str, name: str) -> str:
    """The path of one job's report endpoint below the receiver's base URL, in KEP-2779's shape:
    `/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/mnist/status`."""
    return f"/apis/{api_version}/namespaces/{namespace}/{plural}/{name}/status"


def metric_value(value: object) -> str:
    """A metric as the wire's string: floats with 4 significant digits (`0.04123`), at most the bound."""
    if isinstance(value, float) and math.isfinite(value):
        text = f"{value:.4g}"
    elif isinstance(value, bool | int | str):
        text = str(value)
    else:
        text = str(_plain_number(value))
    return text[:MAX_METRIC_VALUE]


def _plain_number(value: object) -> object:
    """A numpy or torch scalar as a Python number (its `item()`), else the value itself."""
    item = getattr(value, "item", None)
    if callable(item):
        try:
            plain = item()
        except (TypeError, ValueError, RuntimeError):
            return value
        return f"{plain:.4g}" if isinstance(plain, float) and math.isfinite(plain) else plain
    return value


def report_body(*, percent: int | None, remaining: float | None, metrics: Mapping[str, object]) -> bytes:
    """The JSON body of one report, within every bound (extra metrics and long names are cut), stamped
    with this moment as Kubeflow's clients stamp theirs."""
    status: dict[str, Any] = {"lastUpdatedTime": datetime.datetime.now(datetime.UTC).isoformat()}
    if percent is not None:
        status["progressPercentage"] = max(0, min(100, int(percent)))
    if remaining is not None and math.isfinite(remaining):
        status["estimatedRemainingSeconds"] = max(0, round(remaining))
    items = [(str(k)[:MAX_METRIC_NAME], v) for k, v in metrics.items() if str(k)][:MAX_METRICS]
    if items:
        status["metrics"] = [{"name": k, "value": metric_value(v)} for k, v in items]
    return json.dumps({"trainerStatus": status}, separators=(",", ":")).encode()
