#!/usr/bin/env bash
# The main job, on a fresh machine: installs kubetrain and PyTorch into .venv, then runs
# examples/pytorch/pytorch-ddp.yaml locally (a PyTorchJob: 1 master + 3 workers, DDP over gloo, learning
# scikit-learn's bundled digits) with `kubetrain run --local`, which renders every replica's pod with the
# operator's own controller code and runs it as a local process.
#
# It installs only what that job needs: the project and its `torch` extra (torch, numpy, scikit-learn).
# The test command (hack/test.sh, through `hack/setup.sh --frameworks`) installs the dev tools and every
# framework (TensorFlow, JAX, XGBoost, PaddlePaddle, Debian's MPI, Horovod) on top of the same .venv.
# Idempotent: a stamp records what was installed; a second run goes straight to the job.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1

[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
stamp=.venv/.kubetrain-quickstart
hash=$(cat pyproject.toml hack/quickstart.sh | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$hash" ] \
  || ! python -c 'import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in
      ("kubetrain", "torch", "numpy", "sklearn")))'; then
  t=$(date +%s)
  # uv (pinned in pyproject's `bootstrap` group) installs what pip would, from the same index, but
  # downloads in parallel and unpacks natively: torch from PyPI brings its CUDA runtime, ~3 GB.
  uv_pin=$(python -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["dependency-groups"]["bootstrap"])')
  echo "== quickstart: pip install $uv_pin; uv pip install -e .[torch]"
  python -m pip install -q "$uv_pin"
  [ -z "${PIP_CERT:-}" ] || export SSL_CERT_FILE=${SSL_CERT_FILE:-$PIP_CERT}  # the CA pip is told to trust
  uv pip install -q --python .venv/bin/python -e ".[torch]"
  echo "   ($(($(date +%s) - t)) s)"
  echo "$hash" >"$stamp"
fi
exec kubetrain run --local "${1:-examples/pytorch/pytorch-ddp.yaml}"
