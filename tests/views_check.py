#!/usr/bin/env python3
"""Check the array views (tiletool export) against the TileDB corpus.

The expectation is computed here, from each case's manifest.json and its
expected/ buffers, independently of tilefs's C code:

  cells.csv            read_back (TileDB's own read of the array), sliced to
                       the non-empty domain of the fragments a read sees;
  <attr>.raw / .npy    the same read_back buffers, byte for byte; every .npy
                       loaded with numpy.load(mmap_mode='r') when NumPy is here;
  fragments/F/cells.csv  the fragment's unfiltered tiles (the filter-free
                       twin's bytes, expected/unfiltered/f<k>/), cells in
                       storage order with coordinates computed here.

CSV is parsed by a small RFC 4180 reader (an unquoted empty field is null,
"" an empty value) and by Python's csv module; values are compared by
meaning (floats parse back to the same bits, datetimes as NumPy writes
them).  Usage: views_check.py TILETOOL CORPUS_DIR [CASE...]
"""
import csv
import datetime
import io
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

try:
    import numpy
except ImportError:  # the .npy checks need NumPy; the rest does not
    numpy = None

FIXED = {'INT8': 'b', 'UINT8': 'B', 'INT16': 'h', 'UINT16': 'H', 'INT32': 'i', 'UINT32': 'I',
         'INT64': 'q', 'UINT64': 'Q', 'FLOAT32': 'f', 'FLOAT64': 'd', 'BOOL': 'B'}
TEXT = {'CHAR', 'STRING_ASCII', 'STRING_UTF8', 'GEOM_WKT'}
BYTES = {'BLOB', 'GEOM_WKB', 'ANY'}
UNITS = ['YEAR', 'MONTH', 'WEEK', 'DAY', 'HR', 'MIN', 'SEC', 'MS', 'US', 'NS', 'PS', 'FS', 'AS']
NPY_UNITS = ['Y', 'M', 'W', 'D', 'h', 'm', 's', 'ms', 'us', 'ns', 'ps', 'fs', 'as']


def type_size(t):
    if t in FIXED:
        return struct.calcsize(FIXED[t])
    if t.startswith('DATETIME_') or t.startswith('TIME_'):
        return 8
    if t in ('STRING_UTF16', 'STRING_UCS2'):
        return 2
    if t in ('STRING_UTF32', 'STRING_UCS4'):
        return 4
    return 1


def is_dt(t):
    return t.startswith('DATETIME_') or t.startswith('TIME_')


# ---- expected text of dates and times -------------------------------------------------------

def civil(days):
    d = datetime.date(1970, 1, 1) + datetime.timedelta(days=days)
    return '%04d-%02d-%02d' % (d.year, d.month, d.day)


def datetime_text(t, v):
    if v == -2 ** 63:
        return 'NaT'
    unit = t.split('_', 1)[1]
    if t.startswith('TIME_'):
        neg, a = v < 0, abs(v)
        if unit == 'HR':
            s = '%02d' % a
        elif unit == 'MIN':
            s = '%02d:%02d' % (a // 60, a % 60)
        else:
            k = UNITS.index(unit) - UNITS.index('SEC')
            sec, frac = divmod(a, 10 ** (3 * k))
            s = '%02d:%02d:%02d' % (sec // 3600, sec // 60 % 60, sec % 60)
            if k:
                s += '.%0*d' % (3 * k, frac)
        return ('-' if neg else '') + s
    if unit == 'YEAR':
        return '%04d' % (1970 + v)
    if unit == 'MONTH':
        y, m = divmod(v, 12)
        return '%04d-%02d' % (1970 + y, m + 1)
    if unit in ('WEEK', 'DAY'):
        return civil(v * 7 if unit == 'WEEK' else v)
    if unit in ('HR', 'MIN'):
        per = 24 if unit == 'HR' else 1440
        days, rem = divmod(v, per)
        return civil(days) + ('T%02dZ' % rem if unit == 'HR' else 'T%02d:%02dZ' % (rem // 60, rem % 60))
    k = UNITS.index(unit) - UNITS.index('SEC')
    sec, frac = divmod(v, 10 ** (3 * k))
    days, rem = divmod(sec, 86400)
    s = civil(days) + 'T%02d:%02d:%02d' % (rem // 3600, rem // 60 % 60, rem % 60)
    return s + ('.%0*d' % (3 * k, frac) if k else '') + 'Z'


# ---- one field's meaning -----------------------------------------------------------------------

class Field:
    """A dimension or attribute: how its cells read from bytes and from CSV."""

    def __init__(self, d, enums=None):
        self.name = d['name']
        self.type = d['datatype']
        cvn = d.get('cell_val_num', 1)
        self.var = cvn == 'var'
        self.cvn = 1 if self.var else cvn
        self.nullable = bool(d.get('nullable'))
        self.enum = enums.get(d['enumeration']) if enums and d.get('enumeration') else None
        self.fill = bytes.fromhex(d['fill_value_hex']) if 'fill_value_hex' in d else None
        self.fill_valid = bool(d.get('fill_validity', 0))

    def values(self, raw):
        """The cell's bytes as a list of numbers (or one bytes value)."""
        if self.type in TEXT or self.type in BYTES or self.type.startswith('STRING_'):
            return [raw]
        size = type_size(self.type)
        fmt = FIXED.get(self.type, 'q')
        return [struct.unpack('<' + fmt, raw[i:i + size])[0] for i in range(0, len(raw), size)]

    def expect(self, raw, valid=True):
        """What the CSV field must mean: None (null), or a comparable."""
        if not valid:
            return None
        if self.enum is not None:
            idx = self.values(raw)[0]
            if idx < 0 or idx >= len(self.enum[1]):
                return None
            return Field({'name': '', 'datatype': self.enum[0], 'cell_val_num': self.enum[2]}).expect(
                self.enum[1][idx])
        if self.type in TEXT:
            return ('text', raw)
        if self.type.startswith('STRING_'):
            enc = {2: 'utf-16-le', 4: 'utf-32-le'}[type_size(self.type)]
            return ('text', raw.decode(enc, 'replace').encode('utf-8'))
        if self.type in BYTES:
            return ('hex', raw.hex())
        vals = self.values(raw)
        if is_dt(self.type):
            return ('dt', [datetime_text(self.type, v) for v in vals])
        if self.type in ('FLOAT32', 'FLOAT64'):
            return ('float', [struct.pack('<' + FIXED[self.type], v) for v in vals])
        if self.type == 'BOOL':
            return ('int', [1 if v else 0 for v in vals])
        return ('int', vals)

    def matches(self, field, want):
        """Whether CSV field (bytes, or None when unquoted empty) means want."""
        if want is None:
            return field is None
        if field is None:
            return False
        kind, v = want
        if kind == 'text':
            return field == v
        if kind == 'hex':
            return field.decode() == v or (v == '' and field == b'')
        parts = field.split(b' ') if field else []
        if len(parts) != len(v):
            return False
        if kind == 'dt':
            return [p.decode() for p in parts] == v
        if kind == 'int':
            return [int(p) for p in parts] == v
        fmt = '<f' if len(v[0]) == 4 else '<d'
        for p, bits in zip(parts, v):
            x = float(p)
            if math.isnan(x) and math.isnan(struct.unpack(fmt, bits)[0]):
                continue
            if struct.pack(fmt, x) != bits or not shortest(p, bits, fmt):
                return False
        return True


def shortest(text, bits, fmt):
    """No shorter decimal parses back to the same bits (Python's repr and
    NumPy's float32 repr are shortest round-trip forms)."""
    digits = len(text.lstrip(b'-').split(b'e')[0].replace(b'.', b'').lstrip(b'0')) or 1
    if fmt == '<d':
        ref = repr(struct.unpack(fmt, bits)[0])
    elif numpy is not None:
        ref = str(numpy.frombuffer(bits, '<f4')[0])
    else:
        return True
    ref_digits = len(ref.lstrip('-').split('e')[0].replace('.', '').lstrip('0')) or 1
    return digits <= max(ref_digits, 1)


# ---- CSV -------------------------------------------------------------------------------------------

def parse_csv(data):
    """RFC 4180 records; an unquoted empty field is None."""
    rows, row, i, n = [], [], 0, len(data)
    while i < n:
        if data[i] == 0x22:
            i += 1
            buf = bytearray()
            while True:
                j = data.index(b'"', i)
                buf += data[i:j]
                if data[j + 1:j + 2] == b'"':
                    buf += b'"'
                    i = j + 2
                    continue
                i = j + 1
                break
            field = bytes(buf)
        else:
            j = i
            while j < n and data[j] not in (0x2c, 0x0a):
                j += 1
            field = data[i:j] if j > i else None
            i = j
        row.append(field)
        if i < n and data[i] == 0x2c:
            i += 1
            if i == n or data[i] == 0x0a:  # a trailing empty field
                row.append(None)
            else:
                continue
        if i < n and data[i] != 0x0a:
            raise ValueError('junk after a quoted field at byte %d' % i)
        rows.append(row)
        row = []
        i += 1
    return rows


def csv_module_rows(data):
    """Python's csv module must read the same table."""
    text = data.decode('utf-8', 'surrogateescape')
    csv.field_size_limit(1 << 30)
    return list(csv.reader(io.StringIO(text, newline='')))


# ---- the case's facts ---------------------------------------------------------------------------------

class Case:
    def __init__(self, root, name):
        self.name = name
        self.dir = os.path.join(root, name)
        self.m = json.load(open(os.path.join(self.dir, 'manifest.json')))
        self.dense = self.m['array_type'] == 'dense'
        self.enums = {}
        for e in self.m.get('enumeration_files', []):
            en = e['enumeration']
            vals = [v.encode('utf-8') for v in en['values']] if 'values' in en else \
                [bytes.fromhex(h) for h in en['values_hex']]
            self.enums[en['name']] = (en['datatype'], vals, en['cell_val_num'])
        self.dims = [Field(d) for d in self.m['dimensions']]
        self.attrs = [Field(a, self.enums) for a in self.m['attributes']]
        vac = set()
        for c in self.m.get('commit_files', []):
            for line in c.get('lines', []) if c.get('ext') == 'vac' else []:
                vac.add(line.rstrip('/').split('/')[-1])
        self.frags = self.m['fragments']
        self.visible = [f for f in self.frags if f['name'] not in vac]

    def path(self, rel):
        return os.path.join(self.dir, rel)

    def read(self, rel):
        with open(self.path(rel), 'rb') as f:
            return f.read()

    def schema_attrs(self, frag):
        """The attributes of the schema a fragment was written with."""
        for s in self.m.get('schemas', []):
            if s['name'] == frag.get('array_schema_name'):
                return [Field(a, self.enums) for a in s['attributes']]
        return self.attrs


def buffers(case, rb, f):
    """Cells of field f in a read/write buffer set: (bytes, valid) each."""
    b = rb['buffers'][f.name]
    n = rb['cell_count']
    valid = list(case.read(b['validity'])) if 'validity' in b else [1] * n
    if f.var:
        offs = struct.unpack('<%dQ' % n, case.read(b['offsets']))
        data = case.read(b['var'])
        ends = list(offs[1:]) + [len(data)]
        return [(data[offs[i]:ends[i]], valid[i]) for i in range(n)]
    data = case.read(b['data'])
    cs = type_size(f.type) * f.cvn
    return [(data[i * cs:(i + 1) * cs], valid[i]) for i in range(n)]


def dense_box(case):
    """Union of the visible fragments' non-empty domains (per dimension)."""
    box = None
    for fr in case.visible:
        ned = fr['fragment_metadata']['footer']['non_empty_domain']
        box = [list(r) for r in ned] if box is None else \
            [[min(b[0], r[0]), max(b[1], r[1])] for b, r in zip(box, ned)]
    return box


def row_major(box):
    """Every coordinate of the box, row-major."""
    out = [[]]
    for lo, hi in box:
        out = [c + [x] for c in out for x in range(lo, hi + 1)]
    return out


def expected_array(case):
    """Rows (coordinates and attribute cells) a read of the array returns."""
    rb = case.m['read_back']
    if rb.get('buffers') is None:
        return None
    attrs = {f.name: buffers(case, rb, f) for f in case.attrs}
    if not case.dense:
        dims = {f.name: buffers(case, rb, f) for f in case.dims}
        return [[dims[f.name][i] for f in case.dims] + [attrs[f.name][i] for f in case.attrs]
                for i in range(rb['cell_count'])]
    box, sub = dense_box(case), rb['subarray']
    if box is None:
        return []
    shape = [hi - lo + 1 for lo, hi in sub]
    rows = []
    for coord in row_major(box):
        idx = 0
        for (lo, hi), x, s in zip(sub, coord, shape):
            if not lo <= x <= hi:
                raise ValueError('non-empty domain outside the read_back subarray')
            idx = idx * s + (x - lo)
        rows.append([(struct.pack('<' + FIXED.get(f.type, 'q'), x), 1) for f, x in zip(case.dims, coord)] +
                    [attrs[f.name][idx] for f in case.attrs])
    return rows


# ---- fragments as stored -------------------------------------------------------------------------

def stored_field(case, k, fr, f, file_stem):
    """A field's cells from fragment k's unfiltered tiles: list per tile."""
    df = fr['data_files']
    fixed = df[file_stem + '.tdb']
    data = case.read('expected/unfiltered/f%d/%s.tdb.bin' % (k, file_stem))
    sizes = fixed['unfiltered_tile_sizes']
    valid = None
    if f.nullable:
        valid = case.read('expected/unfiltered/f%d/%s_validity.tdb.bin' % (k, file_stem))
    tiles, pos, vpos, cell = [], 0, 0, 0
    var = case.read('expected/unfiltered/f%d/%s_var.tdb.bin' % (k, file_stem)) if f.var else None
    vsizes = df[file_stem + '_var.tdb']['unfiltered_tile_sizes'] if f.var else None
    for t, size in enumerate(sizes):
        chunk = data[pos:pos + size]
        cells = []
        if f.var:
            offs = struct.unpack('<%dQ' % (size // 8), chunk)
            tv = var[vpos:vpos + vsizes[t]]
            ends = list(offs[1:]) + [len(tv)]
            cells = [tv[offs[i]:ends[i]] for i in range(len(offs))]
            vpos += vsizes[t]
        else:
            cs = type_size(f.type) * f.cvn
            cells = [chunk[i:i + cs] for i in range(0, size, cs)]
        tiles.append([(c, valid[cell + i] if valid is not None else 1) for i, c in enumerate(cells)])
        cell += len(cells)
        pos += size
    return tiles


def expected_fragment(case, k, fr):
    footer = fr['fragment_metadata']['footer']
    attrs = case.schema_attrs(fr)
    if not footer['dense']:
        cols = [stored_field(case, k, fr, f, 'd%d' % i) for i, f in enumerate(case.dims)] + \
               [stored_field(case, k, fr, f, 'a%d' % i) for i, f in enumerate(attrs)]
        return [[col[t][c] for col in cols] for t in range(len(cols[0])) for c in range(len(cols[0][t]))], attrs
    # Dense: tiles in row-major tile order over the tiles covering the
    # non-empty domain, cells row-major within each (the corpus's orders).
    ned = footer['non_empty_domain']
    ext = [d['tile_extent'] for d in case.m['dimensions']]
    lo = [d['domain'][0] for d in case.m['dimensions']]
    tiles = [[(a - l) // e, (b - l) // e] for (a, b), l, e in zip(ned, lo, ext)]
    cols = [stored_field(case, k, fr, f, 'a%d' % i) for i, f in enumerate(attrs)]
    rows, t = [], 0
    for tc in row_major(tiles):
        for c, off in enumerate(row_major([[0, e - 1] for e in ext])):
            coord = [l + tcd * e + o for l, tcd, e, o in zip(lo, tc, ext, off)]
            if all(a <= x <= b for x, (a, b) in zip(coord, ned)):
                rows.append([(struct.pack('<' + FIXED.get(f.type, 'q'), x), 1) for f, x in zip(case.dims, coord)] +
                            [col[t][c] for col in cols])
        t += 1
    return rows, attrs


def npy_dtype(f):
    """The NumPy dtype string a dense attribute's matrix must have."""
    if is_dt(f.type):
        unit = NPY_UNITS[UNITS.index(f.type.split('_', 1)[1])]
        return ('<M8[%s]' if f.type.startswith('DATETIME_') else '<m8[%s]') % unit
    if f.type in TEXT:
        return '|S%d' % f.cvn
    if f.type in BYTES:
        return '|V%d' % f.cvn
    return numpy.dtype('<' + FIXED[f.type] if f.type != 'BOOL' else '?').str


# ---- running the views -----------------------------------------------------------------------------

class Checker:
    def __init__(self, tiletool, root):
        self.tiletool, self.root = tiletool, root
        self.failures, self.passes, self.notes = [], 0, []
        self.tmp = tempfile.mkdtemp(prefix='views-check-')

    def export(self, case, *args):
        cmd = [self.tiletool, 'export'] + list(args)
        enc = case.m.get('encryption')
        if enc:
            key = os.path.join(self.tmp, 'key')
            with open(key, 'w') as f:
                f.write(enc['key_hex'])
            os.chmod(key, 0o600)
            cmd += ['-k', key]
        cmd.append(case.path('array'))
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode != 0:
            raise RuntimeError('%s: exit %d: %s' % (' '.join(args) or 'csv', p.returncode,
                                                   p.stderr.decode(errors='replace').strip()))
        return p.stdout

    def fail(self, case, what, msg):
        self.failures.append('%s: %s: %s' % (case.name, what, msg))

    def compare(self, case, what, data, fields, rows):
        table = parse_csv(data)
        if csv_module_rows(data) != [[(c or b'').decode('utf-8', 'surrogateescape') for c in r] for r in table]:
            return self.fail(case, what, "Python's csv module reads another table")
        head = [f.name.encode() for f in fields]
        if table[0] != head:
            return self.fail(case, what, 'header %r, expected %r' % (table[0], head))
        body = table[1:]
        if len(body) != len(rows):
            return self.fail(case, what, '%d records, expected %d' % (len(body), len(rows)))
        for r, (got, want) in enumerate(zip(body, rows)):
            if len(got) != len(fields):
                return self.fail(case, what, 'record %d has %d fields' % (r + 1, len(got)))
            for f, g, (raw, valid) in zip(fields, got, want):
                if not f.matches(g, f.expect(raw, valid)):
                    return self.fail(case, what, 'record %d, %s: %r, expected %r' % (
                        r + 1, f.name, g, f.expect(raw, valid)))
        self.passes += 1

    def check_matrices(self, case, rows):
        for i, f in enumerate(case.attrs):
            if f.var or f.nullable:
                continue
            raw = b''.join(row[len(case.dims) + i][0] for row in rows)
            got = self.export(case, '--raw', f.name)
            if got != raw:
                self.fail(case, f.name + '.raw', '%d bytes differ from the read (%d)' % (len(got), len(raw)))
                continue
            self.passes += 1
            npy = self.export(case, '--npy', f.name)
            if not npy.endswith(raw) or not npy.startswith(b'\x93NUMPY\x01\x00'):
                self.fail(case, f.name + '.npy', 'not the .raw bytes behind a NumPy 1.0 header')
                continue
            if numpy is not None:
                path = os.path.join(self.tmp, 'v.npy')
                with open(path, 'wb') as out:
                    out.write(npy)
                arr = numpy.load(path, mmap_mode='r')
                shape = tuple(hi - lo + 1 for lo, hi in dense_box(case)) + ((f.cvn,) if f.cvn > 1 and
                                                                             f.type not in TEXT | BYTES else ())
                if arr.shape != shape or arr.tobytes() != raw:
                    self.fail(case, f.name + '.npy', 'numpy.load: shape %r, expected %r' % (arr.shape, shape))
                    continue
                want = npy_dtype(f)
                if arr.dtype.str != want:
                    self.fail(case, f.name + '.npy', 'dtype %s, expected %s' % (arr.dtype.str, want))
                    continue
            self.passes += 1

    def run_case(self, name):
        case = Case(self.root, name)
        try:
            rows = expected_array(case)
            if rows is not None:
                self.compare(case, 'cells.csv', self.export(case), case.dims + case.attrs, rows)
                if case.dense:
                    self.check_matrices(case, rows)
            for k, fr in enumerate(case.frags):
                what = 'fragments/%s/cells.csv' % fr['name']
                frows, attrs = expected_fragment(case, k, fr)
                self.compare(case, what, self.export(case, '--fragment', fr['name']), case.dims + attrs, frows)
        except (RuntimeError, ValueError, KeyError, OSError, csv.Error) as e:
            self.fail(case, 'run', str(e))


def cases(root):
    out = []
    for sub in ('', 'extra'):
        d = os.path.join(root, sub)
        for n in sorted(os.listdir(d)):
            if os.path.exists(os.path.join(d, n, 'manifest.json')):
                out.append(os.path.join(sub, n) if sub else n)
    return out


def main():
    tiletool, root = sys.argv[1], sys.argv[2]
    names = sys.argv[3:] or cases(root)
    ck = Checker(tiletool, root)
    try:
        for n in names:
            before = len(ck.failures)
            ck.run_case(n)
            print('%-45s %s' % (n, 'ok' if len(ck.failures) == before else 'FAILED'))
    finally:
        shutil.rmtree(ck.tmp, ignore_errors=True)
    for f in ck.failures:
        print('FAIL ' + f)
    print('%d checks passed, %d failed%s' % (ck.passes, len(ck.failures),
                                             '' if numpy is not None else ' (no NumPy: .npy not loaded)'))
    return 1 if ck.failures else 0


if __name__ == '__main__':
    sys.exit(main())
