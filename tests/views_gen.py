#!/usr/bin/env python3
"""Dense 2-D arrays of overlapping, partial-tile fragments (contrib/genarray),
their views (tiletool export) checked against a simulation written here:
each cell from the newest fragment whose box holds it, else the fill value
(INT32_MIN); the non-empty domain the box around all fragments; each
fragment's cells in storage order (tiles in tile order over the tiles its box
touches, cells in cell order, padding skipped), row- or column-major.

Also sparse 1-D arrays (genarray --sparse): interleaved fragments that
rewrite some of the first fragment's coordinates, with and without
duplicates; merged in coordinate order, the newest cell winning without
duplicates, the newest fragment's cells first with them.

Usage: views_gen.py GENARRAY TILETOOL [ROUNDS [SEED]]
"""
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

FILL = -2 ** 31


def value(r, c, salt):
    v = (r * 1000003 + c * 7 + (r ^ c) % 97 + salt) & 0xffffffff
    return v - 2 ** 32 if v >= 2 ** 31 else v


def run(*cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise RuntimeError('%s: %s' % (' '.join(cmd), p.stderr.decode(errors='replace')))
    return p.stdout


def one(gen, tool, rng, tmp):
    tr, tc = rng.randint(1, 4), rng.randint(1, 5)
    rows, cols = tr * rng.randint(1, 5), tc * rng.randint(1, 5)
    d = os.path.join(tmp, 'a')
    shutil.rmtree(d, ignore_errors=True)
    torder, corder = rng.choice('rc'), rng.choice('rc')
    filt = rng.choice(['none', 'zstd', 'lz4']) + ':' + torder + corder
    run(gen, d, str(rows), str(cols), str(tr), str(tc), '0', filt)
    frags = []
    for k in range(rng.randint(1, 5)):
        r0, r1 = sorted(rng.randrange(rows) for _ in range(2))
        c0, c1 = sorted(rng.randrange(cols) for _ in range(2))
        t = 2000 + rng.randrange(1000) * 7 + k  # distinct, any order
        run(gen, d, str(rows), str(cols), str(tr), str(tc), '0', filt, '--append',
            str(r0), str(r1), str(c0), str(c1), str(t))
        frags.append(((r0, r1, c0, c1), t))
    box = (min(f[0][0] for f in frags), max(f[0][1] for f in frags),
           min(f[0][2] for f in frags), max(f[0][3] for f in frags))
    newest_first = sorted(frags, key=lambda f: -f[1])
    cells = []
    for r in range(box[0], box[1] + 1):
        for c in range(box[2], box[3] + 1):
            v = FILL
            for (r0, r1, c0, c1), t in newest_first:
                if r0 <= r <= r1 and c0 <= c <= c1:
                    v = value(r, c, t)
                    break
            cells.append((r, c, v))
    want_csv = 'r,c,a\n' + ''.join('%d,%d,%d\n' % x for x in cells)
    got = run(tool, 'export', d).decode()
    if got != want_csv:
        return 'cells.csv differs (fragments %r, orders %s%s)' % (frags, torder, corder)
    raw = struct.pack('<%di' % len(cells), *[x[2] for x in cells])
    if run(tool, 'export', '--raw', 'a', d) != raw:
        return 'a.raw differs (fragments %r)' % frags
    for name in os.listdir(os.path.join(d, '__fragments')):
        t = int(name.split('_')[2])
        (r0, r1, c0, c1), _ = [f for f in frags if f[1] == t][0]
        rows_out = []
        tiles = [(a, b) for a in range(r0 // tr, r1 // tr + 1) for b in range(c0 // tc, c1 // tc + 1)]
        if torder == 'c':
            tiles.sort(key=lambda x: (x[1], x[0]))
        cells_in = [(i, j) for i in range(tr) for j in range(tc)]
        if corder == 'c':
            cells_in.sort(key=lambda x: (x[1], x[0]))
        for ttr, ttc in tiles:
            for i, j in cells_in:
                r, c = ttr * tr + i, ttc * tc + j
                if r0 <= r <= r1 and c0 <= c <= c1:
                    rows_out.append('%d,%d,%d\n' % (r, c, value(r, c, t)))
        got = run(tool, 'export', '--fragment', name, d).decode()
        if got != 'r,c,a\n' + ''.join(rows_out):
            return 'fragments/%s/cells.csv differs (box %r, tiles %dx%d, orders %s%s)' % (
                name, (r0, r1, c0, c1), tr, tc, torder, corder)
    return None


def sparse_cells(n, nf, f, dups):
    """The cells genarray --sparse writes to fragment f, in storage order."""
    out = []
    for i in range(n // nf):
        d = i * nf + f
        out.append((d, d * 3 + f, 'v%d.%d' % (d, f)))
        if f > 0 and i % 5 == 0:
            out.append((i * nf, i * nf * 3 + f, 'v%d.%d' % (i * nf, f)))
        if dups and i % 7 == 0:
            out.append((d, d * 3 + f, 'v%d.%db' % (d, f)))
    return sorted(out, key=lambda x: (x[0], x[2].endswith('b')))


def one_sparse(gen, tool, rng, tmp):
    n, nf, cap, dups = rng.randint(1, 300), rng.randint(1, 4), rng.randint(1, 40), rng.random() < 0.5
    n = max(n, nf)
    d = os.path.join(tmp, 's')
    shutil.rmtree(d, ignore_errors=True)
    run(gen, d, '--sparse', str(n), str(nf), str(cap), *(['dups'] if dups else []), rng.choice(['none', 'zstd']))
    frags = [sparse_cells(n, nf, f, dups) for f in range(nf)]
    text = lambda cells: 'd,a,s\n' + ''.join('%d,%d,%s\n' % c for c in cells)
    if dups:
        merged = sorted(((c, -f, k) for f, cells in enumerate(frags) for k, c in enumerate(cells)),
                        key=lambda x: (x[0][0], x[1], x[2]))
        merged = [m[0] for m in merged]
    else:
        newest = {}
        for f, cells in enumerate(frags):
            for c in cells:
                newest[c[0]] = c
        merged = [newest[k] for k in sorted(newest)]
    if run(tool, 'export', d).decode() != text(merged):
        return 'sparse cells.csv differs (n %d, fragments %d, capacity %d, dups %s)' % (n, nf, cap, dups)
    for f, name in enumerate(sorted(os.listdir(os.path.join(d, '__fragments')))):
        if run(tool, 'export', '--fragment', name, d).decode() != text(frags[f]):
            return 'sparse fragments/%s/cells.csv differs' % name
    return None


def main():
    gen, tool = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 60
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 11)
    tmp = tempfile.mkdtemp(prefix='views-gen-')
    failed = 0
    try:
        for i in range(rounds):
            msg = one(gen, tool, rng, tmp) if i % 2 else one_sparse(gen, tool, rng, tmp)
            if msg:
                failed += 1
                print('FAIL round %d: %s' % (i, msg))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print('%d passed, %d failed' % (rounds - failed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
