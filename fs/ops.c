/*
 * ops.c - FUSE operations.  Paths arrive as "/a/b"; the source file is
 * "a/b" relative to SOURCE's directory handle.  Decoded files answer reads
 * through the library; anything else is passed through read-only.
 */
#include "tilefs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#define XATTR_PREFIX "user.tilefs."

static tilefs *this_fs(void)
{
	return fuse_get_context()->private_data;
}

static const char *rel_of(const char *path)
{
	while (*path == '/')
		path++;
	return *path ? path : ".";
}

/* ---- paths beneath SOURCE -------------------------------------------------------------------- */

/* The kernel without openat2: walk rel a component at a time, none of them
 * a symlink or "..". */
static int walk_beneath(int root, const char *rel, int flags)
{
	char buf[PATH_MAX], *save, *c, *next;
	int dir = root, fd = -1;

	if (snprintf(buf, sizeof(buf), "%s", rel) >= (int)sizeof(buf))
		return errno = ENAMETOOLONG, -1;
	for (c = strtok_r(buf, "/", &save); c; c = next) {
		next = strtok_r(NULL, "/", &save);
		if (!strcmp(c, ".."))
			fd = (errno = EXDEV, -1);
		else
			fd = openat(dir, c, next ? O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
						 : flags | O_NOFOLLOW | O_CLOEXEC);
		if (dir != root) {
			int e = errno;
			close(dir);
			errno = e;
		}
		if (fd < 0)
			return -1;
		dir = fd;
	}
	return fd >= 0 ? fd : openat(root, ".", flags | O_CLOEXEC);
}

/*
 * Open rel beneath SOURCE: no component may be a symlink, ".." or a magic
 * link, so a directory swapped for a link never leads outside SOURCE.
 */
static int open_beneath(tilefs *fs, const char *rel, int flags)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	long fd = syscall(SYS_openat2, fs->source_fd, rel, &how, sizeof(how));

	if (fd < 0 && errno == ENOSYS)
		return walk_beneath(fs->source_fd, rel, flags);
	return (int)fd;
}

/* The directory holding rel, opened beneath SOURCE (O_PATH), and rel's last
 * component in *last.  The caller closes the fd unless it is source_fd. */
static int parent_beneath(tilefs *fs, const char *rel, const char **last)
{
	const char *slash = strrchr(rel, '/');
	char parent[PATH_MAX];

	*last = slash ? slash + 1 : rel;
	if (!slash)
		return fs->source_fd;
	if ((size_t)(slash - rel) >= sizeof(parent))
		return errno = ENAMETOOLONG, -1;
	snprintf(parent, sizeof(parent), "%.*s", (int)(slash - rel), rel);
	return open_beneath(fs, parent, O_PATH | O_DIRECTORY);
}

/* lstat of rel beneath SOURCE: a symlink reports itself, and no symlink
 * before it is followed. */
static int src_stat(tilefs *fs, const char *rel, struct stat *st)
{
	const char *last;
	int dir, rc;

	if (!strcmp(rel, "."))
		return fstat(fs->source_fd, st);
	if ((dir = parent_beneath(fs, rel, &last)) < 0)
		return -1;
	rc = fstatat(dir, last, st, AT_SYMLINK_NOFOLLOW);
	if (dir != fs->source_fd) {
		int e = errno;
		close(dir);
		errno = e;
	}
	return rc;
}

/* Open regular file rel for reading, never blocking on a FIFO or device
 * swapped in, and only if it is still the file (device, inode) in *want. */
static int open_regular(tilefs *fs, const char *rel, const struct stat *want)
{
	int fd = open_beneath(fs, rel, O_RDONLY | O_NONBLOCK);
	struct stat st;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_dev != want->st_dev ||
	    st.st_ino != want->st_ino || fcntl(fd, F_SETFL, 0) != 0) {
		close(fd);
		return -ESTALE;	/* swapped since lookup: the kernel looks again */
	}
	return fd;
}

tf_workspace *fs_workspace(tilefs *fs)
{
	tf_workspace *ws = pthread_getspecific(fs->workspace_key);

	if (!ws && (ws = tf_workspace_new()))
		pthread_setspecific(fs->workspace_key, ws);
	return ws;
}

/* An open file: a decoded one (file != NULL) or a raw pass-through (fd). */
typedef struct handle {
	tf_file *file;
	fs_node *node;
	tf_read_state rs;
	int fd;
	char *rel;		/* with nullpath_ok, fstat() comes without a path */
} handle;

/* ---- attributes and directories ------------------------------------------------------------ */

static void *op_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	cfg->nullpath_ok = 1;		/* reads use the handle, not the path */
	cfg->entry_timeout = 1.0;	/* see source changes within a second */
	cfg->attr_timeout = 1.0;
	cfg->negative_timeout = 1.0;
	return this_fs();
}

/* Size a regular file as it will read: decoded, raw, or hidden. */
static int regular_attr(tilefs *fs, const char *rel, struct stat *st)
{
	tf_file *f;
	bool reused;
	int err;

	if (!fs_lookup(fs, rel, st, false, &f, &reused, &err))
		return err ? err : fs->settings->hide_unmatched ? -ENOENT : 0;
	/* A file whose index cannot be built is listed empty; opening it says EIO. */
	st->st_size = f ? (off_t)tf_file_size(f) : 0;
	st->st_blocks = (st->st_size + 511) / 512;
	tf_file_unref(f);
	return 0;
}

/* fstat() of an open file: the size of the index it reads through. */
static int handle_attr(tilefs *fs, const handle *h, struct stat *st)
{
	if (h->fd >= 0 ? fstat(h->fd, st) : src_stat(fs, h->rel, st))
		return -errno;
	if (h->file) {
		st->st_size = (off_t)tf_file_size(h->file);
		st->st_blocks = (st->st_size + 511) / 512;
	}
	return 0;
}

/*
 * Let the kernel read ahead 1 MiB at a time, not FUSE's 128 KiB: larger
 * requests amortise the round trip and decode-ahead keeps up.  Done on the
 * first request, because the kernel clamps the window when it processes
 * our INIT reply.  Best effort (needs root).
 */
static void widen_readahead(tilefs *fs)
{
	FILE *f;

	if (atomic_exchange(&fs->readahead_set, true) || !fs->readahead_knob[0])
		return;
	if ((f = fopen(fs->readahead_knob, "w"))) {
		fputs("1024\n", f);
		fclose(f);
	}
}

static int op_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	tilefs *fs = this_fs();
	const char *rel;
	int rc = 0;

	widen_readahead(fs);
	if (!path && fi)
		rc = handle_attr(fs, (const handle *)(uintptr_t)fi->fh, st);
	else if (src_stat(fs, (rel = rel_of(path)), st) != 0)
		return -errno;
	else if (S_ISREG(st->st_mode))
		rc = regular_attr(fs, rel, st);
	st->st_mode &= ~(mode_t)(S_IWUSR | S_IWGRP | S_IWOTH);
	return rc;
}

static bool hidden(tilefs *fs, const char *dir, const struct dirent *d)
{
	char rel[4096];
	struct stat st;

	if (!fs->settings->hide_unmatched || d->d_type == DT_DIR || d->d_type == DT_LNK)
		return false;
	if (snprintf(rel, sizeof(rel), "%s%s%s", strcmp(dir, ".") ? dir : "",
		     strcmp(dir, ".") ? "/" : "", d->d_name) >= (int)sizeof(rel))
		return false;
	if (d->d_type == DT_UNKNOWN &&
	    (src_stat(fs, rel, &st) != 0 || !S_ISREG(st.st_mode)))
		return false;
	return !fs_is_decoded(fs, rel);
}

/* Directories keep their path: with nullpath_ok, readdir gets none. */
static int op_opendir(const char *path, struct fuse_file_info *fi)
{
	char *rel = strdup(rel_of(path));

	if (!rel)
		return -ENOMEM;
	fi->fh = (uintptr_t)rel;
	return 0;
}

static int op_releasedir(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	free((char *)(uintptr_t)fi->fh);
	return 0;
}

/* Full attributes of a directory entry, as getattr would give them. */
static bool entry_attr(tilefs *fs, const char *dir, const char *name, struct stat *st)
{
	char rel[PATH_MAX];

	if (snprintf(rel, sizeof(rel), "%s%s%s", strcmp(dir, ".") ? dir : "", strcmp(dir, ".") ? "/" : "",
		     name) >= (int)sizeof(rel) || src_stat(fs, rel, st) != 0)
		return false;
	if (S_ISREG(st->st_mode) && regular_attr(fs, rel, st) != 0)
		return false;
	st->st_mode &= ~(mode_t)(S_IWUSR | S_IWGRP | S_IWOTH);
	return true;
}

static int op_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	tilefs *fs = this_fs();
	const char *rel = (const char *)(uintptr_t)fi->fh;
	int fd = open_beneath(fs, rel, O_RDONLY | O_DIRECTORY);
	struct dirent *d;
	DIR *dir;

	(void)path, (void)off;
	if (fd < 0 || !(dir = fdopendir(fd))) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return -e;
	}
	while ((d = readdir(dir))) {
		struct stat st = { .st_ino = d->d_ino, .st_mode = (mode_t)DTTOIF(d->d_type) };
		enum fuse_fill_dir_flags plus = 0;

		if (hidden(fs, rel, d))
			continue;
		/* `ls -l` and friends: attributes ride along, saving a lookup each. */
		if ((flags & FUSE_READDIR_PLUS) && strcmp(d->d_name, ".") && strcmp(d->d_name, "..") &&
		    entry_attr(fs, rel, d->d_name, &st))
			plus = FUSE_FILL_DIR_PLUS;
		if (fill(buf, d->d_name, &st, 0, plus))
			break;
	}
	closedir(dir);
	return 0;
}

static int op_readlink(const char *path, char *buf, size_t size)
{
	tilefs *fs = this_fs();
	const char *last;
	int dir = parent_beneath(fs, rel_of(path), &last);
	ssize_t n = dir < 0 ? -1 : readlinkat(dir, last, buf, size ? size - 1 : 0);
	int e = errno;

	if (dir >= 0 && dir != fs->source_fd)
		close(dir);
	if (n < 0)
		return -e;
	buf[n] = '\0';
	return 0;
}

static int op_statfs(const char *path, struct statvfs *sv)
{
	(void)path;
	return fstatvfs(this_fs()->source_fd, sv) ? -errno : 0;
}

static int op_access(const char *path, int mask)
{
	struct stat st;

	if (mask & W_OK)
		return -EROFS;
	return src_stat(this_fs(), rel_of(path), &st) ? -errno : 0;
}

/* ---- files ------------------------------------------------------------------------------------ */

static int op_open(const char *path, struct fuse_file_info *fi)
{
	tilefs *fs = this_fs();
	const char *rel = rel_of(path);
	handle *h;
	struct stat st;
	bool reused;
	int err, fd;

	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC))
		return -EROFS;
	if (src_stat(fs, rel, &st) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EACCES;	/* never a FIFO or device of SOURCE */
	/* The file beneath SOURCE, regular, and the one just stat'ed: passed
	 * through as it is, or the proof that the decoded path is inside. */
	if ((fd = open_regular(fs, rel, &st)) < 0)
		return fd;
	if (!(h = calloc(1, sizeof(*h))) || !(h->rel = strdup(rel))) {
		close(fd);
		free(h);
		return -ENOMEM;
	}
	h->fd = fd;
	h->node = fs_lookup(fs, rel, &st, true, &h->file, &reused, &err);
	if (h->node || err) {
		close(h->fd);
		h->fd = -1;
	}
	if (h->node && !h->file) {
		fs_node_release(fs, h->node);
		free(h->rel);
		free(h);
		return err ? err : -EIO;
	}
	if (!h->node && err) {
		free(h->rel);
		free(h);
		return err;
	}
	/* The kernel may keep its cached pages only if they came from this
	 * index.  A rebuilt index also means a new size: drop the cached
	 * attributes too (this never blocks: tilefs has no dirty pages). */
	fi->keep_cache = h->file && reused;
	if (h->file && !reused)
		fuse_invalidate_path(fuse_get_context()->fuse, path);
	fi->fh = (uintptr_t)h;
	return 0;
}

static int op_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	tilefs *fs = this_fs();
	handle *h = (handle *)(uintptr_t)fi->fh;
	tf_workspace *ws;
	tf_error err;
	size_t got;
	tf_status rc;

	(void)path;
	if (!h->file) {
		ssize_t n = pread(h->fd, buf, size, off);
		return n < 0 ? -errno : (int)n;
	}
	if (!(ws = fs_workspace(fs)))
		return -ENOMEM;
	rc = tf_file_read(h->file, fs->cache, ws, &h->rs, (uint64_t)off, size, (uint8_t *)buf, &got, &err);
	if (rc == TF_OK)
		return (int)got;
	fs_log_failure(err.msg);
	fs_node_set_error(fs, h->node, err.msg);
	/* Never a short read: FUSE takes one for the end of the file.  The
	 * kernel retries page by page, so good chunks nearby stay readable. */
	return -tf_status_errno(rc);
}

static int op_release(const char *path, struct fuse_file_info *fi)
{
	handle *h = (handle *)(uintptr_t)fi->fh;

	(void)path;
	if (h->fd >= 0)
		close(h->fd);
	tf_file_unref(h->file);
	if (h->node)
		fs_node_release(this_fs(), h->node);
	free(h->rel);
	free(h);
	return 0;
}

/* ---- extended attributes ------------------------------------------------------------------------ */

static const char *const file_attrs[] = {
	"pipeline", "datatype", "tiles", "chunks", "filtered_size", "error",
	"field", "fragment", "format_version", "filter", "codecs",
};

/* The array facts of a node: field "NAME (ROLE)", fragment, format version. */
static char *array_attr(tilefs *fs, fs_node *n, const char *name)
{
	fs_facts fx;
	char *s = NULL;

	fs_node_facts(fs, n, &fx);
	if (!strcmp(name, "field") && fx.field[0] && asprintf(&s, "%s (%s)", fx.field, fx.role) < 0)
		return NULL;
	if (!strcmp(name, "fragment") && fx.fragment[0])
		return strdup(fx.fragment);
	if (!strcmp(name, "format_version") && fx.format_version &&
	    asprintf(&s, "%" PRIu32, fx.format_version) < 0)
		return NULL;
	return s;
}

/* Text of attribute `name` (without prefix) of a decoded file; malloc'd or NULL. */
static char *file_attr(tilefs *fs, fs_node *n, const tf_file *f, const char *name)
{
	tf_file_info i;
	char *s = NULL;

	tf_file_get_info(f, &i);
	if (!strcmp(name, "pipeline"))
		return tf_file_pipeline_text(f);
	if (!strcmp(name, "filter") || !strcmp(name, "codecs"))	/* netCDF's _Filter, _Codecs */
		return name[0] == 'f' ? tf_file_filter_attr(f) : tf_file_codecs_json(f);
	if (!strcmp(name, "error"))
		return fs_node_error(fs, n);
	if (!strcmp(name, "field") || !strcmp(name, "fragment") || !strcmp(name, "format_version"))
		return array_attr(fs, n, name);
	if (!strcmp(name, "datatype"))
		return strdup(tf_datatype_name(i.type));
	if (!strcmp(name, "tiles") && asprintf(&s, "%" PRIu64, i.tiles) < 0)
		return NULL;
	if (!strcmp(name, "chunks") && asprintf(&s, "%" PRIu64, i.chunks) < 0)
		return NULL;
	if (!strcmp(name, "filtered_size") && asprintf(&s, "%" PRIu64, i.stored_bytes) < 0)
		return NULL;
	return s;
}

static char *root_attr(tilefs *fs, const char *name)
{
	tf_cache_stats s;
	char *v;

	if (strcmp(name, "cache") || !fs->cache)
		return NULL;
	tf_cache_get_stats(fs->cache, &s);
	if (asprintf(&v, "budget=%zu used=%zu entries=%zu hits=%" PRIu64 " misses=%" PRIu64
		     " evictions=%" PRIu64 " prefetches=%" PRIu64, s.budget, s.used, s.entries, s.hits,
		     s.misses, s.evictions, s.prefetches) < 0)
		return NULL;
	return v;
}

/* Look up a decoded file for its attributes; *n is pinned on success. */
static int decoded_node(tilefs *fs, const char *rel, fs_node **n, tf_file **f)
{
	struct stat st;
	bool reused;
	int err;

	if (src_stat(fs, rel, &st) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || !(*n = fs_lookup(fs, rel, &st, true, f, &reused, &err)))
		return -ENODATA;
	if (!*f) {
		fs_node_release(fs, *n);
		return err ? err : -EIO;
	}
	return 0;
}

static int op_getxattr(const char *path, const char *name, char *value, size_t size)
{
	tilefs *fs = this_fs();
	const char *rel = rel_of(path);
	fs_node *n = NULL;
	tf_file *f = NULL;
	char *v = NULL;
	size_t len;
	int rc;

	if (strncmp(name, XATTR_PREFIX, strlen(XATTR_PREFIX)))
		return -ENODATA;
	name += strlen(XATTR_PREFIX);
	if (!strcmp(rel, "."))
		v = root_attr(fs, name);
	else if ((rc = decoded_node(fs, rel, &n, &f)) != 0)
		return rc;
	else
		v = file_attr(fs, n, f, name);
	if (n)
		fs_node_release(fs, n);
	tf_file_unref(f);
	if (!v)
		return -ENODATA;
	len = strlen(v);
	rc = size == 0 ? (int)len : size < len ? -ERANGE : (memcpy(value, v, len), (int)len);
	free(v);
	return rc;
}

static int op_listxattr(const char *path, char *list, size_t size)
{
	tilefs *fs = this_fs();
	const char *rel = rel_of(path);
	char names[512];
	size_t len = 0;
	fs_node *n;
	tf_file *f;

	if (!strcmp(rel, "."))
		len = (size_t)snprintf(names, sizeof(names), XATTR_PREFIX "cache") + 1;
	else if (decoded_node(fs, rel, &n, &f) == 0) {
		for (size_t i = 0; i < sizeof(file_attrs) / sizeof(file_attrs[0]); i++) {
			char *v = file_attr(fs, n, f, file_attrs[i]);	/* only those with a value */
			if (v)
				len += (size_t)snprintf(names + len, sizeof(names) - len, XATTR_PREFIX "%s",
							file_attrs[i]) + 1;
			free(v);
		}
		fs_node_release(fs, n);
		tf_file_unref(f);
	}
	if (size == 0)
		return (int)len;
	if (size < len)
		return -ERANGE;
	memcpy(list, names, len);
	return (int)len;
}

/* ---- everything that would write --------------------------------------------------------------- */

static int erofs_path(const char *path) { (void)path; return -EROFS; }
static int erofs_mode(const char *path, mode_t m) { (void)path, (void)m; return -EROFS; }
static int erofs_2path(const char *a, const char *b) { (void)a, (void)b; return -EROFS; }
static int erofs_rename(const char *a, const char *b, unsigned int f) { (void)a, (void)b, (void)f; return -EROFS; }
static int erofs_chmod(const char *p, mode_t m, struct fuse_file_info *fi) { (void)p, (void)m, (void)fi; return -EROFS; }
static int erofs_chown(const char *p, uid_t u, gid_t g, struct fuse_file_info *fi) { (void)p, (void)u, (void)g, (void)fi; return -EROFS; }
static int erofs_truncate(const char *p, off_t o, struct fuse_file_info *fi) { (void)p, (void)o, (void)fi; return -EROFS; }
static int erofs_create(const char *p, mode_t m, struct fuse_file_info *fi) { (void)p, (void)m, (void)fi; return -EROFS; }
static int erofs_mknod(const char *p, mode_t m, dev_t d) { (void)p, (void)m, (void)d; return -EROFS; }
static int erofs_utimens(const char *p, const struct timespec tv[2], struct fuse_file_info *fi) { (void)p, (void)tv, (void)fi; return -EROFS; }
static int erofs_setxattr(const char *p, const char *n, const char *v, size_t s, int f) { (void)p, (void)n, (void)v, (void)s, (void)f; return -EROFS; }
static int erofs_removexattr(const char *p, const char *n) { (void)p, (void)n; return -EROFS; }
static int erofs_write(const char *p, const char *b, size_t s, off_t o, struct fuse_file_info *fi)
{
	(void)p, (void)b, (void)s, (void)o, (void)fi;
	return -EROFS;
}

const struct fuse_operations tilefs_ops = {
	.init = op_init,
	.getattr = op_getattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.readlink = op_readlink,
	.statfs = op_statfs,
	.access = op_access,
	.open = op_open,
	.read = op_read,
	.release = op_release,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.mknod = erofs_mknod,
	.mkdir = erofs_mode,
	.unlink = erofs_path,
	.rmdir = erofs_path,
	.symlink = erofs_2path,
	.rename = erofs_rename,
	.link = erofs_2path,
	.chmod = erofs_chmod,
	.chown = erofs_chown,
	.truncate = erofs_truncate,
	.write = erofs_write,
	.create = erofs_create,
	.utimens = erofs_utimens,
	.setxattr = erofs_setxattr,
	.removexattr = erofs_removexattr,
};
