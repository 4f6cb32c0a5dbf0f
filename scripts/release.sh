#!/usr/bin/env bash
# scripts/release.sh — the release archives of arbiter.
#
#   scripts/release.sh [OUT]   build OUT/arbiter-VERSION-OS-ARCH.tar.gz (default
#                              OUT: dist) for each target, and OUT/SHA256SUMS
#
# Each archive holds the directory arbiter-VERSION-OS-ARCH/ with
#   arbiter              static (CGO_ENABLED=0): server, CLI, simulator, and
#                        the agent with --gpus fake:...
#   arbiter-nvml         with NVML=1 only: the same with -tags nvml and cgo, for
#                        agents that read their GPUs (--gpus auto); it links
#                        glibc dynamically and loads libnvidia-ml.so at run time
#   LICENSE, NOTICE, systemd/  the licence, the notices and deploy/systemd's units
#
# Environment:
#   VERSION   the version (default: git describe --tags --always --dirty)
#   TARGETS   OS/ARCH pairs (default: "linux/amd64 linux/arm64")
#   NVML=1    also build arbiter-nvml; a target other than this machine's
#             needs its C cross compiler in CC_OS_ARCH, e.g.
#             CC_linux_arm64=aarch64-linux-gnu-gcc
# Version and commit go into the binary (`arbiter version` prints them).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-dist}"
pkg=github.com/arbiterhq/arbiter/internal/cli

die() { echo "release.sh: $*" >&2; exit 1; }

command -v go >/dev/null || die "go is not installed"
cd "$root"
version="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
commit="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
if [[ "$commit" != unknown && -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
	commit+=-dirty
fi
[[ "$version" =~ ^[A-Za-z0-9._+-]+$ ]] || die "VERSION '$version' has characters a file name should not"
# The archives' file times are the commit's, so that a rebuild is the same.
mtime="$(git log -1 --format=%ct 2>/dev/null || date +%s)"
ldflags="-s -w -X $pkg.Version=$version -X $pkg.Commit=$commit"
host="$(go env GOHOSTOS)/$(go env GOHOSTARCH)"

targets="${TARGETS:-linux/amd64 linux/arm64}"

# cc OS ARCH prints the C compiler for a cgo build of OS/ARCH.
cc() {
	local var="CC_$1_$2"
	if [[ -n "${!var:-}" ]]; then
		echo "${!var}"
	elif [[ "$1/$2" == "$host" ]]; then
		go env CC
	else
		die "NVML=1 for $1/$2 needs its C compiler in $var (e.g. $var=aarch64-linux-gnu-gcc)"
	fi
}

# build OS ARCH CGO FILE [TAGS] builds one binary.
build() {
	local cc="" cflags="${CGO_CFLAGS:--O2 -g}"
	# go-nvml's header marks functions deprecated that its bindings still wrap.
	[[ "$3" == 0 ]] || cc="$(cc "$1" "$2")" cflags+=" -Wno-deprecated-declarations"
	echo "release.sh: building $4 ($1/$2, version $version, commit $commit)" >&2
	CC="$cc" CGO_CFLAGS="$cflags" GOOS="$1" GOARCH="$2" CGO_ENABLED="$3" \
		go build -trimpath -buildvcs=false -tags "${5:-}" -ldflags "$ldflags" -o "$4" ./cmd/arbiter ||
		die "building $4 failed"
}

# Every target is checked before the first build.
for target in $targets; do
	[[ "$target" =~ ^[a-z0-9]+/[a-z0-9]+$ ]] || die "target '$target' is not OS/ARCH"
	[[ "${NVML:-0}" != 1 ]] || cc "${target%/*}" "${target#*/}" >/dev/null
done

mkdir -p "$out"
out="$(cd "$out" && pwd)"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
archives=()
for target in $targets; do
	os="${target%/*}" arch="${target#*/}"
	name="arbiter-$version-$os-$arch"
	dir="$stage/$name"
	mkdir -p "$dir/systemd"
	build "$os" "$arch" 0 "$dir/arbiter"
	if [[ "${NVML:-0}" == 1 ]]; then
		build "$os" "$arch" 1 "$dir/arbiter-nvml" nvml
	fi
	cp LICENSE NOTICE "$dir/"
	cp deploy/systemd/*.service "$dir/systemd/"
	tar -C "$stage" --owner=0 --group=0 --sort=name --mtime="@$mtime" -czf "$out/$name.tar.gz" "$name"
	archives+=("$name.tar.gz")
done
(cd "$out" && sha256sum "${archives[@]}" >SHA256SUMS)
printf 'release.sh: %s\n' "${archives[@]/#/$out/}" "$out/SHA256SUMS"
