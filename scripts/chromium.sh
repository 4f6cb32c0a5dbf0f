#!/usr/bin/env bash
# scripts/chromium.sh — a real Chromium for the dashboard's browser tests.
#
#   scripts/chromium.sh build      find Chromium, or install Debian's chromium
#                                  package when it is missing, and print the
#                                  browser's path
#
# The tests (internal/server/ui_browser_test.go) drive it headless through
# the DevTools protocol. Set ARBITER_CHROMIUM to use another binary.
# Installing needs apt-get and root (or sudo); concurrent callers wait on one
# lock.
set -euo pipefail

die() { echo "chromium.sh: $*" >&2; exit 1; }

find_chromium() {
	if [[ -n "${ARBITER_CHROMIUM:-}" ]]; then
		[[ -x "$ARBITER_CHROMIUM" ]] || die "ARBITER_CHROMIUM=$ARBITER_CHROMIUM is not an executable"
		echo "$ARBITER_CHROMIUM"
		return 0
	fi
	local c
	for c in chromium chromium-browser google-chrome-stable google-chrome; do
		if command -v "$c" >/dev/null 2>&1; then
			command -v "$c"
			return 0
		fi
	done
	return 1
}

install_chromium() {
	command -v apt-get >/dev/null 2>&1 || die "no Chromium and no apt-get to install it: install Chromium and set ARBITER_CHROMIUM"
	local sudo=""
	if [[ "$(id -u)" != 0 ]]; then
		command -v sudo >/dev/null 2>&1 || die "installing Chromium needs root or sudo"
		sudo="sudo"
	fi
	echo "chromium.sh: installing Debian's chromium package" >&2
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >&2
}

case "${1:-}" in
build)
	cache="${ARBITER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/arbiter}"
	mkdir -p "$cache"
	exec 9>"$cache/chromium.lock"
	flock 9
	if ! find_chromium; then
		install_chromium
		find_chromium || die "Chromium is still missing after installing it"
	fi
	;;
*)
	echo "usage: scripts/chromium.sh build" >&2
	exit 2
	;;
esac
