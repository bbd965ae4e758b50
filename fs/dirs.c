/*
 * dirs.c - open directories: a listing taken at the first read (the
 * entry's, tf_entry_list) and paged through by later reads; readdirplus
 * looks each name up as a lookup would.  Each listing's memory counts as
 * its user's (users.c).
 */
#include "tilefs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A directory as listed at its first read: later reads page through it. */
typedef struct dir_entry {
	char *name;
	tf_stat st;
	bool full;		/* st is a whole stat (tf_entry_list) */
} dir_entry;

typedef struct dir_handle {
	fuse_ino_t ino;
	uid_t uid;		/* who opened it (fs_user_open) */
	bool listed, plus;
	dir_entry *v;
	size_t n, cap;
	size_t bytes;		/* the listing's memory, counted as uid's */
} dir_handle;

void fs_ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
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

static int add_entry(void *arg, const char *name, const tf_stat *st, bool full)
{
	dir_handle *d = arg;

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
	d->v[d->n].st = *st;
	d->v[d->n++].full = full;
	return 0;
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
	tf_stat dot = { .kind = TF_ENT_DIR };
	tf_error err;
	tf_status rc;
	int e;

	if ((e = fs_user_may_list(fs, d->uid, d->bytes)) != 0)
		return e;
	if (!(n = fs_node_get(fs, d->ino)))
		return ESTALE;
	for (size_t i = 0; i < d->n; i++)
		free(d->v[i].name);
	d->n = 0;
	/* "." and ".." first: the source does not list them. */
	if (add_entry(d, ".", &dot, false) || add_entry(d, "..", &dot, false))
		rc = TF_E_NOMEM;
	else if ((rc = tf_entry_list(fs_node_entry(n), plus, add_entry, d, &err)) != TF_OK && fs_errno(rc) == EIO)
		fs_log_failure(err.msg);
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
			fs_entry_of(fs, n, &st, &e);
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
		if (!put_entry(req, fs, dir, &d->v[i], plus, d->v[i].full ? &d->v[i].st : NULL, buf, size,
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

void fs_ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	read_dir(req, ino, size, off, fi, false);
}

void fs_ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	read_dir(req, ino, size, off, fi, true);
}

void fs_ll_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
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
