#!/bin/sh
# Faults from the source (issue 9, item 5), through the mount:
#   - EIO from the disk (tests/robust/eioshim.so, LD_PRELOAD'ed into tilefs:
#     pread of one stored file fails over a chosen byte range) while data is
#     read: EIO exactly for the decoded pages of the units stored there,
#     every other byte exact; while the index is built: EIO for that file,
#     and it reads again once the disk does (a failed index is retried);
#   - a source truncated in place while open, and one deleted while open:
#     every read gives the version opened or EIO; a new open sees the change;
#   - always: no hang (every read under a timeout), the daemon alive, the
#     rest of the mount readable.
. "$(dirname "$0")/../mount/lib.sh"

SHIM=${EIOSHIM:?}
[ -f "$SHIM" ] || fail "no $SHIM (make check builds it)"
mkdir -p "$WORK/src/sub"
python3 - "$WORK/raw.bin" <<'PY' || fail "making data"
import struct, sys
open(sys.argv[1], "wb").write(b"".join(struct.pack("<I", i * 2654435761 % 2**32) for i in range(1 << 20)))
PY
for f in f g h d; do
	"$TILETOOL" encode -F 'zstd' -t uint32 --tile-size 262144 "$WORK/raw.bin" "$WORK/src/sub/$f.tdb" || fail "encode"
done
printf '[match **.tdb]\nfilters = zstd\ndatatype = uint32\n' > "$WORK/t.ini"

# Stored extent of tile 5 of f.tdb, and its decoded range (256 KiB tiles).
range=$(python3 - "$WORK/src/sub/f.tdb" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
pos = 0
for t in range(6):
    start, n = pos, struct.unpack_from("<Q", b, pos)[0]
    pos += 8
    for _ in range(n):
        o, f, m = struct.unpack_from("<III", b, pos)
        pos += 12 + f + m
print(start + 8, pos)   # the chunks, not the count: the walk reads that
PY
)
set -- $range
from=$1 to=$2

export TILEFS_EIO_NAME=f.tdb TILEFS_EIO_FROM=$from TILEFS_EIO_TO=$to TILEFS_EIO_ARM=$WORK/arm
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 LD_PRELOAD=$SHIM \
	mount_fs "$WORK/t.ini" "$WORK/src" -o cache_size=4M
unset TILEFS_EIO_NAME

# judge FILE EIO_FROM EIO_TO: open FILE (its index built), arm the fault,
# read page by page (a timeout says hang); pages meeting [EIO_FROM, EIO_TO)
# must fail EIO, all others be exact.
judge() {
	timeout 60 python3 - "$1" "$WORK/raw.bin" "$2" "$3" "$WORK/arm" <<'PY'
import errno, os, sys
path, raw, lo, hi = sys.argv[1], open(sys.argv[2], "rb").read(), int(sys.argv[3]), int(sys.argv[4])
fd = os.open(path, os.O_RDONLY)
open(sys.argv[5], "w").close()
bad = eio = 0
for off in range(0, len(raw), 4096):
    want_eio = off < hi and lo < off + 4096
    try:
        got = os.pread(fd, 4096, off)
    except OSError as e:
        if e.errno != errno.EIO or not want_eio:
            print("page %d: %s" % (off, e)); bad += 1
        eio += 1
        continue
    if want_eio or got != raw[off:off + 4096]:
        print("page %d: %s" % (off, "served, want EIO" if want_eio else "wrong bytes")); bad += 1
print("%d pages EIO" % eio)
sys.exit(1 if bad else 0)
PY
}
alive() { mountpoint -q "$MNT" && cmp -s "$MNT/sub/h.tdb" "$WORK/raw.bin" || fail "mount dead after $1"; }

# EIO while reading data: the index is built first (the open's lookup walks
# the headers), then the disk fails tile 5's chunks.
out=$(judge "$MNT/sub/f.tdb" $((5 << 18)) $((6 << 18))) || fail "EIO from the disk: $out"
ok "EIO from the disk for tile 5 only: $out, every other page exact"
alive "EIO while reading"

# EIO while indexing: ff.tdb (its name holds "f.tdb": the same fault) is
# first looked up while the disk fails the range its header walk reads.  It
# fails whole, the others read; once the disk answers again the index is
# retried (after a second) and it reads; so does f.tdb.
cp "$WORK/src/sub/f.tdb" "$WORK/src/sub/ff.tdb"
touch "$WORK/arm"
timeout 30 cat "$MNT/sub/ff.tdb" > /dev/null 2>&1 && fail "ff.tdb read whole with its disk failing"
[ "$(timeout 30 python3 -c 'import errno, sys
try: open(sys.argv[1], "rb").read()
except OSError as e: print(errno.errorcode[e.errno])' "$MNT/sub/ff.tdb")" = EIO ] || fail "ff.tdb: not EIO"
alive "EIO while indexing"
ok "EIO while indexing: that file EIO, the rest of the mount reads"
rm -f "$WORK/arm"
for f in ff f; do
	i=0
	until timeout 30 cmp -s "$MNT/sub/$f.tdb" "$WORK/raw.bin"; do
		i=$((i + 1)); [ "$i" -lt 50 ] || fail "$f.tdb did not read again once the disk answered"
		sleep 0.1	# bounded polling: a failed index is retried after a second
	done
done
ok "after the disk answers again, ff.tdb and f.tdb read whole"

# Truncated in place while open: the version opened or EIO, then the change.
timeout 60 python3 - "$MNT/sub/g.tdb" "$WORK/src/sub/g.tdb" "$WORK/raw.bin" <<'PY' || fail "truncated while open"
import errno, os, sys
mnt, src, raw = sys.argv[1], sys.argv[2], open(sys.argv[3], "rb").read()
fd = os.open(mnt, os.O_RDONLY)
assert os.pread(fd, 65536, 0) == raw[:65536]
os.truncate(src, os.path.getsize(src) // 2)
served = eio = 0
for off in range(0, len(raw), 65536):
    try:
        got = os.pread(fd, 65536, off)
    except OSError as e:
        assert e.errno == errno.EIO, e
        eio += 1
        continue
    assert got == raw[off:off + len(got)], "bytes of no version at %d" % off
    served += 1
os.close(fd)
print("ok: truncated while open: %d blocks of the version opened, %d EIO" % (served, eio))
PY
i=0
until ! cmp -s "$MNT/sub/g.tdb" "$WORK/raw.bin" 2>/dev/null; do
	i=$((i + 1)); [ "$i" -lt 50 ] || fail "a new open still shows g.tdb whole after its truncation"
	sleep 0.1	# bounded polling: entries are cached for a second
done
ok "a new open of the truncated g.tdb no longer shows the old bytes"
alive "a truncation"

# Deleted while open: the version opened or EIO; then gone.
timeout 60 python3 - "$MNT/sub/d.tdb" "$WORK/src/sub/d.tdb" "$WORK/raw.bin" <<'PY' || fail "deleted while open"
import errno, os, sys
mnt, src, raw = sys.argv[1], sys.argv[2], open(sys.argv[3], "rb").read()
fd = os.open(mnt, os.O_RDONLY)
assert os.pread(fd, 65536, 0) == raw[:65536]
os.unlink(src)
served = eio = 0
for off in range(0, len(raw), 65536):
    try:
        got = os.pread(fd, 65536, off)
    except OSError as e:
        assert e.errno == errno.EIO, e
        eio += 1
        continue
    assert got == raw[off:off + len(got)], "bytes of no version at %d" % off
    served += 1
os.close(fd)
print("ok: deleted while open: %d blocks of the version opened, %d EIO" % (served, eio))
PY
i=0
while [ -e "$MNT/sub/d.tdb" ]; do
	i=$((i + 1)); [ "$i" -lt 50 ] || fail "d.tdb still listed after its deletion"
	sleep 0.1	# bounded polling: entries are cached for a second
done
ok "deleted d.tdb is gone from the mount"
alive "a deletion"
umount_fs
