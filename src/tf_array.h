/*
 * tf_array.h - a TileDB array directory decoded with no configuration: its
 * own schemas and fragment metadata say how every file is stored
 * (FORMAT-NOTES §7-§9).
 *
 *   - data files of every fragment (a<k>.tdb, a<k>_var.tdb, a<k>_validity.tdb,
 *     d<j>.tdb, t.tdb, dt.tdb, dci.tdb, and the older name-based layouts):
 *     each decoded with the pipeline, datatype and format version of the
 *     schema its own fragment names, its tiles located by the fragment
 *     metadata, offsets folded into string data rebuilt;
 *   - generic tiles: schemas, enumerations, fragment metadata (its footer
 *     follows as stored), consolidated fragment metadata, array metadata,
 *     delete and update commits.
 * Everything is read lazily and cached: opening reads nothing; a file's
 * description reads its fragment's metadata once.  Thread-safe.
 */
#ifndef TF_ARRAY_H
#define TF_ARRAY_H

#include <stdbool.h>
#include <stdint.h>

#include "tf_file.h"
#include "tf_fragment.h"
#include "tf_keys.h"
#include "tf_schema.h"
#include "tf_status.h"

typedef struct tf_array tf_array;

/* Whether dir of src is the root of a TileDB array (__schema/ or
 * __array_schema.tdb). */
bool tf_array_detect(tf_source *src, const char *dir);

/* The array at dir of src (both kept by reference: src must outlive it);
 * key: for encrypted arrays (may be NULL), also kept by reference. */
tf_status tf_array_open(tf_source *src, const char *dir, const tf_key *key, tf_array **out,
			tf_error *err);
void tf_array_free(tf_array *a);

typedef struct tf_array_file {
	tf_file_spec spec;		/* open `path` with it */
	char *path;			/* in the array's source */
	const char *kind;		/* "data", "offsets", "var", "validity", "schema", ... */
	char *field;			/* attribute/dimension name, or NULL */
	char *fragment;			/* fragment directory name, or NULL */
	uint32_t format_version;	/* 0 if not known */
	/* owned storage behind spec: */
	tf_fragment_file ff;
	char *var_path;
} tf_array_file;

/*
 * How to decode `rel` (a path relative to the array directory).
 * TF_E_INVAL: not a file tilefs decodes (shown as it is); other errors: it
 * is, but its array or fragment metadata cannot be read.
 */
tf_status tf_array_describe(tf_array *a, const char *rel, tf_array_file *out, tf_error *err);
void tf_array_file_clear(tf_array_file *f);

/* Whether rel names a file the array decodes, judged from the name alone
 * (nothing is read): for listing files of an array that cannot be read. */
bool tf_array_is_decoded_name(const char *rel);

/* The newest schema (by name order, __array_schema.tdb oldest). */
tf_status tf_array_latest_schema(tf_array *a, const tf_schema **out, char **name, tf_error *err);

#endif
