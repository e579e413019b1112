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

# Reproducible version stamps: the build date is the release time the Go proxy records for the tag.
release_time() { # dir module@version
  (cd "$1" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' "$2")
}

k8s_ldflags() { # release-date
  local minor date="$1"
  minor="$(echo "$K8S" | cut -d. -f2)"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    printf -- '-X %s.%s ' "$pkg" "gitVersion=$K8S" "$pkg" "gitMajor=1" "$pkg" "gitMinor=$minor" \
      "$pkg" "gitTreeState=clean" "$pkg" "buildDate=$date" "$pkg" "gitCommit="
  done
}

built=0
build() { # name module-dir package expected-version-text ldflags tags version-command...
  local name="$1" dir="$2" pkg="$3" want="$4" ldflags="$5" tags="$6"
  shift 6
  if is_built "$name"; then
    echo "testbin: $name: cached ($(head -n1 "$bin/$name.stamp"))"
    return
  fi
  local t0 out
  t0=$(date +%s)
  echo "testbin: $name: building $pkg ..."
  if ! (cd "$tb/$dir" && go build -mod=readonly -trimpath -tags="$tags" -ldflags="-s -w $ldflags" \
    -o "$bin/.$name.tmp" "$pkg"); then
    echo "testbin: FAILED to build $name ($pkg in tools/testbin/$dir); see the go errors above." >&2
    echo "testbin: needs the Go module proxy (GOPROXY=$(go env GOPROXY)) and Go >= the module's go line." >&2
    exit 1
  fi
  # The whole output first, then its first lines: `| head` would close the pipe early, the binary would
  # die of SIGPIPE and, under pipefail, end this script without a word.
  out="$("$bin/.$name.tmp" "$@" 2>&1)" || true
  out="$(printf '%s\n' "$out" | sed -n '1,3p')"
  if ! grep -qF -- "$want" <<<"$out"; then
    echo "testbin: $name built but '$name $*' printed '$out', expected '$want'" >&2
    exit 1
  fi
  mv -f "$bin/.$name.tmp" "$bin/$name"
  echo "$out" >"$bin/$name.stamp"
  echo "testbin: $name: built in $(($(date +%s) - t0)) s ($(head -n1 <<<"$out"))"
  built=$((built + 1))
}

t_all=$(date +%s)
echo "testbin: $bin"
k8s_tags=selinux,notest,grpcnotrace
k8s_date="$(release_time "$tb/k8s" k8s.io/kubernetes)" || {
  echo "testbin: FAILED to read k8s.io/kubernetes $K8S in tools/testbin/k8s (see the go error above)" >&2
  exit 1
}
ldf="$(k8s_ldflags "$k8s_date")"
build etcd etcd go.etcd.io/etcd/server/v3 "etcd Version: ${ETCD#v}" \
  "-X go.etcd.io/etcd/api/v3/version.GitSHA=release-$ETCD" "" --version
build kube-apiserver k8s k8s.io/kubernetes/cmd/kube-apiserver "Kubernetes $K8S" "$ldf" "$k8s_tags" --version
build kube-controller-manager k8s k8s.io/kubernetes/cmd/kube-controller-manager "Kubernetes $K8S" "$ldf" \
  "$k8s_tags" --version
build kube-scheduler k8s k8s.io/kubernetes/cmd/kube-scheduler "Kubernetes $K8S" "$ldf" "$k8s_tags" --version
build kubectl k8s k8s.io/kubernetes/cmd/kubectl "Client Version: $K8S" "$ldf" "$k8s_tags" version --client
build kwok kwok sigs.k8s.io/kwok/cmd/kwok "${KWOK#v}" "" "" --version
echo "testbin: ready ($built built, $(($(date +%s) - t_all)) s): $bin"
