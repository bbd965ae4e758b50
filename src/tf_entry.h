/*
 * tf_entry.h - what a path under a source shows, and a reader of its bytes.
 *
 * The catalog answers a driver's lookups with entries: lookup(dir, name)
 * gives the entry a name shows now (a directory, a file decoded, a view of
 * an array, a file as stored, a symlink, a FIFO or socket), with what the
 * kernel is shown of it (kind, owner, modes, size, times), who may open it,
 * its extended attributes, and, opened, a reader.  Every kind implements
 * the same small interface (an ops table per kind, src/entries/): the
 * driver never asks which kind it holds.
 *
 * An entry is one version of what its path shows: a lookup that finds the
 * source changed (or decoded otherwise: a reload, an array's schema written
 * since) gives a new entry, while those who hold the old one keep reading
 * the bytes it showed.  A lookup of a path gives the entry it gave before
 * while that still shows the same thing and somebody holds it, so a driver
 * can map entries to inode numbers one to one.
 *
 * A reader serves reads of one open: tf_reader_pin gives the range asked
 * for as slices (of the decoded-chunk cache, or of the caller's scratch),
 * held until tf_reader_unpin.  Many threads may read one reader at once,
 * each with its own scratch.
 *
 * Entries and readers are thread-safe and referenced; none is freed while
 * held.  Errors: tf_status with a message naming the path.
 */
#ifndef TF_ENTRY_H
#define TF_ENTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/tf_file.h"
#include "sources/tf_source.h"
#include "util/tf_status.h"
#include "views/tf_snapshot.h"	/* tf_cancel */

struct tf_catalog;
typedef struct tf_entry tf_entry;
typedef struct tf_entry_reader tf_entry_reader;

/* A reading thread's own memory: a decoder's workspace, slices, a buffer
 * (NULL: no memory).  One per thread, never shared. */
typedef struct tf_pin_scratch tf_pin_scratch;
tf_pin_scratch *tf_pin_scratch_new(void);
void tf_pin_scratch_free(tf_pin_scratch *s);

/*
 * The entries of one catalog: each path's current entry while anybody
 * holds it (a lookup of a name that still shows the same thing gives the
 * same entry).  Made after the catalog, freed before it once every entry
 * has been let go (NULL: no memory).
 */
typedef struct tf_entries tf_entries;
tf_entries *tf_entries_new(struct tf_catalog *c, tf_source *src);
void tf_entries_free(tf_entries *s);
/* Views and decoded files read through cache; decoded files' indexes of
 * files nobody has open are kept within index_budget bytes (least recently
 * used go first).  Set before the first lookup (may be set again). */
void tf_entries_set_cache(tf_entries *s, struct tf_cache *cache, size_t index_budget);
/* Entries held, indexes kept and their bytes, decoded files open. */
typedef struct tf_entry_stats {
	size_t entries, indexes, index_bytes, open_files;
} tf_entry_stats;
void tf_entries_stats(tf_entries *s, tf_entry_stats *out);

/* The entry of the source's root directory (referenced). */
tf_status tf_entry_root(tf_entries *s, tf_entry **out, tf_error *err);

/*
 * The entry `name` in directory dir shows now (referenced: tf_entry_unref
 * it).  known: the name's stat from a listing, taken as the source's at
 * first (NULL: stat it).  A decoded file is indexed here (its size is its
 * decoded size).  TF_E_NOTFOUND: no such name, or one not shown (hidden,
 * a device, an invalid name), or dir is no directory; TF_E_IO: the source failed, err says why.
 * On TF_OK, err->code is not TF_OK when the entry was found but its
 * index could not be built (it shows size 0; opening it fails): err says
 * why, for the log.
 */
tf_status tf_entry_lookup(tf_entry *dir, const char *name, const tf_stat *known, tf_entry **out,
			  tf_error *err);
tf_entry *tf_entry_ref(tf_entry *e);
void tf_entry_unref(tf_entry *e);	/* NULL is fine */

/* Its path under the source ("." for the root), kind (never changes), the
 * version of the stored file it shows, and what it is, in a word
 * ("directory", "decoded", "view", "stored": for messages and tests). */
const char *tf_entry_rel(const tf_entry *e);
tf_ent_kind tf_entry_kind(const tf_entry *e);
void tf_entry_version(tf_entry *e, tf_version *out);
const char *tf_entry_what(const tf_entry *e);

/*
 * What the kernel is shown: kind, owner, group, permission bits (no write
 * bits: the mount is read-only; a file's owner and modes let in nobody the
 * source would refuse any of its inputs), size (decoded, or a view's),
 * times.  A directory's are taken afresh.  unsized: a view whose size is
 * not known yet (shown 0): not to be cached.
 */
typedef struct tf_shown {
	tf_stat st;
	bool unsized;
} tf_shown;
void tf_entry_attr(tf_entry *e, tf_shown *out);

/* A directory's names, with fn called once each: st as listed (`full`:
 * a whole stat, good as tf_entry_lookup's `known`; else the kind alone).
 * fn returns nonzero to stop (then TF_E_NOMEM).  With plus (the names
 * are looked up next) the indexes of listed files start loading. */
typedef int (*tf_entry_list_fn)(void *ctx, const char *name, const tf_stat *st, bool full);
tf_status tf_entry_list(tf_entry *dir, bool plus, tf_entry_list_fn fn, void *ctx, tf_error *err);

/* A symlink's target.  TF_E_INVAL: not a symlink. */
tf_status tf_entry_readlink(tf_entry *e, char *buf, size_t n, tf_error *err);

/*
 * Whether caller who may open e, asked again with what is known now: the
 * kernel checked the modes it was shown, which may predate what an index
 * or an array's state said since.  Root reads everything; plaintext of an
 * encrypted array is the mounting user's alone; a view, or a file decoded
 * from two stored files, needs every input's read bit.  groups: the
 * caller's supplementary groups, asked only when the answer depends on them
 * (malloc'd into *out; returns how many).
 */
typedef struct tf_caller {
	uint32_t uid, gid;
	size_t (*groups)(void *ctx, uint32_t **out);
	void *ctx;
} tf_caller;
bool tf_entry_allows(tf_entry *e, const tf_caller *who);

/* Extended attribute `name` (whole, "user.tilefs.tiles"): its text,
 * malloc'd, or NULL when e has none of that name.  tf_entry_listxattr: the
 * names e has, each ending in '\0', into buf[n]; returns their length. */
char *tf_entry_getxattr(tf_entry *e, const char *name);
size_t tf_entry_listxattr(tf_entry *e, char *buf, size_t n);

/*
 * Open e for reading.  A view not yet formatted to its end is formatted
 * now (cancel: its caller gone, TF_E_INTR; the next open goes on), so its
 * size is known from the open on.  *how says how to serve it:
 *   direct   no page cache (flags TF_OPEN_DIRECT, a file that showed a
 *            bad chunk, a CSV too long to size): reads come whatever their
 *            size, and may be answered short;
 *   resized  the size shown so far was not the true one: the kernel's
 *            attributes are to be dropped.
 * TF_E_STALE: e no longer shows what the source holds (look it up again);
 * TF_E_INVAL: not a file; TF_E_IO and the rest: it cannot be read.
 */
#define TF_OPEN_DIRECT 1u
typedef struct tf_open_how {
	bool direct, resized;
} tf_open_how;
tf_status tf_entry_open(tf_entry *e, tf_pin_scratch *s, const tf_cancel *cancel, unsigned flags, tf_entry_reader **out,
			tf_open_how *how, tf_error *err);

/*
 * Bytes [off, off+len) of the reader (fewer at the end of file), as slices
 * held until tf_reader_unpin (on error too).  On an error *out holds the
 * bytes before the first that failed (maybe none): a reader that may take
 * a short read can have them.  TF_E_INTR: cancelled.  The error is
 * remembered for user.tilefs.error, and a decoded file that showed one is
 * opened direct from then on.  passed_on: the bytes went to a cache of the
 * caller's own (the kernel's page cache), so the decoded units go first.
 */
tf_status tf_reader_pin(tf_entry_reader *r, tf_pin_scratch *s, uint64_t off, size_t len, const tf_cancel *cancel,
			const tf_slices **out, tf_error *err);
/* Let go of what the last pin into s holds.  It takes no reader: once
 * the bytes are handed on, the reader may be closed by another thread. */
void tf_reader_unpin(tf_pin_scratch *s, bool passed_on);
void tf_reader_close(tf_entry_reader *r);	/* NULL is fine */

#endif
