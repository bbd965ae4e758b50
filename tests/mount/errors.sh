#!/bin/sh
# Errors through the mount: a corrupt chunk gives EIO for its range only and
# the daemon lives on; a wrong key gives EIO; a bad config or key file is
# refused at mount time with FILE:LINE; writes give EROFS; a source file
# replaced while mounted is served with its new bytes.
. "$(dirname "$0")/lib.sh"

src=$WORK/src
mkdir -p "$src/d"
head -c 600000 /dev/urandom | od -An -tx1 -v | tr -d ' \n' | head -c 400000 > "$WORK/plain.bin"
ln -s d/good.tdb "$src/link"
"$TILETOOL" encode -F zstd -t uint8 "$WORK/plain.bin" "$src/d/good.tdb" || fail "encode"
cp "$src/d/good.tdb" "$src/d/bad.tdb"
cat > "$WORK/t.ini" <<INI
[tilefs]
cache_size = 16M
[match *.tdb]
filters = zstd
datatype = uint8
INI
# Chunk 2's zstd frame starts after its 12-byte header and 16-byte zstd header;
# break its magic number ("tiletool info -v" lists where each chunk is stored).
at=$("$TILETOOL" info -v -F zstd "$src/d/bad.tdb" | awk '$1 == 0 && $2 == 2 { print $5 + 28 }')
[ -n "$at" ] || fail "no chunk 2 in the test file"
printf '\377' | dd of="$src/d/bad.tdb" bs=1 seek="$at" conv=notrunc 2>/dev/null
mount_fs "$WORK/t.ini" "$src"

cmp "$MNT/d/good.tdb" "$WORK/plain.bin" || fail "good file differs"
[ "$(readlink "$MNT/link")" = d/good.tdb ] || fail "symlink not shown as a link"
cmp "$MNT/link" "$WORK/plain.bin" || fail "reading through a symlink"
cat "$MNT/d/bad.tdb" > /dev/null 2> "$WORK/err" && fail "reading a corrupt chunk succeeded"
grep -q "Input/output error" "$WORK/err" || fail "corrupt chunk: expected EIO, got: $(cat "$WORK/err")"
dd if="$MNT/d/bad.tdb" bs=65536 count=2 2>/dev/null | cmp -s - "$(dd if="$WORK/plain.bin" bs=65536 count=2 2>/dev/null > "$WORK/head"; echo "$WORK/head")" ||
	fail "chunks before the corrupt one are not readable"
dd if="$MNT/d/bad.tdb" bs=65536 skip=3 2>/dev/null | cmp -s - "$(dd if="$WORK/plain.bin" bs=65536 skip=3 2>/dev/null > "$WORK/tail"; echo "$WORK/tail")" ||
	fail "chunks after the corrupt one are not readable"
dd if="$MNT/d/bad.tdb" bs=65536 skip=2 count=1 of=/dev/null 2>/dev/null && fail "corrupt range read without error"
getfattr --only-values -n user.tilefs.error "$MNT/d/bad.tdb" 2>/dev/null | grep -q "tile 0, chunk 2: filter 0 (zstd)" ||
	fail "user.tilefs.error does not name tile, chunk and filter"
mountpoint -q "$MNT" && cmp -s "$MNT/d/good.tdb" "$WORK/plain.bin" || fail "daemon died after a corrupt chunk"
ok "corrupt chunk: EIO for its range, the rest reads, the error names tile 0 chunk 2 zstd"

# Byte-granular isolation (issue 8): tiles of 1 KiB share pages, so the
# kernel's page-sized reads of a bad tile's page would fail its intact
# neighbours too.  Once a file has shown a bad chunk, later opens are served
# with direct I/O: every intact byte reads at any offset and length, and
# only the bad tile's own bytes give EIO.
head -c 20480 /dev/urandom > "$WORK/small.bin"
"$TILETOOL" encode -F 'sha256 | zstd' -t uint8 --tile-size 1024 "$WORK/small.bin" "$src/d/small.tdb" ||
	fail "encode 1 KiB tiles"
at=$("$TILETOOL" info -v -F 'sha256 | zstd' "$src/d/small.tdb" | awk '$1 == 5 && $2 == 0 { print $5 + $6 - 3 }')
[ -n "$at" ] || fail "no tile 5 in the 1 KiB-tile file"
printf '\125' | dd of="$src/d/small.tdb" bs=1 seek="$at" conv=notrunc 2>/dev/null
{ printf '[match small.tdb]\nfilters = sha256 | zstd\ndatatype = uint8\n'; cat "$WORK/t.ini"; } > "$WORK/small.ini"
umount_fs
mount_fs "$WORK/small.ini" "$src"
cat "$MNT/d/small.tdb" > /dev/null 2>&1 && fail "a bad 1 KiB tile read"
# dd reads exactly what it is asked for (cmp would read whole blocks).
same() {
	dd if="$MNT/d/small.tdb" bs="$2" skip="$1" count=1 iflag=skip_bytes 2>/dev/null > "$WORK/got" &&
		dd if="$WORK/small.bin" bs="$2" skip="$1" count=1 iflag=skip_bytes 2>/dev/null | cmp -s - "$WORK/got"
}
same 4096 1024 || fail "tile 4 (same page as bad tile 5) unreadable after the failure"
same 6144 2048 || fail "tiles 6-7 (same page as bad tile 5) unreadable after the failure"
same 5119 1 || fail "the last byte before the bad tile unreadable"
dd if="$MNT/d/small.tdb" bs=1 skip=5120 count=1 of=/dev/null 2>/dev/null && fail "a byte of the bad tile read"
dd if="$MNT/d/small.tdb" bs=1024 skip=5 count=1 of=/dev/null 2>/dev/null && fail "the bad tile read"
head -c 5120 "$MNT/d/small.tdb" | cmp -s - "$(head -c 5120 "$WORK/small.bin" > "$WORK/h5"; echo "$WORK/h5")" ||
	fail "the 5 tiles before the bad one do not read in one read"
ok "1 KiB tiles: after a bad tile, its neighbours in the same page read to the byte; only its own range fails"

# Short reads (issue 19, item 8): 1 KiB tiles, tile 2 bad.  A read gets
# the bytes before the bad tile (a short read, as from a disk with a bad
# sector) and EIO only when its first byte is bad, so buffered readers
# (stdio, Python, cat) and dd conv=noerror, ddrescue get every intact byte.
# Through the page cache the kernel fills whole pages and takes a short
# reply for the end of the file, so there the unit is the page: page 0 fails
# on the first open; once the node has failed, opens get direct I/O, and an
# O_DIRECT reader is served to the byte at once.  A page-cache fill (an mmap
# of a direct I/O handle) is never answered short: the kernel would have
# cached zeros and cut the file's size.
mkdir -p "$src/short"
head -c 20480 /dev/urandom > "$WORK/two.bin"
"$TILETOOL" encode -F 'sha256 | zstd' -t uint8 --tile-size 1024 "$WORK/two.bin" "$src/short/two.tdb" ||
	fail "encode 1 KiB tiles"
at=$("$TILETOOL" info -v -F 'sha256 | zstd' "$src/short/two.tdb" | awk '$1 == 2 && $2 == 0 { print $5 + $6 - 3 }')
[ -n "$at" ] || fail "no tile 2 in the 1 KiB-tile file"
printf '\125' | dd of="$src/short/two.tdb" bs=1 seek="$at" conv=notrunc 2>/dev/null
printf '[match two.tdb]\nfilters = sha256 | zstd\ndatatype = uint8\n' > "$WORK/short.ini"
umount_fs
mount_fs "$WORK/short.ini" "$src"
python3 - "$MNT/short/two.tdb" "$WORK/two.bin" <<'PY' || fail "short reads around a bad tile"
import errno, mmap, os, signal, subprocess, sys
path, want = sys.argv[1], open(sys.argv[2], "rb").read()

def pread(fd, n, off):
    try:
        return os.pread(fd, n, off)
    except OSError as e:
        return e.errno

def expect(got, off, n, what):
    if isinstance(got, int) or got != want[off:off + n]:
        sys.exit("%s: got %s, want %d good bytes" % (what, got if isinstance(got, int) else
                                                     "%d bytes" % len(got), n))

def expect_eio(got, what):
    if got != errno.EIO:
        sys.exit("%s: got %s, want EIO" % (what, got if isinstance(got, int) else "%d bytes" % len(got)))

# First open, through the page cache: the unit is the page.
fd = os.open(path, os.O_RDONLY)
expect_eio(pread(fd, 8192, 0), "page cache, [0, 8192) (page 0 holds tile 2)")
expect(pread(fd, 4096, 4096), 4096, 4096, "page cache, page 1")
os.close(fd)
# O_DIRECT, on a handle that uses the page cache: to the byte.
fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 8192)
n = os.preadv(fd, [buf], 0)
expect(buf[:n], 0, 2048, "O_DIRECT [0, 8192)")
os.close(fd)
# The node has failed: a plain open gets direct I/O.
fd = os.open(path, os.O_RDONLY)
expect(pread(fd, 8192, 0), 0, 2048, "[0, 8192)")
expect_eio(pread(fd, 8192, 2048), "a read starting at the bad tile")
expect_eio(pread(fd, 1, 3071), "the bad tile's last byte")
expect(pread(fd, 10, 2047), 2047, 1, "[2047, 2057)")
expect(pread(fd, 8192, 3072), 3072, 8192, "[3072, 11264)")
expect(pread(fd, 1 << 20, 3072), 3072, 20480 - 3072, "from 3072 to the end")
os.close(fd)
with open(path, "rb") as f:
    if f.read(100) != want[:100]:
        sys.exit("a buffered reader's first 100 bytes")
# mmap of a direct I/O handle: page cache fills, never short.
probe = ("import mmap, os, sys\n"
         "m = mmap.mmap(os.open(sys.argv[1], os.O_RDONLY), 0, mmap.MAP_PRIVATE, mmap.PROT_READ)\n"
         "sys.stdout.buffer.write(m[int(sys.argv[2]):int(sys.argv[2]) + 1024])\n")
r = subprocess.run([sys.executable, "-c", probe, path, "8192"], capture_output=True)
if r.returncode or r.stdout != want[8192:9216]:
    sys.exit("mmap, page 2 of a direct I/O handle: status %d, %d bytes" % (r.returncode, len(r.stdout)))
r = subprocess.run([sys.executable, "-c", probe, path, "0"], capture_output=True)
if r.returncode != -signal.SIGBUS:
    sys.exit("mmap, page 0 (holds the bad tile): status %d, want SIGBUS" % r.returncode)
if os.stat(path).st_size != 20480:
    sys.exit("the size after an mmap fault in the bad page: %d" % os.stat(path).st_size)
fd = os.open(path, os.O_RDONLY)
expect(pread(fd, 4096, 4096), 4096, 4096, "page 1 after the mmap fault")
os.close(fd)
PY
cat "$MNT/short/two.tdb" > "$WORK/got" 2> "$WORK/err" && fail "cat of a file with a bad tile succeeded"
head -c 2048 "$WORK/two.bin" | cmp -s - "$WORK/got" || fail "cat did not get the 2048 bytes before the bad tile"
grep -q "Input/output error" "$WORK/err" || fail "cat: $(cat "$WORK/err")"
python3 -c 'import sys; d = bytearray(open(sys.argv[1], "rb").read()); d[2048:3072] = bytes(1024); sys.stdout.buffer.write(d)' \
	"$WORK/two.bin" > "$WORK/want"
dd if="$MNT/short/two.tdb" of="$WORK/got" bs=1k conv=noerror,sync 2>/dev/null
cmp -s "$WORK/got" "$WORK/want" || fail "dd conv=noerror,sync bs=1k: not every intact byte, or not zeros for the bad tile"
ok "1 KiB tiles, tile 2 bad: reads end short before it, EIO only from inside it; cat, dd conv=noerror, mmap behave as on a disk"

# Tiles of 256 bytes: a 1 MiB read spans 4,096 units, each a slice of the
# cache.  The kernel takes at most 1024 vectors in one reply; a reply of
# more was refused and the reader waited for ever.
head -c 3145728 /dev/urandom > "$WORK/tiny.bin"
"$TILETOOL" encode -F zstd -t uint8 --tile-size 256 "$WORK/tiny.bin" "$src/d/tiny.tdb" || fail "encode 256-byte tiles"
umount_fs
mount_fs "$WORK/t.ini" "$src"
timeout 60 dd if="$MNT/d/tiny.tdb" bs=1M 2>/dev/null | cmp -s - "$WORK/tiny.bin" ||
	fail "a file of 256-byte tiles read in 1 MiB requests: hung or differs"
ok "256-byte tiles: 1 MiB requests of 4,096 units each read byte-exact"

# Writes of every kind are refused with EROFS.
for attempt in "echo x > '$MNT/d/good.tdb'" "touch '$MNT/d/new'" "mkdir '$MNT/e'" \
	"mv '$MNT/d/good.tdb' '$MNT/d/x'" "rm '$MNT/d/good.tdb'" "truncate -s 0 '$MNT/d/good.tdb'"; do
	sh -c "$attempt" 2> "$WORK/err" && fail "allowed: $attempt"
	grep -q "Read-only file system" "$WORK/err" || fail "not EROFS: $attempt: $(cat "$WORK/err")"
done
ok "writes, creates, renames, removes, truncates give EROFS"

# A source file replaced while mounted: the new bytes (and size) are served.
head -c 100000 /dev/urandom > "$WORK/new.bin"
"$TILETOOL" encode -F zstd -t uint8 "$WORK/new.bin" "$src/d/next.tdb"
cmp -s "$MNT/d/good.tdb" "$WORK/plain.bin" || fail "before replace"
mv "$src/d/next.tdb" "$src/d/good.tdb"
cmp "$MNT/d/good.tdb" "$WORK/new.bin" || fail "replaced source not served"
ok "replaced source: new bytes and size served"
umount_fs

# Encrypted data: right key reads, wrong key gives EIO.
head -c 32 /dev/urandom > "$WORK/k1"; head -c 32 /dev/urandom > "$WORK/k2"
chmod 600 "$WORK/k1" "$WORK/k2"
rm -f "$src/d/"*.tdb
"$TILETOOL" encode -F 'byteshuffle | zstd' -t int32 -k "$WORK/k1" "$WORK/new.bin" "$src/d/enc.tdb" || fail "encode with key"
for k in k1 k2; do
	printf '[key k]\nfile = %s\n[match *.tdb]\nfilters = byteshuffle | zstd\ndatatype = int32\nkey = k\n' \
		"$WORK/$k" > "$WORK/$k.ini"
done
mount_fs "$WORK/k1.ini" "$src"
cmp "$MNT/d/enc.tdb" "$WORK/new.bin" || fail "right key does not decode"
umount_fs
mount_fs "$WORK/k2.ini" "$src"
cat "$MNT/d/enc.tdb" > /dev/null 2> "$WORK/err" && fail "wrong key read succeeded"
grep -q "Input/output error" "$WORK/err" || fail "wrong key: expected EIO"
getfattr --only-values -n user.tilefs.error "$MNT/d/enc.tdb" 2>/dev/null | grep -q "wrong key" ||
	fail "wrong key: error attribute does not say so"
umount_fs
ok "right key decodes, wrong key gives EIO"

# Refused at mount time, with FILE:LINE and the documented exit status.
printf '[tilefs]\ncache_size = 16M\n\n[match *.tdb]\nfilters = zstd | nosuch\n' > "$WORK/bad.ini"
"$TILEFS" -o config="$WORK/bad.ini" "$src" "$MNT" 2> "$WORK/err"
rc=$?
[ "$rc" = 3 ] || fail "bad config: exit status $rc, want 3"
grep -q "bad.ini:5: filters: filter 2 'nosuch': unknown filter 'nosuch'" "$WORK/err" || fail "bad config message: $(cat "$WORK/err")"
mountpoint -q "$MNT" && fail "mounted despite a bad config"
chmod 644 "$WORK/k1"
"$TILEFS" -o config="$WORK/k1.ini" "$src" "$MNT" 2> "$WORK/err"
rc=$?
[ "$rc" = 4 ] || fail "readable key file: exit status $rc, want 4"
grep -q "k1.ini:2: \[key k\]: .*readable by group or others" "$WORK/err" || fail "key file message: $(cat "$WORK/err")"
od -An -tx1 "$WORK/k1" | tr -d ' \n' > "$WORK/k1.hex"
grep -qF "$(cut -c1-16 "$WORK/k1.hex")" "$WORK/err" && fail "key material in an error message"
ok "bad config and readable key file refused with FILE:LINE (exit 3 and 4)"

# As fstab mounts it: through mount.fuse3 with -o options (fuse.tilefs).
command -v mount.fuse3 >/dev/null 2>&1 || fail "no mount.fuse3 (package fuse3)"
mount.fuse3 "$TILEFS#$src" "$MNT" -o config="$WORK/k1.ini",allow_other 2> "$WORK/err" &&
	fail "mount.fuse3 accepted a key file readable by others"
chmod 600 "$WORK/k1"
mount.fuse3 "$TILEFS#$src" "$MNT" -o config="$WORK/k1.ini",allow_other || fail "mount.fuse3"
grep -q " $MNT fuse.tilefs ro," /proc/mounts || fail "not a read-only fuse.tilefs mount"
# head fstat()s its descriptor: getattr arrives with a handle and no path.
head -c 1000 "$WORK/new.bin" > "$WORK/h"
head -c 1000 "$MNT/d/enc.tdb" | cmp -s - "$WORK/h" || fail "head through mount.fuse3"
umount_fs
ok "mount.fuse3 (fstab) mounts with -o config=...,allow_other"

# Resources (issue 9): 300 files opened, read and closed, then deleted from
# SOURCE, leave the daemon holding a bounded number of descriptors (the old
# driver kept one per file ever opened: 307 after 300).
mkdir -p "$WORK/many"
head -c 4000 "$WORK/plain.bin" > "$WORK/small.bin"
"$TILETOOL" encode -F zstd -t uint8 "$WORK/small.bin" "$WORK/many/f0.tdb" || fail "encode small"
for i in $(seq 1 299); do cp "$WORK/many/f0.tdb" "$WORK/many/f$i.tdb"; done
printf '[match *.tdb]\nfilters = zstd\ndatatype = uint8\n' > "$WORK/many.ini"
mount_fs "$WORK/many.ini" "$WORK/many"
pid=$(pgrep -f -n "tilefs -o config=$WORK/many.ini") || fail "no tilefs process"
before=$(ls "/proc/$pid/fd" | wc -l)
for i in $(seq 0 299); do cmp -s "$MNT/f$i.tdb" "$WORK/small.bin" || fail "f$i.tdb differs"; done
rm -f "$WORK"/many/f1*.tdb "$WORK"/many/f2*.tdb
ls "$MNT" > /dev/null
after=$(ls "/proc/$pid/fd" | wc -l)
umount_fs
[ "$after" -le $((before + 16)) ] || fail "$after descriptors after 300 files opened and closed ($before before)"
ok "300 files opened, read, closed and deleted: $after descriptors held ($before at mount)"
