/*
 * byteshuffle.c - BYTESHUFFLE (filter type 9), blosc's shuffle
 * (FORMAT.md §4.14, tiledb/sm/filter/byteshuffle_filter.cc).
 *
 * Metadata: u32 n_parts, u32 part_len[n_parts].  Each part of L bytes is
 * shuffled on its own, without blocking: with es = sizeof(type_in) and
 * n = L / es, output byte j*n + i is input byte i*es + j, and the last
 * L % es bytes are copied (§10 #13).  The data keeps its length.
 */
#include "elem.h"

static void unshuffle_part(const uint8_t *src, uint8_t *dst, size_t len, unsigned es)
{
	size_t n = len / es;

	elem_byte_unshuffle(src, dst, n, es);
	if (len > n * es)
		memcpy(dst + n * es, src + n * es, len - n * es);
}

static void shuffle_part(const uint8_t *src, uint8_t *dst, size_t len, unsigned es)
{
	size_t n = len / es;

	elem_byte_shuffle(src, dst, n, es);
	if (len > n * es)
		memcpy(dst + n * es, src + n * es, len - n * es);
}

static tf_status decode(const tf_filter_opts *o, const tf_stage *st, tf_stream *s, tf_error *err)
{
	unsigned es = tf_datatype_size(st->type);

	(void)o;
	if (es == 0)
		return tf_err(err, TF_E_INVAL, "invalid datatype %u", st->type);
	return elem_decode_parts(st, s, es, unshuffle_part, "byteshuffle", err);
}

static tf_status encode(const tf_filter_opts *o, const tf_stage *st, tf_parts *md,
			tf_parts *data, tf_error *err)
{
	unsigned es = tf_datatype_size(st->type);

	(void)o;
	if (es == 0)
		return tf_err(err, TF_E_INVAL, "invalid datatype %u", st->type);
	return elem_encode_parts(md, data, es, shuffle_part, err);
}

const tf_filter_class tf_filter_byteshuffle = {
	.id = TF_F_BYTESHUFFLE,
	.name = "byteshuffle",
	.layout = TF_OPTS_NONE,
	.decode = decode,
	.encode = encode,
};
