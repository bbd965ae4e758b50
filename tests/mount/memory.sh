#!/bin/sh
# Bounded memory: with a 16 MiB cache, reading a file four times the budget
# keeps the daemon's peak RSS under budget + 16 MiB.
. "$(dirname "$0")/lib.sh"

# ASan keeps freed memory in quarantine and adds shadow memory: no RSS bound holds.
[ "${TILEFS_SANITIZERS:-no}" != no ] && skip "an RSS bound means nothing in a sanitizer build"

src=$WORK/src
mkdir -p "$src"
head -c $((64 << 20)) /dev/urandom > "$WORK/raw"
"$TILETOOL" encode -F 'lz4' -t int32 "$WORK/raw" "$src/big.tdb" || fail "encode"
printf '[tilefs]\ncache_size = 16M\n[match big.tdb]\nfilters = lz4\ndatatype = int32\n' > "$WORK/m.ini"
mount_fs "$WORK/m.ini" "$src"
pid=$(pgrep -f -n "tilefs -o config=$WORK/m.ini") || fail "no tilefs process"
base=$(awk '/VmRSS/ { print $2 }' "/proc/$pid/status")
for i in 1 2; do cmp "$MNT/big.tdb" "$WORK/raw" || fail "pass $i differs"; done
peak=$(awk '/VmHWM/ { print $2 }' "/proc/$pid/status")
limit=$(( (16 + 16) * 1024 ))
echo "RSS at start ${base} KiB, peak ${peak} KiB, limit ${limit} KiB (cache 16 MiB + 16 MiB)"
[ "$peak" -le "$limit" ] || fail "peak RSS ${peak} KiB over ${limit} KiB"
ok "64 MiB read twice through a 16 MiB cache, peak RSS ${peak} KiB"

# Tiny chunks (issue 14): one tile of 10,000,000 one-byte chunks under the
# same 16 MiB cache.  The index and the cache hold decode units (runs of
# whole chunks), so memory stays within the same bound and unmounting is
# quick; the old driver made 3.1 M cache entries and grew past 800 MB.
umount_fs
python3 - "$src/tiny.tdb" "$WORK/tiny.raw" <<'PY' || fail "making the tiny-chunk file"
import struct, sys
n = 10_000_000
data = bytes(i % 251 for i in range(251)) * (n // 251 + 1)
data = data[:n]
hdr = struct.pack("<III", 1, 1, 0)          # orig 1, filtered 1, no metadata
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", n))
    step = 1 << 20
    for at in range(0, n, step):
        f.write(b"".join(hdr + data[i:i + 1] for i in range(at, min(n, at + step))))
open(sys.argv[2], "wb").write(data)
PY
printf '[tilefs]\ncache_size = 16M\n[match tiny.tdb]\ndatatype = uint8\n' > "$WORK/t.ini"
mount_fs "$WORK/t.ini" "$src"
pid=$(pgrep -f -n "tilefs -o config=$WORK/t.ini") || fail "no tilefs process"
cmp "$MNT/tiny.tdb" "$WORK/tiny.raw" || fail "tiny chunks differ"
cmp -s -i 7777777 -n 100 "$MNT/tiny.tdb" "$WORK/tiny.raw" || fail "a 100-byte slice of tiny chunks differs"
peak=$(awk '/VmHWM/ { print $2 }' "/proc/$pid/status")
[ "$peak" -le "$limit" ] || fail "tiny chunks: peak RSS ${peak} KiB over ${limit} KiB"
entries=$(getfattr --absolute-names --only-values -n user.tilefs.cache "$MNT" | tr ' ' '\n' | sed -n 's/^entries=//p')
[ "$entries" -le 1000 ] || fail "tiny chunks: $entries cache entries"
s=$(date +%s)
umount_fs
[ $(( $(date +%s) - s )) -le 5 ] || fail "unmounting took over 5 s"
ok "10,000,000 one-byte chunks through a 16 MiB cache: peak RSS ${peak} KiB, $entries cache entries"

# Views under the same budget (issue 19).  A limit of budget + 32 MiB: the
# cache's slabs and malloc'd buffers each keep their high water, and the
# merge's windows are a share of the budget, not extra.
: "${GENARRAY:=$(dirname "$TILETOOL")/../contrib/genarray}"
vlimit=$(( (16 + 32) * 1024 ))
mkdir -p "$WORK/arrays"
printf '[tilefs]\ncache_size = 16M\nviews = yes\n' > "$WORK/v.ini"

# Hostile capacity: 50 overlapping fragments of ~54,000 cells, each one tile
# of a capacity of 1,000,000.  The merge held a decoded tile per fragment
# (157 MB); it holds a window of cells per fragment, in the cache.
"$GENARRAY" "$WORK/arrays/wide" --sparse 2000000 50 1000000 dups zstd || fail "genarray wide"
"$TILETOOL" export "$WORK/arrays/wide" > "$WORK/wide.csv" || fail "export wide"
mount_fs "$WORK/v.ini" "$WORK/arrays"
pid=$(pgrep -f -n "tilefs -o config=$WORK/v.ini") || fail "no tilefs process"
[ "$(head -n 3 "$MNT/wide/@views/cells.csv")" = "$(head -n 3 "$WORK/wide.csv")" ] || fail "wide: first records"
cmp "$MNT/wide/@views/cells.csv" "$WORK/wide.csv" || fail "wide: cells.csv differs from tiletool export"
peak=$(awk '/VmHWM/ { print $2 }' "/proc/$pid/status")
[ "$peak" -le "$vlimit" ] || fail "wide: peak RSS ${peak} KiB over ${vlimit} KiB"
ok "cells.csv of 50 fragments of 1,000,000-cell tiles through a 16 MiB cache: peak RSS ${peak} KiB"
umount_fs

# Many fragments: 5,000 one-cell fragments written one after another.  The
# snapshot held every fragment's metadata and one open column per fragment
# and field (25,000 descriptors); the merge a tile each.
rm -rf "$WORK/arrays/wide"
"$GENARRAY" "$WORK/arrays/many" --sparse 5000 5000 100 disjoint || fail "genarray many"
awk 'BEGIN { print "d,a,s"; for (f = 0; f < 5000; f++) printf "%d,%d,v%d.%d\n", f, 4 * f, f, f }' > "$WORK/many.csv"
mount_fs "$WORK/v.ini" "$WORK/arrays"
pid=$(pgrep -f -n "tilefs -o config=$WORK/v.ini") || fail "no tilefs process"
[ "$(ls -a "$MNT/many" | tr '\n' ' ')" = ". .. @views __commits __fragments __meta __schema " ] ||
	fail "many: listing $(ls -a "$MNT/many" | tr '\n' ' ')"
cmp "$MNT/many/@views/cells.csv" "$WORK/many.csv" || fail "many: cells.csv differs"
fds=$(ls "/proc/$pid/fd" | wc -l)
peak=$(awk '/VmHWM/ { print $2 }' "/proc/$pid/status")
[ "$fds" -le 1000 ] || fail "many: $fds descriptors open after the read"
[ "$peak" -le "$vlimit" ] || fail "many: peak RSS ${peak} KiB over ${vlimit} KiB"
ok "cells.csv of 5,000 one-cell fragments: peak RSS ${peak} KiB, $fds descriptors"

# Views of an array no longer used let go of what they keep only to be
# quicker (fragments' CSV states, idle columns, fragment metadata): nodes
# the kernel still knows keep views alive after their array is gone, and
# a mount serving many arrays one after another grew by what each kept.
# After every fragments/F/cells.csv of 1,500 of the fragments, the views
# of five other arrays: the heap shrinks, and the views read the same.
heap() { getfattr --absolute-names --only-values -n user.tilefs.cache "$MNT" | tr ' ' '\n' | sed -n 's/^heap_used=//p'; }
for i in 1 2 3 4 5; do "$GENARRAY" "$WORK/arrays/small$i" --sparse 10 1 100 disjoint || fail "genarray small$i"; done
umount_fs
mount_fs "$WORK/v.ini" "$WORK/arrays"
ls "$MNT/many/@views/fragments" | head -n 1500 > "$WORK/frags"
sed "s|^|$MNT/many/@views/fragments/|; s|\$|/cells.csv|" "$WORK/frags" | xargs cat > "$WORK/frags.csv" || fail "fragment views"
[ "$(wc -l < "$WORK/frags.csv")" -eq 3000 ] || fail "fragment views: $(wc -l < "$WORK/frags.csv") lines"
h1=$(heap)
for i in 1 2 3 4 5; do ls "$MNT/small$i/@views" > /dev/null || fail "small$i/@views"; done
h2=$(heap)
echo "heap in use: ${h1} bytes after the fragment views, ${h2} after five other arrays' views"
[ "$h2" -le $((h1 - (2 << 20))) ] || fail "the heap kept ${h2} of ${h1} bytes"
sed "s|^|$MNT/many/@views/fragments/|; s|\$|/cells.csv|" "$WORK/frags" | xargs cat | cmp - "$WORK/frags.csv" ||
	fail "fragment views read otherwise after letting go"
ok "views of an array no longer used let go: heap ${h1} -> ${h2} bytes, the views read the same"
