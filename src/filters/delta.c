/*
 * delta.c - DELTA (filter type 19), a member of the compression family
 * (FORMAT.md §4.1, §4.10; tiledb/sm/compressors/delta_compressor.cc).
 *
 * Each part, metadata parts of earlier filters included (§10 #10), is
 * coded on its own as n = len / sizeof(T) values of the integer type T:
 *     u64 n, x_0 (T), then d_i = x_i - x_(i-1) truncated to sizeof(T)
 *     bytes for i = 1 .. n-1.
 * T comes from the reinterpret option when it is not ANY, else from
 * type_in (§4.9 table); floats are refused.  Everything is modulo
 * 2^(8 sizeof T), so signedness never matters.
 *
 * Two cases TileDB's encoder gets wrong (its iassert is compiled out of
 * release builds): a part of zero values still gets a first value read
 * from beyond the input, and the last len % sizeof(T) bytes of a part are
 * dropped, so TileDB reads them back as uninitialized memory.  This file
 * writes zeros (padded input bytes) in that stray first-value slot and
 * appends the len % sizeof(T) trailing bytes raw after the deltas, where
 * TileDB's decoder never looks; it accepts TileDB's form for the first
 * case and reports the second, whose bytes are lost, as corrupt.
 */
#include "framing.h"
#include "elem.h"

static tf_status decode_part(const tf_filter_opts *o, const tf_stage *st, tf_span src,
			     uint8_t *dst, size_t len, tf_error *err)
{
	tf_reader r = tf_reader_of(src);
	size_t whole, tail, body;
	uint64_t n;
	elem_int t;
	tf_status rc;

	if ((rc = elem_reinterpret_int(o, st, "delta-code", &t, err)) != TF_OK ||
	    (rc = tf_get_u64(&r, &n, "value count", err)) != TF_OK)
		return rc;
	whole = len / t.size;
	tail = len % t.size;
	if ((rc = elem_check_count(n, len, &t, err)) != TF_OK)
		return rc;
	body = whole ? whole * t.size : t.size;	/* x_0 is stored even for n = 0 */
	if (tail && r.n == body)
		return elem_dropped_tail(len, &t, err);
	if (r.n != body + tail)
		return tf_err(err, TF_E_CORRUPT, "%zu bytes of values, expected %zu",
			      r.n, body + tail);
	if (whole) {
		uint64_t x0 = elem_ld_n(r.p, t.size);

		memcpy(dst, r.p, t.size);
		elem_prefix_sum(r.p + t.size, dst + t.size, whole - 1, t.size, x0);
	}
	if (tail)
		memcpy(dst + whole * t.size, r.p + body, tail);
	return TF_OK;
}

static tf_status encode_part(const tf_filter_opts *o, const tf_stage *st, tf_span src,
			     tf_buf *out, tf_error *err)
{
	size_t whole, tail, body;
	uint8_t *at;
	elem_int t;
	tf_status rc;

	if ((rc = elem_reinterpret_int(o, st, "delta-code", &t, err)) != TF_OK)
		return rc;
	whole = src.n / t.size;
	tail = src.n % t.size;
	body = whole ? whole * t.size : t.size;
	if ((rc = tf_buf_grow(out, 8 + body + tail, &at, err)) != TF_OK)
		return rc;
	tf_put_le64(at, whole);
	if (whole) {
		memcpy(at + 8, src.p, t.size);
		elem_diff(src.p + t.size, at + 8 + t.size, whole - 1, t.size,
			  elem_ld_n(src.p, t.size));
	} else {
		/* TileDB reads x_0 past the end here; store what there is. */
		memset(at + 8, 0, t.size);
		if (src.n)
			memcpy(at + 8, src.p, src.n);
	}
	if (tail)
		memcpy(at + 8 + body, src.p + whole * t.size, tail);
	out->len += 8 + body + tail;
	return TF_OK;
}

static const tf_codec codec = { "delta", decode_part, encode_part };

TF_FRAMING_FUNCTIONS(codec)

const tf_filter_class tf_filter_delta = {
	.id = TF_F_DELTA,
	.name = "delta",
	.layout = TF_OPTS_REINTERPRET,
	.compressor = 8,
	.reinterpret_since = 19,
	.consumes_md = true,
	.out_type = elem_reinterpret_type,
	.decode = framed_decode,
	.encode = framed_encode,
};
