#!/bin/sh
# Persisted indexes (issue 13), through the mount:
#   1. a source rewritten in place with the same size and its mtime put
#      back (touch -d) is walked again: ctime tells;
#   2. a corrupt entry is ignored and rebuilt, never trusted;
#   3. an index directory that cannot be written leaves the mount working
#      (a warning; a read-only store is still read);
#   4. two mounts sharing one index directory, walking the same files at
#      once, leave it whole;
#   5. tiletool index on a tree of 10,000 files shows progress and builds
#      the index the daemon then uses: ls -lR walks nothing (counted in
#      user.tilefs.index), and -o index_at_mount does the same in the
#      background;
#   6. (issue 20) an index_dir that must not be used - writable by others
#      (1777, holding an entry of nobody's and an old temporary file of
#      nobody's), another user's, or reached through a symlink - fails the
#      mount (status 3) with a message naming the option or FILE:LINE, and
#      is left as it was (modes, owners, contents); as the default
#      ($TILEFS_INDEX_DIR) it is a warning and the mount has no store; a
#      relative -o index_dir is the caller's working directory's (it was
#      /'s: the store was opened after daemonizing);
#   7. (issue 20) a forged entry - tile 0 and its last unit claimed 4 bytes
#      longer, made by tiletool and patched with a valid checksum, which
#      passed every check - serves no byte at a shifted offset: a read of
#      tile 1 first is EIO, the entry is removed, and the next mount walks
#      and serves the true bytes.
. "$(dirname "$0")/lib.sh"

MNT2=$WORK/mnt2
# Also a second mount and a tmpfs of this test's, on any exit.
trap 'index_cleanup; cleanup' EXIT INT TERM
index_cleanup() {
	mountpoint -q "$MNT2" && fusermount3 -u "$MNT2"
	umount_ro
}
# The tmpfs goes once the daemons that held its store open have exited
# (fusermount3 -u returns before they do): bounded polling.
umount_ro() {
	mountpoint -q "$WORK/ro" || return 0
	for i in $(seq 100); do umount "$WORK/ro" 2>/dev/null && return 0; sleep 0.1; done
	fail "cannot unmount $WORK/ro"
}

# field NAME [MOUNTPOINT]: a counter of user.tilefs.index.
field() {
	getfattr --absolute-names --only-values -n user.tilefs.index "${2:-$MNT}" | tr ' ' '\n' | sed -n "s/^$1=//p"
}
expect_field() {
	v=$(field "$1" "${3:-$MNT}")
	[ "$v" = "$2" ] || fail "$1=$v, expected $2 ($(getfattr --absolute-names --only-values -n user.tilefs.index "${3:-$MNT}"))"
}

# Tile files with no filters, written here: one tile, chunks of the given
# sizes (their bytes are the file's decoded bytes).
cat > "$WORK/mk.py" <<'PY'
import os, random, struct, sys

def tile_file(path, chunks, seed):
    rnd = random.Random(seed)
    data = [bytes(rnd.getrandbits(8) for _ in range(n)) for n in chunks]
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(chunks)))
        for d in data:
            f.write(struct.pack("<III", len(d), len(d), 0) + d)
    return b"".join(data)

def decoded(path):
    b = open(path, "rb").read()
    (k,) = struct.unpack_from("<Q", b)
    at, out = 8, b""
    for _ in range(k):
        orig, filt, md = struct.unpack_from("<III", b, at)
        out += b[at + 12 + md:at + 12 + md + filt]
        at += 12 + md + filt
    return out

if __name__ == "__main__":
    what, out = sys.argv[1], sys.argv[2]
    if what == "check":         # every file of SRC through MNT: its bytes
        src, mnt, n = out, sys.argv[3], 0
        for d, _, files in os.walk(src):
            for name in files:
                p = os.path.join(d, name)
                got = open(os.path.join(mnt, os.path.relpath(p, src)), "rb").read()
                assert got == decoded(p), p
                n += 1
        assert n == int(sys.argv[4]), n
    if what == "versions":      # same stored size (2032), other layouts and sizes
        open(out + "/v1.raw", "wb").write(tile_file(out + "/v1.tdb", [1000, 1000], 1))
        open(out + "/v2.raw", "wb").write(tile_file(out + "/v2.tdb", [2012], 2))
    elif what == "tiles":       # three tiles: 3, 2 and 1 chunks, and OUT.raw
        rnd, raw = random.Random(4), b""
        with open(out, "wb") as f:
            for chunks in [[65536] * 3, [65536, 1000], [5000]]:
                data = [bytes(rnd.getrandbits(8) for _ in range(n)) for n in chunks]
                f.write(struct.pack("<Q", len(chunks)))
                for d in data:
                    f.write(struct.pack("<III", len(d), len(d), 0) + d)
                raw += b"".join(data)
        open(out + ".raw", "wb").write(raw)
    elif what == "tree":        # N files in directories of 1000
        n = int(sys.argv[3])
        rnd = random.Random(3)
        for i in range(n):
            d = f"{out}/d{i // 1000}"
            os.makedirs(d, exist_ok=True)
            tile_file(f"{d}/f{i}.tdb", [rnd.randint(1, 700) for _ in range(rnd.randint(0, 4))], i)
PY
printf '[match *.tdb]\nfilters =\n' > "$WORK/t.ini"

# ---- 1. rewritten in place, mtime put back --------------------------------------------------
mkdir -p "$WORK/v" "$WORK/src1"
python3 "$WORK/mk.py" versions "$WORK/v" || fail "making versions"
cp "$WORK/v/v1.tdb" "$WORK/src1/f.tdb"
mount_fs "$WORK/t.ini" "$WORK/src1" -o index_dir="$WORK/idx1"
[ "$(stat -c %s "$MNT/f.tdb")" = 2000 ] || fail "v1 size"
cmp -s "$MNT/f.tdb" "$WORK/v/v1.raw" || fail "v1 bytes"
expect_field walks 1
expect_field writes 1
umount_fs
mount_fs "$WORK/t.ini" "$WORK/src1" -o index_dir="$WORK/idx1"
[ "$(stat -c %s "$MNT/f.tdb")" = 2000 ] || fail "v1 size from the store"
expect_field walks 0
expect_field hits 1
# A restored index makes its unit tables when first read: once the reader
# closes, what they hold is charged to the index budget (RELEASE comes
# after cat exits: bounded polling).
ib() { getfattr --absolute-names --only-values -n user.tilefs.cache "$MNT" | tr ' ' '\n' | sed -n 's/^index_bytes=//p'; }
before=$(ib)
cmp -s "$MNT/f.tdb" "$WORK/v/v1.raw" || fail "v1 bytes from the store"
i=0; while [ "$(ib)" -le "$before" ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.05; done
[ "$(ib)" -gt "$before" ] || fail "unit tables made by a read not charged: index_bytes $before -> $(ib)"
umount_fs
mtime=$(stat -c %y "$WORK/src1/f.tdb") ctime=$(stat -c %z "$WORK/src1/f.tdb")
dd if="$WORK/v/v2.tdb" of="$WORK/src1/f.tdb" conv=notrunc status=none	# same inode, same size
touch -d "$mtime" "$WORK/src1/f.tdb"
[ "$(stat -c %y "$WORK/src1/f.tdb")" = "$mtime" ] || fail "mtime not restored"
[ "$(stat -c %z "$WORK/src1/f.tdb")" != "$ctime" ] || fail "ctime did not move"
mount_fs "$WORK/t.ini" "$WORK/src1" -o index_dir="$WORK/idx1"
[ "$(stat -c %s "$MNT/f.tdb")" = 2012 ] || fail "the rewritten file shows the old index"
cmp -s "$MNT/f.tdb" "$WORK/v/v2.raw" || fail "v2 bytes"
expect_field stale 1
expect_field walks 1
umount_fs
ok "rewritten in place with its mtime restored: ctime detected, walked again"

# ---- 2. a corrupt entry -------------------------------------------------------------------
entry=$(ls "$WORK/idx1"/*.idx)
python3 - "$entry" <<'PY' || fail "corrupting"
import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[-3] ^= 0x40; open(p, "wb").write(b)
PY
mount_fs "$WORK/t.ini" "$WORK/src1" -o index_dir="$WORK/idx1"
[ "$(stat -c %s "$MNT/f.tdb")" = 2012 ] || fail "size after a corrupt entry"
cmp -s "$MNT/f.tdb" "$WORK/v/v2.raw" || fail "bytes after a corrupt entry"
expect_field corrupt 1
expect_field walks 1
expect_field writes 1
umount_fs
: > "$entry"	# truncated to nothing
mount_fs "$WORK/t.ini" "$WORK/src1" -o index_dir="$WORK/idx1"
cmp -s "$MNT/f.tdb" "$WORK/v/v2.raw" || fail "bytes after a truncated entry"
expect_field corrupt 1
umount_fs
ok "corrupt and truncated entries ignored and rebuilt"

# ---- 3. an index directory that cannot be written --------------------------------------------
mkdir -p "$WORK/ro"
mount -t tmpfs -o size=4m tmpfs "$WORK/ro" || fail "tmpfs"
# (a) cannot even be made: a warning in the log, a working mount
mount -o remount,ro "$WORK/ro" || fail "remount ro"
timeout 60 "$TILEFS" -f -o config="$WORK/t.ini",index_dir="$WORK/ro/idx" "$WORK/src1" "$MNT" \
	2> "$WORK/fg.log" &
for i in $(seq 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
mountpoint -q "$MNT" || fail "no mount with an unwritable index_dir: $(cat "$WORK/fg.log")"
cmp -s "$MNT/f.tdb" "$WORK/v/v2.raw" || fail "bytes with an unwritable index_dir"
expect_field persist no
expect_field walks 1
grep -q "not persisted" "$WORK/fg.log" || fail "no warning: $(cat "$WORK/fg.log")"
umount_fs
wait
# (b) exists, holds an entry, read-only now: read, never written
mount -o remount,rw "$WORK/ro" || fail "remount rw"
"$TILETOOL" index -c "$WORK/t.ini" --index-dir "$WORK/ro/idx" "$WORK/src1" > /dev/null || fail "tiletool index"
mount -o remount,ro "$WORK/ro" || fail "remount ro"
mount_fs "$WORK/t.ini" "$WORK/src1" -o index_dir="$WORK/ro/idx"
cmp -s "$MNT/f.tdb" "$WORK/v/v2.raw" || fail "bytes from a read-only store"
expect_field persist read-only
expect_field walks 0
expect_field hits 1
umount_fs
umount_ro
ok "unwritable index directory: the mount works, with a warning"

# ---- 4. two mounts sharing one index directory --------------------------------------------------
python3 "$WORK/mk.py" tree "$WORK/src4" 300 || fail "making the tree"
mkdir -p "$MNT2"
mount_fs "$WORK/t.ini" "$WORK/src4" -o index_dir="$WORK/idx4"
timeout 60 "$TILEFS" -o config="$WORK/t.ini",index_dir="$WORK/idx4" "$WORK/src4" "$MNT2" || fail "second mount"
# Both walk every file at once, in opposite orders, twice (the second
# round finds what either stored).
for round in 1 2; do
	find "$MNT/" -type f | xargs stat -c %s > /dev/null &
	find "$MNT2/" -type f | sort -r | xargs stat -c %s > /dev/null
	wait
done
[ "$(field corrupt)" = 0 ] && [ "$(field corrupt "$MNT2")" = 0 ] || fail "corrupt entries seen"
w1=$(field walks) w2=$(field walks "$MNT2")
[ $((w1 + w2)) -ge 300 ] || fail "walks $w1 + $w2 < 300 files"
fusermount3 -u "$MNT2"
umount_fs
# A third mount finds all 300 whole: no walk, no corrupt entry, the same bytes.
mount_fs "$WORK/t.ini" "$WORK/src4" -o index_dir="$WORK/idx4"
python3 "$WORK/mk.py" check "$WORK/src4" "$MNT" 300 || fail "bytes through the shared store"
expect_field walks 0
expect_field corrupt 0
expect_field hits 300
ls "$WORK/idx4" | grep -vq '\.idx$' && fail "temporary files left in the store"
umount_fs
ok "two mounts sharing one index directory: 300 entries whole"

# ---- 5. tiletool index on 10,000 files, then a mount that walks nothing ------------------------------
python3 "$WORK/mk.py" tree "$WORK/src5" 10000 || fail "making 10,000 files"
"$TILETOOL" index -j 4 -c "$WORK/t.ini" --index-dir "$WORK/idx5" "$WORK/src5" > "$WORK/summary" 2> "$WORK/err" ||
	fail "tiletool index: $(cat "$WORK/err")"
[ "$(wc -l < "$WORK/summary")" = 1 ] || fail "not one summary line: $(cat "$WORK/summary")"
grep -q "10000 files .* 10000 walked .* 0 failed" "$WORK/summary" || fail "summary: $(cat "$WORK/summary")"
[ ! -s "$WORK/err" ] || fail "no terminal, yet: $(cat "$WORK/err")"
# On a terminal: a progress line (files, bytes, rate, ETA) redrawn in place.
script -qec "'$TILETOOL' index -c '$WORK/t.ini' --index-dir '$WORK/idx5' '$WORK/src5'" /dev/null \
	> "$WORK/tty" || fail "tiletool index on a terminal"
grep -q "files .*/s  ETA [0-9]*:[0-9][0-9]" "$WORK/tty" || fail "no progress line: $(head -c 300 "$WORK/tty")"
grep -q "10000 already indexed" "$WORK/tty" || fail "second run: $(tail -c 300 "$WORK/tty")"
mount_fs "$WORK/t.ini" "$WORK/src5" -o index_dir="$WORK/idx5"
n=$(ls -lR "$MNT" | grep -c '\.tdb$')
[ "$n" = 10000 ] || fail "ls -lR listed $n files"
expect_field walks 0
expect_field corrupt 0
[ "$(field hits)" -ge 10000 ] || fail "hits $(field hits)"
python3 "$WORK/mk.py" check "$WORK/src5" "$MNT" 10000 || fail "bytes through the store"
umount_fs
ok "tiletool index of 10,000 files: progress shown; the mount walked none"

# index_at_mount: the same, in the background, reported as it goes.
mount_fs "$WORK/t.ini" "$WORK/src5" -o index_dir="$WORK/idx5b",index_at_mount
for i in $(seq 600); do [ "$(field background)" = done ] && break; sleep 0.1; done
expect_field background done
expect_field files_seen 10000
expect_field files_indexed 10000
expect_field walks 10000
ls -lR "$MNT" > /dev/null
expect_field walks 10000
umount_fs
ok "index_at_mount indexed 10,000 files in the background; ls -lR then walked none"

# ---- 6. index directories that must not be used ----------------------------------------------------
# snap DIR: mode and owner of DIR and of everything in it, and a digest of
# every file's bytes.
snap() {
	stat -c '%a %U %G %n' "$1"
	find "$1" -mindepth 1 -printf '%m %u %P\n' | sort
	find "$1" -mindepth 1 -type f -exec sha1sum {} + | sort
}
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
# refused WHAT DIR MESSAGE: mounting with -o index_dir=DIR fails with
# status 3 and MESSAGE, naming the option, and WHAT is left as it was.
refused() {
	before=$(snap "$1")
	timeout 60 "$TILEFS" -o config="$WORK/t.ini",index_dir="$2" "$WORK/src6" "$MNT" 2> "$WORK/err6"
	rc=$?
	mountpoint -q "$MNT" && { umount_fs; fail "mounted with index_dir=$2"; }
	[ $rc = 3 ] || fail "index_dir=$2: exit $rc, not 3: $(cat "$WORK/err6")"
	grep -q "index_dir $2: $3.*refused.*(-o index_dir)" "$WORK/err6" || fail "index_dir=$2: $(cat "$WORK/err6")"
	[ "$(snap "$1")" = "$before" ] || fail "index_dir=$2 changed $1: $before -> $(snap "$1")"
}
mkdir -p "$WORK/src6"
python3 "$WORK/mk.py" tiles "$WORK/src6/f.tdb" || fail "making a file of three tiles"
mv "$WORK/src6/f.tdb.raw" "$WORK/f6.raw"
# nobody indexes the file into a store of its own and drops the entry,
# with an old temporary file, into a root-owned 1777 directory.
chmod 755 "$WORK" "$WORK/src6"
mkdir -p "$WORK/sticky" "$WORK/nobody"
chmod 1777 "$WORK/sticky"
chown nobody "$WORK/nobody"
as_nobody "$TILETOOL" index -c "$WORK/t.ini" --index-dir "$WORK/nobody/idx" "$WORK/src6" > /dev/null ||
	fail "tiletool index as nobody"
as_nobody cp "$WORK"/nobody/idx/*.idx "$WORK/sticky/" || fail "dropping the entry"
as_nobody touch -d '3 hours ago' "$WORK/sticky/.session.tmp" || fail "an old file of nobody's"
chmod 700 "$WORK"
refused "$WORK/sticky" "$WORK/sticky" "writable by every user (mode 1777)"
# Another user's directory, and one reached through a symlink: in the
# middle (link -> victim, index_dir = link/data, as in the issue: data is
# root's, 0755), at the end, or before a directory still to be made.
mkdir -p "$WORK/theirs" "$WORK/victim/data"
chmod 700 "$WORK/theirs"
chmod 755 "$WORK/victim/data"
chown nobody "$WORK/theirs"
refused "$WORK/theirs" "$WORK/theirs" "owned by uid 65534"
ln -s "$WORK/victim" "$WORK/link"
refused "$WORK/victim" "$WORK/link/data" "'link' is a symbolic link"
refused "$WORK/victim" "$WORK/link/new" "'link' is a symbolic link"
refused "$WORK/victim" "$WORK/link" "'link' is a symbolic link"
# Set in a configuration file: FILE:LINE named.
printf '[tilefs]\nindex_dir = %s\n[match *.tdb]\nfilters =\n' "$WORK/sticky" > "$WORK/t6.ini"
timeout 60 "$TILEFS" -o config="$WORK/t6.ini" "$WORK/src6" "$MNT" 2> "$WORK/err6"
rc=$?
mountpoint -q "$MNT" && { umount_fs; fail "mounted with a 1777 index_dir from the configuration"; }
[ $rc = 3 ] && grep -q "^tilefs: $WORK/t6.ini:2: index_dir $WORK/sticky: writable by every user" "$WORK/err6" ||
	fail "index_dir in a configuration file: exit $rc: $(cat "$WORK/err6")"
# The default directory ($TILEFS_INDEX_DIR here): a warning, no store.
before=$(snap "$WORK/sticky")
TILEFS_INDEX_DIR=$WORK/sticky timeout 60 "$TILEFS" -o config="$WORK/t.ini" "$WORK/src6" "$MNT" 2> "$WORK/err6" ||
	fail "the default index_dir refused the mount: $(cat "$WORK/err6")"
grep -q "index_dir $WORK/sticky: writable by every user.*refused.*not persisted" "$WORK/err6" ||
	{ umount_fs; fail "no warning for the default index_dir: $(cat "$WORK/err6")"; }
cmp -s "$MNT/f.tdb" "$WORK/f6.raw" || { umount_fs; fail "bytes without a store"; }
expect_field persist no
umount_fs
[ "$(snap "$WORK/sticky")" = "$before" ] || fail "the default index_dir was changed"
# A relative -o index_dir: under the working directory, not under /.
rel=tilefs-test-relidx-$$
(cd "$WORK" && mount_fs "$WORK/t.ini" "$WORK/src6" -o index_dir="$rel") || fail "relative index_dir"
stat "$MNT/f.tdb" > /dev/null
umount_fs
[ -d "/$rel" ] && { rm -rf "/${rel:?}"; fail "-o index_dir=$rel made /$rel"; }
ls "$WORK/$rel" | grep -q '\.idx$' || fail "-o index_dir=$rel: no entry in $WORK/$rel"
ok "index_dir writable by others, another user's or through a symlink: refused, left as it was"
# ---- 7. a forged entry: tile 0 claimed 4 bytes longer --------------------------------------------
# The entry's format (src/cache/tf_index.c, src/format/tf_file_index.c; formats 1 and 2
# hold the same payload), patched with its checksum made valid again: tile
# 0's decoded size + 4, and its last unit's.
cat > "$WORK/forge.py" <<'PY'
import struct, sys, zlib

def vget(b, at):
    v = s = 0
    while True:
        c = b[at]; at += 1
        v |= (c & 0x7f) << s; s += 7
        if not c & 0x80:
            return v, at

def vput(v):
    out = bytearray()
    while True:
        c, v = v & 0x7f, v >> 7
        out.append(c | (0x80 if v else 0))
        if not v:
            return bytes(out)

e = open(sys.argv[1], "rb").read()
plen, = struct.unpack_from("<Q", e, 16)
head, p = e[:len(e) - plen], e[len(e) - plen:]
kind, at = vget(p, 0)
n, at = vget(p, at)
out = vput(kind) + vput(n)
for t in range(n):
    stored, at = vget(p, at); size, at = vget(p, at); nch, at = vget(p, at)
    nu, at = vget(p, at); ulen, at = vget(p, at)
    units, prev = [], (65536, 1)
    for _ in range(nu):
        v, at = vget(p, at)
        sz, c = prev
        if v & 1:
            sz, at = vget(p, at); c, at = vget(p, at)
        units.append([v >> 1, sz, c]); prev = (sz, c)
    if t == 0:
        units[-1][1] += 4
    u = b"".join(vput(s << 1 | 1) + vput(z) + vput(c) for s, z, c in units)
    out += vput(stored) + vput(size + 4 if t == 0 else size) + vput(nch)
    out += vput(len(units)) + vput(len(u)) + u
assert at == len(p)
e = bytearray(head + out)
struct.pack_into("<Q", e, 16, len(out))
struct.pack_into("<I", e, 12, zlib.crc32(bytes(e[16:])) & 0xffffffff)
open(sys.argv[1], "wb").write(bytes(e))
PY
"$TILETOOL" index -c "$WORK/t.ini" --index-dir "$WORK/idx6" "$WORK/src6" > /dev/null || fail "tiletool index"
python3 "$WORK/forge.py" "$WORK"/idx6/*.idx || fail "forging the entry"
true_size=$(stat -c %s "$WORK/f6.raw")
mount_fs "$WORK/t.ini" "$WORK/src6" -o index_dir="$WORK/idx6"
[ "$(stat -c %s "$MNT/f.tdb")" = $((true_size + 4)) ] || fail "the forged entry was not used"
# Tile 1 read before tile 0 (pages wholly inside it as claimed): the true
# bytes of that range, or EIO - never tile 1's bytes shifted by 4.
python3 - "$MNT/f.tdb" "$WORK/f6.raw" $((65536 * 3 + 8192)) <<'PY' || fail "tile 1 read first"
import errno, os, sys
raw, at = open(sys.argv[2], "rb").read(), int(sys.argv[3])
fd = os.open(sys.argv[1], os.O_RDONLY)
try:
    got = os.pread(fd, 4096, at)
except OSError as e:
    assert e.errno == errno.EIO, e
    sys.exit(0)
assert got == raw[at:at + len(got)], "wrong bytes: %s" % (
    "tile 1 shifted by 4" if got == raw[at - 4:at - 4 + len(got)] else "?")
PY
cmp -s "$MNT/f.tdb" "$WORK/f6.raw" && fail "the forged file read whole"
expect_field corrupt 1
umount_fs
ls "$WORK/idx6" | grep -q '\.idx$' && fail "the forged entry was kept"
mount_fs "$WORK/t.ini" "$WORK/src6" -o index_dir="$WORK/idx6"
[ "$(stat -c %s "$MNT/f.tdb")" = "$true_size" ] || fail "size after the forged entry: $(stat -c %s "$MNT/f.tdb")"
cmp -s "$MNT/f.tdb" "$WORK/f6.raw" || fail "bytes after the forged entry"
expect_field walks 1
umount_fs
ok "a forged entry (tile 0 + 4 bytes) serves no shifted byte, is removed, and the next mount walks"
