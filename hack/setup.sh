#!/usr/bin/env bash
# Creates (or refreshes) the project's virtual env in .venv with the operator, its dev tools and,
# with --frameworks, the training frameworks. Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
want_frameworks=0
for a in "$@"; do [ "$a" = "--frameworks" ] && want_frameworks=1; done

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
[ -z "${PIP_CERT:-}" ] || export SSL_CERT_FILE=${SSL_CERT_FILE:-$PIP_CERT}  # uv: the CA pip is told to trust
stamp=.venv/.kubetrain-setup
hash=$(cat pyproject.toml hack/setup.sh | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$hash" ]; then
  python -m pip install -q --upgrade "pip>=24.3"
  # uv (pinned in pyproject's `bootstrap` group) installs what pip would, from the same index, but downloads
  # in parallel and unpacks natively; hack/frameworks.sh installs the frameworks with it too
  python -m pip install -q "$(python -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["dependency-groups"]["bootstrap"])')"
  uv pip install -q --python .venv/bin/python -e . --group dev
  echo "$hash" > "$stamp"
fi
if [ "$want_frameworks" = 1 ]; then
  bash hack/frameworks.sh
fi
