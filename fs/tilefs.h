/*
 * tilefs.h - the FUSE driver's state.  Nothing here knows the TileDB
 * format: it maps paths to tf_file objects from the library and answers
 * FUSE requests with them.
 */
#ifndef TILEFS_H
#define TILEFS_H

#include "config.h"	/* first: _GNU_SOURCE and friends */

#define FUSE_USE_VERSION 31

#include <fuse.h>
#include <fuse_lowlevel.h>	/* fuse_parse_cmdline */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "tf_array.h"
#include "tf_cache.h"
#include "tf_config.h"
#include "tf_file.h"

/* Exit statuses of the tilefs command (documented in tilefs(1)). */
enum { TFS_EXIT_FUSE = 1, TFS_EXIT_USAGE = 2, TFS_EXIT_CONFIG = 3, TFS_EXIT_KEY = 4, TFS_EXIT_SOURCE = 5 };

/* A source file shown decoded, with its index while the source is unchanged. */
typedef struct fs_node fs_node;
/* A TileDB array under SOURCE. */
typedef struct fs_array fs_array;

typedef struct fs_table {
	pthread_mutex_t lock;
	fs_node **buckets;
	size_t nbuckets, count;
	fs_node *lru_head, *lru_tail;	/* least recently used first */
	size_t index_bytes, index_budget;
} fs_table;

/* The one state object of the driver (FUSE's private_data). */
typedef struct tilefs {
	char *source;			/* absolute path of SOURCE */
	int source_fd;			/* O_DIRECTORY handle of SOURCE */
	tf_source *src;			/* the library's view of SOURCE */
	tf_config *config;
	const tf_settings *settings;
	tf_cache *cache;		/* created after daemonizing (threads) */
	fs_table table;
	pthread_key_t workspace_key;	/* per-thread tf_workspace */
	pthread_mutex_t arrays_lock;
	fs_array *arrays;		/* arrays seen so far */
	bool foreground;
	char readahead_knob[96];	/* sysfs file of the mount's readahead window */
	atomic_bool readahead_set;
} tilefs;

extern const struct fuse_operations tilefs_ops;

/* table.c */
int fs_table_init(fs_table *t, size_t index_budget);
void fs_table_destroy(fs_table *t);
/*
 * The decoded-file node for rel (a regular source file with stat *st), with
 * a reference to its current index in *file; NULL when no rule decodes it.
 * A changed source gets a fresh index.  *reused tells whether *file is the
 * index the last open saw (then the kernel may keep its page cache).  On
 * an index error the node comes back with *file NULL and -errno in *errp.
 * With pin, the node stays valid until fs_node_release() (open handles).
 */
void fs_version_of(const struct stat *st, tf_version *v);
fs_node *fs_lookup(tilefs *fs, const char *rel, const struct stat *st, bool pin,
		   tf_file **file, bool *reused, int *errp);
void fs_node_release(tilefs *fs, fs_node *n);
/* Remember/get the last decode error of a node (for user.tilefs.error). */
void fs_node_set_error(tilefs *fs, fs_node *n, const char *msg);
char *fs_node_error(tilefs *fs, fs_node *n);
/* Whether rel is a file tilefs decodes: a [match] rule, else its array. */
bool fs_is_decoded(tilefs *fs, const char *rel);

/* Facts shown as user.tilefs.* attributes of a decoded file, from its
 * array ("" and 0 when unknown). */
typedef struct fs_facts {
	char field[256], role[32], fragment[256];
	uint32_t format_version;
} fs_facts;
void fs_node_facts(tilefs *fs, fs_node *n, fs_facts *out);

/* arrays.c */
/* The TileDB array holding rel (NULL: none), and rel inside it. */
tf_array *fs_array_of(tilefs *fs, const char *rel, const char **inner);
void fs_arrays_destroy(tilefs *fs);

/* log.c */
void fs_log_init(bool foreground, tf_log_level level);
void fs_log(tf_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A decode failure: logged at most a few times a second, never repeated
 * for the same message within a short window. */
void fs_log_failure(const char *msg);

/* ops.c */
tf_workspace *fs_workspace(tilefs *fs);

#endif
