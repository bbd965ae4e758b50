#!/bin/sh
# Mount the TileDB corpus with a config written from its manifests, and the
# bundled sample; read both with ordinary tools and compare with TileDB's
# bytes: cmp, md5sum -c from 8 processes, 500 random dd ranges against
# tiletool decode, grep -c, hexdump, mmap.
. "$(dirname "$0")/lib.sh"

[ -n "$TF_CORPUS" ] && [ -d "$TF_CORPUS" ] || skip "corpus absent ($TF_CORPUS)"
key=$(corpus_key)
python3 "$TF_TOOLS/corpus.py" ini "$key" "$TF_CORPUS:." "$TF_CORPUS/extra:extra" > "$WORK/corpus.ini"
corpus_jobs "$key" > "$WORK/jobs"
n=$(wc -l < "$WORK/jobs")
[ "$n" -gt 300 ] || fail "only $n corpus files listed"
mount_fs "$WORK/corpus.ini" "$TF_CORPUS"

bad=0
while IFS="$(printf '\t')" read -r rel want args enc; do
	cmp -s "$MNT/$rel" "$want" || { bad=$((bad + 1)); echo "differs: $rel"; }
done < "$WORK/jobs"
[ "$bad" = 0 ] || fail "$bad of $n decoded files differ from TileDB's bytes"
ok "cmp: $n files byte-exact"

# md5sum -c from 8 processes at once.
awk -F '\t' '{ print $2 "\t" $1 }' "$WORK/jobs" | while IFS="$(printf '\t')" read -r want rel; do
	printf '%s  %s\n' "$(md5sum < "$want" | cut -d' ' -f1)" "$MNT/$rel"
done > "$WORK/md5"
split -n r/8 "$WORK/md5" "$WORK/md5."
pids=
for part in "$WORK"/md5.*; do md5sum -c --quiet "$part" & pids="$pids $!"; done
for p in $pids; do wait "$p" || fail "md5sum -c failed in a parallel reader"; done
ok "md5sum -c: 8 parallel readers agree"

# 500 random ranges through dd against tiletool decode of the same file.
mkdir -p "$WORK/dec"
awk -F '\t' -v seed=7 'BEGIN { srand(seed) } { f[NR] = $1; a[NR] = $3 }
	END { for (i = 0; i < 500; i++) { k = int(rand() * NR) + 1;
		printf "%d\t%s\t%d\t%d\t%s\n", k, f[k], int(rand() * 1e9), int(rand() * 70000) + 1, a[k] } }' \
	"$WORK/jobs" > "$WORK/ranges"
bad=0
while IFS="$(printf '\t')" read -r k rel r len args; do
	dec=$WORK/dec/$k
	[ -f "$dec" ] || eval "\"\$TILETOOL\" decode $args" > "$dec" || fail "tiletool decode $rel"
	size=$(stat -c %s "$dec")
	[ "$size" -gt 0 ] || continue
	off=$((r % size))
	a=$(dd if="$MNT/$rel" iflag=skip_bytes,count_bytes skip="$off" count="$len" bs=65536 2>/dev/null | md5sum)
	b=$(dd if="$dec" iflag=skip_bytes,count_bytes skip="$off" count="$len" bs=65536 2>/dev/null | md5sum)
	[ "$a" = "$b" ] || { bad=$((bad + 1)); echo "range differs: $rel @$off+$len"; }
done < "$WORK/ranges"
[ "$bad" = 0 ] || fail "$bad of 500 random ranges differ"
ok "dd: 500 random ranges equal tiletool decode"

# Text tools and mmap on string data.
grep 'str_.*_var.tdb' "$WORK/jobs" | head -n 12 | while IFS="$(printf '\t')" read -r rel want args enc; do
	[ "$(grep -a -c e "$MNT/$rel")" = "$(grep -a -c e "$want")" ] || fail "grep -c differs on $rel"
	[ "$(hexdump -C "$MNT/$rel" | head -n 8)" = "$(hexdump -C "$want" | head -n 8)" ] || fail "hexdump differs on $rel"
	"$MMAPREAD" "$MNT/$rel" | cmp -s - "$want" || fail "mmap read differs on $rel"
done || exit 1
ok "grep -c, hexdump -C | head and mmap agree on string files"
umount_fs

# The bundled sample, against the raw data it was made from.
mkdir -p "$WORK/raw"
"$GENSAMPLE" "$WORK/raw"
sh "$MAKE_SAMPLE" "$TILETOOL" "$GENSAMPLE" "$WORK/sample" > /dev/null
mount_fs "$SAMPLE_INI" "$WORK/sample"
cmp "$MNT/weather/readings.tdb" "$WORK/raw/readings.csv" || fail "sample readings differ"
cmp "$MNT/weather/temps.tdb" "$WORK/raw/temps.i32" || fail "sample temps differ"
cmp "$MNT/weather/ids.tdb" "$WORK/raw/ids.u64" || fail "sample ids differ"
cmp "$MNT/README.txt" "$WORK/sample/README.txt" || fail "unmatched file not shown raw"
[ "$(grep -c LISBON "$MNT/weather/readings.tdb")" = 33333 ] || fail "grep -c LISBON"
"$MMAPREAD" "$MNT/weather/temps.tdb" | cmp -s - "$WORK/raw/temps.i32" || fail "mmap of the sample"
ok "sample: decoded files equal their raw data; grep -c LISBON = 33333"
umount_fs

# -o direct_io: the same bytes with no page cache (cat, dd at any offset);
# a private mapping still reads.
mount_fs "$SAMPLE_INI" "$WORK/sample" -o direct_io
cmp "$MNT/weather/readings.tdb" "$WORK/raw/readings.csv" || fail "direct_io: readings differ"
dd if="$MNT/weather/temps.tdb" bs=1000 skip=77 count=3 2>/dev/null |
	cmp -s - "$(dd if="$WORK/raw/temps.i32" bs=1000 skip=77 count=3 2>/dev/null > "$WORK/slice"; echo "$WORK/slice")" ||
	fail "direct_io: a 3000-byte slice differs"
python3 - "$MNT/weather/temps.tdb" "$WORK/raw/temps.i32" <<'PY' || fail "direct_io: a private mapping differs"
import mmap, sys
with open(sys.argv[1], "rb") as f:
    m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
    assert m[:] == open(sys.argv[2], "rb").read()
PY
ok "-o direct_io: cat, dd and a private mapping read the decoded bytes"
