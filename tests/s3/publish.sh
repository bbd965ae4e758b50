#!/bin/sh
# tests/s3/publish.sh - one index in the bucket that every node reads
# (issue 21): tiletool index --publish s3://pub/data puts each tile file's
# index entry in the bucket, under data/.tilefs/index/; a mount of
# s3://pub/data with an empty index_dir, with read-only credentials,
# then walks none of them (user.tilefs.index: walks=0, published=N) and
# fetches none of their bytes for a listing (the store's request log,
# tests/s3/faultproxy.py, injecting no faults), reads them byte-exact,
# shows no .tilefs, and never writes to the bucket (no PUT, POST or
# DELETE in the log).  Entries made wrong after publishing are never
# trusted: the object rewritten (a new ETag: the entry is stale), another
# object's entry copied under a file's name, a truncated entry: ignored
# (the file is walked, the bytes are right); a forged one with a valid CRC
# and units that lie about their sizes: EIO, never wrong bytes.
#
# Needs swift (skips with 77 when absent unless TILEFS_CI=1), python3 and
# root with /dev/fuse (skips otherwise), built TILETOOL and TILEFS.
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${TILEFS:?}" "${TILETOOL:?}"
PORT=${TF_S3_PUBLISH_PORT:-18132}; export TF_S3_PORT=$PORT
PROXY=$((PORT + 8))
skip() { echo "SKIP: $*"; [ "${TILEFS_CI:-0}" = 1 ] && exit 1; exit 77; }
command -v swift-proxy-server >/dev/null 2>&1 || skip "swift not installed (contrib/setup installs it)"
[ "$(id -u)" = 0 ] && [ -c /dev/fuse ] || skip "needs root and /dev/fuse"
WORK=$(mktemp -d /tmp/tilefs-s3publish.XXXXXX)
MNT=$WORK/mnt
mkdir -p "$MNT" "$WORK/up" "$WORK/raw" "$WORK/up2" "$WORK/forged/index"
proxy_pid=
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; exit 1; }
cleanup() {
	mountpoint -q "$MNT" && fusermount3 -u "$MNT"
	[ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null
	"$here/store" stop "$WORK/store"
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# Tile files with no filters (one tile of the given chunks), and big.tdb:
# 8 MiB of int32 in zstd tiles of 1 MiB.
python3 - "$WORK" <<'PY' || fail "making files"
import array, random, struct, sys
w = sys.argv[1]
def tile(name, chunks, seed, up="up"):
    rnd = random.Random(seed)
    data = [bytes(rnd.getrandbits(8) for _ in range(n)) for n in chunks]
    with open(f"{w}/{up}/{name}", "wb") as f:
        f.write(struct.pack("<Q", len(chunks)))
        for d in data:
            f.write(struct.pack("<III", len(d), len(d), 0) + d)
    open(f"{w}/raw/{name}" + (".new" if up != "up" else ""), "wb").write(b"".join(data))
for i in range(4):
    tile(f"f{i}.tdb", [700 * (i + 1)] * (i + 1), i)
tile("g.tdb", [65536, 30000, 65536], 10)	# its entry: forged
tile("h.tdb", [3000, 3000], 11)	# its entry: f0's, copied under its name
tile("t.tdb", [4000, 4000], 12)	# its entry: truncated
tile("v.tdb", [1000, 1000], 13)	# rewritten after publishing: stale
tile("v.tdb", [2012], 14, "up2")	# ... as this, of the same stored size
r = random.Random(7); v = 0; a = array.array("i")
for _ in range(2 << 20):
    v += r.randint(-3, 3); a.append(v)
open(f"{w}/raw/big.raw", "wb").write(a.tobytes())
PY
"$TILETOOL" encode -F zstd -t int32 --tile-size 1048576 "$WORK/raw/big.raw" "$WORK/up/big.tdb" || fail "encode big"
cp "$WORK/raw/big.raw" "$WORK/raw/big.tdb"
files="f0 f1 f2 f3 g h t v big"

"$here/store" start "$WORK/store" || fail "store did not start"
"$here/store" upload "$WORK/store" pub "$WORK/up" data || fail "upload"
"$here/store" readable "$WORK/store" pub test:reader || fail "making pub readable to test:reader"
python3 "$here/faultproxy.py" --listen $PROXY --upstream 127.0.0.1:$PORT --ready "$WORK/proxy.ready" \
	--log "$WORK/proxy.log" & proxy_pid=$!
i=0; while [ $i -lt 100 ] && [ ! -f "$WORK/proxy.ready" ]; do i=$((i + 1)); sleep 0.1; done
[ -f "$WORK/proxy.ready" ] || fail "the proxy did not start"
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL
export HOME=$WORK AWS_CONFIG_FILE=$WORK/none AWS_SHARED_CREDENTIALS_FILE=$WORK/none
printf '[s3]\nendpoint = http://127.0.0.1:%s\n[match big.tdb]\nfilters = zstd\ndatatype = int32\n[match *.tdb]\nfilters =\n' \
	"$PROXY" > "$WORK/s3.ini"
writer() { AWS_ACCESS_KEY_ID=test:tester AWS_SECRET_ACCESS_KEY=testing "$@"; }
reader() { AWS_ACCESS_KEY_ID=test:reader AWS_SECRET_ACCESS_KEY=reading "$@"; }
# "METHOD STATUS BYTES FAULT PATH RANGE": bytes of GETs of key $1 after line $2.
got() { tail -n +$(($2 + 1)) "$WORK/proxy.log" | awk -v k="/pub/data/$1" '$1 == "GET" && $5 == k { b += $3 } END { print b + 0 }'; }
lines() { wc -l < "$WORK/proxy.log"; }
field() {
	getfattr --absolute-names --only-values -n user.tilefs.index "$MNT" | tr ' ' '\n' | sed -n "s/^$1=//p"
}
expect() {
	v=$(field "$1")
	[ "$v" = "$2" ] || fail "$3: $1=$v, expected $2 ($(getfattr --absolute-names --only-values -n user.tilefs.index "$MNT"))"
}
entry() { python3 -c 'import hashlib, sys; print(hashlib.sha256(("bucket:pub/data/" + sys.argv[1]).encode()).hexdigest()[:32] + ".idx")' "$1"; }

# ---- the read-only user may not publish
reader "$TILETOOL" index -c "$WORK/s3.ini" --index-dir "$WORK/idx0" --publish s3://pub/data > "$WORK/ro.out" 2>&1 &&
	fail "the read-only user published: $(cat "$WORK/ro.out")"
grep -q "not published: .*PUT key 'data/.tilefs/index/.*HTTP 403" "$WORK/ro.out" ||
	fail "the read-only user's publish: $(cat "$WORK/ro.out")"
ok "test:reader is read-only: its tiletool index --publish is refused (HTTP 403)"

# ---- before publishing: a mount's ls -l walks every file (big.tdb read whole)
n0=$(lines)
reader timeout 60 "$TILEFS" -o config="$WORK/s3.ini",index_dir=none s3://pub/data "$MNT" ||
	fail "mount s3://pub/data before publishing"
ls -l "$MNT" > /dev/null
expect walks 9 "before publishing"
expect published_misses 9 "before publishing"
before=$(got big.tdb "$n0")
fusermount3 -u "$MNT"
[ "$before" -ge $(($(stat -c %s "$WORK/up/big.tdb") * 9 / 10)) ] || fail "before publishing, ls -l fetched $before bytes of big.tdb"
ok "before publishing: ls -l walked 9 files (9 GETs of no entry), $before bytes of big.tdb fetched"

# ---- publish
n0=$(lines)
writer "$TILETOOL" index -c "$WORK/s3.ini" --index-dir "$WORK/idx1" --publish s3://pub/data > "$WORK/pub.out" ||
	fail "tiletool index --publish: $(cat "$WORK/pub.out")"
grep -q "9 files .* 9 walked .* 0 failed;.* 9 published in s3://pub/data/.tilefs/index/" "$WORK/pub.out" ||
	fail "summary: $(cat "$WORK/pub.out")"
puts=$(tail -n +$((n0 + 1)) "$WORK/proxy.log" | awk '$1 == "PUT" && $2 == 200 && $5 ~ "^/pub/data/.tilefs/index/[0-9a-f]+[.]idx$"' | wc -l)
[ "$puts" = 9 ] || fail "publishing made $puts PUTs of entries, not 9"
for f in $files; do
	"$here/store" download "$WORK/store" pub "data/.tilefs/index/$(entry $f.tdb)" "$WORK/$f.idx" ||
		fail "no published entry for $f.tdb"
done
ok "tiletool index --publish: 9 files walked, 9 entries PUT under data/.tilefs/index/"

# ---- spoil four: forged (CRC valid, units' sizes swapped), another's,
# truncated, and an object rewritten (the entry stale)
python3 - "$WORK" "$(entry g.tdb)" "$(entry h.tdb)" "$(entry t.tdb)" <<'PY' || fail "spoiling entries"
import struct, sys, zlib
w, g, h, t = sys.argv[1:]
def varint(b, i):
    x = s = 0
    while True:
        c = b[i]; i += 1; x |= (c & 0x7f) << s; s += 7
        if not c & 0x80: return x, i
def enc(v):
    o = bytearray()
    while True:
        o.append((v & 0x7f) | (0x80 if v > 0x7f else 0)); v >>= 7
        if not v: return bytes(o)
e = open(f"{w}/g.idx", "rb").read()
idlen = struct.unpack_from("<H", e, 24)[0]
head, p = e[:26 + idlen + 112], e[26 + idlen + 112:]
kind, i = varint(p, 0)
ntiles, i = varint(p, i)
tile = []
for _ in range(5):	# stored, size, nchunks, nunits, ulen
    v, i = varint(p, i); tile.append(v)
assert (kind, ntiles, i + tile[4]) == (1, 1, len(p)) and tile[3] == 3, (kind, ntiles, tile)
units, size, count = [], 65536, 1
for _ in range(tile[3]):
    v, i = varint(p, i)
    if v & 1:
        size, i = varint(p, i)
        count, i = varint(p, i)
    units.append([v >> 1, size, count])
# The first two units' decoded sizes swapped: the same total, each unit
# still within the tile; only the chunk headers can tell.
units[0][1], units[1][1] = units[1][1], units[0][1]
ub = b"".join(enc(s << 1 | 1) + enc(z) + enc(c) for s, z, c in units)
p = enc(1) + enc(1) + b"".join(enc(x) for x in tile[:4]) + enc(len(ub)) + ub
e = bytearray(head + p)
struct.pack_into("<Q", e, 16, len(p))
struct.pack_into("<I", e, 12, zlib.crc32(bytes(e[16:])))
open(f"{w}/forged/index/{g}", "wb").write(e)
open(f"{w}/forged/index/{h}", "wb").write(open(f"{w}/f0.idx", "rb").read())
open(f"{w}/forged/index/{t}", "wb").write(open(f"{w}/t.idx", "rb").read()[:-3])
PY
"$here/store" upload "$WORK/store" pub "$WORK/forged" data/.tilefs || fail "upload spoiled entries"
"$here/store" upload "$WORK/store" pub "$WORK/up2" data || fail "rewrite v.tdb"

# ---- a mount with read-only credentials and an empty index_dir (in the
# foreground: its log in $WORK/log)
n1=$(lines)
mkfifo "$WORK/ready"
reader timeout 120 "$TILEFS" -f -o config="$WORK/s3.ini",index_dir="$WORK/idx2",notify_pipe="$WORK/ready" \
	s3://pub/data "$MNT" 2> "$WORK/log" & daemon=$!
[ "$(head -c 1 "$WORK/ready")" = s ] || fail "mount s3://pub/data as test:reader: $(cat "$WORK/log")"
ls -la "$MNT" > "$WORK/ls" || fail "ls -la"
grep -q tilefs "$WORK/ls" && fail ".tilefs shown: $(cat "$WORK/ls")"
[ "$(grep -c '\.tdb$' "$WORK/ls")" = 9 ] || fail "ls -la: $(cat "$WORK/ls")"
stat "$MNT/.tilefs" > /dev/null 2>&1 && fail ".tilefs can be looked up"
ls "$MNT/.tilefs/index" > /dev/null 2>&1 && fail ".tilefs/index can be listed"
expect walks 3 "ls -l"
expect published 6 "ls -l"
expect published_ignored 3 "ls -l"
[ "$(got big.tdb "$n1")" = 0 ] || fail "ls -l fetched $(got big.tdb "$n1") bytes of big.tdb (its index is published)"
[ "$(stat -c %s "$MNT/big.tdb")" = "$(stat -c %s "$WORK/raw/big.raw")" ] || fail "big.tdb's size"
[ "$(stat -c %s "$MNT/v.tdb")" = 2012 ] || fail "v.tdb: the stale entry's size shown"
ok "ls -la as test:reader with an empty index_dir: no .tilefs, 6 published entries used, 3 ignored" \
	"(stale, another's, truncated: walked), 0 bytes of big.tdb fetched (before publishing: $before)"

for f in f0 f1 f2 f3 h t big; do
	cmp -s "$MNT/$f.tdb" "$WORK/raw/$f.tdb" || fail "$f.tdb differs"
done
cmp -s "$MNT/v.tdb" "$WORK/raw/v.tdb.new" || fail "v.tdb (rewritten) differs"
stored=$(stat -c %s "$WORK/up/big.tdb")
b=$(got big.tdb "$n1")
[ "$b" -le $((stored + stored / 20)) ] || fail "a cat of big.tdb ($stored bytes stored) fetched $b bytes"
if cat "$MNT/g.tdb" > "$WORK/g.out" 2> "$WORK/g.err"; then
	cmp -s "$WORK/g.out" "$WORK/raw/g.tdb" || fail "g.tdb (forged entry) read wrong bytes"
else
	grep -q "Input/output error" "$WORK/g.err" || fail "g.tdb: $(cat "$WORK/g.err")"
	head -c "$(stat -c %s "$WORK/g.out")" "$WORK/raw/g.tdb" | cmp -s - "$WORK/g.out" ||
		fail "g.tdb (forged entry): the bytes before EIO are wrong"
	expect published_ignored 4 "the forged entry found wrong"
fi
expect walks 3 "after reading"
ok "byte-exact: 7 files, v.tdb as rewritten; big.tdb fetched once ($b bytes of $stored stored);" \
	"g.tdb's forged entry: $(cmp -s "$WORK/g.out" "$WORK/raw/g.tdb" && echo "the right bytes" || echo "EIO")"

writes=$(tail -n +$((n1 + 1)) "$WORK/proxy.log" | awk '$1 != "GET" && $1 != "HEAD"' | wc -l)
[ "$writes" = 0 ] || fail "the mount sent $writes requests other than GET and HEAD"
cat "$MNT/g.tdb" > /dev/null 2>&1	# again: the same EIO, not logged again
fusermount3 -u "$MNT"
wait $daemon || fail "tilefs exited $?: $(tail -n 20 "$WORK/log")"
ok "the mount sent only GETs and HEADs (none of PUT, POST, DELETE)"
for f in g h t v; do
	n=$(grep -c "published index entry .tilefs/index/$(entry $f.tdb) (bucket:pub/data/$f.tdb): .*: ignored" "$WORK/log")
	[ "$n" = 1 ] || fail "$f.tdb's spoiled entry logged $n times: $(cat "$WORK/log")"
done
grep -q "reading" "$WORK/log" && fail "the secret key is in the log"
ok "each spoiled entry logged once: $(grep -h -m1 "published index entry.*v.tdb" "$WORK/log")"

# ---- the entries proved by those reads were copied into its index_dir:
# a second mount uses them (no GET of a published entry)
n2=$(lines)
reader timeout 60 "$TILEFS" -o config="$WORK/s3.ini",index_dir="$WORK/idx2" s3://pub/data "$MNT" ||
	fail "mount s3://pub/data again"
ls -l "$MNT" > /dev/null
expect hits 8 "remounted"
[ "$(tail -n +$((n2 + 1)) "$WORK/proxy.log" | grep -c "/.tilefs/")" = 1 ] ||
	fail "remounted: $(tail -n +$((n2 + 1)) "$WORK/proxy.log" | grep "/.tilefs/")"
fusermount3 -u "$MNT"
ok "remounted: 8 entries from index_dir (5 proved, 3 walked), 1 GET of a published one (g.tdb's: never proved)"
exit 0
