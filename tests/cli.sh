#!/bin/sh
# tiletool as scripts use it: help and version, exit statuses (0 ok, 1 data
# error, 2 usage error), clear messages, key file checks, encode/decode round
# trips of fixed and var-sized cells, and byte-identical output to TileDB.
set -u
: "${TILETOOL:?}"
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }
W=$(mktemp -d /tmp/tilefs-cli.XXXXXX)
trap 'rm -rf "$W"' EXIT

expect() {	# expect STATUS PATTERN CMD...: exit status and a stderr/stdout substring
	want=$1 pat=$2
	shift 2
	"$@" > "$W/out" 2>&1
	got=$?
	[ "$got" = "$want" ] || fail "'$*' exited $got, want $want: $(head -c 300 "$W/out")"
	[ -z "$pat" ] || grep -q -- "$pat" "$W/out" || fail "'$*': no '$pat' in: $(head -c 300 "$W/out")"
}

for c in decode info verify encode schema; do
	expect 0 "Usage: tiletool $c" "$TILETOOL" "$c" --help
done
expect 0 "tiletool (tilefs)" "$TILETOOL" --version
expect 2 "Usage" "$TILETOOL"
expect 2 "unknown command 'frobnicate'" "$TILETOOL" frobnicate
expect 2 "unknown filter 'zstdd'" "$TILETOOL" decode -F 'zstdd' /dev/null
expect 2 "unknown datatype 'int33'" "$TILETOOL" decode -t int33 /dev/null
expect 2 "decode takes exactly one FILE" "$TILETOOL" decode
ok "help, version, usage errors (exit 2) with clear messages"

# Round trips through encode and decode, several tiles and chunks.
head -c 300000 /dev/urandom > "$W/raw"
for spec in '' 'zstd' 'delta | byteshuffle | lz4' 'tiledb:7,64 | 9 | 2,3' 'checksum_sha256 | gzip(level=9)'; do
	"$TILETOOL" encode -F "$spec" -t int32 --tile-size 100000 "$W/raw" "$W/t.tdb" || fail "encode '$spec'"
	"$TILETOOL" decode -F "$spec" -t int32 "$W/t.tdb" | cmp -s - "$W/raw" || fail "round trip '$spec'"
	"$TILETOOL" verify -F "$spec" -t int32 "$W/t.tdb" > /dev/null || fail "verify '$spec'"
done
"$TILETOOL" encode -F zstd -t int32 --tile-size 100000 "$W/raw" "$W/t.tdb"
"$TILETOOL" info -v -F zstd -t int32 "$W/t.tdb" > "$W/info" || fail "info"
if ! grep -q "tiles:     3" "$W/info" || ! grep -q "chunks:    6" "$W/info"; then
	fail "info counts: $(cat "$W/info")"
fi
ok "encode/decode/verify round trips; info lists 3 tiles, 6 chunks"

# Data errors: exit 1, naming tile, chunk and filter.
printf '\377' | dd of="$W/t.tdb" bs=1 seek=40 conv=notrunc 2>/dev/null
expect 1 "tile 0, chunk 0: filter 0 (zstd)" "$TILETOOL" decode -F zstd -t int32 "$W/t.tdb"
expect 1 "FAILED" "$TILETOOL" verify -F zstd -t int32 "$W/t.tdb"
expect 1 "No such file" "$TILETOOL" decode /nonexistent
ok "corrupt input: exit 1, the error names tile, chunk and filter"

# Keys: a readable key file is refused; the wrong key fails authentication.
head -c 32 /dev/urandom > "$W/k"; head -c 32 /dev/urandom > "$W/k2"
chmod 644 "$W/k"
expect 2 "readable by group or others" "$TILETOOL" encode -F zstd -t int32 -k "$W/k" "$W/raw" "$W/e.tdb"
chmod 600 "$W/k" "$W/k2"
"$TILETOOL" encode -F zstd -t int32 -k "$W/k" "$W/raw" "$W/e.tdb" || fail "encode with a key"
"$TILETOOL" decode -F zstd -t int32 -k "$W/k" "$W/e.tdb" | cmp -s - "$W/raw" || fail "decode with the key"
expect 1 "wrong key" "$TILETOOL" decode -F zstd -t int32 -k "$W/k2" "$W/e.tdb"
od -An -tx1 "$W/k2" | tr -d ' \n' | cut -c1-16 > "$W/khex"
grep -qF "$(cat "$W/khex")" "$W/out" && fail "key material in a message"
expect 1 "no key" "$TILETOOL" decode -F 'zstd | aes_256_gcm' -t int32 "$W/e.tdb"
ok "keys: mode 0644 refused, right key decodes, wrong or no key fails (exit 1)"

# Var-sized strings, with the offsets file folded into the data (rle).
python3 - "$W" <<'PY'
import struct, sys
cells = [b"beta-gamma" if i % 7 == 0 else b"alpha" for i in range(3000)]
offs, at = [], 0
for c in cells:
    offs.append(at)
    at += len(c)
open(sys.argv[1] + "/s.var", "wb").write(b"".join(cells))
open(sys.argv[1] + "/s.offs", "wb").write(struct.pack("<%dQ" % len(offs), *offs))
PY
"$TILETOOL" encode -F rle -t string_ascii -n var --offsets "$W/s.offs" --tile-cells 1000 \
	--offsets-out "$W/s_off.tdb" "$W/s.var" "$W/s_var.tdb" || fail "var encode"
[ "$(stat -c %s "$W/s_off.tdb")" = 24 ] || fail "folded offsets tiles are 8 bytes each"
"$TILETOOL" decode -F rle -t string_ascii -n var "$W/s_var.tdb" | cmp -s - "$W/s.var" || fail "var data round trip"
"$TILETOOL" decode -F zstd -t uint64 --var-data "$W/s_var.tdb" --var-filters rle --var-type string_ascii \
	"$W/s_off.tdb" > "$W/s.rebuilt" || fail "rebuilding offsets"
[ "$(stat -c %s "$W/s.rebuilt")" = 24000 ] || fail "rebuilt offsets: 3000 cells of 8 bytes"
ok "var-sized strings: rle data and folded offsets round trip"

[ -d "${TF_CORPUS:-}" ] || { echo "corpus absent: skipping the comparison with TileDB's files"; exit 0; }
# TileDB's own files: re-encode str_rle's cells (4 tiles) from its expected
# bytes; data and folded offsets files must be byte-identical to TileDB's.
c=$TF_CORPUS/str_rle
python3 - "$c" "$W" <<'PY'
import json, struct, sys
case, w = sys.argv[1], sys.argv[2]
files = json.load(open(case + "/manifest.json"))["fragments"][0]["data_files"]
sizes = [t["unfiltered_size"] for t in files["a0_var.tdb"]["tiles"]]
rel = open(case + "/expected/unfiltered/f0/a0.tdb.bin", "rb").read()
rel = struct.unpack("<%dQ" % (len(rel) // 8), rel)
n, out, base = len(rel) // len(sizes), [], 0
for t, size in enumerate(sizes):            # per-tile offsets -> offsets into the whole
    out += [base + x for x in rel[t * n:(t + 1) * n]]
    base += size
open(w + "/c.offs", "wb").write(struct.pack("<%dQ" % len(out), *out))
open(w + "/c.cells", "w").write(str(n))
PY
f=$(ls -d "$c"/array/__fragments/*)
"$TILETOOL" encode -F rle -t string_ascii -n var --offsets "$W/c.offs" --tile-cells "$(cat "$W/c.cells")" \
	--offsets-out "$W/c_off.tdb" "$c/expected/unfiltered/f0/a0_var.tdb.bin" "$W/c_var.tdb" || fail "encode str_rle"
cmp "$W/c_var.tdb" "$f/a0_var.tdb" || fail "string rle data differs from TileDB's"
cmp "$W/c_off.tdb" "$f/a0.tdb" || fail "folded offsets differ from TileDB's"
ok "re-encoded str_rle: data and offsets files byte-identical to TileDB's"
