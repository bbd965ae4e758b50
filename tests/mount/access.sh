#!/bin/sh
# Who may read views and plaintext under allow_other (issue 20, items 1
# and 2): a view, and a file decoded from two stored files, are readable by
# exactly the users who may read everything they are made of (every file
# and directory of the fragments they read, the schemas, the array's
# directory); plaintext is the mounter's alone, decided before any index is
# built.  The kernel enforces the modes shown; the driver checks the caller
# again at open, which the tests reach with a process the kernel lets
# through (nobody with CAP_DAC_OVERRIDE).
. "$(dirname "$0")/lib.sh"

command -v setpriv >/dev/null 2>&1 || skip "no setpriv (package util-linux)"
: "${GENARRAY:=$(dirname "$TILETOOL")/../contrib/genarray}" "${EIOSHIM:?}"
chmod 755 "$WORK"	# other users must reach the mountpoint
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
# nobody in group 4242 (which no file of the system has)
as_member() { setpriv --reuid=65534 --regid=65534 --groups=4242 -- "$@"; }
# nobody whom the kernel lets open anything: only the driver's own check stands
as_capable() {
	setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=+dac_override --ambient-caps=+dac_override -- "$@"
}
data=$(cd "$(dirname "$0")/../data/corpus" && pwd) || fail "no tests/data/corpus"

# refused WHO PATH: WHO's open of PATH fails with EACCES (not EIO, not success).
refused() {
	if "$1" cat "$2" > /dev/null 2> "$WORK/err"; then fail "$1 read $2"; fi
	grep -q "Permission denied" "$WORK/err" || fail "$1 reading $2: $(cat "$WORK/err")"
}
# same WHO PATH: WHO reads PATH, the same bytes as root.
same() {
	cat "$2" > "$WORK/root.out" || fail "root cannot read $2"
	"$1" cat "$2" > "$WORK/who.out" || fail "$1 cannot read $2"
	cmp -s "$WORK/root.out" "$WORK/who.out" || fail "$1 reads other bytes than root from $2"
	[ -s "$WORK/root.out" ] || fail "$2 is empty"
}
newest() { find "$1/__fragments" -mindepth 1 -maxdepth 1 -type d | sort | tail -n 1; }
oldest() { find "$1/__fragments" -mindepth 1 -maxdepth 1 -type d | sort | head -n 1; }

src=$WORK/src
mkdir -p "$src"
for a in open files600 dir700 mixed group; do
	"$GENARRAY" "$src/$a" 30 40 10 10 3 zstd > /dev/null || fail "genarray"
done
for a in many many600; do	# walked on many threads (tf_fanout), 64 fragments a step
	"$GENARRAY" "$src/$a" --sparse 600 600 100 disjoint > /dev/null || fail "genarray"
done
cp -r "$data/multifrag_sparse/array" "$src/sparse"
cp -r "$data/str_rle/array" "$src/str"
chmod -R a+rX,u+w "$src"
chmod 600 "$(newest "$src/files600")"/*
chmod 700 "$(newest "$src/dir700")"
chown -R 65534:65534 "$(newest "$src/mixed")"
chgrp -R 4242 "$(newest "$src/group")" && chmod 640 "$(newest "$src/group")"/*
chmod 600 "$src"/str/__fragments/*/a0_var.tdb
chmod 600 "$(find "$src/many600/__fragments" -mindepth 1 -maxdepth 1 -type d | sort | sed -n 451p)/a1_var.tdb"
printf '[tilefs]\nviews = yes\n' > "$WORK/t.ini"
mount_fs "$WORK/t.ini" "$src" -o allow_other

# --- everything readable: nobody reads what root reads
for v in cells.csv a.raw a.npy "fragments/$(basename "$(newest "$src/open")")/cells.csv"; do
	same as_nobody "$MNT/open/@views/$v"
done
same as_nobody "$MNT/sparse/@views/cells.csv"
[ "$(stat -c '%a %u %g' "$MNT/open/@views/a.raw")" = "444 0 0" ] ||
	fail "a.raw of a world-readable array: $(stat -c '%a %u %g' "$MNT/open/@views/a.raw")"
ok "views of a world-readable array: nobody reads root's bytes"

# --- a fragment's files 0600, or its directory 0700: its views are root's alone
for a in files600 dir700; do
	f=$(basename "$(newest "$src/$a")") g=$(basename "$(oldest "$src/$a")")
	for v in cells.csv a.raw a.npy "fragments/$f/cells.csv"; do
		refused as_nobody "$MNT/$a/@views/$v"
		refused as_capable "$MNT/$a/@views/$v"
		[ "$(stat -c '%a %u' "$MNT/$a/@views/$v")" = "400 0" ] ||
			fail "$a/@views/$v shows $(stat -c '%a %u' "$MNT/$a/@views/$v")"
	done
	same as_nobody "$MNT/$a/@views/fragments/$g/cells.csv"	# a fragment it may read
	[ "$(stat -c %a "$MNT/$a/@views")" = 555 ] || fail "$a/@views: $(stat -c %a "$MNT/$a/@views")"
	cat "$MNT/$a/@views/cells.csv" | grep -q . || fail "root cannot read $a/@views/cells.csv"
done
ok "a fragment 0600 or its directory 0700: cells.csv, .raw, .npy and its own cells.csv refused to others (EACCES)"

# --- 600 fragments, one file of the 451st 0600: the walk on many threads misses none
same as_nobody "$MNT/many/@views/cells.csv"
refused as_nobody "$MNT/many600/@views/cells.csv"
refused as_capable "$MNT/many600/@views/cells.csv"
[ "$(stat -c '%a %u' "$MNT/many600/@views/cells.csv")" = "400 0" ] ||
	fail "many600/@views/cells.csv shows $(stat -c '%a %u' "$MNT/many600/@views/cells.csv")"
ok "600 fragments, one file 0600 in the 451st: cells.csv refused to others; without it, read by all"

# --- owners that differ, all readable: still readable by all
same as_nobody "$MNT/mixed/@views/cells.csv"
same as_nobody "$MNT/mixed/@views/a.npy"
# --- a fragment 0640 of group 4242: its members read, others do not
same as_member "$MNT/group/@views/cells.csv"
same as_member "$MNT/group/@views/a.raw"
refused as_nobody "$MNT/group/@views/cells.csv"
refused as_capable "$MNT/group/@views/a.raw"
[ "$(stat -c '%a %g' "$MNT/group/@views/cells.csv")" = "440 4242" ] ||
	fail "group/@views/cells.csv shows $(stat -c '%a %g' "$MNT/group/@views/cells.csv")"
ok "owners and groups that differ: the modes shown and the driver let in exactly who may read every input"

# --- decoded offsets made from a 0600 data file (folded: rebuilt from it)
off=$(ls "$MNT"/str/__fragments/*/a0.tdb)
cat "$off" > /dev/null || fail "root cannot read $off"
refused as_nobody "$off"
refused as_capable "$off"
refused as_nobody "$MNT/str/@views/cells.csv"
ok "decoded offsets of a 0600 data file: refused to others"

# --- a mode changed after the views were read is seen within seconds
same as_nobody "$MNT/open/@views/a.raw"
chmod 600 "$(oldest "$src/open")/a0.tdb"
n=0
while [ "$n" -lt 50 ] && as_nobody cat "$MNT/open/@views/a.raw" > /dev/null 2>&1; do	# bounded: 1 s timeouts
	n=$((n + 1)); sleep 0.1
done
refused as_nobody "$MNT/open/@views/a.raw"
refused as_capable "$MNT/open/@views/a.raw"
umount_fs
ok "an input made 0600 after a read: refused to others $((n / 10)).$((n % 10)) s later"

# --- plaintext when the index cannot be built at lookup (its fragment
# metadata fails to read): still the mounter's, mode 0400, and nobody's
# open is refused, by the kernel and by the driver.
mkdir -p "$WORK/s2"
cp -r "$data/enc_dense_zstd/array" "$WORK/s2/enc" && chmod -R a+rX,u+w "$WORK/s2/enc"
key=$(corpus_key)
printf '[tilefs]\ndefault_key = k\nviews = yes\n[key k]\nfile = %s\n' "$key" > "$WORK/k.ini"
touch "$WORK/arm"
TILEFS_EIO_NAME=__fragment_metadata.tdb TILEFS_EIO_FROM=0 TILEFS_EIO_TO=1000000000 TILEFS_EIO_ARM=$WORK/arm \
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 LD_PRELOAD=$EIOSHIM \
	timeout 60 "$TILEFS" -o config="$WORK/k.ini" -o index_dir=none -o allow_other "$WORK/s2" "$MNT" ||
	fail "mount with the fault shim"
a0=$(ls "$MNT"/enc/__fragments/*/a0.tdb)
[ "$(stat -c '%a %u' "$a0")" = "400 0" ] || fail "plaintext whose index failed shows $(stat -c '%a %u' "$a0")"
cat "$a0" > /dev/null 2>&1 && fail "the fault shim did not fail the index"
refused as_nobody "$a0"
refused as_capable "$a0"
rm "$WORK/arm"
refused as_capable "$a0"
cmp -s "$a0" "$data/enc_dense_zstd/expected/unfiltered/f0/a0.tdb.bin" 2>/dev/null ||
	{ n=0; while [ "$n" -lt 30 ] && ! cmp -s "$a0" "$data/enc_dense_zstd/expected/unfiltered/f0/a0.tdb.bin"; do
		n=$((n + 1)); sleep 0.1; done; }	# the failed index is tried again after a second
cmp -s "$a0" "$data/enc_dense_zstd/expected/unfiltered/f0/a0.tdb.bin" || fail "root: decrypted a0.tdb differs"
refused as_capable "$a0"
refused as_capable "$MNT/enc/@views/cells.csv"
umount_fs
ok "plaintext of an encrypted array whose index failed at lookup: 0400, the mounter's; others refused (EACCES)"
