/*
 * tf_snapshot_int.h - what the files of the snapshot share: its limits, the
 * columns' slots and lists, a listing (names) and the snapshot itself
 * (struct tf_snapshot).  Included by tf_snapshot.c (opening a snapshot),
 * tf_snapshot_list.c (listing it), tf_snapshot_facts.c (loading facts) and
 * tf_snapshot_cols.c (ranged column access); nothing else includes it.
 * Functions one file defines for the others are snap_-named.
 */
#ifndef TF_SNAPSHOT_INT_H
#define TF_SNAPSHOT_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "views/tf_snapshot.h"
#include "format/tf_tile.h"

#define LIST_LIMIT ((size_t)16 << 20)	/* .vac / .con / .ign lists */
/* consolidation_with_timestamps_min_version (constants.cc): fragments of
 * this format or later are seen once their start is past. */
#define PARTIAL_OVERLAP_VERSION 15

enum { META_UNREAD, META_LOADING, META_READ, META_FAILED };

/* A column is held (refs > 0: its files open), idle (open, on the idle
 * list), or dormant (its files' indexes kept, their descriptors closed, on
 * the dormant list). */
typedef enum { COL_HELD, COL_IDLE, COL_DORMANT } col_state;

typedef struct col_slot {
	size_t frag;
	tf_col_kind kind;
	char *name;
	tf_col *col;
	int refs;			/* readers holding col */
	size_t bytes;			/* its files' indexes */
	col_state state;
	bool opening;			/* a reader opens its files again */
	struct col_slot *next;		/* its hash chain */
	struct col_slot *older, *newer;	/* its list, least recently used first */
} col_slot;

typedef struct col_list {
	col_slot *old, *new;
	size_t n, bytes;
} col_list;

typedef struct enum_slot {
	char *path;
	tf_enum *e;
	struct enum_slot *next;
} enum_slot;

typedef struct failure {
	size_t frag;
	tf_error error;
	struct failure *next;
} failure;

typedef enum { LAYOUT_PLAIN, LAYOUT_UNZIPPED, LAYOUT_ZIPPED } col_layout;

struct tf_col {
	bool missing, var, nullable;
	tf_datatype type;
	unsigned cell_size;	/* bytes of one cell of this field (8: var offsets) */
	unsigned stored;	/* bytes per cell in the data file (legacy
				 * __coords: every dimension's value) */
	col_layout layout;	/* legacy __coords: dimension `dim` of `ndims` */
	unsigned dim, ndims, value_size;
	/* each file as the version indexed when the column was first opened
	 * (a fragment's files never change): its index, and while the column
	 * is held or idle, one open of it (a dormant column reopens its files
	 * at that version, and keeps its place in the cache) */
	tf_file *fdata, *fvar, *fvalid;
	tf_handle *data, *vfile, *validity;
	tf_cache *cache;
	col_slot *slot;
};

/* A listing: NUL-terminated names back to back in one buffer, each after
 * a byte saying whether it is a directory; sorted once complete. */
typedef struct names {
	char *buf;
	size_t len, cap;
	size_t *off;		/* where each name starts in buf */
	size_t n, ncap;
	bool failed, sorted;
} names;

/* What the commit lists and markers say (snap_read_commits). */
typedef struct commits {
	names con;		/* fragment names committed by .con lists */
	names vacuumed;		/* fragment names in vacuum lists */
	names ignored;		/* .ign: commit lines to skip in .con */
	names del_seen;		/* delete markers already read */
} commits;

struct tf_snapshot {
	atomic_int refs;
	tf_array *a;
	tf_cache *cache;
	const tf_schema *schema;
	uint64_t now, fingerprint;
	names root, fdir;	/* the listings: fragment names point into them */
	tf_snap_frag *frags;
	size_t nfrags;
	_Atomic uint8_t *meta;	/* per fragment: META_* */
	failure *failures;	/* fragments whose metadata failed (under load_lock) */
	pthread_mutex_t load_lock;	/* guards failures, facts; waiting for a LOADING one */
	pthread_cond_t loaded;
	uint8_t *facts;		/* boxes and corners: chunks of FACTS_CHUNK, linked */
	size_t facts_used;
	_Atomic size_t charged;	/* bytes charged to the cache's budget */
	uint32_t *visible;	/* fragment indexes, in read order */
	size_t nvisible;
	tf_snap_delete *dels;
	size_t ndels;
	pthread_mutex_t lock;	/* guards columns and enumerations */
	col_slot **cols;	/* hash of (fragment, field): ncols_b buckets */
	size_t ncols_b;
	col_list idle, dormant;
	size_t nopen, kept_limit;	/* columns in the table; bytes of idle and dormant ones */
	pthread_cond_t reopened;	/* a dormant column's files are open again */
	enum_slot *enums;
};

/* tf_snapshot_list.c */
const char *snap_name_at(const names *l, size_t i);
void snap_names_free(names *l);
void snap_names_fit(names *l);
tf_status snap_list_dir(tf_array *a, const char *rel, names *out, tf_error *err);
void snap_commits_free(commits *c);
tf_status snap_read_commits(tf_snapshot *s, const names *cdir, const names *root, commits *c, tf_error *err);
bool snap_frag_rel(const tf_snap_frag *f, char *buf, size_t n);
tf_status snap_list_fragments(tf_snapshot *s, tf_error *err);
tf_status snap_choose_visible(tf_snapshot *s, const commits *c, const names *cdir, tf_error *err);

/* tf_snapshot_facts.c */
void snap_charge(tf_snapshot *s, size_t n);

/* tf_snapshot_cols.c */
void snap_col_free(tf_col *c);

#endif
