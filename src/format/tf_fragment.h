/*
 * tf_fragment.h - a fragment's metadata (__fragment_metadata.tdb, FORMAT.md
 * §8): which schema it was written with, its format version, and for every
 * field where each tile is stored and how big it is decoded, so that data
 * files can be indexed without walking their chunk headers.
 *
 * Formats 1-2 keep everything in one generic tile; from format 3 on the
 * file is a run of generic tiles followed by a plain footer that says where
 * each of them is.  Per-field tile lists are read on first use.
 */
#ifndef TF_FRAGMENT_H
#define TF_FRAGMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "format/tf_file.h"
#include "util/tf_keys.h"
#include "format/tf_schema.h"
#include "util/tf_status.h"

typedef struct tf_fragment tf_fragment;

/* The schema a fragment names (format >= 10), by file name under __schema/. */
typedef tf_status (*tf_schema_lookup)(void *ctx, const char *name, const tf_schema **out,
				      tf_error *err);

/*
 * Read the metadata of the fragment in directory dir of src (which must
 * outlive the fragment), whose name is `name`
 * (it carries the format version for formats 3-9).  Fragments before format
 * 10 use `legacy` (the array's __array_schema.tdb); later ones get theirs
 * from lookup.
 */
tf_status tf_fragment_open(tf_source *src, const char *dir, const char *name, const tf_schema *legacy,
			   tf_schema_lookup lookup, void *ctx, const tf_key *key,
			   tf_fragment **out, tf_error *err);
void tf_fragment_free(tf_fragment *fr);

uint32_t tf_fragment_version(const tf_fragment *fr);
const tf_schema *tf_fragment_schema(const tf_fragment *fr);
/* Where the generic tiles end and the footer starts (0: no footer, v1-2). */
uint64_t tf_fragment_footer_offset(const tf_fragment *fr);

typedef enum { TF_ROLE_DATA, TF_ROLE_OFFSETS, TF_ROLE_VAR, TF_ROLE_VALIDITY } tf_role;
const char *tf_role_name(tf_role r);

/* How to decode one data file of the fragment. */
typedef struct tf_fragment_file {
	tf_file_spec spec;		/* pipeline, type, tiles...; var_data is a file name */
	const char *field;		/* attribute or dimension name, "__coords", ... */
	tf_role role;
	tf_tile_layout *tiles, *var_tiles; /* owned by this struct */
	char *var_file;			/* owned; spec.var_data points here */
} tf_fragment_file;

/* Describe data file `file` (a name in the fragment directory).
 * TF_E_INVAL if the fragment has no such file. */
tf_status tf_fragment_describe(tf_fragment *fr, const char *file, tf_fragment_file *out,
			       tf_error *err);
void tf_fragment_file_clear(tf_fragment_file *ff);

/* ---- facts for readers of cells (views, tf_snapshot) ---------------------------------- */

const char *tf_fragment_name(const tf_fragment *fr);
/* Bytes the fragment holds now (its lists grow as they are read). */
size_t tf_fragment_bytes(tf_fragment *fr);
/* Dense fragment (whole space tiles) or sparse (cells with coordinates). */
bool tf_fragment_dense(const tf_fragment *fr);
/* Per-cell timestamps (t.tdb) and delete metadata (dt.tdb, dci.tdb). */
bool tf_fragment_has_timestamps(const tf_fragment *fr);
bool tf_fragment_has_delete_meta(const tf_fragment *fr);
/* Sparse: tiles in each data file. */
uint64_t tf_fragment_sparse_tiles(const tf_fragment *fr);
/* Cells in tile t of ntiles (dense: the tile extents' product; sparse:
 * capacity, the last one the footer's count). */
uint64_t tf_fragment_tile_cells(const tf_fragment *fr, uint64_t t, uint64_t ntiles);
/* Dimension d's non-empty domain: lower and upper bound as stored (the
 * dimension's type; a var-sized dimension's strings).  Points into fr. */
tf_status tf_fragment_ned(const tf_fragment *fr, size_t d, tf_span *lo, tf_span *hi, tf_error *err);
/* The name of the file of field (attribute, dimension, "__timestamps",
 * "__delete_timestamps", legacy "__coords") in role; false if the
 * fragment has no such file. */
bool tf_fragment_field_file(const tf_fragment *fr, const char *field, tf_role role, char *buf,
			    size_t n);

#endif
