#!/usr/bin/env bash
# Installs the Kubeflow SDKs (tools/kubeflow-sdk/requirements.txt) into a venv of its own, cached
# by the hash of that file: ${XDG_CACHE_HOME:-~/.cache}/kubetrain/kubeflow-sdk/<hash>, or
# $KUBETRAIN_KUBEFLOW_SDK_DIR. The same rule is in kubetrain/testing/kubeflow_sdk.py. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
req=tools/kubeflow-sdk/requirements.txt
hash=$(sha256sum "$req" | cut -c1-12)
dir=${KUBETRAIN_KUBEFLOW_SDK_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubetrain/kubeflow-sdk/$hash}
if [ -f "$dir/.complete" ]; then
  echo "Kubeflow SDK venv: $dir (cached)"
  exit 0
fi
rm -rf "$dir"
"${PYTHON:-python3}" -m venv "$dir"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$dir/bin/python" -m pip install -q -r "$req"
"$dir/bin/python" -c "import kubeflow.training, kubeflow.trainer.backends.kubernetes.utils"
touch "$dir/.complete"
echo "Kubeflow SDK venv: $dir"
