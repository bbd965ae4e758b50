/*
 * tf_source_open.h - a source by how the user spells it: the one place
 * that knows every kind (sources/source_local.c, sources/source_s3.c).
 * What a source is and does: tf_source.h.
 */
#ifndef TF_SOURCE_OPEN_H
#define TF_SOURCE_OPEN_H

#include "sources/tf_source.h"
#include "util/tf_status.h"

struct tf_s3_settings;

/*
 * Any source by its spelling: "s3://BUCKET[/PREFIX]" (settings from the
 * [s3] configuration, see tf_s3.h) or a local directory path.  s3 may be
 * NULL for a local path.
 */
tf_status tf_source_open(const char *spec, const struct tf_s3_settings *s3, tf_source **out,
			 tf_error *err);

/*
 * A file or directory the user named, as a source and a path in it (for
 * tiletool): "s3://BUCKET/KEY" gives the bucket and KEY; a local path is
 * resolved (symlinks the user named are theirs to follow) and given as a
 * path under the source "/".  *rel is malloc'd.
 */
tf_status tf_source_locate(const char *spec, const struct tf_s3_settings *s3, tf_source **src,
			   char **rel, tf_error *err);

#endif
