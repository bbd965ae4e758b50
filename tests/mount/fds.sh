#!/bin/sh
# Descriptors (issue 19, item 4): the daemon's open files are a pool, so no
# array and no user can run the mount out of them.
#  (a) A sparse array of 300 fragments (views hold ~4 files of each) read as
#      cells.csv by a daemon allowed 256 descriptors: the CSV is whole and
#      equals tiletool's export, while listings and other files keep working
#      (before the pool: EMFILE, then EIO for every file and listing).
#  (b) Under allow_other, nobody holds 1,014 opens of one file of a daemon
#      allowed 1,024 descriptors, while root reads and lists; with
#      -o max_user_opens, nobody's opens beyond it get EMFILE (one log line)
#      and root's still open.
# The daemon's descriptors are counted in /proc during both.
. "$(dirname "$0")/lib.sh"

command -v setpriv >/dev/null 2>&1 || skip "no setpriv (package util-linux)"
: "${GENARRAY:=$(dirname "$TILETOOL")/../contrib/genarray}"
chmod 755 "$WORK"	# other users must reach the mountpoint
src=$WORK/src
mkdir -p "$src/d"
"$GENARRAY" "$src/sp" --sparse 600 300 4 > /dev/null || fail "genarray"
head -c 300000 /dev/urandom > "$WORK/plain.bin"
"$TILETOOL" encode -F zstd -t uint8 "$WORK/plain.bin" "$src/d/a.tdb" || fail "encode"
echo "a raw file" > "$src/d/raw.txt"
chmod -R a+rX "$src"
printf '[match d/*.tdb]\nfilters = zstd\ndatatype = uint8\n' > "$WORK/t.ini"
"$TILETOOL" export --csv "$src/sp" > "$WORK/sp.csv" || fail "tiletool export"

daemon_pid() { pgrep -f -n "tilefs -o config=$WORK/t.ini" || fail "no tilefs process"; }
nfds() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 | wc -l; }

# Everything else still answers: a listing, a decoded file, a raw file.
others_work() {
	ls "$MNT" "$MNT/d" "$MNT/sp" > /dev/null || fail "$1: listing fails"
	cmp -s "$MNT/d/a.tdb" "$WORK/plain.bin" || fail "$1: a decoded file fails"
	grep -qx "a raw file" "$MNT/d/raw.txt" || fail "$1: a raw file fails"
}

# ---- (a) one array's views beyond the descriptor limit ----------------------------------------
(ulimit -n 256 && mount_fs "$WORK/t.ini" "$src" -o views) || fail "mount under ulimit -n 256"
pid=$(daemon_pid)
grep -q "^Max open files *256 " "/proc/$pid/limits" || fail "the daemon's limit is not 256"
# A listing and the other files, over and over while the CSV is formatted.
(
	while [ ! -e "$WORK/csv.done" ]; do others_work "during the CSV" || exit 1; done
) &
side=$!
cmp "$MNT/sp/@views/cells.csv" "$WORK/sp.csv"
rc=$?
: > "$WORK/csv.done"
wait $side || fail "listings or other files failed while cells.csv was read"
[ $rc = 0 ] || fail "cells.csv of 300 fragments under 256 descriptors differs from tiletool export"
n=$(nfds "$pid")
[ "$n" -le 128 ] || fail "the daemon holds $n descriptors, beyond half its limit of 256"
# The snapshot keeps its files open: everything else must still work after.
others_work "after the CSV"
cmp "$MNT/sp/@views/cells.csv" "$WORK/sp.csv" || fail "cells.csv read again"
for f in $(ls "$MNT/sp/@views/fragments" | sed -n '1p;150p;300p'); do
	[ "$(wc -l < "$MNT/sp/@views/fragments/$f/cells.csv")" -ge 3 ] || fail "fragments/$f/cells.csv"
done
n2=$(nfds "$pid")
[ "$n2" -le 128 ] || fail "the daemon holds $n2 descriptors after the views, beyond 128"
umount_fs
ok "(a) cells.csv of 300 fragments under 256 descriptors: whole, equal to tiletool's; listings and files work; the daemon held $n descriptors"

# ---- (b) one user holding many opens ----------------------------------------------------------
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
cat > "$WORK/hold.py" <<'EOF'
import errno, os, resource, sys
path, want, ready, release = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
fds, why = [], "ok"
for _ in range(want):
    try:
        fds.append(os.open(path, os.O_RDONLY))
    except OSError as e:
        why = errno.errorcode.get(e.errno, str(e.errno))
        break
os.pread(fds[-1], 4096, 0) if fds else None
with open(ready, "w") as f:              # a FIFO: the test waits on it
    f.write(f"{len(fds)} {why}\n")
open(release).read()                     # a FIFO: until the test is done
EOF
mkfifo -m 666 "$WORK/ready" "$WORK/release"
# hold N FILE: nobody opens FILE N times (in the background) and says how
# many it holds ("N ok", or "M EMFILE"); release lets go.
hold() {
	as_nobody /usr/bin/python3 "$WORK/hold.py" "$2" "$1" "$WORK/ready" "$WORK/release" &
	holder=$!
	set -- $(timeout 60 cat "$WORK/ready")
	held=${1:-0} why=${2:-"no answer"}
}
release() {
	timeout 60 sh -c ': > "$1"' _ "$WORK/release" || fail "the holder is gone"
	wait $holder || fail "the holder failed"
}

(ulimit -n 1024 && mount_fs "$WORK/t.ini" "$src" -o views -o allow_other) || fail "mount under ulimit -n 1024"
pid=$(daemon_pid)
hold 1014 "$MNT/d/a.tdb"
[ "$held" = 1014 ] || fail "nobody could hold only $held opens of a file ($why)"
others_work "with nobody holding 1,014 opens"
cmp "$MNT/sp/@views/cells.csv" "$WORK/sp.csv" || fail "cells.csv with nobody holding 1,014 opens"
n=$(nfds "$pid")
[ "$n" -le 512 ] || fail "the daemon holds $n descriptors, beyond half its limit of 1024"
release
umount_fs
ok "(b) nobody holds 1,014 opens of a file: others read and list; the daemon held $n descriptors"
