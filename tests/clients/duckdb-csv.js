// duckdb-csv.js PATH... - what DuckDB (@duckdb/node-api) makes of each CSV
// with its own sniffer: one JSON line per file, its row count and, per
// column, DuckDB's type and the sum of a numeric one (integers exactly, as
// text; floats as DuckDB sums them).  Errors are reported, not thrown.
'use strict';
const { DuckDBInstance } = require('@duckdb/node-api');

const INTS = new Set(['TINYINT', 'SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT', 'UTINYINT', 'USMALLINT',
	'UINTEGER', 'UBIGINT', 'UHUGEINT']);
const FLOATS = new Set(['FLOAT', 'DOUBLE']);
const quote = s => "'" + s.replace(/'/g, "''") + "'";
const ident = s => '"' + s.replace(/"/g, '""') + '"';

(async () => {
	const db = await DuckDBInstance.create(':memory:', { threads: '1' });
	const con = await db.connect();
	for (const path of process.argv.slice(2)) {
		const out = { path };
		try {
			const src = `read_csv(${quote(path)})`;
			const desc = await con.runAndReadAll(`DESCRIBE SELECT * FROM ${src}`);
			const cols = desc.getRows().map(r => ({ name: String(r[0]), type: String(r[1]) }));
			const sums = cols.map(c => INTS.has(c.type) ? `CAST(sum(${ident(c.name)}) AS VARCHAR)`
				: FLOATS.has(c.type) ? `CAST(sum(CAST(${ident(c.name)} AS DOUBLE)) AS VARCHAR)` : 'NULL');
			const r = await con.runAndReadAll(`SELECT CAST(count(*) AS VARCHAR)${sums.map(s => ', ' + s).join('')} FROM ${src}`);
			const row = r.getRows()[0];
			out.rows = Number(row[0]);
			out.cols = cols.map((c, i) => ({ name: c.name, type: c.type, sum: row[i + 1] === null ? null : String(row[i + 1]) }));
		} catch (e) {
			out.error = String(e && e.message || e);
		}
		console.log(JSON.stringify(out));
	}
})().catch(e => { console.error(String(e)); process.exit(1); });
