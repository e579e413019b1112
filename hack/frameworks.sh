#!/usr/bin/env bash
# Installs the training frameworks that the runtime tests (tests/runtime) drive for real: PyTorch,
# TensorFlow (CPU) with tf-keras, JAX (jax[cpu]), XGBoost (xgboost-cpu), PaddlePaddle (CPU), mpi4py over
# Debian's Open MPI and MPICH, numpy, scikit-learn and Hugging Face Transformers (its KubeflowCallback is tested).
# Called by `bash hack/setup.sh --frameworks`. Idempotent: a stamp records what was installed, and a
# second run only checks that the frameworks are still there (0.1 s).
#
# Why it is a script and not only `pip install .[torch,tensorflow,jax,xgboost,paddle,mpi]`:
# - tf-keras depends on `tensorflow`, not `tensorflow-cpu`; installing it normally drags the 572 MB
#   `tensorflow` wheel over tensorflow-cpu. We install it with --no-deps (so `pip check` reports
#   "tf-keras requires tensorflow": expected and harmless).
# - mpi4py needs an MPI library from the OS; MPICH also needs a `libmpi.so.12` symlink that Debian
#   does not ship (MPICH_ABI_DIR below).
# - PyPI has no CPU-only torch for linux x86_64: `torch` pulls the CUDA runtime as nvidia-* wheels
#   (about 3 GB to download, more on disk). It runs on CPU all the same (gloo).
# - Horovod 0.28.1 (its last release, 2023) does not build against current torch as published: it asks for
#   C++14 where torch >= 2.1 needs C++17 (and torch 2.15 C++20). We build its sdist with patched lines,
#   once per torch version, and keep the wheel in ~/.cache/kubetrain/wheels; later runs (a fresh CI clone on
#   the same machine) install it in seconds. What is built is what the MPIJob examples use: torch over MPI
#   (mpirun starts the ranks). Not gloo (horovodrun's own launcher, 105 more C++ files), not TensorFlow
#   (that half no longer compiles against TF 2.21), and no debug info (Release, not RelWithDebInfo), which
#   took the cold build from about 1,500 s to about 470 s on 2 cores.
# Environment: KUBETRAIN_NO_MPICH=1 skips MPICH; KUBETRAIN_NO_HOROVOD=1 skips Horovod (its runtime test then
# fails); KUBETRAIN_FRAMEWORKS_FORCE=1 reinstalls.
set -euo pipefail
cd "$(dirname "$0")/.."

TF_KERAS_PIN="tf-keras==2.21.0" # must match the tensorflow-cpu minor version pinned in pyproject.toml
HOROVOD_VERSION=0.28.1
HOROVOD_BUILD=mpi-release # what build_horovod builds, part of the wheel cache key (hack/images.sh looks for it)
MPICH_ABI_DIR=.venv/lib/kubetrain-mpich

if [ ! -x .venv/bin/python ]; then
  echo "frameworks: .venv is missing; run 'bash hack/setup.sh --frameworks'" >&2
  exit 1
fi
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
[ -z "${PIP_CERT:-}" ] || export SSL_CERT_FILE=${SSL_CERT_FILE:-$PIP_CERT}  # uv: the CA pip is told to trust

t_start=$(date +%s)
step() { echo "== frameworks: $*"; }
took() { echo "   ($(($(date +%s) - $1)) s)"; }

want_mpich=1
[ "${KUBETRAIN_NO_MPICH:-0}" = 1 ] && want_mpich=0
want_horovod=1
[ "${KUBETRAIN_NO_HOROVOD:-0}" = 1 ] && want_horovod=0

stamp=.venv/.kubetrain-frameworks
horovod_stamp=.venv/.kubetrain-horovod # the wheel directory installed from
hash=$( (cat hack/frameworks.sh; python -c 'import tomllib, json; d = tomllib.load(open("pyproject.toml", "rb")); print(json.dumps(d["project"]["optional-dependencies"], sort_keys=True))'; echo "mpich=$want_mpich") | sha256sum | cut -c1-16)

frameworks_import() {
  python - <<'EOF'
import jax, mpi4py, numpy, sklearn, tensorflow as tf, tf_keras, torch, transformers, xgboost
print(f"torch {torch.__version__}, tensorflow {tf.__version__}, tf_keras {tf_keras.__version__}, "
      f"jax {jax.__version__}, xgboost {xgboost.__version__}, mpi4py {mpi4py.__version__}, numpy {numpy.__version__}, "
      f"scikit-learn {sklearn.__version__}, transformers {transformers.__version__}")
EOF
  # paddle in a process of its own: imported after tensorflow, one of the two crashes the interpreter
  # (SIGSEGV; no training process imports both). -W ignore: at import it warns that ccache is missing.
  python -W ignore -c 'import paddle; print(f"paddle {paddle.__version__}")'
}

frameworks_present() {  # cheap: finds the modules without importing them (importing takes ~15 s)
  python -c 'import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in
    ("jax", "mpi4py", "numpy", "paddle", "sklearn", "tensorflow", "tf_keras", "torch", "transformers", "xgboost")))'
}

apt_install() {
  local t sudo_cmd=()
  t=$(date +%s)
  step "apt-get install $*"
  [ "$(id -u)" = 0 ] || sudo_cmd=(sudo)
  # one apt-get at a time: the test command's other setup steps install packages beside this one
  "${sudo_cmd[@]}" flock /run/lock/kubetrain-apt.lock apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" flock /run/lock/kubetrain-apt.lock \
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  took "$t"
}

install_frameworks() {
  # --- OS packages: MPI implementations ---------------------------------------------------------
  apt_pkgs=()
  command -v mpirun.openmpi >/dev/null || apt_pkgs+=(openmpi-bin libopenmpi-dev)
  if [ "$want_mpich" = 1 ]; then
    command -v mpiexec.mpich >/dev/null || apt_pkgs+=(mpich libmpich-dev)
  fi
  [ ${#apt_pkgs[@]} -eq 0 ] || apt_install "${apt_pkgs[@]}"
  # Open MPI must stay the default `mpirun`: the tests and the MPIJob default implementation expect it.
  if [ "$(readlink -f "$(command -v mpirun)")" != "$(readlink -f "$(command -v mpirun.openmpi)")" ]; then
    echo "frameworks: 'mpirun' is not Open MPI's; fix with: update-alternatives --set mpi /usr/bin/mpicc.openmpi" >&2
    exit 1
  fi
  if [ "$want_mpich" = 1 ]; then
    # mpi4py's MPICH flavour loads libmpi.so.12; Debian names the library libmpich.so.12. A symlink in a
    # directory of our own (put on LD_LIBRARY_PATH with MPI4PY_MPIABI=mpich) bridges the two names.
    libmpich=$(find /usr/lib -name 'libmpich.so.12' -print -quit)
    mkdir -p "$MPICH_ABI_DIR"
    ln -sf "$libmpich" "$MPICH_ABI_DIR/libmpi.so.12"
  fi

  # --- Python packages ---------------------------------------------------------------------------
  extras=$(python - <<'EOF'
import tomllib
d = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
reqs = sorted({r for extra in ("torch", "tensorflow", "jax", "xgboost", "paddle", "mpi", "transformers") for r in d[extra]})
print("\n".join(reqs))
EOF
  )
  mapfile -t reqs <<<"$extras"
  t=$(date +%s)
  step "pip install ${reqs[*]}"
  uv pip install -q --python .venv/bin/python "${reqs[@]}"  # uv: hack/setup.sh installs it
  took "$t"
  t=$(date +%s)
  step "pip install --no-deps $TF_KERAS_PIN"
  uv pip install -q --python .venv/bin/python --no-deps "$TF_KERAS_PIN"
  took "$t"
  step "check"
  TF_CPP_MIN_LOG_LEVEL=3 frameworks_import
  echo "$hash" >"$stamp"
  changed=1
}

# --- Horovod (torch over MPI), built from its sdist with the C++ standard fixed --------------
build_horovod() {  # $1: directory to put the wheel in
  local tmp src
  tmp=$(mktemp -d)
  python -m pip download -q --no-deps --no-binary :all: "horovod==$HOROVOD_VERSION" -d "$tmp"
  tar xzf "$tmp/horovod-$HOROVOD_VERSION.tar.gz" -C "$tmp"
  src="$tmp/horovod-$HOROVOD_VERSION"
  sed -i 's/^set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' "$src/CMakeLists.txt"
  sed -i 's/^    set(CMAKE_CXX_STANDARD 14)/    set(CMAKE_CXX_STANDARD 20)/' "$src/horovod/torch/CMakeLists.txt"
  sed -i "s/ else 'RelWithDebInfo'$/ else 'Release'/" "$src/setup.py"
  if ! grep -q '^set(CMAKE_CXX_STANDARD 17)' "$src/CMakeLists.txt" \
    || ! grep -q 'CMAKE_CXX_STANDARD 20' "$src/horovod/torch/CMakeLists.txt" \
    || ! grep -q " else 'Release'$" "$src/setup.py"; then
    echo "frameworks: horovod's sources changed; the C++ standard or build type patch no longer applies" >&2
    return 1
  fi
  HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_GLOO=1 HOROVOD_WITH_MPI=1 HOROVOD_WITHOUT_TENSORFLOW=1 \
    HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS="-j$(nproc)" \
    nice -n 10 python -m pip wheel -q --no-build-isolation --no-deps -w "$1" "$src"
  rm -rf "$tmp"
}

install_horovod() {
  local torch_version py_tag wheels t pkgs=()
  torch_version=$(python -c 'import torch; print(torch.__version__)')
  py_tag=$(python -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
  wheels="${XDG_CACHE_HOME:-$HOME/.cache}/kubetrain/wheels/horovod-$HOROVOD_VERSION-$py_tag-torch-$torch_version-$HOROVOD_BUILD"
  if [ "$(cat "$horovod_stamp" 2>/dev/null)" = "$wheels" ] \
    && python -c 'import importlib.util as u, sys; sys.exit(u.find_spec("horovod") is None)'; then
    echo "frameworks: horovod up to date ($horovod_stamp)"
    return
  fi
  if ! ls "$wheels"/horovod-*.whl >/dev/null 2>&1; then
    command -v cmake >/dev/null || pkgs+=(cmake)  # to build Horovod's C++ core
    command -v g++ >/dev/null || pkgs+=(g++)
    [ ${#pkgs[@]} -eq 0 ] || apt_install "${pkgs[@]}"
    t=$(date +%s)
    step "build horovod $HOROVOD_VERSION ($HOROVOD_BUILD) against torch $torch_version (once per torch version; minutes)"
    python -m pip install -q setuptools wheel
    rm -rf "$wheels" "$wheels.tmp"
    mkdir -p "$wheels.tmp"
    TIMEFORMAT="   (horovod compile: %R s wall, %U s user, %S s sys)"
    time build_horovod "$wheels.tmp"
    mv "$wheels.tmp" "$wheels"
    took "$t"
  fi
  t=$(date +%s)
  step "pip install horovod (cached wheel in $wheels)"
  python -m pip install -q psutil cloudpickle pyyaml packaging
  python -m pip install -q --no-deps --force-reinstall "$wheels"/horovod-*.whl
  python -c 'import horovod, horovod.torch as hvd
print(f"horovod {horovod.__version__}: mpi {hvd.mpi_built()}, gloo {hvd.gloo_built()}")'
  took "$t"
  echo "$wheels" >"$horovod_stamp"
  changed=1
}

changed=0
if [ "${KUBETRAIN_FRAMEWORKS_FORCE:-0}" != 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$hash" ] \
  && command -v mpirun.openmpi >/dev/null && frameworks_present; then
  echo "frameworks: up to date ($stamp)"
else
  install_frameworks
fi
[ "$want_horovod" = 0 ] || install_horovod
[ "$changed" = 1 ] || exit 0
site=$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "   sizes: torch $(du -sh "$site/torch" | cut -f1), nvidia $(du -shc "$site"/nvidia* 2>/dev/null | tail -1 | cut -f1)," \
  "tensorflow $(du -sh "$site/tensorflow" | cut -f1), paddle $(du -sh "$site/paddle" | cut -f1), venv $(du -sh .venv | cut -f1)"
echo "frameworks: done in $(($(date +%s) - t_start)) s"
