#!/usr/bin/env bash
# Measures the test command from empty caches, as the cold run in docs/contributing/testing.md was measured: empties every cache
# the project keeps or fills (Go's module and build caches, ~/.cache/kubetrain with the real node's
# containerd store, pip's, uv's and mypy's caches, podman's whole store), clones this repository's HEAD into
# a temporary directory and runs `CI=true bash .ci/run` there under /usr/bin/time. Debian's packages stay
# installed. It deletes other projects' podman images and Go caches too, so it asks for --yes.
#
# Usage: bash hack/cold-run.sh --yes [LOG]   (LOG: default /tmp/kubetrain-cold-run.log)
set -euo pipefail
[ "${1:-}" = --yes ] || { echo "cold-run: empties the Go, pip, uv and podman caches of this machine; run with --yes" >&2; exit 2; }
log=${2:-/tmp/kubetrain-cold-run.log}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/kubetrain-cold-XXXXXX)
echo "cold-run: emptying the caches ($(df -h / | awk 'NR == 2 {print $4}') free)"
go clean -modcache
rm -rf "$(go env GOCACHE)" "${XDG_CACHE_HOME:-$HOME/.cache}"/{kubetrain,pip,uv,mypy}
podman system reset -f >/dev/null
git clone -q "$repo" "$work/repo"
echo "cold-run: $(git -C "$work/repo" log --oneline -1), log in $log"
cd "$work/repo"
rc=0
/usr/bin/time -f "cold-run: %e s wall, %U s user, %S s sys" env CI=true bash .ci/run >"$log" 2>&1 || rc=$?
grep -E '^== |^cold-run:' "$log" | tail -n 8
echo "cold-run: exit $rc; the clone is in $work/repo (its .ci-logs/ hold each part's log)"
exit $rc
