/*
 * checksum_sha256.c - CHECKSUM_SHA256 (filter type 13): a 32-byte SHA-256
 * digest per part, verified on decode (FORMAT.md §4.15,
 * checksum_sha256_filter.cc).
 */
#include "checksum.h"

static const tf_digest_kind sha256 = { "sha256", EVP_sha256, 32 };

static tf_status decode(const tf_filter_opts *o, const tf_stage *st, tf_stream *s, tf_error *err)
{
	(void)o; (void)st;
	return tf_checksum_decode(&sha256, s, err);
}

static tf_status encode(const tf_filter_opts *o, const tf_stage *st, tf_parts *md,
			tf_parts *data, tf_error *err)
{
	(void)o; (void)st;
	return tf_checksum_encode(&sha256, md, data, err);
}

const tf_filter_class tf_filter_checksum_sha256 = {
	.id = TF_F_CHECKSUM_SHA256,
	.name = "checksum_sha256",
	.alias = "sha256",
	.layout = TF_OPTS_NONE,
	.decode = decode,
	.encode = encode,
};
