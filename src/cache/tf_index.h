/*
 * tf_index.h - the persisted index store: what walking a stored file found
 * (where its tiles and chunks are, how many bytes each decodes to), kept
 * across mounts so that a file is walked once per version, not once per
 * lookup.
 *
 * Contract:
 *   - One small file per stored file ("entry"), in one directory that is
 *     the user's alone: every component of its path is opened without
 *     following a symlink, missing ones are made mode 0700, and the
 *     directory must be owned by the user and writable by nobody else.
 *     One that is not (/tmp's 1777, a group's, another user's, one reached
 *     through a symlink) is refused (TF_E_ACCESS): anyone could have
 *     written its entries.  Nothing that exists is ever chmod'ed; only
 *     entries (and temporary files) of the user's, writable by nobody else,
 *     are read, replaced or removed.  An entry holds offsets and sizes
 *     only: never decoded bytes, never keys.
 *   - An entry is named by a hash of its stored file's identity and carries
 *     that identity and the file's tf_version (local: device, inode, size,
 *     mtime and ctime in ns; object stores: ETag and size) in full.  A get
 *     checks both: another file's entry (a hash collision, a copied file) is
 *     foreign, another version's is stale; either is ignored, to be rebuilt.
 *   - Entries are written to a temporary name and renamed into place, so a
 *     reader sees a whole old or a whole new entry, and any number of
 *     processes may share a directory.  Each carries a format version and a
 *     CRC-32 of everything else: a corrupt, truncated or foreign entry is
 *     reported through the warning callback and never trusted.  The payload
 *     is the caller's (tf_file_index.c) and is validated again by it.
 *   - The directory is bounded (max_size, bytes on disk): beyond it, least
 *     recently used entries go first (an entry's mtime is its last use,
 *     refreshed at most once a minute).  Several processes each trim what
 *     they see, so the bound can be overshot by what others wrote since
 *     their last scan.
 *   - A directory that cannot be written (or created) leaves a store that
 *     reads what it can and persists nothing: one warning, not an error.
 *     With no directory at all (index_dir = none) the store only counts.
 *
 *   - Published entries (an object store's): tiletool index --publish puts
 *     each file's entry in the bucket itself, as object
 *     PREFIX/.tilefs/index/NAME (tf_source.h's reserved prefix), for every
 *     node to use when its own store has none.  The same format, keyed by
 *     bucket and key ("bucket:BUCKET/KEY": every endpoint of the bucket
 *     reads the same entry beside the same object) and the object's ETag
 *     and size, named by a hash of that identity.  Fetched with one GET (a
 *     404 is a miss, which the source remembers), checked exactly as a
 *     local entry (format, CRC, identity, version), and then validated by
 *     its reader like any.  One that fails (stale, foreign, truncated,
 *     corrupt, or found wrong by its reader) is ignored, warned once and
 *     never fetched again by this process (the file is walked).  A store
 *     copies one into its directory only once its reader has proved all
 *     of it against the file (tf_file_index.c): what the directory holds
 *     was walked or proved here, and is what tiletool publishes.
 *
 * Thread-safe.  Counters (tf_index_stats) cover every walk the caller
 * reports, so a test can assert that a mount walked nothing.
 */
#ifndef TF_INDEX_H
#define TF_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/tf_bytes.h"
#include "sources/tf_source.h"
#include "util/tf_status.h"

typedef struct tf_index tf_index;

/* Hard bound on one entry (a file of 10^13 bytes in 64 KiB chunks needs
 * well under this). */
#define TF_INDEX_MAX_ENTRY ((uint64_t)1 << 30)
#define TF_INDEX_DEFAULT_MAX_SIZE ((uint64_t)1 << 30)

/* What an entry belongs to. */
typedef struct tf_index_key {
	char id[600];		/* identity: "local:DEV:INO" or "s3:SCHEME://HOST:PORT/BUCKET/KEY" */
	tf_version v;		/* the version indexed */
} tf_index_key;

/*
 * The key of file rel of src as version v.  A local file is known by its
 * device and inode (so a rename keeps its entry, and every mount and
 * tiletool agree whatever path they reach it by); an object by its
 * endpoint (scheme, host, port), bucket and key (tf_source_object_id), so
 * that the same names at another endpoint never share an entry.  False if
 * the name is too long.
 */
bool tf_index_key_make(tf_index_key *k, const tf_source *src, const char *rel, const tf_version *v);

typedef void (*tf_index_warn_fn)(void *ctx, const char *msg);

/*
 * The store in directory dir (NULL: none, counting only; relative: to the
 * working directory), at most max_size bytes (0: TF_INDEX_DEFAULT_MAX_SIZE).
 * warn (may be NULL) hears of entries ignored as corrupt and of a
 * directory that cannot be made or written; it is called from any thread.
 * Fails TF_E_ACCESS for a directory that must not be used (see above; the
 * message says why and names it), else only for want of memory.
 */
tf_status tf_index_open(const char *dir, uint64_t max_size, tf_index_warn_fn warn, void *warn_ctx,
			tf_index **out, tf_error *err);
void tf_index_free(tf_index *s);

/* $TILEFS_INDEX_DIR if set; else $XDG_CACHE_HOME/tilefs, else
 * $HOME/.cache/tilefs; /var/cache/tilefs for root.  False if it does not
 * fit or no home is known. */
bool tf_index_default_dir(char *buf, size_t n);

/*
 * The payload of k's entry into *payload (reset first).  TF_OK: it is k's
 * file at k's version and its checksum holds.  TF_E_NOTFOUND: none (or
 * nothing is persisted); TF_E_STALE: an entry of another version (or an
 * older format); TF_E_CORRUPT: unreadable, truncated, foreign (warned).
 * Counts a hit, or a miss of one of those kinds.
 */
tf_status tf_index_get(tf_index *s, const tf_index_key *k, tf_buf *payload, tf_error *err);

/* Start reading k's entry, if there is one, into the page cache, without
 * waiting: a listing is about to look its files up, and their entries are
 * then read at once rather than one after the other. */
void tf_index_prefetch(tf_index *s, const tf_index_key *k);

/* Store payload as k's entry (replacing any), trimming the directory to its
 * bound.  Failures are counted and warned once, not returned: persistence
 * is best effort. */
void tf_index_put(tf_index *s, const tf_index_key *k, const void *payload, size_t n);

/* A payload tf_index_get returned that its reader found invalid: counted,
 * warned, and removed (the rebuilt one replaces it anyway). */
void tf_index_reject(tf_index *s, const tf_index_key *k, const char *why);

/* A walk of a stored file that read `bytes` bytes (every walk, persisted or
 * not, so that "no walk" can be asserted). */
void tf_index_count_walk(tf_index *s, uint64_t bytes);

typedef struct tf_index_stats {
	bool persist;		/* entries are read and written */
	bool writable;
	uint64_t entries, bytes;	/* in the directory, at the last scan */
	uint64_t max_size;
	uint64_t hits, misses, stale, corrupt, writes, write_errors, evictions;
	uint64_t walks, walk_bytes;
	uint64_t published;		/* published entries used (and not found wrong) */
	uint64_t published_misses;	/* none published (or the store failed) */
	uint64_t published_ignored;	/* stale, foreign, corrupt, or found wrong */
} tf_index_stats;
/* Counters, and a scan of the directory if none was made yet (entries
 * and bytes are then kept up to date by this process's writes, and counted
 * again every so often, or by tf_index_rescan). */
void tf_index_get_stats(tf_index *s, tf_index_stats *out);
void tf_index_rescan(tf_index *s);
/* The directory ("none" when there is none); valid while s is. */
const char *tf_index_dir(const tf_index *s);

/* ---- published entries ---------------------------------------------------------------- */

/* The published key of file rel of src as version v: "bucket:BUCKET/KEY"
 * and v's ETag and size alone.  False for a local source, an object
 * without an ETag, or a name too long. */
bool tf_index_published_key(tf_index_key *k, const tf_source *src, const char *rel, const tf_version *v);
/* Its object's name under the reserved prefix: "index/" 32 hex ".idx". */
bool tf_index_published_name(tf_index *s, const tf_index_key *k, char *buf, size_t n);
/* The bytes of k's entry holding payload[n] (malloc'd into *out, *len). */
tf_status tf_index_entry_bytes(const tf_index_key *k, const void *payload, size_t n, uint8_t **out, size_t *len,
			       tf_error *err);

/*
 * The payload of the entry published for file rel of src, for k (the
 * local key: its version is the object's now) into *payload (reset
 * first).  TF_OK: fetched and checked (counted `published`);
 * TF_E_NOTFOUND: none, or ignored (counted, warned), or not an object
 * store, or published entries are not used.
 */
tf_status tf_index_get_published(tf_index *s, tf_source *src, const char *rel, const tf_index_key *k,
				 tf_buf *payload, tf_error *err);
/* A payload tf_index_get_published returned that its reader found wrong:
 * counted, warned, and never fetched again by this process. */
void tf_index_reject_published(tf_index *s, const tf_source *src, const char *rel, const tf_index_key *k,
				const char *why);
/* Whether tf_index_get_published looks at all (default: yes; tiletool
 * index, which publishes what it walked or holds, does not). */
void tf_index_use_published(tf_index *s, bool use);

#endif
