/*
 * framing.h - the compression-filter framing shared by GZIP, ZSTD, LZ4,
 * RLE (fixed path), BZIP2, DOUBLE_DELTA and DELTA (FORMAT.md §4.1).
 *
 * Header in md:  u32 n_md_parts, u32 n_data_parts,
 *                (u32 orig_len, u32 comp_len) per md part, then per data part.
 * Data:          codec(md part 0) .. codec(data part 0) .. back to back.
 * Every part is an independent codec stream; decoded md parts become the
 * new metadata, decoded data parts the new data.
 *
 * The shape of the encode output (one header part that opens with the two
 * part counts, one data part, both replacing every part given) is common to
 * all metadata-consuming filters, so AES and the var-string layouts of RLE
 * and DICTIONARY build theirs with tf_framing_begin/end as well.
 */
#ifndef TF_FRAMING_H
#define TF_FRAMING_H

#include "filters/tf_filter.h"

typedef struct tf_codec {
	const char *name;
	/* Decode src into exactly n bytes at dst; anything else is an error. */
	tf_status (*decode_part)(const tf_filter_opts *o, const tf_stage *st, tf_span src,
				 uint8_t *dst, size_t n, tf_error *err);
	/* Encode src, appending the stream to out. */
	tf_status (*encode_part)(const tf_filter_opts *o, const tf_stage *st, tf_span src,
				 tf_buf *out, tf_error *err);
} tf_codec;

tf_status tf_framing_decode(const tf_codec *c, const tf_filter_opts *o, const tf_stage *st,
			    tf_stream *s, tf_error *err);
tf_status tf_framing_encode(const tf_codec *c, const tf_filter_opts *o, const tf_stage *st,
			    tf_parts *md, tf_parts *data, tf_error *err);

/*
 * Define framed_decode() and framed_encode(), the decode and encode of a
 * filter class that is the framing around `codec` (a static tf_codec).  The
 * class signatures carry no codec, so each filter needs its own pair.
 */
#define TF_FRAMING_FUNCTIONS(codec)							\
	static tf_status framed_decode(const tf_filter_opts *o, const tf_stage *st,	\
				       tf_stream *s, tf_error *err)			\
	{										\
		return tf_framing_decode(&(codec), o, st, s, err);			\
	}										\
	static tf_status framed_encode(const tf_filter_opts *o, const tf_stage *st,	\
				       tf_parts *md, tf_parts *data, tf_error *err)	\
	{										\
		return tf_framing_encode(&(codec), o, st, md, data, err);		\
	}

/*
 * Room at the end of out for one encoded part of at most `bound` bytes
 * (*room), capped at what a u32 part size can record: a codec with no more
 * room than that fails instead of writing a part no header can describe.
 * For the codecs that take an output size and a buffer (GZIP, BZIP2).
 */
static inline tf_status tf_framing_room(tf_buf *out, uint64_t bound, uint8_t **at,
					uint32_t *room, tf_error *err)
{
	*room = bound > UINT32_MAX ? UINT32_MAX : (uint32_t)bound;
	return tf_buf_grow(out, *room, at, err);
}

/*
 * Check a compressor level against the highest its library accepts; TileDB
 * throws on higher ones.  The check() of GZIP and BZIP2, also run by their
 * encoders since pipelines read from stored schemas are never checked.
 */
static inline tf_status tf_framing_check_level(const tf_filter_opts *o, int32_t max,
					       const char *what_max, tf_error *err)
{
	if (o->level > max)
		return tf_err(err, TF_E_INVAL, "level %d is above %d, the %s", o->level, max,
			      what_max);
	return TF_OK;
}

/* The encode output of a metadata-consuming filter (see the top). */
typedef struct tf_framing_out {
	tf_parts md, data;
	tf_buf *hdr;		/* the one md part */
	tf_buf *out;		/* the one data part */
} tf_framing_out;

/* Start f: its two parts, the header holding the counts of md and data.
 * f must be passed to tf_framing_end whatever this returns. */
tf_status tf_framing_begin(tf_framing_out *f, const tf_parts *md, const tf_parts *data,
			   tf_error *err);
/* When rc is TF_OK, f's parts replace md and data; else they are freed.
 * Returns rc. */
tf_status tf_framing_end(tf_framing_out *f, tf_parts *md, tf_parts *data, tf_status rc);

#endif
