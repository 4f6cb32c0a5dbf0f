#!/usr/bin/env bash
# scripts/promtool.sh — Prometheus' promtool for tests and CI, built from its Go module.
#
#   scripts/promtool.sh build      build promtool (the tool of tools/promtool/go.mod)
#                                  once into the cache and print the binary's path
#   scripts/promtool.sh check      check deploy/prometheus/rules.yaml and run its
#                                  unit tests (deploy/prometheus/rules_test.yaml)
#
# The cache is ${ARBITER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/arbiter}/promtool-<version>/promtool,
# where <version> is the github.com/prometheus/prometheus version in tools/promtool/go.mod.
# It is built with -tags remove_all_sd (no cloud service discoveries: rules need
# none), which keeps the build to a few CPU-minutes. A stamp beside the binary
# (a hash of tools/promtool's go.mod and go.sum, the tags and the Go version)
# makes any change there rebuild; concurrent callers wait on one lock and one
# build. Only Go and bash (with coreutils and util-linux's flock) are needed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/tools/promtool"
tags=remove_all_sd

die() { echo "promtool.sh: $*" >&2; exit 1; }
# shellcheck source=lib/cached-build.sh
. "$root/scripts/lib/cached-build.sh"

# prom_version prints the Prometheus module version pinned in tools/promtool/go.mod.
prom_version() {
	local v
	v="$(required_version github.com/prometheus/prometheus "$src/go.mod")"
	[[ -n "$v" ]] || die "no github.com/prometheus/prometheus requirement in $src/go.mod"
	echo "$v"
}

# stamp prints a hash of everything the binary is built from.
stamp() {
	{ cat "$src/go.mod" "$src/go.sum"; echo "$tags"; go version; } | sha256sum | cut -d' ' -f1
}

build_promtool() {
	(cd "$src" && GOWORK=off CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -buildvcs=false" \
		go build -trimpath -tags "$tags" -o "$1" github.com/prometheus/prometheus/cmd/promtool)
}

cmd_build() {
	cached_build promtool "$(prom_version)" "$(stamp)" build_promtool
}

cmd_check() {
	local bin
	bin="$(cmd_build)"
	"$bin" check rules "$root/deploy/prometheus/rules.yaml"
	(cd "$root/deploy/prometheus" && "$bin" test rules rules_test.yaml)
}

case "${1:-}" in
build) cmd_build ;;
check) cmd_check ;;
*) die "usage: scripts/promtool.sh build|check" ;;
esac
