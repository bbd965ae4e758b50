/*
 * main.c - tilefs [options] SOURCE MOUNTPOINT
 *
 * Everything that can be wrong with the configuration is found before the
 * mount is made, and reported with a distinct exit status; the cache's
 * threads start only after daemonizing (fork keeps no threads).  The
 * session is libfuse's low-level one (ll.c).
 */
#include "tilefs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

enum { KEY_INDEX_DIR = 1 };

#define CLI_OPT(t, p) { t, offsetof(fs_options, p), 1 }
static const struct fuse_opt cli_spec[] = {
	CLI_OPT("config=%s", config),
	CLI_OPT("cache_size=%s", cache_size),
	CLI_OPT("views", views),
	CLI_OPT("direct_io", direct_io),
	CLI_OPT("index_at_mount", index_at_mount),
	CLI_OPT("max_user_opens=%s", max_user_opens),
	CLI_OPT("notify_pipe=%s", notify_pipe),
	CLI_OPT("idle_timeout=%s", idle_timeout),
	CLI_OPT("cache_dir=%s", cache_dir),
	CLI_OPT("cache_dir_size=%s", cache_dir_size),
	CLI_OPT("cache_dir_min_free=%s", cache_dir_min_free),
	FUSE_OPT_KEY("index_dir=", KEY_INDEX_DIR),
	CLI_OPT("--help", help), CLI_OPT("-h", help),
	CLI_OPT("--version", version), CLI_OPT("-V", version),
	FUSE_OPT_END
};

/* The first non-option argument is SOURCE; FUSE gets the rest. */
static int take_source(void *data, const char *arg, int key, struct fuse_args *out)
{
	fs_options *c = data;

	(void)out;
	if (key == KEY_INDEX_DIR) {	/* the last one given wins */
		free(c->index_dir);
		c->index_dir = strdup(arg + strlen("index_dir="));
		return c->index_dir ? 0 : -1;
	}
	if (key == FUSE_OPT_KEY_NONOPT && !c->source) {
		c->source = strdup(arg);
		return 0;
	}
	return 1;
}

static void usage(const char *prog)
{
	printf("Usage: %s [options] SOURCE MOUNTPOINT\n\n"
	       "Show every TileDB tile file under SOURCE (a directory, or s3://BUCKET[/PREFIX]),\n"
	       "decoded, at the same path under\n"
	       "MOUNTPOINT (read-only).\n\n"
	       "tilefs options:\n"
	       "    -o config=FILE         INI configuration (see tilefs.ini(5))\n"
	       "    -o cache_size=SIZE     decoded-chunk cache budget, e.g. 512M (default 256M)\n"
	       "    -o views               an @views folder in every TileDB array (tilefs(1), VIEWS)\n"
	       "    -o direct_io           decoded files bypass the page cache: faster streaming,\n"
	       "                           no shared mmap (tilefs(1))\n"
	       "    -o index_dir=DIR|none  where indexes are kept across mounts (default\n"
	       "                           $XDG_CACHE_HOME/tilefs, /var/cache/tilefs for root)\n"
	       "    -o index_at_mount      index every file in the background after mounting\n"
	       "    -o max_user_opens=N    files and directories one user may hold open (default\n"
	       "                           16384; 0: no bound); more get EMFILE\n"
	       "    -o notify_pipe=FIFO    write 's' there once the mount serves, 'f' if it failed\n"
	       "    -o idle_timeout=SECS   unmount after SECS with no open file and no request\n"
	       "    -o cache_dir=DIR       keep an object store's stored bytes on disk in DIR,\n"
	       "                           across mounts (tilefs(1), DISK CACHE)\n"
	       "    -o cache_dir_size=SIZE at most SIZE there (default 1G)\n"
	       "    -o cache_dir_min_free=SIZE  leave SIZE free on DIR's filesystem (default 1G)\n"
	       "    -o allow_other         let other users read the mount\n"
	       "    -f                     stay in the foreground, log to stderr\n"
	       "    -s                     one thread\n"
	       "    -d                     FUSE debug output (implies -f)\n"
	       "    -V, --version          print the version\n\n"
	       "SIGHUP rereads the configuration and key files (tilefs(1), RELOAD).\n\n"
	       "Exit status: 0 unmounted cleanly, 1 mount/FUSE error, 2 usage error,\n"
	       "3 configuration error, 4 key error, 5 SOURCE refused (object store: credentials,\n"
	       "bucket, endpoint).\n\n", prog);
}

/* A whole number of seconds 0 to 2^31 ("0": never), as -o idle_timeout. */
static bool parse_seconds(const char *text, int64_t *ns)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(text, &end, 10);
	if (!*text || *end || text[0] == '-' || errno || v > INT32_MAX)
		return false;
	*ns = (int64_t)v * 1000000000;
	return true;
}

/* The exit status of a mount the library could not open. */
static int exit_status(tf_mount_failure why)
{
	switch (why) {
	case TF_MOUNT_E_OPTION:
	case TF_MOUNT_E_SOURCE: return TFS_EXIT_USAGE;
	case TF_MOUNT_E_CONFIG: return TFS_EXIT_CONFIG;
	case TF_MOUNT_E_KEY: return TFS_EXIT_KEY;
	case TF_MOUNT_E_REFUSED: return TFS_EXIT_SOURCE;
	default: return TFS_EXIT_FUSE;
	}
}

/* The mount's library side from the options (tf_mount_open: the
 * configuration, its warnings said, and SOURCE: an object store that
 * refuses us fails here, before the mount appears), then the driver's own
 * options. */
static int open_mount(tilefs *fs, const fs_options *c)
{
	tf_mount_options mo = {
		.source = c->source, .config = c->config, .cache_size = c->cache_size, .index_dir = c->index_dir,
		.cache_dir = c->cache_dir, .cache_dir_size = c->cache_dir_size,
		.cache_dir_min_free = c->cache_dir_min_free, .views = c->views, .index_at_mount = c->index_at_mount,
		.log = fs_log_hook,
	};
	tf_mount_failure why;
	tf_error err;

	if (tf_mount_open(&mo, &fs->mount, &why, &err) != TF_OK) {
		fprintf(stderr, "tilefs: %s\n", err.msg);
		return exit_status(why);
	}
	fs->settings = tf_mount_settings(fs->mount);
	if (c->max_user_opens) {
		char *end;
		unsigned long n = strtoul(c->max_user_opens, &end, 10);
		if (!*c->max_user_opens || *end || c->max_user_opens[0] == '-' || n > UINT_MAX) {
			fprintf(stderr, "tilefs: max_user_opens: bad number '%s'\n", c->max_user_opens);
			return TFS_EXIT_USAGE;
		}
		fs->users.max_opens = (unsigned)n;
	}
	if (c->idle_timeout && !parse_seconds(c->idle_timeout, &fs->idle_ns)) {
		fprintf(stderr, "tilefs: idle_timeout: bad number of seconds '%s'\n", c->idle_timeout);
		return TFS_EXIT_USAGE;
	}
	fs->users.max_listing = (size_t)fs->users.max_opens * FS_USER_LISTING;
	return 0;
}

/* The persisted index store, before daemonizing (tf_mount_open_store): a
 * configured index_dir that must not be used fails the mount, said on
 * stderr with the option or FILE:LINE that set it. */
static int open_store(tilefs *fs)
{
	tf_mount_failure why;
	tf_error err;

	if (tf_mount_open_store(fs->mount, &why, &err) != TF_OK) {
		fprintf(stderr, "tilefs: %s\n", err.msg);
		return exit_status(why);
	}
	return 0;
}

/* The absolute form of path without resolving anything (a hung mount on
 * the way must not hang us): cwd-prefixed, "." and ".." folded. */
static bool absolute_path(const char *path, char *out, size_t n)
{
	char cwd[PATH_MAX], tmp[PATH_MAX], *save, *c;
	size_t len = 0;

	if (path[0] != '/' && !getcwd(cwd, sizeof(cwd)))
		return false;
	if (snprintf(tmp, sizeof(tmp), "%s/%s", path[0] == '/' ? "" : cwd, path) >= (int)sizeof(tmp))
		return false;
	out[0] = '\0';
	for (c = strtok_r(tmp, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, "."))
			continue;
		if (!strcmp(c, "..")) {
			while (len && out[--len] != '/')
				;
			out[len] = '\0';
			continue;
		}
		if (len + 1 + strlen(c) >= n)
			return false;
		len += (size_t)sprintf(out + len, "/%s", c);
	}
	if (!len)
		snprintf(out, n, "/");
	return true;
}

/* absolute_path, malloc'd (NULL: too long, no memory). */
static char *absolute_dup(const char *path)
{
	char abs[PATH_MAX];

	return absolute_path(path, abs, sizeof(abs)) ? strdup(abs) : NULL;
}

static bool absolutize(char **path)
{
	char *abs = absolute_dup(*path);

	if (!abs)
		return false;
	free(*path);
	*path = abs;
	return true;
}

/* What the ready signal says of a failure (the reason was said on stderr
 * or in the log). */
static const char *exit_reason(int rc)
{
	switch (rc) {
	case TFS_EXIT_USAGE: return "usage error";
	case TFS_EXIT_CONFIG: return "configuration error";
	case TFS_EXIT_KEY: return "key error";
	case TFS_EXIT_SOURCE: return "SOURCE refused";
	default: return "the mount failed or ended before it served";
	}
}

/* Whether a tilefs is mounted at path already (from /proc/self/mountinfo:
 * mount point is field 5, the type follows " - "). */
static bool tilefs_mounted_at(const char *path)
{
	char line[8192], mnt[PATH_MAX], type[64];
	bool found = false;
	FILE *f = fopen("/proc/self/mountinfo", "r");

	while (f && !found && fgets(line, sizeof(line), f)) {
		const char *dash = strstr(line, " - ");
		found = dash && sscanf(line, "%*s %*s %*s %*s %4095s", mnt) == 1 &&
			sscanf(dash + 3, "%63s", type) == 1 && !strcmp(mnt, path) &&
			!strcmp(type, "fuse.tilefs");
	}
	if (f)
		fclose(f);
	return found;
}

/* A mount inside SOURCE would list itself forever; a second tilefs on the
 * same mountpoint hides the first.  Both are refused before mounting. */
static int check_mountpoint(tilefs *fs, const char *mountpoint)
{
	char abs[PATH_MAX];
	int fd;
	bool inside;

	if (!absolute_path(mountpoint, abs, sizeof(abs))) {
		fprintf(stderr, "tilefs: %s: path too long\n", mountpoint);
		return TFS_EXIT_USAGE;
	}
	if (tilefs_mounted_at(abs)) {
		fprintf(stderr, "tilefs: %s: a tilefs is mounted there already (fusermount3 -u it first)\n",
			mountpoint);
		return TFS_EXIT_USAGE;
	}
	if ((fd = open(abs, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		fprintf(stderr, "tilefs: %s: %s\n", mountpoint, strerror(errno));
		return TFS_EXIT_USAGE;
	}
	inside = tf_mount_contains(fs->mount, fd);
	close(fd);
	if (inside) {
		fprintf(stderr, "tilefs: %s: the mountpoint is inside SOURCE %s: the mount would "
			"contain itself\n", mountpoint, tf_mount_name(fs->mount));
		return TFS_EXIT_USAGE;
	}
	return 0;
}

/*
 * Where the kernel's readahead window for this mount is set: the mount's
 * device, found in /proc/self/mountinfo (stat() would ask the mount itself,
 * which cannot answer yet).
 */
static void find_readahead_knob(tilefs *fs, const char *mountpoint)
{
	char real[PATH_MAX], line[4096], devno[32], mnt[PATH_MAX];
	FILE *f;

	if (!realpath(mountpoint, real) || !(f = fopen("/proc/self/mountinfo", "r")))
		return;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %*s %31s %*s %4095s", devno, mnt) == 2 && !strcmp(mnt, real))
			snprintf(fs->readahead_knob, sizeof(fs->readahead_knob),
				 "/sys/class/bdi/%s/read_ahead_kb", devno);	/* the last is ours */
	fclose(f);
}

/* The root's node: inode 1, held for the life of the mount. */
static int make_root(tilefs *fs)
{
	struct stat st;
	fs_node *root;

	return fs_node_lookup(fs, NULL, ".", NULL, &root, &st);
}

/* After daemonizing: logging, threads (the mount's: tf_mount_start). */
static int start(tilefs *fs)
{
	tf_source_hooks hooks;
	unsigned workers;
	tf_error err;
	struct rlimit nofile;

	fs_log_init(fs->foreground, fs->settings->log_level);
	/* libfuse allocates each read's reply buffer (up to 1 MiB) in the
	 * handling thread; with an arena per thread each keeps its own copy.
	 * Two arenas share them, keeping RSS near the cache budget. */
	mallopt(M_ARENA_MAX, 2);
	/* Allow as many descriptors as we may, as most servers do; the
	 * source's pool takes its share of them (half, less a reserve), and
	 * the rest stays for listings and everything else. */
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	if (fs_ll_init(fs, &hooks) != 0 || tf_mount_start(fs->mount, &hooks, &workers, &err) != TF_OK) {
		fs_log(TF_LOG_ERROR, "cannot start: out of memory, or SOURCE unreadable");
		return -1;
	}
	fs->entries = tf_mount_entries(fs->mount);
	if (fs_index_start(fs) != 0 || fs_nodes_init(fs) != 0 || make_root(fs) != 0) {
		fs_log(TF_LOG_ERROR, "cannot start: out of memory, or SOURCE unreadable");
		return -1;
	}
	fs_log(TF_LOG_INFO, "serving %s (cache %llu bytes, %u decode workers)", tf_mount_name(fs->mount),
	       (unsigned long long)fs->settings->cache_size, workers);
	return 0;
}

static int loop(tilefs *fs, const struct fuse_cmdline_opts *o)
{
	struct fuse_loop_config *cfg;
	int rc;

	if (o->singlethread)
		return fuse_session_loop(fs->se);
	if (!(cfg = fuse_loop_cfg_create()))
		return -1;
	/* A /dev/fuse descriptor per thread: no contention on one queue. */
	fuse_loop_cfg_set_clone_fd(cfg, 1);
	if (o->max_idle_threads != UINT_MAX)	/* libfuse's "not given" */
		fuse_loop_cfg_set_idle_threads(cfg, o->max_idle_threads);
	fuse_loop_cfg_set_max_threads(cfg, fs->max_threads ? fs->max_threads : o->max_threads);
	rc = fuse_session_loop_mt(fs->se, cfg);
	fuse_loop_cfg_destroy(cfg);
	return rc;
}

static int serve(tilefs *fs, struct fuse_args *args, const struct fuse_cmdline_opts *o)
{
	int rc = TFS_EXIT_FUSE;

	if (!(fs->se = fuse_session_new(args, &tilefs_ll_ops, sizeof(tilefs_ll_ops), fs)))
		return TFS_EXIT_USAGE;	/* it has said which option it rejected */
	if (!(fs->mountpoint = absolute_dup(o->mountpoint)) || fuse_session_mount(fs->se, o->mountpoint) != 0)
		goto out;
	find_readahead_knob(fs, o->mountpoint);
	fs->foreground = o->foreground;
	if (fuse_daemonize(o->foreground) != 0 || start(fs) != 0 ||
	    fuse_set_signal_handlers(fs->se) != 0)
		goto unmount;
	if (fs_watch_start(fs) != 0) {
		fs_log(TF_LOG_ERROR, "cannot start: %s", strerror(errno));
		fuse_remove_signal_handlers(fs->se);
		goto unmount;
	}
	/* libfuse ends the loop with the number of the signal that ended it:
	 * SIGINT or SIGTERM (kill, systemctl stop) is the unmount asked for. */
	rc = loop(fs, o);
	rc = rc == 0 || rc == SIGINT || rc == SIGTERM ? 0 : TFS_EXIT_FUSE;
	fs_watch_stop(fs);
	fuse_remove_signal_handlers(fs->se);
unmount:
	fuse_session_unmount(fs->se);
out:
	fuse_session_destroy(fs->se);
	fs->se = NULL;
	return rc;
}

/* Everything start() made, in reverse; safe after any failure in it.  Open
 * files first (views read through the cache), then the nodes (view nodes
 * hold the catalog's arrays), then the mount's library side. */
static void teardown(tilefs *fs)
{
	tf_mount_stop_plugins(fs->mount);	/* a decode-ahead stuck in a plugin must not
						 * hold the cache's join, nor a file in hand
						 * the indexer's */
	fs_index_stop(fs);
	if (fs->nodes.by_id) {
		fs_ll_free_handles(fs);
		fs_nodes_destroy(&fs->nodes);
	}
	tf_mount_close(fs->mount);
	fs_users_destroy(&fs->users);
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts o = { 0 };
	tilefs fs = { .handles_lock = PTHREAD_MUTEX_INITIALIZER, .negatives_lock = PTHREAD_MUTEX_INITIALIZER,
		      .users = { .lock = PTHREAD_MUTEX_INITIALIZER, .max_opens = FS_USER_OPENS } };
	fs_options c = { 0 };
	int rc;

	if (fuse_opt_parse(&args, &c, cli_spec, take_source) != 0)
		return TFS_EXIT_USAGE;
	fs.opts = &c;
	/* The daemon works from "/": a reload rereads the file, and the
	 * notify pipe is opened, by absolute paths. */
	if ((c.notify_pipe && !(fs.notify_pipe = absolute_dup(c.notify_pipe))) ||
	    (c.config && !absolutize(&c.config))) {
		fprintf(stderr, "tilefs: a path too long, or out of memory\n");
		return TFS_EXIT_USAGE;
	}
	/* Few FUSE threads: decoding runs on the cache's workers, and every
	 * extra thread a request wakes costs a hand-off (ls -l of 100,000
	 * files: 5.7 s with libfuse's 10 threads, 3.2 s with 4).  An explicit
	 * -o max_threads wins. */
	fs.max_threads = 4;
	for (int i = 1; i < args.argc; i++)
		if (strstr(args.argv[i], "max_threads="))
			fs.max_threads = 0;
	if (c.help || c.version) {
		if (c.help)
			usage(argv[0]);
		printf("tilefs %s (libfuse %s)\n", PACKAGE_VERSION, fuse_pkgversion());
		rc = 0;
	} else if (!c.source) {
		fprintf(stderr, "tilefs: missing SOURCE and MOUNTPOINT (see tilefs --help)\n");
		rc = TFS_EXIT_USAGE;
	} else if (!(rc = open_mount(&fs, &c))) {
		fs.direct_io = c.direct_io;
		/* Read-only, and the kernel enforces the modes shown (the
		 * source's, less write bits) for every user of allow_other. */
		if (fuse_opt_add_arg(&args, "-oro") || fuse_opt_add_arg(&args, "-osubtype=tilefs") ||
		    fuse_opt_add_arg(&args, "-odefault_permissions") ||
		    fuse_parse_cmdline(&args, &o) != 0 || !o.mountpoint) {
			fprintf(stderr, "tilefs: missing MOUNTPOINT (see tilefs --help)\n");
			rc = TFS_EXIT_USAGE;
		} else if (!(rc = check_mountpoint(&fs, o.mountpoint)) &&
			   !(rc = open_store(&fs))) {
			rc = serve(&fs, &args, &o);
		}
	}
	if (!c.help && !c.version)	/* unless it said it serves */
		fs_ready(&fs, false, exit_reason(rc));
	teardown(&fs);
	free(o.mountpoint);
	free(fs.mountpoint), free(fs.notify_pipe), free(fs.negatives);
	free(c.config), free(c.cache_size), free(c.source), free(c.index_dir), free(c.max_user_opens);
	free(c.cache_dir), free(c.cache_dir_size), free(c.cache_dir_min_free);
	free(c.notify_pipe), free(c.idle_timeout);
	fuse_opt_free_args(&args);
	return rc;
}
