#!/bin/sh
# tests/s3/inflight.sh - requests in flight and bytes fetched once (issue
# 24), counted by tests/s3/faultproxy.py (no faults) in front of
# ../shared/tools/wan-proxy (a few ms of round trip, so requests overlap)
# in front of the store (tests/s3/store):
#  - a first mount of a loose zstd tile file walks it and a cat reads it:
#    the bytes equal the source's, and the ranged GETs of both move at
#    most 1.05x the stored bytes (the walk's parts serve the cat), with
#    >= 8 of them in flight at once;
#  - remounted with its index, a cat keeps >= 8 in flight, <= 1.05x;
#  - an array attribute (genarray: 1 MiB tiles) read with cat: the same,
#    with no GET of a sliver between parts and its first GETs at once;
#  - a 4 KiB read far into the attribute: fetches its tile only;
#  - faults (503, resets, cut and short bodies) in ranged GETs: the same
#    bytes, no hang;
#  - an object closed while fetches ahead are held by the store: they are
#    cut short (s3read head), and its source does not wait for them.
# Counts and bytes only, never speed.  TF_INFLIGHT_INTS (int32 values of
# the tile file), TF_INFLIGHT_ROWS (of the square array), TF_INFLIGHT_RTT,
# and TF_INFLIGHT_RATE (MB/s per connection)
# make it a measurement.
#
# Needs swift (skips with 77 when absent unless TILEFS_CI=1), python3,
# root with /dev/fuse, built TILETOOL, TILEFS, GENARRAY and S3READ.
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${TILEFS:?}" "${TILETOOL:?}" "${GENARRAY:?}" "${S3READ:?}"
TF_TOOLS=${TF_TOOLS:-$here/../../../shared/tools}
PORT=${TF_S3_INFLIGHT_PORT:-18212}; export TF_S3_PORT=$PORT
FPROXY=$((PORT + 5)); WAN=$((PORT + 6))	# the store uses PORT to PORT + 4
INTS=${TF_INFLIGHT_INTS:-8388608}
ROWS=${TF_INFLIGHT_ROWS:-3072}
RTT=${TF_INFLIGHT_RTT:-10}; RATE=${TF_INFLIGHT_RATE:-50}
skip() { echo "SKIP: $*"; [ "${TILEFS_CI:-0}" = 1 ] && exit 1; exit 77; }
command -v swift-proxy-server >/dev/null 2>&1 || skip "swift not installed (contrib/setup installs it)"
[ "$(id -u)" = 0 ] && [ -c /dev/fuse ] || skip "needs root and /dev/fuse"
[ -x "$TF_TOOLS/wan-proxy" ] || skip "no $TF_TOOLS/wan-proxy"
WORK=$(mktemp -d /tmp/tilefs-s3inflight.XXXXXX)
MNT=$WORK/mnt; LMNT=$WORK/lmnt
mkdir -p "$MNT" "$LMNT" "$WORK/up" "$WORK/arr"
fproxy_pid=; wan_pid=
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; exit 1; }
cleanup() {
	mountpoint -q "$MNT" && fusermount3 -u "$MNT"
	mountpoint -q "$LMNT" && fusermount3 -u "$LMNT"
	[ -n "$fproxy_pid" ] && kill "$fproxy_pid" 2>/dev/null
	[ -n "$wan_pid" ] && kill "$wan_pid" 2>/dev/null
	"$here/store" stop "$WORK/store"
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

python3 - "$WORK/big.raw" "$INTS" <<'PY' || fail "making big.raw"
import array, random, sys
r = random.Random(7); v = 0; a = array.array("i")
for _ in range(int(sys.argv[2])):
    v += r.randint(-3000, 3000); a.append(v)
open(sys.argv[1], "wb").write(a.tobytes())
PY
"$TILETOOL" encode -F zstd -t int32 --tile-size 4194304 "$WORK/big.raw" "$WORK/up/big.tdb" || fail "encode big"
"$GENARRAY" "$WORK/arr/dense" "$ROWS" "$ROWS" 512 512 1 >/dev/null || fail "genarray"
"$here/store" start "$WORK/store" || fail "store did not start"
"$here/store" upload "$WORK/store" big "$WORK/up" || fail "upload big"
"$here/store" upload "$WORK/store" arr "$WORK/arr" || fail "upload arr"
export AWS_ACCESS_KEY_ID=test:tester AWS_SECRET_ACCESS_KEY=testing
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL
export HOME=$WORK

python3 "$TF_TOOLS/wan-proxy" $WAN $PORT --rtt "$RTT" --rate "$RATE" --ready "$WORK/wan.ready" \
	2> "$WORK/wan.err" & wan_pid=$!
python3 "$here/faultproxy.py" --listen $FPROXY --upstream 127.0.0.1:$WAN --ready "$WORK/fproxy.ready" \
	--log "$WORK/proxy.log" & fproxy_pid=$!
i=0; while [ $i -lt 100 ] && { [ ! -f "$WORK/wan.ready" ] || [ ! -f "$WORK/fproxy.ready" ]; }; do
	i=$((i + 1)); sleep 0.1
done
printf '[s3]\nendpoint = http://127.0.0.1:%s\n[match big.tdb]\nfilters = zstd\ndatatype = int32\n' \
	"$FPROXY" > "$WORK/s3.ini"

stat_of() { python3 "$here/proxystats.py" "$WORK/proxy.log" --ranged | tr ' ' '\n' | sed -n "s/^$1=//p"; }
# LABEL STORED: ranged bytes <= 1.05x STORED, >= 8 ranged GETs in flight at once
check_counts() {
	got=$(stat_of bytes); peak=$(stat_of max_inflight)
	echo "  $1: $(python3 "$here/proxystats.py" "$WORK/proxy.log" --ranged) stored=$2"
	[ "$got" -le $(($2 + $2 / 20)) ] || fail "$1: $got bytes fetched of $2 stored (> 1.05x)"
	[ "$peak" -ge 8 ] || fail "$1: at most $peak ranged GETs in flight"
}
mount_s3() {	# BUCKET INDEX_DIR
	timeout 60 "$TILEFS" -o config="$WORK/s3.ini",index_dir="$2" "s3://$1" "$MNT" || fail "mount s3://$1"
}
stored=$(stat -c %s "$WORK/up/big.tdb")

# ---- first mount: the walk and the cat fetch each stored byte once
: > "$WORK/proxy.log"
mount_s3 big "$WORK/idx"
cmp "$MNT/big.tdb" "$WORK/big.raw" || fail "big.tdb, first mount"
getfattr --absolute-names --only-values -n user.tilefs.cache "$MNT" | tr ' ' '\n' | grep -E "^(stored|fetched|stored_served|charged)=" | tr '\n' ' '; echo
fusermount3 -u "$MNT"
check_counts "first mount + cat" "$stored"
ok "first mount + cat of a loose tile file ($stored bytes stored): each byte fetched once, $peak GETs in flight"

# ---- remounted with its index: a cat keeps many GETs in flight
: > "$WORK/proxy.log"
mount_s3 big "$WORK/idx"
cmp -s "$MNT/big.tdb" "$WORK/big.raw" || fail "big.tdb, remounted"
fusermount3 -u "$MNT"
check_counts "indexed cat" "$stored"
ok "remounted with its index: a cat fetched each byte once, $peak GETs in flight"

# ---- an array attribute (1 MiB tiles): a cat keeps many GETs in flight
timeout 60 "$TILEFS" "$WORK/arr" "$LMNT" || fail "local mount of the array"
attr=$(cd "$LMNT" && find . -name 'a*.tdb' -path '*__fragments*' | head -1)
[ -n "$attr" ] || fail "no attribute file in the array"
astored=$(stat -c %s "$WORK/arr/$attr")
: > "$WORK/proxy.log"
mount_s3 arr "$WORK/idx"
cmp -s "$MNT/$attr" "$LMNT/$attr" || fail "$attr through s3:// differs from the local mount"
fusermount3 -u "$MNT"
check_counts "array attribute cat" "$astored"
ok "cat of an array attribute ($astored bytes stored, 1 MiB tiles): $peak GETs in flight, each byte once"
# No GET of a few bytes between parts (a tile's chunk headers, 200 bytes
# past 1 MiB, were fetched alone: a round trip each), and the object's
# first GETs go out together (an answer with the listing's Last-Modified
# pins it: none waits for the first answer).
aname=$(basename "$attr")
small=$(awk -v n="$aname" -v s="$astored" '$1 == "GET" && $6 != "-" && index($5, "/" n) && $3 < 65536 {
	split(substr($6, 7), r, "-"); if (r[2] + 1 < s) c++ } END { print c + 0 }' "$WORK/proxy.log")
[ "$small" = 0 ] || fail "array attribute cat: $small ranged GETs of less than 64 KiB: $(awk -v n="$aname" \
	'$6 != "-" && index($5, "/" n) && $3 < 65536 { print $6 }' "$WORK/proxy.log" | head -5 | tr '\n' ' ')"
overlap=$(awk -v n="$aname" '$1 == "GET" && $6 != "-" && index($5, "/" n) { print $7, $8 }' "$WORK/proxy.log" |
	sort -n | awk 'NR == 1 { e = $2 } NR == 2 { print ($1 < e) ? "yes" : "no" }')
[ "$overlap" = yes ] || fail "array attribute cat: its second GET waited for the first answer"
ok "... no GET of a sliver between parts, the first GETs at once"

# ---- a 4 KiB read far into it fetches its tile (1 MiB), not a window
: > "$WORK/proxy.log"
mount_s3 arr "$WORK/idx"
python3 - "$MNT/$attr" "$LMNT/$attr" <<'PY' || fail "4 KiB read: wrong bytes"
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
at = os.fstat(fd).st_size // 2 + 12345 // 4096 * 4096
got = os.pread(fd, 4096, at)
sys.exit(0 if got == open(sys.argv[2], "rb").read()[at:at + 4096] else 1)
PY
fusermount3 -u "$MNT"
name=$(basename "$attr")
got=$(awk -v n="$name" '$1 == "GET" && $6 != "-" && index($5, "/" n) { b += $3 } END { print b + 0 }' "$WORK/proxy.log")
gets=$(awk -v n="$name" '$1 == "GET" && $6 != "-" && index($5, "/" n) { g++ } END { print g + 0 }' "$WORK/proxy.log")
[ "$got" -le $(((1 << 20) + 4096)) ] && [ "$gets" -le 1 ] ||
	fail "a 4 KiB read of $attr fetched $got bytes of it in $gets GETs"
ok "a 4 KiB read far into $attr: $got bytes of it in $gets ranged GET"

# ---- faults in the fetchers' GETs (503, resets, cut and short bodies):
# the same bytes, no hang (each step bounded by its timeout)
kill "$fproxy_pid"; wait "$fproxy_pid" 2>/dev/null; rm -f "$WORK/fproxy.ready"
python3 "$here/faultproxy.py" --listen $FPROXY --upstream 127.0.0.1:$WAN --ready "$WORK/fproxy.ready" \
	--log "$WORK/proxy.log" --faults 503,reset,trunc,short --every 3 --per-request 2 --ranged-only & fproxy_pid=$!
i=0; while [ $i -lt 100 ] && [ ! -f "$WORK/fproxy.ready" ]; do i=$((i + 1)); sleep 0.1; done
: > "$WORK/proxy.log"
printf '[s3]\nendpoint = http://127.0.0.1:%s\ntimeout = 2\nretries = 4\n[match big.tdb]\nfilters = zstd\ndatatype = int32\n' \
	"$FPROXY" > "$WORK/s3.ini"
mount_s3 big "$WORK/idx-faults"
timeout 120 cmp -s "$MNT/big.tdb" "$WORK/big.raw" || fail "big.tdb through faults: wrong bytes or no answer"
fusermount3 -u "$MNT"
mount_s3 arr "$WORK/idx-faults"
timeout 120 cmp -s "$MNT/$attr" "$LMNT/$attr" || fail "$attr through faults: wrong bytes or no answer"
fusermount3 -u "$MNT"
faults=$(awk '$4 != "-"' "$WORK/proxy.log" | wc -l)
[ "$faults" -gt 10 ] || fail "only $faults faults injected"
ok "first mount + cat and an array attribute through $faults faults: the same bytes"

# ---- an object closed with fetches ahead in flight: they are cut short
# (every second ranged GET held 20 s; the reader reads only the first
# answer's MiB, then closes: its source must not wait for the others)
kill "$fproxy_pid"; wait "$fproxy_pid" 2>/dev/null; rm -f "$WORK/fproxy.ready"
python3 "$here/faultproxy.py" --listen $FPROXY --upstream 127.0.0.1:$WAN --ready "$WORK/fproxy.ready" \
	--log "$WORK/proxy.log" --faults delay --every 2 --delay 20 --ranged-only & fproxy_pid=$!
i=0; while [ $i -lt 100 ] && [ ! -f "$WORK/fproxy.ready" ]; do i=$((i + 1)); sleep 0.1; done
t0=$(date +%s%N)
out=$(AWS_ENDPOINT_URL=http://127.0.0.1:$FPROXY timeout 60 "$S3READ" head s3://big big.tdb 1048576 2> "$WORK/err")
took=$((($(date +%s%N) - t0) / 1000000))
case $out in
aborted=[1-9]*) [ $took -lt 10000 ] || fail "closed with fetches in flight: $out, but $took ms to finish" ;;
*) fail "closed with fetches in flight: $out ($took ms): $(head -c 300 "$WORK/err")" ;;
esac
ok "an object closed with fetches ahead held by the store: $out, done in $took ms"
exit 0
