#!/bin/sh
# Every function the installed libibverbs exports (with its symbol version) is defined by both of the
# library's builds, so no call falls through to the real library under LD_PRELOAD, and a program linked
# against any version node loads under LD_LIBRARY_PATH. Run by `make test`.
#   test/exports_test.sh REAL_LIBIBVERBS OURS...
set -eu
real=$1
shift
exports() {
	# "VERSION name" for each defined, versioned function (hidden versions, in parentheses, included)
	objdump -T "$1" | grep -v '\*UND\*' | grep -E 'IBVERBS_1\.[0-9]+' |
		awk '{v=$(NF-1); gsub(/[()]/,"",v); if ($NF != v) print v" "$NF}' | sort -u
}
want=$(mktemp)
have=$(mktemp)
trap 'rm -f "$want" "$have"' EXIT
exports "$real" > "$want"
[ -s "$want" ] || { echo "exports_test: found no versioned export in $real" >&2; exit 1; }
status=0
for ours in "$@"; do
	exports "$ours" > "$have"
	missing=$(comm -23 "$want" "$have")
	if [ -n "$missing" ]; then
		echo "exports_test: $ours lacks $(echo "$missing" | wc -l) of $(wc -l < "$want") exports of $real:" >&2
		echo "$missing" | sed 's/^/  /' >&2
		status=1
	else
		echo "ok exports: $ours defines all $(wc -l < "$want") versioned exports of $real"
	fi
done
exit $status
