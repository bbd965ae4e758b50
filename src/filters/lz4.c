/*
 * lz4.c - LZ4 (filter type 3): one raw LZ4 block per part, with no frame
 * and no size prefix; the decoded size is the part's orig_len from the
 * framing header (FORMAT.md §4.4, tiledb/sm/compressors/lz4_compressor.cc).
 * TileDB ignores the level and always compresses with the default
 * acceleration (LZ4_compress_default).
 */
#include <lz4.h>

#include "framing.h"

static tf_status decode_part(const tf_filter_opts *o, const tf_stage *st, tf_span src,
			     uint8_t *dst, size_t n, tf_error *err)
{
	uint8_t none;	/* a valid address for an empty part */
	int got;

	(void)o;
	(void)st;
	/* LZ4's sizes are ints: larger parts cannot have been written by it. */
	if (src.n > LZ4_MAX_INPUT_SIZE || n > LZ4_MAX_INPUT_SIZE)
		return tf_err(err, TF_E_CORRUPT, "block of %zu bytes for %zu decoded bytes is beyond "
			      "what LZ4 can write", src.n, n);
	got = LZ4_decompress_safe((const char *)src.p, (char *)(n ? dst : &none), (int)src.n, (int)n);
	if (got < 0)
		return tf_err(err, TF_E_CORRUPT, "malformed LZ4 block (error at input byte %d)",
			      -got - 1);
	if ((size_t)got != n)
		return tf_err(err, TF_E_CORRUPT, "block holds %d bytes, header says %zu", got, n);
	return TF_OK;
}

static tf_status encode_part(const tf_filter_opts *o, const tf_stage *st, tf_span src,
			     tf_buf *out, tf_error *err)
{
	static const char none;	/* a valid address for an empty part */
	int bound, got;
	uint8_t *at;
	tf_status rc;

	(void)o;
	(void)st;
	if (src.n > LZ4_MAX_INPUT_SIZE)
		return tf_err(err, TF_E_INVAL, "lz4: part of %zu bytes exceeds LZ4's limit of %d",
			      src.n, LZ4_MAX_INPUT_SIZE);
	bound = LZ4_compressBound((int)src.n);
	if ((rc = tf_buf_grow(out, (size_t)bound, &at, err)) != TF_OK)
		return rc;
	/* An empty part still becomes a 1-byte block (a zero token, §10 #2). */
	got = LZ4_compress_default(src.n ? (const char *)src.p : &none, (char *)at, (int)src.n, bound);
	if (got <= 0)
		return tf_err(err, TF_E_INVAL, "lz4: compression of %zu bytes failed", src.n);
	out->len += (size_t)got;
	return TF_OK;
}

static const tf_codec codec = { "lz4", decode_part, encode_part };

TF_FRAMING_FUNCTIONS(codec)

const tf_filter_class tf_filter_lz4 = {
	.id = TF_F_LZ4,
	.name = "lz4",
	.layout = TF_OPTS_COMPRESSOR,
	.compressor = 3,
	.consumes_md = true,
	.decode = framed_decode,
	.encode = framed_encode,
};
