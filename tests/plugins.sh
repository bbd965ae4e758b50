#!/bin/sh
# Filter plugins through tiletool: tile files written through the real HDF5
# plugins of Debian's hdf5-filter-plugin (libh5bz2.so, id 307; libh5lz4.so,
# id 32004) read back byte-exact with -F 'hdf5:307,9'; the plugin path from
# --plugin-path, TILEFS_PLUGIN_PATH or HDF5_PLUGIN_PATH; the sample tilefs
# plugin; _Filter and _Codecs in tiletool info; a corrupt plugin file, a
# plugin of the wrong type, a missing plugin, corrupt data; places refused
# as untrusted (none of their code runs), and plugins loaded only when a
# pipeline needs them.  Needs root (it makes files of user nobody's).
set -u
: "${TILETOOL:?}" "${TF_SAMPLE_PLUGINS:?}" "${TF_TEST_PLUGINS:?}"
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }
if [ -z "${TF_HDF5_PLUGINS:-}" ] || [ ! -f "$TF_HDF5_PLUGINS/libh5bz2.so" ]; then
	[ "${TILEFS_CI:-0}" = 1 ] && fail "CI must run this: apt-get install hdf5-filter-plugin"
	echo "SKIP: Debian's hdf5-filter-plugin is not installed"; exit 77
fi
D=$TF_HDF5_PLUGINS
W=$(mktemp -d /tmp/tilefs-plugins.XXXXXX)
trap 'rm -rf "$W"' EXIT
unset TILEFS_PLUGIN_PATH HDF5_PLUGIN_PATH
# A sanitizer build: Debian's libh5bz2.so leaks on the corrupt data decoded here.
LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export LSAN_OPTIONS

expect() {	# expect STATUS PATTERN CMD...: exit status and an output substring
	want=$1 pat=$2
	shift 2
	"$@" > "$W/out" 2>&1
	got=$?
	[ "$got" = "$want" ] || fail "'$*' exited $got, want $want: $(head -c 400 "$W/out")"
	[ -z "$pat" ] || grep -q -- "$pat" "$W/out" || fail "'$*': no '$pat' in: $(head -c 400 "$W/out")"
}

# Compressible input: text and a random walk of int32.
python3 -c '
import random, struct, sys
r = random.Random(7)
words = [b"tile", b"chunk", b"filter", b"plugin", b"hdf5", b"netcdf", b"zarr"]
sys.stdout.buffer.write(b" ".join(r.choice(words) for _ in range(90000)))
' > "$W/text"
python3 -c '
import random, struct, sys
r, v = random.Random(3), 0
out = []
for _ in range(120000):
    v += r.randint(-3, 3)
    out.append(struct.pack("<i", v))
sys.stdout.buffer.write(b"".join(out))
' > "$W/ints"

# Written through libh5bz2.so, read back through it: several tiles and chunks.
"$TILETOOL" encode --plugin-path "$D" -F 'hdf5:307,9' --tile-size 200000 "$W/text" "$W/bz.tdb" ||
	fail "encode through libh5bz2.so"
[ "$(stat -c %s "$W/bz.tdb")" -lt "$(( $(stat -c %s "$W/text") / 3 ))" ] || fail "bzip2 did not compress"
"$TILETOOL" decode --plugin-path "$D" -F 'hdf5:307,9' "$W/bz.tdb" | cmp -s - "$W/text" ||
	fail "hdf5:307,9 does not read back byte-exact"
HDF5_PLUGIN_PATH=$D "$TILETOOL" decode -F 'hdf5:307,9' "$W/bz.tdb" | cmp -s - "$W/text" ||
	fail "HDF5_PLUGIN_PATH not used"
TILEFS_PLUGIN_PATH=$D HDF5_PLUGIN_PATH=/nonexistent "$TILETOOL" decode -F '307,9' "$W/bz.tdb" 2> "$W/err" |
	cmp -s - "$W/text" || fail "TILEFS_PLUGIN_PATH does not come first"
[ ! -s "$W/err" ] || fail "warnings with a good plugin path: $(cat "$W/err")"
HDF5_PLUGIN_PATH=$D "$TILETOOL" verify -F 'hdf5:307,9' "$W/bz.tdb" > /dev/null || fail "verify"
ok "libh5bz2.so: written and read back byte-exact (-F 'hdf5:307,9', --plugin-path, env)"

export HDF5_PLUGIN_PATH="$D"
spec='byteshuffle | hdf5:32004 | checksum_md5'
"$TILETOOL" encode -F "$spec" -t int32 --tile-size 160000 "$W/ints" "$W/lz.tdb" || fail "encode through libh5lz4.so"
"$TILETOOL" decode -F "$spec" -t int32 "$W/lz.tdb" | cmp -s - "$W/ints" || fail "$spec does not read back"
"$TILETOOL" encode -F 'hdf5:32004,8192 | zstd' -t int32 "$W/ints" "$W/lz2.tdb" &&
	"$TILETOOL" decode -F '32004,8192|2' -t int32 "$W/lz2.tdb" | cmp -s - "$W/ints" || fail "lz4 with a block size"
ok "libh5lz4.so: '$spec' and 'hdf5:32004,8192 | zstd' byte-exact"

# _Filter and _Codecs in tiletool info; the JSON parses.
"$TILETOOL" info -F "$spec" -t int32 "$W/lz.tdb" > "$W/info" || fail "info"
grep -qx '  _Filter:   9|32004|12' "$W/info" || fail "_Filter: $(cat "$W/info")"
grep -qx '  _Codecs:   \[{"id": "shuffle", "elementsize": 4}, {"id": "hdf5.32004", "cd_values": \[\]}, {"id": "tiledb.checksum_md5"}\]' "$W/info" ||
	fail "_Codecs: $(cat "$W/info")"
"$TILETOOL" info -F 'hdf5:307,9' "$W/bz.tdb" > "$W/info"
grep -qx '  _Filter:   307,9' "$W/info" && grep -qx '  _Codecs:   \[{"id": "bz2", "level": 9}\]' "$W/info" ||
	fail "bz2 views: $(cat "$W/info")"
for f in bz lz; do
	[ $f = bz ] && a="-F hdf5:307,9" || a="-t int32 -F byteshuffle|32004|md5"
	# shellcheck disable=SC2086
	"$TILETOOL" info $a "$W/$f.tdb" | sed -n 's/^  _Codecs:   //p' | python3 -c '
import json, sys
v = json.load(sys.stdin)
assert isinstance(v, list) and v and all(isinstance(c.get("id"), str) for c in v), v' ||
		fail "_Codecs of $f is not a JSON array of codecs"
done
ok "tiletool info prints _Filter and _Codecs (valid JSON)"

# The sample tilefs plugin, by name and by id.
"$TILETOOL" encode --plugin-path "$TF_SAMPLE_PLUGINS" -F 'bytexor(90) | lz4' "$W/text" "$W/x.tdb" &&
	"$TILETOOL" decode --plugin-path "$TF_SAMPLE_PLUGINS" -F '200,90 | 3' "$W/x.tdb" | cmp -s - "$W/text" ||
	fail "sample plugin round trip"
"$TILETOOL" decode --plugin-path "$TF_SAMPLE_PLUGINS" -F 'bytexor(91) | lz4' "$W/x.tdb" | cmp -s - "$W/text" &&
	fail "a wrong key decoded the same bytes"
expect 2 "bytexor: takes one parameter, a key byte" "$TILETOOL" decode --plugin-path "$TF_SAMPLE_PLUGINS" -F 'bytexor(256)' "$W/x.tdb"
ok "sample plugin contrib/plugins/bytexor.so: by name and by id"

# Bad plugins are skipped with one warning naming each file; the good still work.
mkdir "$W/plugins"
cp "$D/libh5bz2.so" "$TF_TEST_PLUGINS/bad/h5type.so" "$W/plugins/"
printf '\177ELF corrupt' > "$W/plugins/corrupt.so"
"$TILETOOL" decode --plugin-path "$W/plugins" -F 'hdf5:307,9' "$W/bz.tdb" 2> "$W/err" | cmp -s - "$W/text" ||
	fail "a good plugin beside bad ones"
[ "$(wc -l < "$W/err")" = 2 ] || fail "want one warning per bad plugin: $(cat "$W/err")"
grep -q "^tiletool: warning: plugin $W/plugins/corrupt.so skipped: " "$W/err" || fail "corrupt: $(cat "$W/err")"
grep -q "^tiletool: warning: plugin $W/plugins/h5type.so skipped: H5PLget_plugin_type() is 1, not a filter (0)" "$W/err" ||
	fail "wrong type: $(cat "$W/err")"
ok "a corrupt plugin file and a plugin of the wrong type: one warning each, naming the file"

# A filter no plugin provides: a usage error, before anything is read.
expect 2 "no HDF5 plugin provides filter 32001 (plugin path '$D')" "$TILETOOL" decode -F 'hdf5:32001,2' "$W/bz.tdb"
expect 2 "no HDF5 plugin provides filter 307 (no plugin path is set)" env -u HDF5_PLUGIN_PATH "$TILETOOL" decode -F 'hdf5:307,9' "$W/bz.tdb"
expect 2 "unknown filter 'bytexor'" "$TILETOOL" decode -F 'bytexor' "$W/bz.tdb"
ok "missing plugins: clear usage errors"

# Damaged data through a plugin: the chunk is named, the exit status is 1.
cp "$W/bz.tdb" "$W/bad.tdb"
printf '\125\125\125\125' | dd of="$W/bad.tdb" bs=1 seek=100 conv=notrunc 2>/dev/null
expect 1 "tile 0, chunk 0: filter 0 (hdf5:307): the HDF5 plugin's filter failed" "$TILETOOL" decode -F 'hdf5:307,9' "$W/bad.tdb"
ok "damaged data through a plugin: exit 1 naming tile, chunk and filter"

# Trust: plugins only from directories and files that only root and we could
# have written (doc/plugins.md).  Each refused place holds the marker plugin
# (tests/plugins/fake.c KIND_MARKER, HDF5 filter 40001), whose constructor
# appends to $TF_PLUGIN_MARKER: it must never run, whatever names 40001.
export TF_PLUGIN_MARKER="$W/marker"
nobody=$(id -u nobody) || fail "no user nobody"
M=$TF_TEST_PLUGINS/marker/marker.so
place() {	# place DIR MODE: DIR (made with MODE) holding a copy of the marker plugin
	mkdir -p "$(dirname "$1")" && mkdir -m "$2" "$1" && cp "$M" "$1/" && chmod 644 "$1/marker.so" ||
		fail "cannot make $1"
}
place "$W/okm" 755
place "$W/ww" 777
place "$W/fw" 755 && chmod 646 "$W/fw/marker.so"
place "$W/gw" 755 && chmod 664 "$W/gw/marker.so"
place "$W/nob" 755 && chown nobody "$W/nob/marker.so"
place "$W/nobdir" 755 && chown nobody "$W/nobdir"
mkdir -m 777 "$W/open" && place "$W/open/plugins" 755
mkdir -m 755 "$W/sym" && ln -s "$W/okm/marker.so" "$W/sym/marker.so"
chmod 755 "$W"
# The marker works: from a trusted directory, naming 40001 runs it.
"$TILETOOL" encode --plugin-path "$W/okm" -F 'hdf5:40001' "$W/text" "$W/m.tdb" &&
	"$TILETOOL" decode --plugin-path "$W/okm" -F 'hdf5:40001' "$W/m.tdb" | cmp -s - "$W/text" ||
	fail "the marker plugin from a trusted directory"
[ -s "$W/marker" ] || fail "the marker plugin ran and left no marker"
rm -f "$W/marker"
refused() {	# refused DIR WARNING
	expect 0 "" "$TILETOOL" info --plugin-path "$1:$D" -F 'hdf5:307,9' "$W/bz.tdb"
	[ ! -e "$W/marker" ] || fail "code of $1 ran on tiletool info"
	grep -q "^tiletool: warning: $2" "$W/out" || fail "$1: no warning '$2': $(cat "$W/out")"
	grep -qx '  _Filter:   307,9' "$W/out" || fail "info through $D beside $1: $(cat "$W/out")"
	"$TILETOOL" decode --plugin-path "$1:$D" -F 'hdf5:307,9' "$W/bz.tdb" 2>/dev/null | cmp -s - "$W/text" ||
		fail "decode through $D beside $1"
	expect 2 "no HDF5 plugin provides filter 40001" "$TILETOOL" decode --plugin-path "$1" -F 'hdf5:40001' "$W/m.tdb"
	grep -q "^tiletool: warning: $2" "$W/out" || fail "$1: no warning '$2': $(cat "$W/out")"
	[ ! -e "$W/marker" ] || fail "code of $1 ran: $(cat "$W/out")"
}
refused "$W/ww" "plugin directory $W/ww refused: $W/ww is writable by others (mode 0777)"
refused "$W/fw" "plugin $W/fw/marker.so refused: it is writable by others (mode 0646)"
refused "$W/gw" "plugin $W/gw/marker.so refused: it is writable by its group (mode 0664)"
refused "$W/nob" "plugin $W/nob/marker.so refused: it is owned by uid $nobody (not root or uid $(id -u))"
refused "$W/nobdir" "plugin directory $W/nobdir refused: $W/nobdir is owned by uid $nobody (not root or uid $(id -u))"
refused "$W/open/plugins" "plugin directory $W/open/plugins refused: $W/open is writable by others (mode 0777)"
refused "$W/sym" "plugin $W/sym/marker.so refused: it is a symbolic link"
ok "refused, with a warning naming why, and nothing of them run: a directory writable by others, its file writable by others or its group, owned by nobody, a directory owned by nobody, one below a directory writable by others, a symlinked plugin"

# Loaded only when needed: a plugin runs only once a pipeline names a filter
# no plugin before it in the path provides (doc/plugins.md).
rm -f "$W/marker"
"$TILETOOL" encode -F zstd "$W/text" "$W/z.tdb" || fail "encode zstd"
"$TILETOOL" info --plugin-path "$W/okm:$D" -F zstd "$W/z.tdb" > /dev/null || fail "info of a zstd file"
[ ! -e "$W/marker" ] || fail "tiletool info loaded a plugin no pipeline names"
"$TILETOOL" decode --plugin-path "$W/okm:$D" -F zstd "$W/z.tdb" | cmp -s - "$W/text" || fail "decode zstd"
[ ! -e "$W/marker" ] || fail "tiletool decode loaded a plugin no pipeline names"
"$TILETOOL" decode --plugin-path "$D:$W/okm" -F 'hdf5:307,9' "$W/bz.tdb" | cmp -s - "$W/text" ||
	fail "307 before the marker"
"$TILETOOL" decode --plugin-path "$TF_SAMPLE_PLUGINS:$W/okm" -F 'bytexor(90) | lz4' "$W/x.tdb" |
	cmp -s - "$W/text" || fail "bytexor before the marker"
[ ! -e "$W/marker" ] || fail "a plugin after the one a pipeline names was loaded"
# A file before the provider is tried, as HDF5 does: an HDF5 plugin says
# its id only once loaded.
"$TILETOOL" decode --plugin-path "$W/okm:$D" -F 'hdf5:307,9' "$W/bz.tdb" | cmp -s - "$W/text" ||
	fail "307 after the marker"
[ -s "$W/marker" ] || fail "the marker plugin before the provider was not tried"
ok "plugins load only when a pipeline names a filter, up to the first that provides it in path order"
