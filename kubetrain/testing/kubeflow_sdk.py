"""Where `hack/kubeflow-sdk.sh` installs the Kubeflow SDKs, found by the same rule as that script.

The SDKs (kubeflow-training 1.9.x, the Training Operator's client; kubeflow 0.5.0, the Trainer SDK whose
`update_trainjob_status` reports a pod's progress) require kubernetes<36 while kubetrain needs 37, so they
live in a venv of their own and tests run them as subprocesses: `$KUBETRAIN_KUBEFLOW_SDK_DIR` when set,
otherwise `${XDG_CACHE_HOME:-~/.cache}/kubetrain/kubeflow-sdk/<hash of tools/kubeflow-sdk/requirements.txt>`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["REQUIREMENTS", "MissingKubeflowSdkError", "kubeflow_sdk_python"]

REQUIREMENTS = Path(__file__).resolve().parents[2] / "tools" / "kubeflow-sdk" / "requirements.txt"


class MissingKubeflowSdkError(RuntimeError):
    """The SDK's venv is not installed (or not where the rule says)."""


def kubeflow_sdk_python() -> Path:
    """The python of the SDK's venv; MissingKubeflowSdkError saying how to install it when absent."""
    key = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    directory = Path(
        os.environ.get("KUBETRAIN_KUBEFLOW_SDK_DIR") or cache / "kubetrain" / "kubeflow-sdk" / key
    )
    if not (directory / ".complete").is_file():
        raise MissingKubeflowSdkError(
            f"the Kubeflow SDK is not installed in {directory}: run `bash hack/kubeflow-sdk.sh`"
        )
    return directory / "bin" / "python"
