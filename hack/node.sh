#!/usr/bin/env bash
# Builds and installs the parts of the real test node (kubetrain/testing/node.py):
# - kubelet and kube-proxy from the k8s.io/kubernetes module the control plane's API server is built from
#   (version K8S of tools/testbin/versions.env; wrapper module tools/node/k8s),
# - CoreDNS from its Go module with the kubernetes plugin and no `forward` (tools/node/coredns),
# - Debian's containerd, runc, CNI plugins, iptables and conntrack (DEBS of tools/node/versions.env), with
#   apt-get when missing.
#
# The binaries go to ${KUBETRAIN_NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubetrain/node/<key>}, where <key>
# names the versions and a hash of the wrapper modules (kubetrain/testing/node_binaries.py computes the same
# directory). A binary is rebuilt only when it or its stamp is missing. Cached, the script takes a second.
#
# Usage: bash hack/node.sh            build and install what is missing, print the times
#        bash hack/node.sh --print-dir  print the binary directory and exit
#        bash hack/node.sh --debs       install the Debian packages only (containerd, runc, CNI plugins, ...)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
nd="$root/tools/node"
# shellcheck source=/dev/null
. "$root/tools/testbin/versions.env"
# shellcheck source=/dev/null
. "$nd/versions.env"
: "${K8S:?K8S missing}" "${COREDNS:?COREDNS missing from tools/node/versions.env}" "${DEBS:?DEBS missing}"

hash="$(cat "$nd/k8s/go.mod" "$nd/coredns/go.mod" "$nd/coredns/main.go" | sha256sum | cut -c1-12)"
key="k8s-${K8S}_coredns-${COREDNS}_${hash}"
bin="${KUBETRAIN_NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubetrain/node/$key}"
if [ "${1:-}" = "--print-dir" ]; then echo "$bin"; exit 0; fi
t_all=$(date +%s)

missing_debs() {
  local p
  for p in $DEBS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
install_debs() {
  local missing
  missing="$(missing_debs)"
  [ -z "$missing" ] && { echo "node: Debian packages present ($DEBS)"; return; }
  [ "$(id -u)" = 0 ] || { echo "node: run as root to install: $missing" >&2; exit 1; }
  local t0; t0=$(date +%s)
  echo "node: apt-get install $missing"
  export DEBIAN_FRONTEND=noninteractive
  # one apt-get at a time: the test command's other setup steps install packages beside this one
  flock /run/lock/kubetrain-apt.lock apt-get -o DPkg::Lock::Timeout=900 update -qq
  # shellcheck disable=SC2086
  flock /run/lock/kubetrain-apt.lock apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends \
    $missing >/dev/null
  echo "node: Debian packages installed in $(($(date +%s) - t0)) s"
}

if [ "${1:-}" = "--debs" ]; then install_debs; exit 0; fi

# shellcheck source=hack/gobuild.sh
. "$root/hack/gobuild.sh"
gb_label=node gb_bin="$bin"
names=(kubelet kube-proxy coredns)
all_built() { local n; for n in "${names[@]}"; do gb_is_built "$n" || return 1; done; }

build_all() {
  local ldf
  all_built && { echo "node: binaries cached in $bin"; return; }
  command -v go >/dev/null || { echo "node: 'go' not found on PATH (Go >= 1.26 is needed)" >&2; exit 1; }
  mkdir -p "$bin"
  exec 8>"$bin/.lock"
  flock 8
  # CoreDNS first: it shares nothing with the k8s builds, so it compiles while hack/testbin.sh's k8s build
  # holds the lock that kubelet and kube-proxy then take (hack/gobuild.sh).
  gb_build "$nd/coredns" "" "" "coredns|.|CoreDNS-${COREDNS#v}|-version"
  ldf="$(gb_k8s_ldflags "$nd/k8s" "$K8S")"
  gb_build --k8s "$nd/k8s" selinux,notest,grpcnotrace "$ldf" \
    "kubelet|k8s.io/kubernetes/cmd/kubelet|Kubernetes $K8S|--version" \
    "kube-proxy|k8s.io/kubernetes/cmd/kube-proxy|Kubernetes $K8S|--version"
}

# The modules download while apt-get installs the Debian packages.
export GOTOOLCHAIN=local CGO_ENABLED=0
all_built || ! command -v go >/dev/null || gb_prefetch "$nd/coredns" "$nd/k8s"
install_debs
build_all
gb_prefetch_wait
echo "node: ready ($(($(date +%s) - t_all)) s): $bin"
