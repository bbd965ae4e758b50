#!/bin/sh
# A fragment seen mid-commit (its data written, its metadata not yet) reads
# EIO, and reads right once TileDB finishes it: failures are not cached for
# the life of the mount (issue 9).
. "$(dirname "$0")/lib.sh"

data=$(cd "$(dirname "$0")/../data/corpus" && pwd) || fail "no tests/data/corpus"
case=$data/multifrag_sparse
cp -r "$case/array" "$WORK/arr"
frag=$(ls "$WORK/arr/__fragments" | head -n 1)
want=$case/expected/unfiltered/f0/a0.tdb.bin
[ -f "$want" ] || fail "no expected bytes for fragment 0"
mv "$WORK/arr/__fragments/$frag/__fragment_metadata.tdb" "$WORK/meta"
printf '[tilefs]\n' > "$WORK/t.ini"
mount_fs "$WORK/t.ini" "$WORK/arr"
f=$MNT/__fragments/$frag/a0.tdb
cat "$f" > /dev/null 2>&1 && fail "a fragment without metadata read"
mv "$WORK/meta" "$WORK/arr/__fragments/$frag/__fragment_metadata.tdb"
n=0
until cmp -s "$f" "$want"; do
	n=$((n + 1))
	[ "$n" -le 100 ] || fail "the completed fragment still does not read after 10 s"
	sleep 0.1	# polling, bounded: the retry is due after a second
done
ok "a fragment completed under a live mount reads right after $n polls"
