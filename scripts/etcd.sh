#!/usr/bin/env bash
# scripts/etcd.sh — a real etcd for tests and CI, built from its Go module.
#
#   scripts/etcd.sh build          build the etcd server of tools/etcd once into
#                                  the cache and print the binary's path
#   scripts/etcd.sh cluster DIR [N] start an N-member (default 3) cluster on
#                                  loopback in DIR, wait until it is healthy and
#                                  print its client endpoints, comma-separated
#   scripts/etcd.sh stop DIR       stop the cluster started in DIR
#
# The cache is ${ARBITER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/arbiter}/etcd-<version>/etcd,
# where <version> is the go.etcd.io/etcd/server/v3 version in tools/etcd/go.mod.
# A stamp beside the binary (a hash of tools/etcd's sources and the Go version)
# makes any change there rebuild; concurrent callers wait on one lock and one build.
# Only Go and bash (with coreutils and util-linux's flock) are needed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/tools/etcd"

die() { echo "etcd.sh: $*" >&2; exit 1; }
# shellcheck source=lib/cached-build.sh
. "$root/scripts/lib/cached-build.sh"

# etcd_version prints the etcd server version pinned in tools/etcd/go.mod.
etcd_version() {
	local v
	v="$(required_version go.etcd.io/etcd/server/v3 "$src/go.mod")"
	[[ -n "$v" ]] || die "no go.etcd.io/etcd/server/v3 requirement in $src/go.mod"
	echo "$v"
}

# stamp prints a hash of everything the binary is built from.
stamp() {
	{ cat "$src/go.mod" "$src/go.sum" "$src"/*.go; go version; } | sha256sum | cut -d' ' -f1
}

build_etcd() {
	(cd "$src" && GOWORK=off CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -buildvcs=false" go build -trimpath -o "$1" .)
}

cmd_build() {
	cached_build etcd "$(etcd_version)" "$(stamp)" build_etcd
}

# listening_ports prints the local TCP ports something listens on, in decimal.
listening_ports() {
	cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
		awk '$4 == "0A" { split($2, a, ":"); print a[2] }' |
		while read -r hex; do echo $((16#$hex)); done
}

# free_ports N prints N distinct ports that nothing listens on, picked at random
# below the kernel's ephemeral range so outgoing connections do not take them.
free_ports() {
	local n="$1" used p picked=()
	used=" $(listening_ports | tr '\n' ' ') "
	while ((${#picked[@]} < n)); do
		p=$((20000 + RANDOM % 12000))
		[[ "$used" == *" $p "* || " ${picked[*]} " == *" $p "* ]] && continue
		picked+=("$p")
	done
	echo "${picked[@]}"
}

# healthy PORT answers whether the member on PORT says /health is true.
healthy() {
	local body
	body="$(timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$1"'
		printf "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" >&3
		cat <&3' 2>/dev/null)" || return 1
	[[ "$body" == *'"health":"true"'* ]]
}

# start_members DIR N BIN tries once to start N members on fresh ports; it
# prints the endpoints and returns 0 when all are healthy within 30 s.
start_members() {
	local dir="$1" n="$2" bin="$3" ports i cluster="" token
	read -r -a ports <<<"$(free_ports $((2 * n)))"
	token="arbiter-test-$$-$RANDOM"
	for ((i = 0; i < n; i++)); do
		cluster+="${cluster:+,}m$i=http://127.0.0.1:${ports[2 * i + 1]}"
	done
	for ((i = 0; i < n; i++)); do
		local cport="${ports[2 * i]}" pport="${ports[2 * i + 1]}"
		echo "$cport" >"$dir/member-$i.port"
		setsid "$bin" --name "m$i" --data-dir "$dir/member-$i" \
			--listen-client-urls "http://127.0.0.1:$cport" --advertise-client-urls "http://127.0.0.1:$cport" \
			--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
			--initial-cluster "$cluster" --initial-cluster-token "$token" --initial-cluster-state new \
			--max-txn-ops 10000 --max-request-bytes 10485760 --quota-backend-bytes 4294967296 \
			--heartbeat-interval 50 --election-timeout 500 --log-level warn \
			>"$dir/member-$i.log" 2>&1 </dev/null &
		echo $! >"$dir/member-$i.pid"
	done
	local deadline=$((SECONDS + 30)) ok
	while ((SECONDS < deadline)); do
		ok=0
		for ((i = 0; i < n; i++)); do
			alive "$(cat "$dir/member-$i.pid")" || return 1
			healthy "${ports[2 * i]}" && ok=$((ok + 1))
		done
		if ((ok == n)); then
			local eps=""
			for ((i = 0; i < n; i++)); do eps+="${eps:+,}http://127.0.0.1:${ports[2 * i]}"; done
			echo "$eps" >"$dir/endpoints"
			echo "$eps"
			return 0
		fi
		sleep 0.2
	done
	return 1
}

cmd_cluster() {
	local dir="${1:-}" n="${2:-3}" bin attempt
	[[ -n "$dir" ]] || die "usage: etcd.sh cluster DIR [N]"
	[[ "$n" =~ ^[1-9][0-9]?$ ]] || die "N must be a member count from 1 to 99, got '$n'"
	bin="$(cmd_build)"
	mkdir -p "$dir"
	dir="$(cd "$dir" && pwd)"
	# A member's data dir records its cluster's peer URLs; a new cluster needs new dirs.
	[[ -e "$dir/member-0.pid" ]] && die "$dir already holds a running cluster (scripts/etcd.sh stop $dir first)"
	[[ -e "$dir/member-0" ]] && die "$dir already holds a cluster's data; give an empty DIR"
	# A port picked here can be taken before etcd binds it; try fresh ports then.
	for attempt in 1 2 3; do
		if start_members "$dir" "$n" "$bin"; then
			return 0
		fi
		echo "etcd.sh: cluster in $dir did not become healthy (attempt $attempt); logs:" >&2
		tail -n 5 "$dir"/member-*.log >&2 || true
		cmd_stop "$dir"
		rm -rf "$dir"/member-*
	done
	die "could not start a healthy $n-member cluster in $dir"
}

# alive PID answers whether PID is a running process (not a zombie that its
# new parent has yet to reap).
alive() {
	local stat
	stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
	stat="${stat##*) }"
	[[ "${stat:0:1}" != Z ]]
}

cmd_stop() {
	local dir="${1:-}" pidf pid
	[[ -n "$dir" ]] || die "usage: etcd.sh stop DIR"
	for pidf in "$dir"/member-*.pid; do
		[[ -e "$pidf" ]] || continue
		pid="$(cat "$pidf")"
		kill -CONT "$pid" 2>/dev/null || true
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pidf in "$dir"/member-*.pid; do
		[[ -e "$pidf" ]] || continue
		pid="$(cat "$pidf")"
		# etcd's graceful stop waits seconds for peers that are stopping too;
		# its WAL is synced, so a test cluster loses nothing to SIGKILL after 2 s.
		local deadline=$((SECONDS + 2))
		while alive "$pid" && ((SECONDS <= deadline)); do sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
		rm -f "$pidf"
	done
}

case "${1:-}" in
build) cmd_build ;;
cluster) shift; cmd_cluster "$@" ;;
stop) shift; cmd_stop "$@" ;;
*) die "usage: etcd.sh build | cluster DIR [N] | stop DIR" ;;
esac
