#!/bin/sh
# Confinement and permissions (issues 9 and 14): the mount never serves a
# byte from outside SOURCE, never blocks on a FIFO, enforces the source's
# modes for other users under allow_other, and refuses a mountpoint inside
# SOURCE or one where a tilefs is mounted already.
. "$(dirname "$0")/lib.sh"

command -v setpriv >/dev/null 2>&1 || skip "no setpriv (package util-linux)"
chmod 755 "$WORK"	# other users must reach the mountpoint
src=$WORK/src out=$WORK/outside
mkdir -p "$src/d" "$src/priv" "$out"
echo "outside secret" > "$out/shadow"
chmod 600 "$out/shadow"
head -c 100000 /dev/urandom > "$WORK/plain.bin"
"$TILETOOL" encode -F zstd -t uint8 "$WORK/plain.bin" "$src/d/a.tdb" || fail "encode"
cp "$src/d/a.tdb" "$src/priv/b.tdb"
echo "public" > "$src/pub.txt" && chmod 644 "$src/pub.txt"
echo "root only" > "$src/secret.txt" && chmod 600 "$src/secret.txt"
chmod 700 "$src/priv"
printf '[match **/*.tdb]\nfilters = zstd\ndatatype = uint8\n' > "$WORK/t.ini"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }

mount_fs "$WORK/t.ini" "$src" -o allow_other
# --- permissions: the kernel checks the source's modes for every user
as_nobody cat "$MNT/pub.txt" | grep -qx public || fail "nobody cannot read a 0644 file"
as_nobody cmp -s "$MNT/d/a.tdb" "$WORK/plain.bin" || fail "nobody cannot read a 0644 decoded file"
as_nobody cat "$MNT/secret.txt" > /dev/null 2>&1 && fail "nobody read a 0600 file through the mount"
as_nobody ls "$MNT/priv" > /dev/null 2>&1 && fail "nobody listed a 0700 directory through the mount"
as_nobody cat "$MNT/priv/b.tdb" > /dev/null 2>&1 && fail "nobody read a file in a 0700 directory"
cat "$MNT/secret.txt" | grep -qx "root only" || fail "root cannot read its own file"
[ "$(stat -c %a "$MNT/secret.txt")" = 400 ] || fail "mode of secret.txt: $(stat -c %a "$MNT/secret.txt")"
ok "allow_other: 0600/0700 sources unreadable by others, 0644 readable, modes less write bits"

# --- a directory swapped for a symlink to outside SOURCE: never followed by
# the daemon.  Right after the swap the kernel still has d as a directory
# and asks the daemon for d/shadow (the old code served it, as root); once
# d shows as a link, the kernel follows it with the reader's own rights.
as_nobody ls "$MNT/d" > /dev/null || fail "listing d"
mv "$src/d" "$src/d.real"
ln -s "$out" "$src/d"
for p in "$MNT/d/shadow" "$MNT/d/./shadow"; do
	if as_nobody cat "$p" 2>/dev/null | grep -q "outside secret"; then fail "served $p from outside SOURCE"; fi
done
n=0
while [ "$n" -lt 50 ] && [ ! -L "$MNT/d" ]; do	# bounded poll: entry timeout is 1 s
	n=$((n + 1)); sleep 0.1
done
[ -L "$MNT/d" ] || fail "a swapped-in symlink is not shown as a link"
as_nobody cat "$MNT/d/shadow" 2>/dev/null | grep -q "outside secret" && fail "served d/shadow via the link"
rm "$src/d" && mv "$src/d.real" "$src/d"
n=0
while [ "$n" -lt 50 ] && [ -L "$MNT/d" ]; do n=$((n + 1)); sleep 0.1; done
ok "a directory swapped for a symlink out of SOURCE serves nothing from outside"

# --- a file swapped for a symlink to outside SOURCE, again and again, while
# another user opens and reads it: the old driver served the outside file in
# 47,559 of 87,305 opens.  Every open either gets the regular file's bytes or
# fails.  Each side is a loop in one process (a process per swap and per read
# made this take a minute and a half): the swapper renames a symlink, then a
# fresh copy, over the file 20,000 times; the reader, as nobody, opens and
# reads the file until the swapper is done.
echo "public two" > "$src/pub2.txt" && chmod 644 "$src/pub2.txt"
cat > "$WORK/swap.py" <<'EOF'
import os, sys
path, target, done = sys.argv[1:4]
body, tmp = open(path, 'rb').read(), path + '.tmp'
try:
    for _ in range(20000):
        os.symlink(target, tmp)
        os.rename(tmp, path)
        with open(tmp, 'wb') as f:
            f.write(body)
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
finally:
    open(done, 'w').close()     # the reader stops even if this failed
EOF
cat > "$WORK/read.py" <<'EOF'
import os, sys
leaks = served = opens = 0
while not os.path.exists(sys.argv[2]):
    opens += 1
    try:
        with open(sys.argv[1], 'rb') as f:
            got = f.read()
    except OSError:
        continue
    served += 1
    leaks += b'outside secret' in got
print(leaks, served, opens)
EOF
python3 "$WORK/swap.py" "$src/pub2.txt" "$out/shadow" "$WORK/swap.done" &
swapper=$!
# shellcheck disable=SC2046  # /usr/bin: nobody cannot run root's own python3 (pyenv)
set -- $(as_nobody /usr/bin/python3 "$WORK/read.py" "$MNT/pub2.txt" "$WORK/swap.done")
wait $swapper || fail "the swapper failed"
leaks=${1:-x} served=${2:-0} opens=${3:-0}
[ "$leaks" = 0 ] || fail "the outside file was served in $leaks of $opens opens of a swapped file"
[ "$served" -gt 0 ] && [ "$opens" -gt 100 ] || fail "no race: $served of $opens opens served"
ok "a file swapped for a symlink out of SOURCE 20,000 times: 0 of $opens opens served it ($served read the file)"

# --- a file swapped for a FIFO after lookup: refused at once, not a hang
cmp -s "$MNT/d/a.tdb" "$WORK/plain.bin" || fail "before FIFO"
mv "$src/d/a.tdb" "$WORK/a.tdb"
mkfifo "$src/d/a.tdb"
timeout 10 cat "$MNT/d/a.tdb" > /dev/null 2>&1
rc=$?
[ "$rc" = 124 ] && fail "reading a FIFO swapped in for a decoded file hangs"
[ "$rc" = 0 ] && fail "a FIFO swapped in read successfully"
# A FIFO of SOURCE is shown as a FIFO: the kernel opens such an inode as a
# pipe of its own (as on any filesystem), never the daemon; a reader
# waiting on it must not stop the mount.
mkfifo "$src/fifo.txt"
[ -p "$MNT/fifo.txt" ] || fail "a FIFO of SOURCE is not shown as one"
timeout 2 cat "$MNT/fifo.txt" > /dev/null 2>&1 &
timeout 10 cat "$MNT/pub.txt" | grep -qx public || fail "the mount stopped answering after FIFOs"
wait
rm "$src/d/a.tdb" "$src/fifo.txt" && mv "$WORK/a.tdb" "$src/d/a.tdb"
ok "FIFOs swapped in are refused without blocking; the mount lives on"

# --- a second tilefs on the same mountpoint is refused
timeout 20 "$TILEFS" -o config="$WORK/t.ini" "$src" "$MNT" 2> "$WORK/err" && fail "second mount accepted"
grep -q "mounted there already" "$WORK/err" || fail "second mount message: $(cat "$WORK/err")"
umount_fs
ok "a second tilefs on a mountpoint is refused"

# --- MOUNTPOINT inside SOURCE is refused (it would contain itself)
mkdir -p "$src/inner"
timeout 20 "$TILEFS" -o config="$WORK/t.ini" "$src" "$src/inner" 2> "$WORK/err"
rc=$?
mountpoint -q "$src/inner" && { fusermount3 -u "$src/inner"; fail "mounted inside SOURCE"; }
[ "$rc" = 2 ] || fail "mount inside SOURCE: exit status $rc, want 2"
grep -q "inside SOURCE" "$WORK/err" || fail "mount inside SOURCE message: $(cat "$WORK/err")"
ok "MOUNTPOINT inside SOURCE is refused"

# --- a key or config file that is a FIFO: refused at once
mkfifo "$WORK/fifo.ini"
timeout 10 "$TILEFS" -o config="$WORK/fifo.ini" "$src" "$MNT" 2> "$WORK/err"
rc=$?
[ "$rc" = 124 ] && fail "a FIFO config hangs start-up"
[ "$rc" = 3 ] || fail "FIFO config: exit $rc, want 3"
mkfifo "$WORK/fifo.key"
printf '[key k]\nfile = %s\n' "$WORK/fifo.key" > "$WORK/k.ini"
timeout 10 "$TILEFS" -o config="$WORK/k.ini" "$src" "$MNT" 2> "$WORK/err"
rc=$?
[ "$rc" = 124 ] && fail "a FIFO key file hangs start-up"
[ "$rc" = 4 ] || fail "FIFO key file: exit $rc, want 4"
mountpoint -q "$MNT" && fail "mounted with a FIFO config or key"
ok "FIFO config and key files are refused at once"

# --- an array's schema file replaced by a FIFO (issue 14, case 2): the
# array's files fail or show as stored, nothing blocks, the mount lives on.
arr=$(cd "$(dirname "$0")/../data/corpus/gzip_level1/array" && pwd) || fail "no gzip_level1 case"
mkdir -p "$WORK/s2"
cp -r "$arr" "$WORK/s2/arr" && chmod -R u+w "$WORK/s2/arr"
echo "still here" > "$WORK/s2/pub.txt"
for f in "$WORK"/s2/arr/__schema/*; do rm "$f" && mkfifo "$f"; done
printf '[tilefs]\n' > "$WORK/e.ini"
mount_fs "$WORK/e.ini" "$WORK/s2"
timeout 10 ls -lR "$MNT/arr" > /dev/null 2>&1
[ $? = 124 ] && fail "listing an array whose schema is a FIFO hangs"
for f in "$MNT"/arr/__fragments/*/*.tdb; do
	timeout 10 cat "$f" > /dev/null 2>&1
	[ $? = 124 ] && fail "reading $f of an array whose schema is a FIFO hangs"
done
timeout 10 cat "$MNT/pub.txt" | grep -qx "still here" || fail "the mount stopped answering after a FIFO schema"
umount_fs
ok "an array whose schema file is a FIFO: nothing blocks, the mount lives on"

# --- an encrypted array under allow_other (issue 9): its ciphertext is
# world-readable (0644) but what the mount shows is plaintext, decrypted
# with the mounter's key: the decoded files and the views are the
# mounter's alone (0400, owned by the mounter); the key file, inside SOURCE
# here, is 0600 and never readable by others through the mount either; no
# xattr carries key material.
enc=$(cd "$(dirname "$0")/../data/corpus/enc_dense_zstd" && pwd) || fail "no enc_dense_zstd case"
mkdir -p "$WORK/s3"
cp -r "$enc/array" "$WORK/s3/enc" && chmod -R a+rX,u+w "$WORK/s3/enc"
cp -r "$(dirname "$0")/../data/corpus/gzip_level1/array" "$WORK/s3/plain" && chmod -R a+rX,u+w "$WORK/s3/plain"
key=$(corpus_key) && cp "$key" "$WORK/s3/k.key" && chmod 600 "$WORK/s3/k.key"
printf '[tilefs]\ndefault_key = k\nviews = yes\n[key k]\nfile = %s\n' "$WORK/s3/k.key" > "$WORK/k.ini"
mount_fs "$WORK/k.ini" "$WORK/s3" -o allow_other
a0=$(ls "$MNT"/enc/__fragments/*/a0.tdb)
cmp -s "$a0" "$enc/expected/unfiltered/f0/a0.tdb.bin" || fail "root: decrypted a0.tdb differs"
[ "$(stat -c '%a %u' "$a0")" = "400 $(id -u)" ] || fail "decrypted a0.tdb shows $(stat -c '%a %u' "$a0")"
[ "$(stat -c %a "$MNT/enc/@views/cells.csv")" = 400 ] || fail "views of an encrypted array: $(stat -c %a "$MNT/enc/@views/cells.csv")"
as_nobody cat "$a0" > /dev/null 2>&1 && fail "nobody read the plaintext of an encrypted array"
as_nobody cat "$MNT/enc/@views/cells.csv" > /dev/null 2>&1 && fail "nobody read the CSV of an encrypted array"
as_nobody cat "$MNT/k.key" > /dev/null 2>&1 && fail "nobody read the key file through the mount"
p0=$(ls "$MNT"/plain/__fragments/*/a0.tdb)
as_nobody cat "$p0" > /dev/null || fail "nobody cannot read a decoded file of an unencrypted 0644 array"
as_nobody cat "$MNT/plain/@views/cells.csv" > /dev/null || fail "nobody cannot read the CSV of an unencrypted array"
hex=$(head -c 16 "$key")
getfattr -R -d -m - "$MNT" 2>/dev/null | grep -qi "$hex" && fail "key material in an xattr"
umount_fs
ok "encrypted array under allow_other: plaintext and views the mounter's alone (0400), key file unreadable by others"
