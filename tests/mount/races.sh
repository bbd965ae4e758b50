#!/bin/sh
# Lookups and getattrs of the same nodes at once (issue 19, item 7):
# directories whose attributes are refreshed while names are looked up in
# them, view entries whose sizes become known while they are looked up
# again and stat'ed.  In a ThreadSanitizer build (--enable-sanitizers=thread)
# the daemon's reports are collected and any report fails the test: the
# driver reads every shared field of a node under its lock.
. "$(dirname "$0")/lib.sh"

: "${STATSTORM:=$(dirname "$TILEFS")/../tests/mount/statstorm}"
: "${GENARRAY:=$(dirname "$TILETOOL")/../contrib/genarray}"
[ -x "$STATSTORM" ] || fail "no $STATSTORM (make check builds it)"
export TSAN_OPTIONS="${TSAN_OPTIONS:-} log_path=$WORK/tsan halt_on_error=0"	# ours last: they win

src=$WORK/src
mkdir -p "$src/a/b"
"$GENARRAY" "$src/arr" 64 64 16 16 2 zstd > /dev/null || fail "genarray"
head -c 100000 /dev/urandom > "$WORK/plain.bin"
"$TILETOOL" encode -F zstd -t uint8 "$WORK/plain.bin" "$src/a/f.tdb" || fail "encode"
cp "$src/a/f.tdb" "$src/a/b/g.tdb"
printf '[tilefs]\nviews = yes\n[match *.tdb]\nfilters = zstd\ndatatype = uint8\n' > "$WORK/t.ini"
mount_fs "$WORK/t.ini" "$src"
"$TILETOOL" export --csv "$src/arr" > "$WORK/want.csv" || fail "tiletool export"

views=$(ls "$MNT/arr/@views") || fail "no @views in the array"
set -- "$MNT" "$MNT/a" "$MNT/a/b" "$MNT/a/f.tdb" "$MNT/a/b/g.tdb" "$MNT/arr" "$MNT/arr/@views" \
	"$MNT/arr/@views/fragments"
for v in $views; do set -- "$@" "$MNT/arr/@views/$v"; done
# A CSV's size becomes known while the storm looks it up and stats it.
cat "$MNT/arr/@views/cells.csv" > "$WORK/got.csv" &
reader=$!
"$STATSTORM" 300 "$@" || fail "a lookup, listing or stat failed during the storm"
wait "$reader" || fail "reading cells.csv during the storm"
cmp -s "$WORK/got.csv" "$WORK/want.csv" || fail "cells.csv read during the storm differs from tiletool export"
cmp -s "$MNT/a/b/g.tdb" "$WORK/plain.bin" || fail "a decoded file after the storm"
umount_fs
if ls "$WORK"/tsan.* > /dev/null 2>&1; then
	head -n 60 "$WORK"/tsan.*
	fail "ThreadSanitizer reports from the daemon (above)"
fi
ok "6 threads x 300 rounds of listings, forced stats and lookups of $# paths (views among them), sanitizers: ${TILEFS_SANITIZERS:-no}"
