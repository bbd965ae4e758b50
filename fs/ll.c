/*
 * ll.c - the FUSE low-level operations.
 *
 * Requests name inodes; nodes.c maps each to the library's entry it shows
 * (tf_entry.h), which answers for every kind of file alike: attributes,
 * who may open it, extended attributes, and, opened, a reader.  A read
 * pins the range through the reader (slices of the decoded-chunk cache,
 * or of this thread's scratch) and replies with an iovec pointing straight
 * at them (fuse_reply_iov: the kernel copies them into the page cache; we
 * copy nothing), then unpins.  A reader keeps reading the version its
 * entry shows, so a replaced source gives it the old bytes or EIO, never a
 * mix.  Directories are dirs.c's.
 */
#include "tilefs.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#define XATTR_PREFIX "user.tilefs."
#define TIMEOUT FS_TIMEOUT

/* ---- per-thread scratch ------------------------------------------------------------------- */

/* The request a FUSE thread serves, as the source's hooks tell it. */
typedef struct fs_call {
	tilefs *fs;
	fuse_req_t req;		/* only compared, never used: it may be answered */
	int64_t start_ns;
} fs_call;

typedef struct fs_thread {
	tf_pin_scratch *scratch;	/* what reads pin */
	struct iovec *iov;
	size_t iov_cap;
	uint8_t *buf;		/* replies gathered */
	size_t buf_cap;
	fs_call call;
} fs_thread;

static void thread_free(void *p)
{
	fs_thread *t = p;

	tf_pin_scratch_free(t->scratch);
	free(t->iov);
	free(t->buf);
	free(t);
}

static fs_thread *thread_of(tilefs *fs)
{
	fs_thread *t = pthread_getspecific(fs->thread_key);

	if (t)
		return t;
	if (!(t = calloc(1, sizeof(*t))) || !(t->scratch = tf_pin_scratch_new())) {
		free(t);
		return NULL;
	}
	pthread_setspecific(fs->thread_key, t);
	return t;
}

/* ---- requests: their deadlines, their callers gone --------------------------------------------- */

/*
 * A source bounds what it does for a request by a deadline from the
 * request's start, and stops once the caller is gone (tf_source.h): a
 * request the kernel still waits for keeps a killed caller in the kernel
 * and the mount busy (fusermount3 -u: EBUSY).  The kernel tells of a caller
 * gone with an INTERRUPT, which libfuse hands to the function registered
 * for the request, maybe late, from another thread, even after the request
 * was answered and freed (it holds the request meanwhile, so no new request
 * has its address until it returns).  So the function only records the
 * request's address in a ring; a request starting at an address recorded
 * before wipes it first; and asking whether a caller is gone compares
 * addresses, never touching a request that may be answered.
 */
static void on_interrupt(fuse_req_t req, void *data)
{
	tilefs *fs = data;

	pthread_mutex_lock(&fs->gone_lock);
	fs->gone[fs->gone_next++ % (sizeof(fs->gone) / sizeof(fs->gone[0]))] = req;
	atomic_store(&fs->gone_seen, true);
	pthread_mutex_unlock(&fs->gone_lock);
}

static bool caller_gone(void *arg)
{
	const fs_call *c = arg;
	tilefs *fs = c->fs;
	bool gone = false;

	if (!atomic_load_explicit(&fs->gone_seen, memory_order_relaxed))
		return false;
	pthread_mutex_lock(&fs->gone_lock);
	for (size_t i = 0; i < sizeof(fs->gone) / sizeof(fs->gone[0]); i++)
		gone = gone || fs->gone[i] == c->req;
	pthread_mutex_unlock(&fs->gone_lock);
	return gone;
}

/* Every operation starts here: req is now the thread's request. */
tilefs *fs_of(fuse_req_t req)
{
	tilefs *fs = fuse_req_userdata(req);
	fs_thread *t = thread_of(fs);
	int64_t now = tf_now_ns();

	if (fs->idle_ns)	/* one line every request writes: only when it is read */
		atomic_store_explicit(&fs->last_request_ns, now, memory_order_relaxed);
	if (!t)
		return fs;	/* no memory: the source bounds each operation alone */
	if (atomic_load_explicit(&fs->gone_seen, memory_order_relaxed)) {
		pthread_mutex_lock(&fs->gone_lock);
		for (size_t i = 0; i < sizeof(fs->gone) / sizeof(fs->gone[0]); i++)
			if (fs->gone[i] == req)
				fs->gone[i] = NULL;	/* an earlier request's */
		pthread_mutex_unlock(&fs->gone_lock);
	}
	t->call = (fs_call){ fs, req, now };
	fuse_req_interrupt_func(req, on_interrupt, fs);	/* at once if it already is */
	return fs;
}

/* The source's hook: the request this thread serves (none on the cache's
 * workers and other threads of ours). */
static bool current_call(void *ctx, tf_call *out)
{
	fs_thread *t = pthread_getspecific(((tilefs *)ctx)->thread_key);

	if (!t || !t->call.req)
		return false;
	*out = (tf_call){ t->call.start_ns, caller_gone, &t->call };
	return true;
}

static void source_warning(void *ctx, const char *msg)
{
	(void)ctx;
	fs_log_failure(msg);
}

int fs_ll_init(tilefs *fs, tf_source_hooks *hooks)
{
	if (pthread_key_create(&fs->thread_key, thread_free) != 0 || pthread_mutex_init(&fs->gone_lock, NULL) != 0)
		return ENOMEM;
	*hooks = (tf_source_hooks){ current_call, source_warning, fs };
	return 0;
}

/* ---- set-up ------------------------------------------------------------------------------- */

static void ll_init(void *userdata, struct fuse_conn_info *conn)
{
	/* Many readahead requests in flight keep every decoder busy. */
	conn->max_background = 32;
	/* The kernel queues requests until our reply to its INIT, which
	 * follows: whoever hears that we serve can use the mount at once. */
	fs_ready(userdata, true, NULL);
}

/*
 * Let the kernel read ahead 4 MiB at a time, not FUSE's 128 KiB: requests
 * grow to 1 MiB (FUSE's largest), and four are in flight at once, so that
 * the kernel's copies of replies into its page cache overlap (a cold cat
 * of 256 MiB of zstd: 272 ms with a 1 MiB window, 200 ms with 4 MiB, 208
 * with 8).  Done on the first request, because the kernel clamps the window
 * when it processes our INIT reply.  Best effort (needs root).
 */
static void widen_readahead(tilefs *fs)
{
	FILE *f;

	if (atomic_exchange(&fs->readahead_set, true) || !fs->readahead_knob[0])
		return;
	if ((f = fopen(fs->readahead_knob, "w"))) {
		fputs("4096\n", f);
		fclose(f);
	}
}

/* ---- names and attributes ------------------------------------------------------------------ */

void fs_entry_of(tilefs *fs, fs_node *n, const struct stat *st, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = fs_node_ino(n);
	e->attr = *st;
	e->attr_timeout = fs_node_attr_timeout(fs, n, TIMEOUT);
	e->entry_timeout = TIMEOUT;
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	tilefs *fs = fs_of(req);
	fs_node *dir = fs_node_get(fs, parent), *n;
	struct fuse_entry_param e;
	struct stat st;
	int rc;

	widen_readahead(fs);
	if (!dir) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	rc = fs_node_is_dir(dir) ? fs_node_lookup(fs, dir, name, NULL, &n, &st) : ENOTDIR;
	fs_node_put(fs, dir);
	if (rc == ENOENT) {	/* remembered for a second, like an entry */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = TIMEOUT;
		fs_note_negative(fs, parent, name);
		fuse_reply_entry(req, &e);
	} else if (rc) {
		fuse_reply_err(req, rc);
	} else {
		fs_entry_of(fs, n, &st, &e);
		if (fuse_reply_entry(req, &e) != 0)
			fs_node_forget(fs, e.ino, 1);	/* the kernel never got it */
	}
}

static void ll_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fs_node_forget(fs_of(req), ino, nlookup);
	fuse_reply_none(req);
}

static void ll_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *v)
{
	for (size_t i = 0; i < count; i++)
		fs_node_forget(fs_of(req), v[i].ino, v[i].nlookup);
	fuse_reply_none(req);
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	tilefs *fs = fs_of(req);
	fs_node *n = fs_node_get(fs, ino);
	struct stat st;
	double timeout;

	(void)fi;
	widen_readahead(fs);
	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	fs_node_attr(fs, n, &st);
	timeout = fs_node_attr_timeout(fs, n, TIMEOUT);
	fs_node_put(fs, n);
	fuse_reply_attr(req, &st, timeout);
}

static void ll_readlink(fuse_req_t req, fuse_ino_t ino)
{
	tilefs *fs = fs_of(req);
	fs_node *n = fs_node_get(fs, ino);
	char buf[PATH_MAX];
	tf_status rc;

	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	rc = tf_entry_readlink(fs_node_entry(n), buf, sizeof(buf), NULL);
	fs_node_put(fs, n);
	if (rc == TF_OK)
		fuse_reply_readlink(req, buf);
	else
		fuse_reply_err(req, fs_errno(rc));
}

static void ll_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;

	(void)ino;
	if (tf_mount_statfs(fs_of(req)->mount, &sv, NULL) != TF_OK)
		fuse_reply_err(req, EIO);
	else
		fuse_reply_statfs(req, &sv);
}

/* ---- files ---------------------------------------------------------------------------------- */

/* An open file: the entry's reader.  Open handles are listed so that
 * teardown frees those the kernel never released (files still open at
 * unmount). */
typedef struct handle {
	fs_node *node;		/* pinned */
	uid_t uid;		/* who opened it (fs_user_open) */
	tf_entry_reader *r;
	bool direct;		/* no page cache: reads reach us whatever their size */
	struct handle *prev, *next;
} handle;

static void handle_link(tilefs *fs, handle *h)
{
	pthread_mutex_lock(&fs->handles_lock);
	h->next = fs->handles;
	if (h->next)
		h->next->prev = h;
	fs->handles = h;
	pthread_mutex_unlock(&fs->handles_lock);
}

/* Close h and free it (its node pin goes too). */
static void handle_free(tilefs *fs, handle *h)
{
	pthread_mutex_lock(&fs->handles_lock);
	*(h->prev ? &h->prev->next : &fs->handles) = h->next;
	if (h->next)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&fs->handles_lock);
	tf_reader_close(h->r);
	fs_node_put(fs, h->node);
	fs_user_close(fs, h->uid);
	free(h);
}

void fs_ll_free_handles(tilefs *fs)
{
	while (fs->handles)
		handle_free(fs, fs->handles);
}

/* Whether the kernel interrupted the request (its reader went away: the
 * kernel sends FUSE_INTERRUPT, and a killed reader waits in D state until
 * the answer comes). */
static bool req_gone(void *ctx)
{
	fuse_req_t req = ctx;

	/* Or the mount went (an open sizing a CSV is not a file open yet:
	 * the unmount does not wait for it, the daemon's exit does). */
	return fuse_req_interrupted(req) != 0 || fuse_session_exited(fs_of(req)->se);
}

/* The kernel's attributes of n are stale: it asks again at the next stat
 * or read past the size it holds.  (Attributes only: no page, no inode
 * lock is touched, so this is safe inside a request on n.) */
static void inval_attr(tilefs *fs, fs_node *n)
{
	int e = fuse_lowlevel_notify_inval_inode(fs->se, fs_node_ino(n), -1, 0);

	if (e && e != -ENOENT)
		fs_log(TF_LOG_WARN, "%s: dropping the kernel's attributes: %s", fs_node_rel(n), strerror(-e));
}

/* The caller's supplementary groups into *out (malloc'd; none if they
 * cannot be read: it then gets what its user and primary group get). */
static size_t caller_groups(void *ctx, uint32_t **out)
{
	fuse_req_t req = ctx;
	gid_t small[64], *list = small;
	int n = fuse_req_getgroups(req, 64, small);
	size_t k = 0;

	*out = NULL;
	if (n > 64 && (list = malloc((size_t)n * sizeof(*list))) && fuse_req_getgroups(req, n, list) != n)
		n = -1;	/* changed meanwhile */
	if (n > 0 && list && (*out = malloc((size_t)n * sizeof(**out))))
		for (k = 0; k < (size_t)n; k++)
			(*out)[k] = list[k];
	if (list != small)
		free(list);
	return k;
}

/*
 * Whether the caller may open n.  The kernel checked the modes it was
 * shown (default_permissions); for views, plaintext and files decoded from
 * two stored files those may predate what is known now (an index that
 * failed at lookup, an input's mode changed within the attribute timeout),
 * so the catalog is asked again with the caller's own user and groups
 * (tf_entry_allows).  Capabilities other than root's are not seen from
 * here.  Returns 0 or EACCES.
 */
static int check_caller(fuse_req_t req, fs_node *n)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	tf_caller who = { ctx->uid, ctx->gid, caller_groups, req };

	return tf_entry_allows(fs_node_entry(n), &who) ? 0 : EACCES;
}

/*
 * Open n's entry into h.  A view is sized now (the caller waiting; gone,
 * EINTR); when the size the kernel holds was not the true one, its
 * attributes are dropped before the open is answered, so its fstat, and
 * the page cache it reads through, see the size.  ESTALE: the source
 * changed since the kernel looked it up; the kernel looks again and opens
 * the new node.  A failure is logged but for ESTALE and the source's
 * refusals.
 */
static int open_entry(fuse_req_t req, tilefs *fs, fs_node *n, handle *h)
{
	fs_thread *t = thread_of(fs);
	tf_cancel cancel = { req_gone, req };
	tf_open_how how;
	tf_error err;
	tf_status rc;

	if (!t)
		return ENOMEM;
	err.msg[0] = '\0';
	rc = tf_entry_open(fs_node_entry(n), t->scratch, &cancel, fs->direct_io ? TF_OPEN_DIRECT : 0, &h->r, &how,
			   &err);
	if (rc != TF_OK) {
		if (fs_errno(rc) == EIO && err.msg[0])
			fs_log_failure(err.msg);
		return fs_errno(rc);
	}
	if (how.resized)
		inval_attr(fs, n);
	/* -o direct_io: replies land straight in the reader's buffer, with no
	 * page cache to fill and copy out again (a cold cat of 256 MiB of zstd:
	 * 154 ms against 193; but mmap(MAP_SHARED) then fails, and warm
	 * re-reads each cost a round trip).  Otherwise a node is one version:
	 * its cached pages are good, unless a read found the stored bytes
	 * changed under it (a store keeping an ETag across versions): the next
	 * open then drops them (ll_open: keep_cache off). */
	h->direct = how.direct;
	return 0;
}

static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	tilefs *fs = fs_of(req);
	fs_node *n = fs_node_get(fs, ino);
	uid_t uid = fuse_req_ctx(req)->uid;
	handle *h = NULL;
	int rc = 0;

	if (!n)
		rc = ESTALE;
	else if (fs_node_is_dir(n))
		rc = EISDIR;
	else if ((fi->flags & O_ACCMODE) != O_RDONLY)
		rc = EROFS;
	else if ((rc = check_caller(req, n)) != 0)
		;	/* by what is known of n before opening it */
	else if ((rc = fs_user_open(fs, uid)) != 0)
		;	/* EMFILE: this user holds its share already */
	else if (!(h = calloc(1, sizeof(*h)))) {
		fs_user_close(fs, uid);
		rc = ENOMEM;
	} else if ((rc = open_entry(req, fs, n, h)) == 0)
		rc = check_caller(req, n);	/* the open may have said more (an index: plaintext, a dep) */
	if (rc) {
		if (h) {
			tf_reader_close(h->r);
			free(h);
			fs_user_close(fs, uid);	/* counted by fs_user_open */
		}
		if (n)
			fs_node_put(fs, n);
		fuse_reply_err(req, rc);
		return;
	}
	h->node = n;	/* our pin passes to the handle */
	h->uid = uid;
	fi->direct_io = h->direct;
	fi->keep_cache = fs_node_pages_good(n) && !h->direct;
	fi->fh = (uintptr_t)h;
	handle_link(fs, h);
	if (fuse_reply_open(req, fi) != 0)	/* interrupted: nobody will release it */
		handle_free(fs, h);
}

static bool grow_iov(fs_thread *t, size_t n)
{
	struct iovec *v;

	if (n <= t->iov_cap)
		return true;
	if (!(v = realloc(t->iov, n * sizeof(*v))))
		return false;
	t->iov = v;
	t->iov_cap = n;
	return true;
}

/* Room for size bytes in t's buffer. */
static bool grow_buf(fs_thread *t, size_t size)
{
	uint8_t *b;

	if (size <= t->buf_cap)
		return true;
	if (!(b = realloc(t->buf, size)))
		return false;
	t->buf = b;
	t->buf_cap = size;
	return true;
}

/* Reply with t's pinned slices.  Straight from the cache buffers, as one
 * iovec each, when the kernel takes them in one writev: it refuses more
 * than IOV_MAX (1024) vectors, libfuse adds its header to them, and a
 * refused reply leaves the reader waiting for ever.  A request spanning
 * more units than that (tiles under 1 KiB) is gathered into t's buffer. */
static void reply_slices(fuse_req_t req, fs_thread *t, const tf_slices *s)
{
	size_t len = 0;

	if (s->n < IOV_MAX) {
		if (!grow_iov(t, s->n)) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		for (size_t i = 0; i < s->n; i++)
			t->iov[i] = (struct iovec){ (void *)(uintptr_t)s->v[i].p, s->v[i].n };
		fuse_reply_iov(req, t->iov, (int)s->n);
		return;
	}
	if (!grow_buf(t, (size_t)s->bytes)) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (size_t i = 0; i < s->n; i++) {
		memcpy(t->buf + len, s->v[i].p, s->v[i].n);
		len += s->v[i].n;
	}
	fuse_reply_buf(req, (const char *)t->buf, len);
}

/*
 * Whether a read may be answered short: only a request the kernel makes for
 * a reader's own buffer, never one filling the page cache.  FUSE takes a
 * short reply to a page-cache fill for the end of the file: it zero-fills
 * the rest of the pages it asked for, marks them up to date and lowers the
 * file's size (readpage, readahead; fuse_short_read), so a reader would get
 * zeros, or a truncated file, where the bytes are bad.  Requests made by
 * the kernel's direct I/O path (a handle opened with direct I/O, or a
 * reader's O_DIRECT) carry the reader's lock owner (FUSE_READ_LOCKOWNER);
 * page-cache fills carry none, also those of an mmap of a direct I/O handle.
 */
static bool short_read_ok(const handle *h, const struct fuse_file_info *fi)
{
	return fi->lock_owner != 0 && (h->direct || (fi->flags & O_DIRECT));
}

static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	tilefs *fs = fs_of(req);
	handle *h = (handle *)(uintptr_t)fi->fh;
	fs_thread *t = thread_of(fs);
	tf_cancel cancel = { req_gone, req };
	/* Once replied to, the reader may close: the handle is freed by
	 * RELEASE on another thread.  Nothing of h is touched after the reply. */
	bool passed_on = !h->direct, short_ok = short_read_ok(h, fi);
	const tf_slices *s;
	tf_error err;
	tf_status rc;

	(void)ino;
	err.msg[0] = '\0';
	if (!t) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if ((rc = tf_reader_pin(h->r, t->scratch, (uint64_t)off, size, &cancel, &s, &err)) != TF_OK) {
		if (rc != TF_E_INTR)
			fs_log_failure(err.msg);
		if (rc == TF_E_STALE)	/* the next open must not keep what the kernel cached */
			fs_node_pages_stale(h->node);
		/* EIO whatever the cause: a size too large to hold is as much
		 * a damaged file as a bad checksum (tilefs(1), ERRORS).  The
		 * bytes before the bad unit are a short read, as a disk gives
		 * before a bad sector; EIO only when the first byte asked for
		 * is bad.  A page-cache fill gets EIO (see short_read_ok): the
		 * kernel then asks page by page. */
		if (rc == TF_E_INTR || !short_ok || !s->bytes) {
			tf_reader_unpin(t->scratch, false);
			fuse_reply_err(req, rc == TF_E_INTR ? EINTR : EIO);
			return;
		}
	}
	reply_slices(req, t, s);
	tf_reader_unpin(t->scratch, passed_on);
}

static void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	tilefs *fs = fs_of(req);
	handle *h = (handle *)(uintptr_t)fi->fh;

	(void)ino;
	handle_free(fs, h);
	fuse_reply_err(req, 0);
}

/* ---- extended attributes -------------------------------------------------------------------- */

/* The root's attributes (user.tilefs.cache, .index, .opens, .disk_cache):
 * the mount's statistics with the driver's counts (malloc'd or NULL). */
static char *root_attr(tilefs *fs, const char *name)
{
	tf_mount_counts c = { .max_user_opens = fs->users.max_opens, .indexing_ahead = fs->indexer != NULL };

	fs_nodes_stats(fs, &c.nodes, &c.indexes, &c.index_bytes, &c.handles);
	fs_users_stats(fs, &c.users, &c.refused);
	return tf_mount_stat_text(fs->mount, name, &c);
}

static void reply_attr_text(fuse_req_t req, char *v, size_t size)
{
	size_t len = v ? strlen(v) : 0;

	if (!v)
		fuse_reply_err(req, ENODATA);
	else if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, v, len);
	free(v);
}

static void ll_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	tilefs *fs = fs_of(req);
	fs_node *n;
	char *v = NULL;

	/* tilefs has attributes in the user namespace only.  For the others
	 * (security.selinux, system.posix_acl_access, which ls -l asks of
	 * every entry, and the kernel never caches for FUSE) "not supported"
	 * is the truth, and ls remembers it per device: one round trip per
	 * mount instead of two per entry (ENODATA made ls -l of 100,000
	 * files cost ~5x the raw directory). */
	if (strncmp(name, "user.", 5)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (strncmp(name, XATTR_PREFIX, strlen(XATTR_PREFIX))) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	name += strlen(XATTR_PREFIX);
	if (ino == FUSE_ROOT_ID) {
		v = root_attr(fs, name);
		if (v && size == 0) {	/* counters may grow before the reader asks again */
			fuse_reply_xattr(req, strlen(v) + 64);
			free(v);
			return;
		}
		reply_attr_text(req, v, size);
		return;
	}
	if (!(n = fs_node_get(fs, ino))) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	v = tf_entry_getxattr(fs_node_entry(n), name - strlen(XATTR_PREFIX));
	fs_node_put(fs, n);
	reply_attr_text(req, v, size);
}

static void ll_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	tilefs *fs = fs_of(req);
	char names[512];
	size_t len = 0;
	fs_node *n;

	if (ino == FUSE_ROOT_ID) {
		char *dc = root_attr(fs, "disk_cache");	/* with cache_dir */
		len = (size_t)snprintf(names, sizeof(names), XATTR_PREFIX "cache%c" XATTR_PREFIX "index%c"
				       XATTR_PREFIX "opens", '\0', '\0') + 1;
		if (dc)
			len += (size_t)snprintf(names + len, sizeof(names) - len, XATTR_PREFIX "disk_cache") + 1;
		free(dc);
	} else if ((n = fs_node_get(fs, ino))) {
		len = tf_entry_listxattr(fs_node_entry(n), names, sizeof(names));
		fs_node_put(fs, n);
	}
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, names, len);
}

const struct fuse_lowlevel_ops tilefs_ll_ops = {
	.init = ll_init,
	.lookup = ll_lookup,
	.forget = ll_forget,
	.forget_multi = ll_forget_multi,
	.getattr = ll_getattr,
	.readlink = ll_readlink,
	.opendir = fs_ll_opendir,
	.readdir = fs_ll_readdir,
	.readdirplus = fs_ll_readdirplus,
	.releasedir = fs_ll_releasedir,
	.open = ll_open,
	.read = ll_read,
	.release = ll_release,
	.statfs = ll_statfs,
	.getxattr = ll_getxattr,
	.listxattr = ll_listxattr,
};
