#!/usr/bin/env python3
"""Compare what Arrow readers see (tests/arrow/read.mjs) with what a file must hold.

  compare.py edges NODE READ_MJS DIR
      every DIR/<case>.arrow against DIR/<case>.json (tests/arrow/edges.c):
      rows, batches, column names, every value;
  compare.py csv NODE READ_MJS ARROW CSV [MIN_BATCHES]
      an array's cells.arrow against its cells.csv (the same cells, the
      same order): each CSV field read back by the Arrow column's type
      (tilefs(1) VIEWS' text rules), nulls included; and at least
      MIN_BATCHES record batches.
"""
import json
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import views_check as vc  # noqa: E402


def read(node, script, files):
    p = subprocess.run([node, script] + files, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    out = {}
    for line in p.stdout.decode().splitlines():
        g = json.loads(line)
        out.setdefault(g['file'], []).append(g)
    if p.returncode:
        print(p.stderr.decode(errors='replace')[-2000:])
    return out


def check(got, want, what):
    fails = []
    if len(got) != 3:
        return ['%s: %d readers answered' % (what, len(got))]
    for g in got:
        r = g['reader']
        if 'error' in g:
            fails.append('%s: %s: %s' % (what, r, g['error']))
            continue
        # apache-arrow shows a file of no record batch as one empty batch.
        if r == 'apache-arrow' and 'batches' in want and g['batches'] != max(want['batches'], 1):
            fails.append('%s: %s: %d batches, expected %d' % (what, r, g['batches'], want['batches']))
        if g['rows'] != want['rows'] or g['names'] != want['names']:
            fails.append('%s: %s: %d rows %r, expected %d %r' % (what, r, g['rows'], g['names'], want['rows'],
                                                                 want['names']))
            continue
        for j, name in enumerate(want['names']):
            w = want['cols'](r, j) if callable(want['cols']) else want['cols'][j]
            if g['cols'][j] != w:
                k = next((i for i, (a, b) in enumerate(zip(g['cols'][j], w)) if a != b), None)
                fails.append('%s: %s: column %s, row %s: %r, expected %r' % (
                    what, r, name, k, g['cols'][j][k] if k is not None else g['cols'][j],
                    w[k] if k is not None else w))
    return fails


def edges(node, script, d):
    names = sorted(f[:-5] for f in os.listdir(d) if f.endswith('.json'))
    got = read(node, script, [os.path.join(d, n + '.arrow') for n in names])
    fails = []
    for n in names:
        want = json.load(open(os.path.join(d, n + '.json')))
        fails += check(got.get(os.path.join(d, n + '.arrow'), []), want, n)
    for f in fails:
        print('FAIL ' + f)
    print('%d edge cases, each read by apache-arrow and polars (twice): %d failures' % (len(names), len(fails)))
    return 1 if fails else 0


def from_text(t, field, polars):
    """A CSV field (bytes, None if null) as read.mjs prints a value of Arrow type t."""
    if field is None:
        return None
    if t in ('Utf8',) or 'String' in t:
        return 'x:' + field.hex()
    if t.startswith('Float'):
        v = float(field)
        return 'nan' if v != v else 'f:' + struct.pack('<f' if t == 'Float32' else '<d', v).hex()
    if t == 'Bool':
        return field.decode()
    return field.decode()   # integers: the same decimal text


def vs_csv(node, script, arrow, csvf, min_batches):
    table = vc.parse_csv(open(csvf, 'rb').read())
    head, body = table[0], table[1:]
    got = read(node, script, [arrow]).get(arrow, [])
    types = next((g['types'] for g in got if g.get('reader') == 'apache-arrow'), None)
    if types is None:
        print('FAIL apache-arrow: %s' % [g.get('error') for g in got])
        return 1
    want = {'rows': len(body), 'names': [h.decode() for h in head],
            'cols': lambda r, j: [from_text(types[j], row[j], r.startswith('polars')) for row in body]}
    fails = check(got, want, os.path.basename(arrow))
    batches = next(g['batches'] for g in got if g['reader'] == 'apache-arrow')
    if batches < min_batches:
        fails.append('%d record batches, expected at least %d' % (batches, min_batches))
    for f in fails:
        print('FAIL ' + f)
    print('%s: %d rows in %d batches equal to cells.csv (apache-arrow, polars twice): %d failures' % (
        arrow, len(body), batches, len(fails)))
    return 1 if fails else 0


if __name__ == '__main__':
    mode, node, script = sys.argv[1:4]
    if mode == 'edges':
        sys.exit(edges(node, script, sys.argv[4]))
    sys.exit(vs_csv(node, script, sys.argv[4], sys.argv[5], int(sys.argv[6]) if len(sys.argv) > 6 else 1))
