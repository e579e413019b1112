#!/usr/bin/env bash
# Builds the Go peers that bench/operator_scale.py --peer measures beside kubetrain (Kubeflow's
# training-operator, mpi-operator), listed in tools/peers/peers.txt, from their pinned Go modules, one
# cache directory per module version. Same method as hack/ecosystem.sh: `go install MODULE/cmd/X@VERSION`
# refuses modules with replace directives, so each module is downloaded with `go mod download`, its tree
# copied to a writable directory and built there with its own go.mod as the main module.
#
# Layout: ${KUBETRAIN_PEERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubetrain/peers}/<name>-<version>/
#   bin/<name>   the binary          src/   the module tree          stamp   written last, when built
# (bench/opbench/peers.py computes the same paths). A cached peer costs nothing. Set GOFLAGS=-p=1 (and run
# it under nice) on a small machine: a cold build compiles a few hundred packages.
#
# Usage: bash hack/peers.sh [NAME...]   build what is missing (all peers, or the named ones)
#        bash hack/peers.sh --print-dir print the cache root and exit
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
list="$root/tools/peers/peers.txt"
cache="${KUBETRAIN_PEERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubetrain/peers}"
if [ "${1:-}" = "--print-dir" ]; then echo "$cache"; exit 0; fi

export GOTOOLCHAIN=local CGO_ENABLED=0
wanted() { # name: built when no names were given, or when it is one of them
  [ ${#only[@]} -eq 0 ] && return 0
  local n
  for n in "${only[@]}"; do [ "$n" = "$1" ] && return 0; done
  return 1
}

build() { # name module version package
  local name="$1" module="$2" version="$3" pkg="$4"
  local dir="$cache/$name-$version" t0 src
  if [ -f "$dir/stamp" ] && [ -x "$dir/bin/$name" ]; then
    echo "peers: $name $version: cached"
    return
  fi
  command -v go >/dev/null || { echo "peers: 'go' not found on PATH (Go >= 1.26 is needed)" >&2; exit 1; }
  mkdir -p "$dir"
  exec 9>"$dir/.lock"
  flock 9 # a second build of the same peer waits, then finds it built
  if [ -f "$dir/stamp" ] && [ -x "$dir/bin/$name" ]; then echo "peers: $name $version: cached"; return; fi
  t0=$(date +%s)
  echo "peers: $name: downloading $module@$version ..."
  src="$(cd "$dir" && go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  if [ -z "$src" ] || [ ! -f "$src/go.mod" ]; then
    echo "peers: FAILED to download $module@$version (GOPROXY=$(go env GOPROXY))" >&2
    exit 1
  fi
  rm -rf "$dir/src" "$dir/bin"
  cp -r "$src" "$dir/src"
  chmod -R u+w "$dir/src" # the module cache is read-only; the build writes nothing there but go may
  echo "peers: $name: building $pkg ..."
  if ! (cd "$dir/src" && go build -mod=mod -trimpath -ldflags="-s -w" -o "$dir/bin/$name" "$pkg"); then
    echo "peers: FAILED to build $name ($pkg in $module@$version); see the go errors above." >&2
    exit 1
  fi
  echo "$module $version built $(date -u +%FT%TZ) in $(($(date +%s) - t0)) s" >"$dir/stamp"
  echo "peers: $name $version: built in $(($(date +%s) - t0)) s"
}

only=("$@")
for n in "${only[@]}"; do # a name that is not in the list is a mistake, not nothing to do
  grep -Eq "^$n[[:space:]]" "$list" || { echo "peers: unknown peer '$n' (see $list)" >&2; exit 2; }
done
while read -r name module version pkg rest; do
  case "$name" in '' | '#'*) continue ;; esac
  [ -n "$pkg" ] && [ -z "${rest:-}" ] || { echo "peers: bad line in $list: $name $module $version $pkg $rest" >&2; exit 1; }
  wanted "$name" && build "$name" "$module" "$version" "$pkg" </dev/null # stdin is the list
done <"$list"
exit 0
