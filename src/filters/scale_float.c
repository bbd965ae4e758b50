/*
 * scale_float.c - SCALE_FLOAT (filter type 15)
 * (FORMAT.md §4.16, tiledb/sm/filter/float_scaling_filter.cc).
 *
 * Floats F (f32 or f64 by sizeof(type_in)) become signed integers W of
 * byte_width bytes: w = round((x - (F)offset) / (F)scale), the arithmetic
 * done in F, rounding half away from zero.  Back: x = (F)(scale *
 * (double)(F)w + offset), in double.  Metadata: u32 n_parts, then the
 * stored length of each part; the output datatype is INT8..INT64.
 *
 * Part order: TileDB prepends one output buffer per input part, forward
 * and reverse alike, so the stored parts run in reverse order and the
 * decoder reverses them back; the lengths, though, are listed in input
 * order, which round-trips only when all parts have the same length
 * (§10 #14).  The decoder does exactly what TileDB's does.  The encoder
 * lists the lengths in stored order instead: identical bytes whenever
 * TileDB's own output is readable, and correct data when it is not.
 */
#include <math.h>

#include "elem.h"

static tf_status check(const tf_filter_opts *o, tf_error *err)
{
	if (o->byte_width == 1 || o->byte_width == 2 || o->byte_width == 4 || o->byte_width == 8)
		return TF_OK;
	return tf_err(err, TF_E_INVAL, "byte_width must be 1, 2, 4 or 8, not %llu",
		      (unsigned long long)o->byte_width);
}

/* float_scaling_filter.cc (output_datatype): INTn of byte_width bytes. */
static tf_datatype out_type(const tf_filter_opts *o, tf_datatype t)
{
	switch (o->byte_width) {
	case 1: return TF_DT_INT8;
	case 2: return TF_DT_INT16;
	case 4: return TF_DT_INT32;
	case 8: return TF_DT_INT64;
	default: return t;
	}
}

static tf_status float_size(const tf_stage *st, unsigned *fs, tf_error *err)
{
	*fs = tf_datatype_size(st->type);
	if (*fs == 4 || *fs == 8)
		return TF_OK;
	return tf_err(err, TF_E_INVAL, "%s values are not 4- or 8-byte floats",
		      tf_datatype_name(st->type));
}

/* ---- decoding ------------------------------------------------------------------------ */

ELEM_INLINE void
unscale_es(const uint8_t *src, uint8_t *dst, size_t n, unsigned bw, unsigned fs, double scale,
	   double offset)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t u = elem_sext(elem_ld_n(src + i * bw, bw), bw), bits;
		int64_t w;

		memcpy(&w, &u, 8);
		if (fs == 4) {
			float x = (float)(scale * (double)(float)w + offset);
			uint32_t b;

			memcpy(&b, &x, 4);
			bits = b;
		} else {
			double x = scale * (double)w + offset;

			memcpy(&bits, &x, 8);
		}
		elem_st_n(dst + i * fs, fs, bits);
	}
}

/* n stored integers of bw bytes to n floats of fs bytes. */
static void unscale(const uint8_t *src, uint8_t *dst, size_t n, unsigned bw, unsigned fs,
		    const tf_filter_opts *o)
{
	switch (fs * 16 + bw) {
	case 4 * 16 + 1: unscale_es(src, dst, n, 1, 4, o->scale, o->offset); break;
	case 4 * 16 + 2: unscale_es(src, dst, n, 2, 4, o->scale, o->offset); break;
	case 4 * 16 + 4: unscale_es(src, dst, n, 4, 4, o->scale, o->offset); break;
	case 4 * 16 + 8: unscale_es(src, dst, n, 8, 4, o->scale, o->offset); break;
	case 8 * 16 + 1: unscale_es(src, dst, n, 1, 8, o->scale, o->offset); break;
	case 8 * 16 + 2: unscale_es(src, dst, n, 2, 8, o->scale, o->offset); break;
	case 8 * 16 + 4: unscale_es(src, dst, n, 4, 8, o->scale, o->offset); break;
	case 8 * 16 + 8: unscale_es(src, dst, n, 8, 8, o->scale, o->offset); break;
	}
}

/* Check the stored parts and size the output: Σ (len / bw) * fs. */
static tf_status decoded_size(const uint8_t *lens, uint32_t n, unsigned bw, unsigned fs,
			      size_t *out, tf_error *err)
{
	uint64_t total = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t len = tf_le32(lens + 4 * (size_t)i);

		if (len % bw)
			return tf_err(err, TF_E_CORRUPT, "part %u of %u bytes is not a whole number "
				      "of %u-byte integers", i, len, bw);
		total += (uint64_t)len / bw * fs;
	}
	if (total > SIZE_MAX)
		return tf_err(err, TF_E_CORRUPT, "parts decode to %llu bytes",
			      (unsigned long long)total);
	*out = (size_t)total;
	return TF_OK;
}

static tf_status decode(const tf_filter_opts *o, const tf_stage *st, tf_stream *s, tf_error *err)
{
	unsigned bw = (unsigned)o->byte_width, fs;
	const uint8_t *lens, *src = s->data.p;
	uint64_t stored;
	size_t size = 0, at;
	uint32_t n;
	tf_status rc;

	if ((rc = check(o, err)) != TF_OK || (rc = float_size(st, &fs, err)) != TF_OK)
		return rc;
	if ((rc = elem_get_parts(&s->md, &n, &lens, &stored, err)) != TF_OK)
		return tf_err_prefix(err, "scale float header");
	if (stored != s->data.n)
		return tf_err(err, TF_E_CORRUPT, "parts hold %llu bytes but the data has %zu",
			      (unsigned long long)stored, s->data.n);
	if ((rc = decoded_size(lens, n, bw, fs, &size, err)) != TF_OK)
		return rc;
	if (size == 0)
		return TF_OK;
	if ((rc = tf_stage_output(st, s->data_out, size, err)) != TF_OK)
		return rc;
	/* Each decoded part goes in front of the ones before it. */
	at = size;
	for (uint32_t i = 0; i < n; i++) {
		size_t len = tf_le32(lens + 4 * (size_t)i), count = len / bw;

		at -= count * fs;
		unscale(src, s->data_out->p + at, count, bw, fs, o);
		src += len;
	}
	s->data_out->len = size;
	s->data = tf_span_of(s->data_out->p, size);
	return TF_OK;
}

/* ---- encoding ------------------------------------------------------------------------ */

/*
 * The float-to-integer conversion of an already rounded value.  C leaves
 * out-of-range conversions undefined and TileDB does not clamp (§12 #9).
 * On x86-64, TileDB's platform, the conversion instructions return the
 * "integer indefinite" INT_MIN of their 32- or 64-bit result for
 * out-of-range values and NaN; 8- and 16-bit targets go through 32 bits
 * and are truncated by the store.  Reproduce that without UB.
 */
static uint64_t to_integer(double r, unsigned bw)
{
	int64_t v;

	if (bw == 8)
		v = r >= -0x1p63 && r < 0x1p63 ? (int64_t)r : INT64_MIN;
	else
		v = r >= -0x1p31 && r < 0x1p31 ? (int64_t)r : INT32_MIN;
	return (uint64_t)v;
}

static void scale_part(const uint8_t *src, uint8_t *dst, size_t n, unsigned bw, unsigned fs,
		       const tf_filter_opts *o)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t bits = elem_ld_n(src + i * fs, fs);
		double r;

		if (fs == 4) {	/* the subtraction and division in single precision */
			float x, q;
			uint32_t b = (uint32_t)bits;

			memcpy(&x, &b, 4);
			q = (x - (float)o->offset) / (float)o->scale;
			r = roundf(q);
		} else {
			double x;

			memcpy(&x, &bits, 8);
			r = round((x - o->offset) / o->scale);
		}
		elem_st_n(dst + i * bw, bw, to_integer(r, bw));
	}
}

static tf_status encode(const tf_filter_opts *o, const tf_stage *st, tf_parts *md,
			tf_parts *data, tf_error *err)
{
	tf_buf hdr = TF_BUF_INIT(SIZE_MAX), out = TF_BUF_INIT(SIZE_MAX);
	unsigned bw = (unsigned)o->byte_width, fs;
	tf_status rc;

	if ((rc = check(o, err)) != TF_OK || (rc = float_size(st, &fs, err)) != TF_OK)
		return rc;
	for (size_t i = 0; i < data->n; i++)
		if (data->v[i].len % fs)
			return tf_err(err, TF_E_INVAL, "part of %zu bytes is not a whole number "
				      "of %u-byte floats", data->v[i].len, fs);
	rc = tf_buf_put_u32(&hdr, (uint32_t)data->n, err);
	if (rc == TF_OK)
		rc = tf_buf_reserve(&out, tf_parts_total(data) / fs * bw, err);
	for (size_t i = data->n; i-- > 0 && rc == TF_OK;) {	/* stored order */
		size_t count = data->v[i].len / fs;

		rc = tf_buf_put_u32(&hdr, (uint32_t)(count * bw), err);
		if (rc == TF_OK && count) {
			scale_part(data->v[i].p, out.p + out.len, count, bw, fs, o);
			out.len += count * bw;
		}
	}
	if (rc != TF_OK) {
		tf_buf_free(&hdr);
		tf_buf_free(&out);
		return rc;
	}
	return elem_encode_done(md, data, &hdr, &out, err);
}

const tf_filter_class tf_filter_scale_float = {
	.id = TF_F_SCALE_FLOAT,
	.name = "scale_float",
	.layout = TF_OPTS_SCALE_FLOAT,
	.out_type = out_type,
	.check = check,
	.decode = decode,
	.encode = encode,
};
