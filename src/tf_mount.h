/*
 * tf_mount.h - a mounted tree's library side: one object that owns what a
 * mount of SOURCE reads and decodes with (its configuration, the source,
 * the decoded-chunk cache, the persisted index store and the catalog),
 * rereads its configuration, walks SOURCE to index it ahead, and says the
 * mount-wide facts a driver shows (statistics as text, statfs).  The
 * driver keeps what is its own: requests, inodes, threads, signals, users.
 *
 * Its life follows a daemon's, in this order:
 *   tf_mount_open        the configuration (FILE, or the defaults, with the
 *                        mount's overrides) and SOURCE.  Nothing is written
 *                        and no thread started.  A bad configuration fails
 *                        here with "FILE:LINE: message".
 *   tf_mount_open_store  the persisted index store (index_dir, made if
 *                        missing): before daemonizing, so that a relative
 *                        index_dir is the caller's working directory's and
 *                        what is wrong with it reaches the caller.
 *   tf_mount_start       after daemonizing (fork keeps no threads): keys
 *                        locked in memory again, the source's hooks, the
 *                        cache and its decode workers, the catalog.
 *   tf_mount_reload      any number of times (SIGHUP).
 *   tf_mount_stop_plugins, then tf_mount_close.
 *
 * Reload: FILE is read again with the same overrides.  One that does not
 * load (FILE:LINE) is refused and the configuration in force stays.
 * Otherwise what only a mount sets (cache_size, index_cache, workers,
 * views, index_dir, index_max_size, index_at_mount; [s3] and plugin_path,
 * part of the source and of the loaded plugins: tf_config.h) is kept from
 * the configuration in force, and the new one decides from then on what
 * paths are and how they decode (tf_catalog_set_config).  The one
 * replaced is retired, not freed: open files, nodes and indexes use its
 * rules, pipelines and keys; tf_mount_close frees them all.
 *
 * Threads: after tf_mount_start every function but tf_mount_close may be
 * called from any thread; tf_mount_reload and tf_mount_stop_plugins from
 * one thread at a time.
 */
#ifndef TF_MOUNT_H
#define TF_MOUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/statvfs.h>

#include "cache/tf_cache.h"
#include "config/tf_config.h"
#include "sources/tf_source.h"
#include "tf_catalog.h"
#include "tf_entry.h"
#include "util/tf_status.h"

typedef struct tf_mount tf_mount;

/* Where the mount's own lines go: the configuration's warnings
 * ("warning: FILE:LINE: ..."; at a reload "reload: FILE:LINE: ..."), the
 * index store's, index_at_mount's progress. */
typedef void (*tf_mount_log_fn)(void *ctx, tf_log_level level, const char *msg);

typedef struct tf_mount_options {
	const char *source;	/* a directory, or s3://BUCKET[/PREFIX] */
	const char *config;	/* FILE (a reload reads this path again), or NULL: defaults */
	/* Mount options that override FILE (NULL, false: FILE's). */
	const char *cache_size, *index_dir, *cache_dir, *cache_dir_size, *cache_dir_min_free;
	bool views, index_at_mount;
	tf_mount_log_fn log;	/* NULL: nowhere */
	void *log_ctx;
} tf_mount_options;

/* What an open could not do, for the caller's exit status. */
typedef enum tf_mount_failure {
	TF_MOUNT_E_OPTION = 1,	/* an override's value ("-o cache_size: ...") */
	TF_MOUNT_E_CONFIG,	/* the configuration: "FILE:LINE: ...", index_dir, an [s3] setting */
	TF_MOUNT_E_KEY,		/* a key the configuration names */
	TF_MOUNT_E_SOURCE,	/* SOURCE as spelled: no such directory ("SOURCE: ...") */
	TF_MOUNT_E_REFUSED,	/* the object store refuses us: credentials, bucket, endpoint */
	TF_MOUNT_E_OTHER,	/* anything else (no memory; the index store cannot be had) */
} tf_mount_failure;

/* The configuration and SOURCE (o is copied).  On failure *why and err
 * say what (err's message names the file and line, the option or SOURCE). */
tf_status tf_mount_open(const tf_mount_options *o, tf_mount **out, tf_mount_failure *why, tf_error *err);

/*
 * The persisted index store (tf_index.h) in index_dir, or the default one
 * (tf_index_default_dir; "none": counting only).  A configured index_dir
 * that must not be used (a symlink on the way, not the user's alone) fails
 * (TF_MOUNT_E_CONFIG, err naming "-o index_dir" or FILE:LINE); the default
 * one is a warning (logged) and no store, as is one that cannot be made
 * or written.
 */
tf_status tf_mount_open_store(tf_mount *m, tf_mount_failure *why, tf_error *err);

/*
 * Start serving (after daemonizing): keys locked, the source's hooks set
 * (copied; NULL: none) and its descriptor bound taken, the cache with its
 * decode workers (settings' workers, or one per CPU and one more: *workers
 * says how many), the catalog with the store.  Failure: no memory.
 */
tf_status tf_mount_start(tf_mount *m, const tf_source_hooks *hooks, unsigned *workers, tf_error *err);

/* From now on no call into a plugin waits, in any configuration loaded
 * (the daemon is on its way out). */
void tf_mount_stop_plugins(tf_mount *m);
/* Everything, in the order its users need (NULL: nothing): the catalog's
 * views, the cache, the catalog, the store, every configuration (keys
 * wiped), the source.  Files, views and handles got from it go first. */
void tf_mount_close(tf_mount *m);

/*
 * Reread FILE (see the top).  TF_OK: *changed says whether anything did,
 * and changes (n bytes) says what, in words ("[key k] changed; ...").
 * Otherwise refused, err saying why (FILE:LINE), the one in force kept.
 */
tf_status tf_mount_reload(tf_mount *m, bool *changed, char *changes, size_t n, tf_error *err);

/* The settings in force (a reload replaces them; the old stay valid). */
const tf_settings *tf_mount_settings(tf_mount *m);
/* SOURCE as the user knows it, for messages. */
const char *tf_mount_name(const tf_mount *m);
/* Whether directory dirfd (the caller's; not closed) is SOURCE or lies
 * beneath it (by device and inode, walking ".." up): a mount there would
 * contain itself.  False for sources that are not local directories. */
bool tf_mount_contains(const tf_mount *m, int dirfd);

/* What requests read through (borrowed; the cache, the catalog and the
 * entries exist from tf_mount_start on, NULL before).  The entries go
 * first at tf_mount_close: the driver lets go of every entry before. */
tf_source *tf_mount_source(tf_mount *m);
tf_cache *tf_mount_cache(tf_mount *m);
tf_catalog *tf_mount_catalog(tf_mount *m);
tf_entries *tf_mount_entries(tf_mount *m);

/* statfs of the mount: the source's, read-only (ST_RDONLY). */
tf_status tf_mount_statfs(tf_mount *m, struct statvfs *out, tf_error *err);

/*
 * index_at_mount: walk SOURCE and index every file a walked [match] rule
 * decodes (TileDB arrays' files need no walk), as a lookup would (chunk
 * headers alone where that is cheap), stored in the store.  What cannot
 * be listed or indexed is passed over (lookups index it).  stop(ctx) is
 * asked before each entry: true ends the walk.  Logs its summary; its
 * progress is in the "index" text.  Call it on a thread of its own.
 */
tf_status tf_mount_index_ahead(tf_mount *m, bool (*stop)(void *ctx), void *ctx);

/* What the driver holds, for the statistics texts. */
typedef struct tf_mount_counts {
	size_t nodes, indexes, index_bytes, handles;	/* its inode table */
	size_t users;			/* users holding something open */
	uint64_t refused;		/* their opens and listings refused */
	unsigned max_user_opens;
	bool indexing_ahead;		/* a thread was started on tf_mount_index_ahead */
} tf_mount_counts;

/*
 * A mount-wide statistics text, malloc'd, "name=value" pairs separated by
 * spaces (tilefs(1), EXTENDED ATTRIBUTES), or NULL (no such text, no memory):
 *   "cache"       the cache's budget and counters, the driver's nodes and
 *                 indexes, arrays kept, the heap, the source's stored bytes
 *   "index"       the index store's counters and index_at_mount's progress
 *   "opens"       the source's descriptor pool and the users' shares
 *   "disk_cache"  cache_dir's counters (NULL without one)
 */
char *tf_mount_stat_text(tf_mount *m, const char *name, const tf_mount_counts *c);

#endif
