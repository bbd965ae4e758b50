#!/bin/sh
# tests/s3/diskcache.sh - the disk cache of stored bytes (-o cache_dir,
# issue 24) against a real store (tests/s3/store: Swift's S3 API on
# loopback) through tests/s3/faultproxy.py (no faults; it logs every
# request):
# - a mount with cache_dir reads a zstd tile file and a raw object; a
#   remount with the same cache_dir (and the same index_dir) reads them
#   byte for byte with 0 bytes of ranged GETs (user.tilefs.disk_cache
#   counts the hits);
# - a daemon killed (-9) in the middle of a read leaves a cache that a
#   remount reads byte-exact;
# - block files flipped, truncated, and a stray temporary: the remount is
#   byte-exact, fetching again only what was damaged;
# - the object replaced in the bucket (same size, new ETag) is fetched
#   again, and its new bytes are served;
# - a cache_dir others may read is refused at mount time (exit 3), a
#   cache_dir_size too small too (exit 2);
# - cache_dir in [s3] is taken relative to the configuration's directory.
#
# Needs swift (skips with 77 when absent unless TILEFS_CI=1), python3 and
# root with /dev/fuse (skips otherwise), built TILETOOL and TILEFS.
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${TILEFS:?}" "${TILETOOL:?}"
PORT=${TF_S3_DISKCACHE_PORT:-18172}; export TF_S3_PORT=$PORT
PROXY=$((PORT + 8))
skip() { echo "SKIP: $*"; [ "${TILEFS_CI:-0}" = 1 ] && exit 1; exit 77; }
command -v swift-proxy-server >/dev/null 2>&1 || skip "swift not installed (contrib/setup installs it)"
[ "$(id -u)" = 0 ] && [ -c /dev/fuse ] || skip "needs root and /dev/fuse"
WORK=$(mktemp -d /tmp/tilefs-s3dc.XXXXXX)
MNT=$WORK/mnt
mkdir -p "$MNT" "$WORK/up" "$WORK/up2"
proxy_pid= pid=
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; [ -f "$WORK/log" ] && tail -n 20 "$WORK/log"; exit 1; }
cleanup() {
	mountpoint -q "$MNT" && fusermount3 -u "$MNT"
	[ -n "$pid" ] && kill "$pid" 2>/dev/null
	[ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null
	"$here/store" stop "$WORK/store"
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# big.tdb: 8 Mi int32 of a random walk, zstd, 4 MiB tiles; blob.bin: 5.5 MiB
# of random bytes (no filters: read straight from the store), and blob2.bin
# of the same size to replace it.
python3 - "$WORK" <<'PY' || fail "making files"
import array, os, random, sys
w = sys.argv[1]
r = random.Random(7); v = 0; a = array.array("i")
for _ in range(8 << 20):
    v += r.randint(-3, 3); a.append(v)
open(f"{w}/big.raw", "wb").write(a.tobytes())
open(f"{w}/up/blob.bin", "wb").write(os.urandom(5 * 1048576 + 524288 + 17))
open(f"{w}/up2/blob.bin", "wb").write(os.urandom(5 * 1048576 + 524288 + 17))
PY
"$TILETOOL" encode -F zstd -t int32 --tile-size 4194304 "$WORK/big.raw" "$WORK/up/big.tdb" || fail "encode big"
cp "$WORK/up/blob.bin" "$WORK/blob1.bin"
"$here/store" start "$WORK/store" || fail "store did not start"
"$here/store" upload "$WORK/store" dcache "$WORK/up" || fail "upload"
export AWS_ACCESS_KEY_ID=test:tester AWS_SECRET_ACCESS_KEY=testing
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL
export HOME=$WORK
python3 "$here/faultproxy.py" --listen $PROXY --upstream 127.0.0.1:$PORT --ready "$WORK/proxy.ready" \
	--log "$WORK/proxy.log" & proxy_pid=$!
i=0; while [ $i -lt 100 ] && [ ! -f "$WORK/proxy.ready" ]; do i=$((i + 1)); sleep 0.1; done
printf '[s3]\nendpoint = http://127.0.0.1:%s\n[match big.tdb]\nfilters = zstd\ndatatype = int32\n' \
	"$PROXY" > "$WORK/dc.ini"
mkfifo "$WORK/ready"

# start CACHE_DIR: tilefs -f in the background ($pid), served once it says so.
start() {
	"$TILEFS" -f -o config="$WORK/dc.ini",index_dir="$WORK/idx",cache_dir="$1",notify_pipe="$WORK/ready" \
		s3://dcache "$MNT" 2> "$WORK/log" &
	pid=$!
	said=$(timeout 60 head -c 1 "$WORK/ready") || fail "no word on the notify pipe"
	[ "$said" = s ] || fail "mount with cache_dir=$1 failed: $(cat "$WORK/log")"
}
stop() {
	fusermount3 -u "$MNT"
	wait "$pid" || fail "tilefs exited $? (the sanitizers' report, if any, above)"
	pid=
}
counter() {
	getfattr --absolute-names --only-values -n user.tilefs.disk_cache "$MNT" | tr ' ' '\n' | sed -n "s/^$1=//p"
}
ranged_bytes() { awk '$1 == "GET" && $6 != "-" { b += $3 } END { print b + 0 }' "$WORK/proxy.log"; }
same() {
	cmp -s "$MNT/big.tdb" "$WORK/big.raw" || fail "$1: big.tdb differs"
	cmp -s "$MNT/blob.bin" "$2" || fail "$1: blob.bin differs"
}

# ---- a cold mount fills the cache; a warm one fetches nothing
start "$WORK/cache"
same "cold" "$WORK/blob1.bin"
[ "$(counter written_bytes)" -gt 0 ] || fail "cold: nothing written ($(counter hits))"
stop
[ "$(stat -c %a "$WORK/cache")" = 700 ] || fail "cache_dir made $(stat -c %a "$WORK/cache"), not 700"
: > "$WORK/proxy.log"
start "$WORK/cache"
same "warm" "$WORK/blob1.bin"
got=$(ranged_bytes)
[ "$got" = 0 ] || fail "warm remount fetched $got bytes in ranged GETs"
getfattr --absolute-names -d "$MNT" | grep -q '^user.tilefs.disk_cache="hits=' ||
	fail "getfattr -d of the root shows no user.tilefs.disk_cache"
hits=$(counter hits)
[ "$hits" -gt 0 ] && [ "$(counter bad)" = 0 ] || fail "warm: hits=$hits bad=$(counter bad)"
stop
ok "a remount with a warm cache_dir: byte-exact, 0 bytes of ranged GETs ($hits blocks from disk)"

# ---- kill -9 in the middle of a read
start "$WORK/cache2"
cat "$MNT/big.tdb" > /dev/null 2>&1 & reader=$!
i=0
until [ "$(find "$WORK/cache2" -type f -name '*.[0-9]*' | wc -l)" -ge 2 ]; do
	i=$((i + 1)); [ $i -lt 600 ] || fail "no block written during the read"
	sleep 0.01
done
kill -9 "$pid"; wait "$pid" 2>/dev/null; pid=
wait "$reader" 2>/dev/null
fusermount3 -u "$MNT" 2>/dev/null
mountpoint -q "$MNT" && fail "the killed mount is still there"
start "$WORK/cache2"
same "after kill -9" "$WORK/blob1.bin"
[ "$(counter bad)" = 0 ] || fail "after kill -9: bad=$(counter bad) (a renamed block is whole)"
stop
ok "a daemon killed in the middle of a read: the remount is byte-exact"

# ---- damaged blocks: misses, fetched again, never served
set -- $(find "$WORK/cache/v1" -type f -name '*.[0-9]*' | sort)
[ $# -ge 8 ] || fail "only $# block files in the cache"
python3 - "$1" "$2" <<'PY' || fail "damaging blocks"
import os, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(os.path.getsize(sys.argv[1]) - 1000); c = f.read(1); f.seek(-1, 1); f.write(bytes([c[0] ^ 1]))
os.truncate(sys.argv[2], os.path.getsize(sys.argv[2]) // 2)
PY
cp "$3" "$(dirname "$3")/.tmp.1.stray"
: > "$WORK/proxy.log"
start "$WORK/cache"
same "damaged" "$WORK/blob1.bin"
got=$(ranged_bytes)
[ "$(counter bad)" -ge 2 ] || fail "damaged: bad=$(counter bad), expected 2 or more"
# Two readers missing one block both fetch it (no fetch is shared): a few
# MiB at most, of the 41 MiB stored.
[ "$got" -gt 0 ] && [ "$got" -le $((8 * 1048576)) ] || fail "damaged: $got bytes fetched for 2 blocks"
stop
ok "a flipped and a truncated block: fetched again ($got bytes), byte-exact"

# ---- the object replaced (same size, new ETag): fetched again
"$here/store" upload "$WORK/store" dcache "$WORK/up2" || fail "upload blob2"
: > "$WORK/proxy.log"
start "$WORK/cache"
same "replaced" "$WORK/up2/blob.bin"
got=$(ranged_bytes)
[ "$got" -ge "$(stat -c %s "$WORK/up2/blob.bin")" ] || fail "replaced: only $got bytes fetched"
stop
ok "an object replaced in the bucket is fetched again ($got bytes), its new bytes served"

# ---- a cache_dir others may enter is refused at mount time
mkdir -m 755 "$WORK/open"
"$TILEFS" -o config="$WORK/dc.ini",index_dir=none,cache_dir="$WORK/open" s3://dcache "$MNT" 2> "$WORK/err"
rc=$?
[ $rc = 3 ] && grep -q "cache_dir $WORK/open: mode 0755" "$WORK/err" ||
	fail "cache_dir 0755: exit $rc, $(cat "$WORK/err")"
mountpoint -q "$MNT" && fail "mounted with a cache_dir others may read"
ok "a cache_dir of mode 0755 is refused: $(cat "$WORK/err")"
"$TILEFS" -o config="$WORK/dc.ini",index_dir=none,cache_dir="$WORK/c3",cache_dir_size=1K s3://dcache "$MNT" \
	2> "$WORK/err"
rc=$?
[ $rc = 2 ] && grep -q "cache_dir_size must be 4M" "$WORK/err" || fail "cache_dir_size=1K: exit $rc, $(cat "$WORK/err")"
ok "cache_dir_size=1K is refused: $(cat "$WORK/err")"

# ---- cache_dir in [s3], relative to the configuration's directory
sed -i 's/^\(endpoint = .*\)$/\1\ncache_dir = cache/' "$WORK/dc.ini"
: > "$WORK/proxy.log"
"$TILEFS" -f -o config="$WORK/dc.ini",index_dir="$WORK/idx",notify_pipe="$WORK/ready" s3://dcache "$MNT" \
	2> "$WORK/log" &
pid=$!
said=$(timeout 60 head -c 1 "$WORK/ready") || fail "no word on the notify pipe"
[ "$said" = s ] || fail "mount with cache_dir in [s3] failed: $(cat "$WORK/log")"
same "cache_dir in [s3]" "$WORK/up2/blob.bin"
got=$(ranged_bytes)
[ "$got" = 0 ] || fail "cache_dir = cache in [s3]: $got bytes fetched"
stop
ok "cache_dir = cache in [s3] is the configuration's directory's: 0 bytes fetched"
exit 0
