/*
 * checksum_md5.c - CHECKSUM_MD5 (filter type 12): a 16-byte MD5 digest per
 * part, verified on decode (FORMAT.md §4.15, checksum_md5_filter.cc).
 */
#include "checksum.h"

static const tf_digest_kind md5 = { "md5", EVP_md5, 16 };

static tf_status decode(const tf_filter_opts *o, const tf_stage *st, tf_stream *s, tf_error *err)
{
	(void)o; (void)st;
	return tf_checksum_decode(&md5, s, err);
}

static tf_status encode(const tf_filter_opts *o, const tf_stage *st, tf_parts *md,
			tf_parts *data, tf_error *err)
{
	(void)o; (void)st;
	return tf_checksum_encode(&md5, md, data, err);
}

const tf_filter_class tf_filter_checksum_md5 = {
	.id = TF_F_CHECKSUM_MD5,
	.name = "checksum_md5",
	.alias = "md5",
	.layout = TF_OPTS_NONE,
	.decode = decode,
	.encode = encode,
};
