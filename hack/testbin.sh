#!/usr/bin/env bash
# Builds the binaries of the test control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kwok) from Go modules, version-pinned by tools/testbin/versions.env and the
# wrapper modules in tools/testbin/{k8s,etcd,kwok}. Nothing is downloaded but Go modules.
#
# The binaries go to ${KUBETRAIN_TESTBIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubetrain/testbin/<key>},
# where <key> names the versions and a hash of the wrapper go.mod files (kubetrain/testing/binaries.py
# computes the same directory). A binary is rebuilt only when it or its stamp is missing; the stamp is
# written after `--version` printed the pinned version. Go's own caches stay in their default places.
#
# Usage: bash hack/testbin.sh            build what is missing, print per-binary times
#        bash hack/testbin.sh --print-dir  print the binary directory and exit
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tb="$root/tools/testbin"
# shellcheck source=/dev/null
. "$tb/versions.env"
: "${K8S:?K8S missing from versions.env}" "${ETCD:?ETCD missing from versions.env}" "${KWOK:?KWOK missing}"

hash="$(cat "$tb/k8s/go.mod" "$tb/etcd/go.mod" "$tb/kwok/go.mod" | sha256sum | cut -c1-12)"
key="k8s-${K8S}_etcd-${ETCD}_kwok-${KWOK}_${hash}"
bin="${KUBETRAIN_TESTBIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubetrain/testbin/$key}"
if [ "${1:-}" = "--print-dir" ]; then echo "$bin"; exit 0; fi

names=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)
is_built() { [ -x "$bin/$1" ] && [ -f "$bin/$1.stamp" ]; }
all_built() { for n in "${names[@]}"; do is_built "$n" || return 1; done; }
if all_built; then
  echo "testbin: all cached in $bin"
  exit 0
fi

export GOTOOLCHAIN=local CGO_ENABLED=0
command -v go >/dev/null || { echo "testbin: 'go' not found on PATH (Go >= 1.26 is needed)" >&2; exit 1; }
mkdir -p "$bin"
exec 9>"$bin/.lock"
flock 9 # two test runs at once: the second waits, then finds everything built

# shellcheck source=hack/gobuild.sh
. "$root/hack/gobuild.sh"
gb_label=testbin gb_bin="$bin"
gb_prefetch "$tb/k8s" "$tb/kwok" # while etcd compiles
t_all=$(date +%s)
echo "testbin: $bin"
k8s_tags=selinux,notest,grpcnotrace
ldf="$(gb_k8s_ldflags "$tb/k8s" "$K8S")"
gb_build "$tb/etcd" "" "-X go.etcd.io/etcd/api/v3/version.GitSHA=release-$ETCD" \
  "etcd|go.etcd.io/etcd/server/v3|etcd Version: ${ETCD#v}|--version"
gb_build --k8s "$tb/k8s" "$k8s_tags" "$ldf" \
  "kube-apiserver|k8s.io/kubernetes/cmd/kube-apiserver|Kubernetes $K8S|--version" \
  "kube-controller-manager|k8s.io/kubernetes/cmd/kube-controller-manager|Kubernetes $K8S|--version" \
  "kube-scheduler|k8s.io/kubernetes/cmd/kube-scheduler|Kubernetes $K8S|--version" \
  "kubectl|k8s.io/kubernetes/cmd/kubectl|Client Version: $K8S|version --client"
gb_build "$tb/kwok" "" "" "kwok|sigs.k8s.io/kwok/cmd/kwok|${KWOK#v}|--version"
gb_prefetch_wait
echo "testbin: ready ($gb_built built, $(($(date +%s) - t_all)) s): $bin"
