#!/bin/sh
# cells.arrow through the mount (issue 23): every corpus array's
# @views/cells.arrow and fragments/F/cells.arrow, read by two independent
# Arrow readers from npm (apache-arrow, nodejs-polars; pinned, installed
# into the build tree by tests/arrow/clients.sh), hold exactly the cells
# TileDB's own read gives (read_back; each fragment's unfiltered tiles),
# nulls included (tests/arrow/check.py).  Then the writer's edge cases
# (tests/arrow/edges: no cells, one, batch boundaries, nulls, the 32-bit
# offsets limit) through both readers.  Runs on the full corpus when it is
# there, else on the subset in tests/data/corpus.
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/arrow/clients.sh"

if [ -n "$TF_CORPUS" ] && [ -d "$TF_CORPUS" ]; then
	data=$TF_CORPUS
else
	data=$here/data/corpus
fi
key=$(corpus_key)
printf '[tilefs]\ndefault_key = oracle\nviews = yes\n[key oracle]\nfile = %s\n' "$key" > "$WORK/t.ini"
mount_fs "$WORK/t.ini" "$data"
timeout 600 python3 "$here/arrow/check.py" node "$here/arrow/read.mjs" "$data" "$MNT" > "$WORK/check.out" 2>&1
rc=$?
grep -v ' ok$' "$WORK/check.out" | tail -n 30
[ "$rc" = 0 ] || fail "cells.arrow differs from TileDB's reads"
ok "$(tail -n 1 "$WORK/check.out")"
umount_fs

# The writer's edge cases, each read by both readers.
[ -x "${ARROWEDGES:-}" ] || ARROWEDGES=$(dirname "$TILETOOL")/../tests/arrow/edges
"$ARROWEDGES" "$WORK/edges" > "$WORK/edges.list" || fail "tests/arrow/edges failed"
timeout 300 node "$here/arrow/edges.mjs" "$WORK/edges" > "$WORK/edges.out" 2>&1 || {
	cat "$WORK/edges.out"; fail "an edge case reads wrong"; }
ok "$(tail -n 1 "$WORK/edges.out")"
