/*
 * edges DIR - write the Arrow writer's edge cases (tf_arrow.h) as DIR/<case>.arrow,
 * each with DIR/<case>.json: the rows, batches, column names and every value
 * the file must hold, normalized as tests/arrow/read.mjs prints what the
 * readers see (integers in decimal, floats "f:" + the hex of their
 * little-endian bits, bools "0"/"1", text and binary "x:" + hex, a cell of
 * several values an array, null as null).  tests/arrow.sh reads them with
 * apache-arrow and nodejs-polars and compares (tests/arrow/compare.py).
 *
 * Cases: no cells; one cell; batches cut at max_cells (7 rows by 3, 6 by 3);
 * nulls in every kind of column (two batches, a null on each side of a
 * bitmap byte, a column all null, one nullable without nulls); 32-bit
 * offsets' limit (max_var 10: strings of 4, 4, 2 bytes fill a batch, one
 * more starts the next); batches cut by their bytes.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "views/tf_arrow.h"

#define MAXC 16
#define MAXR 32

typedef struct value {
	uint8_t b[64];
	size_t n;
	bool valid;
} value;

typedef struct kase {
	const char *name;
	tf_arrow_col cols[MAXC];
	size_t ncols, nrows;
	value v[MAXR][MAXC];
	tf_arrow_limits lim;
	unsigned batches;
} kase;

static void die(const char *what, const tf_error *err)
{
	fprintf(stderr, "edges: %s: %s\n", what, err ? err->msg : "failed");
	exit(1);
}

static void put(kase *k, size_t r, size_t c, const void *p, size_t n, bool valid)
{
	memcpy(k->v[r][c].b, p, n);
	k->v[r][c].n = n;
	k->v[r][c].valid = valid;
	if (r + 1 > k->nrows)
		k->nrows = r + 1;
}

static void put_int(kase *k, size_t r, size_t c, int64_t x, unsigned width, bool valid)
{
	uint8_t b[8];

	for (unsigned i = 0; i < 8; i++)
		b[i] = (uint8_t)((uint64_t)x >> (8 * i));
	put(k, r, c, b, width, valid);
}

static void put_str(kase *k, size_t r, size_t c, const char *s, bool valid)
{
	put(k, r, c, s, strlen(s), valid);
}

/* ---- the expected values, as read.mjs prints them ---------------------------------------- */

static void hex(FILE *f, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%02x", p[i]);
}

static void scalar(FILE *f, tf_datatype t, const uint8_t *p)
{
	unsigned w = tf_datatype_size(t);
	uint64_t u = tf_le_n(p, w);

	if (t == TF_DT_FLOAT32 || t == TF_DT_FLOAT64) {
		fprintf(f, "\"f:");
		hex(f, p, w);
		fprintf(f, "\"");
	} else if (t == TF_DT_BOOL) {
		fprintf(f, "\"%d\"", *p != 0);
	} else if (tf_datatype_is_signed(t) || tf_datatype_is_datetime(t)) {
		int64_t s = w == 8 ? (int64_t)u : (int64_t)(u << (64 - 8 * w)) >> (64 - 8 * w);
		fprintf(f, "\"%lld\"", (long long)s);
	} else {
		fprintf(f, "\"%llu\"", (unsigned long long)u);
	}
}

static void cell(FILE *f, const tf_arrow_col *c, const value *v)
{
	unsigned w = tf_datatype_size(c->type);

	if (!v->valid) {
		fprintf(f, "null");
	} else if (c->type == TF_DT_STRING_UTF16) {	/* ASCII and U+00E9 only here */
		fprintf(f, "\"x:");
		for (size_t i = 0; i + 1 < v->n; i += 2)
			fprintf(f, v->b[i] < 0x80 ? "%02x" : "c3%02x", v->b[i] < 0x80 ? v->b[i] : v->b[i] - 0x40);
		fprintf(f, "\"");
	} else if (c->type == TF_DT_STRING_UTF8 || c->type == TF_DT_STRING_ASCII || c->type == TF_DT_BLOB) {
		fprintf(f, "\"x:");
		hex(f, v->b, v->n);
		fprintf(f, "\"");
	} else if (c->cell_val_num == 1) {
		scalar(f, c->type, v->b);
	} else {
		fprintf(f, "[");
		for (size_t i = 0; i < v->n / w; i++) {
			fprintf(f, i ? "," : "");
			scalar(f, c->type, v->b + i * w);
		}
		fprintf(f, "]");
	}
}

static void write_case(const kase *k, const char *dir)
{
	char path[4096];
	tf_buf out = TF_BUF_INIT(SIZE_MAX);
	tf_arrow *a;
	tf_arrow_batch *b;
	tf_arrow_block blocks[64];
	size_t nb = 0, n;
	tf_error err;
	FILE *f;

	if (tf_arrow_new(k->cols, k->ncols, &k->lim, &a, &err) != TF_OK || tf_arrow_batch_new(a, &b, &err) != TF_OK ||
	    tf_arrow_file_head(a, &out, &err) != TF_OK)
		die(k->name, &err);
	for (size_t r = 0; r < k->nrows; r++) {
		tf_arrow_cell row[MAXC];
		const tf_arrow_block *got;
		for (size_t c = 0; c < k->ncols; c++)
			row[c] = (tf_arrow_cell){ k->v[r][c].b, k->v[r][c].n, k->v[r][c].valid };
		if (tf_arrow_batch_full(b) && tf_arrow_flush(b, &out, &err) != TF_OK)
			die(k->name, &err);
		if (tf_arrow_put_row(b, row, &out, &err) != TF_OK)
			die(k->name, &err);
		for (got = tf_arrow_take_blocks(b, &n); n--; got++)
			blocks[nb++] = *got;
	}
	const tf_arrow_block *got;
	if (tf_arrow_flush(b, &out, &err) != TF_OK)
		die(k->name, &err);
	for (got = tf_arrow_take_blocks(b, &n); n--; got++)
		blocks[nb++] = *got;
	if (nb != k->batches) {
		fprintf(stderr, "edges: %s: %zu batches, expected %u\n", k->name, nb, k->batches);
		exit(1);
	}
	if (tf_arrow_file_tail(a, blocks, nb, &out, &err) != TF_OK)
		die(k->name, &err);
	snprintf(path, sizeof(path), "%s/%s.arrow", dir, k->name);
	if (!(f = fopen(path, "wb")) || fwrite(out.p, 1, out.len, f) != out.len || fclose(f))
		die(path, NULL);
	snprintf(path, sizeof(path), "%s/%s.json", dir, k->name);
	if (!(f = fopen(path, "w")))
		die(path, NULL);
	fprintf(f, "{\"rows\": %zu, \"batches\": %u, \"names\": [", k->nrows, k->batches);
	for (size_t c = 0; c < k->ncols; c++)
		fprintf(f, "%s\"%s\"", c ? ", " : "", k->cols[c].name);
	fprintf(f, "], \"cols\": [");
	for (size_t c = 0; c < k->ncols; c++) {
		fprintf(f, "%s[", c ? ", " : "");
		for (size_t r = 0; r < k->nrows; r++) {
			fprintf(f, r ? ", " : "");
			cell(f, &k->cols[c], &k->v[r][c]);
		}
		fprintf(f, "]");
	}
	fprintf(f, "]}\n");
	if (fclose(f))
		die(path, NULL);
	printf("%s\n", k->name);
	tf_buf_free(&out);
	tf_arrow_batch_free(b);
	tf_arrow_free(a);
}

static const tf_arrow_limits DEFAULT = { TF_ARROW_CELLS, TF_ARROW_BYTES, TF_ARROW_VAR_MAX };

int main(int argc, char **argv)
{
	static kase k;
	const char *dir = argc > 1 ? argv[1] : ".";
	char cmd[4200];

	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", dir);
	if (system(cmd))
		die(dir, NULL);

	/* No cells; one cell. */
	memset(&k, 0, sizeof(k));
	k = (kase){ "empty", { { "a", TF_DT_INT32, 1, false }, { "s", TF_DT_STRING_UTF8, TF_CELL_VAR, true } }, 2, 0,
		    { { { { 0 }, 0, false } } }, DEFAULT, 0 };
	write_case(&k, dir);
	put_int(&k, 0, 0, 42, 4, true);
	put_str(&k, 0, 1, "x", true);
	k.name = "one", k.batches = 1;
	write_case(&k, dir);

	/* Batches cut at max_cells: 7 rows of 3 (3, 3, 1), 6 rows (3, 3). */
	memset(&k, 0, sizeof(k));
	k.name = "boundary", k.ncols = 2, k.lim = DEFAULT, k.lim.max_cells = 3, k.batches = 3;
	k.cols[0] = (tf_arrow_col){ "d", TF_DT_INT64, 1, false };
	k.cols[1] = (tf_arrow_col){ "s", TF_DT_STRING_ASCII, TF_CELL_VAR, false };
	for (int r = 0; r < 7; r++) {
		char s[16];
		snprintf(s, sizeof(s), "r%d", r);
		put_int(&k, (size_t)r, 0, -1000000000000LL + r, 8, true);
		put_str(&k, (size_t)r, 1, r == 3 ? "" : s, true);
	}
	write_case(&k, dir);
	k.name = "exact", k.nrows = 6, k.batches = 2;
	write_case(&k, dir);

	/* Nulls in every kind of column, over two batches (16 + 4 rows). */
	memset(&k, 0, sizeof(k));
	k.name = "nulls", k.lim = DEFAULT, k.lim.max_cells = 16, k.batches = 2;
	{
		tf_arrow_col cols[] = {
			{ "i8", TF_DT_INT8, 1, true }, { "u64", TF_DT_UINT64, 1, true },
			{ "f32", TF_DT_FLOAT32, 1, true }, { "f64", TF_DT_FLOAT64, 1, true },
			{ "b", TF_DT_BOOL, 1, true }, { "s", TF_DT_STRING_UTF8, TF_CELL_VAR, true },
			{ "blob", TF_DT_BLOB, TF_CELL_VAR, true }, { "ts", TF_DT_DATETIME_YEAR + 9, 1, true },
			{ "i32x3", TF_DT_INT32, 3, true }, { "i16v", TF_DT_INT16, TF_CELL_VAR, true },
			{ "w", TF_DT_STRING_UTF16, TF_CELL_VAR, true }, { "b2", TF_DT_BOOL, 2, false },
			{ "allnull", TF_DT_UINT16, 1, true }, { "nonull", TF_DT_INT32, 1, true },
		};
		k.ncols = sizeof(cols) / sizeof(cols[0]);
		memcpy(k.cols, cols, sizeof(cols));
	}
	for (int r = 0; r < 20; r++) {
		bool v = r % 3 != 0 && r != 8 && r != 15;	/* nulls either side of a bitmap byte */
		float f32 = (float)r / 3.0f;
		double f64 = -r * 1e300;
		int32_t x3[3] = { r, -r, r * 1000 };
		int16_t iv[4] = { (int16_t)r, (int16_t)-r, 7, -32768 };
		uint8_t b2[2] = { (uint8_t)(r & 1), (uint8_t)(r & 2) };
		uint8_t blob[5] = { 0, 0xff, (uint8_t)r, 0x80, 0xfe };
		uint8_t w[6] = { 'h', 0, 0xe9, 0, (uint8_t)('a' + r), 0 };
		char s[32];

		snprintf(s, sizeof(s), "%s%d", r % 2 ? "été " : "", r);
		put_int(&k, (size_t)r, 0, -r * 6, 1, v);
		put_int(&k, (size_t)r, 1, (int64_t)(UINT64_MAX - (uint64_t)r), 8, v);
		put(&k, (size_t)r, 2, &f32, 4, v);
		put(&k, (size_t)r, 3, &f64, 8, v);
		put_int(&k, (size_t)r, 4, r % 2, 1, v);
		put_str(&k, (size_t)r, 5, r == 4 ? "" : s, v);
		put(&k, (size_t)r, 6, blob, (size_t)(r % 5), v);
		put_int(&k, (size_t)r, 7, 1700000000123456789LL + r, 8, v);
		put(&k, (size_t)r, 8, x3, sizeof(x3), v);
		put(&k, (size_t)r, 9, iv, (size_t)(r % 5) * 2, v);
		put(&k, (size_t)r, 10, w, (size_t)(r % 4) * 2, v);
		put(&k, (size_t)r, 11, b2, 2, true);
		put_int(&k, (size_t)r, 12, 0, 2, false);
		put_int(&k, (size_t)r, 13, r, 4, true);
	}
	write_case(&k, dir);

	/* The offsets' limit: 10 bytes of strings a batch (4 + 4 + 2, then
	 * 1 + 5, then 5 + 3), a list of values limited alike. */
	memset(&k, 0, sizeof(k));
	k.name = "varlimit", k.ncols = 2, k.lim = DEFAULT, k.lim.max_var = 10, k.batches = 3;
	k.cols[0] = (tf_arrow_col){ "s", TF_DT_STRING_UTF8, TF_CELL_VAR, true };
	k.cols[1] = (tf_arrow_col){ "v", TF_DT_UINT8, TF_CELL_VAR, false };
	{
		const char *s[] = { "aaaa", "bbbb", "cc", "d", "eeeee", "fffff", "ggg" };
		for (size_t r = 0; r < 7; r++) {
			put_str(&k, r, 0, s[r], true);
			put(&k, r, 1, "\1\2", 2, true);
		}
	}
	write_case(&k, dir);

	/* Batches cut by their bytes: 64 bytes of int64 values (8 rows). */
	memset(&k, 0, sizeof(k));
	k.name = "bytes", k.ncols = 1, k.lim = DEFAULT, k.lim.max_bytes = 64, k.batches = 3;
	k.cols[0] = (tf_arrow_col){ "x", TF_DT_INT64, 1, false };
	for (int r = 0; r < 20; r++)
		put_int(&k, (size_t)r, 0, (int64_t)r << 40, 8, true);
	write_case(&k, dir);
	return 0;
}
