#!/bin/sh
# tests/s3/manyfiles.sh - 200 files of an S3 mount open and read at once
# (issue 24): 16 readers, half reading files whole from the start, half
# reading 4 KiB at random offsets of random files, every byte compared with
# the file's decoded bytes, while all 200 files stay open.  The daemon's
# peak RSS must stay within cache_size + 64 MiB: read-ahead windows, fetch
# buffers and decoded chunks are all held to the one budget, however many
# files are open (mountpoint-s3's issue #987: per-file prefetch windows with
# no bound across files ran daemons out of memory).
#
# Needs swift (skips with 77 when absent unless TILEFS_CI=1), python3 and
# root with /dev/fuse (skips otherwise), built TILETOOL and TILEFS.
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${TILEFS:?}" "${TILETOOL:?}"
PORT=${TF_S3_MANY_PORT:-18192}; export TF_S3_PORT=$PORT
skip() { echo "SKIP: $*"; [ "${TILEFS_CI:-0}" = 1 ] && exit 1; exit 77; }
command -v swift-proxy-server >/dev/null 2>&1 || skip "swift not installed (contrib/setup installs it)"
[ "$(id -u)" = 0 ] && [ -c /dev/fuse ] || skip "needs root and /dev/fuse"
WORK=$(mktemp -d /tmp/tilefs-s3many.XXXXXX)
MNT=$WORK/mnt
CACHE_MIB=16
mkdir -p "$MNT" "$WORK/plain" "$WORK/up"
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; exit 1; }
cleanup() {
	mountpoint -q "$MNT" && fusermount3 -u "$MNT"
	"$here/store" stop "$WORK/store"
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# 200 files: 180 of 256 KiB and 20 of 4 MiB (125 MiB decoded), each its
# own bytes (16 symbols a byte: zstd stores about half of it).
python3 - "$WORK/plain" <<'PY' || fail "making files"
import random, sys
table = bytes(i & 0x0f for i in range(256))
for i in range(200):
    n = (4 << 20) if i % 10 == 0 else (256 << 10)
    data = random.Random(i).randbytes(n).translate(table)
    open("%s/f%03d" % (sys.argv[1], i), "wb").write(data)
PY
for f in "$WORK"/plain/*; do
	"$TILETOOL" encode -F zstd -t uint8 "$f" "$WORK/up/$(basename "$f").tdb" || fail "encode $f"
done
"$here/store" start "$WORK/store" || fail "store did not start"
"$here/store" upload "$WORK/store" many "$WORK/up" || fail "upload"
export AWS_ACCESS_KEY_ID=test:tester AWS_SECRET_ACCESS_KEY=testing
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL
export HOME=$WORK
printf '[tilefs]\ncache_size = %sM\n[s3]\nendpoint = http://127.0.0.1:%s\n[match *.tdb]\nfilters = zstd\ndatatype = uint8\n' \
	"$CACHE_MIB" "$PORT" > "$WORK/s3.ini"

mkfifo "$WORK/ready"
"$TILEFS" -f -o config="$WORK/s3.ini",index_dir=none,notify_pipe="$WORK/ready" s3://many "$MNT" \
	2> "$WORK/log" &
daemon=$!
read -r said < "$WORK/ready"	# "s" once it serves, "f" if it failed
[ "$said" = s ] || fail "mount: $(cat "$WORK/log")"

# All 200 open at once; 16 threads read them: 8 whole files in turn, 8 at
# random 4 KiB.  Every byte compared.  Exit 1 with the first difference.
timeout 300 python3 - "$MNT" "$WORK/plain" <<'PY' || fail "readers: wrong bytes or errors (log: $(tail -5 "$WORK/log"))"
import os, random, sys, threading
mnt, plain = sys.argv[1], sys.argv[2]
names = sorted(os.listdir(plain))
assert len(names) == 200, len(names)
fds = [os.open("%s/%s.tdb" % (mnt, n), os.O_RDONLY) for n in names]
want = [open("%s/%s" % (plain, n), "rb").read() for n in names]
bad = []
def whole(t):
    for k in range(t, 200, 8):
        got, off = [], 0
        while True:
            b = os.pread(fds[k], 1 << 17, off)
            if not b:
                break
            got.append(b); off += len(b)
        if b"".join(got) != want[k]:
            bad.append("whole %s" % names[k])
def scattered(t):
    r = random.Random(t)
    for _ in range(400):
        k = r.randrange(200)
        off = r.randrange(0, len(want[k]) - 4096)
        if os.pread(fds[k], 4096, off) != want[k][off:off + 4096]:
            bad.append("%s at %d" % (names[k], off))
ts = [threading.Thread(target=whole, args=(t,)) for t in range(8)]
ts += [threading.Thread(target=scattered, args=(t,)) for t in range(8)]
for t in ts: t.start()
for t in ts: t.join()
for fd in fds: os.close(fd)
if bad:
    sys.exit("wrong bytes: %s" % ", ".join(bad[:5]))
PY
ok "200 files open at once, 16 readers (8 whole files, 8 x 400 random 4 KiB reads): every byte right"

hwm=$(awk '/VmHWM/ { print $2 }' "/proc/$daemon/status")
limit=$(((CACHE_MIB + 64) * 1024))
if [ "${TILEFS_SANITIZERS:-no}" = no ]; then	# shadow memory makes the bound meaningless
	[ "$hwm" -le "$limit" ] && ok "the daemon's peak RSS $((hwm / 1024)) MiB <= cache_size $CACHE_MIB MiB + 64 MiB" ||
		fail "the daemon's peak RSS $((hwm / 1024)) MiB > cache_size $CACHE_MIB MiB + 64 MiB"
fi
fusermount3 -u "$MNT"
wait "$daemon"; rc=$?
[ $rc = 0 ] || fail "daemon exit $rc: $(tail -5 "$WORK/log")"
grep -q "WRONG\|corrupt\|EIO" "$WORK/log" && fail "errors logged: $(grep -m3 "WRONG\|corrupt\|EIO" "$WORK/log")"
exit 0
