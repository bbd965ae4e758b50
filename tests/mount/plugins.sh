#!/bin/sh
# Filter plugins through the mount: tile files written through Debian's HDF5
# plugins (libh5bz2.so 307, libh5lz4.so 32004) and the sample tilefs plugin,
# matched by [match] rules naming them, read back byte-exact; a corrupt
# plugin in plugin_path is one warning at mount; a rule naming a filter no
# plugin provides refuses the mount (FILE:LINE); a plugin returning more
# than its buffer is EIO for the chunk; plugins only from trusted places,
# only when a rule needs them; a plugin that never returns does not keep
# the daemon from exiting after unmount.  user.tilefs.filter and
# user.tilefs.codecs on these files (tests/mount/codecs.sh checks them on
# the corpus).
. "$(dirname "$0")/lib.sh"
: "${TF_SAMPLE_PLUGINS:?}"

D=${TF_HDF5_PLUGINS:-}
[ -n "$D" ] && [ -f "$D/libh5bz2.so" ] || skip "Debian's hdf5-filter-plugin is not installed"
unset TILEFS_PLUGIN_PATH HDF5_PLUGIN_PATH
# A sanitizer build: Debian's libh5bz2.so leaks on the corrupt data decoded here.
LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/../lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export LSAN_OPTIONS
attr() { getfattr --absolute-names --only-values -n "user.tilefs.$1" "$2"; }

src=$WORK/src
mkdir -p "$src/sub" "$WORK/bad"
python3 -c '
import random, sys
r = random.Random(5)
words = [b"tile", b"chunk", b"filter", b"plugin", b"hdf5", b"netcdf", b"zarr"]
sys.stdout.buffer.write(b" ".join(r.choice(words) for _ in range(120000)))
' > "$WORK/text"
head -c 400000 /dev/urandom > "$WORK/rand"
"$TILETOOL" encode --plugin-path "$D" -F 'hdf5:307,9' --tile-size 300000 "$WORK/text" "$src/a.bz" &&
	"$TILETOOL" encode --plugin-path "$D" -F 'byteshuffle | hdf5:32004 | md5' -t int32 "$WORK/rand" "$src/sub/b.lz" &&
	"$TILETOOL" encode --plugin-path "$TF_SAMPLE_PLUGINS" -F 'bytexor(7) | zstd(level=3)' "$WORK/text" "$src/c.x" ||
	fail "writing tile files through the plugins"
printf '\177ELF no plugin' > "$WORK/bad/corrupt.so"
cat > "$WORK/ok.ini" <<EOF
[tilefs]
plugin_path = bad:$D:$TF_SAMPLE_PLUGINS
log_level = error
[match *.bz]
filters = hdf5:307,9
[match **/*.lz]
filters = byteshuffle | hdf5:32004 | md5
datatype = int32
[match *.x]
filters = bytexor(7) | zstd(level=3)
EOF

timeout 60 "$TILEFS" -o config="$WORK/ok.ini" "$src" "$MNT" 2> "$WORK/err" || fail "mount: $(cat "$WORK/err")"
mountpoint -q "$MNT" || fail "no mount"
[ "$(wc -l < "$WORK/err")" = 1 ] || fail "want exactly one warning: $(cat "$WORK/err")"
grep -q "^tilefs: warning: $WORK/ok.ini:2: plugin $WORK/bad/corrupt.so skipped: " "$WORK/err" ||
	fail "the warning does not name the corrupt plugin: $(cat "$WORK/err")"
cmp "$MNT/a.bz" "$WORK/text" || fail "a.bz (libh5bz2.so) differs through the mount"
cmp "$MNT/sub/b.lz" "$WORK/rand" || fail "b.lz (libh5lz4.so) differs through the mount"
cmp "$MNT/c.x" "$WORK/text" || fail "c.x (sample plugin) differs through the mount"
dd if="$MNT/a.bz" bs=1000 skip=301 count=5 2>/dev/null > "$WORK/got"
dd if="$WORK/text" bs=1000 skip=301 count=5 2>/dev/null > "$WORK/want"
cmp -s "$WORK/got" "$WORK/want" || fail "a range read in the second tile differs"
ok "files written through Debian's HDF5 plugins and the sample plugin read back byte-exact"

[ "$(attr filter "$MNT/a.bz")" = "307,9" ] || fail "filter of a.bz: $(attr filter "$MNT/a.bz")"
[ "$(attr codecs "$MNT/a.bz")" = '[{"id": "bz2", "level": 9}]' ] || fail "codecs of a.bz: $(attr codecs "$MNT/a.bz")"
[ "$(attr pipeline "$MNT/a.bz")" = "hdf5:307,9" ] || fail "pipeline of a.bz"
[ "$(attr filter "$MNT/sub/b.lz")" = "9|32004|12" ] || fail "filter of b.lz: $(attr filter "$MNT/sub/b.lz")"
[ "$(attr filter "$MNT/c.x")" = "200,7|2,3" ] || fail "filter of c.x: $(attr filter "$MNT/c.x")"
[ "$(attr codecs "$MNT/c.x")" = '[{"id": "tilefs.bytexor", "cd_values": [7]}, {"id": "zstd", "level": 3}]' ] ||
	fail "codecs of c.x: $(attr codecs "$MNT/c.x")"
getfattr --absolute-names -d "$MNT/sub/b.lz" | grep -q '^user.tilefs.codecs=' || fail "listxattr lacks user.tilefs.codecs"
attr codecs "$MNT/sub/b.lz" | python3 -m json.tool > /dev/null || fail "codecs of b.lz is not JSON"
ok "user.tilefs.filter and user.tilefs.codecs of plugin pipelines"

# Damaged data through a plugin: EIO for the reader, the chunk in the log.
umount_fs
cp "$src/a.bz" "$src/d.bz"
printf '\125\125\125\125' | dd of="$src/d.bz" bs=1 seek=100 conv=notrunc 2>/dev/null
timeout 60 "$TILEFS" -f -o config="$WORK/ok.ini" "$src" "$MNT" 2> "$WORK/log" &
pid=$!
i=0
until mountpoint -q "$MNT" || [ $i -ge 200 ]; do i=$((i + 1)); sleep 0.05; done
mountpoint -q "$MNT" || fail "no foreground mount"
cat "$MNT/d.bz" > /dev/null 2> "$WORK/cat" && fail "damaged file read without error"
grep -q "Input/output error" "$WORK/cat" || fail "not EIO: $(cat "$WORK/cat")"
cmp "$MNT/a.bz" "$WORK/text" || fail "undamaged file after a damaged one"
umount_fs
wait $pid
grep -q "d.bz.*tile 0, chunk 0: filter 0 (hdf5:307): the HDF5 plugin's filter failed" "$WORK/log" ||
	fail "log does not name the failing chunk: $(cat "$WORK/log")"
ok "damaged data through a plugin: EIO, logged with tile, chunk and filter"

# A plugin saying it wrote more than the buffer it hands back holds
# (tests/plugins/fake.c, mode 3): EIO for that chunk and a log line, before
# a byte is copied (the copy read past the buffer); the daemon serves on.
G=$TF_TEST_PLUGINS/good
"$TILETOOL" encode --plugin-path "$G" -F 'hdf5:40000' "$WORK/text" "$src/e.over" &&
	cp "$src/e.over" "$src/f.shift" || fail "writing tile files through the test plugin"
cat > "$WORK/over.ini" <<EOF
[tilefs]
plugin_path = $G
[match *.over]
filters = hdf5:40000,3
[match *.shift]
filters = hdf5:40000
EOF
timeout 60 "$TILEFS" -f -o config="$WORK/over.ini" "$src" "$MNT" 2> "$WORK/log" &
pid=$!
i=0
until mountpoint -q "$MNT" || [ $i -ge 200 ]; do i=$((i + 1)); sleep 0.05; done
mountpoint -q "$MNT" || fail "no foreground mount"
cat "$MNT/e.over" > /dev/null 2> "$WORK/cat" && fail "an over-long plugin output read without error"
grep -q "Input/output error" "$WORK/cat" || fail "not EIO: $(cat "$WORK/cat")"
cmp "$MNT/f.shift" "$WORK/text" || fail "the daemon does not serve on after an over-long plugin output"
umount_fs
wait $pid || fail "the daemon exited $?"
grep -q "e.over.*tile 0, chunk 0: filter 0 (hdf5:40000): the HDF5 plugin returned 65536 bytes in a buffer of " "$WORK/log" ||
	fail "log does not name the over-long chunk: $(cat "$WORK/log")"
ok "a plugin returning more than its buffer: EIO and a log line for the chunk, the daemon serves on"

# Trust: no code from a plugin directory or file that anyone but root and
# us could have written (doc/plugins.md).  Each refused place holds the
# marker plugin (HDF5 filter 40001), whose constructor appends to
# $TF_PLUGIN_MARKER: not at mount, not on a read, not when a rule names it.
export TF_PLUGIN_MARKER="$WORK/marker"
M=$TF_TEST_PLUGINS/marker/marker.so
place() {	# place DIR MODE: DIR (made with MODE) holding a copy of the marker plugin
	mkdir -p "$(dirname "$1")" && mkdir -m "$2" "$1" && cp "$M" "$1/" && chmod 644 "$1/marker.so" ||
		fail "cannot make $1"
}
place "$WORK/okm" 755
place "$WORK/ww" 777
place "$WORK/fw" 755 && chmod 646 "$WORK/fw/marker.so"
place "$WORK/nob" 755 && chown nobody "$WORK/nob/marker.so"
mkdir -m 755 "$WORK/sym" && ln -s "$WORK/okm/marker.so" "$WORK/sym/marker.so"
bad=$WORK/ww:$WORK/fw:$WORK/nob:$WORK/sym
cat > "$WORK/trust.ini" <<EOF
[tilefs]
plugin_path = $bad:$D
[match *.bz]
filters = hdf5:307,9
EOF
mount_fs "$WORK/trust.ini" "$src" 2> "$WORK/err"
[ ! -e "$WORK/marker" ] || fail "code of a refused plugin ran at mount"
[ "$(grep -c "^tilefs: warning: $WORK/trust.ini:2: plugin .* refused: " "$WORK/err")" = 4 ] ||
	fail "want a warning for each refused place: $(cat "$WORK/err")"
cmp "$MNT/a.bz" "$WORK/text" || fail "a.bz through the plugin beside refused ones"
[ ! -e "$WORK/marker" ] || fail "code of a refused plugin ran on a read"
umount_fs
sed -i 's/hdf5:307,9/hdf5:40001/' "$WORK/trust.ini"
timeout 60 "$TILEFS" -o config="$WORK/trust.ini" "$src" "$MNT" 2> "$WORK/err"
rc=$?
[ $rc = 3 ] || fail "a rule naming only a refused plugin: exit $rc, want 3: $(cat "$WORK/err")"
grep -q "no HDF5 plugin provides filter 40001 (plugin path '$bad:$D'; plugin directory $WORK/ww refused: $WORK/ww is writable by others (mode 0777))" "$WORK/err" ||
	fail "message: $(cat "$WORK/err")"
[ ! -e "$WORK/marker" ] || fail "code of a refused plugin ran for a rule naming it"
sed -i "s|^plugin_path = .*|plugin_path = $WORK/okm|" "$WORK/trust.ini"
"$TILETOOL" encode --plugin-path "$WORK/okm" -F 'hdf5:40001' "$WORK/text" "$src/g.bz" || fail "encode through 40001"
rm -f "$WORK/marker"
mount_fs "$WORK/trust.ini" "$src"
cmp "$MNT/g.bz" "$WORK/text" || fail "g.bz through the marker plugin from a trusted directory"
[ -s "$WORK/marker" ] || fail "the marker plugin ran from a trusted directory and left no marker"
umount_fs
ok "a directory writable by others, a plugin writable by others, owned by nobody, a symlinked plugin: refused with a warning each, none of their code run"

# Loaded only when needed: not at mount, not on a read, while no rule names
# a filter of the plugin or of one after it in the path.
rm -f "$WORK/marker"
"$TILETOOL" encode -F 'zstd' "$WORK/text" "$src/h.z" || fail "encode zstd"
cat > "$WORK/lazy.ini" <<EOF
[tilefs]
plugin_path = $WORK/okm:$D
[match *.z]
filters = zstd
EOF
mount_fs "$WORK/lazy.ini" "$src"
cmp "$MNT/h.z" "$WORK/text" || fail "h.z through the mount"
[ ! -e "$WORK/marker" ] || fail "a plugin no rule names was loaded"
umount_fs
cat > "$WORK/lazy.ini" <<EOF
[tilefs]
plugin_path = $D:$WORK/okm
[match *.bz]
filters = hdf5:307,9
EOF
mount_fs "$WORK/lazy.ini" "$src"
cmp "$MNT/a.bz" "$WORK/text" || fail "a.bz through the mount"
[ ! -e "$WORK/marker" ] || fail "a plugin after the one a rule names was loaded"
umount_fs
ok "a plugin no rule needs is never loaded: not at mount, not on a read"

# A plugin that never returns (fake.c KIND_HANG, filter 40002): other files
# read on while it hangs; unmount completes, and the daemon exits at once,
# the call abandoned (doc/plugins.md), with a log line for the chunk.
"$TILETOOL" encode --plugin-path "$TF_TEST_PLUGINS/hang" -F 'hdf5:40002' "$WORK/text" "$src/i.hang" ||
	fail "encode through the hanging plugin"
cat > "$WORK/hang.ini" <<EOF
[tilefs]
plugin_path = $TF_TEST_PLUGINS/hang
[match *.hang]
filters = hdf5:40002
[match *.z]
filters = zstd
EOF
export TF_PLUGIN_HUNG="$WORK/hung"
hang() {	# hang unmount|signal: a read stuck in the plugin, then the daemon asked to go
	rm -f "$WORK/hung"
	"$TILEFS" -f -o config="$WORK/hang.ini" "$src" "$MNT" 2> "$WORK/log" &
	pid=$!
	i=0
	until mountpoint -q "$MNT" || [ $i -ge 200 ]; do i=$((i + 1)); sleep 0.05; done
	mountpoint -q "$MNT" || { kill $pid; fail "no foreground mount"; }
	cat "$MNT/i.hang" > /dev/null 2>&1 &
	reader=$!
	i=0
	until [ -e "$WORK/hung" ] || [ $i -ge 400 ]; do i=$((i + 1)); sleep 0.05; done
	[ -e "$WORK/hung" ] || fail "the hanging plugin was never called"
	cmp "$MNT/h.z" "$WORK/text" || fail "another file while a plugin hangs"
	if [ "$1" = unmount ]; then
		kill -9 $reader	# (its read waits killably: unmount needs it gone)
		wait $reader
		timeout 20 fusermount3 -u "$MNT" || fail "unmount while a plugin hangs"
		want=0
	else
		kill -TERM $pid
		want=0		# (the unmount asked for, as systemctl stop asks it)
	fi
	i=0
	while kill -0 $pid 2>/dev/null && [ $i -lt 200 ]; do i=$((i + 1)); sleep 0.05; done
	if kill -0 $pid 2>/dev/null; then
		kill -9 $pid
		fail "$1: the daemon still runs 10 s later, waiting on the hung plugin"
	fi
	wait $pid
	rc=$?
	[ $rc = $want ] || fail "$1: the daemon exited $rc, want $want: $(cat "$WORK/log")"
	wait $reader 2>/dev/null
	mountpoint -q "$MNT" && fail "$1: still mounted"
	grep -q "i.hang: tile 0, chunk 0: filter 0 (hdf5:40002): the plugin call was abandoned: tilefs is stopping" "$WORK/log" ||
		fail "$1: log: $(cat "$WORK/log")"
}
hang unmount
hang signal
ok "a plugin that never returns: other files read on; unmount completes, and the daemon exits at once after it or after SIGTERM"

# A rule naming a filter no plugin provides: the mount is refused at its line.
cat > "$WORK/missing.ini" <<EOF
[tilefs]
plugin_path = $D
[match *.bz]
filters = byteshuffle | hdf5:32001,2
EOF
timeout 60 "$TILEFS" -o config="$WORK/missing.ini" "$src" "$MNT" 2> "$WORK/err"
rc=$?
[ $rc = 3 ] || fail "mount with a missing plugin exited $rc, want 3"
grep -q "$WORK/missing.ini:4: filters: filter 2 'hdf5:32001': no HDF5 plugin provides filter 32001" "$WORK/err" ||
	fail "message: $(cat "$WORK/err")"
mountpoint -q "$MNT" && fail "mounted anyway"
ok "a filter no plugin provides: mount refused naming FILE:LINE (exit 3)"
