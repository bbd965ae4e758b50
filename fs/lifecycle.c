/*
 * lifecycle.c - the mount's life around its requests: saying that it
 * serves, rereading its configuration on SIGHUP, unmounting itself when
 * idle, and stopping plugin calls when the connection goes.
 *
 * The ready signal is given once, when the kernel has initialized the
 * session (ll_init: the root answers from then on), or once it is known
 * that the mount failed: `s` or `f` written to -o notify_pipe (a FIFO the
 * starter reads, as squashfuse has it), and READY=1 (or STATUS= with the
 * reason) through sd_notify when NOTIFY_SOCKET is set (systemd's
 * Type=notify; tilefs must then run with -f, as systemd watches the
 * process it started).  index_at_mount works in the background and is not
 * waited for.
 *
 * One thread (the watcher) does everything else, woken by an eventfd per
 * signal: a signal handler may touch nothing but a global, so the
 * handlers only write to those.  SIGHUP rereads the configuration
 * (fs_reload, through tf_mount_reload), after which the kernel is told to
 * forget the names it holds: those it found (fs_nodes_reloaded) and those
 * lately answered "no such entry", which ll_lookup notes here in a ring
 * (a rule may show a hidden file now).  SIGINT and SIGTERM end the session (libfuse's handlers,
 * chained) and, like the connection's end, stop every call into plugins,
 * as exiting must never wait on one (doc/plugins.md).  With -o
 * idle_timeout the watcher also wakes when the mount may have become idle:
 * no file or directory open and no request started for that long.  It then
 * unmounts the way a user would (umount2 without MNT_DETACH, fusermount3
 * -u for a user), which the kernel refuses while anything still uses the
 * mount (a working directory inside, a file mapped): such a mount stays
 * and is asked again a timeout later.
 */
#include "tilefs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

extern char **environ;

/* ---- the ready signal ------------------------------------------------------------------- */

void fs_ready(tilefs *fs, bool ok, const char *why)
{
	int fd;

	if (atomic_exchange(&fs->notified, true))
		return;
	if (ok)
		sd_notifyf(0, "READY=1\nSTATUS=serving %s", tf_mount_name(fs->mount));
	else
		sd_notifyf(0, "STATUS=failed: %s", why ? why : "see the log");
	if (!fs->notify_pipe)
		return;
	/* Blocks until the starter opens its end, as it promised to. */
	fd = open(fs->notify_pipe, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, ok ? "s" : "f", 1) != 1)
		fs_log(TF_LOG_ERROR, "notify_pipe %s: %s", fs->notify_pipe, strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* ---- reload ------------------------------------------------------------------------------ */

/* A name looked up in vain (fs_note_negative). */
struct fs_negative {
	fuse_ino_t parent;
	int64_t at;
	char name[256];
};

void fs_note_negative(tilefs *fs, fuse_ino_t parent, const char *name)
{
	fs_negative *v;

	if (!fs->negatives || strlen(name) >= sizeof(v->name))
		return;
	pthread_mutex_lock(&fs->negatives_lock);
	v = &fs->negatives[fs->negative_next++ % FS_NEGATIVES];
	v->parent = parent;
	v->at = tf_now_ns();
	strcpy(v->name, name);
	pthread_mutex_unlock(&fs->negatives_lock);
}

/* The kernel forgets the names lately found absent (within the time it
 * remembers them, FS_TIMEOUT, and a margin). */
static void forget_negatives(tilefs *fs)
{
	fs_negative *copy = malloc(FS_NEGATIVES * sizeof(*copy));
	int64_t since = tf_now_ns() - (int64_t)(FS_TIMEOUT * 1e9) - 100000000;
	size_t k = 0;

	if (!copy || !fs->negatives) {
		free(copy);
		return;
	}
	pthread_mutex_lock(&fs->negatives_lock);
	for (size_t i = 0; i < FS_NEGATIVES; i++)
		if (fs->negatives[i].parent && fs->negatives[i].at >= since)
			copy[k++] = fs->negatives[i];
	pthread_mutex_unlock(&fs->negatives_lock);
	for (size_t i = 0; i < k; i++)	/* lock not held: see fs_nodes_reloaded */
		fuse_lowlevel_notify_inval_entry(fs->se, copy[i].parent, copy[i].name, strlen(copy[i].name));
	free(copy);
}

static const char *config_name(const tilefs *fs)
{
	return fs->opts->config ? fs->opts->config : "(no configuration file)";
}

void fs_reload(tilefs *fs)
{
	char changes[2048];
	bool changed;
	tf_error err;

	sd_notify(0, "RELOADING=1");
	if (tf_mount_reload(fs->mount, &changed, changes, sizeof(changes), &err) != TF_OK) {
		fs_log(TF_LOG_ERROR, "reload refused: %s; the configuration in force stays", err.msg);
		sd_notifyf(0, "READY=1\nSTATUS=reload refused: %s", err.msg);
		return;
	}
	if (!changed) {
		fs_log(TF_LOG_INFO, "reload: %s: nothing changed", config_name(fs));
	} else {
		/* Files looked up from now on are made under the new one, and
		 * the kernel forgets the names it holds, found or not. */
		atomic_store(&fs->settings, tf_mount_settings(fs->mount));
		fs_log_set_level(fs->settings->log_level);
		fs_nodes_reloaded(fs);
		forget_negatives(fs);
		fs_log(TF_LOG_INFO, "reload: %s: %s", config_name(fs), changes);
	}
	sd_notifyf(0, "READY=1\nSTATUS=serving %s", tf_mount_name(fs->mount));
}

/* ---- idle unmount ----------------------------------------------------------------------- */


/* Milliseconds until the mount may be idle (not before `next`): -1 never. */
static int idle_wait_ms(tilefs *fs, int64_t next)
{
	int64_t due = atomic_load(&fs->last_request_ns) + fs->idle_ns, ms;

	if (!fs->idle_ns || next == INT64_MAX)
		return -1;
	if (next > due)
		due = next;
	ms = (due - tf_now_ns()) / 1000000 + 1;
	return ms <= 0 ? 0 : ms > INT_MAX ? INT_MAX : (int)ms;
}

/* fusermount3 -u MOUNTPOINT: 0 when it unmounted. */
static int run_fusermount(const char *mountpoint)
{
	char *argv[] = { "fusermount3", "-u", "-q", (char *)mountpoint, NULL };
	int status;
	pid_t pid;

	if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0)
		return -1;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/*
 * Unmount if nothing is open and no request started for idle_ns.  Returns
 * when to look again: 0 when the quiet time is simply not over (the next
 * request's time says when), a timeout from now when the mount is in use
 * (a close is a request, so that is soon enough), -1 when unmounted.
 */
static int64_t unmount_if_idle(tilefs *fs)
{
	int64_t now = tf_now_ns(), quiet = now - atomic_load(&fs->last_request_ns);
	int rc;

	if (quiet < fs->idle_ns)
		return 0;
	if (fs_users_open(fs))
		return now + fs->idle_ns;
	rc = geteuid() == 0 ? umount2(fs->mountpoint, UMOUNT_NOFOLLOW) : run_fusermount(fs->mountpoint);
	if (rc != 0) {
		fs_log(TF_LOG_DEBUG, "idle, but %s is in use: it stays mounted", fs->mountpoint);
		return now + fs->idle_ns;
	}
	fs_log(TF_LOG_INFO, "idle for %.1f s: %s unmounted", quiet / 1e9, fs->mountpoint);
	return -1;
}

/* ---- the watcher and the signals -------------------------------------------------------- */

static void *watch(void *arg)
{
	tilefs *fs = arg;
	struct pollfd p[3] = { { .fd = fuse_session_fd(fs->se) },	/* POLLERR: gone */
			       { .fd = fs->watch_wake, .events = POLLIN },
			       { .fd = fs->reload_wake, .events = POLLIN } };
	int64_t next = 0;	/* no idle check before (the mount was busy then) */
	uint64_t n;

	for (;;) {
		int k = poll(p, 3, idle_wait_ms(fs, next));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 || p[0].revents || p[1].revents)
			break;
		if ((p[2].revents & POLLIN) && read(fs->reload_wake, &n, sizeof(n)) == sizeof(n))
			fs_reload(fs);
		if (k == 0 && (next = unmount_if_idle(fs)) < 0)
			next = INT64_MAX;	/* the connection's end follows */
	}
	tf_mount_stop_plugins(fs->mount);
	return NULL;
}

/* libfuse's exit handlers (SIGINT, SIGTERM), each followed by a word to
 * the watcher; SIGHUP is ours alone.  A handler reaches no state but a
 * global's. */
static const int exit_signals[] = { SIGINT, SIGTERM };
#define NEXIT (sizeof(exit_signals) / sizeof(exit_signals[0]))
static struct sigaction libfuse_exit[NEXIT], libfuse_hup;
static int exit_wake = -1, reload_wake = -1;

static void wake(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) < 0) {
		/* a full eventfd has woken the watcher already */
	}
}

static void on_exit_signal(int sig, siginfo_t *info, void *uc)
{
	int saved = errno;

	for (size_t i = 0; i < NEXIT; i++)
		if (exit_signals[i] == sig && (libfuse_exit[i].sa_flags & SA_SIGINFO))
			libfuse_exit[i].sa_sigaction(sig, info, uc);
		else if (exit_signals[i] == sig && libfuse_exit[i].sa_handler != SIG_DFL &&
			 libfuse_exit[i].sa_handler != SIG_IGN)
			libfuse_exit[i].sa_handler(sig);
	wake(exit_wake);
	errno = saved;
}

static void on_hup(int sig)
{
	int saved = errno;

	(void)sig;
	wake(reload_wake);
	errno = saved;
}

int fs_watch_start(tilefs *fs)
{
	struct sigaction sa = { .sa_sigaction = on_exit_signal, .sa_flags = SA_SIGINFO };
	struct sigaction hup = { .sa_handler = on_hup, .sa_flags = SA_RESTART };
	int e;

	atomic_store(&fs->last_request_ns, tf_now_ns());
	if (!(fs->negatives = calloc(FS_NEGATIVES, sizeof(*fs->negatives))))
		return errno = ENOMEM;
	if ((fs->watch_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		return errno;
	if ((fs->reload_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		e = errno;
	else
		e = pthread_create(&fs->watcher, NULL, watch, fs);
	if (e) {
		if (fs->reload_wake >= 0)
			close(fs->reload_wake);
		close(fs->watch_wake);
		return errno = e;	/* main says strerror(errno) */
	}
	exit_wake = fs->watch_wake;
	reload_wake = fs->reload_wake;
	sigemptyset(&sa.sa_mask);
	sigemptyset(&hup.sa_mask);
	for (size_t i = 0; i < NEXIT; i++)
		sigaction(exit_signals[i], &sa, &libfuse_exit[i]);
	sigaction(SIGHUP, &hup, &libfuse_hup);
	return 0;
}

/* libfuse's handlers back (fuse_remove_signal_handlers removes only its
 * own), the watcher woken and joined. */
void fs_watch_stop(tilefs *fs)
{
	for (size_t i = 0; i < NEXIT; i++)
		sigaction(exit_signals[i], &libfuse_exit[i], NULL);
	sigaction(SIGHUP, &libfuse_hup, NULL);
	sd_notify(0, "STOPPING=1");
	wake(fs->watch_wake);
	pthread_join(fs->watcher, NULL);
	exit_wake = reload_wake = -1;
	close(fs->watch_wake);
	close(fs->reload_wake);
}
