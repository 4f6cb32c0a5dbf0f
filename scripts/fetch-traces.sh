#!/usr/bin/env bash
# scripts/fetch-traces.sh — the public traces that `arbiter bench openb`, the
# openb scenario (examples/scenarios/openb.yaml) and the tests read.
#
#   scripts/fetch-traces.sh DIR          download into DIR each file of
#                                        scripts/traces.sha256 that DIR lacks,
#                                        then check the sha256 of every file
#   scripts/fetch-traces.sh --check DIR  only check the files DIR holds (no
#                                        network); name the ones it lacks
#
# DIR gets the layout the commands expect:
#   DIR/alibaba-gpu-v2023/       openb node and pod lists: the folder to give
#                                `bench openb --trace-dir` and `sim --trace-dir`
#   DIR/fgd-expected-results/    the FGD paper's published results, which
#                                `bench openb` finds beside the trace folder
#   DIR/azure-llm-inference-2023/ the Azure LLM code trace (the simulator
#                                embeds a copy; the tests compare with it)
# The tests read ../shared/traces beside the checkout, so
# `scripts/fetch-traces.sh ../shared/traces` gives them what they need.
#
# Files come from their public repositories at pinned commits (sources and
# licences: NOTICE). A file already in DIR is checked, never downloaded again;
# a file that fails its check is left in place and reported. Offline, copy the
# files by hand (docs/operations.md, "Trace data") and run --check.
# ARBITER_TRACES_MIRROR=URL downloads URL/PATH instead, from a copy laid out
# like DIR (http://, https:// or file://). Needs bash, coreutils, awk and curl
# or wget.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sums="$root/scripts/traces.sha256"

die() { echo "fetch-traces.sh: $*" >&2; exit 1; }

# The upstream of each folder of DIR.
alibaba=https://raw.githubusercontent.com/alibaba/clusterdata/7a6c496e4f4b6ce6150be8f881cb051bf2abff42/cluster-trace-gpu-v2023/csv
azure=https://raw.githubusercontent.com/Azure/AzurePublicDataset/b469a113cedca53ddc3bdea71a143dc4b7d8700c/data
fgd=https://raw.githubusercontent.com/hkust-adsl/kubernetes-scheduler-simulator/8f3d6417353c5083c6d56617f255fadd8dc306bc/experiments/analysis/expected_results

# The published results cover 17 workloads; the copy the tests were written
# against keeps the rows of these 10 (header and row order unchanged).
fgd_workloads="cpu050 cpu100 cpu200 cpu250 default gpushare100 gpushare40 gpushare80 gpuspec10 multigpu20"

# url PATH prints where PATH (relative to DIR) is downloaded from.
url() {
	if [[ -n "${ARBITER_TRACES_MIRROR:-}" ]]; then
		echo "${ARBITER_TRACES_MIRROR%/}/$1"
		return
	fi
	case "$1" in
	alibaba-gpu-v2023/*) echo "$alibaba/${1#*/}" ;;
	azure-llm-inference-2023/*) echo "$azure/${1#*/}" ;;
	fgd-expected-results/*) echo "$fgd/${1#*/}" ;;
	*) die "no source for $1 (add one to scripts/fetch-traces.sh)" ;;
	esac
}

# download URL FILE writes URL to FILE, or fails saying what to do.
download() {
	local err
	if command -v curl >/dev/null; then
		err="$(curl -fsSL --connect-timeout 10 --retry 2 -o "$2" "$1" 2>&1)" && return 0
		err="${err##*$'\n'}" # each retry repeats the error
	elif command -v wget >/dev/null; then
		err="$(wget -q -T 10 -t 3 -O "$2" "$1" 2>&1)" && return 0
		err="${err:-wget failed}"
	else
		err="neither curl nor wget is installed"
	fi
	rm -f "$2"
	die "cannot download $1: ${err//$'\n'/ }; $help"
}

# fetch PATH TMP downloads PATH into TMP, cut to the copy the sums describe.
fetch() {
	local u
	u="$(url "$1")"
	echo "fetch-traces.sh: downloading $u" >&2
	download "$u" "$2"
	if [[ "$1" == fgd-expected-results/* && -z "${ARBITER_TRACES_MIRROR:-}" ]]; then
		awk -F, -v keep="$fgd_workloads" '
			BEGIN { n = split(keep, w, " "); for (i = 1; i <= n; i++) k["openb_pod_list_" w[i]] = 1 }
			NR == 1 || ($1 in k)' "$2" >"$2.cut"
		mv -f "$2.cut" "$2"
	fi
}

main() {
	local check=0 dir sum path got bad=0 n=0 missing=()
	if [[ "${1:-}" == --check ]]; then
		check=1
		shift
	fi
	[[ $# -eq 1 && -n "$1" ]] || die "usage: fetch-traces.sh [--check] DIR"
	dir="$1"
	help="copy the traces into $dir by hand, see docs/operations.md (\"Trace data\")"
	[[ -r "$sums" ]] || die "cannot read $sums"
	# Check what DIR holds first, so that a bad file is reported even offline.
	declare -A want
	while read -r sum path; do
		[[ -n "$path" ]] || continue
		n=$((n + 1))
		want[$path]="$sum"
		if [[ ! -e "$dir/$path" ]]; then
			missing+=("$path")
			continue
		fi
		got="$(sha256sum "$dir/$path" | cut -d' ' -f1)"
		if [[ "$got" != "$sum" ]]; then
			echo "fetch-traces.sh: $dir/$path: sha256 $got, want $sum (corrupted or another version: delete it and run again)" >&2
			bad=$((bad + 1))
		fi
	done <"$sums"
	((bad == 0)) || die "$bad of $n files in $dir failed their sha256 check"
	if ((check && ${#missing[@]} > 0)); then
		printf 'fetch-traces.sh: %s: missing\n' "${missing[@]/#/$dir/}" >&2
		die "$dir lacks ${#missing[@]} of $n files: run scripts/fetch-traces.sh $dir to download them, or $help"
	fi
	for path in "${missing[@]}"; do
		mkdir -p "$(dirname "$dir/$path")"
		fetch "$path" "$dir/$path.part"
		got="$(sha256sum "$dir/$path.part" | cut -d' ' -f1)"
		[[ "$got" == "${want[$path]}" ]] ||
			die "$(url "$path"): sha256 $got, want ${want[$path]} (kept as $dir/$path.part)"
		mv -f "$dir/$path.part" "$dir/$path"
	done
	echo "fetch-traces.sh: $n files in $dir, every sha256 as in scripts/traces.sha256"
}

main "$@"
