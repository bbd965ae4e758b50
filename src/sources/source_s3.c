/*
 * source_s3.c - S3-compatible object storage as a source (not built yet).
 */
#include "config.h"

#include "sources/source_impl.h"

tf_status tf_source_s3(const char *spec, const struct tf_s3_settings *s3, tf_source **out,
		       tf_error *err)
{
	(void)s3;
	*out = NULL;
	return tf_err(err, TF_E_UNSUPPORTED, "%s: object storage sources are not built yet", spec);
}
