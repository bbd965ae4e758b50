/*
 * xor.c - XOR (filter type 16) (FORMAT.md §4.17, tiledb/sm/filter/xor_filter.cc).
 *
 * Metadata: u32 n_parts, u32 part_len[n_parts].  Each part is a run of
 * es-byte integers (es = sizeof(type_in) = 1, 2, 4 or 8) stored as
 * y_0 = x_0, y_j = x_j ^ x_(j-1); every part restarts with its first
 * element verbatim.  The output datatype is the signed integer of width es.
 *
 * XOR acts on each byte position independently, so the element loads and
 * stores below are plain memcpy in host order: byte order cannot matter.
 */
#include "elem.h"

ELEM_INLINE void
unxor_es(const uint8_t *src, uint8_t *dst, size_t n, unsigned es)
{
	uint64_t x = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t y = 0;

		memcpy(&y, src + i * es, es);
		x ^= y;
		memcpy(dst + i * es, &x, es);
	}
}

ELEM_INLINE void
xor_es(const uint8_t *src, uint8_t *dst, size_t n, unsigned es)
{
	uint64_t prev = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t x = 0, y;

		memcpy(&x, src + i * es, es);
		y = x ^ prev;
		memcpy(dst + i * es, &y, es);
		prev = x;
	}
}

/*
 * TileDB only ever gives XOR whole elements.  Should a part end in a
 * partial element, TileDB's xor_part/unxor_part skip those bytes and leave
 * them uninitialized; here they are copied unchanged in both directions so
 * that the data survives.
 */
static void copy_tail(const uint8_t *src, uint8_t *dst, size_t len, unsigned es)
{
	size_t whole = len / es * es;

	if (len > whole)
		memcpy(dst + whole, src + whole, len - whole);
}

static void unxor_part(const uint8_t *src, uint8_t *dst, size_t len, unsigned es)
{
	switch (es) {
	case 1: unxor_es(src, dst, len, 1); break;
	case 2: unxor_es(src, dst, len / 2, 2); break;
	case 4: unxor_es(src, dst, len / 4, 4); break;
	case 8: unxor_es(src, dst, len / 8, 8); break;
	}
	copy_tail(src, dst, len, es);
}

static void xor_part(const uint8_t *src, uint8_t *dst, size_t len, unsigned es)
{
	switch (es) {
	case 1: xor_es(src, dst, len, 1); break;
	case 2: xor_es(src, dst, len / 2, 2); break;
	case 4: xor_es(src, dst, len / 4, 4); break;
	case 8: xor_es(src, dst, len / 8, 8); break;
	}
	copy_tail(src, dst, len, es);
}

static tf_status check_width(unsigned es, tf_datatype t, tf_error *err)
{
	if (es == 1 || es == 2 || es == 4 || es == 8)
		return TF_OK;
	return tf_err(err, TF_E_INVAL, "datatype %u has no integer width", t);
}

static tf_status decode(const tf_filter_opts *o, const tf_stage *st, tf_stream *s, tf_error *err)
{
	unsigned es = tf_datatype_size(st->type);
	tf_status rc = check_width(es, st->type, err);

	(void)o;
	return rc != TF_OK ? rc : elem_decode_parts(st, s, es, unxor_part, "xor", err);
}

static tf_status encode(const tf_filter_opts *o, const tf_stage *st, tf_parts *md,
			tf_parts *data, tf_error *err)
{
	unsigned es = tf_datatype_size(st->type);
	tf_status rc = check_width(es, st->type, err);

	(void)o;
	return rc != TF_OK ? rc : elem_encode_parts(md, data, es, xor_part, err);
}

/* xor_filter.cc (output_datatype): the signed integer of the same width. */
static tf_datatype out_type(const tf_filter_opts *o, tf_datatype t)
{
	(void)o;
	switch (tf_datatype_size(t)) {
	case 1: return TF_DT_INT8;
	case 2: return TF_DT_INT16;
	case 4: return TF_DT_INT32;
	case 8: return TF_DT_INT64;
	default: return t;
	}
}

const tf_filter_class tf_filter_xor = {
	.id = TF_F_XOR,
	.name = "xor",
	.layout = TF_OPTS_NONE,
	.out_type = out_type,
	.decode = decode,
	.encode = encode,
};
