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
 * Versions: while an object holds its descriptor, a file renamed over it
 * later goes on reading the old inode.  A file rewritten in place is caught
 * after each read by comparing size, mtime and ctime with the version
 * opened (the kernel updates both times before it copies a write's data
 * in): such a read fails TF_E_STALE rather than returning bytes of two
 * versions.
 *
 * Descriptors: objects borrow them from the source's pool.  Keeping one per
 * object for good ran the process out: a views snapshot holds about four
 * files per fragment, so 1,200 fragments under the usual soft limit of
 * 1,024 made every later open, listings included, fail EMFILE until
 * unmount, and so did one user holding a thousand opens of one file.  The
 * pool holds at most max_fds descriptors (half of RLIMIT_NOFILE's soft
 * limit when the source is made, less FD_RESERVE; tilefs raises the soft
 * limit to the hard one, as most servers do, and sizes the pool again), the
 * idle ones in least recently used order.  An object whose descriptor went to others opens its
 * name again when next read (the same confined resolution) and must find
 * its very version there (device, inode, size, mtime and ctime): a file
 * renamed over, removed or rewritten meanwhile fails TF_E_STALE, as a
 * rewrite in place does, never giving another file's bytes.  The rest of
 * the limit is the reserve: the root's descriptor, listings, the parents
 * stats resolve, header walks' direct-I/O descriptors (one per walking
 * thread: a walk's object is closed after it), and the rest of the process
 * (the FUSE device, index entries, keys, configuration) never come from the
 * pool, so a full pool never makes a listing fail.
 *
 * The trade-off: a descriptor held costs the kernel an open file and us
 * nothing per read; a reopen costs an openat2, an fstat and an fcntl (and
 * the close of the descriptor it displaces): 2.8 us more per read, measured
 * alternating two files of a four-component path under a pool of one
 * (0.7 us for a 4 KiB pread with the descriptor held, 3.5 us reopening
 * each time), against tens of microseconds to decode a 64 KiB unit.  Only
 * an object idle longer than max_fds others pays it.  A descriptor being
 * read is never taken, so the pool holds max_fds plus at most one per read
 * in progress.  The pool's lock is held for list updates only: every open,
 * stat and close runs outside it.
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sources/source_impl.h"
#include "sources/source_local.h"

typedef struct local_object local_object;

/* The descriptors objects hold: those not being read are idle, listed
 * least recently used first, and the first to go. */
typedef struct fd_pool {
	pthread_mutex_t lock;
	unsigned max;			/* held at most, beyond those being read */
	unsigned held;			/* objects holding a descriptor */
	local_object *lru, *mru;	/* idle holders */
	uint64_t reopens, evictions;
} fd_pool;

typedef struct local_source {
	tf_source base;
	atomic_bool no_openat2;	/* the kernel said ENOSYS once */
	atomic_int refs;	/* tf_source_free's, and one per object */
	fd_pool pool;
} local_source;

/* The pool's share of RLIMIT_NOFILE: half of it, less a reserve, at least
 * FD_MIN (a process allowed fewer than ~150 descriptors reopens often);
 * limits beyond FD_CEILING (or none) count as FD_CEILING. */
#define FD_RESERVE 64
#define FD_MIN 8
#define FD_CEILING ((rlim_t)1 << 20)
/* Descriptors evicted per pass (closed with the lock released). */
#define EVICT_BATCH 16

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

struct local_object {
	tf_object base;
	local_source *src;		/* holds a reference */
	/* The pool's lock guards these three: fd is -1 while the object
	 * holds none; it is idle (listed) while fd >= 0 and users == 0. */
	int fd;
	unsigned users;			/* reads using fd now */
	local_object *prev, *next;	/* the idle list */
	_Atomic(hdr_mode *) hdr;	/* header walks, or NULL */
};

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

/* ---- the descriptor pool ------------------------------------------------------------------- */

/* The pool's bound for RLIMIT_NOFILE as it is now. */
static unsigned default_max_fds(void)
{
	struct rlimit r;
	rlim_t n = getrlimit(RLIMIT_NOFILE, &r) == 0 ? r.rlim_cur : 1024;

	if (n == RLIM_INFINITY || n > FD_CEILING)
		n = FD_CEILING;
	return n / 2 > FD_RESERVE + FD_MIN ? (unsigned)(n / 2 - FD_RESERVE) : FD_MIN;
}

static void idle_unlink(fd_pool *p, local_object *o)
{
	*(o->prev ? &o->prev->next : &p->lru) = o->next;
	*(o->next ? &o->next->prev : &p->mru) = o->prev;
	o->prev = o->next = NULL;
}

static void idle_push(fd_pool *p, local_object *o)
{
	o->next = NULL;
	o->prev = p->mru;
	*(p->mru ? &p->mru->next : &p->lru) = o;
	p->mru = o;
}

/* Take idle descriptors, least recently used first, while more than max
 * are held: at most EVICT_BATCH into out (lock held). */
static unsigned take_excess(fd_pool *p, int *out)
{
	unsigned n = 0;

	while (p->held > p->max && p->lru && n < EVICT_BATCH) {
		local_object *o = p->lru;
		idle_unlink(p, o);
		out[n++] = o->fd;
		o->fd = -1;
		p->held--;
		p->evictions++;
	}
	return n;
}

/* Release the lock, then close the n descriptors taken (and any more
 * beyond the bound: a lowered one). */
static void unlock_and_close(fd_pool *p, int *fds, unsigned n)
{
	for (;;) {
		pthread_mutex_unlock(&p->lock);
		for (unsigned i = 0; i < n; i++)
			close(fds[i]);
		if (n < EVICT_BATCH)
			return;
		pthread_mutex_lock(&p->lock);
		n = take_excess(p, fds);
	}
}

/* Give o descriptor fd, opened for it: with borrow, for a read (fd_return
 * after), else idle (the most recently used).  Returns the descriptor o
 * holds: fd, or the one a racing reader gave it first (fd is closed). */
static int fd_install(local_object *o, int fd, bool borrow)
{
	fd_pool *p = &o->src->pool;
	int fds[EVICT_BATCH], spare = -1, now;

	pthread_mutex_lock(&p->lock);
	if (o->fd < 0) {
		o->fd = fd;
		p->held++;
		p->reopens += borrow;
	} else {
		spare = fd;
		if (!o->users)
			idle_unlink(p, o);
	}
	if (borrow)
		o->users++;
	else
		idle_push(p, o);
	now = o->fd;	/* kept while we read: a borrowed descriptor is never taken */
	unlock_and_close(p, fds, take_excess(p, fds));
	if (spare >= 0)
		close(spare);
	return now;
}

/* Open rel beneath the root as a regular file: *fd (blocking reads) and
 * its stat. */
static tf_status open_regular(local_source *s, const char *rel, int *fd, tf_stat *st, tf_error *err)
{
	struct stat sb;

	if ((*fd = open_beneath(s, rel, O_RDONLY | O_NONBLOCK)) < 0)
		return errno_status(err, rel, "open");
	/* O_NONBLOCK kept a FIFO from blocking the open; the stat refuses it. */
	if (fstat(*fd, &sb) != 0 || !S_ISREG(sb.st_mode) || fcntl(*fd, F_SETFL, 0) != 0) {
		close(*fd);
		return tf_err(err, TF_E_INVAL, "%s: not a regular file", rel);
	}
	to_tf_stat(&sb, st);
	return TF_OK;
}

/* o's descriptor, for one read (fd_return after).  An object whose
 * descriptor went to others opens its name again, and it must still be the
 * version the object reads: whatever else is there now (a file renamed
 * over or rewritten, none, a symlink, a FIFO) is TF_E_STALE. */
static tf_status fd_borrow(local_object *o, int *fd, tf_error *err)
{
	fd_pool *p = &o->src->pool;
	tf_status rc;
	tf_stat now;

	pthread_mutex_lock(&p->lock);
	if ((*fd = o->fd) >= 0 && !o->users++)
		idle_unlink(p, o);
	pthread_mutex_unlock(&p->lock);
	if (*fd >= 0)
		return TF_OK;
	rc = open_regular(o->src, o->base.name, fd, &now, err);
	if (rc == TF_OK && !tf_version_equal(&now.v, &o->base.st.v)) {
		close(*fd);
		rc = tf_err(err, TF_E_STALE, "%s: changed on disk while open", o->base.name);
	}
	if (rc == TF_E_NOTFOUND || rc == TF_E_INVAL || rc == TF_E_ACCESS)
		return tf_err(err, TF_E_STALE, "%s: changed on disk while open (its name no longer opens "
			      "as a file)", o->base.name);
	if (rc != TF_OK)
		return rc;	/* out of memory or descriptors: the file may be fine */
	if (atomic_load_explicit(&o->hdr, memory_order_acquire))
		posix_fadvise(*fd, 0, 0, POSIX_FADV_RANDOM);
	*fd = fd_install(o, *fd, true);
	return TF_OK;
}

static void fd_return(local_object *o)
{
	fd_pool *p = &o->src->pool;
	int fds[EVICT_BATCH];

	pthread_mutex_lock(&p->lock);
	if (!--o->users)
		idle_push(p, o);
	unlock_and_close(p, fds, take_excess(p, fds));
}

static void source_put(local_source *s)
{
	if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
		return;
	close(s->base.local_fd);
	pthread_mutex_destroy(&s->pool.lock);
	free(s->base.name);
	free(s);
}

/* ---- objects ------------------------------------------------------------------------------ */

static tf_status local_open(tf_source *base, const char *rel, const tf_version *expect, tf_object **out,
			    tf_error *err)
{
	local_source *s = (local_source *)base;
	local_object *o;
	tf_status rc;
	tf_stat st;
	int fd;

	if ((rc = open_regular(s, rel, &fd, &st, err)) != TF_OK)
		return rc;
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
	o->src = s;
	atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
	o->fd = -1;
	atomic_init(&o->hdr, NULL);
	fd_install(o, fd, false);
	*out = &o->base;
	return TF_OK;
}

static void local_close(tf_object *base)
{
	local_object *o = (local_object *)base;
	hdr_mode *h = atomic_load(&o->hdr);
	fd_pool *p = &o->src->pool;

	if (h) {
		if (h->dfd >= 0)
			close(h->dfd);
		pthread_mutex_destroy(&h->lock);
		free(h->res);
		free(h);
	}
	pthread_mutex_lock(&p->lock);	/* nobody reads it now: idle, or holding none */
	if (o->fd >= 0) {
		idle_unlink(p, o);
		p->held--;
	}
	pthread_mutex_unlock(&p->lock);
	if (o->fd >= 0)
		close(o->fd);
	source_put(o->src);
	free(o->base.name);
	free(o);
}

/* Whether the file open as fd still has the size and times of o's version.
 * A file renamed over or removed is unlinked, which moves its ctime only:
 * with size and mtime unchanged and no name left, its bytes are still the
 * ones opened, and the handle goes on reading them. */
static tf_status check_fd(local_object *o, int fd, tf_error *err)
{
	const tf_version *was = &o->base.st.v;
	struct stat sb;
	tf_stat now;

	if (fstat(fd, &sb) != 0)
		return errno_status(err, o->base.name, "stat");
	to_tf_stat(&sb, &now);
	if (sb.st_nlink == 0 && now.v.size == was->size && now.v.mtime_ns == was->mtime_ns)
		return TF_OK;
	if (!tf_version_equal(&now.v, was))
		return tf_err(err, TF_E_STALE, "%s: changed on disk while open", o->base.name);
	return TF_OK;
}

static tf_status local_check(tf_object *base, tf_error *err)
{
	local_object *o = (local_object *)base;
	tf_status rc;
	int fd;

	if ((rc = fd_borrow(o, &fd, err)) != TF_OK)
		return rc;
	rc = check_fd(o, fd, err);
	fd_return(o);
	return rc;
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
 * mincore() of a mapping of the window holding them (fd is o's, borrowed).
 * A range the window does not hold whole (it straddles a window's end, or
 * the file's) is "unknown": res[] has no byte for its last pages. */
static bool resident(local_object *o, hdr_mode *h, int fd, uint64_t off, size_t len)
{
	uint64_t size = o->base.st.v.size, first = off / h->page, last = (off + len - 1) / h->page;
	uint64_t mlen;
	void *m;

	if (len == 0 || off >= size || len > size - off)
		return false;	/* read directly, which reports the end */
	if (off < h->res_off || off + len > h->res_off + h->res_len) {
		h->res_off = off / RESIDENCY_WINDOW * RESIDENCY_WINDOW;
		mlen = size - h->res_off < RESIDENCY_WINDOW ? size - h->res_off : RESIDENCY_WINDOW;
		m = mmap(NULL, mlen, PROT_READ, MAP_SHARED, fd, (off_t)h->res_off);
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
static tf_status direct_read(local_object *o, hdr_mode *h, int fd, uint64_t off, void *dst, size_t len,
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
			return plain_read(o, fd, off, dst, len, err);
		if (n == 0)
			return tf_err(err, TF_E_STALE, "%s: ended at %llu (changed on disk?)", o->base.name,
				      (unsigned long long)(start + got));
		got += (size_t)n;
	}
	memcpy(dst, buf + (off - start), len);
	return TF_OK;
}

static tf_status header_read(local_object *o, hdr_mode *h, int fd, uint64_t off, void *dst, size_t len,
			     tf_error *err)
{
	bool cached;

	pthread_mutex_lock(&h->lock);
	cached = h->dfd < 0 || resident(o, h, fd, off, len);
	pthread_mutex_unlock(&h->lock);
	return cached ? plain_read(o, fd, off, dst, len, err) : direct_read(o, h, fd, off, dst, len, err);
}

/* A descriptor of the file open as fd with O_DIRECT, and its alignment
 * (STATX_DIOALIGN); -1 where direct I/O is not offered. */
static int open_direct(int of, uint32_t *align)
{
	char path[64];
	struct stat a, b;
	struct statx sx;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", of);
	if ((fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC)) < 0)
		return -1;
	if (fstat(fd, &a) != 0 || fstat(of, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino ||
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
	int fd;

	if (how != TF_ACCESS_HEADERS || atomic_load(&o->hdr))
		return how == TF_ACCESS_HEADERS;
	if (fd_borrow(o, &fd, NULL) != TF_OK)
		return true;	/* its reads will fail as well */
	posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
	if (!(h = calloc(1, sizeof(*h))))
		goto out;	/* buffered reads without read-ahead */
	h->page = page > 0 ? (size_t)page : 4096;
	if (!(h->res = malloc(RESIDENCY_WINDOW / h->page))) {
		free(h);
		goto out;
	}
	h->dfd = open_direct(fd, &h->align);
	pthread_mutex_init(&h->lock, NULL);
	if (!atomic_compare_exchange_strong(&o->hdr, &(hdr_mode *){ NULL }, h)) {
		if (h->dfd >= 0)	/* advised twice at once: the other's stays */
			close(h->dfd);
		pthread_mutex_destroy(&h->lock);
		free(h->res);
		free(h);
	}
out:
	fd_return(o);
	return true;
}

static tf_status local_read(tf_object *base, uint64_t off, void *dst, size_t len, tf_error *err)
{
	local_object *o = (local_object *)base;
	hdr_mode *h = atomic_load_explicit(&o->hdr, memory_order_acquire);
	tf_status rc;
	int fd;

	if ((rc = fd_borrow(o, &fd, err)) != TF_OK)
		return rc;
	rc = h && len <= HDR_MAX ? header_read(o, h, fd, off, dst, len, err) : plain_read(o, fd, off, dst, len, err);
	/* After the bytes are in: a write that overlapped them has already
	 * moved the file's times. */
	if (rc == TF_OK)
		rc = check_fd(o, fd, err);
	fd_return(o);
	return rc;
}

static void local_prefetch(tf_object *base, uint64_t off, uint64_t len)
{
	local_object *o = (local_object *)base;
	int fd;

	if (fd_borrow(o, &fd, NULL) == TF_OK) {
		posix_fadvise(fd, (off_t)off, (off_t)len, POSIX_FADV_WILLNEED);
		fd_return(o);
	}
}

static const tf_object_ops local_object_ops = {
	.close = local_close, .read = local_read, .prefetch = local_prefetch, .check = local_check,
	.advise = local_advise,
};

/* ---- the source ------------------------------------------------------------------------- */

static void local_free(tf_source *base)
{
	source_put((local_source *)base);
}

static void local_fd_stats(tf_source *base, tf_source_fds *out)
{
	fd_pool *p = &((local_source *)base)->pool;

	pthread_mutex_lock(&p->lock);
	*out = (tf_source_fds){ p->max, p->held, p->reopens, p->evictions };
	pthread_mutex_unlock(&p->lock);
}

static void local_set_max_fds(tf_source *base, unsigned max)
{
	fd_pool *p = &((local_source *)base)->pool;
	int fds[EVICT_BATCH];

	pthread_mutex_lock(&p->lock);
	p->max = max ? max : default_max_fds();
	unlock_and_close(p, fds, take_excess(p, fds));
}

static const tf_source_ops local_source_ops = {
	.kind = "local", .free = local_free, .stat = local_stat, .list = local_list,
	.readlink = local_readlink, .statfs = local_statfs, .open = local_open,
	.fd_stats = local_fd_stats, .set_max_fds = local_set_max_fds,
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
	atomic_init(&s->refs, 1);
	pthread_mutex_init(&s->pool.lock, NULL);
	s->pool.max = default_max_fds();
	*out = &s->base;
	return TF_OK;
}
