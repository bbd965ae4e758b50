#!/bin/sh
# netCDF's views of every pipeline through the mount: each decoded file of
# the corpus, mounted with no rules (the arrays' own schemas; only the key of
# the encrypted ones), has user.tilefs.filter and user.tilefs.codecs, and
# what `getfattr -n user.tilefs.codecs` prints is valid JSON (parsed by
# python3's json): an array of codecs with string ids.
. "$(dirname "$0")/lib.sh"

[ -n "$TF_CORPUS" ] && [ -d "$TF_CORPUS" ] || skip "corpus absent ($TF_CORPUS)"
key=$(corpus_key)
printf '[tilefs]\ndefault_key = oracle\nlog_level = error\n[key oracle]\nfile = %s\n' "$key" > "$WORK/keyonly.ini"
mount_fs "$WORK/keyonly.ini" "$TF_CORPUS"
python3 - "$MNT" <<'PY' || fail "user.tilefs.codecs of the corpus"
import errno, json, os, subprocess, sys
root = sys.argv[1]
decoded = unreadable = 0
bad = []
for d, _, files in os.walk(root):
    for f in files:
        p = os.path.join(d, f)
        try:
            os.getxattr(p, "user.tilefs.pipeline")
        except OSError as e:
            if e.errno == errno.ENODATA:
                continue            # shown as stored: not decoded
            unreadable += 1         # an index that cannot be built (old formats)
            continue
        decoded += 1
        try:
            out = subprocess.run(["getfattr", "--absolute-names", "--only-values", "-n",
                                  "user.tilefs.codecs", p], capture_output=True, check=True).stdout
            v = json.loads(out)
            assert isinstance(v, list) and all(isinstance(c, dict) and isinstance(c.get("id"), str) for c in v), v
            flt = os.getxattr(p, "user.tilefs.filter").decode()
            assert (flt == "") == (v == []), (flt, v)
        except Exception as e:
            bad.append("%s: %r" % (os.path.relpath(p, root), e))
print("decoded files: %d, codecs valid JSON: %d, unreadable: %d" % (decoded, decoded - len(bad), unreadable))
if bad or decoded < 500:
    print("\n".join(bad[:20]))
    sys.exit(1)
PY
f=$(ls "$MNT"/chain_delta_zstd/array/__fragments/*/a0.tdb | head -n 1)
getfattr --absolute-names -n user.tilefs.codecs "$f" | grep -qF 'user.tilefs.codecs="[{\"id\": \"delta\", \"dtype\": \"<i8\"}, {\"id\": \"zstd\", \"level\": -1}]"' ||
	fail "codecs of chain_delta_zstd a0: $(getfattr --absolute-names -n user.tilefs.codecs "$f")"
umount_fs
ok "every decoded corpus file: user.tilefs.codecs is valid JSON"
