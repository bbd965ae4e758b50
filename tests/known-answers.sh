#!/bin/sh
# Known answers that travel with the project: every data file of the curated
# TileDB-written arrays in tests/data/corpus decodes byte-exact with no
# configuration, through tiletool and through the mount (issue 9: a fresh
# clone still runs real known-answer tests).
. "$(dirname "$0")/mount/lib.sh"

data=$(cd "$(dirname "$0")/data/corpus" && pwd) || fail "no tests/data/corpus"
key=$(corpus_key)
printf '[tilefs]\ndefault_key = oracle\n[key oracle]\nfile = %s\n' "$key" > "$WORK/keyonly.ini"

# One line per data file: path under data/, expected bytes, encrypted or not.
python3 - "$data" > "$WORK/jobs" <<'PY' || fail "reading the manifests"
import json, os, sys
root = sys.argv[1]
for dirpath, dirs, files in sorted(os.walk(root)):
    if "manifest.json" not in files:
        continue
    case = os.path.relpath(dirpath, root)
    m = json.load(open(os.path.join(dirpath, "manifest.json")))
    enc = "encrypted" if m.get("encryption") else "plain"
    for fr in m["fragments"]:
        for df in fr["data_files"].values():
            print("\t".join([os.path.join(case, df["path"]), os.path.join(case, df["unfiltered_concat"]), enc]))
PY
n=$(wc -l < "$WORK/jobs")
[ "$n" -ge 50 ] || fail "only $n data files found in the manifests"

bad=0
while IFS="$(printf '\t')" read -r rel want enc; do
	k=""
	[ "$enc" = encrypted ] && k="-k $key"
	# shellcheck disable=SC2086
	"$TILETOOL" decode $k "$data/$rel" | cmp -s - "$data/$want" || { bad=$((bad + 1)); echo "differs: $rel"; }
done < "$WORK/jobs"
[ "$bad" = 0 ] || fail "$bad of $n files differ through tiletool decode"
ok "tiletool decode without flags: $n files byte-exact"

mount_fs "$WORK/keyonly.ini" "$data"
bad=0
while IFS="$(printf '\t')" read -r rel want enc; do
	cmp -s "$MNT/$rel" "$data/$want" || { bad=$((bad + 1)); echo "differs: $rel"; }
done < "$WORK/jobs"
[ "$bad" = 0 ] || fail "$bad of $n files differ through the mount"
ok "zero-config mount: $n files byte-exact"
