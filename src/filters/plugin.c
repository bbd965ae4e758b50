/*
 * plugin.c - loading filter plugins from a plugin path (plugin.h).
 */
#include "config.h"

#include "plugin.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "callout.h"
#include "hdf5.h"

/* A tilefs plugin's class as pipelines see it: the plugin's own, but for
 * decode, which runs on the plugin's callout threads, on copies: a plugin
 * that never returns then holds no caller for ever (callout.h). */
typedef struct native {
	tf_filter_class cls;		/* cls.impl points here */
	const tf_filter_class *own;	/* the plugin's */
	tf_callout *callout;
} native;

#define NATIVE_THREADS 64	/* decodes in one tilefs plugin at once, at most */

typedef struct plugin {
	const tf_filter_class *cls;
	tf_hdf5_filter *hdf5;	/* the adapter of an HDF5 plugin, else NULL */
	native *native;		/* that of a tilefs plugin, else NULL */
	void *handle;		/* dlopen handle */
	char *file;
} plugin;

typedef struct plugin_dir {
	int fd;			/* open for reading, trusted (open_trusted_dir) */
	char *name;		/* as the path spells it, for messages */
} plugin_dir;

typedef struct candidate {	/* a file that may be loaded when a pipeline needs it */
	size_t dir;
	char *name;
} candidate;

struct tf_plugins {
	char *path;
	pthread_mutex_t lock;	/* over everything below: lookups load on demand */
	plugin_dir *dirs;
	size_t ndirs, dircap;
	candidate *cand;	/* in path order; cand[next...] not loaded yet */
	size_t ncand, candcap, next;
	plugin *v;		/* loaded, in load order */
	size_t n, cap;
	int *fds;		/* of every file dlopen'ed, open until the end (load_file) */
	size_t nfds, fdcap;
	char refused[TF_ERRMSG_MAX];	/* the first refusal, for messages */
	size_t nrefused;
	bool stopped;		/* tf_plugins_stop: no call into a plugin waits */
	tf_plugin_warn_fn warn;
	void *ctx;
};

/* What a tilefs plugin may call (plugin.h). */
static const tf_plugin_host host = {
	.abi = TF_PLUGIN_ABI,
	.err = tf_err,
	.stage_output = tf_stage_output,
	.buf_grow = tf_buf_grow,
	.buf_append = tf_buf_append,
	.parts_add = tf_parts_add,
};

static void vwarn(tf_plugins *pl, bool refusal, const char *fmt, va_list ap)
{
	char msg[TF_ERRMSG_MAX + PATH_MAX];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (refusal && pl->nrefused++ == 0) {	/* (a long one cut: messages are bounded anyway) */
		size_t n = strnlen(msg, sizeof(pl->refused) - 1);

		memcpy(pl->refused, msg, n);
		pl->refused[n] = '\0';
	}
	if (pl->warn)
		pl->warn(pl->ctx, msg);
}

/* A file that could not be used. */
static void warn(tf_plugins *pl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(tf_plugins *pl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarn(pl, false, fmt, ap);
	va_end(ap);
}

/* A place that is not trusted: also remembered for "no plugin provides". */
static void refuse(tf_plugins *pl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(tf_plugins *pl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarn(pl, true, fmt, ap);
	va_end(ap);
}

const char *tf_plugins_env_path(void)
{
	const char *p = getenv("TILEFS_PLUGIN_PATH");

	return p ? p : getenv("HDF5_PLUGIN_PATH");
}

/* ---- verifying what a file provides ------------------------------------------------- */

static bool valid_name(const char *s)
{
	if (!s || !isalpha((unsigned char)*s) || strlen(s) > 64)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.')
			return false;
	return true;
}

/* A tilefs plugin's class, checked against the built-ins and plugins so far. */
static tf_status check_native(const tf_plugins *pl, const tf_plugin_info *info, tf_error *err)
{
	const tf_filter_class *c = info ? info->cls : NULL;

	if (!info)
		return tf_err(err, TF_E_INVAL, "%s() returned NULL", TF_PLUGIN_ENTRY);
	if (info->abi != TF_PLUGIN_ABI)
		return tf_err(err, TF_E_INVAL, "built for plugin ABI %u, this tilefs has %u",
			      info->abi, TF_PLUGIN_ABI);
	if (!c || !valid_name(c->name) || !c->decode || c->layout > TF_OPTS_CD_VALUES ||
	    c->hdf5_id || c->id == TF_F_NONE || c->id == TF_F_NO_ID)
		return tf_err(err, TF_E_INVAL, "not a valid filter class (name, id 1-254, decode, layout)");
	if (tf_filter_by_id(c->id))
		return tf_err(err, TF_E_INVAL, "filter id %u is TileDB's %s: a plugin cannot replace it",
			      c->id, tf_filter_by_id(c->id)->name);
	if (tf_filter_by_name(c->name, strlen(c->name)) || !strncasecmp(c->name, "hdf5", 4) ||
	    !strncasecmp(c->name, "tiledb", 6))
		return tf_err(err, TF_E_INVAL, "name '%s' is taken by a built-in filter", c->name);
	for (size_t i = 0; i < pl->n; i++)
		if (!pl->v[i].cls->hdf5_id && (pl->v[i].cls->id == c->id ||
					       !strcasecmp(pl->v[i].cls->name, c->name)))
			return tf_err(err, TF_E_INVAL, "filter %u '%s' clashes with %u '%s' of %s", c->id,
				      c->name, pl->v[i].cls->id, pl->v[i].cls->name, pl->v[i].file);
	return TF_OK;
}

/* ---- a tilefs plugin's decode, on its callout ------------------------------------------- */

/* One decode: copies of the caller's input, outputs of its own, and a
 * stage without the caller's key, scratch or offsets (none is a plugin's). */
typedef struct native_call {
	const tf_filter_class *own;
	tf_filter_opts o;
	tf_stage st;
	tf_stream s;
	tf_buf md_out, data_out;
	uint8_t *in;			/* md, then data */
	uint8_t *fixed[2];		/* md_out's, data_out's memory when fixed */
	size_t md_n, data_n;
	tf_status rc;
	tf_error err;
} native_call;

static void native_run(void *job)
{
	native_call *k = job;

	k->rc = k->own->decode(&k->o, &k->st, &k->s, &k->err);
}

static void native_drop(void *job)
{
	native_call *k = job;

	tf_buf_free(&k->md_out);
	tf_buf_free(&k->data_out);
	free(k->fixed[0]), free(k->fixed[1]);
	free(k->in);
	free(k);
}

/* An output buffer like the caller's: its limit, or its fixed capacity. */
static bool like(const tf_buf *theirs, tf_buf *mine, uint8_t **fixed)
{
	if (!theirs->fixed) {
		tf_buf_init(mine, theirs->limit);
		return true;
	}
	if (!(*fixed = malloc(theirs->cap + 1)))
		return false;
	tf_buf_wrap(mine, *fixed, theirs->cap);
	return true;
}

static tf_status copy_out(const tf_buf *mine, tf_buf *theirs, tf_error *err)
{
	tf_status rc;

	theirs->len = 0;
	if ((rc = tf_buf_reserve(theirs, mine->len, err)) != TF_OK)
		return rc;
	memcpy(theirs->p, mine->p, mine->len);
	theirs->len = mine->len;
	return TF_OK;
}

/* Span v of the plugin's in the caller's memory: at the same place of its
 * input, or of its output (copied there already).  false: elsewhere. */
static bool back(const native_call *k, tf_span v, const tf_stream *s, tf_span *out)
{
	const struct { const uint8_t *mine, *theirs; size_t n; } map[] = {
		{ k->in, s->md.p, k->md_n }, { k->in + k->md_n, s->data.p, k->data_n },
		{ k->md_out.p, s->md_out->p, k->md_out.len }, { k->data_out.p, s->data_out->p, k->data_out.len },
	};

	*out = tf_span_of(NULL, 0);
	for (size_t i = 0; v.n && i < sizeof(map) / sizeof(map[0]); i++) {
		uintptr_t at = (uintptr_t)v.p, base = (uintptr_t)map[i].mine;

		if (map[i].mine && at >= base && v.n <= map[i].n && at - base <= map[i].n - v.n) {
			*out = tf_span_of(map[i].theirs + (at - base), v.n);
			return true;
		}
	}
	return !v.n;
}

static tf_status native_decode(const tf_filter_opts *o, const tf_stage *st, tf_stream *s, tf_error *err)
{
	const native *n = st->cls->impl;
	native_call *k = calloc(1, sizeof(*k));
	tf_span md, data;
	tf_status rc;

	if (!k)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	k->md_n = s->md.n;
	k->data_n = s->data.n;
	if (!(k->in = malloc(k->md_n + k->data_n + 1)) || !like(s->md_out, &k->md_out, &k->fixed[0]) ||
	    !like(s->data_out, &k->data_out, &k->fixed[1])) {
		native_drop(k);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	if (k->md_n)
		memcpy(k->in, s->md.p, k->md_n);
	if (k->data_n)
		memcpy(k->in + k->md_n, s->data.p, k->data_n);
	k->own = n->own;
	k->o = *o;
	k->st = *st;
	k->st.cls = n->own;
	k->st.key = NULL;
	k->st.scratch = NULL;
	k->st.offsets = NULL;
	k->s = (tf_stream){ tf_span_of(k->in, k->md_n), tf_span_of(k->in + k->md_n, k->data_n),
			    &k->md_out, &k->data_out };
	if ((rc = tf_callout_run(n->callout, native_run, native_drop, k, err)) != TF_OK)
		return rc;	/* (k is the callout's now) */
	if ((rc = k->rc) != TF_OK) {
		if (err)
			*err = k->err;
	} else if ((k->md_out.len && (rc = copy_out(&k->md_out, s->md_out, err)) != TF_OK) ||
		   (k->data_out.len && (rc = copy_out(&k->data_out, s->data_out, err)) != TF_OK)) {
		/* (rc says why) */
	} else if (!back(k, k->s.md, s, &md) || !back(k, k->s.data, s, &data)) {
		rc = tf_err(err, TF_E_CORRUPT, "the plugin left its output outside the buffers it was given");
	} else {
		s->md = md;
		s->data = data;
	}
	native_drop(k);
	return rc;
}

static tf_status native_new(const tf_filter_class *own, native **out, tf_error *err)
{
	native *n = calloc(1, sizeof(*n));
	tf_status rc;

	if (!n)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if ((rc = tf_callout_new(NATIVE_THREADS, &n->callout, err)) != TF_OK) {
		free(n);
		return rc;
	}
	n->own = own;
	n->cls = *own;
	n->cls.decode = native_decode;
	n->cls.impl = n;
	*out = n;
	return TF_OK;
}

/* false: a decode is still inside the plugin (abandoned, with its own
 * copies): its code must stay loaded. */
static bool native_free(native *n)
{
	bool idle;

	if (!n)
		return true;
	idle = tf_callout_free(n->callout);
	free(n);
	return idle;
}

/* ---- adopting a loaded file ------------------------------------------------------------- */

/* Which kind of plugin `h` is, and its class; err says why it is refused. */
static tf_status adopt(tf_plugins *pl, void *h, plugin *p, tf_error *err)
{
	tf_plugin_entry_fn entry = (tf_plugin_entry_fn)dlsym(h, TF_PLUGIN_ENTRY);
	tf_h5pl_type_fn type = (tf_h5pl_type_fn)dlsym(h, "H5PLget_plugin_type");
	tf_h5pl_info_fn info = (tf_h5pl_info_fn)dlsym(h, "H5PLget_plugin_info");
	tf_status rc;

	if (entry) {
		const tf_plugin_info *pi = entry(&host);
		if ((rc = check_native(pl, pi, err)) == TF_OK && (rc = native_new(pi->cls, &p->native, err)) == TF_OK)
			p->cls = &p->native->cls;
		return rc;
	}
	if (!type || !info)
		return tf_err(err, TF_E_INVAL, "neither a tilefs filter plugin (%s) nor an HDF5 one "
			      "(H5PLget_plugin_type, H5PLget_plugin_info)", TF_PLUGIN_ENTRY);
	if ((rc = tf_hdf5_filter_new(type, info, &p->hdf5, err)) != TF_OK)
		return rc;
	p->cls = tf_hdf5_filter_class(p->hdf5);
	for (size_t i = 0; i < pl->n && rc == TF_OK; i++)
		if (pl->v[i].cls->hdf5_id == p->cls->hdf5_id)
			rc = tf_err(err, TF_E_INVAL, "HDF5 filter %u is provided by %s already",
				    p->cls->hdf5_id, pl->v[i].file);
	if (rc != TF_OK)
		tf_hdf5_filter_free(p->hdf5);
	return rc;
}

/* ---- trust: who could have put there what we would run ---------------------------- */

#define MAX_HOPS 40	/* symlinks followed in one directory's path (as the kernel) */

/* NULL if st is owned by root or by us and writable by no one else, else
 * why not (in why, after `what`).  sticky_ok: others may write it if its
 * sticky bit keeps them from renaming or removing what is not theirs (/tmp
 * above a plugin directory; never the plugin directory itself). */
static const char *distrust(const struct stat *st, bool sticky_ok, const char *what, char *why, size_t n)
{
	uid_t me = geteuid();

	if (st->st_uid != 0 && st->st_uid != me)
		snprintf(why, n, "%s is owned by uid %u (not root or uid %u)", what, (unsigned)st->st_uid,
			 (unsigned)me);
	else if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(sticky_ok && (st->st_mode & S_ISVTX)))
		snprintf(why, n, "%s is writable by %s (mode %04o)", what,
			 st->st_mode & S_IWOTH ? "others" : "its group", (unsigned)(st->st_mode & 07777));
	else
		return NULL;
	return why;
}

/* The next component of *p (a '/'-separated path), NUL-terminated in
 * place; *p moves past it.  *last: nothing but slashes follows. */
static char *next_component(char **p, bool *last)
{
	char *c = *p + strspn(*p, "/"), *end = c + strcspn(c, "/");

	*p = *end ? end + 1 : end;
	*end = '\0';
	*last = (*p)[strspn(*p, "/")] == '\0';
	return c;
}

/*
 * Open the directory `dir` for reading if only root and we could have
 * chosen what is in it: every directory on the way there owned by root or
 * us and writable by no one else (one above it may be sticky), every
 * symlink followed owned by root or us.  Each step is opened O_NOFOLLOW
 * beneath the one before and checked with fstat, so what is checked is
 * what is used.  -1 otherwise, with why set; *refused tells distrust from
 * a directory that could not be opened at all.
 */
static int open_trusted_dir(const char *dir, bool *refused, char *why, size_t n)
{
	char todo[2 * PATH_MAX + 2], at[PATH_MAX], cwd[PATH_MAX];
	char *p = todo;
	int fd = -1, next, hops = 0, e = 0;
	struct stat st;
	bool last;

	*refused = false;
	if (dir[0] != '/' && !getcwd(cwd, sizeof(cwd)))
		goto sys;
	if (snprintf(todo, sizeof(todo), "%s/%s", dir[0] == '/' ? "" : cwd, dir) >= (int)sizeof(todo)) {
		errno = ENAMETOOLONG;
		goto sys;
	}
	strcpy(at, "/");	/* where fd is, for messages */
	if ((fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 || fstat(fd, &st) != 0)
		goto sys;
	last = p[strspn(p, "/")] == '\0';
	/* fd: a directory, st its stat, checked before going further. */
	while (!distrust(&st, !last, at, why, n)) {
		char *c;

		if (last) {
			if ((next = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
				goto sys;
			close(fd);
			return next;
		}
		c = next_component(&p, &last);
		if (!strcmp(c, "."))
			continue;
		if ((next = openat(fd, c, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0)
			goto sys;
		e = fstat(next, &st) != 0 ? errno : !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode) ? ENOTDIR : 0;
		if (e) {
			close(next);
			goto sys;
		}
		if (S_ISDIR(st.st_mode)) {
			close(fd);
			fd = next;
			if (!strcmp(c, "..")) {
				char *slash = strrchr(at, '/');
				slash[slash == at] = '\0';	/* "/a/b" -> "/a", "/a" -> "/" */
			} else if (strlen(at) + 1 + strlen(c) < sizeof(at)) {
				if (at[1])
					strcat(at, "/");
				strcat(at, c);
			}
			continue;
		}
		/* A symlink: whoever made it chose where we go. */
		if (st.st_uid != 0 && st.st_uid != geteuid()) {
			snprintf(why, n, "symlink %s%s%s is owned by uid %u (not root or uid %u)", at,
				 at[1] ? "/" : "", c, (unsigned)st.st_uid, (unsigned)geteuid());
			close(next);
			break;
		}
		{
			char link[PATH_MAX], rest[sizeof(todo)];
			ssize_t len = readlinkat(next, "", link, sizeof(link) - 1);

			e = errno;
			close(next);
			if (len < 0)
				goto sys;
			link[len] = '\0';
			snprintf(rest, sizeof(rest), "%s", p);
			e = ++hops > MAX_HOPS ? ELOOP : ENAMETOOLONG;
			if (hops > MAX_HOPS || snprintf(todo, sizeof(todo), "%s/%s", link, rest) >= (int)sizeof(todo))
				goto sys;
			e = 0;
		}
		p = todo;
		last = p[strspn(p, "/")] == '\0';
		if (todo[0] == '/') {	/* on from /, else from the link's directory */
			close(fd);
			strcpy(at, "/");
			if ((fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
				goto sys;
		}
		if (fstat(fd, &st) != 0)
			goto sys;
	}
	*refused = true;
	close(fd);
	return -1;
sys:
	snprintf(why, n, "%s", strerror(e ? e : errno));
	if (fd >= 0)
		close(fd);
	return -1;
}

/* ---- loading ---------------------------------------------------------------------- */

static bool grow(void **v, size_t *cap, size_t n, size_t size)
{
	size_t c = *cap ? 2 * *cap : 8;
	void *nv;

	if (n < *cap)
		return true;
	if (!(nv = realloc(*v, c * size)))
		return false;
	*v = nv;
	*cap = c;
	return true;
}

static void stop_plugin(const plugin *p)
{
	if (p->hdf5)
		tf_hdf5_filter_stop(p->hdf5);
	else
		tf_callout_stop(p->native->callout);
}

/* dlerror() names the file it was given: /proc/self/fd/N, which means
 * nothing to the reader of a warning that names the file already. */
static const char *dl_why(const char *opened)
{
	const char *msg = dlerror();
	size_t n = strlen(opened);

	if (!msg)
		return "unknown dlopen error";
	return !strncmp(msg, opened, n) && msg[n] == ':' ? msg + n + 1 + (msg[n + 1] == ' ') : msg;
}

/*
 * Load `name` of the directory open at dirfd (written `dir` in the path):
 * opened O_NOFOLLOW and checked with fstat (a regular file only root or
 * we could have written), then dlopen'ed through /proc/self/fd, so the
 * file checked is the file loaded.  Its descriptor stays open as long as
 * pl: glibc knows a loaded object by the name it was opened with, and a
 * later /proc/self/fd/N must not name an object still loaded.
 */
static tf_status load_file(tf_plugins *pl, int dirfd, const char *dir, const char *name, tf_error *err)
{
	char file[PATH_MAX], why[TF_ERRMSG_MAX + PATH_MAX], proc[32];
	plugin p = { 0 };
	tf_error bad;
	struct stat st;
	void *h;
	int fd;

	if (!grow((void **)&pl->v, &pl->cap, pl->n, sizeof(*pl->v)) ||
	    !grow((void **)&pl->fds, &pl->fdcap, pl->nfds, sizeof(*pl->fds)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	snprintf(file, sizeof(file), "%s/%s", dir, name);
	if ((fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0) {
		refuse(pl, "plugin %s refused: %s", file, errno == ELOOP ? "it is a symbolic link" : strerror(errno));
		return TF_OK;
	}
	if (fstat(fd, &st) != 0)
		snprintf(why, sizeof(why), "%s", strerror(errno));
	else if (!S_ISREG(st.st_mode))
		snprintf(why, sizeof(why), "not a regular file");
	else if (!distrust(&st, false, "it", why, sizeof(why)))
		why[0] = '\0';
	if (why[0]) {
		refuse(pl, "plugin %s refused: %s", file, why);
		close(fd);
		return TF_OK;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	pl->fds[pl->nfds++] = fd;
	/* RTLD_NOW: a missing symbol is found here, not in the middle of a read. */
	if (!(h = dlopen(proc, RTLD_NOW | RTLD_LOCAL))) {
		warn(pl, "plugin %s skipped: %s", file, dl_why(proc));
		return TF_OK;
	}
	if (adopt(pl, h, &p, &bad) != TF_OK) {
		warn(pl, "plugin %s skipped: %s", file, bad.msg);
		dlclose(h);
		return TF_OK;
	}
	if (!(p.file = strdup(file))) {
		tf_hdf5_filter_free(p.hdf5);	/* (nothing ran on their threads) */
		native_free(p.native);
		dlclose(h);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	p.handle = h;
	pl->v[pl->n++] = p;
	if (pl->stopped)
		stop_plugin(&p);
	return TF_OK;
}

static bool so_name(const char *name)
{
	size_t n = strlen(name);

	return n > 3 && !strcmp(name + n - 3, ".so");
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of dirfd's entries named *.so, sorted (bytewise). */
static tf_status list_so(int dirfd, char ***names, size_t *n, tf_error *err)
{
	int dup_fd = dup(dirfd);
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	size_t cap = 0;
	struct dirent *e;

	*names = NULL;
	*n = 0;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return tf_err(err, TF_E_IO, "%s", strerror(errno));
	}
	while ((e = readdir(d)))
		if (so_name(e->d_name) && (!grow((void **)names, &cap, *n, sizeof(**names)) ||
					   !((*names)[(*n)++] = strdup(e->d_name)))) {
			closedir(d);
			return tf_err(err, TF_E_NOMEM, "out of memory");
		}
	closedir(d);
	if (*n)
		qsort(*names, *n, sizeof(**names), by_name);
	return TF_OK;
}

/* Trust dir and note its candidates: *.so regular files we could load,
 * in name order.  Nothing is loaded. */
static tf_status add_dir(tf_plugins *pl, const char *dir, tf_error *err)
{
	char why[TF_ERRMSG_MAX + PATH_MAX];
	char **names = NULL;
	size_t n = 0;
	tf_error bad;
	tf_status rc = TF_OK;
	bool refused;
	int fd = open_trusted_dir(dir, &refused, why, sizeof(why));
	plugin_dir *d;

	if (fd < 0) {
		if (refused)
			refuse(pl, "plugin directory %s refused: %s", dir, why);
		else
			warn(pl, "plugin directory %s skipped: %s", dir, why);
		return TF_OK;
	}
	if (!grow((void **)&pl->dirs, &pl->dircap, pl->ndirs, sizeof(*pl->dirs))) {
		close(fd);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	d = &pl->dirs[pl->ndirs];
	if (!(d->name = strdup(dir))) {
		close(fd);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	d->fd = fd;
	pl->ndirs++;
	if (list_so(fd, &names, &n, &bad) != TF_OK) {
		if (bad.code == TF_E_NOMEM)
			rc = tf_err(err, TF_E_NOMEM, "out of memory");
		else
			warn(pl, "plugin directory %s skipped: %s", dir, bad.msg);
	}
	for (size_t i = 0; i < n; i++) {
		struct stat st;

		/* What is no file (a directory named x.so...) is no plugin: no word.
		 * load_file checks again what it opens. */
		if (rc != TF_OK || fstatat(fd, names[i], &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) {
			free(names[i]);
			continue;
		}
		if (S_ISLNK(st.st_mode))
			refuse(pl, "plugin %s/%s refused: it is a symbolic link", dir, names[i]);
		else if (distrust(&st, false, "it", why, sizeof(why)))
			refuse(pl, "plugin %s/%s refused: %s", dir, names[i], why);
		else if (!grow((void **)&pl->cand, &pl->candcap, pl->ncand, sizeof(*pl->cand)))
			rc = tf_err(err, TF_E_NOMEM, "out of memory");
		else {
			pl->cand[pl->ncand++] = (candidate){ pl->ndirs - 1, names[i] };
			continue;
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

tf_status tf_plugins_load(const char *path, tf_plugin_warn_fn warn_fn, void *ctx, tf_plugins **out,
			  tf_error *err)
{
	tf_plugins *pl = calloc(1, sizeof(*pl));
	char *dirs = strdup(path ? path : ""), *save = NULL;
	tf_status rc = TF_OK;

	if (!pl || !dirs || !(pl->path = strdup(dirs)) || pthread_mutex_init(&pl->lock, NULL) != 0) {
		if (pl && pl->path) {
			free(pl->path);
			pl->path = NULL;
		}
		free(dirs);
		free(pl);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	pl->warn = warn_fn;
	pl->ctx = ctx;
	for (char *d = strtok_r(dirs, ":", &save); d && rc == TF_OK; d = strtok_r(NULL, ":", &save))
		rc = add_dir(pl, d, err);
	free(dirs);
	if (rc != TF_OK) {
		tf_plugins_free(pl);
		return rc;
	}
	*out = pl;
	return TF_OK;
}

void tf_plugins_free(tf_plugins *pl)
{
	if (!pl)
		return;
	for (size_t i = 0; i < pl->n; i++) {
		plugin *p = &pl->v[i];

		/* A call abandoned inside the plugin (tf_plugins_stop) may
		 * still return into its code: keep that loaded. */
		bool idle = p->hdf5 ? tf_hdf5_filter_free(p->hdf5) : native_free(p->native);

		if (idle)
			dlclose(p->handle);
		free(p->file);
	}
	for (size_t i = 0; i < pl->nfds; i++)	/* after every dlclose */
		close(pl->fds[i]);
	for (size_t i = 0; i < pl->ncand; i++)
		free(pl->cand[i].name);
	for (size_t i = 0; i < pl->ndirs; i++) {
		close(pl->dirs[i].fd);
		free(pl->dirs[i].name);
	}
	pthread_mutex_destroy(&pl->lock);
	free(pl->fds), free(pl->cand), free(pl->dirs), free(pl->v);
	free(pl->path);
	free(pl);
}

/* ---- lookups: loading on demand ------------------------------------------------------- */

typedef struct wanted {
	enum { BY_NAME, BY_ID, BY_HDF5_ID } by;
	const char *name;
	size_t len;
	unsigned id;
} wanted;

static bool provides(const tf_filter_class *c, const wanted *w)
{
	switch (w->by) {
	case BY_NAME:
		return !c->hdf5_id && strlen(c->name) == w->len && !strncasecmp(c->name, w->name, w->len);
	case BY_ID:
		return !c->hdf5_id && c->id == w->id;
	default:
		return c->hdf5_id && c->hdf5_id == w->id;
	}
}

/*
 * The class providing w: a loaded plugin's, else the first of the files not
 * loaded yet, in path order, that provides it (what a plugin provides is
 * only known once it is loaded: an HDF5 plugin says its id when called).
 * Each file is loaded once at most, and only when a pipeline names a filter
 * no file before it provides: so the answer is always the first provider in
 * path order, and a plugin no pipeline needs never runs.  Loading changes
 * no answer, hence the const.
 */
static const tf_filter_class *find(const tf_plugins *cpl, const wanted *w)
{
	tf_plugins *pl = (tf_plugins *)cpl;
	const tf_filter_class *c = NULL;
	tf_error err;

	if (!pl)
		return NULL;
	pthread_mutex_lock(&pl->lock);
	for (size_t i = 0; i < pl->n && !c; i++)
		if (provides(pl->v[i].cls, w))
			c = pl->v[i].cls;
	while (!c && pl->next < pl->ncand) {
		const candidate *k = &pl->cand[pl->next];
		size_t before = pl->n;

		if (load_file(pl, pl->dirs[k->dir].fd, pl->dirs[k->dir].name, k->name, &err) != TF_OK) {
			warn(pl, "plugin %s/%s not loaded: %s", pl->dirs[k->dir].name, k->name, err.msg);
			break;	/* out of memory: tried again by the next lookup */
		}
		pl->next++;
		if (pl->n > before && provides(pl->v[before].cls, w))
			c = pl->v[before].cls;
	}
	pthread_mutex_unlock(&pl->lock);
	return c;
}

void tf_plugins_stop(tf_plugins *pl)
{
	if (!pl)
		return;
	pthread_mutex_lock(&pl->lock);
	pl->stopped = true;
	for (size_t i = 0; i < pl->n; i++)
		stop_plugin(&pl->v[i]);
	pthread_mutex_unlock(&pl->lock);
}

const char *tf_plugins_path(const tf_plugins *pl)
{
	return pl ? pl->path : "";
}

const char *tf_plugins_refused(const tf_plugins *pl)
{
	return pl && pl->nrefused ? pl->refused : NULL;
}

const tf_filter_class *tf_plugins_by_name(const tf_plugins *pl, const char *name, size_t len)
{
	wanted w = { .by = BY_NAME, .name = name, .len = len };

	return find(pl, &w);
}

const tf_filter_class *tf_plugins_by_id(const tf_plugins *pl, unsigned id)
{
	wanted w = { .by = BY_ID, .id = id };

	return find(pl, &w);
}

const tf_filter_class *tf_plugins_by_hdf5_id(const tf_plugins *pl, unsigned id)
{
	wanted w = { .by = BY_HDF5_ID, .id = id };

	return find(pl, &w);
}

size_t tf_plugins_count(const tf_plugins *cpl)
{
	tf_plugins *pl = (tf_plugins *)cpl;
	size_t n;

	if (!pl)
		return 0;
	pthread_mutex_lock(&pl->lock);
	n = pl->n;
	pthread_mutex_unlock(&pl->lock);
	return n;
}

const tf_filter_class *tf_plugins_class(const tf_plugins *cpl, size_t i)
{
	tf_plugins *pl = (tf_plugins *)cpl;
	const tf_filter_class *c = NULL;

	if (!pl)
		return NULL;
	pthread_mutex_lock(&pl->lock);
	if (i < pl->n)
		c = pl->v[i].cls;
	pthread_mutex_unlock(&pl->lock);
	return c;
}

const char *tf_plugins_file(const tf_plugins *cpl, size_t i)
{
	tf_plugins *pl = (tf_plugins *)cpl;
	const char *f = NULL;

	if (!pl)
		return NULL;
	pthread_mutex_lock(&pl->lock);
	if (i < pl->n)
		f = pl->v[i].file;
	pthread_mutex_unlock(&pl->lock);
	return f;
}
