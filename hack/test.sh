#!/usr/bin/env bash
# The one test command (README, CI): installs what it needs (the venv with the operator, its dev tools and the
# training frameworks; the test control plane built from Go modules), then runs every check and every test
# tier. Extra arguments go to pytest (e.g. `bash hack/test.sh -m "not runtime" -x`).
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
phase() { echo "== $1 ($(( $(date +%s) - t0 )) s)"; }
phase "setup: venv and Python dependencies"
bash hack/setup.sh --frameworks
. .venv/bin/activate
phase "setup: test control plane"
bash hack/testbin.sh
phase "setup: Kubeflow SDK (a venv of its own)"
bash hack/kubeflow-sdk.sh
phase "ruff";               ruff check kubetrain tests bench
phase "ruff format";        ruff format --check kubetrain tests bench
phase "mypy --strict";      mypy && MYPYPATH=bench mypy --strict bench/operator_scale.py bench/opbench
phase "import contracts";   lint-imports
phase "generated CRDs";     kubetrain crds --check
phase "pytest"
set +e
python -m pytest "$@"
rc=$?
set -e
# pytest's 5 means "no tests collected": that is a failure here, never a pass.
phase "done: pytest exit $rc"
exit $rc
