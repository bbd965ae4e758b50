/*
 * source_s3_names.c - the words every file of the S3 source shares: the
 * bound of a request (its deadline, and whether its caller is gone), an
 * object's key, the names that can be no file, and the stat of a
 * directory and of an object a HEAD answered.  Beneath the listings, the
 * listing cache, the reads and the source's operations, which all use it;
 * it uses none of them.
 */
#include "config.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sources/source_s3_int.h"

/* Once the source has somewhere to say it (its hooks set), where its
 * credentials come from: once, never a secret; but not keys the caller's
 * own environment gave, which the caller knows (and tiletool's output
 * stays free of a line on every run). */
static void tell_origin(s3_source *s)
{
	const char *o;

	if (!s->base.hooks.warn || atomic_load(&s->told) || atomic_exchange(&s->told, true))
		return;
	if ((o = s3_client_auth_origin(s->client)) && strncmp(o, "the environment", 15))
		tf_source_warn(&s->base, "%s: credentials from %s", s3_client_where(s->client), o);
	if (s->early)
		tf_source_warn(&s->base, "%s", s->early);
}

/* The bound of the work done now for the calling thread's request. */
s3_bound s3_bound_of(s3_source *s)
{
	tf_call c;

	tell_origin(s);

	tf_source_call(&s->base, &c);
	return (s3_bound){ c.start_ns + s->deadline_ns, c.gone, c.arg };
}

/* Work nobody waits for (read-ahead): bounded from now, never cancelled. */
s3_bound s3_bound_now(const s3_source *s)
{
	return (s3_bound){ tf_now_ns() + s->deadline_ns, NULL, NULL };
}

/* The key of file rel, or the listing prefix of directory rel. */
char *s3_key_of(const s3_source *s, const char *rel, bool dir)
{
	char *k = NULL;

	if (!strcmp(rel, "."))
		return strdup(s->prefix);
	if (asprintf(&k, "%s%s%s", s->prefix, rel, dir ? "/" : "") < 0)
		return NULL;
	return k;
}

/* Why n (a name within its directory) can be no file name, or NULL. */
const char *s3_bad_name(const char *n)
{
	return !*n ? "an empty name" : !strcmp(n, ".") || !strcmp(n, "..") ? "'.' or '..'"
	     : strchr(n, '/') ? "a '/' in a name" : strlen(n) > 255 ? "a name over 255 bytes" : NULL;
}

tf_stat s3_dir_stat(const s3_source *s)
{
	return (tf_stat){ .kind = TF_ENT_DIR, .mode = 0555, .uid = s->uid, .gid = s->gid, .nlink = 2 };
}

static tf_stat file_stat(const s3_source *s, const s3_entry *e)
{
	tf_stat st = { .kind = TF_ENT_REG, .mode = 0444, .uid = s->uid, .gid = s->gid, .nlink = 1 };

	st.v.size = e->size;
	st.v.mtime_ns = e->mtime_ns - e->mtime_ns % 1000000000;
	memcpy(st.v.etag, e->etag, sizeof(st.v.etag) < sizeof(e->etag) ? sizeof(st.v.etag) : sizeof(e->etag));
	st.v.etag[sizeof(st.v.etag) - 1] = '\0';
	return st;
}

/* ---- opening objects ------------------------------------------------------------------------- */
tf_status s3_head_stat(s3_source *s, const s3_bound *b, const char *rel, tf_stat *st, tf_error *err)
{
	char *key = s3_key_of(s, rel, false);
	s3_entry e;
	tf_status rc = key ? s3_client_head(s->client, b, key, &e, err) : tf_err(err, TF_E_NOMEM, "out of memory");

	free(key);
	if (rc == TF_OK)
		*st = file_stat(s, &e);
	return rc;
}

bool s3_same_version(const tf_version *a, const tf_version *b)
{
	return a->size == b->size && !strcmp(a->etag, b->etag);
}
