/*
 * tilefs.h - the FUSE driver's state.  Nothing here knows the TileDB
 * format: the library's mount (tf_mount.h) holds the configuration, the
 * source, the cache and the index store, its catalog says what each path
 * is, and the driver answers the kernel's low-level requests with inode
 * numbers, handles and slices of the decoded-chunk cache.
 *
 * Errors: a driver function that can fail returns 0 or a positive errno,
 * as fuse_reply_err takes it (main's set-up steps may return exit
 * statuses, TFS_EXIT_*, where they say so).  The library's tf_status
 * becomes an errno here only, through fs_errno.
 */
#ifndef TILEFS_H
#define TILEFS_H

#include "config.h"	/* first: _GNU_SOURCE and friends */

#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "cache/tf_cache.h"
#include "cache/tf_handle.h"
#include "tf_catalog.h"
#include "tf_entry.h"
#include "config/tf_config.h"
#include "format/tf_file.h"
#include "sources/tf_perm.h"
#include "sources/tf_source.h"
#include "sources/tf_source_open.h"
#include "tf_mount.h"
#include "util/tf_clock.h"

/* Exit statuses of the tilefs command (documented in tilefs(1)). */
enum { TFS_EXIT_FUSE = 1, TFS_EXIT_USAGE = 2, TFS_EXIT_CONFIG = 3, TFS_EXIT_KEY = 4, TFS_EXIT_SOURCE = 5 };

/*
 * The one map of a tf_status to the errno the kernel is given.  ESTALE:
 * the source is no longer the version a node or handle shows, and the
 * kernel looks the name up again; every data problem (corrupt, checksum,
 * key, I/O, unsupported) is EIO for the range.  Where a request answers
 * otherwise on purpose it says so beside it: a lookup (its stat's
 * statuses, src/entries/dir.c stat_name), reads (EIO whatever the
 * cause), an index that cannot be built (EIO).
 */
static inline int fs_errno(tf_status rc)
{
	switch (rc) {
	case TF_OK: return 0;
	case TF_E_NOTFOUND: return ENOENT;
	case TF_E_ACCESS: return EACCES;
	case TF_E_STALE: return ESTALE;
	case TF_E_NOMEM: return ENOMEM;
	case TF_E_INVAL: return EINVAL;
	case TF_E_INTR: return EINTR;
	default: return EIO;
	}
}

/*
 * A node: what one inode number shows.  A regular file's node is one
 * version of its source (tf_version): a changed source gets a new node,
 * so the kernel's page cache of a node never holds another version's bytes
 * and open handles keep reading the version they opened.  Directories and
 * symlinks keep their node while their path holds the same inode.
 */
typedef struct fs_node fs_node;

typedef struct fs_nodes {
	pthread_mutex_t lock;
	fs_node **by_id, **by_rel;	/* two hash tables */
	size_t nbuckets, count;
	uint64_t next_id;
} fs_nodes;

typedef struct fs_indexer fs_indexer;
struct tf_index;

/* What each user holds open (users.c). */
#define FS_USER_BUCKETS 64
typedef struct fs_user fs_user;
typedef struct fs_users {
	pthread_mutex_t lock;
	fs_user *bucket[FS_USER_BUCKETS];
	unsigned max_opens;		/* files and directories per uid (0: no bound) */
	size_t max_listing;		/* bytes of open listings per uid, then ENOMEM */
	uint64_t refused;		/* opens and listings refused */
	size_t open_total;		/* files and directories open, all users */
} fs_users;

/* The command line (main.c parses it; a reload applies it again). */
typedef struct fs_options {
	char *config, *cache_size, *source, *index_dir, *max_user_opens, *notify_pipe, *idle_timeout;
	char *cache_dir, *cache_dir_size, *cache_dir_min_free;	/* [s3] overrides */
	int help, version, views, direct_io, index_at_mount;
} fs_options;

/* The one state object of the driver (the session's userdata). */
typedef struct tilefs {
	/* The library side of the mount (tf_mount.h): configuration, source,
	 * cache, index store, catalog; the requests ask its entries (borrowed
	 * from it: they exist after daemonizing) what each path shows. */
	tf_mount *mount;
	tf_entries *entries;
	/* The settings in force (tf_mount_settings), stored again by each
	 * reload (SIGHUP); those replaced stay valid. */
	_Atomic(const tf_settings *) settings;
	const fs_options *opts;
	fs_nodes nodes;
	pthread_key_t thread_key;	/* per-thread scratch (fs_thread) */
	struct fuse_session *se;
	char readahead_knob[96];	/* sysfs file of the mount's readahead window */
	atomic_bool readahead_set;
	bool foreground;
	unsigned max_threads;		/* FUSE threads; 0: libfuse's choice (-o max_threads) */
	bool direct_io;			/* -o direct_io: decoded files bypass the page cache */
	fs_indexer *indexer;		/* index_at_mount's thread, or NULL */
	pthread_mutex_t handles_lock;
	struct handle *handles;		/* open files (ll.c) */
	pthread_mutex_t gone_lock;	/* requests whose callers are gone (ll.c) */
	fuse_req_t gone[32];		/* the latest, a ring */
	unsigned gone_next;
	atomic_bool gone_seen;		/* any ever (the common case is none) */
	pthread_mutex_t negatives_lock;
	struct fs_negative *negatives;	/* names lately not found (lifecycle.c) */
	unsigned negative_next;
	fs_users users;
	pthread_t watcher;		/* lifecycle.c: stops plugin calls when the connection */
	int watch_wake;			/* goes (eventfd: its end), rereads the configuration */
	int reload_wake;		/* (eventfd: SIGHUP), unmounts when idle */
	char *mountpoint;		/* absolute */
	char *notify_pipe;		/* -o notify_pipe, absolute, or NULL */
	atomic_bool notified;		/* the ready signal was given (either way) */
	int64_t idle_ns;		/* -o idle_timeout (0: never) */
	atomic_int_fast64_t last_request_ns;	/* CLOCK_MONOTONIC: the latest request's start */
} tilefs;

/* How long the kernel may keep entries and attributes (and names not
 * found): a changed source is seen within a second. */
#define FS_TIMEOUT 1.0

/* ll.c: the operations; their per-thread scratch, and the source's hooks
 * for tf_mount_start (each request's start and whether its caller is
 * gone, for the source's deadline; its warnings, to the log).  ENOMEM: no
 * memory. */
extern const struct fuse_lowlevel_ops tilefs_ll_ops;
int fs_ll_init(tilefs *fs, tf_source_hooks *hooks);
/* Every operation starts here: the state, with req the thread's request. */
tilefs *fs_of(fuse_req_t req);
/* The kernel's entry for node n with attributes st (timeouts set). */
void fs_entry_of(tilefs *fs, fs_node *n, const struct stat *st, struct fuse_entry_param *e);
/* dirs.c: the directory operations. */
void fs_ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void fs_ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void fs_ll_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* Free the handles the kernel never released (at teardown). */
void fs_ll_free_handles(tilefs *fs);

/* ---- nodes.c ------------------------------------------------------------------------------ */

/* The tables and the root's node, its entry from fs->entries (which reads
 * through the mount's cache and keeps indexes within its index_budget).
 * 0, ENOMEM, or EIO (SOURCE unreadable: logged). */
int fs_nodes_init(tilefs *fs);
void fs_nodes_destroy(fs_nodes *t);

/* The node of kernel inode ino (NULL if unknown), pinned: fs_node_put it. */
fs_node *fs_node_get(tilefs *fs, fuse_ino_t ino);
void fs_node_put(tilefs *fs, fs_node *n);

/*
 * Look up name in directory node dir (dir NULL: the root itself): the node
 * of the entry the catalog says it shows now (tf_entry_lookup; known: its
 * stat from a listing), with the kernel's lookup count raised
 * (fs_node_forget lowers it), and its attributes in *st.  Returns 0 or an
 * errno (ENOENT for hidden files).
 */
int fs_node_lookup(tilefs *fs, fs_node *dir, const char *name, const tf_stat *known, fs_node **out,
		   struct stat *st);
void fs_node_forget(tilefs *fs, fuse_ino_t ino, uint64_t nlookup);

/* The S_IF* type bits of a kind. */
mode_t fs_mode_type(tf_ent_kind k);
/* Attributes of a node as the kernel is shown them (tf_entry_attr). */
int fs_node_attr(tilefs *fs, fs_node *n, struct stat *st);
/* How long the kernel may keep n's attributes, as last taken: usual, or 0
 * while its size is not known (so stat shows it once it is). */
double fs_node_attr_timeout(tilefs *fs, fs_node *n, double usual);

fuse_ino_t fs_node_ino(const fs_node *n);
const char *fs_node_rel(const fs_node *n);
bool fs_node_is_dir(const fs_node *n);
/* What n shows (held by n while n lives). */
tf_entry *fs_node_entry(const fs_node *n);
/* A read of n found its stored bytes changed under the version it shows
 * (a store keeping an ETag across versions): pages the kernel cached may be
 * of either, so the next open drops them (fs_node_pages_good: false once). */
void fs_node_pages_stale(fs_node *n);
bool fs_node_pages_good(fs_node *n);

/* A reload happened: file nodes are made anew at their next lookup, and
 * the kernel is told to forget the names it knows (lock not held). */
void fs_nodes_reloaded(tilefs *fs);

/* Nodes, indexes kept, bytes of index, open handles: for user.tilefs.cache. */
void fs_nodes_stats(tilefs *fs, size_t *nodes, size_t *indexes, size_t *index_bytes, size_t *handles);

/* ---- indexer.c: index_at_mount's thread --------------------------------------------------- */

/* After daemonizing, with index_at_mount: start indexing ahead
 * (tf_mount_index_ahead).  ENOMEM: no memory. */
int fs_index_start(tilefs *fs);
/* Stop indexing ahead (waits for the file in hand). */
void fs_index_stop(tilefs *fs);

/* ---- users.c: each user's share of the daemon ------------------------------------------- */

#define FS_USER_OPENS 16384	/* -o max_user_opens, by default */
#define FS_USER_LISTING 4096	/* bytes of open listings per user, per open allowed */

/* Count an open file or directory of uid: 0, or EMFILE when uid holds
 * max_opens already (ENOMEM: no memory); fs_user_close when it closes. */
int fs_user_open(tilefs *fs, uid_t uid);
void fs_user_close(tilefs *fs, uid_t uid);
/* Whether uid may list a directory now: 0, or ENOMEM while its other open
 * listings (all of its listings less `mine`, the one to be replaced) hold
 * max_listing bytes.  fs_user_listed: a listing of uid went from was to now
 * bytes (now 0 when its directory is closed). */
int fs_user_may_list(tilefs *fs, uid_t uid, size_t mine);
void fs_user_listed(tilefs *fs, uid_t uid, size_t was, size_t now);
/* Users holding something open, and opens and listings refused so far. */
void fs_users_stats(tilefs *fs, size_t *users, uint64_t *refused);
void fs_users_destroy(fs_users *u);

/* Files and directories open, all users together (idle unmount). */
size_t fs_users_open(tilefs *fs);

/* ---- lifecycle.c: the ready signal, reload, idle unmount ----------------------------------- */

/* Say once whether the mount serves: `s` or `f` to -o notify_pipe, and
 * READY=1 (or a STATUS= with the failure) to systemd when NOTIFY_SOCKET is
 * set.  ok: the kernel has initialized the session (ll_init). */
void fs_ready(tilefs *fs, bool ok, const char *why);
/* The watcher thread: a lost connection or an exit signal stops every
 * call into plugins; SIGHUP rereads the configuration (fs_reload);
 * idle_timeout unmounts.  Takes over SIGHUP, SIGINT and SIGTERM from
 * libfuse's handlers (after fuse_set_signal_handlers).  An errno: cannot. */
int fs_watch_start(tilefs *fs);
void fs_watch_stop(tilefs *fs);
/* Reread the configuration and its key files (tf_mount_reload): rules and
 * keys in force for files opened from now on; a bad one refused (logged
 * with FILE:LINE), the one in force kept.  Logs what changed. */
void fs_reload(tilefs *fs);
/* A lookup found nothing at name in parent: remembered (a ring of the
 * latest FS_NEGATIVES) so that a reload, which may show a hidden file now,
 * makes the kernel forget it.  A name pushed out of the ring within the
 * second before a reload may look absent for up to a second more. */
#define FS_NEGATIVES 256
typedef struct fs_negative fs_negative;
void fs_note_negative(tilefs *fs, fuse_ino_t parent, const char *name);

/* ---- log.c ---------------------------------------------------------------------------------- */

void fs_log_init(bool foreground, tf_log_level level);
void fs_log_set_level(tf_log_level level);
void fs_log(tf_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A decode failure: logged at most a few times a second, never repeated
 * for the same message within a short window. */
void fs_log_failure(const char *msg);
/* fs_log as tf_mount_options.log takes it. */
void fs_log_hook(void *ctx, tf_log_level level, const char *msg);

#endif
