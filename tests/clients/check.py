#!/usr/bin/env python3
"""Compare what clients made of the views with TileDB's own read.

Usage: check.py CORPUS MNT DUCKDB_JSONL
       check.py --npy CORPUS MNT CASE...

DUCKDB_JSONL is duckdb-csv.js's output for MNT/<case>/array/@views/cells.csv
of cases of CORPUS: per CSV, DuckDB's row count and per column its type and
sum.  The expectation is each case's read_back (TileDB's read of the whole
array, tests/views_check.py's expected_array): the row count, and the sum
of every single-valued numeric column DuckDB typed as a number (integers
exactly; floats within 1e-9 of the sum of magnitudes).  A case without a
read_back is held to the number of records Python's csv module reads in
the same CSV.  With --npy: numpy.load(mmap_mode='r') of every .npy view of
the (dense) cases, whose bytes, shape and dtype must be read_back's.
Prints one line per case; exit 1 on any difference.
"""
import json
import math
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import views_check as vc  # noqa: E402

INTS = {'TINYINT', 'SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT', 'UTINYINT', 'USMALLINT', 'UINTEGER',
        'UBIGINT', 'UHUGEINT'}
FLOATS = {'FLOAT', 'DOUBLE'}


def float32_text(x):
    """A float32 as DuckDB sees it: its shortest text (the view's) read as a double."""
    if not math.isfinite(x):
        return x
    for p in range(1, 10):
        t = float('%.*g' % (p, x))
        if struct.unpack('<f', struct.pack('<f', t))[0] == x:
            return t
    return x


def column_values(f, cells):
    """The column's valid values as numbers, or None if not a numeric column."""
    if f.var or f.cvn != 1:
        return None
    out = []
    for raw, valid in cells:
        e = f.expect(raw, valid)
        if e is None:
            continue
        kind, vals = e
        if kind == 'int' and f.type != 'BOOL':
            out.append(vals[0])
        elif kind == 'float' and f.type == 'FLOAT32':
            out.append(float32_text(struct.unpack('<f', vals[0])[0]))
        elif kind == 'float':
            out.append(struct.unpack('<d', vals[0])[0])
        else:
            return None
    return out


def check_sum(col, want):
    """'' if DuckDB's sum of col agrees with the values want, else why not."""
    if col['sum'] is None:
        return '' if not want else 'sum NULL, expected %r' % sum(want)
    if col['type'] in INTS and all(isinstance(x, int) for x in want):
        return '' if int(col['sum']) == sum(want) else 'sum %s, expected %d' % (col['sum'], sum(want))
    if any(isinstance(x, float) and not math.isfinite(x) for x in want):
        return ''
    got, exp = float(col['sum']), math.fsum(want)
    tol = 1e-9 * max(1.0, math.fsum(abs(x) for x in want))
    return '' if abs(got - exp) <= tol else 'sum %r, expected %r' % (got, exp)


def check_npy(corpus, mnt, names):
    import numpy
    bad, n = [], 0
    for name in names:
        case = vc.Case(corpus, name)
        rows = vc.expected_array(case) if case.dense else None
        for i, f in enumerate(case.attrs if rows else []):
            if f.var or f.nullable:
                continue
            path = os.path.join(mnt, name, 'array', '@views', f.name + '.npy')
            raw = b''.join(row[len(case.dims) + i][0] for row in rows)
            shape = tuple(hi - lo + 1 for lo, hi in vc.dense_box(case)) + \
                ((f.cvn,) if f.cvn > 1 and f.type not in vc.TEXT | vc.BYTES else ())
            try:
                a = numpy.load(path, mmap_mode='r')
                if a.shape != shape or a.dtype.str != vc.npy_dtype(f) or a.tobytes() != raw:
                    bad.append('%s: shape %r dtype %s, expected %r %s%s' % (
                        path, a.shape, a.dtype.str, shape, vc.npy_dtype(f),
                        '' if a.tobytes() == raw else ', other bytes'))
            except (OSError, ValueError) as e:
                bad.append('%s: %s' % (path, e))
            n += 1
    for b in bad:
        print('FAIL ' + b)
    print('%d .npy views memory-mapped by numpy, %d differ' % (n, len(bad)))
    return 1 if bad or not n else 0


def main():
    if sys.argv[1] == '--npy':
        return check_npy(sys.argv[2], sys.argv[3], sys.argv[4:])
    corpus, mnt, results = sys.argv[1:4]
    bad, cases, sums = [], 0, 0
    for line in open(results):
        r = json.loads(line)
        rel = os.path.relpath(r['path'], mnt)
        name = rel.split('/array/@views/')[0]
        if 'error' in r:
            bad.append('%s: DuckDB: %s' % (name, r['error']))
            continue
        case = vc.Case(corpus, name)
        rows = vc.expected_array(case)
        if rows is None:	# no read_back: the CSV's own records
            with open(r['path'], 'rb') as f:
                want_rows = len(vc.parse_csv(f.read())) - 1
        else:
            want_rows = len(rows)
        why = [] if r['rows'] == want_rows else ['%d rows, expected %d' % (r['rows'], want_rows)]
        fields = case.dims + case.attrs
        if rows and not why and len(r['cols']) == len(fields):
            for i, (f, col) in enumerate(zip(fields, r['cols'])):
                want = column_values(f, [row[i] for row in rows])
                if want is None or col['type'] not in INTS | FLOATS:
                    continue
                w = check_sum(col, want)
                if w:
                    why.append('%s: %s' % (f.name, w))
                sums += 1
        elif rows and not why:
            why.append('%d columns, expected %d' % (len(r['cols']), len(fields)))
        cases += 1
        print('%-45s %s' % (name, 'ok (%d rows)' % r['rows'] if not why else 'FAILED'))
        bad += ['%s: %s' % (name, w) for w in why]
    for b in bad:
        print('FAIL ' + b)
    print('%d CSVs read by DuckDB, %d column sums compared, %d differences' % (cases, sums, len(bad)))
    return 1 if bad or not cases else 0


if __name__ == '__main__':
    sys.exit(main())
