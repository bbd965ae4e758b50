"""tdbfmt - just enough of TileDB's on-disk format to mutate arrays by field.

The views campaign (views_campaign.py) lies in named fields of schemas and
fragment metadata instead of flipping random bits, so that its mutations
get past the generic tiles' zlib streams and GCM tags and reach the
arithmetic behind views.  This module reads and writes:

  generic tiles   (FORMAT.md section 6): the payload out of its chunks
                  (GZIP and AES-256-GCM, the only filters TileDB puts in
                  generic tiles), and a payload back in, stored as one chunk
                  with no filter, or with AES alone when the array is
                  encrypted (the header's encryption type must say so);
  schema payloads (section 7): every scalar field up to the attributes,
                  each recorded as a Field (name, offset, width);
  fragment footers (section 8.5, format >= 10): the fields up to the
                  generic tile offsets, the same way.

It is test scaffolding: it trusts the pristine files it is given (the
corpus), and the mutations it makes are the lies.
"""
import os
import struct
import zlib

try:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
except ImportError:         # encrypted arrays then get file-level mutations only
    AESGCM = None

SIZES = {0: 4, 1: 8, 2: 4, 3: 8, 4: 1, 5: 1, 6: 1, 7: 2, 8: 2, 9: 4, 10: 8, 11: 1, 12: 1, 13: 2,
         14: 4, 15: 2, 16: 4, 17: 1, 40: 1, 41: 1, 42: 1, 43: 1}
for _t in range(18, 40):
    SIZES[_t] = 8
VAR = 0xFFFFFFFF
GZIP, AES = 1, 11


def type_size(t):
    return SIZES.get(t, 1)


class Field:
    """A scalar at a byte offset of a payload: what a mutation rewrites."""

    def __init__(self, name, off, width, value):
        self.name, self.off, self.width, self.value = name, off, width, value

    def __repr__(self):
        return "%s@%d/%d=%d" % (self.name, self.off, self.width, self.value)


class Reader:
    def __init__(self, b, off=0):
        self.b, self.p, self.fields = b, off, []

    def need(self, n):
        if self.p + n > len(self.b):
            raise ValueError("truncated at %d (+%d of %d)" % (self.p, n, len(self.b)))

    def u(self, width, name=None):
        self.need(width)
        v = int.from_bytes(self.b[self.p:self.p + width], "little")
        if name:
            self.fields.append(Field(name, self.p, width, v))
        self.p += width
        return v

    def raw(self, n, name=None):
        self.need(n)
        if name and n in (1, 2, 4, 8):
            self.fields.append(Field(name, self.p, n, int.from_bytes(self.b[self.p:self.p + n], "little")))
        v = self.b[self.p:self.p + n]
        self.p += n
        return v


# ---- generic tiles ------------------------------------------------------------------------

def read_pipeline(r, name):
    r.u(4, name + ".max_chunk_size")
    n = r.u(4, name + ".num_filters")
    filters = []
    for i in range(n):
        t = r.u(1, "%s.filter%d.type" % (name, i))
        ln = r.u(4, "%s.filter%d.options_len" % (name, i))
        filters.append((t, r.raw(ln)))
    return filters


def generic_decode(b, off=0, key=None):
    """(payload, end offset, encrypted) of the generic tile at off."""
    r = Reader(b, off)
    r.u(4)
    persisted = r.u(8)
    tile_size = r.u(8)
    r.u(1)
    r.u(8)
    enc = r.u(1)
    fps = r.u(4)
    filters = read_pipeline(Reader(r.raw(fps)), "p")
    start = r.p
    r.need(persisted)
    t = Reader(b, start)
    out = bytearray()
    for _ in range(t.u(8)):
        orig, filt, meta = t.u(4), t.u(4), t.u(4)
        md, data = t.raw(meta), t.raw(filt)
        for ftype, _opts in reversed(filters):
            md, data = reverse_filter(ftype, md, data, key)
        if len(data) != orig:
            raise ValueError("chunk decodes to %d bytes, not %d" % (len(data), orig))
        out += data
    if len(out) != tile_size:
        raise ValueError("payload %d bytes, header says %d" % (len(out), tile_size))
    return bytes(out), start + persisted, bool(enc)


def reverse_filter(ftype, md, data, key):
    if ftype == 0:
        return md, data
    r = Reader(md)
    nmd, ndata = r.u(4), r.u(4)
    if ftype == GZIP:
        parts = [(r.u(4), r.u(4)) for _ in range(nmd + ndata)]
        outs, at = [], 0
        for orig, comp in parts:
            outs.append(zlib.decompress(data[at:at + comp]) if comp else b"")
            at += comp
    elif ftype == AES:
        if AESGCM is None or key is None:
            raise ValueError("encrypted generic tile: no AES here")
        parts = [(r.u(4), r.u(4), r.raw(12), r.raw(16)) for _ in range(nmd + ndata)]
        outs, at = [], 0
        for _plain, ct, iv, tag in parts:
            outs.append(AESGCM(key).decrypt(iv, data[at:at + ct] + tag, None))
            at += ct
    else:
        raise ValueError("filter %d in a generic tile" % ftype)
    return b"".join(outs[:nmd]) + r.b[r.p:], b"".join(outs[nmd:])


def generic_encode(payload, version, key=None):
    """A generic tile holding payload as one chunk: no filter, or AES alone."""
    if key is None:
        pipe = struct.pack("<II", 65536, 0)
        chunk = struct.pack("<III", len(payload), len(payload), 0) + payload
        enc = 0
    else:
        pipe = struct.pack("<II", 65536, 1) + struct.pack("<BI", AES, 0)
        iv = os.urandom(12)
        sealed = AESGCM(key).encrypt(iv, payload, None)
        ct, tag = sealed[:-16], sealed[-16:]
        md = struct.pack("<II", 0, 1) + struct.pack("<II", len(payload), len(ct)) + iv + tag
        chunk = struct.pack("<III", len(payload), len(ct), len(md)) + md + ct
        enc = 1
    tile = struct.pack("<Q", 1) + chunk
    head = struct.pack("<IQQBQBI", version, len(tile), len(payload), 4, 1, enc, len(pipe))
    return head + pipe + tile


# ---- schemas -------------------------------------------------------------------------------

class Schema:
    def __init__(self, payload):
        r = Reader(payload)
        self.version = v = r.u(4, "version")
        if v >= 5:
            r.u(1, "allows_dups")
        self.array_type = r.u(1, "array_type")
        r.u(1, "tile_order")
        r.u(1, "cell_order")
        r.u(8, "capacity")
        read_pipeline(r, "coords_filters")
        read_pipeline(r, "offsets_filters")
        if v >= 7:
            read_pipeline(r, "validity_filters")
        dtype = r.u(1, "domain.datatype") if v < 5 else None
        self.dims = []
        for d in range(r.u(4, "dim_num")):
            name = r.raw(r.u(4, "dim%d.name_len" % d))
            t = dtype
            cvn = 1
            if v >= 5:
                t = r.u(1, "dim%d.datatype" % d)
                cvn = r.u(4, "dim%d.cell_val_num" % d)
                read_pipeline(r, "dim%d.filters" % d)
                dsize = r.u(8, "dim%d.domain_size" % d)
            else:
                dsize = 2 * type_size(t)
            half = dsize // 2
            r.raw(half, "dim%d.domain_min" % d)
            r.raw(dsize - half, "dim%d.domain_max" % d)
            null_extent = r.u(1, "dim%d.null_tile_extent" % d)
            if not null_extent:
                r.raw(type_size(t), "dim%d.tile_extent" % d)
            self.dims.append((name, t, cvn == VAR or (v < 5 and t in (11, 12))))
        self.attrs = []
        for a in range(r.u(4, "attribute_num")):
            name = r.raw(r.u(4, "attr%d.name_len" % a))
            t = r.u(1, "attr%d.datatype" % a)
            cvn = r.u(4, "attr%d.cell_val_num" % a)
            read_pipeline(r, "attr%d.filters" % a)
            nullable = False
            if v >= 6:
                r.raw(r.u(8, "attr%d.fill_value_size" % a))
            if v >= 7:
                nullable = bool(r.u(1, "attr%d.nullable" % a))
                r.u(1, "attr%d.fill_value_validity" % a)
            if v >= 17:
                r.u(1, "attr%d.order" % a)
            if v >= 20:
                r.raw(r.u(4, "attr%d.enumeration_name_len" % a))
            self.attrs.append((name, t, cvn, nullable))
        self.fields = r.fields


# ---- fragment metadata --------------------------------------------------------------------

class Footer:
    """A format >= 10 footer (the last u64 is its length), parsed with the
    fragment's schema up to the generic tile offsets."""

    def __init__(self, meta, schema):
        n = len(meta)
        flen = struct.unpack_from("<Q", meta, n - 8)[0]
        if flen + 8 > n:
            raise ValueError("footer length past the file")
        r = Reader(meta, n - 8 - flen)
        self.version = v = r.u(4, "version")
        if v < 10:
            raise ValueError("footer of format %d" % v)
        r.raw(r.u(8, "schema_name_len"))
        self.dense = r.u(1, "dense")
        r.u(1, "null_non_empty_domain")
        for d, (_name, t, var) in enumerate(schema.dims):
            if var:
                rs = r.u(8, "ned%d.range_size" % d)
                r.u(8, "ned%d.start_size" % d)
                r.raw(rs)
            else:
                sz = type_size(t)
                r.raw(sz, "ned%d.lo" % d)
                r.raw(sz, "ned%d.hi" % d)
        r.u(8, "sparse_tile_num")
        r.u(8, "last_tile_cell_num")
        ts = r.u(1, "has_timestamps") if v >= 14 else 0
        dm = r.u(1, "has_delete_meta") if v >= 15 else 0
        nf = len(schema.attrs) + 1 + len(schema.dims) + ts + 2 * dm
        self.nfields = nf
        for k in ("file_sizes", "file_var_sizes", "file_validity_sizes"):
            for i in range(nf):
                r.u(8, "%s[%d]" % (k, i))
        r.u(8, "rtree_offset")
        self.tile_offsets = [r.u(8, "tile_offsets_offset[%d]" % i) for i in range(nf)]
        self.tile_var_offsets = [r.u(8, "tile_var_offsets_offset[%d]" % i) for i in range(nf)]
        self.tile_var_sizes = [r.u(8, "tile_var_sizes_offset[%d]" % i) for i in range(nf)]
        self.fields = r.fields
        self.start = n - 8 - flen


def offsets_fields(payload, name):
    """Fields of a tile offsets / var offsets / var sizes payload: u64 n, u64[n]."""
    r = Reader(payload)
    n = r.u(8, name + ".n")
    for i in range(min(n, (len(payload) - 8) // 8)):
        r.u(8, "%s[%d]" % (name, i))
    return r.fields
