/*
 * tf_view.h - array views: a TileDB array's cells as plain files, decoded
 * on demand (tilefs(1), "Views").
 *
 * Beside each array, in the folder TF_VIEWS_DIR ("@views": TileDB's own
 * names all begin with "__", so it never collides with one):
 *
 *   cells.csv                      the cells a read of the whole array
 *                                  returns now, one CSV record per cell
 *   cells.arrow                    the same cells as an Arrow IPC file
 *                                  (tf_arrow.h), listed last
 *   <attr>.raw                     dense arrays, each fixed-size, non-
 *                                  nullable attribute: the non-empty domain
 *                                  row-major, C order, little-endian
 *   <attr>.npy                     the same bytes behind a NumPy 1.0 header
 *   fragments/<fragment>/cells.csv the cells that fragment stores, in its
 *                                  storage order, not merged
 *   fragments/<fragment>/cells.arrow  the same as Arrow
 *
 * Text rules: tf_cells.h.  Merge rules: tf_merge.h.
 *
 * A tf_views is the views of one array in one state (a tf_snapshot): every
 * view opened from it shows that state, however the array changes, so one
 * open never mixes two states.  The driver keeps one per array and takes a
 * new one when tf_views_current() says the array changed (a new fragment,
 * a consolidation, a delete, a schema evolution); open views keep theirs.
 *
 * Sizes.  .raw and .npy sizes are known from fragment metadata (nothing is
 * decoded).  A CSV's (and a cells.arrow's: a CSV state whose blocks are
 * record batches) size is known only once every record has been
 * formatted (or remembered: tf_views_set_store): until then tf_view_size()
 * says "unknown", and tf_view_size_now() makes it known, formatting to the
 * end without keeping the text (the driver does so at open, and serves a
 * CSV it cannot size, an endless box, with direct I/O and size 0, as /proc
 * does).  Formatting builds, per tf_views, an index
 * of 32 KiB blocks (text offset and merge state where each starts), so a
 * later read anywhere formats one block; once a full pass has been made the
 * size is known (tf_views_stat reports it) and stays so for that state.
 *
 * Memory: everything a view holds beyond a few bytes per fragment is
 * charged to the shared cache's budget or bounded by it: formatted text,
 * decoded chunks, and the windows of cells the merge and the per-fragment
 * CSVs read (tf_merge.h), which stay in the cache, unpinned, between
 * requests.  A CSV's index is bounded too (a 64th of the budget: beyond,
 * it keeps every other entry, and a read formats from the entry before it).
 * Metadata of fragments is read when a view needs it: looking up the views
 * folder reads none, a fragment's CSV reads its own, and the array's CSV
 * or matrices read every visible fragment's.
 *
 * Every function is thread-safe; a tf_view may be read by many threads.
 */
#ifndef TF_VIEW_H
#define TF_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/tf_array.h"
#include "cache/tf_cache.h"
#include "views/tf_snapshot.h"
#include "util/tf_status.h"

#define TF_VIEWS_DIR "@views"

typedef struct tf_views tf_views;
typedef struct tf_view tf_view;

/*
 * The views of array a as it is now, reading through cache (both must
 * outlive the tf_views and every tf_view opened from it, and so must the
 * array's tf_source).  Reads the array's listings, commit files, delete
 * conditions and fragment metadata footers, all through that source (a
 * local directory or S3 alike); decodes no tile.  The fragments' metadata
 * is held from the array until the views go.
 */
tf_status tf_views_open(tf_array *a, tf_cache *cache, tf_views **out, tf_error *err);
tf_views *tf_views_ref(tf_views *v);
void tf_views_unref(tf_views *v);

/*
 * Remember CSV sizes across mounts in store (tf_index.h; it must outlive
 * v), under the array's identity array_id (tf_index_key_make's of its root
 * directory).  An entry is keyed by the array's state (the names in its
 * directories, the fragments a read sees, its delete conditions) and the
 * text rules' version; a state whose text depends on the time of the read
 * (cells past it filtered out) is not remembered.  A remembered size is
 * shown at once, and proved when a read reaches it (the text must end
 * exactly there: else that read fails, TF_E_CORRUPT, the entry is removed
 * and the true size shown).  Set once, before v is shared.
 */
struct tf_index;
void tf_views_set_store(tf_views *v, struct tf_index *store, const char *array_id);

/* Whether the array is still in the state v shows (cheap: three
 * directory listings). */
bool tf_views_current(tf_views *v);

/* Whether v's bytes are decrypted (the array is encrypted): plaintext,
 * which only the key holder may read. */
bool tf_views_keyed(const tf_views *v);

/*
 * What the entries are made of, for who may read them (tf_catalog_views_perm):
 * besides the array's own directories, schemas and commits, an entry reads
 * the files of no fragment (the folders "" and "fragments"), of every
 * fragment a read of the array sees (cells.csv, .raw, .npy), or of one
 * (fragments/F and its cells.csv: frag receives F's directory).  Fragment
 * directories are relative to the array ("__fragments/F", or "F" before
 * format 12).
 */
typedef enum { TF_VIEW_READS_NONE, TF_VIEW_READS_VISIBLE, TF_VIEW_READS_ONE } tf_view_reads;
tf_status tf_views_reads(tf_views *v, const char *rel, tf_view_reads *what, char *frag, size_t n,
			 tf_error *err);
size_t tf_views_nvisible(const tf_views *v);
/* CSV states kept (the array's and its fragments'), for tests: a
 * fragment's no view has open may go, its size remembered. */
size_t tf_views_csv_states(tf_views *v);
/* Let go of what is kept only to be quicker next time (the states of
 * fragments' CSVs no view has open, sizes remembered; idle columns; idle
 * fragment metadata): for views not used for a while (tf_catalog). */
void tf_views_shrink(tf_views *v);
/* Into buf (n bytes); false if it does not fit.  (Written, not pointed
 * to: a snapshot keeps fragment names only, 200,000 of them.) */
bool tf_views_visible_dir(const tf_views *v, size_t k, char *buf, size_t n);

typedef struct tf_view_stat {
	bool dir;
	bool size_known;	/* false: a CSV not yet formatted to its end */
	uint64_t size;		/* valid when size_known */
} tf_view_stat;

/* rel is a path inside the views folder: "" (the folder), "cells.csv",
 * "a.raw", "fragments", "fragments/F", "fragments/F/cells.csv".
 * TF_E_INVAL: no such entry. */
tf_status tf_views_stat(tf_views *v, const char *rel, tf_view_stat *st, tf_error *err);

/* Entries of directory rel, in a stable order; nothing is decoded.  fn
 * returns non-zero to stop. */
typedef int (*tf_views_list_fn)(void *ctx, const char *name, const tf_view_stat *st);
tf_status tf_views_list(tf_views *v, const char *rel, tf_views_list_fn fn, void *ctx, tf_error *err);

/*
 * Extended attributes of an entry: .raw and .npy have
 *   user.tilefs.shape  the shape as NumPy prints it, "(100, 60)", "(1024,)"
 *   user.tilefs.dtype  the NumPy dtype, "<i4", "<f8", "|S8", "<M8[ms]", ...
 * tf_views_listxattr writes the names, each NUL-terminated, into buf
 * (*len: bytes needed; buf may be NULL).  tf_views_getxattr: TF_E_INVAL
 * if there is no such attribute; *len is the value's length.
 */
tf_status tf_views_listxattr(tf_views *v, const char *rel, char *buf, size_t n, size_t *len,
			     tf_error *err);
tf_status tf_views_getxattr(tf_views *v, const char *rel, const char *name, char *buf, size_t n,
			    size_t *len, tf_error *err);

/* Open a file of the views folder (rel as for tf_views_stat). */
tf_status tf_view_open(tf_views *v, const char *rel, tf_view **out, tf_error *err);
void tf_view_close(tf_view *w);

/* The size, if known (see "Sizes" above). */
bool tf_view_size(tf_view *w, uint64_t *size);

/*
 * Make the size known (*known) and say it: a CSV not yet formatted to its
 * end is formatted now, counted and indexed but not kept (so a later read
 * anywhere formats one block), unless it may hold more than 2^32 records
 * (a dense box of 2^62 cells: *known stays false).  Given up (TF_E_INTR)
 * soon after cancel says the caller went away; another caller goes on
 * from where it stopped.
 */
tf_status tf_view_size_now(tf_view *w, tf_workspace *ws, const tf_cancel *cancel, uint64_t *size, bool *known,
			   tf_error *err);

/* Up to len bytes at off into dst; *got < len only at the end.  ws: the
 * calling thread's workspace. */
tf_status tf_view_read(tf_view *w, tf_workspace *ws, uint64_t off, size_t len, uint8_t *dst,
		       size_t *got, tf_error *err);
/* The same, given up (TF_E_INTR) soon after cancel says the reader went
 * away: a read far into a CSV may format gigabytes first. */
tf_status tf_view_read_cancellable(tf_view *w, tf_workspace *ws, uint64_t off, size_t len, uint8_t *dst,
				   size_t *got, const tf_cancel *cancel, tf_error *err);
/* Whether w's reader keeps what it reads (the driver's page cache, for a
 * view of known size): then a CSV's or cells.arrow's piece read to its end
 * goes back to the cache as done, recycled first (tf_cache.h), as .raw
 * units are; a streaming read reuses warm memory instead of taking its
 * whole file's worth of fresh pages.  Off by default: with direct I/O a
 * piece read again costs formatting its block again. */
void tf_view_set_kept(tf_view *w, bool kept);
/* Bytes a CSV's index holds now (0 for other views), for tests. */
size_t tf_view_index_bytes(tf_view *w);

#endif
