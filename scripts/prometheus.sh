#!/usr/bin/env bash
# scripts/prometheus.sh — a real Prometheus server for tests and CI, built from its Go module.
#
#   scripts/prometheus.sh build    build the Prometheus server (the tool of
#                                  tools/prometheus/go.mod, at the version
#                                  tools/promtool/go.mod pins) once into the
#                                  cache and print the binary's path
#   scripts/prometheus.sh start DIR TARGET [FLAG...]
#                                  start it on loopback in DIR, scraping TARGET
#                                  (host:port, path /metrics) every second, wait
#                                  until its HTTP API answers and print its URL;
#                                  FLAGs go to prometheus (e.g. --query.lookback-delta=1h)
#   scripts/prometheus.sh stop DIR stop the server started in DIR
#
# The cache is ${ARBITER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/arbiter}/prometheus-<version>/prometheus.
# It is built with -tags remove_all_sd (no cloud service discoveries: the tests
# scrape a static target) and without the web UI's assets (the tests use the
# HTTP API only). A stamp beside the binary (a hash of tools/prometheus's go.mod
# and go.sum, the tags and the Go version) makes any change there rebuild;
# concurrent callers wait on one lock and one build. Only Go and bash (with
# coreutils and util-linux's flock) are needed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/tools/prometheus"
tags=remove_all_sd

die() { echo "prometheus.sh: $*" >&2; exit 1; }
# shellcheck source=lib/cached-build.sh
. "$root/scripts/lib/cached-build.sh"

# prom_version prints the pinned version; tools/prometheus must agree with
# tools/promtool, so that the server and promtool are one Prometheus.
prom_version() {
	local v w
	v="$(required_version github.com/prometheus/prometheus "$root/tools/promtool/go.mod")"
	w="$(required_version github.com/prometheus/prometheus "$src/go.mod")"
	[[ -n "$v" ]] || die "no github.com/prometheus/prometheus requirement in tools/promtool/go.mod"
	[[ "$v" == "$w" ]] || die "tools/prometheus/go.mod requires Prometheus $w but tools/promtool/go.mod pins $v: make them agree"
	echo "$v"
}

# stamp prints a hash of everything the binary is built from.
stamp() {
	{ cat "$src/go.mod" "$src/go.sum"; echo "$tags"; go version; } | sha256sum | cut -d' ' -f1
}

build_prometheus() {
	(cd "$src" && GOWORK=off CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -buildvcs=false" \
		go build -trimpath -tags "$tags" -o "$1" github.com/prometheus/prometheus/cmd/prometheus)
}

cmd_build() {
	cached_build prometheus "$(prom_version)" "$(stamp)" build_prometheus
}

# free_port prints a port nothing listens on, below the ephemeral range.
free_port() {
	local used p
	used=" $(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '$4 == "0A" { split($2, a, ":"); print a[2] }' |
		while read -r hex; do echo $((16#$hex)); done | tr '\n' ' ') "
	while :; do
		p=$((20000 + RANDOM % 12000))
		[[ "$used" == *" $p "* ]] || break
	done
	echo "$p"
}

# ready PORT answers whether the server on PORT says it is ready.
ready() {
	local body
	body="$(timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$1"'
		printf "GET /-/ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" >&3
		cat <&3' 2>/dev/null)" || return 1
	[[ "$body" == "HTTP/1."?" 200"* ]]
}

alive() {
	local stat
	stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
	stat="${stat##*) }"
	[[ "${stat:0:1}" != Z ]]
}

cmd_start() {
	local dir="${1:-}" target="${2:-}" bin port attempt
	[[ -n "$dir" && -n "$target" ]] || die "usage: prometheus.sh start DIR TARGET [FLAG...]"
	shift 2
	[[ "$target" =~ ^[^[:space:]/]+:[0-9]+$ ]] || die "TARGET must be host:port, got '$target'"
	bin="$(cmd_build)"
	mkdir -p "$dir"
	dir="$(cd "$dir" && pwd)"
	[[ -e "$dir/prometheus.pid" ]] && die "$dir already holds a running server (scripts/prometheus.sh stop $dir first)"
	cat >"$dir/prometheus.yml" <<CONF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: test
    static_configs:
      - targets: ['$target']
CONF
	# A port picked here can be taken before Prometheus binds it; try fresh ports then.
	for attempt in 1 2 3; do
		port="$(free_port)"
		setsid "$bin" --config.file "$dir/prometheus.yml" --storage.tsdb.path "$dir/data" \
			--web.listen-address "127.0.0.1:$port" --log.level warn "$@" \
			>"$dir/prometheus.log" 2>&1 </dev/null &
		echo $! >"$dir/prometheus.pid"
		local deadline=$((SECONDS + 30))
		while ((SECONDS < deadline)) && alive "$(cat "$dir/prometheus.pid")"; do
			if ready "$port"; then
				echo "http://127.0.0.1:$port" | tee "$dir/url"
				return 0
			fi
			sleep 0.2
		done
		echo "prometheus.sh: server in $dir did not become ready (attempt $attempt); log:" >&2
		tail -n 5 "$dir/prometheus.log" >&2 || true
		cmd_stop "$dir"
	done
	die "could not start Prometheus in $dir"
}

cmd_stop() {
	local dir="${1:-}" pid
	[[ -n "$dir" ]] || die "usage: prometheus.sh stop DIR"
	[[ -e "$dir/prometheus.pid" ]] || return 0
	pid="$(cat "$dir/prometheus.pid")"
	kill -TERM "$pid" 2>/dev/null || true
	local deadline=$((SECONDS + 5))
	while alive "$pid" && ((SECONDS <= deadline)); do sleep 0.1; done
	kill -KILL "$pid" 2>/dev/null || true
	rm -f "$dir/prometheus.pid"
}

case "${1:-}" in
build) cmd_build ;;
start) shift; cmd_start "$@" ;;
stop) shift; cmd_stop "$@" ;;
*) die "usage: prometheus.sh build | start DIR TARGET [FLAG...] | stop DIR" ;;
esac
