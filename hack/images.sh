#!/usr/bin/env bash
# Builds every image the examples name (docker.io/kubetrain/trainer-*:<version>; those in ON_DEMAND only
# when named) and the operator image (docker.io/kubetrain/kubetrain-operator:<version>, from the
# Dockerfile) with podman, buildah or docker, whichever is present (podman and what it needs here are
# installed with apt when missing, see PODMAN_PKGS).
#
# Layers are shared and cached by version: localhost/kubetrain/python:3.11 (a venv with numpy and
# scikit-learn) under every trainer, localhost/kubetrain/torch:<torch> (about 6 GB) under trainer-pytorch and
# trainer-horovod. Horovod is never compiled here: its wheel comes from hack/frameworks.sh's cache
# (~/.cache/kubetrain/wheels), built once per torch version.
#
# The base image: $KUBETRAIN_BASE_IMAGE if set; else the public python:3.11 slim image when its registry
# answers; else a Debian bookworm base made here with mmdebstrap (Debian's python3), tagged
# localhost/kubetrain/debian-python:bookworm. pip inside builds trusts the host's CA bundle
# ($KUBETRAIN_CA_BUNDLE, default /etc/ssl/certs/ca-certificates.crt) through a build secret: it is never
# copied into an image.
#
# Usage: bash hack/images.sh [--with-on-demand | --print-tags | IMAGE...]   (names as in images/, plus `operator`; default:
# ALL, those the images test tier runs; ON_DEMAND images, trainer-xgboost and trainer-paddle, are built only
# when named, or with --with-on-demand, which builds ALL and them: the test command does, for the node tier)
# Environment: KUBETRAIN_IMAGE_ENGINE=podman|buildah|docker picks the engine; CONTAINERS_CONF is set to
# hack/containers.conf for podman/buildah when unset (runc, cgroupfs: crun fails on cgroup v1 hosts).
set -euo pipefail
cd "$(dirname "$0")/.."
t_start=$(date +%s)
step() { echo "== images: $*"; }
took() { echo "   ($(($(date +%s) - $1)) s)"; }

VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -n 1)
REGISTRY=${KUBETRAIN_IMAGE_REGISTRY:-docker.io/kubetrain}
TORCH_VERSION=$(sed -n 's/^ARG TORCH_VERSION=//p' images/torch/Containerfile)
HOROVOD_VERSION=0.28.1
HOROVOD_BUILD=mpi-release # hack/frameworks.sh builds it (torch over MPI, Release) and names its wheel cache so
PUBLIC_BASE=docker.io/library/python:3.11.14-slim-bookworm
DEBIAN_BASE=localhost/kubetrain/debian-python:bookworm
PYTHON_IMAGE=localhost/kubetrain/python:3.11
TORCH_IMAGE=localhost/kubetrain/torch:$TORCH_VERSION
CA_BUNDLE=${KUBETRAIN_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
ALL=(trainer-pytorch trainer-tensorflow trainer-jax trainer-mpi trainer-horovod trainer-mpich trainer-intelmpi operator)
# Built only when named (`bash hack/images.sh trainer-xgboost`) or with --with-on-demand: the images tier
# does not run them; the node tier (tests/node) does, and hack/test.sh builds them for it.
ON_DEMAND=(trainer-xgboost trainer-paddle)
if [ "${1:-}" = --print-tags ]; then  # the tags of every image this script builds, one a line
  for name in "${ALL[@]}" "${ON_DEMAND[@]}"; do
    [ "$name" = operator ] && name=kubetrain-operator
    echo "$REGISTRY/$name:$VERSION"
  done
  exit 0
fi

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

pick_engine() {
  local e=${KUBETRAIN_IMAGE_ENGINE:-}
  if [ -n "$e" ]; then echo "$e"; return; fi
  if command -v podman >/dev/null; then echo podman; return; fi
  if command -v buildah >/dev/null; then echo buildah; return; fi
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then echo docker; return; fi
  echo none
}

# What podman needs on a Debian host beyond itself: the runtime (runc), the network stack (netavark,
# aardvark-dns) and the firewall tool netavark calls (iptables; without it every `podman run` on a network
# fails with "netavark: No such file or directory").
PODMAN_PKGS=(podman mmdebstrap runc uidmap netavark aardvark-dns catatonit iptables)
missing_debs() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

ENGINE=$(pick_engine)
if [ "$ENGINE" = none ]; then
  ENGINE=podman
fi
if [ "$ENGINE" = podman ] && command -v dpkg-query >/dev/null; then
  mapfile -t missing < <(missing_debs "${PODMAN_PKGS[@]}")
  if [ ${#missing[@]} -gt 0 ]; then
    step "apt-get install ${missing[*]}"
    # one apt-get at a time: the test command's other setup steps install packages beside this one
    as_root flock /run/lock/kubetrain-apt.lock apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root flock /run/lock/kubetrain-apt.lock \
      apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi
if [ "$ENGINE" != docker ] && [ -z "${CONTAINERS_CONF:-}" ]; then
  export CONTAINERS_CONF=$PWD/hack/containers.conf
fi
step "engine $ENGINE, version $VERSION, torch $TORCH_VERSION"

image_exists() {
  case $ENGINE in
    buildah) buildah inspect --type image "$1" >/dev/null 2>&1 ;;
    *) "$ENGINE" image inspect "$1" >/dev/null 2>&1 ;;
  esac
}

build() {  # build TAG CONTAINERFILE CONTEXT [build args...]
  local tag=$1 file=$2 context=$3 t
  shift 3
  local args=(-t "$tag" -f "$file")
  for a in "$@"; do args+=(--build-arg "$a"); done
  [ -s "$CA_BUNDLE" ] && args+=(--secret "id=ca,src=$CA_BUNDLE")
  case $ENGINE in
    podman) args=(build --isolation=chroot --format docker --layers "${args[@]}") ;;
    buildah) args=(build --isolation=chroot --format docker --layers "${args[@]}") ;;
    docker) args=(build "${args[@]}"); export DOCKER_BUILDKIT=1 ;;
  esac
  t=$(date +%s)
  step "build $tag"
  "$ENGINE" "${args[@]}" "$context" 2>&1 | sed -u -e '/^Copying \(blob\|config\)/d' -e 's/^/   | /'
  if [ "${PIPESTATUS[0]}" != 0 ]; then
    echo "images: building $tag failed (see above)" >&2
    return 1
  fi
  took "$t"
}

base_image() {
  if [ -n "${KUBETRAIN_BASE_IMAGE:-}" ]; then echo "$KUBETRAIN_BASE_IMAGE"; return; fi
  if image_exists "$PUBLIC_BASE" || timeout 120 "$ENGINE" pull -q "$PUBLIC_BASE" >/dev/null 2>&1; then
    echo "$PUBLIC_BASE"
    return
  fi
  echo "$DEBIAN_BASE"
}

debian_base() {  # a Debian bookworm root filesystem with python3 and venv, imported as an image
  image_exists "$DEBIAN_BASE" && return
  command -v mmdebstrap >/dev/null || {
    as_root flock /run/lock/kubetrain-apt.lock apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root flock /run/lock/kubetrain-apt.lock \
      apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
  }
  local t tmp
  t=$(date +%s)
  tmp=$(mktemp -d)
  step "mmdebstrap bookworm (python3, python3-venv, ca-certificates) -> $DEBIAN_BASE"
  as_root mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates \
    --aptopt='APT::Install-Recommends "false"' bookworm "$tmp/rootfs.tar"
  case $ENGINE in
    buildah) buildah from --name kubetrain-base-import scratch >/dev/null
      buildah add kubetrain-base-import "$tmp/rootfs.tar" / >/dev/null
      buildah config --cmd /bin/bash kubetrain-base-import
      buildah commit -q kubetrain-base-import "$DEBIAN_BASE" >/dev/null
      buildah rm kubetrain-base-import >/dev/null ;;
    *) "$ENGINE" import -q -c 'CMD ["/bin/bash"]' "$tmp/rootfs.tar" "$DEBIAN_BASE" >/dev/null ;;
  esac
  rm -rf "$tmp"
  took "$t"
}

kubetrain_wheel() {  # the project's wheel, which every trainer installs (its example trainers)
  local py=python3
  [ -x .venv/bin/python ] && py=.venv/bin/python
  rm -rf images/.wheels/kubetrain
  mkdir -p images/.wheels/kubetrain
  export SOURCE_DATE_EPOCH=315532800  # a reproducible wheel: same code, same layer cache key
  "$py" -m pip wheel -q --no-deps --no-build-isolation -w images/.wheels/kubetrain . 2>/dev/null \
    || "$py" -m pip wheel -q --no-deps -w images/.wheels/kubetrain .
}

horovod_wheel() {  # the wheel hack/frameworks.sh built against the same torch, copied into the context
  local cache=${XDG_CACHE_HOME:-$HOME/.cache}/kubetrain/wheels found
  found=$(ls -d "$cache"/horovod-"$HOROVOD_VERSION"-cp311-torch-"$TORCH_VERSION"*-"$HOROVOD_BUILD"/horovod-*.whl 2>/dev/null | head -n 1)
  if [ -z "$found" ]; then
    echo "images: no Horovod $HOROVOD_VERSION wheel for torch $TORCH_VERSION in $cache;" \
      "build it with 'bash hack/setup.sh --frameworks' (torch $TORCH_VERSION in .venv), then rerun" >&2
    return 1
  fi
  rm -rf images/.wheels/horovod
  mkdir -p images/.wheels/horovod
  cp "$found" images/.wheels/horovod/
}

wanted=("$@")
[ ${#wanted[@]} -eq 0 ] && wanted=("${ALL[@]}")
[ "${wanted[*]}" = --with-on-demand ] && wanted=("${ALL[@]}" "${ON_DEMAND[@]}")
needs() { local x; for x in "${wanted[@]}"; do [ "$x" = "$1" ] && return 0; done; return 1; }
for w in "${wanted[@]}"; do
  case " ${ALL[*]} ${ON_DEMAND[*]} " in
    *" $w "*) ;;
    *) echo "images: unknown image $w (known: ${ALL[*]} ${ON_DEMAND[*]})" >&2; exit 2 ;;
  esac
done

kubetrain_wheel
base=$(base_image)
[ "$base" = "$DEBIAN_BASE" ] && debian_base
step "base image $base"
build "$PYTHON_IMAGE" images/python/Containerfile images "BASE_IMAGE=$base"
if needs trainer-pytorch || needs trainer-horovod; then
  build "$TORCH_IMAGE" images/torch/Containerfile images "PYTHON_IMAGE=$PYTHON_IMAGE"
fi
for name in trainer-pytorch trainer-tensorflow trainer-jax trainer-mpi trainer-horovod trainer-mpich trainer-intelmpi \
  "${ON_DEMAND[@]}"; do
  needs "$name" || continue
  [ "$name" = trainer-horovod ] && horovod_wheel
  build "$REGISTRY/$name:$VERSION" "images/$name/Containerfile" images \
    "PYTHON_IMAGE=$PYTHON_IMAGE" "TORCH_IMAGE=$TORCH_IMAGE"
done
if needs operator; then
  build "$REGISTRY/kubetrain-operator:$VERSION" Dockerfile . "BASE_IMAGE=$base"
fi
step "sizes"
for name in "${wanted[@]}"; do
  tag=$REGISTRY/$name:$VERSION
  [ "$name" = operator ] && tag=$REGISTRY/kubetrain-operator:$VERSION
  case $ENGINE in
    buildah) size=$(buildah images --format '{{.Size}}' "$tag" 2>/dev/null | head -n 1) ;;
    *) size=$("$ENGINE" image inspect --format '{{.Size}}' "$tag" | numfmt --to=iec) ;;
  esac
  echo "   $tag  $size"
done
echo "images: built ${wanted[*]} in $(($(date +%s) - t_start)) s"
