#!/bin/sh
# The Arrow writer's edge cases (tests/arrow/edges.c: no cells, one cell,
# batches cut at their row and byte bounds, nulls in every kind of column,
# the 32-bit offsets' limit), each file read by two independent readers
# from npm, apache-arrow and nodejs-polars (pinned; tests/arrow/clients.sh
# installs them into the build tree once), every value compared.
set -u
skip() {
	if [ "${TILEFS_CI:-0}" = 1 ]; then echo "FAIL (CI must run this): $*"; exit 1; fi
	echo "SKIP: $*"; exit 77
}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/arrow/clients.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$(dirname "$TILETOOL")/../tests/arrow/edges" "$tmp" > /dev/null || { echo "FAIL: tests/arrow/edges"; exit 1; }
timeout 300 python3 "$here/arrow/compare.py" edges node "$here/arrow/read.mjs" "$tmp"
