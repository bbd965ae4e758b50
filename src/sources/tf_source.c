/*
 * tf_source.c - the source interface: path checks, then the kind's operation.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sources/source_impl.h"
#include "util/tf_clock.h"

bool tf_version_equal(const tf_version *a, const tf_version *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns &&
	       a->ctime_ns == b->ctime_ns && !strcmp(a->etag, b->etag);
}

bool tf_path_join(char *out, size_t n, const char *dir, const char *name)
{
	int len = strcmp(dir, ".") ? snprintf(out, n, "%s/%s", dir, name) : snprintf(out, n, "%s", name);

	return len >= 0 && (size_t)len < n;
}

/* "." or names joined by single '/', none of them "." or "..": what every
 * implementation may assume (FUSE hands us single components, tiletool and
 * the configuration build the rest). */
static tf_status check_rel(const char *rel, tf_error *err)
{
	const char *c = rel;

	if (!strcmp(rel, "."))
		return TF_OK;
	for (;;) {
		size_t n = strcspn(c, "/");
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return tf_err(err, TF_E_INVAL, "'%s': not a relative path inside the source", rel);
		if (!c[n])
			return TF_OK;
		c += n + 1;
	}
}

void tf_source_free(tf_source *s)
{
	if (s)
		s->ops->free(s);
}

void tf_source_set_hooks(tf_source *s, const tf_source_hooks *h)
{
	s->hooks = *h;
}

void tf_source_call(const tf_source *s, tf_call *out)
{
	if (s->hooks.call && s->hooks.call(s->hooks.ctx, out))
		return;
	*out = (tf_call){ .start_ns = tf_now_ns() };
}

void tf_source_warn(const tf_source *s, const char *fmt, ...)
{
	char msg[TF_ERRMSG_MAX];
	va_list ap;

	if (!s->hooks.warn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	s->hooks.warn(s->hooks.ctx, msg);
}

bool tf_source_bucket_key(const tf_source *s, const char *rel, char *buf, size_t n)
{
	return s->ops->bucket_key && check_rel(rel, NULL) == TF_OK && s->ops->bucket_key(s, rel, buf, n);
}

/* A reserved object's name: components of [A-Za-z0-9._-], none "." or "..". */
static tf_status check_reserved(const tf_source *s, const char *name, tf_error *err)
{
	size_t n = strlen(name);

	if (!s->ops->get_reserved)
		return tf_err(err, TF_E_INVAL, "%s: a %s source has no reserved prefix", s->name, s->ops->kind);
	if (!n || n > 255 || strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/") != n ||
	    check_rel(name, NULL) != TF_OK)
		return tf_err(err, TF_E_INVAL, "'%.100s': not a reserved object's name", name);
	return TF_OK;
}

tf_status tf_source_get_reserved(tf_source *s, const char *name, size_t max, char **out, size_t *n,
				 tf_error *err)
{
	tf_status rc = check_reserved(s, name, err);

	*out = NULL;
	*n = 0;
	return rc != TF_OK ? rc : s->ops->get_reserved(s, name, max, out, n, err);
}

tf_status tf_source_put_reserved(tf_source *s, const char *name, const void *p, size_t n, tf_error *err)
{
	tf_status rc = check_reserved(s, name, err);

	if (rc == TF_OK && !s->ops->put_reserved)
		rc = tf_err(err, TF_E_INVAL, "%s: cannot write to a %s source", s->name, s->ops->kind);
	return rc != TF_OK ? rc : s->ops->put_reserved(s, name, p, n, err);
}

const char *tf_source_kind(const tf_source *s) { return s->ops->kind; }
const char *tf_source_name(const tf_source *s) { return s->name; }
int tf_source_local_fd(const tf_source *s) { return s->local_fd; }
bool tf_source_has_modes(const tf_source *s) { return s->local_fd >= 0; }
unsigned tf_source_in_flight(const tf_source *s) { return s->in_flight; }

void tf_source_fd_stats(tf_source *s, tf_source_fds *out)
{
	*out = (tf_source_fds){ 0 };
	if (s->ops->fd_stats)
		s->ops->fd_stats(s, out);
}

void tf_source_set_cache(tf_source *s, struct tf_cache *c)
{
	if (s->ops->set_cache)
		s->ops->set_cache(s, c);
}

void tf_source_stored_stats(tf_source *s, tf_source_stored *out)
{
	*out = (tf_source_stored){ 0 };
	if (s->ops->stored_stats)
		s->ops->stored_stats(s, out);
}

bool tf_source_disk_cache_text(tf_source *s, char *buf, size_t n)
{
	return s->ops->disk_cache_text && s->ops->disk_cache_text(s, buf, n);
}

void tf_source_set_max_fds(tf_source *s, unsigned max)
{
	if (s->ops->set_max_fds)
		s->ops->set_max_fds(s, max);
}

bool tf_source_object_id(const tf_source *s, const char *rel, char *buf, size_t n)
{
	return s->ops->object_id && check_rel(rel, NULL) == TF_OK && s->ops->object_id(s, rel, buf, n);
}

tf_status tf_source_stat(tf_source *s, const char *rel, tf_stat *st, tf_error *err)
{
	tf_status rc = check_rel(rel, err);

	return rc == TF_OK ? s->ops->stat(s, rel, st, err) : rc;
}

tf_status tf_source_list(tf_source *s, const char *rel, bool want_stat, tf_list_fn fn, void *ctx,
			 tf_error *err)
{
	tf_status rc = check_rel(rel, err);

	return rc == TF_OK ? s->ops->list(s, rel, want_stat, fn, ctx, err) : rc;
}

tf_status tf_source_readlink(tf_source *s, const char *rel, char *buf, size_t size, tf_error *err)
{
	tf_status rc = check_rel(rel, err);

	if (rc == TF_OK && !s->ops->readlink)
		return tf_err(err, TF_E_INVAL, "%s: a %s source has no symlinks", rel, s->ops->kind);
	return rc == TF_OK ? s->ops->readlink(s, rel, buf, size, err) : rc;
}

tf_status tf_source_statfs(tf_source *s, tf_source_fsstat *out, tf_error *err)
{
	return s->ops->statfs(s, out, err);
}

tf_status tf_object_open(tf_source *s, const char *rel, const tf_version *expect, tf_object **out,
			 tf_error *err)
{
	tf_status rc = check_rel(rel, err);

	*out = NULL;
	if (rc == TF_OK && (rc = s->ops->open(s, rel, expect, out, err)) == TF_OK) {
		atomic_init(&(*out)->refs, 1);
		if (!(*out)->io_size)
			(*out)->io_size = (uint64_t)1 << 20;
	}
	return rc;
}

tf_object *tf_object_ref(tf_object *o)
{
	atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
	return o;
}

void tf_object_close(tf_object *o)
{
	if (o && atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) == 1)
		o->ops->close(o);
}

uint64_t tf_object_io_size(const tf_object *o)
{
	return o->io_size;
}

const tf_stat *tf_object_stat(const tf_object *o) { return &o->st; }
const char *tf_object_name(const tf_object *o) { return o->name; }

tf_status tf_object_read(tf_object *o, uint64_t off, void *dst, size_t len, tf_error *err)
{
	if (off > o->st.v.size || len > o->st.v.size - off)
		return tf_err(err, TF_E_STALE, "%s: %zu bytes at %llu: past the end of its %llu bytes",
			      o->name, len, (unsigned long long)off, (unsigned long long)o->st.v.size);
	return len ? o->ops->read(o, off, dst, len, err) : TF_OK;
}

void tf_object_prefetch(tf_object *o, uint64_t off, uint64_t len)
{
	if (o->ops->prefetch && off < o->st.v.size)
		o->ops->prefetch(o, off, len < o->st.v.size - off ? len : o->st.v.size - off);
}

tf_status tf_object_check(tf_object *o, tf_error *err)
{
	return o->ops->check ? o->ops->check(o, err) : TF_OK;
}

bool tf_object_advise(tf_object *o, tf_access how)
{
	return o->ops->advise ? o->ops->advise(o, how) : false;
}
