/*
 * tf_arrow_batch.c - record batches of an Arrow IPC file: columns of cells
 * put a row, a run or a span at a time, and flushed as one message.
 */
#include "config.h"

#include "views/tf_arrow_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- record batches ------------------------------------------------------------------------ */

typedef struct bcol {
	tf_buf valid;		/* bitmap (nullable) */
	uint64_t nulls;
	tf_buf offs;		/* int32 offsets: bytes (K_BYTES) or values (list) */
	tf_buf vals;		/* values, bytes; K_BOOL: a bitmap */
	uint64_t nvals;		/* values (K_BOOL's bits) */
} bcol;

/* Where a row started, to take it back. */
typedef struct bmark {
	size_t valid, offs, vals;
	uint64_t nulls, nvals;
} bmark;

struct tf_arrow_batch {
	const tf_arrow *a;
	bcol *c;
	bmark *mark;
	uint64_t *vlen;		/* per column, for tf_arrow_put_span */
	uint32_t rows;
	tf_buf tmp;		/* UTF-16/32 converted */
	tf_arrow_block *blocks;	/* written since the last take */
	size_t nblocks, bcap;
};

static void batch_reset(tf_arrow_batch *b)
{
	for (size_t i = 0; i < b->a->ncols; i++) {
		bcol *c = &b->c[i];
		c->valid.len = c->offs.len = c->vals.len = 0;
		c->nulls = c->nvals = 0;
	}
	b->rows = 0;
}

void tf_arrow_batch_free(tf_arrow_batch *b)
{
	for (size_t i = 0; b && b->c && i < b->a->ncols; i++) {
		tf_buf_free(&b->c[i].valid);
		tf_buf_free(&b->c[i].offs);
		tf_buf_free(&b->c[i].vals);
	}
	if (b) {
		free(b->c);
		free(b->mark);
		free(b->vlen);
		free(b->blocks);
		tf_buf_free(&b->tmp);
	}
	free(b);
}

tf_status tf_arrow_batch_new(const tf_arrow *a, tf_arrow_batch **out, tf_error *err)
{
	tf_arrow_batch *b = calloc(1, sizeof(*b));

	if (!b || !(b->c = calloc(a->ncols + 1, sizeof(*b->c))) || !(b->mark = calloc(a->ncols + 1, sizeof(*b->mark))) ||
	    !(b->vlen = calloc(a->ncols + 1, sizeof(*b->vlen)))) {
		if (b)
			free(b->c), free(b->mark);
		free(b);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	b->a = a;
	for (size_t i = 0; i < a->ncols; i++) {
		tf_buf_init(&b->c[i].valid, SIZE_MAX);
		tf_buf_init(&b->c[i].offs, SIZE_MAX);
		tf_buf_init(&b->c[i].vals, SIZE_MAX);
	}
	tf_buf_init(&b->tmp, SIZE_MAX);
	*out = b;
	return TF_OK;
}

static void set_bit(uint8_t *bits, uint64_t k, bool on)
{
	if (on)
		bits[k / 8] |= (uint8_t)(1u << (k % 8));
	else
		bits[k / 8] &= (uint8_t)~(1u << (k % 8));
}

/* Room for bit k of a bitmap. */
static tf_status bit_room(tf_buf *bits, uint64_t k, tf_error *err)
{
	uint8_t *at;
	tf_status rc = TF_OK;

	while (rc == TF_OK && bits->len <= k / 8)
		if ((rc = tf_buf_grow(bits, 1, &at, err)) == TF_OK)
			*at = 0, bits->len++;
	return rc;
}

static tf_status put_offset(bcol *c, uint64_t v, tf_error *err)
{
	uint8_t *at;
	tf_status rc = tf_buf_grow(&c->offs, 4, &at, err);

	if (rc == TF_OK) {
		tf_put_le32(at, (uint32_t)v);
		c->offs.len += 4;
	}
	return rc;
}

/* Values of a cell: n_values values of width bytes at p (NULL: zeros). */
static tf_status put_values(const acol *ac, bcol *c, const uint8_t *p, uint64_t nv, tf_error *err)
{
	uint8_t *at;
	tf_status rc = TF_OK;

	if (ac->kind == K_BOOL) {
		if (nv && (rc = bit_room(&c->vals, c->nvals + nv - 1, err)) != TF_OK)
			return rc;
		for (uint64_t i = 0; i < nv; i++)
			set_bit(c->vals.p, c->nvals + i, p && p[i]);
	} else if ((rc = tf_buf_grow(&c->vals, (size_t)nv * ac->width, &at, err)) == TF_OK) {
		if (p)
			memcpy(at, p, (size_t)nv * ac->width);
		else
			memset(at, 0, (size_t)nv * ac->width);
		c->vals.len += (size_t)nv * ac->width;
	}
	c->nvals += nv;
	return rc;
}

/* Not a tf_status (those are 0 or negative): a row that does not fit. */
#define OVER 1

/* One cell; OVER: the column's var bytes would pass max_var. */
static tf_status put_cell(tf_arrow_batch *b, size_t i, const tf_arrow_cell *cell, tf_error *err)
{
	const acol *ac = &b->a->cols[i];
	bcol *c = &b->c[i];
	const uint8_t *p = cell->valid ? cell->p : NULL;
	size_t n = cell->valid ? cell->n : 0;
	tf_status rc = TF_OK;

	if (ac->nullable) {
		if ((rc = bit_room(&c->valid, b->rows, err)) != TF_OK)
			return rc;
		set_bit(c->valid.p, b->rows, cell->valid);
		c->nulls += !cell->valid;
	}
	if (ac->kind == K_BYTES || ac->list) {
		uint64_t limit = b->a->lim.max_var;

		if (!c->offs.len && (rc = put_offset(c, 0, err)) != TF_OK)
			return rc;
		if (ac->kind == K_BYTES) {
			if (ac->wide && n) {
				b->tmp.len = 0;
				if ((rc = tf_utf8_append_wide(&b->tmp, p, n, ac->wide, err)) != TF_OK)
					return rc;
				p = b->tmp.p, n = b->tmp.len;
			}
			if (n > limit || c->vals.len > limit - n)
				return OVER;
			if (n && (rc = tf_buf_append(&c->vals, p, n, err)) != TF_OK)
				return rc;
			return put_offset(c, c->vals.len, err);
		}
		if (n % ac->width)
			return tf_err(err, TF_E_CORRUPT, "%s: a cell of %zu bytes, not whole values of %u", ac->name,
				      n, ac->width);
		if (n / ac->width > limit || c->nvals > limit - n / ac->width ||
		    (size_t)c->vals.len > limit - n)
			return OVER;
		if ((rc = put_values(ac, c, p, n / ac->width, err)) != TF_OK)
			return rc;
		return put_offset(c, c->nvals, err);
	}
	uint64_t nv = ac->fixed ? ac->fixed : 1;
	if (ac->kind == K_FIXED && nv == 1 && cell->valid && cell->n == ac->width &&
	    c->vals.cap - c->vals.len >= ac->width) {	/* the common cell: one number */
		memcpy(c->vals.p + c->vals.len, p, ac->width);
		c->vals.len += ac->width;
		c->nvals++;
		return TF_OK;
	}
	if (cell->valid && cell->n != nv * ac->width)
		return tf_err(err, TF_E_CORRUPT, "%s: a cell of %zu bytes, not %llu", ac->name, cell->n,
			      (unsigned long long)(nv * ac->width));
	return put_values(ac, c, p, nv, err);
}

static void mark_row(tf_arrow_batch *b)
{
	for (size_t i = 0; i < b->a->ncols; i++) {
		const bcol *c = &b->c[i];
		b->mark[i] = (bmark){ c->valid.len, c->offs.len, c->vals.len, c->nulls, c->nvals };
	}
}

/* Take a row back; the bits it set go too (a bitmap's bits past the
 * batch's rows were left set and written out with the batch). */
static void undo_row(tf_arrow_batch *b)
{
	for (size_t i = 0; i < b->a->ncols; i++) {
		bcol *c = &b->c[i];
		const bmark *m = &b->mark[i];
		if (b->a->cols[i].nullable && c->valid.len > b->rows / 8)
			set_bit(c->valid.p, b->rows, false);
		for (uint64_t k = m->nvals; b->a->cols[i].kind == K_BOOL && k < c->nvals && k / 8 < c->vals.len; k++)
			set_bit(c->vals.p, k, false);
		c->valid.len = m->valid, c->offs.len = m->offs, c->vals.len = m->vals;
		c->nulls = m->nulls, c->nvals = m->nvals;
	}
}

static tf_status put_row_once(tf_arrow_batch *b, const tf_arrow_cell *row, tf_error *err)
{
	tf_status rc = TF_OK;

	mark_row(b);
	for (size_t i = 0; i < b->a->ncols && rc == TF_OK; i++)
		rc = put_cell(b, i, &row[i], err);
	if (rc != TF_OK)
		undo_row(b);
	else
		b->rows++;
	return rc;
}

tf_status tf_arrow_put_row(tf_arrow_batch *b, const tf_arrow_cell *row, tf_buf *out, tf_error *err)
{
	tf_status rc = put_row_once(b, row, err);

	if (rc == OVER && b->rows) {	/* the next batch takes it */
		if ((rc = tf_arrow_flush(b, out, err)) == TF_OK)
			rc = put_row_once(b, row, err);
	}
	if (rc == OVER)
		rc = tf_err(err, TF_E_UNSUPPORTED, "a value of more than %llu bytes: more than an Arrow batch "
			    "holds here", (unsigned long long)b->a->lim.max_var);
	return rc;
}

void tf_arrow_batch_release(tf_arrow_batch *b)
{
	batch_reset(b);
	for (size_t i = 0; i < b->a->ncols; i++) {
		tf_buf_free(&b->c[i].valid);
		tf_buf_free(&b->c[i].offs);
		tf_buf_free(&b->c[i].vals);
	}
	tf_buf_free(&b->tmp);
}

size_t tf_arrow_batch_held(const tf_arrow_batch *b)
{
	size_t n = b->tmp.cap;

	for (size_t i = 0; i < b->a->ncols; i++)
		n += b->c[i].valid.cap + b->c[i].offs.cap + b->c[i].vals.cap;
	return n;
}

bool tf_arrow_columnar(const tf_arrow *a)
{
	return !a->var;
}

tf_status tf_arrow_put_rows(tf_arrow_batch *b, size_t n, const uint8_t *const *data, const uint8_t *const *valid,
			    tf_error *err)
{
	tf_status rc = TF_OK;

	if (b->a->var)
		return tf_err(err, TF_E_INVAL, "var-sized columns go row by row");
	if (!n)
		return TF_OK;
	if (n > UINT32_MAX - b->rows)
		return tf_err(err, TF_E_INVAL, "%zu rows more in a batch", n);
	for (size_t i = 0; i < b->a->ncols && rc == TF_OK; i++) {
		const acol *ac = &b->a->cols[i];
		bcol *c = &b->c[i];
		uint64_t nv = ac->fixed ? ac->fixed : 1, cs = nv * ac->width;
		uint8_t *at;

		if (ac->nullable && (rc = bit_room(&c->valid, b->rows + n - 1, err)) == TF_OK)
			for (size_t k = 0; k < n; k++) {
				bool v = !valid[i] || valid[i][k];
				set_bit(c->valid.p, b->rows + k, v);
				c->nulls += !v;
			}
		if (rc != TF_OK)
			break;
		if (ac->kind == K_BOOL) {
			rc = put_values(ac, c, data[i], n * nv, err);
		} else if ((rc = tf_buf_grow(&c->vals, (size_t)(n * cs), &at, err)) == TF_OK) {
			memcpy(at, data[i], (size_t)(n * cs));
			for (size_t k = 0; ac->nullable && valid[i] && k < n; k++)
				if (!valid[i][k])
					memset(at + k * cs, 0, (size_t)cs);	/* nulls: zeros, as row by row */
			c->vals.len += (size_t)(n * cs);
			c->nvals += n * nv;
		}
	}
	if (rc == TF_OK)
		b->rows += (uint32_t)n;
	else
		batch_reset(b);
	return rc;
}

static size_t batch_bytes(const tf_arrow_batch *b)
{
	size_t n = 0;

	for (size_t i = 0; i < b->a->ncols; i++)
		n += b->c[i].valid.len + b->c[i].offs.len + b->c[i].vals.len;
	return n;
}

bool tf_arrow_spannable(const tf_arrow *a)
{
	return a->spans;
}

/* Bytes span row e adds to the batch's buffers as its row k (from 0), as
 * put_cell would add them; *over if a var column would pass max_var (vlen:
 * each column's var bytes so far, updated). */
static size_t span_row_bytes(const tf_arrow_batch *b, const tf_arrow_span *cols, size_t e, uint64_t k,
			     uint64_t *vlen, bool *over)
{
	const tf_arrow *a = b->a;
	uint64_t limit = a->lim.max_var;
	size_t bytes = 0;

	for (size_t i = 0; i < a->ncols; i++) {
		const acol *ac = &a->cols[i];
		const tf_arrow_span *sp = &cols[i];

		bytes += ac->nullable && k % 8 == 0;	/* the bitmap's next byte */
		if (ac->kind != K_BYTES) {
			bytes += sp->size;
			continue;
		}
		uint64_t n = !sp->valid || sp->valid[e] ? sp->starts[e + 1] - sp->starts[e] : 0;
		if (n > limit || vlen[i] > limit - n) {
			*over = true;
			return 0;
		}
		vlen[i] += n;
		bytes += (size_t)n + 4 + (k == 0 ? 4 : 0);	/* its offset, and the first */
	}
	return bytes;
}

/* Row r of the span into the batch if every buffer has room for it
 * already (else false, nothing written): span_append's work for one row
 * without its loops and calls, for the runs of one cell that fragments
 * interleaved cell by cell give (~15% of such a cells.arrow's time). */
static bool append_one(tf_arrow_batch *b, const tf_arrow_span *cols, size_t r)
{
	const tf_arrow *a = b->a;
	uint64_t row = b->rows;

	for (size_t i = 0; i < a->ncols; i++) {
		const acol *ac = &a->cols[i];
		const tf_arrow_span *sp = &cols[i];
		const bcol *c = &b->c[i];
		size_t n = ac->kind == K_FIXED ? sp->size : (size_t)(sp->starts[r + 1] - sp->starts[r]);

		if ((ac->nullable && c->valid.len <= row / 8 && c->valid.len >= c->valid.cap) ||
		    (ac->kind == K_BYTES && c->offs.cap - c->offs.len < 8) || c->vals.cap - c->vals.len < n)
			return false;
	}
	for (size_t i = 0; i < a->ncols; i++) {
		const acol *ac = &a->cols[i];
		const tf_arrow_span *sp = &cols[i];
		bcol *c = &b->c[i];
		bool valid = !sp->valid || sp->valid[r];

		if (ac->nullable) {
			if (c->valid.len <= row / 8)
				c->valid.p[c->valid.len++] = 0;
			set_bit(c->valid.p, row, valid);
			c->nulls += !valid;
		}
		if (ac->kind == K_FIXED) {
			if (valid)
				memcpy(c->vals.p + c->vals.len, sp->data + r * sp->size, sp->size);
			else
				memset(c->vals.p + c->vals.len, 0, sp->size);	/* nulls: zeros */
			c->vals.len += sp->size;
			c->nvals += ac->fixed ? ac->fixed : 1;
			continue;
		}
		if (!c->offs.len) {
			tf_put_le32(c->offs.p, 0);
			c->offs.len = 4;
		}
		size_t n = valid ? (size_t)(sp->starts[r + 1] - sp->starts[r]) : 0;
		if (n)
			memcpy(c->vals.p + c->vals.len, sp->data + sp->starts[r], n);
		c->vals.len += n;
		tf_put_le32(c->offs.p + c->offs.len, (uint32_t)c->vals.len);
		c->offs.len += 4;
	}
	b->rows++;
	return true;
}

/* Rows [r, r + m) of the span into the batch, a column at a time. */
static tf_status span_append(tf_arrow_batch *b, const tf_arrow_span *cols, size_t r, size_t m, tf_error *err)
{
	tf_status rc = TF_OK;
	uint8_t *at;

	if (m == 1 && append_one(b, cols, r))
		return TF_OK;
	for (size_t i = 0; m && i < b->a->ncols && rc == TF_OK; i++) {
		const acol *ac = &b->a->cols[i];
		const tf_arrow_span *sp = &cols[i];
		const uint8_t *valid = sp->valid ? sp->valid + r : NULL;
		bcol *c = &b->c[i];
		bool nulls = false;

		for (size_t k = 0; valid && k < m && !nulls; k++)
			nulls = !valid[k];
		if (ac->nullable) {
			if ((rc = bit_room(&c->valid, b->rows + m - 1, err)) != TF_OK)
				break;
			for (size_t k = 0; k < m; k++)
				set_bit(c->valid.p, b->rows + k, !nulls || valid[k]);
			for (size_t k = 0; nulls && k < m; k++)
				c->nulls += !valid[k];
		}
		if (ac->kind == K_FIXED) {
			if ((rc = tf_buf_grow(&c->vals, m * sp->size, &at, err)) != TF_OK)
				break;
			memcpy(at, sp->data + r * sp->size, m * sp->size);
			for (size_t k = 0; nulls && k < m; k++)
				if (!valid[k])
					memset(at + k * sp->size, 0, sp->size);	/* nulls: zeros */
			c->vals.len += m * sp->size;
			c->nvals += m * (ac->fixed ? ac->fixed : 1);
			continue;
		}
		/* K_BYTES: the cells' bytes (a null's: none) and their offsets */
		const uint64_t *st = sp->starts + r;
		size_t base = c->vals.len;
		if ((!c->offs.len && (rc = put_offset(c, 0, err)) != TF_OK) ||
		    (rc = tf_buf_reserve(&c->offs, c->offs.len + 4 * m, err)) != TF_OK)
			break;
		if (!nulls) {
			if ((rc = tf_buf_append(&c->vals, sp->data + st[0], (size_t)(st[m] - st[0]), err)) != TF_OK)
				break;
			for (size_t k = 0; k < m; k++)
				tf_put_le32(c->offs.p + c->offs.len + 4 * k, (uint32_t)(base + (st[k + 1] - st[0])));
		} else {
			for (size_t k = 0; k < m && rc == TF_OK; k++) {
				if (valid[k])
					rc = tf_buf_append(&c->vals, sp->data + st[k], (size_t)(st[k + 1] - st[k]), err);
				tf_put_le32(c->offs.p + c->offs.len + 4 * k, (uint32_t)c->vals.len);
			}
		}
		c->offs.len += 4 * m;
	}
	if (rc == TF_OK)
		b->rows += (uint32_t)m;
	return rc;
}

tf_status tf_arrow_put_span(tf_arrow_batch *b, size_t n, const tf_arrow_span *cols, tf_buf *out, size_t *taken,
			    tf_error *err)
{
	const tf_arrow *a = b->a;
	uint64_t *vlen = b->vlen;
	size_t r = 0, bytes = batch_bytes(b);
	tf_status rc = TF_OK;

	*taken = 0;
	if (!a->spans)
		return tf_err(err, TF_E_INVAL, "these columns go row by row");
	for (size_t i = 0; i < a->ncols; i++) {
		const acol *ac = &a->cols[i];
		uint64_t cs = (uint64_t)(ac->fixed ? ac->fixed : 1) * ac->width;
		if (ac->kind == K_FIXED && cols[i].size != cs)
			return tf_err(err, TF_E_CORRUPT, "%s: a cell of %zu bytes, not %llu", ac->name, cols[i].size,
				      (unsigned long long)cs);
	}
	while (r < n && rc == TF_OK) {
		size_t e = r;
		bool over = false;

		for (size_t i = 0; i < a->ncols; i++)
			vlen[i] = b->c[i].vals.len;
		/* As row by row: a row while the batch is not full. */
		while (e < n && b->rows + (e - r) < a->lim.max_cells && bytes < a->lim.max_bytes) {
			size_t add = span_row_bytes(b, cols, e, b->rows + (e - r), vlen, &over);
			if (over)
				break;
			bytes += add;
			e++;
		}
		rc = span_append(b, cols, r, e - r, err);
		r = e;
		if (rc != TF_OK || !over)
			break;
		if (!b->rows) {
			rc = tf_err(err, TF_E_UNSUPPORTED, "a value of more than %llu bytes: more than an Arrow batch "
				    "holds here", (unsigned long long)a->lim.max_var);
			break;
		}
		if ((rc = tf_arrow_flush(b, out, err)) == TF_OK)
			bytes = 0;
	}
	if (rc != TF_OK)
		batch_reset(b);
	*taken = r;
	return rc;
}

void tf_arrow_batch_clear(tf_arrow_batch *b)
{
	batch_reset(b);
	b->nblocks = 0;
}

static size_t pad8(size_t n)
{
	return (n + 7) / 8 * 8;
}

bool tf_arrow_batch_full(const tf_arrow_batch *b)
{
	return b->rows >= b->a->lim.max_cells || batch_bytes(b) >= b->a->lim.max_bytes;
}

uint32_t tf_arrow_batch_rows(const tf_arrow_batch *b)
{
	return b->rows;
}

/* The batch's buffers in order, as (pointer, length) pairs. */
typedef struct bufref {
	const uint8_t *p;
	size_t n;
} bufref;

/* Buffers and nodes of column i: nodes (length, nulls) into nodes. */
static size_t col_layout(const tf_arrow_batch *b, size_t i, bufref *bufs, uint64_t *nodes, size_t *nn)
{
	const acol *ac = &b->a->cols[i];
	const bcol *c = &b->c[i];
	size_t k = 0;
	size_t vbytes = ac->kind == K_BOOL ? (size_t)(c->nvals + 7) / 8 : c->vals.len;

	nodes[2 * *nn] = b->rows, nodes[2 * *nn + 1] = c->nulls, ++*nn;
	bufs[k++] = ac->nullable ? (bufref){ c->valid.p, (b->rows + 7) / 8 } : (bufref){ NULL, 0 };
	if (ac->kind == K_BYTES) {
		bufs[k++] = (bufref){ c->offs.p, c->offs.len };
		bufs[k++] = (bufref){ c->vals.p, c->vals.len };
		return k;
	}
	if (ac->list)
		bufs[k++] = (bufref){ c->offs.p, c->offs.len };
	if (ac->list || ac->fixed) {	/* the child: its values */
		nodes[2 * *nn] = c->nvals, nodes[2 * *nn + 1] = 0, ++*nn;
		bufs[k++] = (bufref){ NULL, 0 };
	}
	bufs[k++] = (bufref){ c->vals.p, vbytes };
	return k;
}

tf_status tf_arrow_flush(tf_arrow_batch *b, tf_buf *out, tf_error *err)
{
	size_t nc = b->a->ncols, nbufs = 0, nnodes = 0, start = out->len, hdr, rb, body = 0;
	bufref *bufs = calloc(4 * nc + 1, sizeof(*bufs));
	uint64_t *nodes = calloc(4 * nc + 2, sizeof(*nodes));
	fb f = { TF_BUF_INIT((size_t)1 << 30), TF_OK, err };
	tf_status rc = bufs && nodes ? TF_OK : tf_err(err, TF_E_NOMEM, "out of memory");

	if (rc != TF_OK || !b->rows)
		goto done;
	for (size_t i = 0; i < nc; i++) {
		bcol *c = &b->c[i];
		/* An empty var column still has its one offset. */
		if ((b->a->cols[i].kind == K_BYTES || b->a->cols[i].list) && !c->offs.len &&
		    (rc = put_offset(c, 0, err)) != TF_OK)
			goto done;
		nbufs += col_layout(b, i, bufs + nbufs, nodes, &nnodes);
	}
	for (size_t i = 0; i < nbufs; i++)
		body += pad8(bufs[i].n);
	{
		fbf fl[] = { { 0, 8, b->rows, 0 }, { 1, REF, 0, 0 }, { 2, REF, 0, 0 } };
		size_t v, at = 0;

		fb_message(&f, MSG_RECORD_BATCH, body, &hdr);
		rb = fb_table(&f, fl, 3);
		fb_link(&f, hdr, rb);
		fb_link(&f, fl[1].at, (v = fb_vector(&f, nnodes, 8)));
		for (size_t i = 0; i < 2 * nnodes; i++)
			fb_u64(&f, nodes[i]);
		fb_link(&f, fl[2].at, (v = fb_vector(&f, nbufs, 8)));
		for (size_t i = 0; i < nbufs; i++) {
			fb_u64(&f, at);
			fb_u64(&f, bufs[i].n);
			at += pad8(bufs[i].n);
		}
	}
	if ((rc = fb_frame(&f, out, err)) != TF_OK)
		goto done;
	{
		uint32_t meta = (uint32_t)(out->len - start);
		for (size_t i = 0; i < nbufs && rc == TF_OK; i++) {
			if (bufs[i].n && (rc = tf_buf_append(out, bufs[i].p, bufs[i].n, err)) != TF_OK)
				break;
			rc = tf_buf_append(out, "\0\0\0\0\0\0\0", pad8(bufs[i].n) - bufs[i].n, err);
		}
		if (rc == TF_OK && b->nblocks == b->bcap) {
			size_t cap = b->bcap ? 2 * b->bcap : 4;
			tf_arrow_block *nb = realloc(b->blocks, cap * sizeof(*nb));
			if (!nb)
				rc = tf_err(err, TF_E_NOMEM, "out of memory");
			else
				b->blocks = nb, b->bcap = cap;
		}
		if (rc == TF_OK)
			b->blocks[b->nblocks++] = (tf_arrow_block){ start, meta, body };
	}
	if (rc == TF_OK)
		batch_reset(b);
done:
	if (rc != TF_OK)
		out->len = start;
	tf_buf_free(&f.b);
	free(bufs);
	free(nodes);
	return rc;
}

const tf_arrow_block *tf_arrow_take_blocks(tf_arrow_batch *b, size_t *n)
{
	*n = b->nblocks;
	b->nblocks = 0;
	return b->blocks;
}
