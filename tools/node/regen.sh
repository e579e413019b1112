#!/usr/bin/env bash
# Rewrites the node's wrapper modules from the versions files: tools/node/k8s (kubelet, kube-proxy) starts
# from the control plane's k8s wrapper, so both resolve the same staging modules; tools/node/coredns holds
# our own main.go (six plugins) and requires the pinned CoreDNS.
#
# Usage: bash tools/node/regen.sh   (needs the Go module proxy)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=/dev/null
. "$here/versions.env"
# shellcheck source=/dev/null
. "$here/../testbin/versions.env"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod

cd "$here/k8s"
cp ../../testbin/k8s/go.mod ../../testbin/k8s/go.sum .
go mod edit -module=example.invalid/kubetrain/node/k8s
for t in kube-apiserver kube-controller-manager kube-scheduler kubectl; do go mod edit -droptool="k8s.io/kubernetes/cmd/$t"; done
go get -tool "k8s.io/kubernetes/cmd/kubelet@$K8S" "k8s.io/kubernetes/cmd/kube-proxy@$K8S"
go mod tidy

cd "$here/coredns"
rm -f go.mod go.sum
go mod init example.invalid/kubetrain/node/coredns 2>/dev/null
go get "github.com/coredns/coredns@$COREDNS"
go mod tidy
go mod edit -go="$(go list -m -f '{{.GoVersion}}' "github.com/coredns/coredns")"
echo "regen: node wrappers at k8s $K8S, coredns $COREDNS"
