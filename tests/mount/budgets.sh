#!/bin/sh
# Budgets (issue 19): indexes beyond index_cache are dropped, never while a
# request or an open handle is about to use them; cache_size and
# index_cache that cannot work are refused at mount time.
. "$(dirname "$0")/lib.sh"

src=$WORK/src
mkdir -p "$src"
printf '[tilefs]\nindex_cache = 64K\n[match *.tdb]\nfilters = zstd\ndatatype = uint8\n' > "$WORK/t.ini"

# One file whose index alone (~250 KB: 2,048 tiles of 1 KiB) is larger than
# the whole index budget.  Its index was published, dropped by the trim that
# followed, then referenced: the daemon died on the first open (and on
# getfattr, which opens the index the same way).
head -c 2097152 /dev/urandom > "$WORK/big.bin"
"$TILETOOL" encode -F zstd -t uint8 --tile-size 1024 "$WORK/big.bin" "$src/big.tdb" || fail "encode big"
# Files of ~36 KB of index each (300 tiles): three held open are over budget.
head -c 307200 /dev/urandom > "$WORK/mid.bin"
for i in 0 1 2 3 4 5; do
	"$TILETOOL" encode -F zstd -t uint8 --tile-size 1024 "$WORK/mid.bin" "$src/m$i.tdb" || fail "encode m$i"
done
mount_fs "$WORK/t.ini" "$src" -o index_dir=none

cmp "$MNT/big.tdb" "$WORK/big.bin" || fail "an index larger than index_cache: bytes differ or the daemon died"
[ "$(getfattr --absolute-names --only-values -n user.tilefs.tiles "$MNT/big.tdb")" = 2048 ] ||
	fail "user.tilefs.tiles of a file whose index is over budget"
cmp "$MNT/big.tdb" "$WORK/big.bin" || fail "second read of the over-budget file"
ok "an index 4x index_cache: read and getfattr, byte-exact, twice"

# Three files held open keep their indexes (over the budget together); each
# new open publishes its index beyond the budget and must still be served.
exec 3< "$MNT/m0.tdb" 4< "$MNT/m1.tdb" 5< "$MNT/m2.tdb"
for i in 3 4 5; do cmp "$MNT/m$i.tdb" "$WORK/mid.bin" || fail "m$i.tdb with three files held open"; done
cmp - "$WORK/mid.bin" <&3 || fail "m0.tdb read through the descriptor held open"
cmp - "$WORK/mid.bin" <&5 || fail "m2.tdb read through the descriptor held open"
used=$(getfattr --absolute-names --only-values -n user.tilefs.cache "$MNT" | tr ' ' '\n' | sed -n 's/^index_bytes=//p')
[ "$used" -gt 65536 ] || fail "three open files hold only $used bytes of index (the test proves nothing)"
exec 3<&- 4<&- 5<&-
ls -l "$MNT" > /dev/null	# a request after the closes: the budget holds again
used=$(getfattr --absolute-names --only-values -n user.tilefs.cache "$MNT" | tr ' ' '\n' | sed -n 's/^index_bytes=//p')
[ "$used" -le 65536 ] || fail "$used bytes of index kept after every file was closed (budget 65536)"
ok "opens beyond the budget with files held open; $used bytes of index kept once all are closed"

# Many readers and listings at once, every one over the budget.
for r in 1 2 3 4; do
	(for i in 0 1 2 3 4 5; do cmp -s "$MNT/m$i.tdb" "$WORK/mid.bin" || echo "m$i"; done;
	 cmp -s "$MNT/big.tdb" "$WORK/big.bin" || echo big) > "$WORK/bad.$r" &
	(for i in 1 2 3 4 5; do ls -l "$MNT" > /dev/null; getfattr --absolute-names -d "$MNT/big.tdb" > /dev/null; done) &
done
wait
cat "$WORK"/bad.* | grep -q . && fail "concurrent readers under a 64K index budget: $(cat "$WORK"/bad.*)"
mountpoint -q "$MNT" || fail "the daemon died"
umount_fs
ok "4 readers and 4 listers at once under a 64K index budget: byte-exact"

# Budgets that cannot work are refused before mounting, naming the option
# and the limit (item 9): a 64K cache took the mount, then failed every
# 64 KiB chunk; 2^64-1 bytes of cache took it too.
head -c 400000 /dev/urandom > "$WORK/plain.bin"
"$TILETOOL" encode -F zstd -t uint8 "$WORK/plain.bin" "$src/chunks.tdb" || fail "encode 64 KiB chunks"
refused() {	# refused STATUS MESSAGE tilefs-arguments...
	want=$1 msg=$2
	shift 2
	"$TILEFS" "$@" -o index_dir=none "$src" "$MNT" 2> "$WORK/err"
	rc=$?
	mountpoint -q "$MNT" && { umount_fs; fail "mounted with $*"; }
	[ "$rc" = "$want" ] || fail "$*: exit status $rc, want $want"
	grep -qF "$msg" "$WORK/err" || fail "$*: message: $(cat "$WORK/err")"
}
refused 2 "tilefs: -o cache_size: 64K is less than the least it works with, 1M" -o config="$WORK/t.ini" -o cache_size=64K
refused 2 "tilefs: -o cache_size: 18446744073709551615 is more than this machine's memory, " \
	-o config="$WORK/t.ini" -o cache_size=18446744073709551615
printf '[tilefs]\ncache_size = 64K\n' > "$WORK/small.ini"
refused 3 "small.ini:2: cache_size: 64K is less than the least it works with, 1M" -o config="$WORK/small.ini"
printf '[tilefs]\n\nindex_cache = 16383T\n' > "$WORK/huge.ini"
refused 3 "huge.ini:3: index_cache: 16383T is more than this machine's memory, " -o config="$WORK/huge.ini"
mount_fs "$WORK/t.ini" "$src" -o cache_size=1M
cmp "$MNT/chunks.tdb" "$WORK/plain.bin" || fail "64 KiB chunks through the smallest cache allowed"
umount_fs
ok "cache_size 64K and 2^64-1, index_cache 16383T refused with the option and the limit; 1M reads 64 KiB chunks"
