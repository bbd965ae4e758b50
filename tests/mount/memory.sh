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
