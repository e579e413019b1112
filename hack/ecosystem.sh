#!/usr/bin/env bash
# Builds the ecosystem components (Kueue, the scheduler-plugins scheduler, ...) listed in
# tools/ecosystem/components.txt from their pinned Go modules, one cache directory per module version.
#
# `go install MODULE/cmd/X@VERSION` refuses modules whose go.mod has replace directives (these all have
# them), so each module is downloaded with `go mod download`, its tree copied to a writable directory and
# built there with its own go.mod as the main module. The copied tree stays beside the binary: the tests
# install the CRDs and webhook configurations from it, so they always match the binary.
#
# No DWARF is compiled (-gcflags=all=-dwarf=false): the linker strips it anyway (-ldflags=-w); see hack/gobuild.sh.
#
# Layout: ${KUBETRAIN_ECOSYSTEM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubetrain/ecosystem}/<name>-<version>/
#   bin/<name>   the binary          src/   the module tree          stamp   written last, when built
# (kubetrain/testing/ecosystem.py computes the same paths). A cached component costs nothing.
#
# Usage: bash hack/ecosystem.sh [NAME...]   build what is missing (all components, or the named ones)
#        bash hack/ecosystem.sh --download [NAME...]   only download the modules of what is missing (hack/test.sh
#                                                       runs it first, so that the downloads overlap other builds)
#        bash hack/ecosystem.sh --print-dir print the cache root and exit
# hack/peers.sh builds another list (the benchmark's Go peers) with this same script, through
# KUBETRAIN_GOBUILD_LIST (the list file), KUBETRAIN_GOBUILD_DIR (the cache root) and KUBETRAIN_GOBUILD_LABEL.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
list="${KUBETRAIN_GOBUILD_LIST:-$root/tools/ecosystem/components.txt}"
cache="${KUBETRAIN_GOBUILD_DIR:-${KUBETRAIN_ECOSYSTEM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubetrain/ecosystem}}"
label="${KUBETRAIN_GOBUILD_LABEL:-ecosystem}"
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
    echo "$label: $name $version: cached"
    return
  fi
  command -v go >/dev/null || { echo "$label: 'go' not found on PATH (Go >= 1.26 is needed)" >&2; exit 1; }
  mkdir -p "$dir"
  exec 9>"$dir/.lock"
  flock 9 # a second build of the same component waits, then finds it built
  if [ -f "$dir/stamp" ] && [ -x "$dir/bin/$name" ]; then echo "$label: $name $version: cached"; return; fi
  if [ "$download_only" = 1 ]; then
    # The module and its dependencies into Go's module cache (`go mod download` reads the module's own
    # go.mod, in a throw-away copy: the module cache is read-only). The build below then finds them there.
    t0=$(date +%s)
    src="$(cd "$dir" && go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
    [ -n "$src" ] || { echo "$label: FAILED to download $module@$version" >&2; return 1; }
    rm -rf "$dir/.download"
    cp -r "$src" "$dir/.download" && chmod -R u+w "$dir/.download"
    (cd "$dir/.download" && go mod download) || { echo "$label: FAILED to download the modules of $module@$version" >&2; return 1; }
    rm -rf "$dir/.download"
    echo "$label: $name $version: modules downloaded in $(($(date +%s) - t0)) s"
    return
  fi
  t0=$(date +%s)
  echo "$label: $name: downloading $module@$version ..."
  src="$(cd "$dir" && go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  if [ -z "$src" ] || [ ! -f "$src/go.mod" ]; then
    echo "$label: FAILED to download $module@$version (GOPROXY=$(go env GOPROXY))" >&2
    exit 1
  fi
  rm -rf "$dir/src" "$dir/bin"
  cp -r "$src" "$dir/src"
  chmod -R u+w "$dir/src" # the module cache is read-only; the build writes nothing there but go may
  echo "$label: $name: building $pkg ..."
  if ! (cd "$dir/src" && go build -mod=mod -trimpath -gcflags=all=-dwarf=false -ldflags="-s -w" -o "$dir/bin/$name" \
    "$pkg"); then
    echo "$label: FAILED to build $name ($pkg in $module@$version); see the go errors above." >&2
    exit 1
  fi
  echo "$module $version built $(date -u +%FT%TZ) in $(($(date +%s) - t0)) s" >"$dir/stamp"
  echo "$label: $name $version: built in $(($(date +%s) - t0)) s"
}

download_only=0
if [ "${1:-}" = "--download" ]; then download_only=1; shift; fi
only=("$@")
for n in "${only[@]}"; do # a name that is not in the list is a mistake, not nothing to do
  grep -Eq "^$n[[:space:]]" "$list" || { echo "$label: unknown name '$n' (see $list)" >&2; exit 2; }
done
while read -r name module version pkg rest; do
  case "$name" in '' | '#'*) continue ;; esac
  [ -n "$pkg" ] && [ -z "${rest:-}" ] || { echo "$label: bad line in $list: $name $module $version $pkg $rest" >&2; exit 1; }
  wanted "$name" && build "$name" "$module" "$version" "$pkg" </dev/null # stdin is the list
done <"$list"
exit 0
