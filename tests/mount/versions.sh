#!/bin/sh
# One read, one version (issue 14): 16 readers of random ranges while a
# writer replaces the source under them, by rename and in place (truncate
# and rewrite, also to other sizes).  Every read must return the bytes of
# one version, or fail with EIO; never bytes of two, never zeros that no
# version holds.  TILEFS_SOAK_SECONDS sets the length (default 8; the issue's
# long run is 60).
. "$(dirname "$0")/lib.sh"

secs=${TILEFS_SOAK_SECONDS:-8}
mkdir -p "$WORK/src" "$WORK/v"
python3 - "$WORK/v" <<'PY' || fail "making versions"
import struct, sys
# Version k: u32 words (k << 24 | i), sizes differing so truncation shows.
for k, n in enumerate((3 << 20, 4 << 20, (2 << 20) + 12345 * 4)):
    with open(f"{sys.argv[1]}/v{k}.bin", "wb") as f:
        f.write(b"".join(struct.pack("<I", (k + 1) << 24 | i) for i in range(n // 4)))
PY
for k in 0 1 2; do
	"$TILETOOL" encode -F 'zstd' -t uint32 --tile-size 65536 "$WORK/v/v$k.bin" "$WORK/v/v$k.tdb" || fail "encode"
done
cp "$WORK/v/v0.tdb" "$WORK/src/f.tdb"
printf '[match *.tdb]\nfilters = zstd\ndatatype = uint32\n' > "$WORK/t.ini"
mount_fs "$WORK/t.ini" "$WORK/src" -o cache_size=4M

python3 - "$MNT/f.tdb" "$WORK/src/f.tdb" "$WORK/v" "$secs" <<'PY' > "$WORK/out" || { cat "$WORK/out"; fail "soak"; }
import errno, os, random, shutil, sys, threading, time
mnt, src, vdir, secs = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
versions = [open(f"{vdir}/v{k}.bin", "rb").read() for k in range(3)]
stored = [f"{vdir}/v{k}.tdb" for k in range(3)]
stop = time.monotonic() + secs
counts = {"reads": 0, "eio": 0, "mixed": 0, "zeros": 0}
lock = threading.Lock()

def judge(off, got):
    for v in versions:
        if v[off:off + len(got)] == got:
            return None
    zeros = any(got[i:i + 4] == b"\0\0\0\0" and all(v[off + i:off + i + 4] != b"\0\0\0\0" for v in versions)
                for i in range(0, len(got) - 3, 4))
    return "zeros" if zeros else "mixed"

def reader(seed):
    rnd = random.Random(seed)
    while time.monotonic() < stop:
        try:
            fd = os.open(mnt, os.O_RDONLY)
        except OSError:
            continue
        try:
            for _ in range(20):
                off = rnd.randrange(0, 4 << 20) & ~3
                n = rnd.choice((4096, 65536, 200000, 1 << 20))
                try:
                    got = os.pread(fd, n, off)
                except OSError as e:
                    if e.errno not in (errno.EIO, errno.ESTALE):
                        raise
                    with lock: counts["eio"] += 1
                    continue
                bad = judge(off, got)
                with lock:
                    counts["reads"] += 1
                    if bad:
                        counts[bad] += 1
        finally:
            os.close(fd)

def writer():
    k = 0
    while time.monotonic() < stop:
        k = (k + 1) % 3
        if k % 2:
            shutil.copyfile(stored[k], src + ".new")
            os.rename(src + ".new", src)
        else:
            with open(src, "r+b") as f:     # in place: same inode
                f.truncate(0)
                f.write(open(stored[k], "rb").read())
        time.sleep(0.002)

ts = [threading.Thread(target=reader, args=(i,)) for i in range(16)] + [threading.Thread(target=writer)]
for t in ts: t.start()
for t in ts: t.join()
print(" ".join(f"{k}={v}" for k, v in counts.items()))
sys.exit(1 if counts["mixed"] or counts["zeros"] or counts["reads"] < 100 else 0)
PY
ok "versions under 16 readers for ${secs}s: $(cat "$WORK/out")"
