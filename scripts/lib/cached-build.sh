# scripts/lib/cached-build.sh — build a Go tool once into the cache, for the
# scripts that give the tests real servers (etcd.sh, kube.sh, promtool.sh).
# Sourced, not run.
#
#   cached_build NAME VERSION STAMP BUILD
#
# builds NAME (the binary's name) at VERSION into
# ${ARBITER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/arbiter}/NAME-VERSION/NAME
# unless the binary there carries STAMP (a hash of what it is built from),
# and prints its path. BUILD is a function the caller defines, called with
# the output path; it prints its log on stderr. Concurrent callers wait on
# one lock and share one build. The caller defines die.
cached_build() {
	local name="$1" version="$2" want="$3" build="$4"
	command -v go >/dev/null || die "go is not installed (see the README's set-up)"
	local cache dir bin
	cache="${ARBITER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/arbiter}"
	dir="$cache/$name-$version"
	bin="$dir/$name"
	if [[ -x "$bin" && "$(cat "$dir/stamp" 2>/dev/null)" == "$want" ]]; then
		echo "$bin"
		return
	fi
	mkdir -p "$dir"
	exec 9>"$dir/.lock"
	flock 9
	# Another caller may have built it while this one waited for the lock.
	if [[ ! -x "$bin" || "$(cat "$dir/stamp" 2>/dev/null)" != "$want" ]]; then
		echo "building $name $version into $bin (once; takes minutes)" >&2
		local tmp="$dir/$name.tmp.$$" start=$SECONDS
		"$build" "$tmp" >&2 || { rm -f "$tmp"; die "building $name failed"; }
		mv -f "$tmp" "$bin"
		echo "$want" >"$dir/stamp"
		echo "built $name $version in $((SECONDS - start)) s" >&2
	fi
	exec 9>&-
	echo "$bin"
}

# required_version MODULE GOMOD prints the version of MODULE that the
# go.mod file GOMOD requires (in a require block or on one line).
required_version() {
	awk -v m="$1" '$1 == m && $2 ~ /^v/ { print $2 } $1 == "require" && $2 == m { print $3 }' "$2"
}
