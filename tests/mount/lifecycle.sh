#!/bin/sh
# tests/mount/lifecycle.sh - a mount's life for servers (tilefs(1), READY
# SIGNAL, IDLE UNMOUNT, RELOAD): -o notify_pipe says `s` once the mount
# serves and `f` when it fails; systemd's NOTIFY_SOCKET hears READY=1 only
# when the mount serves; -o idle_timeout unmounts an idle mount on time and
# never a busy one; SIGHUP rereads the configuration under 16 readers
# without one failed read, new opens get the new rules and keys, open files
# keep theirs, and a bad file is refused with FILE:LINE.
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)

src=$WORK/src
mkdir -p "$src/d"
head -c 300000 /dev/urandom > "$WORK/a.bin"
head -c 200000 /dev/urandom > "$WORK/b.bin"
"$TILETOOL" encode -F zstd -t uint8 "$WORK/a.bin" "$src/d/a.tdb" || fail "encode a"
"$TILETOOL" encode -F lz4 -t uint8 "$WORK/b.bin" "$src/d/b.tdb" || fail "encode b"
head -c 32 /dev/urandom > "$WORK/k1"; head -c 32 /dev/urandom > "$WORK/k2"
chmod 600 "$WORK/k1" "$WORK/k2"
"$TILETOOL" encode -F 'zstd' -t uint8 -k "$WORK/k1" "$WORK/b.bin" "$src/d/e.tdb" || fail "encode e"
# conf KEYFILE [extra lines]: a.tdb and e.tdb decoded; b.tdb as the extra
# lines say (hidden unless they match it).
conf() {
	k=$1; shift
	printf '[tilefs]\nunmatched = hide\n[key k]\nfile = %s\n[match d/a.tdb]\nfilters = zstd\ndatatype = uint8\n' "$k"
	printf '[match d/e.tdb]\nfilters = zstd\ndatatype = uint8\nkey = k\n'
	for l in "$@"; do printf '%s\n' "$l"; done
}
conf "$WORK/k1" > "$WORK/c.ini"
mkfifo "$WORK/ready"

# start [OPTS...]: tilefs -f in the background ($pid, log in $WORK/log);
# its notify pipe's first byte in $said.
start() {
	"$TILEFS" -f -o config="$WORK/c.ini" -o index_dir=none -o notify_pipe="$WORK/ready" "$@" \
		"$src" "$MNT" 2> "$WORK/log" &
	pid=$!
	said=$(timeout 30 head -c 1 "$WORK/ready") || fail "no word on the notify pipe"
}
stop() { fusermount3 -u "$MNT" 2>/dev/null; wait "$pid"; }
now() { date +%s%N; }
# mark; ...; wait_log TEXT: until the log says TEXT after the mark (30 s
# at most).
mark() { seen=$(wc -l < "$WORK/log"); }
wait_log() {
	i=0
	until tail -n +$((seen + 1)) "$WORK/log" | grep -q "$1"; do
		i=$((i + 1)); [ $i -lt 600 ] || fail "the log never said '$1': $(cat "$WORK/log")"
		sleep 0.05
	done
}

# ---- the ready signal ----------------------------------------------------------------------
start
[ "$said" = s ] || fail "notify_pipe said '$said', want s"
cmp "$MNT/d/a.tdb" "$WORK/a.bin" || fail "not serving when it said s"
stop
# The daemon (no -f) says it too, from the process that serves.
timeout 30 "$TILEFS" -o config="$WORK/c.ini" -o index_dir=none -o notify_pipe="$WORK/ready" "$src" "$MNT" &
said=$(timeout 30 head -c 1 "$WORK/ready")
wait $! || fail "tilefs (daemon) failed"
[ "$said" = s ] || fail "daemon: notify_pipe said '$said'"
cmp "$MNT/d/a.tdb" "$WORK/a.bin" || fail "daemon: not serving when it said s"
umount_fs
ok "notify_pipe: s once the mount serves (foreground and daemon)"

# f: a missing SOURCE, a key file others may read, a key file that is no key.
expect_f() {	# WHAT EXIT -- ARGS...
	what=$1 want=$2; shift 3
	"$TILEFS" -o index_dir=none -o notify_pipe="$WORK/ready" "$@" "$MNT" 2> "$WORK/err" &
	said=$(timeout 30 head -c 1 "$WORK/ready")
	wait $!; rc=$?
	[ "$said" = f ] || fail "$what: notify_pipe said '$said', want f"
	[ "$rc" = "$want" ] || fail "$what: exit $rc, want $want ($(cat "$WORK/err"))"
	mountpoint -q "$MNT" && fail "$what: mounted"
}
expect_f "missing SOURCE" 2 -- "$WORK/nosuch"
cp "$WORK/k1" "$WORK/open.key"; chmod 644 "$WORK/open.key"
conf "$WORK/open.key" > "$WORK/open.ini"
expect_f "world-readable key" 4 -- -o config="$WORK/open.ini" "$src"
printf 'not a key\n' > "$WORK/bad.key"; chmod 600 "$WORK/bad.key"
conf "$WORK/bad.key" > "$WORK/badkey.ini"
expect_f "a key file that is no key" 4 -- -o config="$WORK/badkey.ini" "$src"
ok "notify_pipe: f for a missing SOURCE and for bad keys, with the documented exit statuses"

# systemd: READY=1 only once the mount serves; a reload is RELOADING=1 then
# READY=1; a failure is a STATUS= and no READY=1.
python3 "$here/notify_listen.py" --hup "$WORK/sock" "$MNT" d/a.tdb "$WORK/a.bin" -- \
	"$TILEFS" -f -o config="$WORK/c.ini" -o index_dir=none "$src" "$MNT" > "$WORK/sd" 2>&1
grep -q "^ready: NOT" "$WORK/sd" && fail "READY=1 before the mount served: $(cat "$WORK/sd")"
[ "$(grep -c '^ready: serving' "$WORK/sd")" = 2 ] || fail "NOTIFY_SOCKET: $(cat "$WORK/sd")"
grep -q "^msg: RELOADING=1" "$WORK/sd" || fail "no RELOADING=1 on SIGHUP: $(cat "$WORK/sd")"
grep -q "^exit: 0" "$WORK/sd" || fail "systemd run: $(cat "$WORK/sd")"
rm -f "$WORK/sock"
python3 "$here/notify_listen.py" "$WORK/sock" "$MNT" d/a.tdb "$WORK/a.bin" -- \
	"$TILEFS" -f -o config="$WORK/badkey.ini" "$src" "$MNT" > "$WORK/sd" 2>&1
grep -q "READY=1" "$WORK/sd" && fail "READY=1 from a mount that failed"
grep -q "^msg: STATUS=failed: key error" "$WORK/sd" || fail "no failure status: $(cat "$WORK/sd")"
rm -f "$WORK/sock"
ok "NOTIFY_SOCKET: READY=1 only once serving, RELOADING=1 and READY=1 around a reload, STATUS= on failure"

# ---- idle unmount ------------------------------------------------------------------------------
# Idle: gone within a second of the timeout after the last request.
start -o idle_timeout=2
cmp "$MNT/d/a.tdb" "$WORK/a.bin" || fail "idle mount: bytes"
t=$(now)
wait "$pid"
dt=$(( ($(now) - t) / 1000000 ))
[ "$dt" -ge 1900 ] && [ "$dt" -lt 3000 ] || fail "idle_timeout=2 ended the mount after $dt ms"
mountpoint -q "$MNT" && fail "still mounted after the idle timeout"
grep -q "idle for 2.* unmounted" "$WORK/log" || fail "idle unmount not logged: $(cat "$WORK/log")"
ok "idle_timeout=2: unmounted ${dt} ms after the last request"

# Busy: an open file, then a working directory inside, hold it past the
# timeout (3 timeouts each); after they go it unmounts on time.
start -o idle_timeout=1
exec 3< "$MNT/d/a.tdb"
sleep 3	# the time the test is about, not a wait for an event
kill -0 "$pid" 2>/dev/null || fail "unmounted with a file open"
exec 3<&-
(cd "$MNT/d" && sleep 3)
kill -0 "$pid" 2>/dev/null || fail "unmounted with a working directory inside"
t=$(now)
wait "$pid"
dt=$(( ($(now) - t) / 1000000 ))
[ "$dt" -lt 2000 ] || fail "busy, then idle: unmounted ${dt} ms after the last use"
ok "idle_timeout=1: a busy mount stays (open file, working directory), then goes ${dt} ms after"

# ---- reload ----------------------------------------------------------------------------------
# 16 readers of a.tdb (the same bytes under both configurations) while the
# configuration flips 20 times; then the new rules and keys, for new opens.
start
[ -e "$MNT/d/b.tdb" ] && fail "b.tdb shown before its rule"
exec 3< "$MNT/d/a.tdb"
readers=
for r in $(seq 16); do
	(fails=0 reads=0; while [ ! -e "$WORK/done" ]; do
		cmp -s "$MNT/d/a.tdb" "$WORK/a.bin" || fails=$((fails + 1))
		reads=$((reads + 1))
	done; echo "$fails $reads" > "$WORK/fails.$r") &
	readers="$readers $!"
done
for i in $(seq 20); do
	if [ $((i % 2)) = 1 ]; then conf "$WORK/k1" '[match d/b.tdb]' 'filters = lz4' 'datatype = uint8'
	else conf "$WORK/k1"; fi > "$WORK/c.new"
	mv "$WORK/c.new" "$WORK/c.ini"
	mark; kill -HUP "$pid"
	wait_log "reload: .*c.ini: .*b.tdb\] $( [ $((i % 2)) = 1 ] && echo added || echo removed)"
done
touch "$WORK/done"
wait $readers
reads=$(cat "$WORK"/fails.* | awk '{ n += $2 } END { print n }')
total=$(cat "$WORK"/fails.* | awk '{ n += $1 } END { print n }')
[ "$total" = 0 ] || fail "$total reads failed across 20 reloads"
[ -e "$MNT/d/b.tdb" ] && fail "b.tdb still shown after its rule went"
ok "20 reloads under 16 readers: 0 failed reads of $reads"

# A new rule shows a hidden file; a new key decodes what the old could not.
conf "$WORK/k2" '[match d/b.tdb]' 'filters = lz4' 'datatype = uint8' > "$WORK/c.ini"
mark; kill -HUP "$pid"; wait_log "reload: .*\[key k\] changed"
cmp "$MNT/d/b.tdb" "$WORK/b.bin" || fail "the new rule does not apply"
cat "$MNT/d/e.tdb" > /dev/null 2>&1 && fail "e.tdb read with the wrong key"
exec 4< "$MNT/d/b.tdb"
conf "$WORK/k1" > "$WORK/c.ini"
mark; kill -HUP "$pid"; wait_log "reload: .*\[key k\] changed"
cmp "$MNT/d/e.tdb" "$WORK/b.bin" || fail "the right key, reloaded, does not decode"
cmp - "$WORK/b.bin" <&4 || fail "an open file lost its rule"
cmp - "$WORK/a.bin" <&3 || fail "a file open across 22 reloads changed"
exec 3<&- 4<&-
[ -e "$MNT/d/b.tdb" ] && fail "b.tdb shown for new opens after its rule went"
ok "new opens get the new rules and keys; open files keep theirs"

# A bad configuration is refused with FILE:LINE; the one in force stays.
printf '[tilefs]\nunmatched = hide\n[match d/a.tdb]\nfilters = zstd | nosuch\n' > "$WORK/c.ini"
mark; kill -HUP "$pid"; wait_log "reload refused"
grep -q "reload refused: .*c.ini:4: filters: .*nosuch" "$WORK/log" || fail "refusal: $(cat "$WORK/log")"
cmp "$MNT/d/a.tdb" "$WORK/a.bin" || fail "the old configuration is no longer in force"
cmp "$MNT/d/e.tdb" "$WORK/b.bin" || fail "the old key is no longer in force"
grep -q "$(od -An -tx1 "$WORK/k1" | tr -d ' \n' | cut -c1-16)" "$WORK/log" && fail "key bytes in the log"
stop
ok "a bad configuration is refused with FILE:LINE, the old one stays in force"

# An encrypted TileDB array (tests/data): the wrong default_key, then the
# right one by a reload; new opens decrypt, and its views appear decrypted.
arr=$WORK/arrays
mkdir -p "$arr"
cp -r "$here/../data/corpus/enc_dense_zstd/array" "$arr/enc"
frag=$(cd "$arr/enc/__fragments" && ls)
printf '%s' 54696c6544422d6f7261636c652d6b65792d3031323334353637383941424344 > "$WORK/right.key"
printf '%064d' 7 > "$WORK/wrong.key"
chmod 600 "$WORK/right.key" "$WORK/wrong.key"
printf '[tilefs]\ndefault_key = k\n[key k]\nfile = %s\n' "$WORK/wrong.key" > "$WORK/c.ini"
src=$arr
start
cat "$MNT/enc/__fragments/$frag/a0.tdb" > /dev/null 2>&1 && fail "decrypted with the wrong key"
printf '[tilefs]\ndefault_key = k\n[key k]\nfile = %s\n' "$WORK/right.key" > "$WORK/c.ini"
mark; kill -HUP "$pid"; wait_log "reload: .*\[key k\] changed"
cmp "$MNT/enc/__fragments/$frag/a0.tdb" "$here/../data/corpus/enc_dense_zstd/expected/unfiltered/f0/a0.tdb.bin" ||
	fail "the array's reloaded key does not decrypt"
stop
ok "an array's key changed by a reload decrypts new opens"
