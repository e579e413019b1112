# Sourced by hack/testbin.sh and hack/node.sh: builds commands of one of our wrapper modules (tools/testbin/*,
# tools/node/*) into a binary directory, checks that each prints its pinned version and stamps it.
#
# The commands of one module are built by ONE `go build -o DIR pkg...`: packages they share compile once and
# the links overlap the compiles. The control plane's k8s binaries (hack/testbin.sh) and the node's kubelet
# and kube-proxy (hack/node.sh) come from two wrapper modules with the same dependency versions, so their
# compiled packages are the same entries of Go's build cache (1,452 of kube-proxy's and kubelet's 1,578
# packages). Built at the same time they would each compile them; `gb_build --k8s` holds a lock (one per
# GOCACHE) so that the two builds take turns and the second finds the shared packages compiled.
#
# The compiler emits no DWARF (-gcflags=all=-dwarf=false): the linker drops it anyway (-ldflags=-w), and not
# making it took 12-16 % less compile CPU (k8s.io/client-go/kubernetes cold, see README's cold split).
#
# The caller sets gb_label (the log prefix) and gb_bin (the binary directory), exports GOTOOLCHAIN=local and
# CGO_ENABLED=0, and holds the lock of gb_bin. gb_built counts the binaries built.
gb_built=0

gb_is_built() { [ -x "$gb_bin/$1" ] && [ -f "$gb_bin/$1.stamp" ]; }

gb_k8s_ldflags() { # module-dir K8S: the version stamps of a k8s.io/kubernetes build (release date of the tag)
  local minor date pkg
  minor="$(echo "$2" | cut -d. -f2)"
  # Reproducible: the build date is the release time the Go proxy records for the tag.
  date="$(cd "$1" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)" || {
    echo "$gb_label: FAILED to read k8s.io/kubernetes $2 in $1 (see the go error above)" >&2
    return 1
  }
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    printf -- '-X %s.%s ' "$pkg" "gitVersion=$2" "$pkg" "gitMajor=1" "$pkg" "gitMinor=$minor" \
      "$pkg" "gitTreeState=clean" "$pkg" "buildDate=$date" "$pkg" "gitCommit="
  done
}

# gb_prefetch MODULE-DIR...: downloads the modules of each wrapper module in the background (`go mod download`,
# 600 MB for tools/testbin/k8s, 50-90 s on a fresh machine), so that the downloads overlap the compiles of
# the builds before them instead of coming first in each. A failed download is only reported by the build
# that needs the module; a build that needs a module being downloaded waits for it on the module cache's
# own lock. gb_prefetch_wait waits for all.
gb_prefetch_pids=()
gb_prefetch() {
  local dir
  for dir in "$@"; do
    (cd "$dir" && go mod download) >/dev/null 2>&1 &
    gb_prefetch_pids+=("$!")
  done
}
gb_prefetch_wait() {
  local pid
  for pid in "${gb_prefetch_pids[@]}"; do wait "$pid" || true; done
  gb_prefetch_pids=()
}

# gb_build [--k8s] MODULE-DIR TAGS LDFLAGS SPEC...
#   SPEC: "name|package|text the version command prints|version command arguments"
# Builds the SPECs whose binary or stamp is missing, in one `go build`. With several packages, each binary
# is named after its package's last element, which must be its name.
gb_build() {
  local k8s=0
  [ "$1" = --k8s ] && { k8s=1; shift; }
  local dir="$1" tags="$2" ldflags="$3" spec name pkg want args out t0 tmp o lock
  shift 3
  local names=() pkgs=() todo=() argv=()
  for spec in "$@"; do
    IFS='|' read -r name pkg want args <<<"$spec"
    if gb_is_built "$name"; then
      echo "$gb_label: $name: cached ($(head -n1 "$gb_bin/$name.stamp"))"
      continue
    fi
    names+=("$name") pkgs+=("$pkg") todo+=("$spec")
  done
  [ ${#names[@]} -eq 0 ] && return 0
  if [ "$k8s" = 1 ]; then
    lock="${TMPDIR:-/tmp}/kubetrain-gobuild-k8s-$(go env GOCACHE | sha256sum | cut -c1-12).lock"
    exec 7>"$lock"
    if ! flock -n 7; then
      echo "$gb_label: waiting for the other k8s.io/kubernetes build (it shares compiled packages) ..."
      flock 7
    fi
  fi
  t0=$(date +%s)
  tmp="$gb_bin/.build"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  o="$tmp/"
  [ ${#pkgs[@]} -eq 1 ] && o="$tmp/${names[0]}"
  echo "$gb_label: building ${names[*]} (${pkgs[*]}) ..."
  if ! (cd "$dir" && go build -mod=readonly -trimpath -tags="$tags" -gcflags=all=-dwarf=false -ldflags="-s -w $ldflags" \
    -o "$o" "${pkgs[@]}"); then
    echo "$gb_label: FAILED to build ${names[*]} (${pkgs[*]} in $dir); see the go errors above." >&2
    echo "$gb_label: needs the Go module proxy (GOPROXY=$(go env GOPROXY)) and Go >= the module's go line." >&2
    exit 1
  fi
  [ "$k8s" = 1 ] && flock -u 7
  for spec in "${todo[@]}"; do
    IFS='|' read -r name pkg want args <<<"$spec"
    [ -x "$tmp/$name" ] || { echo "$gb_label: go build made no $tmp/$name for $pkg" >&2; exit 1; }
    read -ra argv <<<"$args"
    # The whole output first, then its first lines: `| head` would close the pipe early, the binary would
    # die of SIGPIPE and, under pipefail, end the script without a word.
    out="$("$tmp/$name" "${argv[@]}" 2>&1)" || true
    out="$(printf '%s\n' "$out" | sed -n '1,3p')"
    if ! grep -qF -- "$want" <<<"$out"; then
      echo "$gb_label: $name built but '$name $args' printed '$out', expected '$want'" >&2
      exit 1
    fi
    mv -f "$tmp/$name" "$gb_bin/$name"
    echo "$out" >"$gb_bin/$name.stamp"
    echo "$gb_label: $name: built ($(head -n1 <<<"$out"))"
    gb_built=$((gb_built + 1))
  done
  rm -rf "$tmp"
  echo "$gb_label: ${names[*]}: built in $(($(date +%s) - t0)) s"
}
