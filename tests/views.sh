#!/bin/sh
# The array views (tiletool export: cells.csv, <attr>.raw, <attr>.npy,
# fragments/F/cells.csv) of every case of the TileDB corpus, compared with
# what tests/views_check.py computes from each manifest and its expected
# buffers (TileDB's own reads), independently of the C code.  Also: every
# CSV through grep/awk/sort/wc, ranged reads equal to the whole, and the
# upstream (old-format) arrays exported without a crash.
#
# Without ../shared (a fresh clone) the same checks run on the curated
# subset that travels with the project, tests/data/corpus (20 cases copied
# unchanged, manifests and TileDB's read_back included).
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -d "${TF_CORPUS:-}" ]; then
	[ "${TILEFS_CI:-0}" = 1 ] && { echo "FAIL: corpus absent at '${TF_CORPUS:-}' (CI needs ../shared)"; exit 1; }
	echo "NOTE: corpus absent at '${TF_CORPUS:-}': checking the subset in tests/data/corpus"
	TF_CORPUS=$here/data/corpus
fi
# NumPy comes from Debian (python3-numpy) for /usr/bin/python3; any python3
# with NumPy will do.
py=python3
for p in python3 /usr/bin/python3; do
	if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import numpy' 2>/dev/null; then py=$p; break; fi
done
"$py" -c 'import numpy' 2>/dev/null || echo "NOTE: no python3 with NumPy: .npy files are checked byte-wise only"
fail=0
"$py" "$here/views_check.py" "$TILETOOL" "$TF_CORPUS" || fail=1

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Ordinary tools over a CSV: one record per cell, fields as declared.
a="$TF_CORPUS/sparse_2d/array"
"$TILETOOL" export -o "$tmp/s.csv" "$a" || fail=1
rows=$(($(wc -l < "$tmp/s.csv") - 1))
[ "$rows" = 600 ] || { echo "FAIL: wc -l: $rows records, expected 600"; fail=1; }
n=$(awk -F, 'NR > 1 && NF != 4 { bad++ } END { print bad + 0 }' "$tmp/s.csv")
[ "$n" = 0 ] || { echo "FAIL: awk: $n records without 4 fields"; fail=1; }
[ "$(head -n 1 "$tmp/s.csv")" = "d0,d1,f64,s" ] || { echo "FAIL: header"; fail=1; }
grep -c '' "$tmp/s.csv" | grep -qx 601 || { echo "FAIL: grep -c"; fail=1; }

# A later copy of a fragment: without duplicates the newest cell of each
# coordinate replaces the old one (same cells); with duplicates both stay,
# and the copy, newer than the delete, loses none of its 120 cells.
n=__1795312354999_1795312354999_0123456789abcdef0123456789abcdef_22
cp -r "$TF_CORPUS/multifrag_sparse/array" "$tmp/ms"
f=$(ls "$tmp/ms/__fragments" | head -n 1)
cp -r "$tmp/ms/__fragments/$f" "$tmp/ms/__fragments/$n" && : > "$tmp/ms/__commits/$n.wrt"
"$TILETOOL" export "$tmp/ms" > "$tmp/ms.csv" && "$TILETOOL" export "$TF_CORPUS/multifrag_sparse/array" |
	cmp -s - "$tmp/ms.csv" || { echo "FAIL: a later duplicate fragment without duplicates"; fail=1; }
cp -r "$TF_CORPUS/extra/sparse_dups_timestamps/array" "$tmp/dt"
f=$(ls "$tmp/dt/__fragments" | head -n 1)
cp -r "$tmp/dt/__fragments/$f" "$tmp/dt/__fragments/$n" && : > "$tmp/dt/__commits/$n.wrt"
rows=$(($("$TILETOOL" export "$tmp/dt" | wc -l) - 1))
[ "$rows" = $((285 + 120)) ] || { echo "FAIL: a later duplicate fragment with duplicates: $rows records"; fail=1; }

# The views of an encrypted array need its key; without one they fail cleanly.
"$TILETOOL" export "$TF_CORPUS/enc_dense_zstd/array" >/dev/null 2>"$tmp/err"
[ $? = 1 ] && grep -q "key" "$tmp/err" || { echo "FAIL: encrypted array without a key"; fail=1; }
# Usage errors exit 2.
"$TILETOOL" export --raw a --fragment f "$a" >/dev/null 2>&1
[ $? = 2 ] || { echo "FAIL: --raw with --fragment is a usage error"; fail=1; }
"$TILETOOL" export --raw nosuch "$TF_CORPUS/gzip_level1/array" >/dev/null 2>&1
[ $? = 1 ] || { echo "FAIL: --raw of no attribute"; fail=1; }

# Hostile arrays (issue 19, tests/hostile.py): a newer schema with a zero
# tile extent killed export with SIGFPE; a matrix past 2^63 bytes. Both are
# clean errors saying why.
a=$TF_CORPUS/gzip_level1/array
python3 "$here/hostile.py" "$TILETOOL" "$a" "$tmp/zero" zero-extent || fail=1
"$TILETOOL" export "$tmp/zero" >/dev/null 2>"$tmp/err"
st=$?
[ $st = 1 ] && grep -q "tile extent not positive" "$tmp/err" ||
	{ echo "FAIL: a newer schema with a zero extent: exit $st: $(cat "$tmp/err")"; fail=1; }
python3 "$here/hostile.py" "$TILETOOL" "$a" "$tmp/huge" huge-matrix || fail=1
"$TILETOOL" export --raw i32 "$tmp/huge" >/dev/null 2>"$tmp/err"
st=$?
[ $st = 1 ] && grep -q "2305843009213693953 cells of 4 bytes, more than a file can hold" "$tmp/err" ||
	{ echo "FAIL: a matrix past 2^63 bytes: exit $st: $(cat "$tmp/err")"; fail=1; }

# Arrays of old formats (TileDB's own test inputs): an answer or a clean error.
for d in "$TF_CORPUS"/upstream-inputs/*/; do
	[ -d "$d" ] || continue	# not in the subset
	"$TILETOOL" export "$d" >/dev/null 2>&1
	st=$?
	[ $st -le 1 ] || { echo "FAIL: export $d: exit $st"; fail=1; }
done
[ $fail = 0 ] && echo "views: ok"
exit $fail
