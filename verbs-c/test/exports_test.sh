#!/bin/sh
# Every function an installed rdma-core library exports (with its symbol version) is defined by both of
# the library's builds, so no call falls through to the real library under LD_PRELOAD, and a program
# linked against any version node loads under LD_LIBRARY_PATH. Run by `make test`.
#   test/exports_test.sh VERSION_PREFIX REAL [NOT_YET] -- OURS...
# NOT_YET lists "VERSION name" lines the builds do not define yet: each must still be missing (the list
# shrinks as they come), and nothing else may be.
set -eu
prefix=$1
real=$2
shift 2
not_yet=/dev/null
if [ "$1" != "--" ]; then
	not_yet=$1
	shift
fi
shift # --
exports() {
	# "VERSION name" for each defined, versioned function (hidden versions, in parentheses, included)
	objdump -T "$1" | grep -v '\*UND\*' | grep -E "${prefix}_[0-9]+\.[0-9]+" |
		awk '{v=$(NF-1); gsub(/[()]/,"",v); if ($NF != v) print v" "$NF}' | sort -u
}
want=$(mktemp)
have=$(mktemp)
later=$(mktemp)
trap 'rm -f "$want" "$have" "$later"' EXIT
exports "$real" > "$want"
sort -u "$not_yet" > "$later"
[ -s "$want" ] || { echo "exports_test: found no versioned export in $real" >&2; exit 1; }
status=0
for ours in "$@"; do
	exports "$ours" > "$have"
	missing=$(comm -23 "$want" "$have" | comm -23 - "$later")
	arrived=$(comm -12 "$later" "$have")
	if [ -n "$missing" ]; then
		echo "exports_test: $ours lacks $(echo "$missing" | wc -l) of $(wc -l < "$want") exports of $real:" >&2
		echo "$missing" | sed 's/^/  /' >&2
		status=1
	fi
	if [ -n "$arrived" ]; then
		echo "exports_test: $ours now defines what $not_yet says it does not (take it off the list):" >&2
		echo "$arrived" | sed 's/^/  /' >&2
		status=1
	fi
	if [ -z "$missing" ] && [ -z "$arrived" ]; then
		echo "ok exports: $ours defines $(($(wc -l < "$want") - $(wc -l < "$later"))) of the $(wc -l < "$want") versioned exports of $real$( [ -s "$later" ] && echo " (not yet: $(wc -l < "$later"), listed in $not_yet)")"
	fi
done
exit $status
