#!/bin/sh
# tests/s3/metadata.sh - an array of many fragments mounts from an object
# store in a few round trips (issue 24, "metadata in flight"): 40
# fragments (tests/data's multifrag_sparse, its fragment copied under 40
# names: contrib/s3-fragments) in a real store (tests/s3/store), reached
# through tests/s3/faultproxy.py (no faults: it logs every request with
# its arrival and answer times) and, when ../shared/tools is there, the
# WAN proxy at 10 ms of round trip (else the fault proxy's --latency 10), so
# that requests overlap as they would across a network.
#   - `ls -lR` of the mount equals that of a mount of the local copy (names
#     and decoded sizes); it sends at most 3 LISTs (the bucket's check,
#     which is the top's listing, the array's directory, and that
#     directory's subtree listed whole,
#     which gives __fragments, __commits, __schema and the absence of
#     __schema/__enumerations at once: source_s3_cache.c), no HEAD, the schema and each fragment's
#     metadata once (the array's read; the file's own decode, for its size,
#     is served by the part source_s3_read.c kept of that whole-object read), no
#     data file, and the metadata of the fragments with >= 6 GETs in flight
#     at once (tf_array.c's batch: as many threads as max_requests, 32),
#     the first of them with the others, not alone before them;
#   - @views/cells.csv (-o views) equals the local mount's byte for byte;
#     a fresh mount reading its first 100 bytes fetches each fragment's
#     metadata once, the schema once, each coordinate tile (d0.tdb) once,
#     the first with the others, and the attribute tile (a0.tdb) of the
#     newest fragment alone (the fragments write the same cells: the
#     newest one's are output), no HEAD, at most 3 LISTs, and has >= 8
#     requests in flight (the merge's first cells, tf_merge_warm.c's
#     warm-up).
# TF_S3_META_FRAGS: the number of fragments (40; contrib/bench-s3 has 100).
# Counts and bytes only, never times.
#
# Needs swift (skips with 77 when absent unless TILEFS_CI=1), python3 and
# root with /dev/fuse (skips otherwise), built TILEFS.  Bounded by timeouts.
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${TILEFS:?}"
TF_TOOLS=${TF_TOOLS:-$here/../../../shared/tools}
PORT=${TF_S3_META_PORT:-18132}; export TF_S3_PORT=$PORT
WAN=$((PORT + 8)); FP=$((PORT + 9))
NFRAG=${TF_S3_META_FRAGS:-40}
skip() { echo "SKIP: $*"; [ "${TILEFS_CI:-0}" = 1 ] && exit 1; exit 77; }
command -v swift-proxy-server >/dev/null 2>&1 || skip "swift not installed (contrib/setup installs it)"
[ "$(id -u)" = 0 ] && [ -c /dev/fuse ] || skip "needs root and /dev/fuse"
WORK=$(mktemp -d /tmp/tilefs-s3meta.XXXXXX)
failed=0
ok() { echo "ok: $*"; }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
pids=
cleanup() {
	[ -n "${KEEP:-}" ] && { cp "$WORK/log" "$KEEP.log"; cp "$WORK/ls.log" "$KEEP.ls.log" 2>/dev/null; }
	for p in $pids; do kill "$p" 2>/dev/null; done
	for m in "$WORK/mnt" "$WORK/local"; do mountpoint -q "$m" && fusermount3 -u "$m"; done
	"$here/store" stop "$WORK/store"
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
mkdir -p "$WORK/mnt" "$WORK/local"

"$here/../../contrib/s3-fragments" "$WORK/arr" "$here/../data/corpus/multifrag_sparse/array" $NFRAG >/dev/null ||
	{ echo "FAIL: making the array"; exit 1; }
"$here/store" start "$WORK/store" || { echo "FAIL: store did not start"; exit 1; }
"$here/store" upload "$WORK/store" frags "$WORK/arr" || { echo "FAIL: upload"; exit 1; }
export AWS_ACCESS_KEY_ID=test:tester AWS_SECRET_ACCESS_KEY=testing
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL
export HOME=$WORK

up=$PORT lat=
if [ -f "$TF_TOOLS/wan-proxy" ]; then
	python3 "$TF_TOOLS/wan-proxy" $WAN $PORT --rtt 10 --rate 25 --ready "$WORK/wready" & pids="$pids $!"
	i=0; while [ ! -f "$WORK/wready" ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
	[ -f "$WORK/wready" ] && up=$WAN
fi
[ $up = $PORT ] && lat="--latency 10"	# no WAN proxy: the fault proxy holds each answer
# shellcheck disable=SC2086
python3 "$here/faultproxy.py" --listen $FP --upstream 127.0.0.1:$up --log "$WORK/log" --ready "$WORK/fready" $lat &
pids="$pids $!"
i=0; while [ ! -f "$WORK/fready" ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
[ -f "$WORK/fready" ] || { echo "FAIL: faultproxy did not start"; exit 1; }
printf '[s3]\nendpoint = http://127.0.0.1:%s\n' $FP > "$WORK/s3.ini"

# counts LOG [TOP]: lists heads gets-of-the-schema most-gets-of-one-metadata-file
# metadata-files-fetched most-requests-in-flight most-metadata-gets-in-flight
# most-gets-of-one-data-file data-gets (a0.tdb, d0.tdb: one tile each)
# a0-gets d0-gets listings-of-the-top (with a delimiter; TOP: its prefix,
# URL-encoded) metadata-gets-in-flight-with-the-first d0-gets-in-flight-with-the-first
counts() {
	python3 - "$1" "${2:-}" <<'PY'
import collections, sys, urllib.parse
lists = heads = schema = top = 0
meta = collections.Counter()
data = collections.Counter()
spans, mspans, dspans = [], [], []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 8:
        continue
    spans.append((float(f[6]), float(f[7])))
    if f[0] == "HEAD":
        heads += 1
    elif "list-type=" in f[4]:
        lists += 1
        q = urllib.parse.parse_qs(f[4].split("?", 1)[1], keep_blank_values=True)
        top += "delimiter" in q and q.get("prefix", [""])[0] == urllib.parse.unquote(sys.argv[2])
    elif "/__schema/" in f[4]:
        schema += 1
    elif f[4].endswith("/__fragment_metadata.tdb"):
        meta[f[4]] += 1
        mspans.append(spans[-1])
    elif "/__fragments/" in f[4]:
        data[f[4].split("?")[0]] += 1
        if f[4].endswith("/d0.tdb"):
            dspans.append(spans[-1])
def peak(sp):
    ev = sorted([(s, 1) for s, _ in sp] + [(e, -1) for _, e in sp])
    cur = best = 0
    for _, d in ev:
        cur += d
        best = max(best, cur)
    return best
def with_first(sp):	# how many others were in flight with the first to start
    if not sp:
        return 0
    s0, e0 = min(sp)
    return sum(1 for s, e in sp if (s, e) != (s0, e0) and s < e0 and e > s0)
a0 = sum(n for k, n in data.items() if k.endswith("/a0.tdb"))
d0 = sum(n for k, n in data.items() if k.endswith("/d0.tdb"))
print(lists, heads, schema, max(meta.values() or [0]), len(meta), peak(spans), peak(mspans),
      max(data.values() or [0]), sum(data.values()), a0, d0, top, with_first(mspans), with_first(dspans))
PY
}

listing() {	# DIR: every path beneath it, its kind and size, sorted
	(cd "$1" && find . -type d -printf '%p/\n' -o -printf '%p %s\n' | sort)
}

# ---- the local copy, for the bytes
timeout 60 "$TILEFS" -o views,index_dir=none "$WORK/arr" "$WORK/local" || { echo "FAIL: local mount"; exit 1; }
listing "$WORK/local" | grep -v '/@views' > "$WORK/ls.local"
cat "$WORK/local/a/@views/cells.csv" > "$WORK/cells.local"
fusermount3 -u "$WORK/local"
[ "$(grep -c '^./a/__fragments/[^/]*/a0.tdb ' "$WORK/ls.local")" = $NFRAG ] && [ -s "$WORK/cells.local" ] ||
	{ echo "FAIL: the local mount shows no $NFRAG fragments"; exit 1; }

# ---- ls -lR
: > "$WORK/log"
if timeout 120 "$TILEFS" -o config="$WORK/s3.ini",index_dir=none s3://frags "$WORK/mnt"; then
	timeout 120 ls -lR "$WORK/mnt" > /dev/null
	listing "$WORK/mnt" > "$WORK/ls.s3"
	fusermount3 -u "$WORK/mnt"
	cp "$WORK/log" "$WORK/ls.log"
	cmp -s "$WORK/ls.local" "$WORK/ls.s3" && ok "ls -lR: the $NFRAG fragments' names and sizes equal the local ones" ||
		fail "ls -lR differs from the local mount: $(diff "$WORK/ls.local" "$WORK/ls.s3" | head -5)"
	set -- $(counts "$WORK/log")
	[ "$1" -le 3 ] && [ "$2" = 0 ] && [ "$3" = 1 ] && [ "$4" = 1 ] && [ "$5" = $NFRAG ] && [ "$7" -ge 6 ] && [ "$9" = 0 ] &&
		ok "ls -lR: $1 LISTs, $2 HEADs, the schema and each metadata file once ($5 of them), $7 of them in flight at once, no data file" ||
		fail "ls -lR: $1 LISTs (<= 3), $2 HEADs (0), the schema $3 times (1), a metadata file $4 times (1), $5 of $NFRAG fetched, $7 in flight at most (>= 6), $9 GETs of data files (0)"
	# the mount's check of the bucket is the top's listing (source_s3.c's
	# probe), and the first fragment's metadata is read with the others
	# (tf_array.c's batch), not alone before them
	shift 9
	[ "$3" = 1 ] && [ "$4" -ge 4 ] &&
		ok "ls -lR: the mount and the top's listing one LIST; the first metadata GET in flight with $4 others" ||
		fail "ls -lR: $3 LISTs of the top (1: the mount's serves the listing), the first metadata GET in flight with $4 others (>= 4)"
else
	fail "mount s3://frags"
fi

# ---- the array as the mount's top (s3://frags/a): its subtree listed whole too
: > "$WORK/log"
if timeout 120 "$TILEFS" -o config="$WORK/s3.ini",index_dir=none s3://frags/a "$WORK/mnt"; then
	timeout 120 ls -lR "$WORK/mnt" > /dev/null
	listing "$WORK/mnt" > "$WORK/ls.top"
	fusermount3 -u "$WORK/mnt"
	sed -n 's|^\./a/|./|p' "$WORK/ls.local" | sort > "$WORK/ls.want"
	set -- $(counts "$WORK/log" a/)
	[ "${12}" = 1 ] && ok "the array as the top: the mount and the top's listing one LIST" ||
		fail "the array as the top: ${12} LISTs of the top (1)"
	cmp -s "$WORK/ls.want" "$WORK/ls.top" && [ "$1" -le 2 ] && [ "$3" = 1 ] && [ "$4" = 1 ] && [ "$5" = $NFRAG ] &&
		ok "ls -lR of the array as the top: names and sizes equal the local ones, $1 LISTs, each metadata file once" ||
		fail "ls -lR of the array as the top: $1 LISTs (<= 2), the schema $3 times (1), a metadata file $4 times (1), $5 of $NFRAG; $(diff "$WORK/ls.want" "$WORK/ls.top" | head -3)"
else
	fail "mount s3://frags/a"
fi

# ---- the first records of a view
: > "$WORK/log"
if timeout 120 "$TILEFS" -o config="$WORK/s3.ini",index_dir=none,views s3://frags "$WORK/mnt"; then
	timeout 120 head -c 100 "$WORK/mnt/a/@views/cells.csv" > "$WORK/head.s3"
	set -- $(counts "$WORK/log")
	timeout 120 cat "$WORK/mnt/a/@views/cells.csv" > "$WORK/cells.s3"
	fusermount3 -u "$WORK/mnt"
	head -c 100 "$WORK/cells.local" | cmp -s - "$WORK/head.s3" && cmp -s "$WORK/cells.local" "$WORK/cells.s3" &&
		ok "@views/cells.csv of $NFRAG fragments from the store equals the local one ($(wc -c < "$WORK/cells.s3") bytes)" ||
		fail "@views/cells.csv from the store differs from the local one"
	[ "$1" -le 3 ] && [ "$2" = 0 ] && [ "$3" = 1 ] && [ "$4" = 1 ] && [ "$5" = $NFRAG ] && [ "$6" -ge 8 ] &&
	    [ "$8" = 1 ] &&
		ok "the view's first bytes: $1 LISTs, $2 HEADs, the schema, each metadata file and each data tile once at most, $6 requests in flight at once" ||
		fail "the view's first bytes: $1 LISTs (<= 3), $2 HEADs (0), the schema $3 times (1), a metadata file $4 times (1), $5 of $NFRAG fetched, $6 in flight at most (>= 8), a data file $8 times (1)"
	# The fragments write the same cells: the newest one's are the view's.
	# Every coordinate tile is read (d0), the attribute tile (a0) of the
	# newest fragment alone (tf_merge.c's lazy fields), and the first d0
	# with the others (tf_merge.c's warm_tied), not alone before them.
	shift 9
	[ "$1" = 1 ] && [ "$2" = $NFRAG ] && [ "$5" -ge 4 ] &&
		ok "the view's first bytes: each d0.tdb once ($2), one a0.tdb (the newest fragment's), the first d0 GET in flight with $5 others" ||
		fail "the view's first bytes: $1 GETs of a0.tdb (1: the newest fragment's cells are output), $2 of d0.tdb ($NFRAG), the first d0 GET in flight with $5 others (>= 4)"
else
	fail "mount s3://frags -o views"
fi

[ $failed = 0 ] || exit 1
echo "metadata.sh: all passed"
