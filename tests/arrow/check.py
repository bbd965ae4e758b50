#!/usr/bin/env python3
"""Check cells.arrow views against TileDB's own reads of the corpus.

For every case of CORPUS (and CORPUS/extra), the cells a read returns are
computed here from the manifest and its read_back buffers, and each
fragment's from its unfiltered tiles, as tests/views_check.py does for
cells.csv (same functions); then ROOT/<case>/array/@views/cells.arrow and
every fragments/F/cells.arrow are read by tests/arrow/read.mjs with
apache-arrow and nodejs-polars, and every value of every column (nulls
included), the column names, the row count and the Arrow types are compared.

Usage: check.py NODE READ_MJS CORPUS ROOT [CASE...]
ROOT is a tilefs mount of CORPUS with -o views (or a directory of files
laid out the same way).
"""
import json
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import views_check as vc  # noqa: E402

TS_UNITS = {'DATETIME_SEC': 's', 'DATETIME_MS': 'ms', 'DATETIME_US': 'us', 'DATETIME_NS': 'ns'}
ARROW_INT = {'INT8': 'Int8', 'UINT8': 'Uint8', 'INT16': 'Int16', 'UINT16': 'Uint16', 'INT32': 'Int32',
             'UINT32': 'Uint32', 'INT64': 'Int64', 'UINT64': 'Uint64'}


def value_field(f):
    """(datatype, cell_val_num, var) of what a column holds (an enumeration's values)."""
    if f.enum is not None:
        t, _, cvn = f.enum
        return t, 1 if cvn == 'var' else cvn, cvn == 'var' or cvn == 4294967295
    return f.type, f.cvn, f.var


def arrow_type(f, dim):
    t, cvn, var = value_field(f)
    if t in vc.TEXT or t.startswith('STRING_'):
        return 'Utf8'
    if t in vc.BYTES:
        return 'Binary'
    if t in TS_UNITS:
        base = 'Timestamp<%s, UTC>' % {'s': 'SECOND', 'ms': 'MILLISECOND', 'us': 'MICROSECOND',
                                       'ns': 'NANOSECOND'}[TS_UNITS[t]]
    elif vc.is_dt(t):
        base = 'Int64'
    elif t == 'BOOL':
        base = 'Bool'
    elif t in ('FLOAT32', 'FLOAT64'):
        base = 'Float%s' % t[5:]
    else:
        base = ARROW_INT[t]
    if var and not dim:
        return 'List<%s>' % base
    if cvn > 1 and not dim:
        return 'FixedSizeList[%d]<%s>' % (cvn, base)
    return base


def norm(t, raw, polars):
    """One cell's values as read.mjs prints them."""
    if t in vc.TEXT:
        return 'x:' + raw.hex()
    if t.startswith('STRING_'):
        enc = {2: 'utf-16-le', 4: 'utf-32-le'}[vc.type_size(t)]
        return 'x:' + raw.decode(enc, 'replace').encode('utf-8').hex()
    if t in vc.BYTES:
        return 'x:' + raw.hex()
    size = vc.type_size(t)
    out = []
    for i in range(0, len(raw), size):
        b = raw[i:i + size]
        if t in ('FLOAT32', 'FLOAT64'):
            v = struct.unpack('<f' if size == 4 else '<d', b)[0]
            out.append('nan' if v != v else 'f:' + b.hex())
        elif t == 'BOOL':
            out.append('1' if b[0] else '0')
        else:
            v = struct.unpack('<' + vc.FIXED.get(t, 'q'), b)[0]
            if polars and t == 'DATETIME_SEC':
                v *= 1000   # polars has no seconds: it reads them as milliseconds
            out.append(str(v))
    return out


def expect(f, raw, valid, dim, polars):
    if not valid:
        return None
    t, cvn, var = value_field(f)
    if f.enum is not None:
        idx = f.values(raw)[0]
        if idx < 0 or idx >= len(f.enum[1]):
            return None
        raw = f.enum[1][idx]
    v = norm(t, raw, polars)
    if isinstance(v, str):
        return v
    return v if (var or cvn > 1) and not dim else v[0]


def compare(what, got, fields, ndims, rows):
    if 'error' in got:
        return '%s: %s' % (got['reader'], got['error'])
    reader = got['reader']
    polars = reader.startswith('polars')
    names = [f.name for f in fields]
    if got['names'] != names:
        return '%s: columns %r, expected %r' % (reader, got['names'], names)
    if got['rows'] != len(rows):
        return '%s: %d rows, expected %d' % (reader, got['rows'], len(rows))
    if reader == 'apache-arrow':
        want = [arrow_type(f, j < ndims) for j, f in enumerate(fields)]
        types = [t.replace('Float32', 'Float32').replace('Float64', 'Float64') for t in got['types']]
        if types != want:
            return '%s: types %r, expected %r' % (reader, types, want)
        nullable = [j >= ndims and (f.nullable or f.enum is not None) for j, f in enumerate(fields)]
        if got['nullable'] != nullable:
            return '%s: nullable %r, expected %r' % (reader, got['nullable'], nullable)
        if got['meta'] != [value_field(f)[0].lower() for f in fields]:
            return '%s: tiledb.datatype %r' % (reader, got['meta'])
    for j, f in enumerate(fields):
        col = got['cols'][j]
        for r, row in enumerate(rows):
            raw, valid = row[j]
            w = expect(f, raw, valid, j < ndims, polars)
            if col[r] != w:
                return '%s: row %d, %s: %r, expected %r' % (reader, r, f.name, col[r], w)
    return None


def main():
    node, script, root, mnt = sys.argv[1:5]
    names = sys.argv[5:] or vc.cases(root)
    failures, passes = [], 0
    jobs = {}   # case: [(path, what, fields, ndims, rows)]
    for name in names:
        case = vc.Case(root, name)
        jobs[name] = []
        try:
            rows = vc.expected_array(case)
            base = os.path.join(mnt, name, 'array', '@views')
            if rows is not None:
                jobs[name].append((os.path.join(base, 'cells.arrow'), 'cells.arrow', case.dims + case.attrs,
                                   len(case.dims), rows))
            for k, fr in enumerate(case.frags):
                frows, attrs = vc.expected_fragment(case, k, fr)
                jobs[name].append((os.path.join(base, 'fragments', fr['name'], 'cells.arrow'),
                                   'fragments/%s/cells.arrow' % fr['name'], case.dims + attrs, len(case.dims), frows))
        except (ValueError, KeyError, OSError) as e:
            failures.append('%s: expected: %s' % (name, e))
    # One node for all the files: starting one (and polars) costs ~0.4 s.
    p = subprocess.run([node, script] + [j[0] for js in jobs.values() for j in js], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=600)
    results = {}
    for line in p.stdout.decode().splitlines():
        g = json.loads(line)
        results.setdefault(g['file'], []).append(g)
    for name, js in jobs.items():
        before = len(failures)
        for path, what, fields, ndims, rows in js:
            got = results.get(path, [])
            if len(got) != 3:
                failures.append('%s: %s: %d readers answered (%s)' % (
                    name, what, len(got), p.stderr.decode(errors='replace').strip()[-300:]))
                continue
            for g in got:
                msg = compare(what, g, fields, ndims, rows)
                if msg:
                    failures.append('%s: %s: %s' % (name, what, msg))
                else:
                    passes += 1
        print('%-45s %s' % (name, 'ok' if len(failures) == before else 'FAILED'))
    for f in failures:
        print('FAIL ' + f)
    print('%d reads equal to TileDB\'s (apache-arrow, polars, polars by path), %d failed' % (passes, len(failures)))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
