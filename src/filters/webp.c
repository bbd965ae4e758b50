/*
 * webp.c - WEBP (filter type 18): each part is one WebP image
 * (FORMAT.md §4.18, tiledb/sm/filter/webp_filter.cc).
 *
 * Header in md:  u32 n_parts, then u32 enc_len per part; the metadata of
 *                earlier filters follows unchanged.
 * Data:          one WebP bitstream (RIFF container) per part.
 * An image has y_extent rows of x_extent bytes: x_extent / depth pixels of
 * depth 3 (RGB, BGR) or 4 (RGBA, BGRA) bytes.  Only UINT8 data of 2-D dense
 * tiles gets here, and chunking is off, so a part is a whole tile.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include "filters/tf_filter.h"

#ifdef HAVE_WEBP
#include <webp/decode.h>
#include <webp/encode.h>

/* The format option (tiledb/api/c_api/filter/filter_api_enum.h). */
enum { WEBP_RGB = 1, WEBP_BGR = 2, WEBP_RGBA = 3, WEBP_BGRA = 4 };
/* WebP's own limit on either side of an image, which TileDB enforces. */
#define WEBP_MAX_SIDE 16383

typedef struct geometry {
	int width, height, stride;	/* pixels, rows, bytes per row */
	size_t bytes;			/* of one decoded image */
} geometry;

static tf_status image_geometry(const tf_filter_opts *o, const tf_stage *st, geometry *g,
				tf_error *err)
{
	unsigned depth;

	if (st->type != TF_DT_UINT8)
		return tf_err(err, TF_E_INVAL, "webp takes uint8 data, not %s",
			      tf_datatype_name(st->type));
	if (o->webp_format < WEBP_RGB || o->webp_format > WEBP_BGRA)
		return tf_err(err, TF_E_INVAL, "webp format %u is not rgb (1), bgr (2), rgba (3) "
			      "or bgra (4)", o->webp_format);
	depth = o->webp_format < WEBP_RGBA ? 3 : 4;
	if (o->x_extent == 0 || o->y_extent == 0 || o->x_extent % depth != 0)
		return tf_err(err, TF_E_INVAL, "webp extents %ux%u: both must be positive and "
			      "x_extent a multiple of %u bytes", o->y_extent, o->x_extent, depth);
	if (o->y_extent > WEBP_MAX_SIDE || o->x_extent / depth > WEBP_MAX_SIDE)
		return tf_err(err, TF_E_INVAL, "webp image of %ux%u pixels exceeds %d on a side",
			      o->x_extent / depth, o->y_extent, WEBP_MAX_SIDE);
	g->width = (int)(o->x_extent / depth);
	g->height = o->y_extent;
	g->stride = o->x_extent;
	g->bytes = (size_t)o->x_extent * o->y_extent;
	return TF_OK;
}

/* ---- decode ----------------------------------------------------------------------- */

typedef uint8_t *(*decode_into_fn)(const uint8_t *data, size_t size, uint8_t *out,
				   size_t out_size, int stride);

static decode_into_fn decoder_for(uint8_t format)
{
	switch (format) {
	case WEBP_RGB: return WebPDecodeRGBInto;
	case WEBP_BGR: return WebPDecodeBGRInto;
	case WEBP_RGBA: return WebPDecodeRGBAInto;
	default: return WebPDecodeBGRAInto;
	}
}

/* Decode one image into dst[g->bytes]; its size must be what the options say,
 * or part of dst would be left unwritten. */
static tf_status decode_image(const tf_filter_opts *o, const geometry *g, tf_span in,
			      uint8_t *dst, tf_error *err)
{
	int w, h;

	if (!WebPGetInfo(in.p, in.n, &w, &h))
		return tf_err(err, TF_E_CORRUPT, "not a WebP image");
	if (w != g->width || h != g->height)
		return tf_err(err, TF_E_CORRUPT, "image is %dx%d pixels, the options say %dx%d",
			      w, h, g->width, g->height);
	if (!decoder_for(o->webp_format)(in.p, in.n, dst, g->bytes, g->stride))
		return tf_err(err, TF_E_CORRUPT, "libwebp cannot decode the image");
	return TF_OK;
}

static tf_status decode(const tf_filter_opts *o, const tf_stage *st, tf_stream *s, tf_error *err)
{
	tf_reader md = tf_reader_of(s->md), data = tf_reader_of(s->data);
	tf_buf *out = s->data_out;
	uint32_t n;
	tf_span lens;
	geometry g;
	tf_status rc;

	if ((rc = image_geometry(o, st, &g, err)) != TF_OK)
		return rc;
	if ((rc = tf_get_u32(&md, &n, "part count", err)) != TF_OK ||
	    (rc = tf_get_span(&md, 4 * (uint64_t)n, &lens, "part sizes", err)) != TF_OK)
		return tf_err_prefix(err, "webp header");
	if ((rc = tf_stage_output(st, out, tf_size_mul(n, g.bytes), err)) != TF_OK)
		return tf_err_prefix(err, "webp: %u images of %zu bytes", n, g.bytes);
	for (uint32_t i = 0; i < n; i++) {
		tf_span in;

		if ((rc = tf_get_span(&data, tf_le32(lens.p + 4 * (size_t)i), &in, "image", err)) != TF_OK ||
		    (rc = decode_image(o, &g, in, out->p + out->len, err)) != TF_OK)
			return tf_err_prefix(err, "webp part %u", i);
		out->len += g.bytes;
	}
	if (data.n != 0)
		return tf_err(err, TF_E_CORRUPT, "webp: %zu bytes of data beyond its images", data.n);
	s->md = tf_span_of(md.p, md.n);
	s->data = tf_span_of(out->p, out->len);
	return TF_OK;
}

/* ---- encode ----------------------------------------------------------------------- */

/* One image as WebP in memory owned by libwebp (WebPFree); 0 on failure. */
static size_t encode_image(const tf_filter_opts *o, const geometry *g, const uint8_t *px,
			   uint8_t **webp)
{
	int w = g->width, h = g->height, stride = g->stride;
	float q = o->quality;

	switch (o->webp_format) {
	case WEBP_RGB:
		return o->lossless ? WebPEncodeLosslessRGB(px, w, h, stride, webp)
				   : WebPEncodeRGB(px, w, h, stride, q, webp);
	case WEBP_BGR:
		return o->lossless ? WebPEncodeLosslessBGR(px, w, h, stride, webp)
				   : WebPEncodeBGR(px, w, h, stride, q, webp);
	case WEBP_RGBA:
		return o->lossless ? WebPEncodeLosslessRGBA(px, w, h, stride, webp)
				   : WebPEncodeRGBA(px, w, h, stride, q, webp);
	default:
		return o->lossless ? WebPEncodeLosslessBGRA(px, w, h, stride, webp)
				   : WebPEncodeBGRA(px, w, h, stride, q, webp);
	}
}

/* Encode one part as a new data part and record its size in hdr. */
static tf_status encode_part(const tf_filter_opts *o, const geometry *g, const tf_buf *part,
			     tf_buf *hdr, tf_parts *out, tf_error *err)
{
	uint8_t *webp = NULL;
	size_t n;
	tf_status rc;

	/* TileDB reads a whole image from each part whatever its length;
	 * refuse a part of any other size instead of reading past it. */
	if (part->len != g->bytes)
		return tf_err(err, TF_E_INVAL, "webp: part of %zu bytes, an image is %zu",
			      part->len, g->bytes);
	n = encode_image(o, g, part->p, &webp);
	if (n == 0 || n > UINT32_MAX)
		rc = tf_err(err, TF_E_INVAL, "libwebp cannot encode the image");
	else if ((rc = tf_buf_put_u32(hdr, (uint32_t)n, err)) == TF_OK)
		rc = tf_parts_add_copy(out, webp, n, err);
	WebPFree(webp);
	return rc;
}

/*
 * TileDB prepends each encoded part to its output, so with several parts
 * the images end up in reverse order of their recorded sizes and do not
 * decode (FORMAT.md §12 Q8).  We keep them in order; with the one part
 * a real pipeline gives, the bytes are the same.
 */
static tf_status encode(const tf_filter_opts *o, const tf_stage *st, tf_parts *md,
			tf_parts *data, tf_error *err)
{
	tf_buf hdr = TF_BUF_INIT(SIZE_MAX);
	tf_parts images;
	geometry g;
	tf_status rc;

	if ((rc = image_geometry(o, st, &g, err)) != TF_OK)
		return rc;
	if (o->quality < 0.0f || o->quality > 100.0f)
		return tf_err(err, TF_E_INVAL, "webp quality %g is outside [0, 100]", (double)o->quality);
	tf_parts_init(&images);
	rc = tf_buf_put_u32(&hdr, (uint32_t)data->n, err);
	for (size_t i = 0; i < data->n && rc == TF_OK; i++)
		rc = encode_part(o, &g, &data->v[i], &hdr, &images, err);
	if (rc == TF_OK)
		rc = tf_parts_prepend(md, &hdr, err);
	if (rc != TF_OK) {
		tf_buf_free(&hdr);
		tf_parts_free(&images);
		return rc;
	}
	tf_parts_free(data);
	*data = images;
	return TF_OK;
}

#else /* !HAVE_WEBP */

static tf_status decode(const tf_filter_opts *o, const tf_stage *st, tf_stream *s, tf_error *err)
{
	(void)o; (void)st; (void)s;
	return tf_err(err, TF_E_UNSUPPORTED, "not built with webp");
}

static tf_status encode(const tf_filter_opts *o, const tf_stage *st, tf_parts *md,
			tf_parts *data, tf_error *err)
{
	(void)o; (void)st; (void)md; (void)data;
	return tf_err(err, TF_E_UNSUPPORTED, "not built with webp");
}

#endif /* HAVE_WEBP */

const tf_filter_class tf_filter_webp = {
	.id = TF_F_WEBP,
	.name = "webp",
	.layout = TF_OPTS_WEBP,
	.decode = decode,
	.encode = encode,
};
