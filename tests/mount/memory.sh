#!/bin/sh
# Bounded memory: with a 16 MiB cache, reading a file four times the budget
# keeps the daemon's peak RSS under budget + 16 MiB.
. "$(dirname "$0")/lib.sh"

# ASan keeps freed memory in quarantine and adds shadow memory: no RSS bound holds.
[ "${TILEFS_SANITIZERS:-no}" = yes ] && skip "an RSS bound means nothing in a sanitizer build"

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
