/*
 * source_local.c - a local directory as a source.
 *
 * Confinement: the directory is opened once; every name is resolved beneath
 * that descriptor with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS), or, on kernels without openat2, by a walk of
 * O_NOFOLLOW opens one component at a time.  A directory swapped for a
 * symlink to /etc therefore fails with ELOOP instead of leading outside.
 *
 * Special files: objects are opened O_NONBLOCK and fstat'ed before anything
 * is read, so a FIFO or device swapped in is refused at once instead of
 * blocking a thread for ever.
 *
 * Versions: an object keeps its descriptor, so a file renamed over it later
 * goes on reading the old inode.  A file rewritten in place is caught after
 * each read by comparing size, mtime and ctime with the version opened (the
 * kernel updates both times before it copies a write's data in): such a
 * read fails TF_E_STALE rather than returning bytes of two versions.
 *
 * Header walks (tf_object_advise TF_ACCESS_HEADERS): small reads of pages
 * the page cache holds are served from it; others read only their sectors
 * with direct I/O (on a second descriptor of the same open file), so
 * walking a file's chunk headers reads about 512 bytes per chunk instead of
 * the whole file, and caches nothing.  Residency is asked of mincore() for
 * a window of the file at a time (one mmap per 256 MiB walked).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sources/source_impl.h"

typedef struct local_source {
	tf_source base;
	atomic_bool no_openat2;	/* the kernel said ENOSYS once */
} local_source;

#define HDR_MAX 4096			/* larger reads take the normal path */
#define DIO_ALIGN_MAX 4096
#define RESIDENCY_WINDOW ((uint64_t)256 << 20)

/* Header walks: a direct-I/O descriptor and what the page cache holds. */
typedef struct hdr_mode {
	pthread_mutex_t lock;
	int dfd;			/* O_DIRECT, or -1: every read is buffered */
	uint32_t align;			/* its offset alignment */
	uint64_t res_off, res_len;	/* the window res[] describes, in bytes */
	unsigned char *res;		/* mincore(): one byte per page */
	size_t page;
} hdr_mode;

typedef struct local_object {
	tf_object base;
	int fd;
	_Atomic(hdr_mode *) hdr;	/* header walks, or NULL */
} local_object;

static const tf_object_ops local_object_ops;

/* ---- resolving beneath the root ------------------------------------------------------- */

/* Without openat2: walk rel a component at a time, none of them a symlink
 * (tf_source.c has already refused "." and ".." components). */
static int walk_beneath(int root, const char *rel, int flags)
{
	char buf[PATH_MAX], *save, *c, *next;
	int dir = root, fd = -1;

	if (snprintf(buf, sizeof(buf), "%s", rel) >= (int)sizeof(buf))
		return errno = ENAMETOOLONG, -1;
	for (c = strtok_r(buf, "/", &save); c; c = next) {
		next = strtok_r(NULL, "/", &save);
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
	return fd;
}

static int open_beneath(local_source *s, const char *rel, int flags)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	long fd;

	if (!strcmp(rel, "."))
		return openat(s->base.local_fd, ".", flags | O_CLOEXEC);
	if (!atomic_load_explicit(&s->no_openat2, memory_order_relaxed)) {
		fd = syscall(SYS_openat2, s->base.local_fd, rel, &how, sizeof(how));
		if (fd >= 0 || errno != ENOSYS)
			return (int)fd;
		atomic_store(&s->no_openat2, true);
	}
	return walk_beneath(s->base.local_fd, rel, flags);
}

/* The directory holding rel (O_PATH, beneath the root) and rel's last
 * component in *last.  The caller closes the fd unless it is the root's. */
static int parent_beneath(local_source *s, const char *rel, const char **last)
{
	const char *slash = strrchr(rel, '/');
	char parent[PATH_MAX];

	*last = slash ? slash + 1 : rel;
	if (!slash)
		return s->base.local_fd;
	if ((size_t)(slash - rel) >= sizeof(parent))
		return errno = ENAMETOOLONG, -1;
	memcpy(parent, rel, (size_t)(slash - rel));
	parent[slash - rel] = '\0';
	return open_beneath(s, parent, O_PATH | O_DIRECTORY);
}

static void close_parent(local_source *s, int dir)
{
	int e = errno;

	if (dir >= 0 && dir != s->base.local_fd)
		close(dir);
	errno = e;
}

static tf_status errno_status(tf_error *err, const char *rel, const char *what)
{
	int e = errno;

	tf_status code = e == ENOMEM ? TF_E_NOMEM : e == ENOENT || e == ENOTDIR ? TF_E_NOTFOUND
		       : e == EACCES || e == EPERM || e == ELOOP || e == EXDEV ? TF_E_ACCESS : TF_E_IO;

	return tf_err(err, code, "%s: %s: %s", rel, what, strerror(e));
}

/* ---- stats ------------------------------------------------------------------------------ */

static void to_tf_stat(const struct stat *sb, tf_stat *st)
{
	st->kind = S_ISREG(sb->st_mode) ? TF_ENT_REG : S_ISDIR(sb->st_mode) ? TF_ENT_DIR
		 : S_ISLNK(sb->st_mode) ? TF_ENT_LNK : S_ISFIFO(sb->st_mode) ? TF_ENT_FIFO
		 : S_ISSOCK(sb->st_mode) ? TF_ENT_SOCK : TF_ENT_OTHER;
	st->mode = sb->st_mode & 07777;
	st->uid = sb->st_uid;
	st->gid = sb->st_gid;
	st->nlink = (uint32_t)sb->st_nlink;
	st->v = (tf_version){ .dev = sb->st_dev, .ino = sb->st_ino, .size = (uint64_t)sb->st_size,
			      .mtime_ns = (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec,
			      .ctime_ns = (int64_t)sb->st_ctim.tv_sec * 1000000000 + sb->st_ctim.tv_nsec };
}

static tf_status local_stat(tf_source *base, const char *rel, tf_stat *st, tf_error *err)
{
	local_source *s = (local_source *)base;
	const char *last;
	struct stat sb;
	int dir, rc;

	if (!strcmp(rel, "."))
		rc = fstat(s->base.local_fd, &sb);
	else if ((dir = parent_beneath(s, rel, &last)) < 0)
		return errno_status(err, rel, "stat");
	else {
		rc = fstatat(dir, last, &sb, AT_SYMLINK_NOFOLLOW);
		close_parent(s, dir);
	}
	if (rc != 0)
		return errno_status(err, rel, "stat");
	to_tf_stat(&sb, st);
	return TF_OK;
}

static tf_ent_kind kind_of_dtype(unsigned char t)
{
	return t == DT_REG ? TF_ENT_REG : t == DT_DIR ? TF_ENT_DIR : t == DT_LNK ? TF_ENT_LNK
	     : t == DT_FIFO ? TF_ENT_FIFO : t == DT_SOCK ? TF_ENT_SOCK : TF_ENT_OTHER;
}

static tf_status local_list(tf_source *base, const char *rel, bool want_stat, tf_list_fn fn, void *ctx,
			    tf_error *err)
{
	local_source *s = (local_source *)base;
	int fd = open_beneath(s, rel, O_RDONLY | O_DIRECTORY);
	struct dirent *d;
	DIR *dir;

	if (fd < 0 || !(dir = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return errno_status(err, rel, "list");
	}
	while ((d = readdir(dir))) {
		tf_stat st = { .kind = kind_of_dtype(d->d_type), .v.ino = d->d_ino };
		struct stat sb;

		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		/* DT_UNKNOWN (some filesystems): a stat tells the kind. */
		if ((want_stat || d->d_type == DT_UNKNOWN) &&
		    fstatat(dirfd(dir), d->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0)
			to_tf_stat(&sb, &st);
		else if (want_stat)
			continue;	/* gone since readdir */
		if (fn(ctx, d->d_name, &st))
			break;
	}
	closedir(dir);
	return TF_OK;
}

static tf_status local_readlink(tf_source *base, const char *rel, char *buf, size_t size, tf_error *err)
{
	local_source *s = (local_source *)base;
	const char *last;
	int dir = parent_beneath(s, rel, &last);
	ssize_t n = dir < 0 || size == 0 ? -1 : readlinkat(dir, last, buf, size - 1);

	close_parent(s, dir);
	if (n < 0)
		return errno_status(err, rel, "readlink");
	buf[n] = '\0';
	return TF_OK;
}

static tf_status local_statfs(tf_source *base, tf_source_fsstat *out, tf_error *err)
{
	struct statvfs sv;

	if (fstatvfs(base->local_fd, &sv) != 0)
		return errno_status(err, base->name, "statfs");
	*out = (tf_source_fsstat){ sv.f_bsize, sv.f_blocks, sv.f_bfree, sv.f_bavail, sv.f_files,
				   sv.f_ffree, sv.f_namemax };
	return TF_OK;
}

/* ---- objects ------------------------------------------------------------------------------ */

static tf_status local_open(tf_source *base, const char *rel, const tf_version *expect, tf_object **out,
			    tf_error *err)
{
	local_source *s = (local_source *)base;
	int fd = open_beneath(s, rel, O_RDONLY | O_NONBLOCK);
	local_object *o;
	struct stat sb;
	tf_stat st;

	if (fd < 0)
		return errno_status(err, rel, "open");
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || fcntl(fd, F_SETFL, 0) != 0) {
		close(fd);
		return tf_err(err, TF_E_INVAL, "%s: not a regular file", rel);
	}
	to_tf_stat(&sb, &st);
	if (expect && !tf_version_equal(expect, &st.v)) {
		close(fd);
		return tf_err(err, TF_E_STALE, "%s: changed on disk", rel);
	}
	if (!(o = calloc(1, sizeof(*o))) || !(o->base.name = strdup(rel))) {
		free(o);
		close(fd);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	o->base.ops = &local_object_ops;
	o->base.st = st;
	o->fd = fd;
	atomic_init(&o->hdr, NULL);
	*out = &o->base;
	return TF_OK;
}

static void local_close(tf_object *base)
{
	local_object *o = (local_object *)base;
	hdr_mode *h = atomic_load(&o->hdr);

	if (h) {
		if (h->dfd >= 0)
			close(h->dfd);
		pthread_mutex_destroy(&h->lock);
		free(h->res);
		free(h);
	}
	close(o->fd);
	free(o->base.name);
	free(o);
}

/* Whether the file still has the size and times of the version opened.
 * A file renamed over or removed is unlinked, which moves its ctime only:
 * with size and mtime unchanged and no name left, its bytes are still the
 * ones opened, and the handle goes on reading them. */
static tf_status local_check(tf_object *base, tf_error *err)
{
	local_object *o = (local_object *)base;
	const tf_version *was = &o->base.st.v;
	struct stat sb;
	tf_stat now;

	if (fstat(o->fd, &sb) != 0)
		return errno_status(err, o->base.name, "stat");
	to_tf_stat(&sb, &now);
	if (sb.st_nlink == 0 && now.v.size == was->size && now.v.mtime_ns == was->mtime_ns)
		return TF_OK;
	if (!tf_version_equal(&now.v, was))
		return tf_err(err, TF_E_STALE, "%s: changed on disk while open", o->base.name);
	return TF_OK;
}

static tf_status plain_read(local_object *o, int fd, uint64_t off, void *dst, size_t len, tf_error *err)
{
	uint8_t *p = dst;

	while (len) {
		ssize_t got = pread(fd, p, len, (off_t)off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return tf_err(err, TF_E_IO, "%s: read at %llu: %s", o->base.name,
				      (unsigned long long)off, strerror(errno));
		if (got == 0)
			return tf_err(err, TF_E_STALE, "%s: ended at %llu (changed on disk?)", o->base.name,
				      (unsigned long long)off);
		p += got;
		off += (uint64_t)got;
		len -= (size_t)got;
	}
	return TF_OK;
}

/* ---- header walks ------------------------------------------------------------------------ */

/* Whether the pages of [off, off+len) are in the page cache (lock held):
 * mincore() of a mapping of the window holding them.  A range the window
 * does not hold whole (it straddles a window's end, or the file's) is
 * "unknown": res[] has no byte for its last pages. */
static bool resident(local_object *o, hdr_mode *h, uint64_t off, size_t len)
{
	uint64_t size = o->base.st.v.size, first = off / h->page, last = (off + len - 1) / h->page;
	uint64_t mlen;
	void *m;

	if (len == 0 || off >= size || len > size - off)
		return false;	/* read directly, which reports the end */
	if (off < h->res_off || off + len > h->res_off + h->res_len) {
		h->res_off = off / RESIDENCY_WINDOW * RESIDENCY_WINDOW;
		mlen = size - h->res_off < RESIDENCY_WINDOW ? size - h->res_off : RESIDENCY_WINDOW;
		m = mmap(NULL, mlen, PROT_READ, MAP_SHARED, o->fd, (off_t)h->res_off);
		h->res_len = m != MAP_FAILED && mincore(m, mlen, h->res) == 0 ? mlen : 0;
		if (m != MAP_FAILED)
			munmap(m, mlen);
		if (!h->res_len || off + len > h->res_off + h->res_len)
			return false;	/* unknown: read directly */
	}
	for (uint64_t p = first; p <= last; p++)
		if (!(h->res[p - h->res_off / h->page] & 1))
			return false;
	return true;
}

/* The sectors holding [off, off+len), read with direct I/O. */
static tf_status direct_read(local_object *o, hdr_mode *h, uint64_t off, void *dst, size_t len,
			     tf_error *err)
{
	_Alignas(DIO_ALIGN_MAX) uint8_t buf[HDR_MAX + 2 * DIO_ALIGN_MAX];
	uint64_t start = off / h->align * h->align, end = (off + len + h->align - 1) / h->align * h->align;
	size_t got = 0;

	while (got < off + len - start) {
		ssize_t n = pread(h->dfd, buf + got, (size_t)(end - start) - got, (off_t)(start + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)	/* e.g. a filesystem refusing this alignment: read as usual */
			return plain_read(o, o->fd, off, dst, len, err);
		if (n == 0)
			return tf_err(err, TF_E_STALE, "%s: ended at %llu (changed on disk?)", o->base.name,
				      (unsigned long long)(start + got));
		got += (size_t)n;
	}
	memcpy(dst, buf + (off - start), len);
	return TF_OK;
}

static tf_status header_read(local_object *o, hdr_mode *h, uint64_t off, void *dst, size_t len,
			     tf_error *err)
{
	bool cached;

	pthread_mutex_lock(&h->lock);
	cached = h->dfd < 0 || resident(o, h, off, len);
	pthread_mutex_unlock(&h->lock);
	return cached ? plain_read(o, o->fd, off, dst, len, err) : direct_read(o, h, off, dst, len, err);
}

/* A descriptor of the same open file with O_DIRECT, and its alignment
 * (STATX_DIOALIGN); -1 where direct I/O is not offered. */
static int open_direct(local_object *o, uint32_t *align)
{
	char path[64];
	struct stat a, b;
	struct statx sx;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", o->fd);
	if ((fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC)) < 0)
		return -1;
	if (fstat(fd, &a) != 0 || fstat(o->fd, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino ||
	    statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) != 0 || !(sx.stx_mask & STATX_DIOALIGN) ||
	    !sx.stx_dio_offset_align || sx.stx_dio_offset_align > DIO_ALIGN_MAX ||
	    sx.stx_dio_mem_align > DIO_ALIGN_MAX) {
		close(fd);
		return -1;
	}
	*align = sx.stx_dio_offset_align;
	return fd;
}

static bool local_advise(tf_object *base, tf_access how)
{
	local_object *o = (local_object *)base;
	long page = sysconf(_SC_PAGESIZE);
	hdr_mode *h;

	if (how != TF_ACCESS_HEADERS || atomic_load(&o->hdr))
		return how == TF_ACCESS_HEADERS;
	posix_fadvise(o->fd, 0, 0, POSIX_FADV_RANDOM);
	if (!(h = calloc(1, sizeof(*h))))
		return true;	/* buffered reads without read-ahead */
	h->page = page > 0 ? (size_t)page : 4096;
	if (!(h->res = malloc(RESIDENCY_WINDOW / h->page))) {
		free(h);
		return true;
	}
	h->dfd = open_direct(o, &h->align);
	pthread_mutex_init(&h->lock, NULL);
	if (!atomic_compare_exchange_strong(&o->hdr, &(hdr_mode *){ NULL }, h)) {
		if (h->dfd >= 0)	/* advised twice at once: the other's stays */
			close(h->dfd);
		pthread_mutex_destroy(&h->lock);
		free(h->res);
		free(h);
	}
	return true;
}

static tf_status local_read(tf_object *base, uint64_t off, void *dst, size_t len, tf_error *err)
{
	local_object *o = (local_object *)base;
	hdr_mode *h = atomic_load_explicit(&o->hdr, memory_order_acquire);
	tf_status rc = h && len <= HDR_MAX ? header_read(o, h, off, dst, len, err)
					   : plain_read(o, o->fd, off, dst, len, err);

	/* After the bytes are in: a write that overlapped them has already
	 * moved the file's times. */
	return rc == TF_OK ? local_check(base, err) : rc;
}

static void local_prefetch(tf_object *base, uint64_t off, uint64_t len)
{
	posix_fadvise(((local_object *)base)->fd, (off_t)off, (off_t)len, POSIX_FADV_WILLNEED);
}

static const tf_object_ops local_object_ops = {
	.close = local_close, .read = local_read, .prefetch = local_prefetch, .check = local_check,
	.advise = local_advise,
};

/* ---- the source ------------------------------------------------------------------------- */

static void local_free(tf_source *base)
{
	close(base->local_fd);
	free(base->name);
	free(base);
}

static const tf_source_ops local_source_ops = {
	.kind = "local", .free = local_free, .stat = local_stat, .list = local_list,
	.readlink = local_readlink, .statfs = local_statfs, .open = local_open,
};

tf_status tf_source_local(const char *dir, tf_source **out, tf_error *err)
{
	local_source *s = calloc(1, sizeof(*s));

	if (!s || !(s->base.name = strdup(dir))) {
		free(s);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	s->base.ops = &local_source_ops;
	if ((s->base.local_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		tf_status rc = tf_err(err, TF_E_IO, "%s: %s", dir, strerror(errno));
		free(s->base.name);
		free(s);
		return rc;
	}
	atomic_init(&s->no_openat2, false);
	*out = &s->base;
	return TF_OK;
}
