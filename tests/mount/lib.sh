# tests/mount/lib.sh - sourced by the mount tests.  Needs root and /dev/fuse;
# without them a test is skipped (exit 77), or fails when TILEFS_CI=1.
# Every test gets a work dir and a mount point, unmounted on any exit.
set -u
: "${TILEFS:?}" "${TILETOOL:?}" "${TF_CORPUS:=}" "${TF_TOOLS:=}"

skip() {
	if [ "${TILEFS_CI:-0}" = 1 ]; then echo "FAIL (CI must run this): $*"; exit 1; fi
	echo "SKIP: $*"; exit 77
}
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }

[ "$(id -u)" = 0 ] || skip "mount tests need root"
[ -c /dev/fuse ] || skip "no /dev/fuse"
command -v fusermount3 >/dev/null 2>&1 || skip "no fusermount3 (package fuse3)"

WORK=$(mktemp -d /tmp/tilefs-test.XXXXXX)
MNT=$WORK/mnt
mkdir -p "$MNT"
cleanup() {
	mountpoint -q "$MNT" && { fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"; }
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# mount_fs CONFIG SOURCE [-o opts]: tilefs returns once the mount is up.
# Indexes persist in the test's own directory (a later -o index_dir wins).
mount_fs() {
	cfg=$1 src=$2
	shift 2
	timeout 60 "$TILEFS" -o config="$cfg" -o index_dir="$WORK/index" "$@" "$src" "$MNT" ||
		fail "tilefs refused to mount $src"
	mountpoint -q "$MNT" || fail "no mount at $MNT"
}
umount_fs() { fusermount3 -u "$MNT" || fail "cannot unmount"; }

# Key of the corpus's encrypted arrays (corpus/README.md), mode 0600.
corpus_key() {
	printf '%s' 54696c6544422d6f7261636c652d6b65792d3031323334353637383941424344 > "$WORK/oracle.key"
	chmod 600 "$WORK/oracle.key"
	echo "$WORK/oracle.key"
}

# corpus_jobs KEYFILE > FILE: one line per corpus data file (main cases and
# extra/): its path relative to TF_CORPUS, the expected bytes, and the
# tiletool arguments its manifest implies (shell-quoted).
corpus_jobs() {
	python3 - "$TF_TOOLS" "$TF_CORPUS" "$1" <<'PY'
import os, shlex, sys
sys.path.insert(0, sys.argv[1])
import corpus
root, key = sys.argv[2], sys.argv[3]
for sub in (".", "extra"):
    d = os.path.join(root, sub)
    for j, k in corpus.jobs(d):
        a = ["-F", j["filters"], "-t", j["datatype"], "-n", j["cell_val_num"]]
        if k: a += ["-k", key]
        if "var_data" in j:
            a += ["--var-data", os.path.join(d, j["var_data"]), "--var-filters", j["var_filters"],
                  "--var-type", j["var_type"]]
        rel = os.path.normpath(os.path.join(sub, j["file"]))
        print("\t".join([rel, os.path.join(d, j["expected"]), shlex.join(a + [os.path.join(d, j["file"])]),
                         "encrypted" if k else "plain"]))
PY
}
