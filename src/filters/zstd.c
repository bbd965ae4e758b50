/*
 * zstd.c - ZSTD (filter type 2): one standard zstd frame per part
 * (FORMAT.md §4.3, tiledb/sm/compressors/zstd_compressor.cc).
 * Levels below -7 mean 3; every other level is used as given.
 */
#include <zstd.h>

#include "framing.h"

static void *dctx_new(void) { return ZSTD_createDCtx(); }
static void dctx_free(void *p) { ZSTD_freeDCtx(p); }
static void *cctx_new(void) { return ZSTD_createCCtx(); }
static void cctx_free(void *p) { ZSTD_freeCCtx(p); }

static tf_status decode_part(const tf_filter_opts *o, const tf_stage *st, tf_span src,
			     uint8_t *dst, size_t n, tf_error *err)
{
	ZSTD_DCtx *dctx = tf_scratch_get(st->scratch, TF_SLOT_ZSTD_D, dctx_new, dctx_free);
	size_t got;

	(void)o;
	if (!dctx)
		return tf_err(err, TF_E_NOMEM, "cannot create a zstd context");
	got = ZSTD_decompressDCtx(dctx, dst, n, src.p, src.n);
	if (ZSTD_isError(got))
		return tf_err(err, TF_E_CORRUPT, "%s", ZSTD_getErrorName(got));
	if (got != n)
		return tf_err(err, TF_E_CORRUPT, "frame holds %zu bytes, header says %zu", got, n);
	return TF_OK;
}

static tf_status encode_part(const tf_filter_opts *o, const tf_stage *st, tf_span src,
			     tf_buf *out, tf_error *err)
{
	ZSTD_CCtx *cctx = tf_scratch_get(st->scratch, TF_SLOT_ZSTD_C, cctx_new, cctx_free);
	int level = o->level < -7 ? 3 : o->level;
	size_t bound = ZSTD_compressBound(src.n), got;
	uint8_t *at;
	tf_status rc;

	if (!cctx)
		return tf_err(err, TF_E_NOMEM, "cannot create a zstd context");
	if ((rc = tf_buf_grow(out, bound, &at, err)) != TF_OK)
		return rc;
	got = ZSTD_compressCCtx(cctx, at, bound, src.p, src.n, level);
	if (ZSTD_isError(got))
		return tf_err(err, TF_E_INVAL, "zstd: %s", ZSTD_getErrorName(got));
	out->len += got;
	return TF_OK;
}

static const tf_codec codec = { "zstd", decode_part, encode_part };

TF_FRAMING_FUNCTIONS(codec)

const tf_filter_class tf_filter_zstd = {
	.id = TF_F_ZSTD,
	.name = "zstd",
	.layout = TF_OPTS_COMPRESSOR,
	.compressor = 2,
	.consumes_md = true,
	.decode = framed_decode,
	.encode = framed_encode,
};
