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
  apt-get -o DPkg::Lock::Timeout=900 update -qq
  # shellcheck disable=SC2086
  apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends $missing >/dev/null
  echo "node: Debian packages installed in $(($(date +%s) - t0)) s"
}

names=(kubelet kube-proxy coredns)
is_built() { [ -x "$bin/$1" ] && [ -f "$bin/$1.stamp" ]; }
build() { # name module-dir package expected-version-text ldflags tags version-args...
  local name="$1" dir="$2" pkg="$3" want="$4" ldflags="$5" tags="$6" t0 out
  shift 6
  if is_built "$name"; then echo "node: $name: cached ($(head -n1 "$bin/$name.stamp"))"; return; fi
  t0=$(date +%s)
  echo "node: $name: building $pkg ..."
  if ! (cd "$nd/$dir" && go build -mod=readonly -trimpath -tags="$tags" -ldflags="-s -w $ldflags" \
    -o "$bin/.$name.tmp" "$pkg"); then
    echo "node: FAILED to build $name ($pkg in tools/node/$dir); see the go errors above." >&2
    exit 1
  fi
  out="$("$bin/.$name.tmp" "$@" 2>&1)" || true
  out="$(printf '%s\n' "$out" | sed -n '1,3p')"
  grep -qF -- "$want" <<<"$out" || { echo "node: $name printed '$out', expected '$want'" >&2; exit 1; }
  mv -f "$bin/.$name.tmp" "$bin/$name"
  echo "$out" >"$bin/$name.stamp"
  echo "node: $name: built in $(($(date +%s) - t0)) s ($(head -n1 <<<"$out"))"
}

k8s_ldflags() { # the same version stamps as hack/testbin.sh
  local minor date
  minor="$(echo "$K8S" | cut -d. -f2)"
  date="$(cd "$nd/k8s" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' "k8s.io/kubernetes")"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    printf -- '-X %s.%s ' "$pkg" "gitVersion=$K8S" "$pkg" "gitMajor=1" "$pkg" "gitMinor=$minor" \
      "$pkg" "gitTreeState=clean" "$pkg" "buildDate=$date" "$pkg" "gitCommit="
  done
}

build_all() {
  local n all=1
  for n in "${names[@]}"; do is_built "$n" || all=0; done
  [ "$all" = 1 ] && { echo "node: binaries cached in $bin"; return; }
  command -v go >/dev/null || { echo "node: 'go' not found on PATH (Go >= 1.26 is needed)" >&2; exit 1; }
  export GOTOOLCHAIN=local CGO_ENABLED=0
  mkdir -p "$bin"
  exec 8>"$bin/.lock"
  flock 8
  local ldf tags=selinux,notest,grpcnotrace
  ldf="$(k8s_ldflags)"
  build kubelet k8s k8s.io/kubernetes/cmd/kubelet "Kubernetes $K8S" "$ldf" "$tags" --version
  build kube-proxy k8s k8s.io/kubernetes/cmd/kube-proxy "Kubernetes $K8S" "$ldf" "$tags" --version
  build coredns coredns . "CoreDNS-${COREDNS#v}" "" "" -version
}

install_debs
build_all
echo "node: ready ($(($(date +%s) - t_all)) s): $bin"
