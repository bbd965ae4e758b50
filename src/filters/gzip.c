/*
 * gzip.c - GZIP (filter type 1): one zlib stream (RFC 1950; neither a gzip
 * header nor raw deflate) per part, from deflateInit(level) with the default
 * window and memory level (FORMAT.md §4.2,
 * tiledb/sm/compressors/gzip_compressor.cc).  Levels below 0 mean zlib's
 * default; 0-9 are used as given; TileDB refuses to compress above 9.
 */
#define ZLIB_CONST		/* next_in is then a pointer to const */
#include <zlib.h>

#include "framing.h"

#define GZIP_MAX_LEVEL 9

/* Part sizes are u32 (§4.1), so they always fit zlib's uInt. */
_Static_assert(sizeof(uInt) >= sizeof(uint32_t), "zlib's uInt narrower than 32 bits");

/* Explain an inflate() outcome other than a stream ending exactly at n. */
static tf_status inflate_failure(const z_stream *z, int ret, size_t n, tf_error *err)
{
	if (ret == Z_STREAM_END)
		return tf_err(err, TF_E_CORRUPT, "stream holds %zu bytes, header says %zu",
			      n - z->avail_out, n);
	if (ret == Z_BUF_ERROR && z->avail_out == 0)
		return tf_err(err, TF_E_CORRUPT, "stream holds more than the %zu bytes the header says",
			      n);
	if (ret == Z_BUF_ERROR)
		return tf_err(err, TF_E_CORRUPT, "truncated zlib stream (%zu of %zu bytes decoded)",
			      n - z->avail_out, n);
	if (ret == Z_MEM_ERROR)
		return tf_err(err, TF_E_NOMEM, "zlib ran out of memory");
	return tf_err(err, TF_E_CORRUPT, "bad zlib stream: %s", z->msg ? z->msg : "unknown error");
}

static tf_status decode_part(const tf_filter_opts *o, const tf_stage *st, tf_span src,
			     uint8_t *dst, size_t n, tf_error *err)
{
	uint8_t none;	/* inflate() rejects a NULL output even when it is empty */
	z_stream z = { 0 };
	int ret;

	(void)o;
	(void)st;
	if (inflateInit(&z) != Z_OK)
		return tf_err(err, TF_E_NOMEM, "cannot initialise zlib");
	z.next_in = src.p;
	z.avail_in = (uInt)src.n;
	z.next_out = n ? dst : &none;
	z.avail_out = (uInt)n;
	ret = inflate(&z, Z_FINISH);
	inflateEnd(&z);
	/* TileDB only asks for Z_STREAM_END; the part must also be exactly
	 * one stream of exactly n bytes, as every writer produces. */
	if (ret != Z_STREAM_END || z.avail_out != 0)
		return inflate_failure(&z, ret, n, err);
	if (z.avail_in != 0)
		return tf_err(err, TF_E_CORRUPT, "%u bytes after the end of the zlib stream",
			      z.avail_in);
	return TF_OK;
}

static tf_status check(const tf_filter_opts *o, tf_error *err)
{
	return tf_framing_check_level(o, GZIP_MAX_LEVEL, "highest zlib level", err);
}

static tf_status encode_part(const tf_filter_opts *o, const tf_stage *st, tf_span src,
			     tf_buf *out, tf_error *err)
{
	int level = o->level < 0 ? Z_DEFAULT_COMPRESSION : o->level;
	static const uint8_t none;	/* deflate() wants a non-NULL input */
	z_stream z = { 0 };
	uint8_t *at;
	uint32_t room;
	tf_status rc;
	int ret;

	(void)st;
	if ((rc = check(o, err)) != TF_OK)
		return tf_err_prefix(err, "gzip");
	if (deflateInit(&z, level) != Z_OK)
		return tf_err(err, TF_E_NOMEM, "gzip: cannot initialise zlib");
	rc = tf_framing_room(out, deflateBound(&z, (uLong)src.n), &at, &room, err);
	if (rc != TF_OK) {
		deflateEnd(&z);
		return rc;
	}
	z.next_in = src.n ? src.p : &none;
	z.avail_in = (uInt)src.n;
	z.next_out = at;
	z.avail_out = room;
	/* One deflate(Z_FINISH) into room for the worst case, as TileDB does:
	 * the stream then depends only on the input and the level. */
	ret = deflate(&z, Z_FINISH);
	deflateEnd(&z);
	if (ret != Z_STREAM_END)
		return tf_err(err, TF_E_INVAL, "gzip: deflate failed (%d)", ret);
	out->len += room - z.avail_out;
	return TF_OK;
}

static const tf_codec codec = { "gzip", decode_part, encode_part };

TF_FRAMING_FUNCTIONS(codec)

const tf_filter_class tf_filter_gzip = {
	.id = TF_F_GZIP,
	.name = "gzip",
	.layout = TF_OPTS_COMPRESSOR,
	.compressor = 1,
	.consumes_md = true,
	.check = check,
	.decode = framed_decode,
	.encode = framed_encode,
};
