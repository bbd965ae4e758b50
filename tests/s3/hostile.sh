#!/bin/sh
# tests/s3/hostile.sh - a store that lies or stalls (tests/s3/hostile.py, a
# small S3 server on loopback started and stopped here), through tiletool
# and through tilefs s3://BUCKET: every request ends with an error within
# its deadline (request_deadline = 2 here), a killed caller frees the mount
# at once, and nothing wrong is ever read.
#
#   stall    a listing's second page never answered: EIO within the deadline; a caller
#            killed while waiting leaves, and fusermount3 -u works at once
#   slow     a body at one byte a second: EIO within the deadline
#   loop     a listing repeating its continuation token: refused at once
#   endless  a listing of new keys page after page: refused at list_max_bytes
#            or list_max_pages (or the deadline), the daemon's memory bounded
#   many     an honest listing of 2,500 keys in three pages, read whole
#   badkey   keys that decode to no file name ('%00', '%2F', '%zz'): skipped,
#            with one log line naming them, the rest of the directory shown
#   liar     If-Match ignored, the first ETag kept, the object swapped after
#            its first GET: EIO at the first byte of the new version
#   noetag   If-Match ignored, no ETag in answers, swapped likewise: EIO
#   dated    a liar whose listings carry the objects' dates (a small file
#            read first teaches the mount that answers agree with them, so
#            the next object's GETs go out at once): EIO likewise, and a
#            second cat of the swapped object (the first version's parts
#            kept) EIO too, never bytes of both versions
#   bare     no ETag even in listings: listed, but every open EIO
#   vacuum   a fragment directory listed, then vacuumed: its file EIO at the
#            first read (the store's 404), then ENOENT (not EIO for ever)
#   nometa   an array (the corpus's dense_2d) whose commits cannot be listed:
#            its @views EIO, logged
#
# Needs python3, built TILETOOL and TILEFS, the corpus (TF_CORPUS) for the
# array; the mount cases need root and /dev/fuse (skipped otherwise, failed
# when TILEFS_CI=1).  About 25 seconds.
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${TILEFS:?}" "${TILETOOL:?}"
WORK=$(mktemp -d /tmp/tilefs-hostile.XXXXXX)
MNT=$WORK/mnt
mkdir -p "$MNT" "$WORK/root"
failed=0
ok() { echo "ok: $*"; }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
srv=
daemon=
cleanup() {
	mountpoint -q "$MNT" && { fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"; }
	[ -n "$daemon" ] && kill "$daemon" 2>/dev/null
	[ -n "$srv" ] && kill "$srv" 2>/dev/null
	[ -n "${KEEP:-}" ] && echo "kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

ms() { echo $(($(date +%s%N) / 1000000)); }

# ---- the store's objects
python3 - "$WORK/root" <<'PY' || { echo "FAIL: making objects"; exit 1; }
import os, random, struct, sys
root = sys.argv[1]
def put(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "wb").write(data)
def tile(chunks):   # a tile file with no filters: chunk count, then each chunk's sizes and bytes
    out = struct.pack("<Q", len(chunks))
    for c in chunks:
        out += struct.pack("<III", len(c), len(c), 0) + c
    return out
rnd = random.Random(20)
data = rnd.randbytes(4000)
open(os.path.join(root, "..", "t.want"), "wb").write(data)
for b in ("slow", "stall", "loop", "endless", "badkey", "badtree"):
    put(f"{root}/{b}/t.tdb", tile([data[:2000], data[2000:]]))
    put(f"{root}/{b}/d/x.bin", data[:100])
    if b == "badtree":
        put(f"{root}/{b}/__t/f1", data[:10])
        put(f"{root}/{b}/__t/x/y.txt", data[:100])
big = rnd.randbytes(3 << 20)
open(os.path.join(root, "..", "big.want"), "wb").write(big)
chunks = [big[i:i + 65536] for i in range(0, len(big), 65536)]
open(os.path.join(root, "..", "bigt.want"), "wb").write(big)
open(os.path.join(root, "..", "big.v2"), "wb").write(bytes(c ^ 0xFF for c in big))
small = rnd.randbytes(100000)
put(f"{root}/dated/small.bin", small)
open(os.path.join(root, "..", "small.want"), "wb").write(small)
for b in ("liar", "noetag", "dated", "bare"):
    put(f"{root}/{b}/big.bin", big)
    put(f"{root}/{b}/big.bin.v2", bytes(c ^ 0xFF for c in big))
    put(f"{root}/{b}/bigt.tdb", tile(chunks))
    put(f"{root}/{b}/bigt.tdb.v2", tile([bytes(c ^ 0xFF for c in k) for k in chunks]))
frag = f"{root}/vacuum/arr/__fragments/__1_1_0123456789abcdef0123456789abcdef_22"
put(f"{frag}/__fragment_metadata.tdb", b"m" * 10)
put(f"{frag}/data.bin", data)
for i in range(2500):
    put(f"{root}/many/d/f{i:04d}", b"%d" % i)
for i in range(3):
    put(f"{root}/many/d/f{i * 1000 + 500:04d}.sub/x", b"x")
PY

CORPUS=${TF_CORPUS:-$here/../../../shared/corpus}
[ -d "$CORPUS/dense_2d/array" ] && mkdir -p "$WORK/root/nometa" && cp -r "$CORPUS/dense_2d/array" "$WORK/root/nometa/arr"

rm -f "$WORK/ready"
python3 "$here/hostile.py" --root "$WORK/root" --ready "$WORK/ready" --log "$WORK/store.log" &
srv=$!
i=0; while [ $i -lt 100 ] && [ ! -f "$WORK/ready" ]; do i=$((i + 1)); sleep 0.1; done
[ -f "$WORK/ready" ] || { echo "FAIL: the store did not start"; exit 1; }
PORT=$(cat "$WORK/ready")
# Short bounds: each attempt may take 5 s, retried 3 times, but no request
# (all attempts, all waits) more than 2 s.
cat > "$WORK/s3.ini" <<EOF
[s3]
endpoint = http://127.0.0.1:$PORT
anonymous = yes
timeout = 5
retries = 3
request_deadline = 2
EOF
unset AWS_ENDPOINT_URL AWS_PROFILE
export HOME=$WORK	# no ~/.aws of the developer's

# tiletool CMD... : runs it bounded; $rc, $took (ms), $WORK/err.
tool() {
	t0=$(ms)
	timeout 60 "$TILETOOL" "$@" > "$WORK/out" 2> "$WORK/err"
	rc=$?
	took=$(($(ms) - t0))
}

# ---- tiletool
tool decode -c "$WORK/s3.ini" -F '' s3://slow/t.tdb
[ $rc = 1 ] && [ $took -lt 3500 ] && grep -q "deadline" "$WORK/err" &&
	ok "tiletool, a body at 1 byte/s: exit 1 in $took ms: $(head -c 250 "$WORK/err")" ||
	fail "tiletool, a body at 1 byte/s: rc=$rc in $took ms: $(cat "$WORK/err")"
tool index -c "$WORK/s3.ini" --index-dir "$WORK/idx" s3://stall
[ $rc = 1 ] && [ $took -lt 3500 ] && grep -q "deadline" "$WORK/err" &&
	ok "tiletool index, a listing never answered: exit 1 in $took ms: $(head -c 250 "$WORK/err")" ||
	fail "tiletool index, a listing never answered: rc=$rc in $took ms: $(cat "$WORK/err")"

tool index -c "$WORK/s3.ini" --index-dir "$WORK/idx" s3://loop
[ $rc = 1 ] && [ $took -lt 2000 ] && grep -q "page 2 repeats a continuation token" "$WORK/err" &&
	ok "tiletool index, a listing repeating its token: exit 1 in $took ms: $(head -c 250 "$WORK/err")" ||
	fail "tiletool index, a listing repeating its token: rc=$rc in $took ms: $(cat "$WORK/err")"
{ cat "$WORK/s3.ini"; echo "list_max_bytes = 1M"; } > "$WORK/bytes.ini"
tool index -c "$WORK/bytes.ini" --index-dir "$WORK/idx" s3://endless
[ $rc = 1 ] && [ $took -lt 3500 ] && grep -q "more than 1048576 bytes of entries (list_max_bytes)" "$WORK/err" &&
	ok "tiletool index, an endless listing: exit 1 in $took ms: $(head -c 250 "$WORK/err")" ||
	fail "tiletool index, an endless listing, list_max_bytes = 1M: rc=$rc in $took ms: $(cat "$WORK/err")"
{ cat "$WORK/s3.ini"; echo "list_max_pages = 5"; } > "$WORK/pages.ini"
tool index -c "$WORK/pages.ini" --index-dir "$WORK/idx" s3://endless
[ $rc = 1 ] && [ $took -lt 3500 ] && grep -q "more than 5 pages (list_max_pages)" "$WORK/err" &&
	ok "tiletool index, an endless listing: exit 1 in $took ms: $(head -c 250 "$WORK/err")" ||
	fail "tiletool index, an endless listing, list_max_pages = 5: rc=$rc in $took ms: $(cat "$WORK/err")"

tool index -c "$WORK/s3.ini" --index-dir "$WORK/idx" s3://badkey
[ $rc = 0 ] && grep -q "warning: .* list '': 3 keys skipped, no file name here: 'bad%00name' (a NUL or a bad escape), 'esc%zz' (a NUL or a bad escape), 'sl/ash' (a '/' in a name)" "$WORK/err" &&
	ok "tiletool index, keys that are no file name: skipped, $(cat "$WORK/err")" ||
	fail "tiletool index, keys that are no file name: rc=$rc: $(cat "$WORK/err")"

# prefix_of FILE WANT: FILE's bytes are WANT's first ones.
prefix_of() { cmp -s -n "$(wc -c < "$1")" "$1" "$2"; }
tool decode -c "$WORK/s3.ini" -F '' s3://liar/bigt.tdb
[ $rc = 1 ] && prefix_of "$WORK/out" "$WORK/bigt.want" && grep -q "Last-Modified changed" "$WORK/err" &&
	ok "tiletool, an object swapped under a store ignoring If-Match: exit 1 after $(wc -c < "$WORK/out") good bytes: $(head -c 250 "$WORK/err")" ||
	fail "tiletool, an object swapped under a store ignoring If-Match: rc=$rc, $(wc -c < "$WORK/out") bytes$(prefix_of "$WORK/out" "$WORK/bigt.want" || echo ", not all the first version's"): $(cat "$WORK/err")"

# ---- the mount
if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null 2>&1; then
	[ "${TILEFS_CI:-0}" = 1 ] && fail "the mount cases need root and /dev/fuse"
	echo "SKIP: the mount cases need root and /dev/fuse"
	echo "$failed failed"
	[ $failed = 0 ] && exit 77 || exit 1
fi

# mount_store INI BUCKET [OPTIONS]: tilefs in the foreground (its log in $WORK/log).
mount_store() {
	ini=$1 bucket=$2
	shift 2
	timeout 120 "$TILEFS" -f -o config="$ini" "$@" "s3://$bucket" "$MNT" 2> "$WORK/log" &
	daemon=$!
	i=0
	until mountpoint -q "$MNT" || [ $i -ge 200 ]; do i=$((i + 1)); sleep 0.05; done
	mountpoint -q "$MNT" || { fail "no mount of s3://$bucket: $(cat "$WORK/log")"; return 1; }
}
# unmount_store: at once, or a failure (the mount is busy); the daemon
# exits 0 (a sanitizer's report would not).
unmount_store() {
	fusermount3 -u "$MNT" || { fail "cannot unmount: busy"; umount -l "$MNT"; }
	daemon_exit
}
daemon_exit() {
	wait "$daemon" || fail "tilefs exited $?: $(tail -n 20 "$WORK/log")"
	daemon=
}
# run CMD...: bounded; $rc, $took, $WORK/err.
run() {
	t0=$(ms)
	timeout 60 "$@" > "$WORK/out" 2> "$WORK/err"
	rc=$?
	took=$(($(ms) - t0))
}

mount_store "$WORK/s3.ini" stall && {
	run stat "$MNT/t.tdb"
	[ $rc = 1 ] && [ $took -lt 3500 ] && grep -q "Input/output error" "$WORK/err" &&
		ok "tilefs, a listing never answered: EIO in $took ms" ||
		fail "tilefs, a listing never answered: rc=$rc in $took ms: $(cat "$WORK/err")"
	unmount_store
	grep -q "list ''.*deadline" "$WORK/log" && ok "... logged: $(grep -m1 deadline "$WORK/log")" ||
		fail "a listing past its deadline is not logged: $(cat "$WORK/log")"
}
# The kernel reads a page whose read-ahead failed once more, alone: two
# requests, each ending at its deadline.
mount_store "$WORK/s3.ini" slow && {
	run cat "$MNT/d/x.bin"
	[ $rc = 1 ] && [ $took -lt 5500 ] && grep -q "Input/output error" "$WORK/err" &&
		ok "tilefs, a body at 1 byte/s: EIO in $took ms" ||
		fail "tilefs, a body at 1 byte/s: rc=$rc in $took ms: $(cat "$WORK/err")"
	unmount_store
	grep -q "key 'd/x.bin' bytes 0-99: .*deadline" "$WORK/log" && ok "... logged: $(grep -m1 deadline "$WORK/log")" ||
		fail "a read past its deadline is not logged: $(cat "$WORK/log")"
}

mount_store "$WORK/s3.ini" many && {
	run ls "$MNT/d"
	[ $rc = 0 ] && [ "$(wc -l < "$WORK/out")" = 2503 ] && [ "$(cat "$MNT/d/f2499")" = 2499 ] &&
		[ "$(ls "$MNT/d/f1500.sub")" = x ] && ok "tilefs, an honest listing of three pages: 2,503 entries" ||
		fail "tilefs, an honest listing of three pages: rc=$rc, $(wc -l < "$WORK/out") entries: $(cat "$WORK/err")"
	unmount_store
}
mount_store "$WORK/s3.ini" badkey && {
	run ls "$MNT"
	[ $rc = 0 ] && [ "$(tr '\n' ' ' < "$WORK/out")" = "d t.tdb " ] && cmp -s "$MNT/d/x.bin" "$WORK/t.want" -n 100 &&
		ok "tilefs, keys that are no file name: the rest shown" ||
		fail "tilefs, keys that are no file name: rc=$rc: $(cat "$WORK/out" "$WORK/err")"
	unmount_store
	[ "$(grep -c "skipped" "$WORK/log")" = 1 ] && grep -q "3 keys skipped.*'bad%00name'" "$WORK/log" &&
		ok "... logged once: $(grep -m1 skipped "$WORK/log")" || fail "skipped keys not logged once: $(cat "$WORK/log")"
}
# A directory named __* is listed whole (no delimiter) and its
# subdirectories' listings built from it: by the same rules.
mount_store "$WORK/s3.ini" badtree && {
	run ls -a "$MNT/__t" "$MNT/__t/x" "$MNT/__t/m"
	[ $rc = 0 ] && [ "$(tr '\n' ' ' < "$WORK/out")" = "$MNT/__t: . .. f1 m x  $MNT/__t/m: . ..  $MNT/__t/x: . .. y.txt " ] &&
		cmp -s "$MNT/__t/x/y.txt" "$WORK/t.want" -n 100 &&
		ok "tilefs, a tree listed whole: no '..', empty name or .tilefs shown, a folder marker an empty directory" ||
		fail "tilefs, a tree listed whole: rc=$rc: $(cat "$WORK/out" "$WORK/err")"
	unmount_store
	grep -q "keys skipped.*'\.' or '\.\.'" "$WORK/log" && grep -q "keys skipped.*an empty name" "$WORK/log" &&
		! grep -q "tilefs/[ij]" "$WORK/log" && ok "... logged: $(grep -m1 skipped "$WORK/log")" ||
		fail "keys of a tree listed whole that are no name: not logged: $(cat "$WORK/log")"
}
for b in liar noetag dated; do
	# dated with a disk cache: blocks of the first version kept, never
	# served beside the second's answers
	if [ $b = dated ]; then
		mkdir -m 700 "$WORK/dc"
		mount_store "$WORK/s3.ini" $b -o cache_dir="$WORK/dc" || continue
	else
		mount_store "$WORK/s3.ini" $b || continue
	fi
	if [ $b = dated ]; then	# a first object teaches the mount that answers agree with listings
		run cat "$MNT/small.bin"
		[ $rc = 0 ] && cmp -s "$WORK/out" "$WORK/small.want" && ok "tilefs, $b: a first object byte-exact" ||
			fail "tilefs, $b: a first object: rc=$rc: $(cat "$WORK/err")"
	fi
	for try in first second; do	# the second open finds the first version's parts kept
		[ $b = noetag ] && [ $try = second ] && continue
		run cat "$MNT/big.bin"
		if [ $try = first ]; then
			[ $rc = 1 ] && grep -q "Input/output error" "$WORK/err" && prefix_of "$WORK/out" "$WORK/big.want" &&
				ok "tilefs, $b: the object swapped while read: EIO after $(wc -c < "$WORK/out") good bytes" ||
				fail "tilefs, $b: the object swapped while read: rc=$rc, $(wc -c < "$WORK/out") bytes$(prefix_of "$WORK/out" "$WORK/big.want" || echo ", not all the first version's"): $(cat "$WORK/err")"
		else	# one version or the other (its parts, the kernel's pages), never both
			{ [ $rc = 1 ] || [ $rc = 0 ]; } && { prefix_of "$WORK/out" "$WORK/big.want" || prefix_of "$WORK/out" "$WORK/big.v2"; } &&
				ok "tilefs, $b: read again: $(wc -c < "$WORK/out") bytes of one version, rc=$rc" ||
				fail "tilefs, $b: read again: rc=$rc, $(wc -c < "$WORK/out") bytes, of both versions: $(cat "$WORK/err")"
		fi
	done
	unmount_store
	grep -q "key 'big.bin' bytes .*: \(HTTP 20.: \)\?\(the object was replaced (Last-Modified \(changed\|not the listing's\))\|no ETag in the answer\)" "$WORK/log" &&
		ok "... logged: $(grep -m1 "big.bin" "$WORK/log")" || fail "$b: not logged: $(cat "$WORK/log")"
done
mount_store "$WORK/s3.ini" bare && {
	run ls "$MNT"
	[ $rc = 0 ] && grep -q "^big.bin$" "$WORK/out" && ok "tilefs, a store with no ETags: listed" ||
		fail "tilefs, a store with no ETags: not listed: rc=$rc $(cat "$WORK/err")"
	run cat "$MNT/big.bin"
	[ $rc = 1 ] && grep -q "Input/output error" "$WORK/err" && [ ! -s "$WORK/out" ] &&
		ok "tilefs, a store with no ETags: open EIO" || fail "tilefs, a store with no ETags: rc=$rc $(cat "$WORK/err")"
	unmount_store
	grep -q "key 'big.bin': the store gives it no ETag" "$WORK/log" &&
		ok "... logged: $(grep -m1 "no ETag" "$WORK/log")" || fail "no ETag: not logged: $(cat "$WORK/log")"
}
# A fragment directory never changes, so its listing is kept; but it may
# be vacuumed.  The kernel keeps entries for a second: ENOENT within three.
mount_store "$WORK/s3.ini" vacuum && {
	F=$MNT/arr/__fragments/__1_1_0123456789abcdef0123456789abcdef_22
	run ls "$F"
	[ "$(tr '\n' ' ' < "$WORK/out")" = "__fragment_metadata.tdb data.bin " ] || fail "fragment not listed: $(cat "$WORK/out" "$WORK/err")"
	rm -r "$WORK/root/vacuum/arr/__fragments"
	run cat "$F/data.bin"
	[ $rc = 1 ] && grep -q "Input/output error" "$WORK/err" && ok "tilefs, a fragment vacuumed: its file EIO at once" ||
		fail "tilefs, a fragment vacuumed: rc=$rc: $(cat "$WORK/err")"
	t0=$(ms)
	i=0; while [ $i -lt 30 ] && stat "$F/data.bin" > /dev/null 2>&1; do i=$((i + 1)); sleep 0.1; done
	took=$(($(ms) - t0))
	stat "$F/data.bin" > /dev/null 2> "$WORK/err"
	grep -q "No such file or directory" "$WORK/err" && ok "... then ENOENT, after $took ms" ||
		fail "a fragment vacuumed: still there after $took ms: $(cat "$WORK/err")"
	unmount_store
}
if [ -d "$WORK/root/nometa/arr" ]; then
	mount_store "$WORK/s3.ini" nometa -o views && {
		run ls "$MNT/arr/@views"
		[ $rc != 0 ] && [ $took -lt 3500 ] && grep -q "Input/output error" "$WORK/err" &&
			ok "tilefs, an array whose commits cannot be listed: its views EIO in $took ms" ||
			fail "tilefs, an array whose commits cannot be listed: rc=$rc in $took ms: $(cat "$WORK/err")"
		unmount_store
		grep -q "arr: .* list 'arr/__commits/': HTTP 503 (SlowDown)" "$WORK/log" &&
			ok "... logged: $(grep -m1 "__commits" "$WORK/log")" || fail "views of an array failing: not logged: $(cat "$WORK/log")"
	}
else
	[ "${TILEFS_CI:-0}" = 1 ] && fail "no corpus at $CORPUS"
	echo "SKIP: views of an array failing: no corpus at $CORPUS"
fi
mount_store "$WORK/s3.ini" loop && {
	run ls "$MNT"
	[ $rc != 0 ] && [ $took -lt 2000 ] && grep -q "Input/output error" "$WORK/err" &&
		ok "tilefs, a listing repeating its token: EIO in $took ms" ||
		fail "tilefs, a listing repeating its token: rc=$rc in $took ms: $(cat "$WORK/err")"
	unmount_store
	grep -q "list '': page 2 repeats a continuation token" "$WORK/log" &&
		ok "... logged: $(grep -m1 "repeats" "$WORK/log")" || fail "a repeated token not logged: $(cat "$WORK/log")"
}
# With the default bounds: the deadline ends it, and the daemon's memory
# stays what it holds of one listing, under list_max_bytes (64 MiB); a
# sanitizer's shadow memory makes that bound meaningless.
mount_store "$WORK/s3.ini" endless && {
	pid=$(pgrep -P "$daemon" tilefs)
	run ls "$MNT"
	hwm=$(awk '/VmHWM/ { print $2 }' "/proc/$pid/status")
	[ "${TILEFS_SANITIZERS:-no}" = no ] || hwm=0
	[ $rc != 0 ] && [ $took -lt 3500 ] && grep -q "Input/output error" "$WORK/err" && [ "$hwm" -lt 98304 ] &&
		ok "tilefs, an endless listing: EIO in $took ms, the daemon's peak $((hwm / 1024)) MiB" ||
		fail "tilefs, an endless listing: rc=$rc in $took ms, the daemon's peak $((hwm / 1024)) MiB: $(cat "$WORK/err")"
	unmount_store
}

# A caller killed while its lookup waits for a listing that never comes:
# with a deadline of a minute, only noticing the caller gone frees the
# kernel's request, the killed process and the mount.
sed 's/^request_deadline = .*/request_deadline = 60/; s/^timeout = .*/timeout = 60/' "$WORK/s3.ini" > "$WORK/long.ini"
mount_store "$WORK/long.ini" stall && {
	n0=$(grep -c stalled "$WORK/store.log")
	stat "$MNT/t.tdb" > /dev/null 2>&1 &
	victim=$!
	i=0; while [ $i -lt 100 ] && [ "$(grep -c stalled "$WORK/store.log")" = "$n0" ]; do i=$((i + 1)); sleep 0.05; done
	kill -9 $victim
	t0=$(ms)
	i=0; until fusermount3 -u "$MNT" 2> /dev/null || [ $i -ge 30 ]; do i=$((i + 1)); sleep 0.1; done
	took=$(($(ms) - t0))
	if mountpoint -q "$MNT"; then
		fail "a caller killed in a stalled lookup: the mount still busy after $took ms"
		umount -l "$MNT"
	else
		ok "a caller killed in a stalled lookup: unmounted after $took ms"
	fi
	wait "$victim" 2>/dev/null
	daemon_exit
}

echo "$failed failed"
[ $failed = 0 ]
