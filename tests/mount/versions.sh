#!/bin/sh
# One read, one version (issues 9 and 14): 16 readers of random ranges over
# three files while a writer replaces them under the readers, by rename and
# in place (truncate and rewrite, to other sizes too), with a 4 MiB cache.
# Every read must return the bytes of one version of its file, or fail with
# EIO; never bytes of two, never zeros that no version holds.  The daemon's
# RSS is sampled throughout and must stay under the cache + 16 MiB (not in
# sanitizer builds).  TILEFS_SOAK_SECONDS sets the length (default 8; the
# issues' long run is 60, also under --enable-sanitizers=thread).
. "$(dirname "$0")/lib.sh"

secs=${TILEFS_SOAK_SECONDS:-8}
mkdir -p "$WORK/src" "$WORK/v"
python3 - "$WORK/v" <<'PY' || fail "making versions"
import struct, sys
# File f, version k: u32 words (f << 28 | (k + 1) << 24 | i), sizes differing
# so that truncation shows.
for f in range(3):
    for k, n in enumerate((3 << 20, 4 << 20, (2 << 20) + 12345 * 4)):
        with open(f"{sys.argv[1]}/f{f}v{k}.bin", "wb") as out:
            out.write(b"".join(struct.pack("<I", f << 28 | (k + 1) << 24 | i) for i in range(n // 4)))
PY
for f in 0 1 2; do
	for k in 0 1 2; do
		"$TILETOOL" encode -F 'zstd' -t uint32 --tile-size 65536 "$WORK/v/f${f}v$k.bin" "$WORK/v/f${f}v$k.tdb" ||
			fail "encode"
	done
	cp "$WORK/v/f${f}v0.tdb" "$WORK/src/f$f.tdb"
done
printf '[match *.tdb]\nfilters = zstd\ndatatype = uint32\n' > "$WORK/t.ini"
mount_fs "$WORK/t.ini" "$WORK/src" -o cache_size=4M
pid=$(pgrep -f -n "tilefs -o config=$WORK/t.ini") || fail "no tilefs process"

python3 - "$MNT" "$WORK/src" "$WORK/v" "$secs" "$pid" <<'PY' > "$WORK/out" || { cat "$WORK/out"; fail "soak"; }
import errno, os, random, shutil, sys, threading, time
mnt, src, vdir, secs, pid = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
versions = [[open(f"{vdir}/f{f}v{k}.bin", "rb").read() for k in range(3)] for f in range(3)]
stop = time.monotonic() + secs
counts = {"reads": 0, "eio": 0, "mixed": 0, "zeros": 0}
peak = [0]
lock = threading.Lock()

def judge(f, off, got):
    for v in versions[f]:
        if v[off:off + len(got)] == got:
            return None
    zeros = any(got[i:i + 4] == b"\0\0\0\0" and all(v[off + i:off + i + 4] != b"\0\0\0\0" for v in versions[f])
                for i in range(0, len(got) - 3, 4))
    return "zeros" if zeros else "mixed"

def reader(seed):
    rnd = random.Random(seed)
    while time.monotonic() < stop:
        f = rnd.randrange(3)
        try:
            fd = os.open(f"{mnt}/f{f}.tdb", os.O_RDONLY)
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
                bad = judge(f, off, got)
                with lock:
                    counts["reads"] += 1
                    if bad:
                        counts[bad] += 1
        finally:
            os.close(fd)

def writer():
    k = 0
    while time.monotonic() < stop:
        k += 1
        f, v = k % 3, (k // 3) % 3
        path = f"{src}/f{f}.tdb"
        if k % 2:
            shutil.copyfile(f"{vdir}/f{f}v{v}.tdb", path + ".new")
            os.rename(path + ".new", path)
        else:
            with open(path, "r+b") as out:     # in place: same inode
                out.truncate(0)
                out.write(open(f"{vdir}/f{f}v{v}.tdb", "rb").read())
        time.sleep(0.002)

def sampler():
    while time.monotonic() < stop:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                peak[0] = max(peak[0], int(line.split()[1]))
        time.sleep(0.05)

ts = [threading.Thread(target=reader, args=(i,)) for i in range(16)]
ts += [threading.Thread(target=writer), threading.Thread(target=sampler)]
for t in ts: t.start()
for t in ts: t.join()
print(" ".join(f"{k}={v}" for k, v in counts.items()), f"peak_rss_kib={peak[0]}")
sys.exit(1 if counts["mixed"] or counts["zeros"] or counts["reads"] < 100 else 0)
PY
ok "16 readers of 3 files replaced under them for ${secs}s: $(cat "$WORK/out")"
peak=$(sed -n 's/.*peak_rss_kib=\([0-9]*\).*/\1/p' "$WORK/out")
if [ "${TILEFS_SANITIZERS:-no}" = no ]; then
	[ "$peak" -le $(( (4 + 16) * 1024 )) ] || fail "peak RSS ${peak} KiB over the 4 MiB cache + 16 MiB"
	ok "peak RSS ${peak} KiB within the 4 MiB cache + 16 MiB"
fi
