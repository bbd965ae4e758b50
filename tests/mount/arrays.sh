#!/bin/sh
# TileDB arrays with no configuration: the arrays' own schemas and fragment
# metadata drive decoding.  Every corpus data file through the mount and
# through tiletool without flags; old formats; encrypted arrays with right,
# wrong and no key; corrupt schema or fragment metadata; [match] rules win.
. "$(dirname "$0")/lib.sh"

[ -n "$TF_CORPUS" ] && [ -d "$TF_CORPUS" ] || skip "corpus absent ($TF_CORPUS)"
key=$(corpus_key)
corpus_jobs "$key" > "$WORK/jobs"
printf '[tilefs]\ndefault_key = oracle\n[key oracle]\nfile = %s\n' "$key" > "$WORK/keyonly.ini"

# The shared check: every file compared, 4 threads, random ranges.
python3 "$TF_TOOLS/check-mount" --zero-config "$TILEFS" "$TF_CORPUS" . extra > "$WORK/out" 2>&1 ||
	{ cat "$WORK/out"; fail "zero-config mount of the corpus"; }
tail -n 1 "$WORK/out"

# tiletool decode FILE with no flags (the key aside) finds the array itself.
bad=0
while IFS="$(printf '\t')" read -r rel want _args enc; do
	k=""
	[ "$enc" = encrypted ] && k="-k $key"
	# shellcheck disable=SC2086
	"$TILETOOL" decode $k "$TF_CORPUS/$rel" | cmp -s - "$want" || { bad=$((bad + 1)); echo "differs: $rel"; }
done < "$WORK/jobs"
[ "$bad" = 0 ] || fail "$bad files differ through tiletool decode without flags"
ok "tiletool decode without flags: $(wc -l < "$WORK/jobs") files byte-exact"

mount_fs "$WORK/keyonly.ini" "$TF_CORPUS"
ls -lR "$MNT" > "$WORK/ls" || fail "ls -lR"
ok "ls -lR: $(wc -l < "$WORK/ls") lines"
frag=$(ls "$MNT/sparse_2d/array/__fragments")
f=$MNT/sparse_2d/array/__fragments/$frag/a1.tdb
attr() { getfattr --only-values -n "user.tilefs.$1" "$2" 2>/dev/null; }
[ "$(attr field "$f")" = "s (offsets)" ] || fail "user.tilefs.field: $(attr field "$f")"
[ "$(attr fragment "$f")" = "$frag" ] || fail "user.tilefs.fragment"
[ "$(attr format_version "$f")" = 22 ] || fail "user.tilefs.format_version"
"$TILETOOL" decode --generic "$TF_CORPUS/sparse_2d/array/__schema/"* | cmp -s - "$MNT/sparse_2d/array/__schema/"* ||
	fail "schema file not shown decoded"
ok "attributes name field, role, fragment and format version; schemas show decoded"

# Old formats (1.4, 10, 11) and an experimental version: every file reads,
# and its size (from fragment metadata) is what the chunks decode to.
for f in $(cd "$MNT/upstream-inputs" && find . -type f ! -path './dense_array_v1_3_0/*'); do
	n=$(wc -c < "$MNT/upstream-inputs/$f") || fail "reading upstream $f"
	[ "$n" = "$(stat -c %s "$MNT/upstream-inputs/$f")" ] || fail "upstream $f: size disagrees"
	"$TILETOOL" verify "$TF_CORPUS/upstream-inputs/$f" > /dev/null 2>&1 ||
		case $f in *.ok|*__lock.tdb) ;; *) fail "tiletool verify $f" ;; esac
done
ok "upstream arrays (formats 1.4, 10, 11, experimental) read in full"
umount_fs

# Encrypted arrays: no key or a wrong key lists the files and reads give EIO.
enc=$(ls -d "$TF_CORPUS"/enc_dense_zstd/array/__fragments/*)
rel=enc_dense_zstd/array/__fragments/$(basename "$enc")/a0.tdb
printf '[tilefs]\nlog_level = error\n' > "$WORK/none.ini"
head -c 32 /dev/urandom > "$WORK/wrong.key"
chmod 600 "$WORK/wrong.key"
printf '[array enc_dense_zstd/array]\nkey = w\n[key w]\nfile = %s\n' "$WORK/wrong.key" > "$WORK/wrong.ini"
for cfg in none wrong; do
	mount_fs "$WORK/$cfg.ini" "$TF_CORPUS"
	[ -e "$MNT/$rel" ] || fail "$cfg key: encrypted file not listed"
	cat "$MNT/$rel" > /dev/null 2> "$WORK/err" && fail "$cfg key: encrypted file read"
	grep -q "Input/output error" "$WORK/err" || fail "$cfg key: not EIO"
	cmp -s "$MNT/zstd_alltypes/array/__fragments/"*/a0.tdb "$TF_CORPUS/zstd_alltypes/expected/unfiltered/f0/a0.tdb.bin" ||
		fail "$cfg key: unencrypted arrays should still read"
	umount_fs
done
ok "encrypted array with no key or a wrong key: listed, EIO; others read"

# Corrupt schema or fragment metadata: that array's files give EIO, the rest read.
src=$WORK/src
mkdir -p "$src"
for c in good badschema badmeta; do cp -r "$TF_CORPUS/zstd_alltypes/array" "$src/$c"; done
chmod -R u+w "$src"
s=$(ls "$src/badschema/__schema/"__*)
printf '\377\377\377\377' | dd of="$s" bs=1 seek=60 conv=notrunc 2>/dev/null
m=$(ls "$src/badmeta/__fragments/"*/__fragment_metadata.tdb)
printf '\377\377\377\377\377\377\377\377' | dd of="$m" bs=1 seek=$(( $(stat -c %s "$m") - 8 )) conv=notrunc 2>/dev/null
mount_fs "$WORK/none.ini" "$src"
for c in badschema badmeta; do
	f=$(ls "$MNT/$c/__fragments/"*/a3.tdb)
	cat "$f" > /dev/null 2>&1 && fail "$c: read despite corrupt metadata"
done
cmp "$MNT/good/__fragments/"*/a3.tdb "$TF_CORPUS/zstd_alltypes/expected/unfiltered/f0/a3.tdb.bin" ||
	fail "intact array unreadable next to corrupt ones"
umount_fs
ok "corrupt schema / fragment metadata: EIO for that array, others read"

# An explicit [match] rule wins over the schema (a3 is uint16 there).
f=$(cd "$TF_CORPUS" && ls zstd_alltypes/array/__fragments/*/a3.tdb)
printf '[match %s]\nfilters = zstd\ndatatype = uint8\n' "$f" > "$WORK/rule.ini"
mount_fs "$WORK/rule.ini" "$TF_CORPUS"
cmp "$MNT/$f" "$TF_CORPUS/zstd_alltypes/expected/unfiltered/f0/a3.tdb.bin" || fail "rule-decoded file differs"
[ "$(getfattr --only-values -n user.tilefs.datatype "$MNT/$f" 2>/dev/null)" = uint8 ] || fail "[match] rule did not win"
getfattr --only-values -n user.tilefs.field "$MNT/$f" > /dev/null 2>&1 && fail "rule-decoded file has array facts"
[ "$(getfattr --only-values -n user.tilefs.datatype "$MNT/${f%a3.tdb}a2.tdb" 2>/dev/null)" = int16 ] ||
	fail "its neighbour should still follow the schema"
umount_fs
ok "[match] rules win over the array's schema"
