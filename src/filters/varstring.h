/*
 * varstring.h - what the var-string layouts of RLE and DICTIONARY share
 * (FORMAT.md §4.7, §4.8; tiledb/sm/filter/compression_filter.cc).
 *
 * Both code var-sized STRING_ASCII/UTF8 data as filter 0: the whole tile is
 * one chunk, its offsets tile is not stored, and decoding rebuilds the cell
 * offsets.  The chunk metadata of both opens with
 *     u32 0, u32 1 (md and data part counts), u32 uncompressed size,
 *     u32 compressed size, u32 offsets size (= cells x 8),
 *     u8 width (RLE: of each run length; DICTIONARY: of each id),
 *     u8 string length width,
 * the widths in bytes of the big-endian numbers stored after it (DICTIONARY
 * goes on with its dictionary) and in the chunk data.
 *
 * Private to rle.c and dictionary.c; the functions are static inline
 * because the build lists no shared .c file for them.
 */
#ifndef TF_VARSTRING_H
#define TF_VARSTRING_H

#include "framing.h"

typedef struct varstring_header {
	uint32_t n_md, n_data;	/* part counts, 0 and 1 (read only: tf_framing_begin writes them) */
	uint32_t uncompressed;	/* string bytes = the chunk's decoded size */
	uint32_t compressed;	/* bytes of the chunk data */
	uint32_t offsets_size;	/* cell count x 8 */
	uint8_t width;		/* RLE: bytes of each run length; DICTIONARY: of each id */
	uint8_t len_width;	/* bytes of each string length */
} varstring_header;

/* Read the common fields from *r, leaving *r after them.  `width_field`
 * names the first width in messages ("run length width"). */
static inline tf_status varstring_get_header(tf_reader *r, varstring_header *h,
					     const char *width_field, tf_error *err)
{
	tf_status rc;

	if ((rc = tf_get_u32(r, &h->n_md, "metadata part count", err)) != TF_OK ||
	    (rc = tf_get_u32(r, &h->n_data, "data part count", err)) != TF_OK ||
	    (rc = tf_get_u32(r, &h->uncompressed, "uncompressed size", err)) != TF_OK ||
	    (rc = tf_get_u32(r, &h->compressed, "compressed size", err)) != TF_OK ||
	    (rc = tf_get_u32(r, &h->offsets_size, "offsets size", err)) != TF_OK ||
	    (rc = tf_get_u8(r, &h->width, width_field, err)) != TF_OK)
		return rc;
	return tf_get_u8(r, &h->len_width, "string length width", err);
}

static inline bool varstring_valid_width(unsigned w)
{
	return w == 1 || w == 2 || w == 4 || w == 8;
}

/* Check what the fields must be; `what` names the header ("dictionary"),
 * `width_name` the first width ("id"). */
static inline tf_status varstring_check_header(const varstring_header *h, const char *what,
					       const char *width_name, tf_error *err)
{
	if (h->n_md != 0 || h->n_data != 1)
		return tf_err(err, TF_E_CORRUPT, "%s header claims %u metadata and %u data parts "
			      "instead of 0 and 1", what, h->n_md, h->n_data);
	if (!varstring_valid_width(h->width) || !varstring_valid_width(h->len_width))
		return tf_err(err, TF_E_CORRUPT, "%s header: %s/string length widths %u/%u are "
			      "not 1, 2, 4 or 8", what, width_name, h->width, h->len_width);
	return TF_OK;
}

/*
 * Start the decoded chunk: room for the strings in s->data_out and, when
 * the stage collects them, for the rebuilt cell offsets at *offs (else
 * NULL).  Call once the data has been checked against the header, so that
 * nothing is allocated for a lying one.
 */
static inline tf_status varstring_output(const tf_stage *st, const varstring_header *h,
					 tf_stream *s, uint8_t **offs, tf_error *err)
{
	tf_status rc = tf_stage_output(st, s->data_out, h->uncompressed, err);

	*offs = NULL;
	if (rc != TF_OK || !st->offsets)
		return rc;
	if ((rc = tf_buf_grow(st->offsets, h->offsets_size, offs, err)) != TF_OK)
		return tf_err_prefix(err, "cell offsets");
	return TF_OK;
}

/* The strings and cell offsets are written: hand them on.  The header was
 * all of the metadata, so none is left for earlier filters. */
static inline void varstring_done(const tf_stage *st, const varstring_header *h, tf_stream *s)
{
	s->data_out->len = h->uncompressed;
	if (st->offsets)
		st->offsets->len += h->offsets_size;
	s->md = tf_span_of(NULL, 0);
	s->data = tf_span_of(s->data_out->p, s->data_out->len);
}

/* ---- encoding ------------------------------------------------------------------- */

/* The cells of the chunk: cell i spans [offs[i], offs[i+1]), the last one
 * up to the end of the input. */
typedef struct varstring_cells {
	tf_span in;
	const uint64_t *offs;
	size_t n;
} varstring_cells;

static inline tf_span varstring_cell(const varstring_cells *c, size_t i)
{
	size_t end = i + 1 < c->n ? c->offs[i + 1] : c->in.n;

	return tf_span_of(c->in.p + c->offs[i], end - c->offs[i]);
}

/*
 * The cells to encode.  TileDB insists on var-string filters coming first
 * (§2.5), so the input is one data part and no metadata, and the cells
 * must tile it exactly, as TileDB's offsets do.  `what` names the coding
 * in messages ("rle on var strings").
 */
static inline tf_status varstring_input(const tf_stage *st, const tf_parts *md,
					const tf_parts *data, const char *what,
					varstring_cells *c, tf_error *err)
{
	/* *c is set on every path: once this is inlined, the compiler cannot
	 * tell that tf_err never returns TF_OK, and would warn in the caller. */
	*c = (varstring_cells){ .offs = st->cell_offsets, .n = st->ncells };
	if (md->n != 0 || data->n != 1)
		return tf_err(err, TF_E_INVAL, "%s must be the first filter", what);
	c->in = tf_span_of(data->v[0].p, data->v[0].len);
	if (!c->offs || c->n == 0)
		return tf_err(err, TF_E_INVAL, "%s needs the chunk's cell offsets", what);
	if (c->n > UINT32_MAX / 8 || c->in.n > UINT32_MAX)
		return tf_err(err, TF_E_INVAL, "var-string chunk of %zu cells and %zu bytes is too "
			      "large for its u32 header", c->n, c->in.n);
	for (size_t i = 0; i < c->n; i++)
		if ((i == 0 ? c->offs[0] != 0 : c->offs[i] < c->offs[i - 1]) || c->offs[i] > c->in.n)
			return tf_err(err, TF_E_INVAL, "cell offset %zu (%llu) breaks the order of a "
				      "%zu-byte chunk", i, (unsigned long long)c->offs[i], c->in.n);
	return TF_OK;
}

/* Smallest of 1, 2, 4, 8 bytes holding v (RLE and CompressionFilter's
 * compute_bytesize). */
static inline uint8_t varstring_width_for(uint64_t v)
{
	return v <= UINT8_MAX ? 1 : v <= UINT16_MAX ? 2 : v <= UINT32_MAX ? 4 : 8;
}

/* Append the fields after the part counts, which tf_framing_begin writes. */
static inline tf_status varstring_put_header(tf_buf *b, const varstring_header *h,
					     tf_error *err)
{
	tf_status rc;

	if ((rc = tf_buf_put_u32(b, h->uncompressed, err)) != TF_OK ||
	    (rc = tf_buf_put_u32(b, h->compressed, err)) != TF_OK ||
	    (rc = tf_buf_put_u32(b, h->offsets_size, err)) != TF_OK ||
	    (rc = tf_buf_put_u8(b, h->width, err)) != TF_OK)
		return rc;
	return tf_buf_put_u8(b, h->len_width, err);
}

#endif
