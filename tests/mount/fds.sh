#!/bin/sh
# Descriptors (issue 19, item 4): the daemon's open files are a pool, so no
# array and no user can run the mount out of them.
#  (a) A sparse array of 300 fragments (views hold ~4 files of each) read as
#      cells.csv by a daemon allowed 256 descriptors: the CSV is whole and
#      equals tiletool's export, while listings and other files keep working
#      (before the pool: EMFILE, then EIO for every file and listing); and
#      tiletool export under the same limit.
#  (b) Under allow_other, nobody holds 1,014 opens of one file of a daemon
#      allowed 1,024 descriptors, while root reads and lists.
#  (c) -o max_user_opens=100: nobody's 101st open gets EMFILE and its
#      listings beyond 400 KiB ENOMEM (one log line); root's still work.
# The daemon's descriptors are counted in /proc during (a) and (b).
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
# tiletool too: its source's pool is half the soft limit less 64.
(ulimit -n 256 && "$TILETOOL" export --csv "$src/sp") | cmp -s - "$WORK/sp.csv" ||
	fail "tiletool export of 300 fragments under ulimit -n 256"

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
# hold.py PATH N READY RELEASE [dir]: open PATH up to N times (a directory:
# each listed, and kept open with its listing), say "HELD WHY" into READY,
# hold them until RELEASE is written.
cat > "$WORK/hold.py" <<'EOF'
import errno, os, resource, sys
path, want, ready, release = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
is_dir = len(sys.argv) > 5
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
fds, why = [], "ok"
for _ in range(want):
    try:
        fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if is_dir else 0))
        fds.append(fd)
        if is_dir:
            with os.scandir(fd) as it:   # the listing, on this open's handle
                sum(1 for _ in it)
        else:
            os.pread(fd, 4096, 0)
    except OSError as e:
        why = errno.errorcode.get(e.errno, str(e.errno))
        break
with open(ready, "w") as f:              # a FIFO: the test waits on it
    f.write(f"{len(fds)} {why}\n")
open(release).read()                     # a FIFO: until the test is done
EOF
mkfifo -m 666 "$WORK/ready" "$WORK/release"
# hold N PATH [dir]: nobody holds PATH open N times, in the background;
# $held and $why say how far it got.  release: let go.
hold() {
	# setpriv itself in the background (not as_nobody, a function: a
	# subshell) so that $holder is the holder's own pid.
	setpriv --reuid=65534 --regid=65534 --clear-groups -- \
		/usr/bin/python3 "$WORK/hold.py" "$2" "$1" "$WORK/ready" "$WORK/release" ${3:+"$3"} &
	holder=$!
	# shellcheck disable=SC2046
	set -- $(timeout 60 cat "$WORK/ready")
	held=${1:-0} why=${2:-"no answer"}
}
release() {
	timeout 60 sh -c ': > "$1"' _ "$WORK/release" || fail "the holder is gone"
	wait $holder || fail "the holder failed"
	holder=
}
# A test failing while nobody holds files open: end the holder first, or
# the mount stays busy (and the daemon alive) after the test.
holder=
trap '[ -z "$holder" ] || kill "$holder" 2>/dev/null; cleanup' EXIT INT TERM
attr() { getfattr --absolute-names --only-values -n user.tilefs.opens "$MNT" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

(ulimit -n 1024 && mount_fs "$WORK/t.ini" "$src" -o views -o allow_other) || fail "mount under ulimit -n 1024"
pid=$(daemon_pid)
hold 1014 "$MNT/d/a.tdb"
[ "$held" = 1014 ] || fail "nobody could hold only $held opens of a file ($why)"
others_work "with nobody holding 1,014 opens"
cmp "$MNT/sp/@views/cells.csv" "$WORK/sp.csv" || fail "cells.csv with nobody holding 1,014 opens"
n=$(nfds "$pid")
[ "$n" -le 512 ] || fail "the daemon holds $n descriptors, beyond half its limit of 1024"
[ "$(attr fds)" -le "$(attr fd_max)" ] || fail "the pool holds more than its bound: $(attr fds) > $(attr fd_max)"
[ "$(attr fd_evictions)" -gt 0 ] || fail "no descriptor was lent to another object"
release
umount_fs
ok "(b) nobody holds 1,014 opens of a file: others read and list; the daemon held $n descriptors"

# ---- (c) a user's share: -o max_user_opens -----------------------------------------------------
# A directory of 3,000 entries lists into ~0.5 MiB; 100 opens allowed
# give 400 KiB of listings.
mkdir -p "$src/big"
(cd "$src/big" && seq -f "entry-%04g" 3000 | xargs touch) || fail "making big/"
chmod -R a+rX "$src"
timeout 60 "$TILEFS" -f -o config="$WORK/t.ini",index_dir="$WORK/index",allow_other,max_user_opens=100 \
	"$src" "$MNT" 2> "$WORK/fg.log" &
daemon=$!
for i in $(seq 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
mountpoint -q "$MNT" || fail "no mount with max_user_opens: $(cat "$WORK/fg.log")"
hold 1000 "$MNT/d/a.tdb"
[ "$held $why" = "100 EMFILE" ] || fail "nobody held $held opens ($why), not 100 then EMFILE"
as_nobody cat "$MNT/d/raw.txt" > /dev/null 2>&1 && fail "nobody opened beyond its share"
as_nobody ls "$MNT/d" > /dev/null 2>&1 && fail "nobody listed beyond its share"
others_work "with nobody at its share"
[ "$(grep -c "uid 65534 .*EMFILE" "$WORK/fg.log")" = 1 ] || fail "not one log line: $(cat "$WORK/fg.log")"
[ "$(attr refused)" -ge 3 ] || fail "refusals not counted: $(attr refused)"
release
as_nobody cat "$MNT/d/raw.txt" > /dev/null || fail "nobody cannot open again once it let go"
# Listings: the first one beyond 400 KiB is allowed, the next gets ENOMEM.
hold 10 "$MNT/big" dir
[ "$held $why" = "2 ENOMEM" ] || fail "nobody listed $held copies of big/ ($why), not 2 then ENOMEM"
others_work "with nobody holding its listings"
[ "$(ls "$MNT/big" | wc -l)" = 3000 ] || fail "root cannot list big/ while nobody holds its listings"
release
as_nobody ls "$MNT/big" > /dev/null || fail "nobody cannot list again once it let go"
umount_fs
wait $daemon || fail "the daemon exited with status $?: $(cat "$WORK/fg.log")"
ok "(c) -o max_user_opens=100: nobody's 101st open gets EMFILE and its second big listing ENOMEM, one log line; root unaffected"
