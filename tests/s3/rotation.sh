#!/bin/sh
# tests/s3/rotation.sh - the long mode of cloud.sh's rotation (issue 21:
# "credentials that expire every 30 s during a 3-minute read of the corpus
# cause 0 failed reads"); not in make check nor check-s3 (it takes the
# time it is asked for): make check-s3-long, or
#   TILEFS=fs/tilefs sh tests/s3/rotation.sh
# One tilefs s3:// mount of the corpus (../shared/corpus, else
# tests/data/corpus; TF_CORPUS overrides) uploaded to the store
# (tests/s3/store: Swift, which verifies every signature), whose only
# credentials come from tests/s3/credserver.py's fake IMDSv2: keys that
# expire every TF_S3_LONG_TTL seconds (default 30), of two store users in
# turn, behind a gate that refuses an expired token (400 ExpiredToken)
# TF_S3_LONG_REVOKE s (default 2) before it expires (a store revoking
# early, a clock ahead; past a quarter of the TTL, requests meet refusals
# and are signed again).  4
# readers go over every data file of the corpus, in their own orders,
# for TF_S3_LONG_SECS seconds (default 180): each file read whole and at 8
# random ranges, every byte compared with the corpus's expected bytes;
# the mount has a 4 MiB chunk cache and direct_io, so reads go on
# fetching.  Passes with 0 failed reads, keys fetched at least once per
# TTL, from both users, and no secret in the mount's log.
# Needs swift (skips with 77 when absent unless TILEFS_CI=1), python3,
# root with /dev/fuse, a built TILEFS.
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${TILEFS:?}"
CORPUS=${TF_CORPUS:-$here/../../../shared/corpus}
[ -d "$CORPUS" ] || CORPUS=$here/../data/corpus
CORPUS=$(cd "$CORPUS" && pwd)
SECS=${TF_S3_LONG_SECS:-180}
TTL=${TF_S3_LONG_TTL:-30}
REVOKE=${TF_S3_LONG_REVOKE:-2}
PORT=${TF_S3_ROTATION_PORT:-18152}; export TF_S3_PORT=$PORT
skip() { echo "SKIP: $*"; [ "${TILEFS_CI:-0}" = 1 ] && exit 1; exit 77; }
command -v swift-proxy-server >/dev/null 2>&1 || skip "swift not installed (contrib/setup installs it)"
[ "$(id -u)" = 0 ] && [ -c /dev/fuse ] || skip "needs root and /dev/fuse"
WORK=$(mktemp -d /tmp/tilefs-rotation.XXXXXX)
MNT=$WORK/mnt
mkdir -p "$MNT"
srv='' daemon=''
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; exit 1; }
cleanup() {
	mountpoint -q "$MNT" && fusermount3 -u "$MNT"
	[ -n "$daemon" ] && wait "$daemon" 2>/dev/null
	[ -n "$srv" ] && kill "$srv" 2>/dev/null
	"$here/store" stop "$WORK/store"
	[ -n "${KEEP:-}" ] && echo "kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

"$here/store" start "$WORK/store" || fail "store did not start"
"$here/store" upload "$WORK/store" corpus "$CORPUS" || fail "upload of $CORPUS"
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE AWS_REGION AWS_DEFAULT_REGION \
	AWS_WEB_IDENTITY_TOKEN_FILE AWS_ROLE_ARN AWS_ROLE_SESSION_NAME AWS_ENDPOINT_URL_STS AWS_ENDPOINT_URL \
	AWS_CONTAINER_CREDENTIALS_RELATIVE_URI AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_AUTHORIZATION_TOKEN \
	AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE AWS_EC2_METADATA_DISABLED AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE \
	http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
export HOME=$WORK/home
mkdir -p "$HOME"
python3 "$here/credserver.py" --users "test:tester=testing,test:tester2=testing2" --upstream "127.0.0.1:$PORT" \
	--ttl "$TTL" --revoke-early "$REVOKE" --ready "$WORK/ready" --log "$WORK/cred.log" & srv=$!
i=0; while [ $i -lt 100 ] && [ ! -f "$WORK/ready" ]; do i=$((i + 1)); sleep 0.1; done
read -r META GATE < "$WORK/ready" || fail "the credential services did not start"
export AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:$META

printf '54696c6544422d6f7261636c652d6b65792d3031323334353637383941424344' > "$WORK/oracle.key"
chmod 600 "$WORK/oracle.key"
printf '[tilefs]\ncache_size = 4M\ndefault_key = oracle\n[key oracle]\nfile = %s\n[s3]\nendpoint = http://127.0.0.1:%s\n' \
	"$WORK/oracle.key" "$GATE" > "$WORK/s3.ini"
mkfifo "$WORK/up"
timeout $((SECS + 120)) "$TILEFS" -f -o config="$WORK/s3.ini",index_dir=none,direct_io,notify_pipe="$WORK/up" \
	s3://corpus "$MNT" 2> "$WORK/log" & daemon=$!
[ "$(head -c 1 "$WORK/up")" = s ] || fail "mount s3://corpus on IMDS credentials: $(cat "$WORK/log")"

# Every data file of the corpus's manifests, read by 4 readers for SECS s.
out=$(python3 - "$CORPUS" "$MNT" "$SECS" <<'PY'
import json, os, random, sys, threading, time
root, mnt, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
jobs = []
for d, _, files in sorted(os.walk(root)):
    if "manifest.json" in files:
        case = os.path.relpath(d, root)
        for fr in json.load(open(os.path.join(d, "manifest.json")))["fragments"]:
            for df in fr["data_files"].values():
                jobs.append((os.path.join(case, df["path"]), open(os.path.join(d, df["unfiltered_concat"]), "rb").read()))
lock = threading.Lock()
st = dict(files=0, ranges=0, bytes=0, failed=0, passes=0)
errs = []
until = time.monotonic() + secs

def bad(why):
    with lock:
        st["failed"] += 1
        if len(errs) < 5:
            errs.append(why)

def reader(seed):
    r = random.Random(seed)
    order = list(jobs)
    while time.monotonic() < until:
        r.shuffle(order)
        for rel, want in order:
            if time.monotonic() >= until:
                return
            try:
                with open(os.path.join(mnt, rel), "rb", buffering=0) as f:
                    got = f.read()
                    if got != want:
                        bad("%s: %d bytes read, %d expected, differ" % (rel, len(got), len(want)))
                        continue
                    n = 0
                    for _ in range(8 if want else 0):
                        off = r.randrange(len(want)); ln = r.randint(1, min(len(want) - off, 1 << 20))
                        if os.pread(f.fileno(), ln, off) != want[off:off + ln]:
                            bad("%s: range %d+%d differs" % (rel, off, ln))
                            break
                        n += 1
            except OSError as e:
                bad("%s: %s" % (rel, e))
                continue
            with lock:
                st["files"] += 1; st["ranges"] += n; st["bytes"] += len(want)
        with lock:
            st["passes"] += 1

ts = [threading.Thread(target=reader, args=(i,)) for i in range(4)]
for t in ts: t.start()
for t in ts: t.join()
print("%d files %d ranges %d bytes %d failed %d passes %d jobs" % (st["files"], st["ranges"], st["bytes"], st["failed"],
      st["passes"], len(jobs)))
for e in errs:
    print("  " + e)
PY
) || fail "the readers: $out"
fusermount3 -u "$MNT"; wait $daemon; rc=$?; daemon=
# shellcheck disable=SC2046
set -- $(echo "$out" | head -n 1)
files=$1 ranges=$3 bytes=$5 failed=$7 passes=$9 njobs=${11}
issues=$(grep -c "^ISSUE imds" "$WORK/cred.log")
users=$(awk '$1 == "ISSUE" {print $4}' "$WORK/cred.log" | sort -u | wc -l)
expired=$(grep -c "^GATE EXPIRED" "$WORK/cred.log")
gets=$(grep -c "^GATE OK GET" "$WORK/cred.log")
badtok=$(grep -c "^GATE BADTOKEN" "$WORK/cred.log")
echo "$out" | sed -n '2,$p'
[ "$failed" = 0 ] || fail "$failed failed reads of $files in $SECS s"
[ "$rc" = 0 ] || fail "tilefs exited $rc: $(tail -n 5 "$WORK/log")"
[ "$issues" -ge $((SECS / TTL)) ] && [ "$users" = 2 ] ||
	fail "keys fetched $issues times from $users users in $SECS s of $TTL s keys"
grep -q -e testing -e testing2 "$WORK/log" && fail "a secret key in the mount's log"
grep -Eq 'tok[0-9]+-[0-9a-f]{8}' "$WORK/log" && fail "a session token in the mount's log"
ok "$files whole files ($passes passes over the $njobs of the corpus, $((bytes / 1048576)) MiB) and $ranges ranges read in $SECS s" \
	"by 4 readers on keys living $TTL s (refused $REVOKE s early): 0 failed; $issues keys fetched from IMDS (2 users), $gets GETs let in," \
	"$expired refused as expired, $badtok with an unknown token"
grep -q . "$WORK/log" && echo "the mount's log: $(sort "$WORK/log" | uniq -c | sort -rn | head -5)"
exit 0
