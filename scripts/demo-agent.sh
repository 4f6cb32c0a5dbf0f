#!/usr/bin/env bash
# scripts/demo-agent.sh — the node agent demo in one terminal: a server, an
# agent with 8 fake A100s and a 4-GPU job, whose replica's output it prints.
#
#   scripts/demo-agent.sh        build arbiter, run the demo, clean up
#   ARBITER=PATH scripts/demo-agent.sh   use that binary instead of building one
#   KEEP=1 scripts/demo-agent.sh         keep the demo running until Ctrl-C
#
# Everything (the server's data and admin token, the agent's token, logs and
# the replica's working directory) lives in a temporary directory, removed on
# exit with the server and the agent. The same steps by hand, in three
# terminals, are in the README ("Node agent").
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

die() { echo "demo-agent.sh: $*" >&2; exit 1; }
say() { echo "demo-agent.sh: $*" >&2; }

tmp="$(mktemp -d)"
# An agent running as root runs the replica as nobody, who must reach its
# working directory under here.
chmod 755 "$tmp"
pids=()
cleanup() {
	local pid
	# The agent first (it stops its replicas), then the server.
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		pid="${pids[i]}"
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

arbiter="${ARBITER:-}"
if [[ -z "$arbiter" ]]; then
	say "building arbiter"
	go build -o "$tmp/arbiter" ./cmd/arbiter
	arbiter="$tmp/arbiter"
fi

# logs NAME prints a process's log after a failure.
logs() { echo "--- $1 log:" >&2; tail -n 20 "$tmp/$1.log" >&2 || true; }

# 1. The server, on a free port of 127.0.0.1.
"$arbiter" serve --data "$tmp/server" --listen 127.0.0.1:0 --addr-file "$tmp/addr" \
	--config examples/agent/config.yaml >"$tmp/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
	[[ -s "$tmp/addr" ]] && break
	kill -0 "${pids[0]}" 2>/dev/null || { logs server; die "the server stopped"; }
	sleep 0.1
done
[[ -s "$tmp/addr" ]] || { logs server; die "the server did not start listening in 10 s"; }
export ARBITER_SERVER="http://$(cat "$tmp/addr")"
# Tokens come from files, never argv (ps shows argv).
export ARBITER_TOKEN_FILE="$tmp/server/admin.token"
say "server at $ARBITER_SERVER (data in $tmp/server)"

# 2. The agent, with its own token: it may act for node demo1 only.
(umask 077 && "$arbiter" node token create demo1 | awk 'NR == 2 { print $NF }' >"$tmp/demo1.token")
[[ -s "$tmp/demo1.token" ]] || die "no node token"
runas=()
((EUID != 0)) || runas=(--run-as nobody)
"$arbiter" agent --gpus fake:8xA100-80G --node demo1 --token-file "$tmp/demo1.token" \
	--data "$tmp/agent" "${runas[@]}" >"$tmp/agent.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
	"$arbiter" node list | grep -q '^demo1 ' && break
	kill -0 "${pids[1]}" 2>/dev/null || { logs agent; die "the agent stopped"; }
	sleep 0.1
done
"$arbiter" node list | grep -q '^demo1 ' || { logs agent; die "the agent did not register in 10 s"; }
say "agent demo1 with 8 fake A100-80G (data in $tmp/agent)"

# 3. The job: 4 GPUs of the node, one replica printing what it was given.
"$arbiter" workload submit -f examples/agent/job.yaml --tenant demo
state=""
for _ in $(seq 300); do
	state="$("$arbiter" workload show hello-gpus --tenant demo -o json | awk -F'"' '$2 == "state" { print $4; exit }')"
	[[ "$state" == Succeeded || "$state" == Failed ]] && break
	kill -0 "${pids[1]}" 2>/dev/null || { logs agent; die "the agent stopped"; }
	sleep 0.2
done
say "hello-gpus: ${state:-unknown}"
"$arbiter" workload logs hello-gpus --tenant demo
[[ "$state" == Succeeded ]] || { logs agent; die "hello-gpus did not succeed in 60 s"; }

if [[ "${KEEP:-0}" == 1 ]]; then
	say "still running; in another terminal:"
	say "  export ARBITER_SERVER=$ARBITER_SERVER ARBITER_TOKEN_FILE=$ARBITER_TOKEN_FILE"
	say "  $arbiter workload list --tenant demo"
	say "Ctrl-C stops the agent and the server and removes $tmp"
	wait
fi
