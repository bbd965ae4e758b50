/* delta.c - STUB: to be implemented. */
#include "../tf_filter.h"

static tf_status decode(const tf_filter_opts *o, const tf_stage *st, tf_stream *s, tf_error *err)
{
	(void)o; (void)st; (void)s;
	return tf_err(err, TF_E_UNSUPPORTED, "not implemented yet");
}

static tf_status encode(const tf_filter_opts *o, const tf_stage *st, tf_parts *md,
			tf_parts *data, tf_error *err)
{
	(void)o; (void)st; (void)md; (void)data;
	return tf_err(err, TF_E_UNSUPPORTED, "not implemented yet");
}

const tf_filter_class tf_filter_delta = {
	.id = TF_F_DELTA,
	.name = "delta",
	.layout = TF_OPTS_REINTERPRET,
	.compressor = 8,
	.reinterpret_since = 19,
	.consumes_md = true,
	.decode = decode,
	.encode = encode,
};
