/*
 * positive_delta.c - POSITIVE_DELTA (filter type 10)
 * (FORMAT.md §4.12, tiledb/sm/filter/positive_delta_filter.cc).
 *
 * Applied to 8/16/32/64-bit integers, BOOL, BLOB and GEOM_* (and date/time
 * as int64 from format 20); every other type passes through with no
 * header at all (§10 #7).  Metadata: u32 n_windows, then per window
 *     first_value (T), u32 window_nbytes.
 * Data, per window: the raw bytes if window_nbytes is not a whole number of
 * values (first_value is then meaningless, §10 #8), else the deltas
 * x_j - x_(j-1) in T with x_(-1) = first_value = x_0.  Same length as the
 * input.  The encoder refuses decreasing data, like TileDB.
 */
#include "elem.h"

static size_t window_header_size(const elem_int *t)
{
	return t->size + 4;
}

/* Sum of the window lengths, which must cover the data exactly. */
static uint64_t windows_total(const uint8_t *hdrs, uint32_t nwin, const elem_int *t)
{
	uint64_t total = 0;

	for (uint32_t i = 0; i < nwin; i++)
		total += tf_le32(hdrs + i * window_header_size(t) + t->size);
	return total;
}

static tf_status decode(const tf_filter_opts *o, const tf_stage *st, tf_stream *s, tf_error *err)
{
	tf_reader md = tf_reader_of(s->md);
	const uint8_t *src = s->data.p;
	uint64_t total;
	uint32_t nwin;
	tf_span hdrs;
	elem_int t;
	tf_status rc;

	(void)o;
	if (!elem_window_type(st->type, st->version, true, &t))
		return TF_OK;	/* pass-through */
	if ((rc = tf_get_u32(&md, &nwin, "window count", err)) != TF_OK ||
	    (rc = tf_get_span(&md, (uint64_t)nwin * window_header_size(&t), &hdrs,
			      "window headers", err)) != TF_OK)
		return tf_err_prefix(err, "positive delta header");
	total = windows_total(hdrs.p, nwin, &t);
	if (total != s->data.n)
		return tf_err(err, TF_E_CORRUPT, "windows hold %llu bytes but the data has %zu",
			      (unsigned long long)total, s->data.n);
	s->md = tf_span_of(md.p, md.n);
	if (total == 0)
		return TF_OK;
	if ((rc = tf_stage_output(st, s->data_out, s->data.n, err)) != TF_OK)
		return rc;
	for (uint32_t i = 0; i < nwin; i++) {
		const uint8_t *h = hdrs.p + i * window_header_size(&t);
		size_t nbytes = tf_le32(h + t.size), at = (size_t)(src - s->data.p);

		if (nbytes % t.size)
			memcpy(s->data_out->p + at, src, nbytes);
		else
			elem_prefix_sum(src, s->data_out->p + at, nbytes / t.size, t.size,
					elem_ld_n(h, t.size));
		src += nbytes;
	}
	s->data_out->len = s->data.n;
	s->data = tf_span_of(s->data_out->p, s->data_out->len);
	return TF_OK;
}

/* TileDB's one check (encode_part): no value below its predecessor. */
static bool non_decreasing(const uint8_t *p, size_t n, const elem_int *t)
{
	uint64_t prev = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t x = elem_ld_n(p + i * t->size, t->size);
		uint64_t k = elem_key(t->is_signed ? elem_sext(x, t->size) : x, t->is_signed);

		if (i && k < prev)
			return false;
		prev = k;
	}
	return true;
}

static tf_status encode_window(const uint8_t *p, size_t nbytes, const elem_int *t, tf_buf *hdr,
			       tf_buf *out, tf_error *err)
{
	uint8_t first[8] = { 0 }, *at;
	tf_status rc;

	/* TileDB reads first_value even past a short window's end; store the
	 * bytes there are, zero-padded. */
	memcpy(first, p, nbytes < t->size ? nbytes : t->size);
	if ((rc = tf_buf_append(hdr, first, t->size, err)) != TF_OK ||
	    (rc = tf_buf_put_u32(hdr, (uint32_t)nbytes, err)) != TF_OK)
		return rc;
	if (nbytes % t->size)
		return tf_buf_append(out, p, nbytes, err);
	if (!non_decreasing(p, nbytes / t->size, t))
		return tf_err(err, TF_E_INVAL, "delta is not positive: the data decreases");
	if ((rc = tf_buf_grow(out, nbytes, &at, err)) != TF_OK)
		return rc;
	elem_diff(p, at, nbytes / t->size, t->size, elem_ld_n(p, t->size));
	out->len += nbytes;
	return TF_OK;
}

/* Header: just the windows (elem_encode_windows). */
static tf_status encode(const tf_filter_opts *o, const tf_stage *st, tf_parts *md,
			tf_parts *data, tf_error *err)
{
	tf_buf hdr = TF_BUF_INIT(SIZE_MAX);
	elem_int t;

	if (!elem_window_type(st->type, st->version, true, &t))
		return TF_OK;	/* pass-through */
	return elem_encode_windows(md, data, &hdr, o->window, &t, encode_window, err);
}

const tf_filter_class tf_filter_positive_delta = {
	.id = TF_F_POSITIVE_DELTA,
	.name = "positive_delta",
	.layout = TF_OPTS_WINDOW,
	.decode = decode,
	.encode = encode,
};
