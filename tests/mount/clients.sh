#!/bin/sh
# The programs people read arrays with, on views nobody has read before
# (issue 23).  DuckDB (@duckdb/node-api from npm, pinned, installed here
# into the build tree) trusts st_size: it read 0 rows of every cells.csv
# while a CSV's size showed as 0 until formatted to its end.  Now an open
# formats it first, so DuckDB, with its own sniffer, reads every corpus
# array's cells.csv on a fresh mount with TileDB's row counts and column
# sums (tests/clients/check.py: read_back of each case's manifest); numpy
# memory-maps every .npy; and on another fresh mount tail, Python's mmap, less -F,
# cp --sparse=always and split give every view's bytes as cat does.  Runs
# on the full corpus when it is there, else on tests/data/corpus.
. "$(dirname "$0")/lib.sh"

here=$(cd "$(dirname "$0")/.." && pwd)
: "${TF_CLIENTS:=$here/clients}"
DUCKDB_PKG=@duckdb/node-api@1.5.6-r.1
PY=/usr/bin/python3
if [ -n "$TF_CORPUS" ] && [ -d "$TF_CORPUS" ]; then
	data=$TF_CORPUS
else
	data=$here/data/corpus
fi
command -v node > /dev/null && command -v npm > /dev/null || skip "no node and npm (packages nodejs, npm)"
$PY -c 'import numpy' 2> /dev/null || skip "no NumPy for $PY (package python3-numpy)"

# DuckDB into TF_CLIENTS/node_modules, once (a minute at most).
if ! grep -qs '"version": "1.5.6-r.1"' "$TF_CLIENTS/node_modules/@duckdb/node-api/package.json"; then
	mkdir -p "$TF_CLIENTS"
	timeout 300 npm install --prefix "$TF_CLIENTS" --no-save --no-audit --no-fund --loglevel=error \
		"$DUCKDB_PKG" > "$WORK/npm.log" 2>&1 || { cat "$WORK/npm.log"; skip "npm install $DUCKDB_PKG failed"; }
fi
NODE_PATH=$TF_CLIENTS/node_modules
export NODE_PATH

key=$(corpus_key)
printf '[tilefs]\ndefault_key = oracle\nviews = yes\n[key oracle]\nfile = %s\n' "$key" > "$WORK/t.ini"
cases=$(cd "$data" && for m in */manifest.json extra/*/manifest.json; do
	c=${m%/manifest.json}; [ -d "$c/array" ] && echo "$c"; done)

# DuckDB first: nothing has read these views, nor sized them.
mount_fs "$WORK/t.ini" "$data"
csvs=$(for c in $cases; do [ -e "$MNT/$c/array/@views/cells.csv" ] && echo "$MNT/$c/array/@views/cells.csv"; done)
[ -n "$csvs" ] || fail "no cells.csv under $MNT"
# shellcheck disable=SC2086
timeout 300 node "$here/clients/duckdb-csv.js" $csvs > "$WORK/duck.jsonl" || fail "duckdb-csv.js"
$PY "$here/clients/check.py" "$data" "$MNT" "$WORK/duck.jsonl" > "$WORK/duck.txt" ||
	{ grep -v ' ok ' "$WORK/duck.txt"; fail "DuckDB's reads of cells.csv differ from read_back"; }
ok "DuckDB on a fresh mount: $(tail -n 1 "$WORK/duck.txt")"
# shellcheck disable=SC2086
$PY "$here/clients/check.py" --npy "$data" "$MNT" $cases > "$WORK/npy.txt" ||
	{ cat "$WORK/npy.txt"; fail "numpy.load(mmap_mode='r')"; }
ok "$(tail -n 1 "$WORK/npy.txt"), each equal to read_back"
umount_fs

# Every view of every array, on a fresh mount, memory-mapped first: the
# map, read() and fstat agree.  (The CSVs DuckDB read are sized at lookup,
# remembered in the index store; the fragments' ones at their open.)
mount_fs "$WORK/t.ini" "$data"
find "$MNT" -path '*/@views/*' -type f > "$WORK/views" 2> /dev/null
[ -s "$WORK/views" ] || fail "no views"
$PY - "$WORK/views" <<'PY' > "$WORK/mmap.txt" || { cat "$WORK/mmap.txt"; fail "mmap"; }
import mmap, os, sys
n = 0
for v in open(sys.argv[1]).read().splitlines():
    with open(v, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        assert size > 0, "%s: size 0 after open" % v
        with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
            mapped = m[:]
        data = f.read()
    assert mapped == data and len(data) == size, "%s: mapped %d bytes, read %d, size %d" % (
        v, len(mapped), len(data), size)
    n += 1
print(n)
PY
ok "mmap of $(cat "$WORK/mmap.txt") views read first on a fresh mount: read()'s bytes, fstat's size"
umount_fs

# tail, cp --sparse=always, split and less -F of every array's cells.csv on
# a fresh mount (and a fresh index store: sizes not remembered), each first
# on a quarter of them; then cat, which they must equal.
mount_fs "$WORK/t.ini" "$data" -o index_dir="$WORK/index3"
echo "$csvs" | sed "s|^$WORK/mnt/|$MNT/|" > "$WORK/csvs"
n=0
while read -r v; do
	for k in 0 1 2 3; do
		case $(((n + k) % 4)) in
		0) tail -c 1000 "$v" > "$WORK/tail" || fail "tail -c of $v" ;;
		1) cp --sparse=always "$v" "$WORK/cp" || fail "cp --sparse=always $v" ;;
		2) rm -f "$WORK"/split.* && split -b 3000 "$v" "$WORK/split." || fail "split $v" ;;
		3) less -F "$v" > "$WORK/less" || fail "less -F $v" ;;	# not a terminal: as cat
		esac
	done
	cat "$v" > "$WORK/cat" || fail "cat $v"
	[ -s "$WORK/cat" ] || fail "$v is empty"
	tail -c 1000 "$WORK/cat" | cmp -s - "$WORK/tail" || fail "tail -c 1000 of $v differs from cat's"
	cmp -s "$WORK/cp" "$WORK/cat" || fail "cp --sparse=always of $v differs from cat"
	cat "$WORK"/split.* | cmp -s - "$WORK/cat" || fail "split of $v differs from cat"
	cmp -s "$WORK/less" "$WORK/cat" || fail "less -F of $v differs from cat"
	n=$((n + 1))
done < "$WORK/csvs"
ok "tail, cp --sparse=always, split, less -F of $n CSVs on a fresh mount (each first on a quarter): cat's bytes"
umount_fs
