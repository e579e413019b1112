#!/usr/bin/env bash
# Builds the Go peers that bench/operator_scale.py --peer measures beside kubetrain (Kubeflow's
# training-operator and mpi-operator; hack/test.sh builds the training-operator alone, which the migration
# tests run: tests/ecosystem/test_migration.py), listed in tools/peers/peers.txt, from their pinned Go modules, one
# cache directory per module version, with hack/ecosystem.sh's method (see there).
#
# Layout: ${KUBETRAIN_PEERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubetrain/peers}/<name>-<version>/
#   bin/<name>   the binary          src/   the module tree          stamp   written last, when built
# (bench/opbench/peers.py computes the same paths). A cached peer costs nothing. Set GOFLAGS=-p=1 (and run
# it under nice) on a small machine: a cold build compiles a few hundred packages.
#
# Usage: bash hack/peers.sh [NAME...]   build what is missing (all peers, or the named ones)
#        bash hack/peers.sh --download [NAME...]   only download their modules (see hack/ecosystem.sh)
#        bash hack/peers.sh --print-dir print the cache root and exit
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export KUBETRAIN_GOBUILD_LIST="$root/tools/peers/peers.txt" KUBETRAIN_GOBUILD_LABEL=peers
export KUBETRAIN_GOBUILD_DIR="${KUBETRAIN_PEERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubetrain/peers}"
exec bash "$root/hack/ecosystem.sh" "$@"
