#!/bin/sh
# tests/s3/s3.sh - the object-store source against a real store: OpenStack
# Swift with its S3 API on loopback (tests/s3/store), started and stopped
# here.  The whole corpus decodes byte-exact from the store with no
# configuration but the endpoint, the credentials and the key; again with
# a fault-injecting proxy (503 SlowDown, resets, truncated and short
# bodies, delays) between us and the store, through tiletool and through
# tilefs s3://corpus; reads the proxy fails every
# time give exit 1 in bounded time, naming object, range and status; a
# wrong secret or bucket fails the mount (exit 5) with one line and no
# secret; an object replaced while open reads STALE, never mixed bytes;
# array views (tiletool export) from the store equal the local ones; under
# allow_other, plaintext is the mounter's alone (0400) even when the store
# fails every ranged read, the rest 0444.
#
# Needs: the corpus (TF_CORPUS, skips with 77 when absent), swift (skips
# with 77 when absent unless TILEFS_CI=1), python3, built TILETOOL, TILEFS
# and S3READ.  Bounded: store start-up 60 s, each step by timeouts.
set -u
here=$(cd "$(dirname "$0")" && pwd)
CORPUS=${TF_CORPUS:-$here/../../../shared/corpus}
TF_TOOLS=${TF_TOOLS:-$here/../../../shared/tools}
export TF_TOOLS
PORT=${TF_S3_PORT:-18092}; export TF_S3_PORT=$PORT
PROXY=$((PORT + 8))
skip() { echo "SKIP: $*"; [ "${TILEFS_CI:-0}" = 1 ] && exit 1; exit 77; }
[ -d "$CORPUS" ] || skip "no corpus at $CORPUS"
command -v swift-proxy-server >/dev/null 2>&1 || skip "swift not installed (contrib/setup installs it)"
WORK=$(mktemp -d /tmp/tilefs-s3.XXXXXX)
pass=0; failed=0
ok() { pass=$((pass + 1)); echo "ok: $*"; }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
proxy_pid=
cleanup() {
	[ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null
	fusermount3 -u "$WORK/mnt" 2>/dev/null
	"$here/store" stop "$WORK/store"
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

"$here/store" start "$WORK/store" || { echo "FAIL: store did not start"; exit 1; }
"$here/store" upload "$WORK/store" corpus "$CORPUS" || { echo "FAIL: upload"; exit 1; }
ok "store started, corpus uploaded"
export AWS_ACCESS_KEY_ID=test:tester AWS_SECRET_ACCESS_KEY=testing
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL
export HOME=$WORK	# no ~/.aws of the developer's
printf '[s3]\nendpoint = http://127.0.0.1:%s\n' "$PORT" > "$WORK/s3.ini"

# ---- the corpus, zero-config, straight from the store
arr=$(cd "$CORPUS" && ls -d */array | head -1)
"$TILETOOL" schema -c "$WORK/s3.ini" "s3://corpus/$arr" > "$WORK/schema.s3" 2>&1 &&
	"$TILETOOL" schema "$CORPUS/$arr" | tail -n +2 > "$WORK/schema.local" &&
	tail -n +2 "$WORK/schema.s3" | cmp -s - "$WORK/schema.local" &&
	ok "tiletool schema s3://corpus/$arr" || fail "tiletool schema of $arr from the store"
# ---- array views from the store: tiletool export equals the local export
views_from_store() {
	n=0; bad=
	for v in "sparse_2d/array|" "multifrag_sparse/array|" "extra/schema_evolution/array|" \
		"extra/sparse_dups_timestamps/array|" "extra/sparse_dups_consolidated_deletes/array|" \
		"dense_2d/array|--npy f64" "multifrag_dense_disjoint/array|--raw i64"; do
		a=${v%%|*}; opt=${v#*|}
		[ -d "$CORPUS/$a" ] || continue
		# shellcheck disable=SC2086
		timeout 120 "$TILETOOL" export -c "$WORK/s3.ini" $opt "s3://corpus/$a" > "$WORK/view.s3" 2> "$WORK/err" &&
			"$TILETOOL" export $opt "$CORPUS/$a" > "$WORK/view.local" && [ -s "$WORK/view.local" ] &&
			cmp -s "$WORK/view.s3" "$WORK/view.local" && n=$((n + 1)) || bad="$bad $a $opt: $(head -c 200 "$WORK/err");"
	done
	f=$(ls "$CORPUS/multifrag_sparse/array/__fragments" | head -n 1)
	timeout 120 "$TILETOOL" export -c "$WORK/s3.ini" --fragment "$f" s3://corpus/multifrag_sparse/array > "$WORK/view.s3" &&
		"$TILETOOL" export --fragment "$f" "$CORPUS/multifrag_sparse/array" | cmp -s - "$WORK/view.s3" &&
		n=$((n + 1)) || bad="$bad fragment $f;"
	[ -z "$bad" ] && ok "tiletool export s3://: $n views equal the local ones" || fail "views from the store:$bad"
}
views_from_store
out=$(timeout 600 python3 "$here/corpus-s3.py" "$TILETOOL" "$WORK/s3.ini" "$CORPUS" s3://corpus . extra)
echo "$out" | tail -n 9
case $(echo "$out" | tail -n 1) in *" 0/"*|"") fail "corpus from the store" ;; *) [ "$(echo "$out" | grep -c FAIL)" = 0 ] && ok "corpus from the store" || fail "corpus from the store" ;; esac

# ---- the corpus through the mount, zero-config (the shared check: every
# data file compared, 4 threads, random ranges)
mount_check() {	# WHAT INI
	timeout 900 python3 "$TF_TOOLS/check-mount" --zero-config --mount-source s3://corpus --extra-ini "$2" \
		"$TILEFS" "$CORPUS" . extra > "$WORK/mount.out" 2>&1
	rc=$?
	tail -n 1 "$WORK/mount.out"
	[ $rc = 0 ] && grep -q "371/371" "$WORK/mount.out"
}
if [ -x "${TILEFS:-}" ] && [ -f "$TF_TOOLS/check-mount" ]; then
	mount_check "store" "$WORK/s3.ini" && ok "tilefs s3://corpus: the corpus byte-exact through the mount" ||
		fail "the corpus through tilefs s3://corpus"
fi

enc=$(cd "$CORPUS" && grep -l '"key_hex"' */manifest.json extra/*/manifest.json 2>/dev/null | head -1)
encf=$(cd "$CORPUS/${enc%/manifest.json}" && find array/__fragments -name 'a0.tdb' | head -1)
if timeout 60 "$TILETOOL" decode -c "$WORK/s3.ini" "s3://corpus/${enc%/manifest.json}/$encf" > /dev/null 2> "$WORK/err"; then
	fail "encrypted array decoded without its key"
else
	ok "encrypted array without its key refused: $(head -c 120 "$WORK/err")"
fi

# ---- random ranges, 4 readers, a 24 MiB object; replaced while open
mkdir -p "$WORK/big" "$WORK/big2"
head -c 25165824 /dev/urandom > "$WORK/big/r.bin"
"$here/store" upload "$WORK/store" big "$WORK/big"
export AWS_ENDPOINT_URL=http://127.0.0.1:$PORT
r=$(timeout 120 "$S3READ" random s3://big r.bin "$WORK/big/r.bin" 400) && ok "400 random ranges by 4 readers: $r" ||
	fail "random ranges: $r"
timeout 60 "$S3READ" cat s3://big r.bin | cmp -s - "$WORK/big/r.bin" && ok "whole object in 64 KiB reads" ||
	fail "whole object in 64 KiB reads"
head -c 1000 /dev/urandom > "$WORK/big2/r.bin"
mkfifo "$WORK/go"
(timeout 60 "$S3READ" replace s3://big r.bin < "$WORK/go" > "$WORK/replace.out") &
rp=$!
exec 3> "$WORK/go"
i=0; while [ $i -lt 300 ] && ! grep -q open "$WORK/replace.out" 2>/dev/null; do i=$((i + 1)); sleep 0.1; done
"$here/store" upload "$WORK/store" big "$WORK/big2"
echo go >&3; exec 3>&-
wait $rp
[ "$(sed -n 2p "$WORK/replace.out")" = stale ] && [ "$(sed -n 3p "$WORK/replace.out")" = 1000 ] &&
	ok "replaced while open: the reader gets STALE, a new open the new object" ||
	fail "replaced while open: $(tr '\n' ' ' < "$WORK/replace.out")"
unset AWS_ENDPOINT_URL

# ---- refusals: wrong secret, unknown bucket (tiletool exit 1, tilefs exit 5)
mkdir -p "$WORK/mnt"
AWS_SECRET_ACCESS_KEY=wrong-secret-xyz timeout 60 "$TILETOOL" decode -c "$WORK/s3.ini" "s3://corpus/$arr/x" \
	> /dev/null 2> "$WORK/err"; rc=$?
[ $rc = 1 ] && grep -q "403" "$WORK/err" && ! grep -q wrong-secret-xyz "$WORK/err" &&
	ok "tiletool, wrong secret: $(cat "$WORK/err")" || fail "tiletool wrong secret: rc=$rc $(cat "$WORK/err")"
if [ -n "${TILEFS:-}" ] && [ -x "$TILEFS" ]; then
	AWS_SECRET_ACCESS_KEY=wrong-secret-xyz timeout 60 "$TILEFS" -o config="$WORK/s3.ini" s3://corpus "$WORK/mnt" \
		2> "$WORK/err"; rc=$?
	[ $rc = 5 ] && [ "$(wc -l < "$WORK/err")" = 1 ] && grep -q "127.0.0.1:$PORT.*corpus.*HTTP 403" "$WORK/err" &&
		! grep -q wrong-secret-xyz "$WORK/err" && ! mountpoint -q "$WORK/mnt" &&
		ok "tilefs, wrong secret: exit 5: $(cat "$WORK/err")" || fail "tilefs wrong secret: rc=$rc $(cat "$WORK/err")"
	timeout 60 "$TILEFS" -o config="$WORK/s3.ini" s3://no-such-bucket "$WORK/mnt" 2> "$WORK/err"; rc=$?
	[ $rc = 5 ] && grep -q "no-such-bucket.*HTTP 404" "$WORK/err" && ! mountpoint -q "$WORK/mnt" &&
		ok "tilefs, unknown bucket: exit 5: $(cat "$WORK/err")" || fail "tilefs unknown bucket: rc=$rc $(cat "$WORK/err")"
fi

# ---- under allow_other (issue 20): objects have no modes, so every file and
# view is 0444, the mounter's, but plaintext is the mounter's alone (0400),
# decided before any index: also when the store fails every ranged read
# (the array's schema and fragment metadata cannot be read).
allow_other_check() {	# WHAT ENDPOINT_PORT
	printf '[tilefs]\ndefault_key = k\nviews = yes\n[key k]\nfile = %s\n[s3]\nendpoint = http://127.0.0.1:%s\ntimeout = 1\nretries = 1\n' \
		"$WORK/k.key" "$2" > "$WORK/k.ini"
	timeout 60 "$TILEFS" -o config="$WORK/k.ini" -o allow_other -o index_dir=none s3://corpus "$WORK/mnt" ||
		{ fail "$1: mount"; return; }
	a0=$WORK/mnt/${enc%/manifest.json}/$encf
	why=
	[ "$(stat -c '%a %u' "$a0")" = "400 $(id -u)" ] || why="$why plaintext shows $(stat -c '%a %u' "$a0");"
	as_nobody cat "$a0" > /dev/null 2> "$WORK/err" || grep -q "Permission denied" "$WORK/err" ||
		why="$why nobody's open of plaintext: $(cat "$WORK/err");"
	as_nobody cat "$a0" > /dev/null 2>&1 && why="$why nobody read plaintext;"
	if [ "$1" = store ]; then
		as_nobody cat "$WORK/mnt/${enc%/manifest.json}/array/@views/cells.csv" > /dev/null 2>&1 &&
			why="$why nobody read the views of an encrypted array;"
		v=$WORK/mnt/multifrag_sparse/array/@views/cells.csv
		[ "$(stat -c %a "$v")" = 444 ] || why="$why views of a plain array show $(stat -c %a "$v");"
		cat "$v" > "$WORK/root.csv" && as_nobody cat "$v" | cmp -s - "$WORK/root.csv" ||
			why="$why nobody cannot read the views of a plain array;"
	fi
	fusermount3 -u "$WORK/mnt"
	[ -z "$why" ] && ok "tilefs s3:// -o allow_other ($1): plaintext the mounter's alone, the rest 0444" ||
		fail "tilefs s3:// -o allow_other ($1):$why"
}
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
if [ -x "${TILEFS:-}" ] && [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
	chmod 755 "$WORK"	# nobody must reach the mountpoint
	printf '%s' 54696c6544422d6f7261636c652d6b65792d3031323334353637383941424344 > "$WORK/k.key"
	chmod 600 "$WORK/k.key"
	allow_other_check store "$PORT"
fi

# ---- through the fault proxy
start_proxy() {	# ARGS...
	rm -f "$WORK/proxy.ready"
	python3 "$here/faultproxy.py" --listen $PROXY --upstream 127.0.0.1:$PORT --ready "$WORK/proxy.ready" \
		--log "$WORK/proxy.log" "$@" &
	proxy_pid=$!
	i=0; while [ $i -lt 100 ] && [ ! -f "$WORK/proxy.ready" ]; do i=$((i + 1)); sleep 0.1; done
}
stop_proxy() { kill "$proxy_pid" 2>/dev/null; wait "$proxy_pid" 2>/dev/null; proxy_pid=; }
printf '[s3]\nendpoint = http://127.0.0.1:%s\ntimeout = 1\nretries = 4\n' "$PROXY" > "$WORK/fault.ini"

start_proxy --faults 503,reset,trunc,short --every 5 --per-request 2
mount_check "fault proxy" "$WORK/fault.ini"; rc=$?
faults=$(awk '$4 != "-"' "$WORK/proxy.log" | wc -l)	# the FAULT field
[ $rc = 0 ] && [ "$faults" -gt 100 ] &&
	ok "tilefs s3://corpus through the fault proxy: the corpus byte-exact ($faults faults injected)" ||
	fail "the corpus through the mount and the fault proxy (rc=$rc, $faults faults injected)"
stop_proxy

if [ -x "${TILEFS:-}" ] && [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
	start_proxy --faults 503 --every 1 --ranged-only
	allow_other_check "every ranged read fails" "$PROXY"
	stop_proxy
fi

start_proxy --faults delay --every 2 --delay 2.5
f1=$(cd "$CORPUS" && find "$arr/__fragments" -name 'a0.tdb' | head -1)
"$TILETOOL" decode "$CORPUS/$f1" > "$WORK/want"
timeout 120 "$TILETOOL" decode -c "$WORK/fault.ini" "s3://corpus/$f1" > "$WORK/got" && cmp -s "$WORK/got" "$WORK/want" &&
	ok "every other answer delayed past the timeout: byte-exact" || fail "delays"
stop_proxy

start_proxy --faults 503 --every 1 --ranged-only
t0=$(date +%s)
timeout 120 "$TILETOOL" decode -c "$WORK/fault.ini" "s3://corpus/$f1" > "$WORK/got" 2> "$WORK/err"; rc=$?
t1=$(date +%s)
[ $rc = 1 ] && grep -q "key '[^']*' bytes [0-9]*-[0-9]*: HTTP 503 (SlowDown) (gave up" "$WORK/err" && [ $((t1 - t0)) -lt 60 ] &&
	ok "every ranged GET 503: exit 1 in $((t1 - t0)) s: $(head -c 300 "$WORK/err")" ||
	fail "persistent 503: rc=$rc $((t1 - t0)) s $(cat "$WORK/err")"
stop_proxy
start_proxy --faults trunc,reset,short --every 1 --ranged-only
timeout 120 "$TILETOOL" decode -c "$WORK/fault.ini" "s3://corpus/$f1" > "$WORK/got" 2> "$WORK/err"; rc=$?
[ $rc = 1 ] && [ ! -s "$WORK/got" ] && ok "every body cut or reset: exit 1, no byte out: $(head -c 300 "$WORK/err")" ||
	fail "persistent truncation: rc=$rc $(wc -c < "$WORK/got") bytes $(cat "$WORK/err")"
stop_proxy

echo "$pass passed, $failed failed"
[ $failed = 0 ]
