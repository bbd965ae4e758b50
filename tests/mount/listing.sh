#!/bin/sh
# tests/mount/listing.sh - what `ls -l` costs through the mount.  ls asks
# every entry for security.selinux and system.posix_acl_access; FUSE never
# caches those answers, so each would be a round trip to the daemon.  tilefs
# answers "not supported" for every namespace but user., which ls (gnulib)
# remembers per device: a listing of 2,000 files asks twice in all, not
# 4,000 times.  user.tilefs.* stays readable; other user.* names are absent.
. "$(dirname "$0")/lib.sh"
command -v strace > /dev/null 2>&1 || skip "no strace (package strace)"

mkdir -p "$WORK/src/d"
i=0
while [ $i -lt 2000 ]; do echo $i > "$WORK/src/d/f$i"; i=$((i + 1)); done
printf '[tilefs]\n' > "$WORK/empty.ini"
mount_fs "$WORK/empty.ini" "$WORK/src"

n=$(ls -l "$MNT/d" | grep -c '^-r--r--r--') || true
[ "$n" = 2000 ] || fail "ls -l listed $n of 2000 files"
strace -f -qq -e trace=getxattr,lgetxattr,fgetxattr -o "$WORK/strace" ls -l "$MNT/d" > /dev/null ||
	fail "ls -l under strace"
calls=$(grep -c 'getxattr(' "$WORK/strace") || true
[ "$calls" -le 4 ] || fail "ls -l of 2000 files asked $calls extended attributes (expected at most 4)"
ok "ls -l of 2000 files: $calls getxattr calls"

err=$(getfattr -n security.selinux "$MNT/d/f1" 2>&1) && fail "security.selinux answered: $err"
echo "$err" | grep -q "Operation not supported" || fail "security.selinux: $err"
err=$(getfattr -n system.posix_acl_access "$MNT/d/f1" 2>&1) && fail "posix_acl_access answered: $err"
echo "$err" | grep -q "Operation not supported" || fail "system.posix_acl_access: $err"
err=$(getfattr -n user.other "$MNT/d/f1" 2>&1) && fail "user.other answered: $err"
echo "$err" | grep -q "No such attribute" || fail "user.other: $err"
getfattr --absolute-names --only-values -n user.tilefs.cache "$MNT" | grep -Eq '(^| )budget=' ||
	fail "user.tilefs.cache unreadable"
ok "security.* and system.* not supported, user.other absent, user.tilefs.* read"
umount_fs
