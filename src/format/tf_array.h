/*
 * tf_array.h - a TileDB array directory decoded with no configuration: its
 * own schemas and fragment metadata say how every file is stored
 * (FORMAT.md §7-§9).
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

#include "format/tf_file.h"
#include "format/tf_fragment.h"
#include "util/tf_keys.h"
#include "format/tf_schema.h"
#include "util/tf_status.h"

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

/* The array's directory in its source, for messages. */
const char *tf_array_dir(const tf_array *a);
/* Its source (for how many requests are worth keeping in flight). */
tf_source *tf_array_source(const tf_array *a);

/* The newest schema (by name order, __array_schema.tdb oldest). */
tf_status tf_array_latest_schema(tf_array *a, const tf_schema **out, char **name, tf_error *err);

/*
 * Reading beneath the array, for readers of cells (tf_snapshot, views).
 * Every rel is relative to the array's root, without "." or ".."
 * components; these are the only ways such readers touch storage.
 */
/* Call fn for every entry of directory rel ("." the root); a missing
 * directory has no entries.  fn returns non-zero to stop. */
typedef int (*tf_array_list_fn)(void *ctx, const char *name, bool is_dir);
tf_status tf_array_list(tf_array *a, const char *rel, tf_array_list_fn fn, void *ctx, tf_error *err);
/* The whole of a small plain file (commit lists, vacuum lists). */
tf_status tf_array_read(tf_array *a, const char *rel, size_t limit, tf_buf *out, tf_error *err);
/* The decoded payload of a file of one generic tile (.del, enumerations). */
tf_status tf_array_read_generic(tf_array *a, const char *rel, tf_buf *payload, tf_error *err);
/* The metadata of the fragment in directory rel_dir ("__fragments/NAME",
 * or "NAME" before format 12), read once and kept by the array: *out stays
 * valid until the caller gives it back with tf_array_fragment_put (the
 * array frees idle fragments only). */
tf_status tf_array_fragment(tf_array *a, const char *rel_dir, tf_fragment **out, tf_error *err);
void tf_array_fragment_put(tf_array *a, const tf_fragment *fr);
/* Bytes of metadata the array keeps for idle fragments (16 MiB unless
 * set; views set a 16th of their cache's budget): beyond, the least
 * recently used go, whatever their number (1,024 at most). */
void tf_array_set_idle_limit(tf_array *a, size_t bytes);
size_t tf_array_idle_bytes(tf_array *a);	/* kept now, for tests */
/* Idle fragments go, oldest first, until their metadata is within bytes. */
void tf_array_trim_idle(tf_array *a, size_t bytes);
/* The key given at open (NULL if none), for generic tiles read from memory. */
const tf_key *tf_array_key(const tf_array *a);
/* Whether schema sc of the array (one it gave out) is encrypted: then so is
 * every file written with it (§9), and what they decode to is plaintext. */
bool tf_array_schema_encrypted(tf_array *a, const tf_schema *sc);
/* Index a file the array decodes (tf_array_describe + tf_file_open; the
 * file borrows the array's source). */
tf_status tf_array_open_file(tf_array *a, const char *rel, tf_file **out, tf_error *err);

#endif
