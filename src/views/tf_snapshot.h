/*
 * tf_snapshot.h - what a read of a TileDB array sees at one moment, and
 * ranged access to the cells of its fragments.
 *
 * Opening a snapshot lists the array's directories (__fragments, __commits,
 * the root for formats before 12) and decides, as TileDB's ArrayDirectory
 * does (array_directory.cc), which fragments a read at the current time
 * sees: committed (a .wrt commit, a .con list, or a .ok marker), not named
 * by a vacuum list (.vac), and old enough (end timestamp <= now; start
 * timestamp from format 15 on, whose cells carry their own timestamps),
 * ordered by start timestamp (then name).  It reads every delete condition
 * (.del, and those inside .con lists).  Fragment metadata is read when a
 * reader first needs it (tf_snapshot_load): listing an array of 200,000
 * fragments, or opening one fragment's view, reads no other fragment's.
 *
 * Memory.  What a snapshot keeps per fragment is small and fixed (its name,
 * timestamps, and from its metadata the facts below: about 170 bytes); the
 * metadata itself stays with the array (tf_array keeps 1,024 idle
 * fragments at most) and is read again when a column is opened.  Columns
 * (open files) are kept while in use, and bounded when idle (see
 * tf_snapshot_col).  Work at that scale is linear:
 * names are sorted and searched, never scanned per fragment.
 *
 * Cells are then read field by field (tf_col): ranges of cells of one tile
 * of one fragment, decoded through the shared cache.  A field the fragment
 * does not have (added by schema evolution) is "missing": callers use the
 * fill value.  Everything is thread-safe.
 */
#ifndef TF_SNAPSHOT_H
#define TF_SNAPSHOT_H

#include <stdbool.h>
#include <stdint.h>

#include "format/tf_array.h"
#include "cache/tf_cache.h"
#include "cache/tf_handle.h"
#include "views/tf_cells.h"
#include "views/tf_condition.h"
#include "format/tf_schema.h"

typedef struct tf_snapshot tf_snapshot;

typedef struct tf_snap_frag {
	const char *name;		/* directory name */
	uint64_t t1, t2;		/* timestamps from the name */
	uint32_t version;		/* format version from the name */
	bool in_root;			/* before format 12: NAME, not __fragments/NAME */
	bool visible;			/* a read at the snapshot's time sees it */
	/* From its metadata, valid once tf_snapshot_load(s, i) gave TF_OK: */
	bool dense, has_ts, has_dm;
	const tf_schema *schema;	/* the schema it was written with */
	uint64_t ntiles;
	uint64_t last_cells;		/* sparse: cells of the last tile (0: full) */
	union {
		/* dense fragments: per dimension, the non-empty domain [lo, hi]
		 * as offsets from the domain's lower bound, and the space tiles
		 * covering it: first tile tlo, tn of them (tf_frag_lo...) */
		uint64_t *box;
		/* sparse fragments: the lower corner of the non-empty domain, a
		 * lower bound of every cell in global order (tf_merge), or NULL
		 * if unknown: per dimension a u32 length, then the value, padded
		 * to 4 bytes */
		uint8_t *corner;
	};
} tf_snap_frag;

/* A dense fragment's box: lo, hi, tlo, tn of each dimension. */
static inline const uint64_t *tf_frag_lo(const tf_snap_frag *f) { return f->box; }
static inline const uint64_t *tf_frag_hi(const tf_snap_frag *f) { return f->box + f->schema->ndims; }
static inline const uint64_t *tf_frag_tlo(const tf_snap_frag *f) { return f->box + 2 * f->schema->ndims; }
static inline const uint64_t *tf_frag_tn(const tf_snap_frag *f) { return f->box + 3 * f->schema->ndims; }

/* A delete condition and its timestamp (from its name). */
typedef struct tf_snap_delete {
	tf_cond *cond;
	uint64_t t;
	char *marker;			/* "__commits/NAME.del" */
} tf_snap_delete;

tf_status tf_snapshot_open(tf_array *a, tf_cache *cache, tf_snapshot **out, tf_error *err);
tf_snapshot *tf_snapshot_ref(tf_snapshot *s);
void tf_snapshot_unref(tf_snapshot *s);

/* Whether the array's directories still list what the snapshot saw
 * (fragments, commits, schemas): a cheap re-listing, nothing read. */
bool tf_snapshot_current(tf_snapshot *s);

tf_array *tf_snapshot_array(const tf_snapshot *s);
tf_cache *tf_snapshot_cache(const tf_snapshot *s);
const tf_schema *tf_snapshot_schema(const tf_snapshot *s);	/* the newest */
uint64_t tf_snapshot_time(const tf_snapshot *s);		/* ms since the epoch */
/* A hash of the names in the array's directories when it was opened (what
 * tf_snapshot_current compares). */
uint64_t tf_snapshot_fingerprint(const tf_snapshot *s);

/* Every fragment directory (sorted by name), and the visible ones in
 * read order (oldest first: later ones win). */
size_t tf_snapshot_nfrags(const tf_snapshot *s);
const tf_snap_frag *tf_snapshot_frag(const tf_snapshot *s, size_t i);
size_t tf_snapshot_nvisible(const tf_snapshot *s);
size_t tf_snapshot_visible(const tf_snapshot *s, size_t k);	/* index into frags */
/* Fragment i's directory relative to the array ("__fragments/NAME", or
 * "NAME" before format 12) into buf; false if it does not fit. */
bool tf_snapshot_frag_dir(const tf_snapshot *s, size_t i, char *buf, size_t n);
/* A fragment by directory name (a binary search); SIZE_MAX if none. */
size_t tf_snapshot_find(const tf_snapshot *s, const char *name);

/* Give up long work when it returns true (the reader went away): a
 * cancelled call returns TF_E_INTR.  NULL: never. */
typedef struct tf_cancel {
	bool (*fn)(void *ctx);
	void *ctx;
} tf_cancel;
bool tf_cancelled(const tf_cancel *c);

/* Read fragment frag's metadata facts (once; later calls return at once,
 * with the same answer): its tf_snap_frag fields past t2.  An error names
 * the fragment and stays the answer for this snapshot. */
tf_status tf_snapshot_load(tf_snapshot *s, size_t frag, tf_error *err);
/* The same for every visible fragment (cancellable between fragments). */
tf_status tf_snapshot_load_visible(tf_snapshot *s, const tf_cancel *cancel, tf_error *err);

size_t tf_snapshot_ndeletes(const tf_snapshot *s);
const tf_snap_delete *tf_snapshot_delete(const tf_snapshot *s, size_t i);

/* The enumeration of attribute `attr` of schema `schema` (read once), or
 * *out = NULL when it has none. */
tf_status tf_snapshot_enum(tf_snapshot *s, const tf_schema *schema, const tf_field *attr,
			   const tf_enum **out, tf_error *err);

/* ---- cells of one field of one fragment ------------------------------------------------ */

/* TF_COL_OWN_ATTR: an attribute as the fragment's own schema has it,
 * whatever the newest says (a fragment's own view). */
typedef enum { TF_COL_ATTR, TF_COL_DIM, TF_COL_TIMESTAMPS, TF_COL_DELETE_TS, TF_COL_OWN_ATTR } tf_col_kind;

typedef struct tf_col tf_col;

/*
 * The column of field `name` (an attribute of the snapshot's newest schema
 * with that type and cell_val_num, or of the fragment's own, a dimension,
 * or a special field) in fragment `frag` (loaded), held until
 * tf_snapshot_col_put.  Columns are shared: one open of each file while
 * any reader holds it, kept open when idle (TF_SNAPSHOT_IDLE_COLS at most,
 * for descriptors), then closed but indexed (a 32nd of the budget of
 * indexes), then forgotten.
 */
#define TF_SNAPSHOT_IDLE_COLS 256
tf_status tf_snapshot_col(tf_snapshot *s, size_t frag, tf_col_kind kind, const char *name,
			  const tf_col **out, tf_error *err);
void tf_snapshot_col_put(tf_snapshot *s, const tf_col *c);
/* Columns open now (held or idle), for tests. */
size_t tf_snapshot_open_cols(tf_snapshot *s);
/* Let go of what is kept only to be quicker next time: columns no reader
 * holds, and the array's idle fragment metadata (tf_views_shrink). */
void tf_snapshot_shrink(tf_snapshot *s);

bool tf_col_missing(const tf_col *c);	/* the fragment has no such field */
bool tf_col_var(const tf_col *c);
bool tf_col_nullable(const tf_col *c);
unsigned tf_col_cell_size(const tf_col *c);	/* fixed cells (8 for var offsets) */

/* Whether cells [cell, cell + n) of tile `tile` are in every file of the
 * column (data, var data, validity), as the tile's stored chunk headers
 * say (read once per tile, nothing decoded); TF_E_CORRUPT if not.  Callers
 * check this before sizing anything by n, which a schema or fragment
 * metadata claimed. */
tf_status tf_col_check_cells(const tf_col *c, uint64_t tile, uint64_t cell, uint64_t n, tf_error *err);
/* n fixed-size cells from cell `cell` of tile `tile` into dst.  once (here
 * and below): the caller reads the column going forward and never comes
 * back to what it read (a merge's windows, a dense view's row-major runs):
 * the decoded units whose last byte it copies go back as done, recycled
 * first (tf_handle_read_scan).  Not for column-major runs: each cell a
 * read of its own, a unit's last byte comes before the rest of its rows. */
tf_status tf_col_fixed(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t cell, uint64_t n,
		       uint8_t *dst, bool once, tf_error *err);
/* Decode units held by one caller while it gathers many small pieces (a
 * read of a .raw view): a piece inside a held unit is copied with no cache
 * lookup.  At most TF_PINSET_MAX are held (pinned cache entries, never
 * evicted); release them when done.  A unit every byte of which was
 * copied out is released as passed on whole (tf_cache_release's done): a
 * scan recycles its buffers instead of filling the cache with fresh
 * memory, whose first touch (the kernel zeroing huge pages) cost more
 * than decoding. */
#define TF_PINSET_MAX 32
typedef struct tf_pinset {
	tf_cache *cache;
	size_t n;
	uint64_t clock;
	struct {
		tf_handle *h;		/* referenced while held */
		tf_slice unit;		/* the whole unit: its bytes and entry */
		uint64_t off;		/* where it starts in h's decoded file */
		uint64_t used;
		uint64_t taken;		/* bytes copied out of it */
	} p[TF_PINSET_MAX];
	tf_slices scratch;	/* for tf_handle_pin */
} tf_pinset;
void tf_pinset_init(tf_pinset *ps, tf_cache *cache);
void tf_pinset_release(tf_pinset *ps);
/* tf_col_fixed through a pin set. */
tf_status tf_col_fixed_pinned(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t cell, uint64_t n,
			      uint8_t *dst, tf_pinset *ps, tf_error *err);

/* n var-sized cells: their bytes appended to data, starts[0..n] their
 * boundaries within what was appended. */
tf_status tf_col_var_cells(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t cell,
			   uint64_t n, uint64_t *starts, tf_buf *data, bool once, tf_error *err);
/* The same in two steps, for a caller that sizes its buffer first: the
 * boundaries starts[0..n] of n cells relative to the first one's bytes
 * (starts[0] = 0) and where those bytes start in the tile's var data
 * (*vbase); then len bytes of that var data from vbase into dst. */
tf_status tf_col_var_starts(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t cell, uint64_t n,
			    uint64_t *starts, uint64_t *vbase, bool once, tf_error *err);
tf_status tf_col_var_bytes(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t vbase, uint64_t len,
			   uint8_t *dst, bool once, tf_error *err);
/* Validity bytes (1 valid, 0 null) of n cells; all 1 if not nullable. */
tf_status tf_col_validity(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t cell,
			  uint64_t n, uint8_t *dst, bool once, tf_error *err);

#endif
