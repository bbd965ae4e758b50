/* none.c - NONE (filter type 0): no metadata, data unchanged (§4.20).
 * Also what a "no compression" compression filter is serialized as. */
#include "filters/tf_filter.h"

static tf_status decode(const tf_filter_opts *o, const tf_stage *st, tf_stream *s, tf_error *err)
{
	(void)o; (void)st; (void)s; (void)err;
	return TF_OK;
}

static tf_status encode(const tf_filter_opts *o, const tf_stage *st, tf_parts *md,
			tf_parts *data, tf_error *err)
{
	(void)o; (void)st; (void)md; (void)data; (void)err;
	return TF_OK;
}

const tf_filter_class tf_filter_none = {
	.id = TF_F_NONE,
	.name = "none",
	.layout = TF_OPTS_NONE,
	.decode = decode,
	.encode = encode,
};
