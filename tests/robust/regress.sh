#!/bin/sh
# Regression tests for the defects the corruption campaign, the soak and the
# fault tests found (tests/robust/README): each is one crafted corruption or
# fault of a curated corpus case (tests/data/corpus), read through the mount,
# with the answer the fixed driver must give.
. "$(dirname "$0")/../mount/lib.sh"

data=$(cd "$(dirname "$0")/../data/corpus" && pwd) || fail "no tests/data/corpus"
mkdir -p "$WORK/src"
frag() { ls -d "$WORK/src/$1"/array/__fragments/*/ | head -n 1; }

# patch FILE OFFSET WIDTH VALUE: little-endian VALUE over WIDTH bytes at OFFSET.
patch() {
	python3 - "$@" <<'PY' || fail "patching $1"
import sys
path, off, width, val = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
b = bytearray(open(path, "rb").read())
b[off:off + width] = val.to_bytes(width, "little")
open(path, "wb").write(b)
PY
}

# read_all PATH: "ok SIZE" when the whole file reads, else the errno's name.
read_all() {
	python3 - "$1" <<'PY'
import errno, os, sys
try:
    with open(sys.argv[1], "rb") as f:
        print("ok", len(f.read()))
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
PY
}

# check DIR FILE ANSWER WHAT: after the mount, FILE of DIR's fragment must
# read as ANSWER.  rule DIR: a [match] rule decodes DIR's a0.tdb as
# chain_md5_gzip's (checksum_md5 | gzip, int32).
printf '[tilefs]\n\n' > "$WORK/t.ini"
: > "$WORK/checks"
check() { printf '%s\t%s\t%s\n' "$(frag "$1")$2" "$3" "$4" >> "$WORK/checks"; }
rule() {
	printf '[match %s/array/__fragments/*/a0.tdb]\nfilters = checksum_md5 | gzip(level=-1)\ndatatype = int32\n\n' \
		"$1" >> "$WORK/t.ini"
}

# --- D1: a folded offsets tile (RLE strings: stored as a 0-chunk count) is
# read from the fragment metadata's layout without its 8 stored bytes being
# looked at: a count of 2^32-1 there was served as if it were 0.
cp -r "$data/str_rle" "$WORK/src/d1"
patch "$(frag d1)a0.tdb" 8 8 4294967295
check d1 a0.tdb EIO "D1: a folded offsets tile whose stored count is not 0 reads EIO"
check d1 a0_var.tdb "ok 2674" "D1: its data file still reads"

# --- D2: a [match] tile file whose one-chunk tile says it decodes to 0
# bytes: the unit is empty, so nothing ever decoded it and the file was
# served 1024 bytes short with no error (a checksummed file!).
cp -r "$data/chain_md5_gzip" "$WORK/src/d2"
patch "$(frag d2)a0.tdb" 352 4 0
rule d2
check d2 a0.tdb EIO "D2: a chunk whose decoded length was zeroed reads EIO, not a shorter file"

# --- D3: a chunk claiming 2^32-1 decoded bytes (more than any chunk can
# have) in the data tile that folded offsets are rebuilt from: the offsets
# file read ENOMEM (a buffer limit) instead of EIO for a corrupt file.  The
# same claim in a [match] tile file is refused when it is indexed.
cp -r "$data/str_rle" "$WORK/src/d3"
patch "$(frag d3)a0_var.tdb" 183 4 4294967295
check d3 a0.tdb EIO "D3: offsets rebuilt from a chunk claiming 2^32-1 bytes read EIO, not ENOMEM"
cp -r "$data/chain_md5_gzip" "$WORK/src/d3m"
patch "$(frag d3m)a0.tdb" 352 4 2147483647
rule d3m
check d3m a0.tdb EIO "D3: a [match] tile file with a chunk claiming 2^31-1 bytes reads EIO"

# --- D4: a compression parts header (gzip, after double delta) claiming a
# 2 GiB part: the buffer limit derived from the chunk's sizes refused it with
# TF_E_NOMEM, so the read failed ENOMEM instead of EIO.
cp -r "$data/chain_double_delta_gzip" "$WORK/src/d4"
python3 - "$(frag d4)a1.tdb" <<'PY' || fail "flipping"
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[94] ^= 1 << 6
b[39] ^= 1 << 7
open(sys.argv[1], "wb").write(b)
PY
check d4 a1.tdb EIO "D4: a parts header claiming 2 GiB reads EIO, not ENOMEM"
check d4 a0.tdb "ok 8192" "D4: the array's other file still reads"

# --- D6: an empty tile (a var tile of empty strings: its fragment metadata
# says 0 decoded bytes) was never loaded, so its corrupt chunk header read
# without an error.  (Needs the corpus: str_empty_tiles is not curated.)
if [ -d "$TF_CORPUS/str_empty_tiles" ]; then
	cp -r "$TF_CORPUS/str_empty_tiles" "$WORK/src/d6"
	patch "$(frag d6)a1_var.tdb" 12 4 4294967295
	check d6 a1_var.tdb EIO "D6: an empty tile with a corrupt chunk header reads EIO"
fi

# ---- every check through one mount ----------------------------------------------------------
mount_fs "$WORK/t.ini" "$WORK/src"
bad=0
while IFS="$(printf '\t')" read -r path want what; do
	got=$(read_all "$MNT/${path#"$WORK/src/"}")
	if [ "$got" = "$want" ]; then ok "$what"; else echo "FAIL: $what: read gave '$got', want '$want'"; bad=$((bad + 1)); fi
done < "$WORK/checks"

# --- D5: folded offsets decode from the data file (a0_var.tdb) as much as
# from their own: when only the data file was replaced, the offsets file kept
# its node, page cache and cache entries, and served offsets of the data
# file's previous version (mixed with the new one's as entries were evicted).
# Now its node shows one version of both: a data file with tiles 1 and 2
# swapped (both 160 bytes stored) gives offsets tiles 1 and 2 swapped.
cp -r "$data/str_rle" "$WORK/src/d5"
f5=$(frag d5)
m5=$MNT/${f5#"$WORK/src/"}
exp=$data/str_rle/expected/unfiltered/f0/a0.tdb.bin
cmp -s "$m5/a0.tdb" "$exp" || fail "D5: offsets differ before the change"
python3 - "$f5/a0_var.tdb" "$exp" "$WORK/swapped" <<'PY' || fail "swapping"
import os, sys
b = open(sys.argv[1], "rb").read()
open(sys.argv[1] + ".new", "wb").write(b[:175] + b[335:495] + b[175:335] + b[495:])
os.rename(sys.argv[1] + ".new", sys.argv[1])
e = open(sys.argv[2], "rb").read()
open(sys.argv[3], "wb").write(e[:1024] + e[2048:3072] + e[1024:2048] + e[3072:])
PY
if cmp -s "$m5/a0.tdb" "$WORK/swapped"; then
	ok "D5: offsets follow their data file's new version"
else
	echo "FAIL: D5: offsets still show the data file's previous version"
	bad=$((bad + 1))
fi
[ "$bad" = 0 ] || fail "$bad regression checks failed"
