/*
 * indexer.c - the mount's persisted index store, and indexing ahead.
 *
 * The store (tf_index.h) is opened before daemonizing (a relative -o
 * index_dir is the caller's working directory's; what is wrong with it is
 * said on the terminal), in index_dir (the default when none is
 * configured; "none": counting only), and handed to the catalog after:
 * every walk a lookup or an open makes is then stored, and every index
 * found there saves one.  A directory that must not be used (a symlink on
 * the way, another user's, or writable by others: anyone could forge its
 * entries) fails the mount when configured, and is a warning (no store)
 * when it is the default; one that cannot be made or written is a
 * warning, never a failed mount.
 *
 * With index_at_mount, one thread walks SOURCE after mounting, at the
 * lowest CPU and I/O priority, and indexes every file a [match] rule
 * decodes (as a lookup would: chunk headers alone where that is cheap).
 * Lookups of files it has not reached index them at once, as without it.
 * Its progress and the store's counters are user.tilefs.index on the root.
 */
#include "tilefs.h"

#include <inttypes.h>
#include <limits.h>
#include <linux/ioprio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cache/tf_index.h"
#include "cache/tf_walk.h"

struct fs_indexer {
	pthread_t thread;
	atomic_bool stop, done;
	_Atomic uint64_t seen, indexed, failed;
};

static void warn_log(void *ctx, const char *msg)
{
	(void)ctx;
	fs_log(TF_LOG_WARN, "%s", msg);
}

/* ---- the walk of SOURCE -------------------------------------------------------------------- */

/* Index file rel (version v) if a walked [match] rule decodes it. */
static void index_one(tilefs *fs, fs_indexer *ix, const char *rel, const tf_version *v)
{
	const tf_rule *r = tf_config_match(fs->config, rel);
	tf_file *f;
	tf_error err;

	if (!r || r->generic || r->var_data)
		return;	/* arrays' files need no walk; these are not stored */
	atomic_fetch_add(&ix->seen, 1);
	if (tf_catalog_open_for(fs->catalog, rel, v, TF_OPEN_METADATA, &f, NULL, &err) == TF_OK) {
		atomic_fetch_add(&ix->indexed, 1);
		tf_file_unref(f);
	} else {
		atomic_fetch_add(&ix->failed, 1);
		fs_log(TF_LOG_DEBUG, "index_at_mount: %s", err.msg);
	}
}

static int visit(void *ctx, const char *rel, const tf_stat *st)
{
	tilefs *fs = ctx;

	if (atomic_load(&fs->indexer->stop))
		return 1;
	if (st->kind == TF_ENT_REG)
		index_one(fs, fs->indexer, rel, &st->v);
	return 0;
}

static void *run(void *arg)
{
	tilefs *fs = arg;
	fs_indexer *ix = fs->indexer;
	pid_t tid = (pid_t)syscall(SYS_gettid);

	/* Behind every reader: nice 19 and the idle I/O class, this thread only. */
	setpriority(PRIO_PROCESS, (id_t)tid, 19);
	syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, tid, IOPRIO_PRIO_VALUE(IOPRIO_CLASS_IDLE, 0));
	/* What cannot be listed is passed over: lookups index it, as without us. */
	tf_walk(fs->src, ".", TF_WALK_KEEP_GOING, visit, fs, NULL);
	atomic_store(&ix->done, true);
	fs_log(TF_LOG_INFO, "index_at_mount: %" PRIu64 " of %" PRIu64 " files indexed%s",
	       atomic_load(&ix->indexed), atomic_load(&ix->seen), atomic_load(&ix->stop) ? " (stopped)" : "");
	return NULL;
}

/* ---- the store --------------------------------------------------------------------------- */

int fs_index_open(tilefs *fs, bool from_option)
{
	const char *dir = fs->settings->index_dir;
	char def[PATH_MAX];
	tf_error err;
	tf_status rc;

	if (!dir)
		dir = tf_index_default_dir(def, sizeof(def)) ? def : "none";
	rc = tf_index_open(strcmp(dir, "none") ? dir : NULL, fs->settings->index_max_size, warn_log, NULL,
			   &fs->index, &err);
	if (rc == TF_E_ACCESS && from_option) {
		fprintf(stderr, "tilefs: %s (-o index_dir)\n", err.msg);
		return TFS_EXIT_CONFIG;
	}
	if (rc == TF_E_ACCESS && fs->settings->index_dir) {
		fprintf(stderr, "tilefs: %s: %s\n", fs->settings->index_dir_at ? fs->settings->index_dir_at : "?",
			err.msg);
		return TFS_EXIT_CONFIG;
	}
	if (rc == TF_E_ACCESS) {	/* the default: no store, and say why */
		fs_log(TF_LOG_WARN, "%s: indexes are not persisted", err.msg);
		rc = tf_index_open(NULL, 0, warn_log, NULL, &fs->index, &err);
	}
	if (rc != TF_OK) {
		fprintf(stderr, "tilefs: %s\n", err.msg);
		return TFS_EXIT_FUSE;
	}
	return 0;
}

int fs_index_start(tilefs *fs)
{
	tf_catalog_set_index(fs->catalog, fs->index);
	if (!fs->settings->index_at_mount)
		return 0;
	if (!(fs->indexer = calloc(1, sizeof(*fs->indexer))))
		return ENOMEM;
	if (pthread_create(&fs->indexer->thread, NULL, run, fs) != 0) {
		fs_log(TF_LOG_WARN, "index_at_mount: cannot start a thread");
		free(fs->indexer);
		fs->indexer = NULL;
	}
	return 0;
}

void fs_index_stop(tilefs *fs)
{
	if (!fs->indexer)
		return;
	atomic_store(&fs->indexer->stop, true);
	pthread_join(fs->indexer->thread, NULL);
	free(fs->indexer);
	fs->indexer = NULL;
}

void fs_index_close(tilefs *fs)
{
	fs_index_stop(fs);
	tf_index_free(fs->index);
	fs->index = NULL;
}

char *fs_index_attr(tilefs *fs)
{
	fs_indexer *ix = fs->indexer;
	tf_index_stats s;
	char *v;

	if (!fs->index)
		return NULL;
	tf_index_get_stats(fs->index, &s);
	if (asprintf(&v, "dir=%s persist=%s entries=%" PRIu64 " bytes=%" PRIu64 " max_size=%" PRIu64
		     " hits=%" PRIu64 " misses=%" PRIu64 " stale=%" PRIu64 " corrupt=%" PRIu64 " writes=%" PRIu64
		     " write_errors=%" PRIu64 " evictions=%" PRIu64 " walks=%" PRIu64 " walk_bytes=%" PRIu64
		     " background=%s files_seen=%" PRIu64 " files_indexed=%" PRIu64 " files_failed=%" PRIu64
		     " published=%" PRIu64 " published_misses=%" PRIu64 " published_ignored=%" PRIu64,
		     tf_index_dir(fs->index), !s.persist ? "no" : s.writable ? "yes" : "read-only", s.entries,
		     s.bytes, s.max_size, s.hits, s.misses, s.stale, s.corrupt, s.writes, s.write_errors,
		     s.evictions, s.walks, s.walk_bytes,
		     !ix ? "off" : atomic_load(&ix->done) ? "done" : "running", ix ? atomic_load(&ix->seen) : 0,
		     ix ? atomic_load(&ix->indexed) : 0, ix ? atomic_load(&ix->failed) : 0, s.published,
		     s.published_misses, s.published_ignored) < 0)
		return NULL;
	return v;
}
