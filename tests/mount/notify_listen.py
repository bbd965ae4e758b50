#!/usr/bin/env python3
"""notify_listen.py [--hup] SOCKET MOUNTPOINT FILE EXPECTED -- COMMAND...

Plays systemd's part for Type=notify: binds a datagram socket at SOCKET,
starts COMMAND with NOTIFY_SOCKET=SOCKET, and prints every notification it
receives, one "msg: ..." line each.  The moment READY=1 arrives it checks
that the mount serves: MOUNTPOINT is a fuse.tilefs mount in
/proc/self/mountinfo and MOUNTPOINT/FILE reads as the bytes of EXPECTED;
it prints "ready: serving" or "ready: NOT serving (why)", then unmounts
MOUNTPOINT (with --hup, it first sends COMMAND a SIGHUP, a reload, and
unmounts at the READY=1 that ends the reload).  Stops when COMMAND exits
(its status is printed "exit: N"), or after 30 s.
"""
import os
import select
import socket
import subprocess
import sys
import time


def mounted(mnt):
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = left.split()
            if len(fields) > 4 and fields[4] == mnt and right.split()[0] == "fuse.tilefs":
                return True
    return False


def serving(mnt, name, expected):
    if not mounted(mnt):
        return "no tilefs mount there"
    try:
        with open(os.path.join(mnt, name), "rb") as f, open(expected, "rb") as e:
            return "" if f.read() == e.read() else "wrong bytes"
    except OSError as err:
        return str(err)


def main():
    args = sys.argv[1:]
    hup = args[0] == "--hup"
    if hup:
        args = args[1:]
    sock_path, mnt, name, expected = args[:4]
    cmd = args[args.index("--") + 1:]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(sock_path)
    p = subprocess.Popen(cmd, env=dict(os.environ, NOTIFY_SOCKET=sock_path))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r, _, _ = select.select([s], [], [], 0.05)
        if r:
            msg = s.recv(4096).decode(errors="replace")
            print("msg: " + msg.replace("\n", " | "), flush=True)
            if "READY=1" in msg.split("\n"):
                why = serving(mnt, name, expected)
                print("ready: " + ("serving" if not why else "NOT serving (%s)" % why), flush=True)
                if hup:
                    hup = False
                    p.send_signal(1)
                else:
                    subprocess.run(["fusermount3", "-u", mnt])
        elif p.poll() is not None:
            break
    if p.poll() is None:
        p.kill()
    print("exit: %d" % p.wait(), flush=True)


main()
