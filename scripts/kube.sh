#!/usr/bin/env bash
# scripts/kube.sh — a real kube-apiserver for tests and CI, built from its Go module.
#
#   scripts/kube.sh build          build the kube-apiserver of tools/kube-apiserver
#                                  once into the cache and print the binary's path
#
# The cache is ${ARBITER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/arbiter}/kube-apiserver-<version>/kube-apiserver,
# where <version> is the k8s.io/kubernetes version in tools/kube-apiserver/go.mod.
# A stamp beside the binary (a hash of tools/kube-apiserver's sources and the Go
# version) makes any change there rebuild; concurrent callers wait on one lock
# and one build. Only Go and bash (with coreutils and util-linux's flock) are
# needed. internal/kubetest starts the server, over an etcd of scripts/etcd.sh.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/tools/kube-apiserver"

die() { echo "kube.sh: $*" >&2; exit 1; }
# shellcheck source=lib/cached-build.sh
. "$root/scripts/lib/cached-build.sh"

# kube_version prints the Kubernetes version pinned in tools/kube-apiserver/go.mod.
kube_version() {
	local v
	v="$(required_version k8s.io/kubernetes "$src/go.mod")"
	[[ -n "$v" ]] || die "no k8s.io/kubernetes requirement in $src/go.mod"
	echo "$v"
}

# ldflags prints the linker flags that stamp the version into the binary, as
# the Kubernetes release build does (without them /version says v0.0.0-master).
ldflags() {
	local v="${1#v}" pkg=k8s.io/component-base/version
	local major="${v%%.*}" rest="${v#*.}"
	echo "-X $pkg.gitVersion=$1 -X $pkg.gitMajor=$major -X $pkg.gitMinor=${rest%%.*} -X $pkg.gitTreeState=clean"
}

# stamp prints a hash of everything the binary is built from.
stamp() {
	{ cat "$src/go.mod" "$src/go.sum" "$src"/*.go; go version; ldflags "$(kube_version)"; } | sha256sum | cut -d' ' -f1
}

build_kube_apiserver() {
	local version
	version="$(kube_version)"
	(cd "$src" && GOWORK=off CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -buildvcs=false" \
		go build -trimpath -ldflags "$(ldflags "$version")" -o "$1" .)
}

cmd_build() {
	cached_build kube-apiserver "$(kube_version)" "$(stamp)" build_kube_apiserver
}

case "${1:-}" in
build) cmd_build ;;
*) die "usage: kube.sh build" ;;
esac
