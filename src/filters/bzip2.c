/*
 * bzip2.c - BZIP2 (filter type 5): one standard bzip2 stream per part
 * (FORMAT.md §4.5, tiledb/sm/compressors/bzip_compressor.cc).  The level
 * is the block size in units of 100 kB: below 1 means 1, above 9 fails.
 * TileDB compresses with verbosity 0 and workFactor 0 (the library default)
 * and decompresses with small = 0.
 */
#include <bzlib.h>

#include "framing.h"

#define BZIP2_MAX_LEVEL 9

/* Part sizes are u32 (§4.1), so they always fit bzip2's unsigned int. */
_Static_assert(sizeof(unsigned int) >= sizeof(uint32_t), "unsigned int narrower than 32 bits");

static tf_status decode_part(const tf_filter_opts *o, const tf_stage *st, tf_span src,
			     uint8_t *dst, size_t n, tf_error *err)
{
	char none;	/* bzip2 rejects NULL buffers even when they are empty */
	unsigned int got = (unsigned int)n;
	int ret;

	(void)o;
	(void)st;
	/* The library never writes through source; its prototype lacks const. */
	ret = BZ2_bzBuffToBuffDecompress(n ? (char *)dst : &none, &got,
					 src.n ? (char *)src.p : &none, (unsigned int)src.n, 0, 0);
	switch (ret) {
	case BZ_OK:
		break;
	case BZ_OUTBUFF_FULL:
		return tf_err(err, TF_E_CORRUPT, "stream holds more than the %zu bytes the header says",
			      n);
	case BZ_UNEXPECTED_EOF:
		return tf_err(err, TF_E_CORRUPT, "truncated bzip2 stream");
	case BZ_MEM_ERROR:
		return tf_err(err, TF_E_NOMEM, "bzip2 ran out of memory");
	default:	/* BZ_DATA_ERROR, BZ_DATA_ERROR_MAGIC, ... */
		return tf_err(err, TF_E_CORRUPT, "bad bzip2 stream (error %d)", ret);
	}
	if (got != n)
		return tf_err(err, TF_E_CORRUPT, "stream holds %u bytes, header says %zu", got, n);
	return TF_OK;
}

/* Worst case of BZ2_bzBuffToBuffCompress: 1% more than the input plus 600
 * bytes (bzip2 manual). */
static size_t compress_bound(size_t n)
{
	return tf_size_add(tf_size_add(n, n / 100 + 1), 600);
}

static tf_status check(const tf_filter_opts *o, tf_error *err)
{
	return tf_framing_check_level(o, BZIP2_MAX_LEVEL, "largest bzip2 block size", err);
}

static tf_status encode_part(const tf_filter_opts *o, const tf_stage *st, tf_span src,
			     tf_buf *out, tf_error *err)
{
	int block = o->level < 1 ? 1 : o->level;
	char none;
	uint8_t *at;
	uint32_t room;
	unsigned int got;
	tf_status rc;
	int ret;

	(void)st;
	if ((rc = check(o, err)) != TF_OK)
		return tf_err_prefix(err, "bzip2");
	if ((rc = tf_framing_room(out, compress_bound(src.n), &at, &room, err)) != TF_OK)
		return rc;
	got = room;	/* in: the room; out: the stream's size */
	ret = BZ2_bzBuffToBuffCompress((char *)at, &got, src.n ? (char *)src.p : &none,
				       (unsigned int)src.n, block, 0, 0);
	if (ret == BZ_MEM_ERROR)
		return tf_err(err, TF_E_NOMEM, "bzip2 ran out of memory");
	if (ret != BZ_OK)
		return tf_err(err, TF_E_INVAL, "bzip2: compression failed (error %d)", ret);
	out->len += got;
	return TF_OK;
}

static const tf_codec codec = { "bzip2", decode_part, encode_part };

TF_FRAMING_FUNCTIONS(codec)

const tf_filter_class tf_filter_bzip2 = {
	.id = TF_F_BZIP2,
	.name = "bzip2",
	.layout = TF_OPTS_COMPRESSOR,
	.compressor = 5,
	.consumes_md = true,
	.check = check,
	.decode = framed_decode,
	.encode = framed_encode,
};
