/*
 * indexer.c - index_at_mount: one thread that indexes SOURCE ahead of its
 * readers.
 *
 * The walk itself is the library's (tf_mount_index_ahead: every file a
 * [match] rule decodes, indexed as a lookup would and stored in the
 * mount's index store, opened before daemonizing by tf_mount_open_store).
 * Here is its thread: started after mounting, at the lowest CPU and I/O
 * priority, stopped (after the file in hand) at teardown.  Lookups of
 * files it has not reached index them at once, as without it.  Its
 * progress and the store's counters are user.tilefs.index on the root.
 */
#include "tilefs.h"

#include <linux/ioprio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

struct fs_indexer {
	pthread_t thread;
	atomic_bool stop;
};

static bool stopped(void *ctx)
{
	return atomic_load(&((fs_indexer *)ctx)->stop);
}

static void *run(void *arg)
{
	tilefs *fs = arg;
	pid_t tid = (pid_t)syscall(SYS_gettid);

	/* Behind every reader: nice 19 and the idle I/O class, this thread only. */
	setpriority(PRIO_PROCESS, (id_t)tid, 19);
	syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, tid, IOPRIO_PRIO_VALUE(IOPRIO_CLASS_IDLE, 0));
	tf_mount_index_ahead(fs->mount, stopped, fs->indexer);
	return NULL;
}

int fs_index_start(tilefs *fs)
{
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
