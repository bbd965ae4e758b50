/*
 * tf_array_path.h - what a file beneath a TileDB array is, from its path
 * alone (FORMAT.md §8.1): a schema, other generic tiles, a fragment's
 * metadata or data, or raw bytes.  Included by tf_array.c and
 * tf_array_path.c only (tf_array.h is the door).
 */
#ifndef TF_ARRAY_PATH_H
#define TF_ARRAY_PATH_H

#include <stdbool.h>

#define LEGACY_SCHEMA "__array_schema.tdb"

typedef enum { P_RAW, P_GENERIC, P_FRAG_META, P_FRAG_DATA } path_kind;

typedef struct path_info {
	path_kind kind;
	const char *what;	/* for generic files */
	char frag[256], file[256];
	bool in_fragments_dir;	/* __fragments/<frag>/ (format >= 12) */
} path_info;

/* Decide from rel (relative to the array's root) what it is. */
void tf_array_classify(const char *rel, path_info *pi);

#endif
