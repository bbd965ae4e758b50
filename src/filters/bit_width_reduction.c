/*
 * bit_width_reduction.c - BIT_WIDTH_REDUCTION (filter type 7)
 * (FORMAT.md §4.11, tiledb/sm/filter/bit_width_reduction_filter.cc).
 *
 * Applied to 16/32/64-bit integers (and date/time as int64 from format
 * 20); every other type passes through with no header at all (§10 #7).
 * Metadata: u32 input_len, u32 n_windows, then per window
 *     window_min (T), u8 bits (8/16/32/64), u32 window_nbytes
 * where window_nbytes is the window's ORIGINAL byte count.  Data, per
 * window: the raw bytes when bits >= 8 sizeof(T) or window_nbytes is not
 * a whole number of values (window_min is then meaningless, §10 #8);
 * otherwise each value minus window_min, cast to a `bits`-wide integer of
 * T's signedness.
 */
#include "elem.h"

/* Bytes of one window's header. */
static size_t window_header_size(const elem_int *t)
{
	return t->size + 1 + 4;
}

/* ---- decoding ------------------------------------------------------------------------ */

/* n values of `in` bytes, sign- or zero-extended as T is, plus min, stored
 * as `out`-byte values; the sum is taken modulo the width of T. */
ELEM_INLINE void
widen_es(const uint8_t *src, uint8_t *dst, size_t n, unsigned in, unsigned out, bool is_signed,
	 uint64_t min)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t v = elem_ld_n(src + i * in, in);

		if (is_signed)
			v = elem_sext(v, in);
		elem_st_n(dst + i * out, out, v + min);
	}
}

static void widen(const uint8_t *src, uint8_t *dst, size_t n, unsigned in, const elem_int *t,
		  uint64_t min)
{
	bool sgn = t->is_signed;

	switch (t->size * 8 + in) {
	case 2 * 8 + 1: widen_es(src, dst, n, 1, 2, sgn, min); break;
	case 4 * 8 + 1: widen_es(src, dst, n, 1, 4, sgn, min); break;
	case 4 * 8 + 2: widen_es(src, dst, n, 2, 4, sgn, min); break;
	case 8 * 8 + 1: widen_es(src, dst, n, 1, 8, sgn, min); break;
	case 8 * 8 + 2: widen_es(src, dst, n, 2, 8, sgn, min); break;
	case 8 * 8 + 4: widen_es(src, dst, n, 4, 8, sgn, min); break;
	}
}

/* One window, described by the header at h, from *data to out + *pos. */
static tf_status decode_window(const uint8_t *h, uint32_t i, const elem_int *t, tf_reader *data,
			       uint8_t *out, size_t *pos, size_t total, tf_error *err)
{
	uint64_t min = elem_ld_n(h, t->size);
	unsigned bits = h[t->size];
	size_t nbytes = tf_le32(h + t->size + 1), in = bits / 8;
	tf_span src;
	tf_status rc;

	if (nbytes > total - *pos)
		return tf_err(err, TF_E_CORRUPT, "window %u runs past the %zu bytes announced", i, total);
	if (bits >= 8 * t->size || nbytes % t->size) {
		rc = tf_get_span(data, nbytes, &src, "raw window", err);
		if (rc == TF_OK && nbytes)
			memcpy(out + *pos, src.p, nbytes);
	} else if (bits == 8 || bits == 16 || bits == 32) {
		rc = tf_get_span(data, nbytes / t->size * in, &src, "reduced window", err);
		if (rc == TF_OK)
			widen(src.p, out + *pos, nbytes / t->size, in, t, min);
	} else {
		return tf_err(err, TF_E_CORRUPT, "window %u has bit width %u", i, bits);
	}
	*pos += nbytes;
	return rc;
}

static tf_status decode(const tf_filter_opts *o, const tf_stage *st, tf_stream *s, tf_error *err)
{
	tf_reader md = tf_reader_of(s->md), data = tf_reader_of(s->data);
	uint32_t total, nwin;
	size_t pos = 0;
	tf_span hdrs;
	elem_int t;
	tf_status rc;

	(void)o;
	if (!elem_window_type(st->type, st->version, false, &t))
		return TF_OK;	/* pass-through */
	if ((rc = tf_get_u32(&md, &total, "input length", err)) != TF_OK ||
	    (rc = tf_get_u32(&md, &nwin, "window count", err)) != TF_OK ||
	    (rc = tf_get_span(&md, (uint64_t)nwin * window_header_size(&t), &hdrs,
			      "window headers", err)) != TF_OK)
		return tf_err_prefix(err, "bit width reduction header");
	if ((rc = tf_stage_output(st, s->data_out, total, err)) != TF_OK)
		return rc;
	for (uint32_t i = 0; i < nwin && rc == TF_OK; i++)
		rc = decode_window(hdrs.p + i * window_header_size(&t), i, &t, &data,
				   s->data_out->p, &pos, total, err);
	if (rc != TF_OK)
		return rc;
	if (pos != total || data.n != 0)
		return tf_err(err, TF_E_CORRUPT, "windows give %zu of %u bytes and leave %zu of "
			      "the data unread", pos, total, data.n);
	s->md = tf_span_of(md.p, md.n);
	s->data_out->len = total;
	s->data = tf_span_of(s->data_out->p, total);
	return TF_OK;
}

/* ---- encoding ------------------------------------------------------------------------ */

/*
 * compute_bits_required: bits for n values at p and the window minimum.
 * range = max - min and range + 1 must fit T, or the window stays raw
 * (bits = 8 sizeof(T)) and TileDB leaves window_min uninitialized; 0 is
 * stored instead.  Otherwise bits is the narrowest of 8/16/32/64 that
 * holds range + 1: by bit length for unsigned T, by which of int8 ..
 * int64 can hold it for signed T.
 */
static unsigned reduce_bits(const uint8_t *p, size_t n, const elem_int *t, uint64_t *min)
{
	unsigned wbits = 8 * t->size;
	uint64_t lo = UINT64_MAX, hi = 0, diff, v, tmax;

	for (size_t i = 0; i < n; i++) {
		uint64_t x = elem_ld_n(p + i * t->size, t->size);
		uint64_t k = elem_key(t->is_signed ? elem_sext(x, t->size) : x, t->is_signed);

		lo = k < lo ? k : lo;
		hi = k > hi ? k : hi;
	}
	diff = hi - lo;
	tmax = t->is_signed ? ((uint64_t)1 << (wbits - 1)) - 1 : UINT64_MAX >> (64 - wbits);
	*min = 0;
	if (n == 0 || diff >= tmax)
		return wbits;
	*min = elem_key(lo, t->is_signed);
	v = diff + 1;
	if (v <= (t->is_signed ? 0x7Fu : 0xFFu))
		return 8;
	if (v <= (t->is_signed ? 0x7FFFu : 0xFFFFu))
		return 16;
	return v <= (t->is_signed ? 0x7FFFFFFFu : 0xFFFFFFFFu) ? 32 : 64;
}

static tf_status encode_window(const uint8_t *p, size_t nbytes, const elem_int *t, tf_buf *hdr,
			       tf_buf *out, tf_error *err)
{
	size_t n = nbytes / t->size;
	uint64_t min;
	unsigned bits = reduce_bits(p, n, t, &min), in = bits / 8;
	uint8_t *at;
	tf_status rc;

	if ((rc = tf_buf_grow(hdr, window_header_size(t), &at, err)) != TF_OK)
		return rc;
	elem_st_n(at, t->size, min);
	at[t->size] = (uint8_t)bits;
	tf_put_le32(at + t->size + 1, (uint32_t)nbytes);
	hdr->len += window_header_size(t);
	if (bits >= 8 * t->size || nbytes % t->size)
		return tf_buf_append(out, p, nbytes, err);
	if ((rc = tf_buf_grow(out, n * in, &at, err)) != TF_OK)
		return rc;
	for (size_t i = 0; i < n; i++)
		elem_st_n(at + i * in, in, elem_ld_n(p + i * t->size, t->size) - min);
	out->len += n * in;
	return TF_OK;
}

/* Header: the input length, then the windows (elem_encode_windows). */
static tf_status encode(const tf_filter_opts *o, const tf_stage *st, tf_parts *md,
			tf_parts *data, tf_error *err)
{
	tf_buf hdr = TF_BUF_INIT(SIZE_MAX);
	size_t total = tf_parts_total(data);
	elem_int t;
	tf_status rc;

	if (!elem_window_type(st->type, st->version, false, &t))
		return TF_OK;	/* pass-through */
	if (total > UINT32_MAX)
		return tf_err(err, TF_E_INVAL, "input of %zu bytes exceeds 4 GiB", total);
	if ((rc = tf_buf_put_u32(&hdr, (uint32_t)total, err)) != TF_OK) {
		tf_buf_free(&hdr);
		return rc;
	}
	return elem_encode_windows(md, data, &hdr, o->window, &t, encode_window, err);
}

const tf_filter_class tf_filter_bit_width_reduction = {
	.id = TF_F_BIT_WIDTH_REDUCTION,
	.name = "bit_width_reduction",
	.alias = "bwr",
	.layout = TF_OPTS_WINDOW,
	.decode = decode,
	.encode = encode,
};
