/*
 * main.c - tilefs [options] SOURCE MOUNTPOINT
 *
 * Everything that can be wrong with the configuration is found before the
 * mount is made, and reported with a distinct exit status; the cache's
 * threads start only after daemonizing (fork keeps no threads).
 */
#include "tilefs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

typedef struct cli {
	char *config, *cache_size, *source;
	int help, version;
} cli;

#define CLI_OPT(t, p) { t, offsetof(cli, p), 1 }
static const struct fuse_opt cli_spec[] = {
	CLI_OPT("config=%s", config),
	CLI_OPT("cache_size=%s", cache_size),
	CLI_OPT("--help", help), CLI_OPT("-h", help),
	CLI_OPT("--version", version), CLI_OPT("-V", version),
	FUSE_OPT_END
};

/* The first non-option argument is SOURCE; FUSE gets the rest. */
static int take_source(void *data, const char *arg, int key, struct fuse_args *out)
{
	cli *c = data;

	(void)out;
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
	       "    -o allow_other         let other users read the mount\n"
	       "    -f                     stay in the foreground, log to stderr\n"
	       "    -s                     one thread\n"
	       "    -d                     FUSE debug output (implies -f)\n"
	       "    -V, --version          print the version\n\n"
	       "Exit status: 0 unmounted cleanly, 1 mount/FUSE error, 2 usage error,\n"
	       "3 configuration error, 4 key error, 5 SOURCE refused (object store: credentials,\n"
	       "bucket, endpoint).\n\n", prog);
}

static int load_config(tilefs *fs, const cli *c)
{
	tf_error err;
	uint64_t size;
	tf_status rc = c->config ? tf_config_load(c->config, &fs->config, &err)
				 : tf_config_default(&fs->config, &err);

	if (rc != TF_OK) {
		fprintf(stderr, "tilefs: %s\n", err.msg);
		return rc == TF_E_NOKEY ? TFS_EXIT_KEY : TFS_EXIT_CONFIG;
	}
	if (c->cache_size) {
		if (!tf_parse_size(c->cache_size, &size) || size < 65536) {
			fprintf(stderr, "tilefs: cache_size: bad size '%s' (e.g. 256M)\n", c->cache_size);
			return TFS_EXIT_USAGE;
		}
		tf_config_set_cache_size(fs->config, size);
	}
	fs->settings = tf_config_settings(fs->config);
	return 0;
}

/* SOURCE through the library: a local directory, or s3://BUCKET[/PREFIX]
 * with the [s3] settings (after the configuration is loaded).  An object
 * store that refuses us or has no such bucket fails here, before the
 * mount appears, with TFS_EXIT_SOURCE. */
static int open_source(tilefs *fs, const char *source)
{
	char real[PATH_MAX];

	tf_error err;

	if (!strncmp(source, "s3://", 5)) {
		if (!(fs->source = strdup(source)))
			return TFS_EXIT_USAGE;
		if (tf_source_open(source, tf_config_s3(fs->config), &fs->src, &err) != TF_OK) {
			fprintf(stderr, "tilefs: %s: %s\n", source, err.msg);
			return err.code == TF_E_INVAL ? TFS_EXIT_CONFIG : TFS_EXIT_SOURCE;
		}
		return 0;
	}
	if (!realpath(source, real) || !(fs->source = strdup(real)) ||
	    (fs->source_fd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		fprintf(stderr, "tilefs: %s: %s\n", source, strerror(errno));
		return TFS_EXIT_USAGE;
	}
	if (tf_source_open(real, tf_config_s3(fs->config), &fs->src, &err) != TF_OK) {
		fprintf(stderr, "tilefs: %s\n", err.msg);
		return TFS_EXIT_USAGE;
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

/* Whether directory fd `dir` is `root` or lies beneath it: walk ".." up to
 * the system root, comparing device and inode (bind mounts and symlinks
 * cannot hide it).  Takes ownership of dir. */
static bool beneath(int dir, const struct stat *root)
{
	struct stat st, up;
	bool inside = false;

	while (dir >= 0 && fstat(dir, &st) == 0) {
		int parent;
		if (st.st_dev == root->st_dev && st.st_ino == root->st_ino) {
			inside = true;
			break;
		}
		parent = openat(dir, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (parent < 0 || fstat(parent, &up) != 0 || (up.st_dev == st.st_dev && up.st_ino == st.st_ino)) {
			if (parent >= 0)
				close(parent);
			break;	/* the system root */
		}
		close(dir);
		dir = parent;
	}
	if (dir >= 0)
		close(dir);
	return inside;
}

/* A mount inside SOURCE would list itself forever; a second tilefs on the
 * same mountpoint hides the first.  Both are refused before mounting. */
static int check_mountpoint(tilefs *fs, const char *mountpoint)
{
	char abs[PATH_MAX];
	struct stat root;
	int fd;

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
	if (fstat(fs->source_fd, &root) == 0 && beneath(fd, &root)) {
		fprintf(stderr, "tilefs: %s: the mountpoint is inside SOURCE %s: the mount would "
			"contain itself\n", mountpoint, fs->source);
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

static void free_workspace(void *ws)
{
	tf_workspace_free(ws);
}

/* After daemonizing: threads, locked keys, logging. */
static int start(tilefs *fs)
{
	unsigned workers = fs->settings->workers;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	tf_error err;
	struct rlimit nofile;

	fs_log_init(fs->foreground, fs->settings->log_level);
	tf_config_lock_keys(fs->config);
	/* libfuse allocates each read's reply buffer (up to 1 MiB) in the
	 * handling thread; with an arena per thread each keeps its own copy.
	 * Two arenas share them, keeping RSS near the cache budget. */
	mallopt(M_ARENA_MAX, 2);
	/* Files being read hold a descriptor each: allow as many as we may. */
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	if (!workers)
		workers = ncpu > 0 ? (unsigned)ncpu : 2;
	pthread_mutex_init(&fs->arrays_lock, NULL);
	if (tf_cache_new(fs->settings->cache_size, workers, &fs->cache, &err) != TF_OK ||
	    fs_table_init(&fs->table, fs->settings->index_budget) != 0 ||
	    pthread_key_create(&fs->workspace_key, free_workspace) != 0) {
		fs_log(TF_LOG_ERROR, "cannot start: out of memory");
		return -1;
	}
	fs_log(TF_LOG_INFO, "serving %s (cache %llu bytes, %u decode workers)", fs->source,
	       (unsigned long long)fs->settings->cache_size, workers);
	return 0;
}

static int serve(tilefs *fs, struct fuse_args *args, const struct fuse_cmdline_opts *o)
{
	struct fuse *fuse = fuse_new(args, &tilefs_ops, sizeof(tilefs_ops), fs);
	int rc = TFS_EXIT_FUSE;

	if (!fuse)
		return TFS_EXIT_USAGE;	/* fuse_new has said which option it rejected */
	if (fuse_mount(fuse, o->mountpoint) != 0)
		goto out;
	find_readahead_knob(fs, o->mountpoint);
	fs->foreground = o->foreground;
	if (fuse_daemonize(o->foreground) != 0 || start(fs) != 0 ||
	    fuse_set_signal_handlers(fuse_get_session(fuse)) != 0)
		goto unmount;
	rc = (o->singlethread ? fuse_loop(fuse) : fuse_loop_mt(fuse, 0)) ? TFS_EXIT_FUSE : 0;
	fuse_remove_signal_handlers(fuse_get_session(fuse));
unmount:
	fuse_unmount(fuse);
out:
	fuse_destroy(fuse);
	return rc;
}

static void teardown(tilefs *fs)
{
	if (fs->cache) {
		fs_table_destroy(&fs->table);
		tf_cache_free(fs->cache);
		fs_arrays_destroy(fs);
	}
	tf_config_free(fs->config);	/* wipes the keys */
	if (fs->source_fd > 0)
		close(fs->source_fd);
	tf_source_free(fs->src);
	free(fs->source);
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts o = { 0 };
	tilefs fs = { .source_fd = -1 };
	cli c = { 0 };
	int rc;

	if (fuse_opt_parse(&args, &c, cli_spec, take_source) != 0)
		return TFS_EXIT_USAGE;
	if (c.help || c.version) {
		if (c.help)
			usage(argv[0]);
		printf("tilefs %s (libfuse %s)\n", PACKAGE_VERSION, fuse_pkgversion());
		rc = 0;
	} else if (!c.source) {
		fprintf(stderr, "tilefs: missing SOURCE and MOUNTPOINT (see tilefs --help)\n");
		rc = TFS_EXIT_USAGE;
	} else if (!(rc = load_config(&fs, &c)) && !(rc = open_source(&fs, c.source))) {
		/* Read-only for the kernel too: writes fail with EROFS before reaching us. */
		/* Read-only, and the kernel enforces the modes shown (the
		 * source's, less write bits) for every user of allow_other. */
		if (fuse_opt_add_arg(&args, "-oro") || fuse_opt_add_arg(&args, "-osubtype=tilefs") ||
		    fuse_opt_add_arg(&args, "-odefault_permissions") ||
		    fuse_parse_cmdline(&args, &o) != 0 || !o.mountpoint) {
			fprintf(stderr, "tilefs: missing MOUNTPOINT (see tilefs --help)\n");
			rc = TFS_EXIT_USAGE;
		} else if (!(rc = check_mountpoint(&fs, o.mountpoint))) {
			rc = serve(&fs, &args, &o);
		}
	}
	teardown(&fs);
	free(o.mountpoint);
	free(c.config), free(c.cache_size), free(c.source);
	fuse_opt_free_args(&args);
	return rc;
}
