#!/bin/sh
# tests/s3/index.sh - persisted indexes of an object-store source (issue 13):
# tile files in a bucket of a real store (tests/s3/store: Swift's S3 API on
# loopback) are walked once, by a mount or by tiletool index, and a later
# mount of s3://BUCKET finds every index in the store (0 walks, counted in
# user.tilefs.index) with the same bytes; an object replaced by one of the
# same size (a new ETag) is walked again, never read with the old index;
# the same bucket and keys through another endpoint (another host name for
# the same store) find no entry of the first (issue 20: entries are keyed
# by endpoint).
# A cat of a 32 MiB zstd file through such a mount fetches its stored
# bytes once (GETs counted by tests/s3/faultproxy.py, which injects no
# faults here): decode-ahead's reads and the store's read-ahead must not
# overlap.
#
# Needs swift (skips with 77 when absent unless TILEFS_CI=1), python3 and
# root with /dev/fuse (skips otherwise), built TILETOOL and TILEFS.
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${TILEFS:?}" "${TILETOOL:?}"
PORT=${TF_S3_INDEX_PORT:-18112}; export TF_S3_PORT=$PORT
skip() { echo "SKIP: $*"; [ "${TILEFS_CI:-0}" = 1 ] && exit 1; exit 77; }
command -v swift-proxy-server >/dev/null 2>&1 || skip "swift not installed (contrib/setup installs it)"
[ "$(id -u)" = 0 ] && [ -c /dev/fuse ] || skip "needs root and /dev/fuse"
WORK=$(mktemp -d /tmp/tilefs-s3index.XXXXXX)
MNT=$WORK/mnt
mkdir -p "$MNT" "$WORK/tiles" "$WORK/v"
failed=0
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; exit 1; }
cleanup() {
	mountpoint -q "$MNT" && fusermount3 -u "$MNT"
	"$here/store" stop "$WORK/store"
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# Tile files with no filters: one tile of the given chunks; v1 and v2 have
# the same stored size (2032) and different layouts (2000, 2012 decoded).
python3 - "$WORK" <<'PY' || fail "making files"
import random, struct, sys
w = sys.argv[1]
def tile(path, chunks, seed):
    rnd = random.Random(seed)
    data = [bytes(rnd.getrandbits(8) for _ in range(n)) for n in chunks]
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(chunks)))
        for d in data:
            f.write(struct.pack("<III", len(d), len(d), 0) + d)
    return b"".join(data)
for i in range(20):
    open(f"{w}/tiles/f{i}.raw.bin", "wb").write(tile(f"{w}/tiles/f{i}.tdb", [700] * (i % 5), i))
open(f"{w}/v/v1.raw", "wb").write(tile(f"{w}/v/v1.tdb", [1000, 1000], 100))
open(f"{w}/v/v2.raw", "wb").write(tile(f"{w}/v/v2.tdb", [2012], 101))
PY
mkdir -p "$WORK/up" "$WORK/up2"
cp "$WORK"/tiles/*.tdb "$WORK/v/v1.tdb" "$WORK/up/"
cp "$WORK/v/v2.tdb" "$WORK/up2/v1.tdb"	# the same key, replaced later

"$here/store" start "$WORK/store" || fail "store did not start"
"$here/store" upload "$WORK/store" tiles "$WORK/up" || fail "upload"
export AWS_ACCESS_KEY_ID=test:tester AWS_SECRET_ACCESS_KEY=testing
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL
export HOME=$WORK
printf '[s3]\nendpoint = http://127.0.0.1:%s\n[match *.tdb]\nfilters =\n' "$PORT" > "$WORK/s3.ini"

field() {
	getfattr --absolute-names --only-values -n user.tilefs.index "$MNT" | tr ' ' '\n' | sed -n "s/^$1=//p"
}
expect() {
	v=$(field "$1")
	[ "$v" = "$2" ] || fail "$3: $1=$v, expected $2 ($(getfattr --absolute-names --only-values -n user.tilefs.index "$MNT"))"
}
mount_s3() {
	timeout 60 "$TILEFS" -o config="$WORK/s3.ini",index_dir="$1" s3://tiles "$MNT" || fail "mount s3://tiles"
}
same_bytes() {
	for i in $(seq 0 19); do
		cmp -s "$MNT/f$i.tdb" "$WORK/tiles/f$i.raw.bin" || fail "$1: f$i.tdb differs"
	done
	cmp -s "$MNT/v1.tdb" "$2" || fail "$1: v1.tdb differs"
}

# ---- a mount walks each file once and stores it; the next walks none
mount_s3 "$WORK/idx"
same_bytes "first mount" "$WORK/v/v1.raw"
expect walks 21 "first mount"
expect writes 21 "first mount"
fusermount3 -u "$MNT"
mount_s3 "$WORK/idx"
ls -l "$MNT" > /dev/null
same_bytes "second mount" "$WORK/v/v1.raw"
expect walks 0 "second mount"
expect hits 21 "second mount"
fusermount3 -u "$MNT"
ok "s3://tiles: indexes stored by one mount, found by the next (0 walks)"

# ---- another endpoint: the same bucket, keys, ETags and sizes, no entry used
sed "s|127.0.0.1:$PORT|localhost:$PORT|" "$WORK/s3.ini" > "$WORK/s3b.ini"
timeout 60 "$TILEFS" -o config="$WORK/s3b.ini",index_dir="$WORK/idx" s3://tiles "$MNT" || fail "mount via localhost"
same_bytes "another endpoint" "$WORK/v/v1.raw"
expect walks 21 "another endpoint"
expect hits 0 "another endpoint"
fusermount3 -u "$MNT"
ok "s3://tiles through another endpoint: no entry of the first used (21 walks)"

# ---- the same key replaced, same size: a new ETag, walked again
"$here/store" upload "$WORK/store" tiles "$WORK/up2" || fail "upload v2"
mount_s3 "$WORK/idx"
[ "$(stat -c %s "$MNT/v1.tdb")" = 2012 ] || fail "replaced object shows the old index"
cmp -s "$MNT/v1.tdb" "$WORK/v/v2.raw" || fail "replaced object's bytes"
expect stale 1 "replaced object"
expect walks 1 "replaced object"
fusermount3 -u "$MNT"
ok "an object replaced by one of the same size (new ETag) is walked again"

# ---- tiletool index of the bucket, then a mount that walks nothing
"$TILETOOL" index -c "$WORK/s3.ini" --index-dir "$WORK/idx2" s3://tiles > "$WORK/summary" ||
	fail "tiletool index s3://tiles: $(cat "$WORK/summary")"
grep -q "21 files .* 21 walked .* 0 failed" "$WORK/summary" || fail "summary: $(cat "$WORK/summary")"
mount_s3 "$WORK/idx2"
ls -l "$MNT" > /dev/null
same_bytes "after tiletool index" "$WORK/v/v2.raw"
expect walks 0 "after tiletool index"
fusermount3 -u "$MNT"
ok "tiletool index s3://tiles: the mount then walked none"

# ---- with the index kept, a cat fetches each stored byte once
python3 - "$WORK/big.raw" <<'PY' || fail "making big.raw"
import array, random, sys
r = random.Random(7); v = 0; a = array.array("i")
for _ in range(8 << 20):
    v += r.randint(-3, 3); a.append(v)
open(sys.argv[1], "wb").write(a.tobytes())
PY
mkdir -p "$WORK/up3"
"$TILETOOL" encode -F zstd -t int32 --tile-size 4194304 "$WORK/big.raw" "$WORK/up3/big.tdb" || fail "encode big"
"$here/store" upload "$WORK/store" big "$WORK/up3" || fail "upload big"
PROXY=$((PORT + 8))
python3 "$here/faultproxy.py" --listen $PROXY --upstream 127.0.0.1:$PORT --ready "$WORK/proxy.ready" \
	--log "$WORK/proxy.log" & proxy_pid=$!
trap 'kill $proxy_pid 2>/dev/null; cleanup' EXIT INT TERM
i=0; while [ $i -lt 100 ] && [ ! -f "$WORK/proxy.ready" ]; do i=$((i + 1)); sleep 0.1; done
printf '[s3]\nendpoint = http://127.0.0.1:%s\n[match big.tdb]\nfilters = zstd\ndatatype = int32\n' \
	"$PROXY" > "$WORK/big.ini"
mount_big() {
	timeout 60 "$TILEFS" -o config="$WORK/big.ini",index_dir="$WORK/idx3" s3://big "$MNT" || fail "mount s3://big"
}
mount_big
cmp -s "$MNT/big.tdb" "$WORK/big.raw" || fail "big.tdb, first mount"
fusermount3 -u "$MNT"
: > "$WORK/proxy.log"
mount_big
cmp -s "$MNT/big.tdb" "$WORK/big.raw" || fail "big.tdb, remounted"
expect walks 0 "big.tdb remounted"
fusermount3 -u "$MNT"
stored=$(stat -c %s "$WORK/up3/big.tdb")
got=$(awk '$1 == "GET" && $6 != "-" { b += $3 } END { print b + 0 }' "$WORK/proxy.log")
[ "$got" -ge $((stored - stored / 100)) ] && [ "$got" -le $((stored + stored / 20)) ] ||
	fail "a cat of big.tdb ($stored bytes stored) fetched $got bytes in ranged GETs"
ok "a cat of a 32 MiB zstd file, remounted with its index: $got bytes fetched of $stored stored"
exit $failed
