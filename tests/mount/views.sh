#!/bin/sh
# Views through the mount (issue 11): with -o views every TileDB array
# under SOURCE has an @views folder whose files equal what `tiletool export`
# writes (tests/views.sh checks those against TileDB's own reads).  Listing
# the folder decodes nothing; ordinary tools work on the CSVs, which are
# served as /proc files are until their size is known; .npy files load in
# NumPy; a new fragment, or a consolidation and vacuum, gives new contents at
# the next open while an open file keeps the state it opened or fails (never
# a mix of two states).  Runs on the full corpus when it is there,
# else on the subset in tests/data/corpus.
. "$(dirname "$0")/lib.sh"

if [ -n "$TF_CORPUS" ] && [ -d "$TF_CORPUS" ]; then
	data=$TF_CORPUS
else
	data=$(cd "$(dirname "$0")/../data/corpus" && pwd) || fail "no corpus and no tests/data/corpus"
fi
key=$(corpus_key)
printf '[tilefs]\ndefault_key = oracle\nviews = yes\n[key oracle]\nfile = %s\n' "$key" > "$WORK/t.ini"
mount_fs "$WORK/t.ini" "$data"
cache() { getfattr --absolute-names --only-values -n user.tilefs.cache "$MNT" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

# Listing every views folder decodes nothing.
before=$(cache misses)
find "$MNT" -path '*/@views*' -maxdepth 4 > "$WORK/listed" 2>/dev/null
ls -lR "$MNT"/*/array/@views "$MNT"/extra/*/array/@views > /dev/null 2>&1
[ "$(cache misses)" = "$before" ] || fail "listing views decoded something ($before -> $(cache misses) misses)"
arrays=$(cd "$data" && ls -d */array extra/*/array 2>/dev/null | while read -r a; do
	[ -d "$MNT/$a/@views" ] && echo "$a"; done)
[ -n "$arrays" ] || fail "no @views folder in any array"
ok "$(echo "$arrays" | wc -l) arrays have an @views folder; listing them all decoded nothing"

# Every view equals tiletool export of the same array.
n=0 bad=0
for a in $arrays; do
	k=""
	grep -q '"key_hex"' "$data/${a%/array}/manifest.json" 2>/dev/null && k="-k $key"
	# shellcheck disable=SC2086
	if "$TILETOOL" export $k --csv "$data/$a" > "$WORK/want.csv" 2>/dev/null; then
		n=$((n + 1))
		# cat: GNU cmp takes a size of 0 (not yet known) for "differ"
		cat "$MNT/$a/@views/cells.csv" | cmp -s - "$WORK/want.csv" ||
			{ bad=$((bad + 1)); echo "differs: $a/@views/cells.csv"; }
	fi
	for f in "$MNT/$a/@views/"*.raw; do
		[ -e "$f" ] || continue
		attr=$(basename "$f" .raw)
		n=$((n + 2))
		# shellcheck disable=SC2086
		"$TILETOOL" export $k --raw "$attr" "$data/$a" | cmp -s - "$f" || { bad=$((bad + 1)); echo "differs: $f"; }
		# shellcheck disable=SC2086
		"$TILETOOL" export $k --npy "$attr" "$data/$a" | cmp -s - "${f%.raw}.npy" ||
			{ bad=$((bad + 1)); echo "differs: ${f%.raw}.npy"; }
	done
	for d in "$MNT/$a/@views/fragments/"*/; do
		[ -d "$d" ] || continue
		n=$((n + 1))
		# shellcheck disable=SC2086
		"$TILETOOL" export $k --fragment "$(basename "$d")" "$data/$a" > "$WORK/want.frag"
		cat "$d/cells.csv" | cmp -s - "$WORK/want.frag" ||
			{ bad=$((bad + 1)); echo "differs: $d/cells.csv"; }
	done
done
[ "$bad" = 0 ] || fail "$bad of $n views differ from tiletool export"
ok "$n views byte-equal to tiletool export"

# A remount knows every CSV's size at lookup (remembered in the index
# store when the reads above reached their ends), before any open.
umount_fs
mount_fs "$WORK/t.ini" "$data"
n=0
for a in $arrays; do
	v=$MNT/$a/@views/cells.csv
	[ -f "$v" ] || continue
	s=$(stat -c %s "$v")
	[ "$s" -gt 0 ] || fail "remounted with its index, $v shows size $s"
	[ "$(cat "$v" | wc -c)" = "$s" ] || fail "$v: size $s remembered, $(cat "$v" | wc -c) bytes read"
	n=$((n + 1))
done
ok "remounted with its index: $n CSVs show their sizes at lookup, before any open"

# Ordinary tools on a CSV whose size is known from its open on (a fresh
# mount, and a fresh index: stat before that open shows 0).
umount_fs
mount_fs "$WORK/t.ini" "$data" -o index_dir="$WORK/index2"
a=$(echo "$arrays" | grep -v enc | head -n 1)
v=$MNT/$a/@views/cells.csv
"$TILETOOL" export --csv "$data/$a" > "$WORK/want.csv" 2>/dev/null
[ "$(stat -c %s "$v")" = 0 ] || fail "an unread CSV shows size $(stat -c %s "$v"), not 0"
cp "$v" "$WORK/copy.csv" && cmp -s "$WORK/copy.csv" "$WORK/want.csv" || fail "cp of $v"
[ "$(wc -l < "$v")" = "$(wc -l < "$WORK/want.csv")" ] || fail "wc -l of $v"
[ "$(wc -c < "$v")" = "$(wc -c < "$WORK/want.csv")" ] || fail "wc -c of $v"
tail -n 3 "$v" | cmp -s - "$(tail -n 3 "$WORK/want.csv" > "$WORK/t3"; echo "$WORK/t3")" || fail "tail of $v"
head -n 2 "$v" | cmp -s - "$(head -n 2 "$WORK/want.csv" > "$WORK/h2"; echo "$WORK/h2")" || fail "head of $v"
sort "$v" | cmp -s - "$(sort "$WORK/want.csv" > "$WORK/s"; echo "$WORK/s")" || fail "sort of $v"
awk -F, 'NR > 1 { n++ } END { print n + 0 }' "$v" > "$WORK/awk" && [ "$(cat "$WORK/awk")" -ge 1 ] || fail "awk over $v"
[ "$(stat -c %s "$v")" = "$(wc -c < "$WORK/want.csv")" ] || fail "size of $v not known after a full read"
grep -c , "$v" > "$WORK/g1" && grep -c , "$WORK/want.csv" | cmp -s - "$WORK/g1" || fail "grep over $v"
# grep and awk over every array's CSV: both read it through and count the
# same lines, the header at least.
n=0
for x in $arrays; do
	c=$MNT/$x/@views/cells.csv
	[ -f "$c" ] || continue
	g=$(grep -c '' "$c") && k=$(awk 'END { print NR }' "$c") && [ "$g" = "$k" ] && [ "$g" -ge 1 ] ||
		fail "grep and awk disagree over $c"
	n=$((n + 1))
done
[ "$n" -ge 1 ] || fail "no CSV to grep"
ok "cp, wc, head, tail, sort, grep, awk on $a/@views/cells.csv (its size known once read through); grep and awk over $n CSVs"

# NumPy loads every .npy and finds the .raw bytes behind it.
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
	/usr/bin/python3 - "$MNT" <<'PY' > "$WORK/npy" || { cat "$WORK/npy"; fail "numpy"; }
import glob, numpy, sys
n = 0
for npy in glob.glob(sys.argv[1] + "/**/@views/*.npy", recursive=True):
    a = numpy.load(npy, mmap_mode="r")
    raw = open(npy[:-4] + ".raw", "rb").read()
    assert a.tobytes() == raw, npy
    n += 1
print(n)
PY
	ok "numpy.load(mmap_mode='r') of $(cat "$WORK/npy") .npy views equals their .raw"
fi
umount_fs

# A new fragment: new contents at the next open, the open file keeps its state.
src=$data/multifrag_sparse/array
[ -d "$src" ] || skip "no multifrag_sparse case"
cp -r "$src" "$WORK/arr"
f=$(ls "$WORK/arr/__fragments" | tail -n 1)
mv "$WORK/arr/__fragments/$f" "$WORK/hidden"
mkdir -p "$WORK/m2"
MNT=$WORK/m2
mount_fs "$WORK/t.ini" "$WORK/arr"
"$TILETOOL" export --csv "$WORK/arr" > "$WORK/before.csv"
exec 3< "$MNT/@views/cells.csv"
mv "$WORK/hidden" "$WORK/arr/__fragments/$f"
"$TILETOOL" export --csv "$WORK/arr" > "$WORK/after.csv"
cmp -s "$WORK/before.csv" "$WORK/after.csv" && fail "the new fragment changes nothing"
cat <&3 | cmp -s - "$WORK/before.csv" || fail "the open view did not keep its state"
exec 3<&-
n=0
until cat "$MNT/@views/cells.csv" | cmp -s - "$WORK/after.csv"; do
	n=$((n + 1))
	[ "$n" -le 50 ] || fail "a new open does not show the new fragment"
	sleep 0.1	# bounded polling: entries are cached for a second
done
ok "a new fragment: new contents at the next open; an open view keeps its state"

# A consolidation (TileDB's extra/consolidated, in tests/data too) done under
# the mount: state A is its three first writes; then the consolidated
# fragment, its commit and .vac, the fragment-metadata files and a fourth
# write appear, and a vacuum removes the three.  A view opened in state A
# reads state A or fails; the next open reads the final state, which
# tiletool export gives for the case as TileDB wrote it (tests/views.sh
# checks that export against TileDB's own read).
case=$data/extra/consolidated
[ -d "$case" ] || case=$(cd "$(dirname "$0")/../data/corpus/extra/consolidated" && pwd) || fail "no consolidated case"
umount_fs
cp -r "$case/array" "$WORK/full" && chmod -R u+w "$WORK/full"
cp -r "$WORK/full" "$WORK/cons"
(cd "$WORK/cons" && rm -rf __fragments/__10_30_* __fragments/__40_40_* __commits/__10_30_* __commits/__40_40_* \
	__fragment_meta) || fail "making state A"
mkdir -p "$WORK/m3"
MNT=$WORK/m3
mount_fs "$WORK/t.ini" "$WORK/cons"
"$TILETOOL" export --csv "$WORK/cons" > "$WORK/a.csv" || fail "export of state A"
"$TILETOOL" export --csv "$WORK/full" > "$WORK/final.csv" || fail "export of the final state"
cmp -s "$WORK/a.csv" "$WORK/final.csv" && fail "the fourth write changes nothing"
exec 3< "$MNT/@views/cells.csv"
cp -r "$WORK/full/__fragment_meta" "$WORK/cons/"
for d in __10_30 __40_40; do
	cp -r "$WORK/full/__fragments/$d"_* "$WORK/cons/__fragments/"
	cp "$WORK/full/__commits/$d"_*.wrt "$WORK/cons/__commits/"
done
cp "$WORK/full/__commits/"__10_30_*.vac "$WORK/cons/__commits/"
(cd "$WORK/cons" && rm -rf __fragments/__10_10_* __fragments/__20_20_* __fragments/__30_30_* \
	__commits/__10_10_* __commits/__20_20_* __commits/__30_30_* __commits/*.vac) || fail "vacuum"
"$TILETOOL" export --csv "$WORK/cons" | cmp -s - "$WORK/final.csv" || fail "consolidated and vacuumed: export differs"
if cat <&3 > "$WORK/open.csv" 2> /dev/null; then
	cmp -s "$WORK/open.csv" "$WORK/a.csv" || fail "a view opened before the consolidation mixed two states"
	kept="kept state A"
else
	kept="failed (EIO): its fragments were vacuumed"
fi
exec 3<&-
n=0
until cat "$MNT/@views/cells.csv" 2> /dev/null | cmp -s - "$WORK/final.csv"; do
	n=$((n + 1))
	[ "$n" -le 50 ] || fail "a new open does not show the consolidated array"
	sleep 0.1	# bounded polling: entries are cached for a second
done
[ "$(ls "$MNT/@views/fragments" | tr '\n' ' ')" = "$(ls "$WORK/cons/__fragments" | tr '\n' ' ')" ] ||
	fail "fragments/ after the vacuum: $(ls "$MNT/@views/fragments")"
ok "consolidated and vacuumed under the mount: the next open reads the final state; the open view $kept"

# On demand: a 4 KiB read in the middle of a.raw of a 4 MiB matrix (64 tiles
# of 16 rows) decodes the one tile holding that row, nothing ahead of it
# (a first read far into a file is a random read, not the start of a scan).
: "${GENARRAY:=$(dirname "$TILETOOL")/../contrib/genarray}"
umount_fs
mkdir -p "$WORK/g/big" "$WORK/m4"
"$GENARRAY" "$WORK/g/big" 1024 1024 16 1024 1 zstd > /dev/null || fail "genarray"
MNT=$WORK/m4
mount_fs "$WORK/t.ini" "$WORK/g"
"$TILETOOL" export --raw a "$WORK/g/big" > "$WORK/big.raw" || fail "export --raw a"
dd if="$MNT/big/@views/a.raw" of="$WORK/row" iflag=direct bs=4096 skip=300 count=1 status=none ||
	fail "direct read of a.raw"
dd if="$WORK/big.raw" bs=4096 skip=300 count=1 status=none | cmp -s - "$WORK/row" || fail "row 300 of a.raw"
[ "$(cache misses)" = 1 ] || fail "a 4 KiB read of a.raw decoded $(cache misses) tiles, not 1"
ok "a 4 KiB read in the middle of a 64-tile a.raw decoded 1 tile"
umount_fs

# Hostile arrays (issue 19, tests/hostile.py): a newer schema with a zero
# tile extent killed the daemon at `head @views/cells.csv` (SIGFPE); a
# matrix past 2^63 bytes showed as st_size -2^63 and failed with no log
# line.  Now EIO with the reason in the log, and the daemon lives on.
g=$data/gzip_level1/array
mkdir -p "$WORK/h" "$WORK/m5"
python3 "$(dirname "$0")/../hostile.py" "$TILETOOL" "$g" "$WORK/h/zero" zero-extent || fail "hostile.py zero-extent"
python3 "$(dirname "$0")/../hostile.py" "$TILETOOL" "$g" "$WORK/h/huge" huge-matrix || fail "hostile.py huge-matrix"
cp -r "$g" "$WORK/h/plain"
MNT=$WORK/m5
timeout 60 "$TILEFS" -f -o config="$WORK/t.ini" "$WORK/h" "$MNT" 2> "$WORK/hlog" &
pid=$!
i=0
until mountpoint -q "$MNT" || [ $i -ge 200 ]; do i=$((i + 1)); sleep 0.05; done
mountpoint -q "$MNT" || fail "no foreground mount"
head -n 3 "$MNT/zero/@views/cells.csv" > /dev/null 2> "$WORK/herr" && fail "views of a zero extent read"
grep -q "Input/output error" "$WORK/herr" || fail "views of a zero extent: not EIO: $(cat "$WORK/herr")"
[ "$(stat -c %s "$MNT/huge/@views/i32.raw")" = 0 ] || fail "a matrix past 2^63 bytes: size $(stat -c %s "$MNT/huge/@views/i32.raw")"
[ "$(getfattr --absolute-names --only-values -n user.tilefs.shape "$MNT/huge/@views/i32.raw")" = "(2305843009213693953,)" ] ||
	fail "shape of the matrix past 2^63 bytes"
cat "$MNT/huge/@views/i32.raw" > /dev/null 2> "$WORK/herr" && fail "a matrix past 2^63 bytes read"
grep -q "Input/output error" "$WORK/herr" || fail "a matrix past 2^63 bytes: not EIO: $(cat "$WORK/herr")"
"$TILETOOL" export --raw i32 "$g" | cmp -s - "$MNT/plain/@views/i32.raw" || fail "the daemon after hostile arrays"
umount_fs
wait $pid
grep -q "zero.*tile extent not positive" "$WORK/hlog" || fail "no log line for the zero extent: $(cat "$WORK/hlog")"
grep -q "huge/@views/i32.raw: 2305843009213693953 cells of 4 bytes, more than a file can hold" "$WORK/hlog" ||
	fail "no log line for the matrix past 2^63 bytes: $(cat "$WORK/hlog")"
ok "hostile arrays: a zero extent and a matrix past 2^63 bytes are EIO, logged; the daemon lives on"

# A reader killed in the middle of a long read frees the daemon (issue 19):
# a read 10 GB into an endless CSV (two cells at opposite corners of a
# 2^62-cell box) must format those 10 GB first.  The killed reader waits in
# D state for the answer; the kernel sends FUSE_INTERRUPT, and the driver
# gives up at the next block (EINTR).  Before, the reader stayed in D state
# until the daemon had formatted everything before its offset (minutes).
mkdir -p "$WORK/c" "$WORK/m6"
e=2147483646	# rows and columns: the int32 domain's, 2 x 2 tiles
for box in "" "0 0 0 0 10" "$((e - 1)) $((e - 1)) $((e - 1)) $((e - 1)) 20"; do
	# shellcheck disable=SC2086
	"$GENARRAY" "$WORK/c/corners" $e $e 2 2 0 none ${box:+--append $box} > /dev/null || fail "genarray corners"
done
# A box of 2^32 cells, two of them written: its CSV (~40 GB) is sized
# at open, which a killed reader must stop (below).
f=65535
for box in "" "0 0 0 0 10" "$f $f $f $f 20"; do
	# shellcheck disable=SC2086
	"$GENARRAY" "$WORK/c/box" 65536 65536 2 2 0 none ${box:+--append $box} > /dev/null || fail "genarray box"
done
MNT=$WORK/m6
mount_fs "$WORK/t.ini" "$WORK/c"
[ "$(head -n 2 "$MNT/corners/@views/cells.csv")" = "$(printf 'r,c,a\n0,0,10')" ] || fail "the corners' first cell"
before=$(cache misses)
dd if="$MNT/corners/@views/cells.csv" of=/dev/null bs=4096 skip=2500000 count=1 iflag=direct 2>/dev/null &
reader=$!
n=0	# bounded polling: until the daemon formats for it (each block is a new cache entry)
until [ "$(cache misses)" -ge $((before + 20)) ]; do
	n=$((n + 1))
	[ "$n" -le 200 ] || { kill -9 "$reader"; fail "the far read never reached the daemon"; }
	sleep 0.05
done
kill -9 "$reader"
n=0	# the killed reader is gone (a zombie of ours) once the daemon answers
while [ "$(awk '{ print $3 }' "/proc/$reader/stat" 2>/dev/null)" != Z ] && [ -e "/proc/$reader" ]; do
	n=$((n + 1))
	[ "$n" -le 100 ] || fail "a reader killed during a 10 GB CSV read still waits after 5 s (no FUSE interrupt)"
	sleep 0.05
done
{ wait "$reader"; } 2> /dev/null
[ "$(head -n 2 "$MNT/corners/@views/cells.csv")" = "$(printf 'r,c,a\n0,0,10')" ] || fail "the corners CSV after the kill"
ok "a reader killed 10 GB into an endless CSV is answered within $((n * 50)) ms; the view still reads"

# An open that sizes a CSV (issue 23) is stopped by its reader going away:
# the 2^32-cell box formats ~40 GB to know its size; a reader killed
# while its open waits is answered within seconds, and the mount goes on.
head -c 10 "$MNT/box/@views/cells.csv" > /dev/null 2>&1 &
reader=$!
n=0	# bounded polling: until the open waits for the daemon
until grep -qs fuse "/proc/$reader/wchan" || grep -qs request_wait "/proc/$reader/wchan"; do
	n=$((n + 1))
	[ "$n" -le 200 ] || { kill -9 "$reader"; fail "the open of the box's CSV never waited for the daemon"; }
	sleep 0.05
done
kill -9 "$reader"
n=0
while [ "$(awk '{ print $3 }' "/proc/$reader/stat" 2>/dev/null)" != Z ] && [ -e "/proc/$reader" ]; do
	n=$((n + 1))
	[ "$n" -le 100 ] || fail "a reader killed while its open sized a 40 GB CSV still waits after 5 s"
	sleep 0.05
done
{ wait "$reader"; } 2> /dev/null
[ "$(head -n 2 "$MNT/corners/@views/cells.csv")" = "$(printf 'r,c,a\n0,0,10')" ] || fail "the mount after the killed open"
ok "a reader killed while its open sized a 2^32-cell CSV is answered within $((n * 50)) ms; the mount goes on"
umount_fs
