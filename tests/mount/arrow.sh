#!/bin/sh
# cells.arrow through the mount (issue 23): every corpus array's
# @views/cells.arrow and fragments/F/cells.arrow, read by two independent
# Arrow readers from npm (apache-arrow, nodejs-polars; pinned, installed
# into the build tree by tests/arrow/clients.sh), hold exactly the cells
# TileDB's own read gives (read_back; each fragment's unfiltered tiles),
# nulls included (tests/arrow/check.py); then generated arrays of several
# record batches against their cells.csv.  Runs on the full corpus when it
# is there, else on the subset in tests/data/corpus.  (The writer's edge
# cases: tests/arrow.sh.)
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

# Arrays of several record batches (64 Ki cells each): a dense one of three
# fragments (contrib/genarray: 300 x 500 int32, 150,000 cells) and a sparse
# one of 153,000 cells (int64, int32, strings; duplicates, overwrites),
# against their cells.csv.
GENARRAY=${GENARRAY:-$(dirname "$TILETOOL")/../contrib/genarray}
mkdir -p "$WORK/g"
"$GENARRAY" "$WORK/g/dense" 300 500 100 100 3 zstd > /dev/null || fail "genarray dense"
"$GENARRAY" "$WORK/g/sparse" --sparse 120000 3 10000 dups lz4 > /dev/null || fail "genarray sparse"
mount_fs "$WORK/t.ini" "$WORK/g"
for a in dense sparse; do
	cat "$MNT/$a/@views/cells.csv" > "$WORK/$a.csv" || fail "$a/@views/cells.csv"
	timeout 300 python3 "$here/arrow/compare.py" csv node "$here/arrow/read.mjs" \
		"$MNT/$a/@views/cells.arrow" "$WORK/$a.csv" 2 > "$WORK/$a.out" 2>&1 || {
		cat "$WORK/$a.out"; fail "$a/@views/cells.arrow differs from its cells.csv"; }
	ok "$(tail -n 1 "$WORK/$a.out")"
done
umount_fs
