/*
 * ll.c - the FUSE low-level operations.
 *
 * Requests name inodes; nodes.c says what each shows.  A read of a decoded
 * file pins the cache's buffers that hold the range and replies with an
 * iovec pointing straight at them (fuse_reply_iov: the kernel copies them
 * into the page cache; we copy nothing), then unpins.  Every handle keeps
 * the stored file open as the version its node shows, so a replaced source
 * gives that handle the old bytes or EIO, never a mix.
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
	tf_workspace *ws;
	tf_slices slices;
	struct iovec *iov;
	size_t iov_cap;
	uint8_t *buf;		/* raw reads */
	size_t buf_cap;
	fs_call call;
} fs_thread;

static void thread_free(void *p)
{
	fs_thread *t = p;

	tf_workspace_free(t->ws);
	tf_slices_free(&t->slices);
	free(t->iov);
	free(t->buf);
	free(t);
}

static fs_thread *thread_of(tilefs *fs)
{
	fs_thread *t = pthread_getspecific(fs->thread_key);

	if (t)
		return t;
	if (!(t = calloc(1, sizeof(*t))) || !(t->ws = tf_workspace_new())) {
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
static tilefs *fs_of(fuse_req_t req)
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

static void entry_of(tilefs *fs, fs_node *n, const struct stat *st, struct fuse_entry_param *e)
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
		entry_of(fs, n, &st, &e);
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
	rc = tf_source_readlink(fs->src, fs_node_rel(n), buf, sizeof(buf), NULL);
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

/* ---- directories ----------------------------------------------------------------------------- */

/* A directory as listed at its first read: later reads page through it. */
typedef struct dir_entry {
	char *name;
	tf_stat st;
} dir_entry;

typedef struct dir_handle {
	fuse_ino_t ino;
	uid_t uid;		/* who opened it (fs_user_open) */
	bool listed, plus, stats;
	dir_entry *v;
	size_t n, cap;
	size_t bytes;		/* the listing's memory, counted as uid's */
} dir_handle;

static void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	tilefs *fs = fs_of(req);
	fs_node *n = fs_node_get(fs, ino);
	uid_t uid = fuse_req_ctx(req)->uid;
	dir_handle *d;
	int rc;

	if (!n || !fs_node_is_dir(n)) {
		if (n)
			fs_node_put(fs, n);
		fuse_reply_err(req, n ? ENOTDIR : ESTALE);
		return;
	}
	fs_node_put(fs, n);
	if ((rc = fs_user_open(fs, uid)) != 0) {
		fuse_reply_err(req, rc);
		return;
	}
	if (!(d = calloc(1, sizeof(*d)))) {
		fs_user_close(fs, uid);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	d->ino = ino;
	d->uid = uid;
	fi->fh = (uintptr_t)d;
	fi->cache_readdir = 0;
	if (fuse_reply_open(req, fi) != 0) {	/* interrupted: nobody will release it */
		free(d);
		fs_user_close(fs, uid);
	}
}

typedef struct list_ctx {
	tilefs *fs;
	dir_handle *d;
	const char *dir;
	bool hide;
} list_ctx;

static int add_entry(void *arg, const char *name, const tf_stat *st)
{
	list_ctx *l = arg;
	dir_handle *d = l->d;
	char rel[PATH_MAX];

	if (st->kind == TF_ENT_OTHER)
		return 0;	/* devices: see fs_node_lookup */
	if (l->hide && st->kind == TF_ENT_REG && tf_path_join(rel, sizeof(rel), l->dir, name) &&
	    tf_catalog_show(l->fs->catalog, rel) == TF_SHOW_HIDDEN)
		return 0;
	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 64;
		dir_entry *v = realloc(d->v, cap * sizeof(*v));
		if (!v)
			return 1;
		d->v = v;
		d->cap = cap;
	}
	if (!(d->v[d->n].name = strdup(name)))
		return 1;
	d->v[d->n++].st = *st;
	return 0;
}

static int add_view_entry(void *arg, const char *name, const tf_view_stat *vst)
{
	tf_stat st = { .kind = vst->dir ? TF_ENT_DIR : TF_ENT_REG };

	return add_entry(arg, name, &st);
}

/* The entries of directory node n: the source's, with an array's views
 * folder added when views are on; or a views folder's own. */
static tf_status list_entries(tilefs *fs, fs_node *n, list_ctx *l, bool plus)
{
	tf_stat dir = { .kind = TF_ENT_DIR };
	tf_error err;
	tf_status rc;

	if (fs_node_views(n))	/* nothing is decoded to list views */
		return tf_views_list(fs_node_views(n), fs_node_vrel(n), add_view_entry, l, NULL);
	if ((rc = tf_source_list(fs->src, l->dir, plus, add_entry, l, &err)) != TF_OK) {
		if (fs_errno(rc) == EIO)
			fs_log_failure(err.msg);
		return rc;
	}
	if (fs->settings->views && tf_catalog_is_array(fs->catalog, l->dir) && add_entry(l, TF_VIEWS_DIR, &dir))
		return TF_E_NOMEM;
	return TF_OK;
}

/* Readdirplus looks every entry up next: start reading their persisted
 * indexes now, so that those reads overlap instead of queueing (a cold ls -l
 * of 100 indexed files: 20-29 ms -> 16-21 ms, contrib/bench-index). */
static void prefetch_indexes(tilefs *fs, const char *dir, const dir_handle *d)
{
	char rel[PATH_MAX];

	for (size_t i = 0; i < d->n; i++)
		if (d->v[i].st.kind == TF_ENT_REG && tf_path_join(rel, sizeof(rel), dir, d->v[i].name))
			tf_catalog_prefetch(fs->catalog, rel, &d->v[i].st.v);
}

/* What d's listing holds in memory (the user's share, users.c). */
static size_t listing_bytes(const dir_handle *d)
{
	size_t b = d->cap * sizeof(*d->v);

	for (size_t i = 0; i < d->n; i++)
		b += strlen(d->v[i].name) + 1;
	return b;
}

static int list_dir(tilefs *fs, dir_handle *d, bool plus)
{
	fs_node *n;
	list_ctx l = { fs, d, NULL, fs->settings->hide_unmatched };
	tf_stat dot = { .kind = TF_ENT_DIR };
	tf_status rc;
	int e;

	if ((e = fs_user_may_list(fs, d->uid, d->bytes)) != 0)
		return e;
	if (!(n = fs_node_get(fs, d->ino)))
		return ESTALE;
	for (size_t i = 0; i < d->n; i++)
		free(d->v[i].name);
	d->n = 0;
	l.dir = fs_node_rel(n);
	/* "." and ".." first: the source does not list them. */
	if (add_entry(&l, ".", &dot) || add_entry(&l, "..", &dot))
		rc = TF_E_NOMEM;
	else
		rc = list_entries(fs, n, &l, plus);
	/* Entries carry full stats only when the source listed them with
	 * stats: a views folder's, and the folder itself, are looked up. */
	d->stats = plus && !fs_node_views(n);
	if (rc == TF_OK && d->stats)
		prefetch_indexes(fs, l.dir, d);
	fs_node_put(fs, n);
	d->listed = true;
	d->plus = plus;
	fs_user_listed(fs, d->uid, d->bytes, listing_bytes(d));
	d->bytes = listing_bytes(d);
	return fs_errno(rc);
}

/* One entry into buf at *len: a plain one, or with plus a looked-up one
 * (whose lookup count the kernel then holds).  False when it does not fit. */
static bool put_entry(fuse_req_t req, tilefs *fs, fs_node *dir, const dir_entry *de, bool plus,
		      const tf_stat *known, char *buf, size_t size, size_t *len, off_t next,
		      fuse_ino_t *held)
{
	struct fuse_entry_param e = { 0 };
	/* glibc's readdir skips entries whose inode number is 0. */
	struct stat st = { .st_ino = de->st.v.ino ? de->st.v.ino : fs_node_ino(dir),
			   .st_mode = fs_mode_type(de->st.kind) };
	size_t need;
	fs_node *n;

	if (!plus) {
		need = fuse_add_direntry(req, buf + *len, size - *len, de->name, &st, next);
	} else if (!strcmp(de->name, ".") || !strcmp(de->name, "..")) {
		e.attr = st;	/* ino 0: the kernel looks nothing up for them */
		need = fuse_add_direntry_plus(req, buf + *len, size - *len, de->name, &e, next);
	} else {
		if (fs_node_lookup(fs, dir, de->name, known, &n, &st) == 0)
			entry_of(fs, n, &st, &e);
		else
			e.attr = st;	/* gone or hidden since listed: ino 0, no lookup held */
		need = fuse_add_direntry_plus(req, buf + *len, size - *len, de->name, &e, next);
		if (need > size - *len && e.ino)
			fs_node_forget(fs, e.ino, 1);
	}
	if (need > size - *len)
		return false;
	*len += need;
	*held = e.ino;
	return true;
}

static void read_dir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi,
		     bool plus)
{
	tilefs *fs = fs_of(req);
	dir_handle *d = (dir_handle *)(uintptr_t)fi->fh;
	char *buf = malloc(size);
	/* Lookups held by the entries put, given back if the kernel never
	 * gets them (an interrupted request): an entry takes over 24 bytes. */
	fuse_ino_t *held = calloc(size / 24 + 1, sizeof(*held));
	size_t len = 0, n = 0;
	fs_node *dir;
	int rc = 0;

	if (!buf || !held) {
		free(buf);
		free(held);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if ((!d->listed || off == 0) && (rc = list_dir(fs, d, plus)) != 0) {
		free(buf);
		free(held);
		fuse_reply_err(req, rc);
		return;
	}
	dir = fs_node_get(fs, ino);
	for (size_t i = (size_t)off; dir && i < d->n; i++, n++)
		if (!put_entry(req, fs, dir, &d->v[i], plus,
			       d->stats && strcmp(d->v[i].name, TF_VIEWS_DIR) ? &d->v[i].st : NULL, buf, size,
			       &len, (off_t)i + 1, &held[n]))
			break;
	if (dir)
		fs_node_put(fs, dir);
	if (fuse_reply_buf(req, buf, len) != 0)
		for (size_t i = 0; i < n; i++)
			if (held[i])
				fs_node_forget(fs, held[i], 1);
	free(buf);
	free(held);
}

static void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	read_dir(req, ino, size, off, fi, false);
}

static void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	read_dir(req, ino, size, off, fi, true);
}

static void ll_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	dir_handle *d = (dir_handle *)(uintptr_t)fi->fh;
	tilefs *fs = fs_of(req);

	(void)ino;
	fs_user_listed(fs, d->uid, d->bytes, 0);
	fs_user_close(fs, d->uid);
	for (size_t i = 0; i < d->n; i++)
		free(d->v[i].name);
	free(d->v);
	free(d);
	fuse_reply_err(req, 0);
}

/* ---- files ---------------------------------------------------------------------------------- */

/* An open file: decoded (h) or passed through as stored (raw).  Open
 * handles are listed so that teardown frees those the kernel never
 * released (files still open at unmount). */
typedef struct handle {
	fs_node *node;		/* held open (fs_node_closed) */
	uid_t uid;		/* who opened it (fs_user_open) */
	tf_handle *h;
	tf_object *raw;
	tf_view *view;
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

/* Close h and free it (its node pin and open count go too). */
static void handle_free(tilefs *fs, handle *h)
{
	pthread_mutex_lock(&fs->handles_lock);
	*(h->prev ? &h->prev->next : &fs->handles) = h->next;
	if (h->next)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&fs->handles_lock);
	tf_handle_close(h->h);
	tf_object_close(h->raw);
	tf_view_close(h->view);
	if (h->h)
		fs_node_closed(fs, h->node);
	fs_node_put(fs, h->node);
	fs_user_close(fs, h->uid);
	free(h);
}

void fs_ll_free_handles(tilefs *fs)
{
	while (fs->handles)
		handle_free(fs, fs->handles);
}

static int open_decoded(tilefs *fs, fs_node *n, handle *h)
{
	tf_file *f;
	tf_error err;
	tf_status rc;
	int e = fs_node_open_index(fs, n, &f);

	if (e)
		return e;
	rc = tf_handle_open(f, &h->h, &err);
	tf_file_unref(f);
	if (rc == TF_OK)
		return 0;
	fs_node_closed(fs, n);
	if (rc != TF_E_STALE)
		fs_log(TF_LOG_ERROR, "%s", err.msg);
	return fs_errno(rc);
}

/* A view shows the array's state its node was looked up in: one that
 * changed since gives ESTALE (the kernel looks again and opens the new
 * state), so one open never mixes two states. */
static int open_view(tilefs *fs, fs_node *n, handle *h)
{
	tf_catalog_hold *hold;
	tf_views *now;
	tf_error err;
	bool same;

	if (tf_catalog_views(fs->catalog, fs_node_arr(n), fs->cache, &now, &hold, &err) != TF_OK) {
		fs_log(TF_LOG_ERROR, "%s", err.msg);
		return EIO;
	}
	same = now == fs_node_views(n);
	tf_catalog_views_put(fs->catalog, now, hold);
	if (!same)
		return ESTALE;
	if (tf_view_open(fs_node_views(n), fs_node_vrel(n), &h->view, &err) != TF_OK) {
		fs_log(TF_LOG_ERROR, "%s", err.msg);
		return EIO;
	}
	return 0;
}

static bool req_gone(void *ctx);

/* The kernel's attributes of n are stale: it asks again at the next stat
 * or read past the size it holds.  (Attributes only: no page, no inode
 * lock is touched, so this is safe inside a request on n.) */
static void inval_attr(tilefs *fs, fs_node *n)
{
	int e = fuse_lowlevel_notify_inval_inode(fs->se, fs_node_ino(n), -1, 0);

	if (e && e != -ENOENT)
		fs_log(TF_LOG_WARN, "%s: dropping the kernel's attributes: %s", fs_node_rel(n), strerror(-e));
}

/*
 * A view shows its true size from its open on: a CSV not yet formatted to
 * its end is formatted now (counted, indexed, not kept), the caller
 * waiting, and the kernel's attributes of the node, which said 0, are
 * dropped before the open is answered, so its fstat, and the page cache
 * it reads through, see the size.  A caller gone (killed) stops the pass
 * (EINTR); the next open goes on from where it stopped.  Sets *sized.
 */
static int size_view(fuse_req_t req, tilefs *fs, fs_node *n, handle *h, bool *sized)
{
	fs_thread *t = thread_of(fs);
	tf_cancel cancel = { req_gone, req };
	uint64_t size;
	tf_error err;
	tf_status rc;

	*sized = tf_view_size(h->view, &size);
	if (*sized) {
		if (fs_node_set_view_size(fs, n, size))
			inval_attr(fs, n);
		return 0;
	}
	if (!t)
		return ENOMEM;
	rc = tf_view_size_now(h->view, t->ws, &cancel, &size, sized, &err);
	if (rc == TF_E_INTR)
		return EINTR;
	if (rc != TF_OK) {
		fs_log_failure(err.msg);
		fs_node_set_error(fs, n, err.msg);
		return EIO;
	}
	if (*sized && fs_node_set_view_size(fs, n, size))
		inval_attr(fs, n);
	return 0;
}

/* A file shown as stored.  A failure is logged but for ESTALE (the kernel
 * looks the name up again) and the source's refusals. */
static int open_raw(tilefs *fs, fs_node *n, handle *h)
{
	tf_error err;
	tf_status rc = tf_object_open(fs->src, fs_node_rel(n), fs_node_version(n), &h->raw, &err);

	if (fs_errno(rc) == EIO)
		fs_log_failure(err.msg);
	return fs_errno(rc);
}

/* The caller's supplementary groups into *out (malloc'd; none if they
 * cannot be read: it then gets what its user and primary group get). */
static size_t caller_groups(fuse_req_t req, uint32_t **out)
{
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
 * so the driver asks again with the caller's own user and groups.  Root
 * reads everything, as the kernel lets it; other capabilities are not
 * seen from here.  Returns 0 or EACCES.
 */
static int check_caller(fuse_req_t req, tilefs *fs, fs_node *n)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	tf_perm p = TF_PERM_INIT;
	uint32_t *groups = NULL;
	size_t ngroups = 0;
	bool keyed, ok = true;

	if (fs_node_access(fs, n, &p, &keyed) && ctx->uid != 0) {
		if (keyed && ctx->uid != geteuid())
			ok = false;	/* plaintext: the key holder's */
		else if (tf_perm_needs_groups(&p, ctx->uid, ctx->gid))
			ngroups = caller_groups(req, &groups);
		ok = ok && tf_perm_allows(&p, ctx->uid, ctx->gid, groups, ngroups);
	}
	free(groups);
	tf_perm_clear(&p);
	return ok ? 0 : EACCES;
}

static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	tilefs *fs = fs_of(req);
	fs_node *n = fs_node_get(fs, ino);
	uid_t uid = fuse_req_ctx(req)->uid;
	handle *h = NULL;
	bool sized = false;
	int rc = 0;

	if (!n)
		rc = ESTALE;
	else if (fs_node_is_dir(n))
		rc = EISDIR;
	else if ((fi->flags & O_ACCMODE) != O_RDONLY)
		rc = EROFS;
	else if ((rc = check_caller(req, fs, n)) != 0)
		;	/* by what is known of n before opening it */
	else if ((rc = fs_user_open(fs, uid)) != 0)
		;	/* EMFILE: this user holds its share already */
	else if (!(h = calloc(1, sizeof(*h)))) {
		fs_user_close(fs, uid);
		rc = ENOMEM;
	} else if (fs_node_views(n)) {
		if ((rc = open_view(fs, n, h)) == 0)
			rc = size_view(req, fs, n, h, &sized);
	} else if (fs_node_is_decoded(n))
		rc = open_decoded(fs, n, h);
	else
		rc = open_raw(fs, n, h);
	if (h)
		h->uid = uid;	/* counted by fs_user_open: handle_free uncounts */
	/* A decoded file's index, built by the open, may say more (plaintext,
	 * a dep). */
	if (!rc && h->h && (rc = check_caller(req, fs, n))) {
		h->node = n;
		handle_link(fs, h);
		handle_free(fs, h);	/* puts n */
		n = NULL;
		h = NULL;
	}
	/* ESTALE: the source changed since the kernel looked it up; the
	 * kernel looks again and opens the new node. */
	if (rc) {
		if (h)	/* counted by fs_user_open */
			fs_user_close(fs, uid);
		if (h)
			tf_view_close(h->view);
		free(h);
		if (n)
			fs_node_put(fs, n);
		fuse_reply_err(req, rc);
		return;
	}
	h->node = n;	/* our pin passes to the handle */
	/* A node is one version: its cached pages are always good.  One that
	 * has shown a bad chunk is read without the page cache, so every
	 * intact byte stays readable at any offset beside the bad range. */
	/* -o direct_io: replies land straight in the reader's buffer, with no
	 * page cache to fill and copy out again (a cold cat of 256 MiB of zstd:
	 * 154 ms against 193; but mmap(MAP_SHARED) then fails, and warm
	 * re-reads each cost a round trip). */
	h->direct = h->h && (fs->direct_io || fs_node_failed(fs, n));
	/* A view is read through the page cache (mmap works) once its size
	 * is known, which size_view made so but for an endless CSV (more
	 * than 2^32 records): that one is read to its end as /proc files
	 * are, past the size 0 its attributes show. */
	if (h->view) {
		h->direct = !sized;
		tf_view_set_kept(h->view, !h->direct);
	}
	fi->direct_io = h->direct;
	fi->keep_cache = !h->direct;
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
static void reply_slices(fuse_req_t req, fs_thread *t)
{
	const tf_slices *s = &t->slices;
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

static void read_decoded(fuse_req_t req, tilefs *fs, handle *h, size_t size, off_t off, bool short_ok)
{
	fs_thread *t = thread_of(fs);
	/* Once replied to, the reader may close: the handle is freed by
	 * RELEASE on another thread.  Nothing of h is touched after the reply. */
	bool passed_on = !h->direct;
	tf_error err;

	if (!t) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (tf_handle_pin_prefix(h->h, fs->cache, t->ws, (uint64_t)off, size, &t->slices, &err) != TF_OK) {
		/* EIO whatever the cause: a size too large to hold is as much
		 * a damaged file as a bad checksum (tilefs(1), ERRORS). */
		fs_log_failure(err.msg);
		fs_node_set_error(fs, h->node, err.msg);
		/* The bytes before the bad unit are a short read, as a disk
		 * gives before a bad sector; EIO only when the first byte
		 * asked for is bad.  A page-cache fill gets EIO (see
		 * short_read_ok): the kernel then asks page by page. */
		if (!short_ok || !t->slices.bytes) {
			tf_handle_unpin(fs->cache, &t->slices, false);
			fuse_reply_err(req, EIO);
			return;
		}
	}
	reply_slices(req, t);
	tf_handle_unpin(fs->cache, &t->slices, passed_on);
}

static void read_raw(fuse_req_t req, tilefs *fs, handle *h, size_t size, off_t off)
{
	fs_thread *t = thread_of(fs);
	uint64_t fsize = tf_object_stat(h->raw)->v.size;
	tf_error err;

	if ((uint64_t)off >= fsize)
		size = 0;
	else if (size > fsize - (uint64_t)off)
		size = (size_t)(fsize - (uint64_t)off);
	if (!t || !grow_buf(t, size)) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (tf_object_read(h->raw, (uint64_t)off, t->buf, size, &err) != TF_OK) {
		fs_log_failure(err.msg);
		fuse_reply_err(req, EIO);
		return;
	}
	fuse_reply_buf(req, (const char *)t->buf, size);
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

static void read_view(fuse_req_t req, tilefs *fs, handle *h, size_t size, off_t off)
{
	fs_thread *t = thread_of(fs);
	tf_cancel cancel = { req_gone, req };
	tf_error err;
	tf_status rc;
	size_t got;

	if (!t || !grow_buf(t, size)) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = tf_view_read_cancellable(h->view, t->ws, (uint64_t)off, size, t->buf, &got, &cancel, &err);
	if (rc == TF_E_INTR) {
		fuse_reply_err(req, EINTR);
		return;
	}
	if (rc != TF_OK) {
		fs_log_failure(err.msg);
		fs_node_set_error(fs, h->node, err.msg);
		fuse_reply_err(req, EIO);
		return;
	}
	fuse_reply_buf(req, (const char *)t->buf, got);
}

static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	tilefs *fs = fs_of(req);
	handle *h = (handle *)(uintptr_t)fi->fh;

	(void)ino;
	if (h->h)
		read_decoded(req, fs, h, size, off, short_read_ok(h, fi));
	else if (h->view)
		read_view(req, fs, h, size, off);
	else
		read_raw(req, fs, h, size, off);
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

static const char *const file_attrs[] = {
	"pipeline", "datatype", "tiles", "chunks", "filtered_size", "error",
	"field", "fragment", "format_version", "filter", "codecs",
};

static char *fact_attr(tilefs *fs, fs_node *n, const char *name)
{
	tf_facts fx;
	char *s = NULL;

	fs_node_facts(fs, n, &fx);
	if (!strcmp(name, "field") && fx.field && asprintf(&s, "%s (%s)", fx.field, fx.role) < 0)
		s = NULL;
	if (!strcmp(name, "fragment") && fx.fragment)
		s = strdup(fx.fragment);
	if (!strcmp(name, "format_version") && fx.format_version &&
	    asprintf(&s, "%" PRIu32, fx.format_version) < 0)
		s = NULL;
	tf_facts_clear(&fx);
	return s;
}

static char *number(uint64_t v)
{
	char *s;

	return asprintf(&s, "%" PRIu64, v) < 0 ? NULL : s;
}

/* Text of attribute `name` (without prefix) of a decoded file; malloc'd or NULL. */
static char *file_attr(tilefs *fs, fs_node *n, const tf_file *f, const char *name)
{
	tf_file_info i;

	tf_file_get_info(f, &i);
	if (!strcmp(name, "pipeline"))
		return tf_file_pipeline_text(f);
	if (!strcmp(name, "filter"))	/* netCDF's _Filter */
		return tf_file_filter_attr(f);
	if (!strcmp(name, "codecs"))	/* netCDF's _Codecs */
		return tf_file_codecs_json(f);
	if (!strcmp(name, "error"))
		return fs_node_error(fs, n);
	if (!strcmp(name, "field") || !strcmp(name, "fragment") || !strcmp(name, "format_version"))
		return fact_attr(fs, n, name);
	if (!strcmp(name, "datatype"))
		return strdup(tf_datatype_name(i.type));
	if (!strcmp(name, "tiles"))
		return number(i.tiles);
	if (!strcmp(name, "chunks"))
		return number(i.chunks);
	if (!strcmp(name, "filtered_size"))
		return number(i.stored_bytes);
	return NULL;
}

/* The root's attributes (user.tilefs.cache, .index, .opens, .disk_cache):
 * the mount's statistics with the driver's counts (malloc'd or NULL). */
static char *root_attr(tilefs *fs, const char *name)
{
	tf_mount_counts c = { .max_user_opens = fs->users.max_opens, .indexing_ahead = fs->indexer != NULL };

	fs_nodes_stats(fs, &c.nodes, &c.indexes, &c.index_bytes, &c.handles);
	fs_users_stats(fs, &c.users, &c.refused);
	return tf_mount_stat_text(fs->mount, name, &c);
}

/* The index of a decoded node, for its attributes (NULL: none). */
static tf_file *attr_index(tilefs *fs, fs_node *n)
{
	tf_file *f = NULL;

	if (!fs_node_is_decoded(n) || fs_node_open_index(fs, n, &f) != 0)
		return NULL;
	fs_node_closed(fs, n);	/* not an open: only the reference is kept */
	return f;
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

/* A view's attributes (user.tilefs.shape, user.tilefs.dtype of .raw and
 * .npy files), as text. */
static char *view_attr(fs_node *n, const char *full)
{
	char buf[1024];
	size_t len;

	if (tf_views_getxattr(fs_node_views(n), fs_node_vrel(n), full, buf, sizeof(buf) - 1, &len, NULL) != TF_OK)
		return NULL;
	buf[len] = '\0';
	return strdup(buf);
}

static void ll_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	tilefs *fs = fs_of(req);
	fs_node *n;
	tf_file *f = NULL;
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
	if (fs_node_views(n))
		v = view_attr(n, name - strlen(XATTR_PREFIX));
	else if ((f = attr_index(fs, n)))
		v = file_attr(fs, n, f, name);
	else if (fs_node_is_decoded(n) && !strcmp(name, "error"))
		v = fs_node_error(fs, n);
	tf_file_unref(f);
	fs_node_put(fs, n);
	reply_attr_text(req, v, size);
}

static void ll_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	tilefs *fs = fs_of(req);
	char names[512];
	size_t len = 0;
	fs_node *n;
	tf_file *f;

	if (ino == FUSE_ROOT_ID) {
		char *dc = root_attr(fs, "disk_cache");	/* with cache_dir */
		len = (size_t)snprintf(names, sizeof(names), XATTR_PREFIX "cache%c" XATTR_PREFIX "index%c"
				       XATTR_PREFIX "opens", '\0', '\0') + 1;
		if (dc)
			len += (size_t)snprintf(names + len, sizeof(names) - len, XATTR_PREFIX "disk_cache") + 1;
		free(dc);
	} else if ((n = fs_node_get(fs, ino))) {
		if (fs_node_views(n) &&
		    tf_views_listxattr(fs_node_views(n), fs_node_vrel(n), names, sizeof(names), &len, NULL) != TF_OK)
			len = 0;
		if (!fs_node_views(n) && (f = attr_index(fs, n))) {
			for (size_t i = 0; i < sizeof(file_attrs) / sizeof(file_attrs[0]); i++) {
				char *v = file_attr(fs, n, f, file_attrs[i]);	/* only those with a value */
				if (v)
					len += (size_t)snprintf(names + len, sizeof(names) - len, XATTR_PREFIX "%s",
								file_attrs[i]) + 1;
				free(v);
			}
			tf_file_unref(f);
		}
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
	.opendir = ll_opendir,
	.readdir = ll_readdir,
	.readdirplus = ll_readdirplus,
	.releasedir = ll_releasedir,
	.open = ll_open,
	.read = ll_read,
	.release = ll_release,
	.statfs = ll_statfs,
	.getxattr = ll_getxattr,
	.listxattr = ll_listxattr,
};
