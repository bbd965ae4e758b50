/*
 * test_arrow.c - the Arrow IPC file writer (tf_arrow.h), read back here by
 * a few lines that follow the format's rules (flatbuffers: a root offset,
 * tables through their vtables; the IPC framing): the magic at both ends,
 * the footer's length, every block where the footer says (continuation
 * marker, metadata length, 8-byte alignment, body right after, the next
 * block right after that, the end-of-stream marker after the last), each
 * Message's version, kind, body length and row count, each column's null
 * count; batches cut at their row bound; a file of no batch; a value past
 * the offsets' limit refused with the batch unchanged; a cell of the wrong
 * size refused, the batch unchanged and usable; rows given as spans (a
 * sparse array's runs of cells) written to the byte as row by row.  The
 * values themselves are read by apache-arrow and polars (tests/arrow.sh,
 * tests/mount/arrow.sh).
 */
#include "tf_test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "views/tf_arrow.h"

/* ---- reading back ------------------------------------------------------------------------------ */

static uint32_t u32(const uint8_t *p) { return tf_le32(p); }
static uint64_t u64(const uint8_t *p) { return tf_le64(p); }

/* Where field id of the table at t lies (0: absent). */
static size_t field(const uint8_t *fb, size_t t, unsigned id)
{
	size_t vt = t - (size_t)(int32_t)u32(fb + t);
	uint16_t vsize = tf_le16(fb + vt);

	if (4 + 2 * id >= vsize)
		return 0;
	uint16_t off = tf_le16(fb + vt + 4 + 2 * id);
	return off ? t + off : 0;
}

/* The object an offset field points to. */
static size_t deref(const uint8_t *fb, size_t at)
{
	return at + u32(fb + at);
}

typedef struct built {
	tf_buf file;
	tf_arrow_block blocks[2048];
	size_t nblocks;
} built;

static void take(tf_arrow_batch *b, built *o)
{
	size_t n;
	const tf_arrow_block *got = tf_arrow_take_blocks(b, &n);

	ck_assert_uint_le(o->nblocks + n, sizeof(o->blocks) / sizeof(o->blocks[0]));
	for (size_t i = 0; i < n; i++)
		o->blocks[o->nblocks++] = got[i];
}

/* Check the file's framing and return its blocks' row counts. */
static void check_file(const built *o, uint64_t *rows, uint64_t *nulls, size_t ncols)
{
	const uint8_t *p = o->file.p;
	size_t len = o->file.len, foot, root, rb, at;
	uint32_t flen;

	ck_assert_uint_ge(len, 8 + 10);
	ck_assert(!memcmp(p, "ARROW1\0\0", 8));
	ck_assert(!memcmp(p + len - 6, "ARROW1", 6));
	flen = u32(p + len - 10);
	ck_assert_uint_le(flen, len - 18);
	foot = len - 10 - flen;
	ck_assert_uint_eq(foot % 8, 0);
	ck_assert(u32(p + foot - 8) == 0xFFFFFFFFu && u32(p + foot - 4) == 0);	/* end of stream */
	const uint8_t *fb = p + foot;
	root = deref(fb, 0);
	ck_assert_uint_eq(tf_le16(fb + field(fb, root, 0)), 4);	/* V5 */
	ck_assert_uint_ne(field(fb, root, 1), 0);			/* the schema */
	at = deref(fb, field(fb, root, 3));				/* recordBatches */
	ck_assert_uint_eq(u32(fb + at), o->nblocks);
	ck_assert_uint_eq((foot + at + 4) % 8, 0);
	/* The schema message: right after the magic. */
	ck_assert_uint_eq(u32(p + 8), 0xFFFFFFFFu);
	uint64_t next = 16 + u32(p + 12);
	for (size_t i = 0; i < o->nblocks; i++) {
		const uint8_t *blk = fb + at + 4 + 24 * i;
		uint64_t off = u64(blk), body = u64(blk + 16);
		uint32_t meta = u32(blk + 8);

		ck_assert_uint_eq(off, next);
		ck_assert_uint_eq(off % 8, 0);
		ck_assert_uint_eq(meta % 8, 0);
		ck_assert_uint_eq(u32(p + off), 0xFFFFFFFFu);
		ck_assert_uint_eq(u32(p + off + 4) + 8, meta);
		const uint8_t *m = p + off + 8;
		size_t msg = deref(m, 0);
		ck_assert_uint_eq(tf_le16(m + field(m, msg, 0)), 4);
		ck_assert_uint_eq(m[field(m, msg, 1)], 3);		/* RecordBatch */
		ck_assert_uint_eq(u64(m + field(m, msg, 3)), body);
		rb = deref(m, field(m, msg, 2));
		rows[i] = u64(m + field(m, rb, 0));
		size_t nodes = deref(m, field(m, rb, 1));
		ck_assert_uint_ge(u32(m + nodes), ncols);
		for (size_t c = 0; nulls && c < ncols; c++)	/* flat columns: a node each */
			nulls[i * ncols + c] = u64(m + nodes + 4 + 16 * c + 8);
		next = off + meta + body;
	}
	ck_assert_uint_eq(next, foot - 8);
}

static void build(built *o, const tf_arrow_col *cols, size_t ncols, const tf_arrow_limits *lim, size_t nrows,
		  void (*row)(size_t r, tf_arrow_cell *cells))
{
	tf_arrow *a;
	tf_arrow_batch *b;
	tf_arrow_cell cells[8];

	tf_buf_init(&o->file, SIZE_MAX);
	o->nblocks = 0;
	ck_assert_int_eq(tf_arrow_new(cols, ncols, lim, &a, NULL), TF_OK);
	ck_assert_int_eq(tf_arrow_batch_new(a, &b, NULL), TF_OK);
	ck_assert_int_eq(tf_arrow_file_head(a, &o->file, NULL), TF_OK);
	for (size_t r = 0; r < nrows; r++) {
		if (tf_arrow_batch_full(b))
			ck_assert_int_eq(tf_arrow_flush(b, &o->file, NULL), TF_OK);
		row(r, cells);
		ck_assert_int_eq(tf_arrow_put_row(b, cells, &o->file, NULL), TF_OK);
		take(b, o);
	}
	ck_assert_int_eq(tf_arrow_flush(b, &o->file, NULL), TF_OK);
	take(b, o);
	ck_assert_int_eq(tf_arrow_file_tail(a, o->blocks, o->nblocks, &o->file, NULL), TF_OK);
	tf_arrow_batch_free(b);
	tf_arrow_free(a);
}

/* ---- cases ---------------------------------------------------------------------------------------- */

static uint8_t cellbuf[64][8];

static void row_int_str(size_t r, tf_arrow_cell *c)
{
	static const char *s[] = { "a", "", "ccc", "dd" };

	tf_put_le32(cellbuf[r % 64], (uint32_t)r);
	c[0] = (tf_arrow_cell){ cellbuf[r % 64], 4, true };
	c[1] = (tf_arrow_cell){ (const uint8_t *)s[r % 4], strlen(s[r % 4]), r % 3 != 0 };
}

static const tf_arrow_col INT_STR[] = { { "a", TF_DT_INT32, 1, false }, { "s", TF_DT_STRING_UTF8, TF_CELL_VAR, true } };

START_TEST(test_batches_at_row_bound)
{
	tf_arrow_limits lim = { 3, TF_ARROW_BYTES, TF_ARROW_VAR_MAX };
	uint64_t rows[8], nulls[16];
	built o;

	build(&o, INT_STR, 2, &lim, 7, row_int_str);
	ck_assert_uint_eq(o.nblocks, 3);
	check_file(&o, rows, nulls, 2);
	ck_assert(rows[0] == 3 && rows[1] == 3 && rows[2] == 1);
	/* rows 0, 3, 6 are null in s: one in each batch */
	ck_assert(nulls[0] == 0 && nulls[1] == 1 && nulls[3] == 1 && nulls[5] == 1);
	tf_buf_free(&o.file);
}
END_TEST

START_TEST(test_no_batch)
{
	uint64_t rows[1];
	built o;

	build(&o, INT_STR, 2, NULL, 0, row_int_str);
	ck_assert_uint_eq(o.nblocks, 0);
	check_file(&o, rows, NULL, 2);
	tf_buf_free(&o.file);
}
END_TEST

START_TEST(test_one_cell)
{
	uint64_t rows[1], nulls[2];
	built o;

	build(&o, INT_STR, 2, NULL, 1, row_int_str);
	ck_assert_uint_eq(o.nblocks, 1);
	check_file(&o, rows, nulls, 2);
	ck_assert_uint_eq(rows[0], 1);
	ck_assert_uint_eq(nulls[1], 1);
	tf_buf_free(&o.file);
}
END_TEST

/* Strings of 4, 4, 2 bytes fill a batch of max_var 10; 1 more starts the
 * next; 11 bytes alone are refused, the batch as it was. */
START_TEST(test_offsets_limit)
{
	tf_arrow_limits lim = { 100, TF_ARROW_BYTES, 10 };
	tf_arrow_col col = { "s", TF_DT_STRING_ASCII, TF_CELL_VAR, false };
	tf_buf out = TF_BUF_INIT(SIZE_MAX);
	tf_arrow *a;
	tf_arrow_batch *b;
	tf_error err;
	size_t n;

	ck_assert_int_eq(tf_arrow_new(&col, 1, &lim, &a, NULL), TF_OK);
	ck_assert_int_eq(tf_arrow_batch_new(a, &b, NULL), TF_OK);
	ck_assert(!tf_arrow_columnar(a));
	const char *s[] = { "aaaa", "bbbb", "cc" };
	for (int i = 0; i < 3; i++) {
		tf_arrow_cell c = { (const uint8_t *)s[i], strlen(s[i]), true };
		ck_assert_int_eq(tf_arrow_put_row(b, &c, &out, NULL), TF_OK);
	}
	ck_assert_uint_eq(out.len, 0);
	tf_arrow_cell one = { (const uint8_t *)"d", 1, true };
	ck_assert_int_eq(tf_arrow_put_row(b, &one, &out, NULL), TF_OK);
	ck_assert_uint_gt(out.len, 0);		/* the three went out first */
	tf_arrow_take_blocks(b, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(tf_arrow_batch_rows(b), 1);
	tf_arrow_cell big = { (const uint8_t *)"eeeeeeeeeee", 11, true };
	size_t before = out.len;
	ck_assert_int_eq(tf_arrow_put_row(b, &big, &out, &err), TF_E_UNSUPPORTED);
	ck_assert_uint_eq(tf_arrow_batch_rows(b), 0);	/* flushed trying; nothing lost or half-put */
	ck_assert_uint_gt(out.len, before);
	tf_arrow_batch_free(b);
	tf_arrow_free(a);
	tf_buf_free(&out);
}
END_TEST

START_TEST(test_wrong_cell_size)
{
	tf_arrow_col cols[] = { { "s", TF_DT_STRING_UTF8, TF_CELL_VAR, true }, { "x", TF_DT_INT32, 3, false } };
	tf_buf out = TF_BUF_INIT(SIZE_MAX);
	uint8_t v[12] = { 1 };
	tf_arrow *a;
	tf_arrow_batch *b;
	tf_error err;

	ck_assert_int_eq(tf_arrow_new(cols, 2, NULL, &a, NULL), TF_OK);
	ck_assert_int_eq(tf_arrow_batch_new(a, &b, NULL), TF_OK);
	tf_arrow_cell bad[2] = { { (const uint8_t *)"abc", 3, true }, { v, 8, true } };
	ck_assert_int_eq(tf_arrow_put_row(b, bad, &out, &err), TF_E_CORRUPT);
	ck_assert_uint_eq(tf_arrow_batch_rows(b), 0);
	tf_arrow_cell good[2] = { { (const uint8_t *)"abc", 3, true }, { v, 12, true } };
	ck_assert_int_eq(tf_arrow_put_row(b, good, &out, NULL), TF_OK);
	ck_assert_int_eq(tf_arrow_flush(b, &out, NULL), TF_OK);
	/* body: s validity (8), offsets (8), data (8); x validity (0), child values (16) */
	size_t n;
	const tf_arrow_block *blk = tf_arrow_take_blocks(b, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(blk->body, 8 + 8 + 8 + 16);
	/* a var-sized column: not columnar */
	ck_assert_int_eq(tf_arrow_put_rows(b, 1, NULL, NULL, &err), TF_E_INVAL);
	tf_arrow_batch_free(b);
	tf_arrow_free(a);
	tf_buf_free(&out);
}
END_TEST

START_TEST(test_columnar_rows)
{
	tf_arrow_col cols[] = { { "d", TF_DT_INT64, 1, false }, { "v", TF_DT_FLOAT32, 1, true },
				{ "b", TF_DT_BOOL, 1, false } };
	tf_arrow_limits lim = { 4, TF_ARROW_BYTES, TF_ARROW_VAR_MAX };
	uint8_t d[4 * 8] = { 0 }, f[4 * 4] = { 0 }, bo[4] = { 1, 0, 1, 1 }, valid[4] = { 1, 0, 0, 1 };
	const uint8_t *data[] = { d, f, bo }, *val[] = { NULL, valid, NULL };
	uint64_t rows[4], nulls[12];
	tf_arrow *a;
	tf_arrow_batch *b;
	built o;

	tf_buf_init(&o.file, SIZE_MAX);
	o.nblocks = 0;
	ck_assert_int_eq(tf_arrow_new(cols, 3, &lim, &a, NULL), TF_OK);
	ck_assert(tf_arrow_columnar(a));
	ck_assert_int_eq(tf_arrow_batch_new(a, &b, NULL), TF_OK);
	ck_assert_int_eq(tf_arrow_file_head(a, &o.file, NULL), TF_OK);
	ck_assert_int_eq(tf_arrow_put_rows(b, 4, data, val, NULL), TF_OK);
	ck_assert(tf_arrow_batch_full(b));
	ck_assert_int_eq(tf_arrow_flush(b, &o.file, NULL), TF_OK);
	take(b, &o);
	ck_assert_int_eq(tf_arrow_put_rows(b, 2, data, val, NULL), TF_OK);
	ck_assert_int_eq(tf_arrow_flush(b, &o.file, NULL), TF_OK);
	take(b, &o);
	ck_assert_int_eq(tf_arrow_file_tail(a, o.blocks, o.nblocks, &o.file, NULL), TF_OK);
	check_file(&o, rows, nulls, 3);
	ck_assert(rows[0] == 4 && rows[1] == 2);
	ck_assert(nulls[1] == 2 && nulls[4] == 1 && nulls[0] == 0 && nulls[2] == 0);
	tf_arrow_batch_free(b);
	tf_arrow_free(a);
	tf_buf_free(&o.file);
}
END_TEST

/* ---- spans against rows ------------------------------------------------------------------------ */

#define SPAN_ROWS 1500

/* Columns of every kind spans take: a number, a nullable number, a
 * FixedSizeList, nullable and plain strings; a null's bytes are there
 * (as a window holds them) and must not be written. */
static const tf_arrow_col SPAN_COLS[] = { { "d", TF_DT_INT64, 1, false }, { "v", TF_DT_INT32, 1, true },
					  { "p", TF_DT_FLOAT32, 2, false }, { "s", TF_DT_STRING_UTF8, TF_CELL_VAR, true },
					  { "t", TF_DT_STRING_ASCII, TF_CELL_VAR, false } };

typedef struct span_data {
	uint8_t d[SPAN_ROWS * 8], v[SPAN_ROWS * 4], p[SPAN_ROWS * 8];
	uint8_t vvalid[SPAN_ROWS], svalid[SPAN_ROWS];
	uint8_t s[SPAN_ROWS * 40], t[SPAN_ROWS * 40];
	uint64_t sst[SPAN_ROWS + 1], tst[SPAN_ROWS + 1];
} span_data;

static void span_fill(span_data *x, size_t big_at, size_t big)
{
	for (size_t r = 0; r < SPAN_ROWS; r++) {
		size_t ns = r == big_at ? big : (r * 13) % 23, nt = (r % 3) * 5;
		tf_put_le64(x->d + 8 * r, r * 7);
		tf_put_le32(x->v + 4 * r, (uint32_t)r);
		tf_put_le32(x->p + 8 * r, (uint32_t)r), tf_put_le32(x->p + 8 * r + 4, (uint32_t)(r + 1));
		x->vvalid[r] = r % 5 != 2;
		x->svalid[r] = r % 4 != 1;
		x->sst[r + 1] = x->sst[r] + ns;
		x->tst[r + 1] = x->tst[r] + nt;
		memset(x->s + x->sst[r], 'a' + r % 26, ns);
		memset(x->t + x->tst[r], 'A' + r % 26, nt);
	}
}

static void span_row(const span_data *x, size_t r, tf_arrow_cell *c)
{
	c[0] = (tf_arrow_cell){ x->d + 8 * r, 8, true };
	c[1] = (tf_arrow_cell){ x->v + 4 * r, 4, x->vvalid[r] };
	c[2] = (tf_arrow_cell){ x->p + 8 * r, 8, true };
	c[3] = (tf_arrow_cell){ x->s + x->sst[r], x->sst[r + 1] - x->sst[r], x->svalid[r] };
	c[4] = (tf_arrow_cell){ x->t + x->tst[r], x->tst[r + 1] - x->tst[r], true };
}

/* The file of the rows, given row by row (spans false) or as spans of
 * pseudo-random lengths from 1 to 64 (seed 4: 2), each cut where the batch takes no
 * more; a batch is flushed when full, as a view's producer does.  The
 * status of the first failure (the file then holds what was written). */
static tf_status span_file(const span_data *x, const tf_arrow_limits *lim, bool spans, uint32_t seed, built *o)
{
	tf_arrow *a;
	tf_arrow_batch *b;
	tf_status rc = TF_OK;
	/* seed 4: spans of one or two rows, as fragments interleaved cell by
	 * cell give (one row takes a path of its own) */
	uint32_t most = seed == 4 ? 2 : 64;

	tf_buf_init(&o->file, SIZE_MAX);
	o->nblocks = 0;
	ck_assert_int_eq(tf_arrow_new(SPAN_COLS, 5, lim, &a, NULL), TF_OK);
	ck_assert(tf_arrow_spannable(a));
	ck_assert_int_eq(tf_arrow_batch_new(a, &b, NULL), TF_OK);
	ck_assert_int_eq(tf_arrow_file_head(a, &o->file, NULL), TF_OK);
	for (size_t r = 0; r < SPAN_ROWS && rc == TF_OK;) {
		if (tf_arrow_batch_full(b))
			ck_assert_int_eq(tf_arrow_flush(b, &o->file, NULL), TF_OK);
		if (!spans) {
			tf_arrow_cell cells[5];
			span_row(x, r++, cells);
			rc = tf_arrow_put_row(b, cells, &o->file, NULL);
		} else {
			size_t m = 1 + (seed = seed * 1103515245u + 12345u) / 65536 % most, taken;
			tf_arrow_span sp[5] = { { x->d + 8 * r, NULL, NULL, 8 }, { x->v + 4 * r, NULL, x->vvalid + r, 4 },
						{ x->p + 8 * r, NULL, NULL, 8 }, { x->s, x->sst + r, x->svalid + r, 0 },
						{ x->t, x->tst + r, NULL, 0 } };
			m = m < SPAN_ROWS - r ? m : SPAN_ROWS - r;
			rc = tf_arrow_put_span(b, m, sp, &o->file, &taken, NULL);
			ck_assert(rc != TF_OK || taken >= 1);	/* the batch was not full */
			ck_assert_uint_le(taken, m);
			r += taken;
		}
		take(b, o);
	}
	if (rc == TF_OK) {
		ck_assert_int_eq(tf_arrow_flush(b, &o->file, NULL), TF_OK);
		take(b, o);
		ck_assert_int_eq(tf_arrow_file_tail(a, o->blocks, o->nblocks, &o->file, NULL), TF_OK);
	}
	tf_arrow_batch_free(b);
	tf_arrow_free(a);
	return rc;
}

/* A sparse array's runs of cells go into cells.arrow as spans: the same
 * file, to the byte, as row by row, whichever bound closes each batch
 * (rows, bytes, a string column's offsets), wherever the spans are cut;
 * and a value past the offsets' limit fails both ways after the same rows. */
START_TEST(test_spans_as_rows)
{
	static const tf_arrow_limits lims[] = { { 50, 600, 100 }, { 7, 1 << 20, 40 }, { 65536, 300, 1 << 20 },
						{ 1, 64, 64 }, { TF_ARROW_CELLS, TF_ARROW_BYTES, TF_ARROW_VAR_MAX } };
	span_data *x = calloc(1, sizeof(*x));
	built rows, spans;
	static uint64_t nrows[2048];

	ck_assert_ptr_nonnull(x);
	span_fill(x, SIZE_MAX, 0);
	for (size_t l = 0; l < sizeof(lims) / sizeof(lims[0]); l++)
		for (uint32_t seed = 1; seed <= 4; seed++) {
			ck_assert_int_eq(span_file(x, &lims[l], false, seed, &rows), TF_OK);
			ck_assert_int_eq(span_file(x, &lims[l], true, seed, &spans), TF_OK);
			ck_assert_msg(rows.file.len == spans.file.len && !memcmp(rows.file.p, spans.file.p, rows.file.len),
				      "limits %zu, seed %u: %zu bytes row by row, %zu as spans", l, seed, rows.file.len,
				      spans.file.len);
			ck_assert_uint_eq(rows.nblocks, spans.nblocks);
			check_file(&spans, nrows, NULL, 5);
			tf_buf_free(&rows.file), tf_buf_free(&spans.file);
		}
	/* a string of 41 bytes past a limit of 40, in a valid cell */
	memset(x, 0, sizeof(*x));
	span_fill(x, 12, 41);
	ck_assert_int_eq(span_file(x, &lims[1], false, 1, &rows), TF_E_UNSUPPORTED);
	ck_assert_int_eq(span_file(x, &lims[1], true, 1, &spans), TF_E_UNSUPPORTED);
	ck_assert(rows.file.len == spans.file.len && !memcmp(rows.file.p, spans.file.p, rows.file.len));
	ck_assert_uint_eq(rows.nblocks, spans.nblocks);
	ck_assert_uint_eq(rows.nblocks, 3);	/* rows 0-6, 7-8 (40 bytes of s), 9-11 */
	tf_buf_free(&rows.file), tf_buf_free(&spans.file);
	free(x);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("arrow");
	TCase *t = tcase_create("writer");

	tcase_add_test(t, test_batches_at_row_bound);
	tcase_add_test(t, test_no_batch);
	tcase_add_test(t, test_one_cell);
	tcase_add_test(t, test_offsets_limit);
	tcase_add_test(t, test_wrong_cell_size);
	tcase_add_test(t, test_columnar_rows);
	tcase_add_test(t, test_spans_as_rows);
	suite_add_tcase(s, t);
	return s;
}

TF_TEST_MAIN(suite)
