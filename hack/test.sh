#!/usr/bin/env bash
# The one test command (README, CI): installs what it needs (the venv with the operator, its dev tools and the
# training frameworks; the test control plane built from Go modules), then runs every check and every test
# tier. Extra arguments go to pytest (e.g. `bash hack/test.sh -m "not runtime" -x`).
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
phase() { echo "== $1 ($(( $(date +%s) - t0 )) s)"; }
# The Go builds (control plane, Kueue, scheduler-plugins, and of the benchmark's Go peers only Kubeflow's
# training-operator, which tests/ecosystem/test_migration.py runs) and the Python setup (pip downloads,
# the Horovod compile) are independent: on a fresh machine they overlap, so downloads of one hide behind
# compiles of the other. Cached, each takes well under a second.
mkdir -p .ci-logs
go_log=.ci-logs/go-builds.log
phase "setup: Go builds in the background (log: $go_log)"
# The module downloads of the later builds start at once, beside the first compiles (each build waits for
# its own download's lock).
setsid bash -c 'bash hack/ecosystem.sh --download & bash hack/peers.sh --download training-operator &
  bash hack/testbin.sh && bash hack/ecosystem.sh && bash hack/peers.sh training-operator; rc=$?; wait; exit $rc' \
  >"$go_log" 2>&1 &
go_pid=$!
# The real node's parts (kubelet, kube-proxy, CoreDNS; Debian's containerd) for the `node` tier: beside the
# chain above, so that its apt-get and module downloads hide behind the compiles of the other.
node_log=.ci-logs/node-build.log
setsid bash hack/node.sh >"$node_log" 2>&1 &
node_pid=$!
# their own process groups: whatever ends this script (a failed step, Ctrl-C) ends the Go builds too
hvd_pid='' import_pid='' pytest_pids=()
stop_background() {
  local pid
  for pid in "$go_pid" "$node_pid" "$hvd_pid" "$import_pid" "${pytest_pids[@]}"; do
    [ -n "$pid" ] && kill -- -"$pid" 2>/dev/null || true
  done
}
trap stop_background EXIT
# Horovod's C++ compile (minutes, once per torch version) and the image builds (downloads and disk, little
# CPU) overlap: the frameworks go in first without Horovod, its compile then runs in the background, and
# trainer-horovod, the one image that needs its wheel, is built last.
phase "setup: venv and Python dependencies"
KUBETRAIN_NO_HOROVOD=1 bash hack/setup.sh --frameworks
. .venv/bin/activate
hvd_log=.ci-logs/horovod.log
phase "setup: Horovod in the background (log: $hvd_log)"
setsid bash hack/frameworks.sh >"$hvd_log" 2>&1 &
hvd_pid=$!
# The trainer and operator images (hack/images.sh; podman from Debian's packages), with the on-demand ones
# (trainer-xgboost, trainer-paddle), whose examples the node tier runs. A failure here does not stop the
# run: the image tests build again and fail with the reason.
mapfile -t image_tags < <(bash hack/images.sh --print-tags)
images_but_horovod=()
for tag in "${image_tags[@]}"; do
  name=${tag##*/}; name=${name%%:*}; name=${name#kubetrain-}
  [ "$name" = trainer-horovod ] || images_but_horovod+=("$name")
done
phase "setup: container images but trainer-horovod"
bash hack/images.sh "${images_but_horovod[@]}" || echo "images: hack/images.sh failed; tests/runtime/test_images.py reports why"
phase "setup: Kubeflow SDK (a venv of its own)"
bash hack/kubeflow-sdk.sh
phase "setup: waiting for Horovod"
if ! wait "$hvd_pid"; then
  cat "$hvd_log"
  echo "setup: Horovod's build failed (log above)" >&2
  exit 1
fi
tail -n 3 "$hvd_log"
phase "setup: image trainer-horovod"
bash hack/images.sh trainer-horovod || echo "images: hack/images.sh failed; tests/runtime/test_images.py reports why"
# The images go into the real node's containerd in the background, while the tiers before `node` run: a
# first import reads and hashes every byte (about 8 GB). The node tier, which would otherwise import them
# itself, waits for it (the machine's real-node lock) and finds them there.
import_log=.ci-logs/node-images.log
phase "setup: images into the real node's containerd, in the background (log: $import_log)"
import_args=()
for tag in "${image_tags[@]}"; do import_args+=(--image "$tag"); done
setsid bash -c 'bash hack/node.sh --debs && exec python -m kubetrain.testing --real-node --import-only "$@"' \
  import "${import_args[@]}" >"$import_log" 2>&1 &
import_pid=$!
phase "setup: waiting for the Go builds"
if ! wait "$go_pid"; then
  cat "$go_log"
  echo "setup: the Go builds failed (log above)" >&2
  exit 1
fi
tail -n 3 "$go_log"
if ! wait "$node_pid"; then
  cat "$node_log"
  echo "setup: the real node's build failed (log above)" >&2
  exit 1
fi
tail -n 1 "$node_log"
phase "ruff";               ruff check kubetrain tests bench
phase "ruff format";        ruff format --check kubetrain tests bench
phase "mypy --strict";      mypy && MYPYPATH=bench mypy --strict bench/*.py bench/opbench bench/recoverybench
phase "import contracts";   lint-imports
phase "generated CRDs";     kubetrain crds --check
# With no arguments, the tiers run as three pytest sessions side by side, each with its own control plane:
# most tiers wait on the API server, the operator and training processes far more than they compute (the
# tiers before `node` used 0.36 of a core on average), so one after another they left the machine idle.
# The groups are about equal in time (warm, on 2 cores beside other work: 1,332 s, 1,471 s, 1,482 s), and
# the two tiers that train for real (node, runtime) are in different groups. tests/unit/test_project.py checks that every tier is in exactly one group. With
# arguments, one session runs them (e.g. `bash hack/test.sh tests/unit -x`).
PYTEST_GROUPS=(
  "tests/node tests/e2e tests/unit tests/component"
  "tests/integration tests/chaos tests/ecosystem tests/hostile"
  "tests/runtime"
)
set +e
if [ $# -gt 0 ]; then
  phase "pytest"
  python -m pytest --durations=25 "$@"   # the 25 slowest, and the time by tier (tests/conftest.py)
  rc=$?
else
  declare -A group_of=()
  for i in "${!PYTEST_GROUPS[@]}"; do
    phase "pytest, group $((i + 1)) in the background: ${PYTEST_GROUPS[$i]} (log: .ci-logs/pytest-$((i + 1)).log)"
    # shellcheck disable=SC2086
    setsid python -m pytest --durations=15 ${PYTEST_GROUPS[$i]} >".ci-logs/pytest-$((i + 1)).log" 2>&1 &
    group_of[$!]=$i
    pytest_pids+=("$!")
  done
  rc=0
  while [ ${#group_of[@]} -gt 0 ]; do
    wait -n -p done_pid "${!group_of[@]}"
    code=$?
    i=${group_of[$done_pid]}
    unset "group_of[$done_pid]"
    phase "pytest, group $((i + 1)) (${PYTEST_GROUPS[$i]}): exit $code"
    cat ".ci-logs/pytest-$((i + 1)).log"
    # pytest's 5 means "no tests collected": that is a failure here, never a pass.
    [ "$code" = 0 ] || rc=1
  done
fi
set -e
tail -n 1 "$import_log"
phase "done: pytest exit $rc"
exit $rc
