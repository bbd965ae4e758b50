#!/usr/bin/env python3
"""Hostile copies of gzip_level1 (a dense 1-D array: int64 dimension d0 in
[0, 1023], extent 256, an int32 attribute, one fragment) for the views
tests (issue 19):

  zero-extent   a newer schema whose d0 has a tile extent of 0 (views took
                extents from the newest schema: SIGFPE)
  huge-matrix   its own schema's domain [0, 2^62] and its fragment's
                non-empty domain [0, 2^61]: i32.raw would be 2^63 + 4
                bytes, more than a file can be

Usage: hostile.py TILETOOL ARRAY OUT KIND   (OUT: a new directory)
"""
import os
import shutil
import struct
import subprocess
import sys


def generic(payload):
    """payload as one generic tile, unfiltered, one chunk (FORMAT.md §6)."""
    pipe = struct.pack('<II', 65536, 0)
    tile = struct.pack('<Q', 1) + struct.pack('<III', len(payload), len(payload), 0) + payload
    return struct.pack('<IQQBQBI', 22, len(tile), len(payload), 4, 1, 0, len(pipe)) + pipe + tile


def d0_at(p):
    """Offsets of d0's domain and extent in a schema payload (§7.4: name,
    type, cell_val_num, its own pipeline - none here -, domain size)."""
    at = p.index(struct.pack('<I', 2) + b'd0') + 6
    assert struct.unpack_from('<I', p, at + 9)[0] == 0, 'd0 has filters of its own'
    dom = struct.unpack_from('<Q', p, at + 13)[0]
    assert dom == 16, 'd0 is not int64'
    return at + 21, at + 21 + dom + 1


def main():
    tool, src, out, kind = sys.argv[1:5]
    shutil.copytree(src, out)
    for root, dirs, files in os.walk(out):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    sdir = os.path.join(out, '__schema')
    name = sorted(n for n in os.listdir(sdir) if n.startswith('__'))[0]
    p = bytearray(subprocess.run([tool, 'decode', os.path.join(sdir, name)], check=True,
                                 stdout=subprocess.PIPE).stdout)
    dom, ext = d0_at(p)
    assert struct.unpack_from('<qq', p, dom) == (0, 1023) and struct.unpack_from('<q', p, ext)[0] == 256
    if kind == 'zero-extent':
        struct.pack_into('<q', p, ext, 0)
        name = '__2' + name[3:]  # sorts last: the newest schema
    elif kind == 'huge-matrix':
        struct.pack_into('<q', p, dom + 8, 1 << 62)
        frags = os.path.join(out, '__fragments')
        meta = os.path.join(frags, os.listdir(frags)[0], '__fragment_metadata.tdb')
        m = open(meta, 'rb').read()
        old = struct.pack('<qq', 0, 1023)
        assert m.count(old) == 1, 'the non-empty domain is not found once'
        open(meta, 'wb').write(m.replace(old, struct.pack('<qq', 0, 1 << 61)))
    else:
        sys.exit('hostile.py: no kind %s' % kind)
    open(os.path.join(sdir, name), 'wb').write(generic(bytes(p)))


if __name__ == '__main__':
    main()
