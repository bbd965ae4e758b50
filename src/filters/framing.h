/*
 * framing.h - the compression-filter framing shared by GZIP, ZSTD, LZ4,
 * RLE (fixed path), BZIP2, DOUBLE_DELTA and DELTA (FORMAT-NOTES §4.1).
 *
 * Header in md:  u32 n_md_parts, u32 n_data_parts,
 *                (u32 orig_len, u32 comp_len) per md part, then per data part.
 * Data:          codec(md part 0) .. codec(data part 0) .. back to back.
 * Every part is an independent codec stream; decoded md parts become the
 * new metadata, decoded data parts the new data.
 */
#ifndef TF_FRAMING_H
#define TF_FRAMING_H

#include "../tf_filter.h"

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

#endif
