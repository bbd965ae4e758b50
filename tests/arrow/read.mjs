// read.mjs FILE... - read each Arrow IPC file with two independent readers,
// apache-arrow (JavaScript) and nodejs-polars (Rust), and print one JSON
// line per file and reader: the columns' names, Arrow types and every value,
// normalized so that tests/arrow/check.py compares them with TileDB's reads:
//   integers (and datetimes' raw counts) as decimal strings, floats as
//   "f:" + the hex of their little-endian bits ("nan" for any NaN), bools
//   "0"/"1", text and binary as "x:" + the hex of their bytes, a cell of
//   several values as an array, null as null.
// polars reads each file by path first (scanIPC: its own reads, trusting
// the size the mount shows at open), then apache-arrow and polars again
// (readIPC of a Buffer) the bytes read through the mount.
import { readFileSync } from 'fs';
import { createRequire } from 'module';
const require = createRequire(process.env.ARROW_CLIENTS + '/package.json');
const arrow = require('apache-arrow');
const pl = require('nodejs-polars');

const hex = (u8) => Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength).toString('hex');
function floatBits(v, width) {
  if (Number.isNaN(v)) return 'nan';
  const b = Buffer.alloc(width);
  if (width === 4) b.writeFloatLE(v); else b.writeDoubleLE(v);
  return 'f:' + b.toString('hex');
}

// ---- apache-arrow ----
function arrowScalar(type, v) {
  if (v === null || v === undefined) return null;
  switch (type.typeId) {
    case arrow.Type.Int: return String(v);
    case arrow.Type.Float: return floatBits(v, type.precision === arrow.Precision.SINGLE ? 4 : 8);
    case arrow.Type.Bool: return v ? '1' : '0';
    case arrow.Type.Utf8: return 'x:' + Buffer.from(v, 'utf8').toString('hex');
    case arrow.Type.Binary: return 'x:' + hex(v);
    default: throw new Error('unexpected type ' + type);
  }
}

// Timestamps: the stored int64 counts (get() gives milliseconds).
function timestamps(vec) {
  const out = [];
  for (const d of vec.data) {
    const vals = d.values;
    for (let i = 0; i < d.length; i++) {
      if (!d.getValid(i)) { out.push(null); continue; }
      const k = d.offset + i;
      out.push(vals instanceof BigInt64Array ? String(vals[k])
        : String((BigInt(vals[2 * k + 1]) << 32n) | BigInt(vals[2 * k] >>> 0)));
    }
  }
  return out;
}

function readArrow(bytes) {
  const t = arrow.tableFromIPC(bytes);
  const cols = t.schema.fields.map((f, j) => {
    const vec = t.getChildAt(j);
    if (f.type.typeId === arrow.Type.Timestamp) return timestamps(vec);
    const out = [];
    for (let i = 0; i < t.numRows; i++) {
      const v = vec.get(i);
      if (f.type.typeId === arrow.Type.List || f.type.typeId === arrow.Type.FixedSizeList)
        out.push(v === null ? null : Array.from(v.toArray(), (x) => arrowScalar(f.type.children[0].type, x)));
      else
        out.push(arrowScalar(f.type, v));
    }
    return out;
  });
  return { rows: t.numRows, batches: t.batches.length, names: t.schema.fields.map((f) => f.name),
           types: t.schema.fields.map((f) => String(f.type)), nullable: t.schema.fields.map((f) => f.nullable),
           meta: t.schema.fields.map((f) => f.metadata.get('tiledb.datatype') ?? null), cols };
}

// ---- polars ----
function polarsColumn(df, name, dtype) {
  const s = (e) => df.select(e).getColumn(name).toArray();
  const d = String(dtype);
  if (/^DataType\(Binary/.test(d)) return null;  // not reached: see below
  if (/Float32|Float64/.test(d) && !/List/.test(d))
    return s(pl.col(name)).map((v) => (v === null ? null : floatBits(v, /Float32/.test(d) ? 4 : 8)));
  if (/Float/.test(d))
    return s(pl.col(name)).map((v) => (v === null ? null : Array.from(v, (x) => floatBits(x, /Float32/.test(d) ? 4 : 8))));
  if (/List/.test(d) && /Bool/.test(d))
    return s(pl.col(name)).map((v) => (v === null ? null : Array.from(v, (x) => (x ? '1' : '0'))));
  if (/List/.test(d))
    return s(pl.col(name).cast(pl.List(pl.Utf8))).map((v) => (v === null ? null : Array.from(v)));
  if (/Bool/.test(d)) return s(pl.col(name)).map((v) => (v === null ? null : v ? '1' : '0'));
  if (/String/.test(d)) return s(pl.col(name)).map((v) => (v === null ? null : 'x:' + Buffer.from(v, 'utf8').toString('hex')));
  if (/Datetime/.test(d)) return s(pl.col(name).cast(pl.Int64).cast(pl.Utf8));
  return s(pl.col(name).cast(pl.Utf8));
}

function readPolars(df) {
  const cols = [], types = [];
  for (const name of df.columns) {
    let dtype;
    try { dtype = df.getColumn(name).dtype; } catch (e) { dtype = 'Binary'; }  // no JS form
    types.push(String(dtype));
    if (dtype === 'Binary')
      cols.push(df.select(pl.col(name).cast(pl.List(pl.UInt8))).getColumn(name).toArray()
        .map((v) => (v === null ? null : 'x:' + Buffer.from(Array.from(v)).toString('hex'))));
    else
      cols.push(polarsColumn(df, name, dtype));
  }
  return { rows: df.height, names: df.columns, types, cols };
}

for (const file of process.argv.slice(2)) {
  const out = (reader, f) => {
    let r;
    try { r = f(); } catch (e) { r = { error: String(e.message || e).split('\n')[0] }; }
    console.log(JSON.stringify({ file, reader, ...r }));
  };
  // polars by path first: the file as a fresh mount shows it (sized at open).
  out('polars-scan', () => readPolars(pl.scanIPC(file).collectSync()));
  let bytes;
  try { bytes = readFileSync(file); } catch (e) { out('read', () => { throw e; }); continue; }
  out('apache-arrow', () => readArrow(bytes));
  out('polars', () => readPolars(pl.readIPC(bytes)));
}
