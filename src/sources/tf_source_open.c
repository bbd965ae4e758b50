/*
 * tf_source_open.c - a source by its spelling (contract in tf_source_open.h):
 * the factory, the one file that knows every kind, so that tf_source.c
 * (the interface) and the kinds beneath it depend on nothing above them.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sources/source_impl.h"
#include "sources/source_local.h"
#include "sources/tf_source_open.h"

tf_status tf_source_open(const char *spec, const struct tf_s3_settings *s3, tf_source **out,
			 tf_error *err)
{
	if (!strncmp(spec, "s3://", 5))
		return tf_source_s3(spec, s3, out, err);
	return tf_source_local(spec, out, err);
}

tf_status tf_source_locate(const char *spec, const struct tf_s3_settings *s3, tf_source **src,
			   char **rel, tf_error *err)
{
	const char *key = !strncmp(spec, "s3://", 5) ? strchr(spec + 5, '/') : NULL;
	char *full = NULL, *bucket;
	tf_status rc;

	*src = NULL;
	if (!strncmp(spec, "s3://", 5)) {
		if (!(bucket = strndup(spec, key ? (size_t)(key - spec) : strlen(spec))))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		*rel = strdup(key && key[1] ? key + 1 : ".");
		rc = *rel ? tf_source_s3(bucket, s3, src, err) : tf_err(err, TF_E_NOMEM, "out of memory");
		free(bucket);
	} else if (!(full = realpath(spec, NULL))) {
		return tf_err(err, errno == ENOENT ? TF_E_NOTFOUND : TF_E_IO, "%s: %s", spec, strerror(errno));
	} else {
		*rel = strdup(full[1] ? full + 1 : ".");
		rc = *rel ? tf_source_local("/", src, err) : tf_err(err, TF_E_NOMEM, "out of memory");
	}
	free(full);
	if (rc != TF_OK) {
		free(*rel);
		*rel = NULL;
	}
	return rc;
}
