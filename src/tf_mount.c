/*
 * tf_mount.c - a mounted tree's library side (tf_mount.h): the
 * configuration with the mount's overrides, SOURCE, the index store, the
 * cache and the catalog, made in a daemon's order and freed in the order
 * their users need; reloads; index_at_mount's walk; the mount-wide
 * statistics as text.
 */
#include "config.h"

#include "tf_mount.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/tf_index.h"
#include "cache/tf_walk.h"
#include "sources/tf_source_open.h"

struct tf_mount {
	tf_mount_options o;		/* its strings are copies, owned */
	tf_source *src;
	_Atomic(tf_config *) config;	/* in force */
	tf_config **retired;		/* replaced by reloads, kept for their users */
	size_t nretired;
	tf_index *store;
	tf_cache *cache;
	tf_catalog *catalog;
	tf_entries *entries;		/* what paths show: over the catalog */
	/* index_at_mount */
	_Atomic uint64_t seen, indexed, failed;
	atomic_bool ahead_done;
};

static void say(tf_mount *m, tf_log_level level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(tf_mount *m, tf_log_level level, const char *fmt, ...)
{
	char msg[TF_ERRMSG_MAX + 64];
	va_list ap;

	if (!m->o.log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	m->o.log(m->o.log_ctx, level, msg);
}

static tf_config *config_of(tf_mount *m)
{
	return atomic_load(&m->config);
}

/* ---- the options ---------------------------------------------------------------------------- */

static bool copy(const char **to, const char *from)
{
	return !from || (*to = strdup(from));
}

static bool copy_options(tf_mount_options *to, const tf_mount_options *from)
{
	*to = (tf_mount_options){ .views = from->views, .index_at_mount = from->index_at_mount,
				  .log = from->log, .log_ctx = from->log_ctx };
	return copy(&to->source, from->source) && copy(&to->config, from->config) &&
	       copy(&to->cache_size, from->cache_size) && copy(&to->index_dir, from->index_dir) &&
	       copy(&to->cache_dir, from->cache_dir) && copy(&to->cache_dir_size, from->cache_dir_size) &&
	       copy(&to->cache_dir_min_free, from->cache_dir_min_free);
}

static void free_options(tf_mount_options *o)
{
	free((char *)o->source), free((char *)o->config), free((char *)o->cache_size);
	free((char *)o->index_dir), free((char *)o->cache_dir), free((char *)o->cache_dir_size);
	free((char *)o->cache_dir_min_free);
}

/* ---- the configuration ---------------------------------------------------------------------- */

/* FILE (or the defaults) with the overrides.  TF_MOUNT_E_OPTION: err
 * names the option (without "-o"). */
static tf_status config_make(const tf_mount_options *o, tf_config **out, tf_mount_failure *why, tf_error *err)
{
	tf_config *c = NULL;
	tf_status rc = o->config ? tf_config_load(o->config, &c, err) : tf_config_default(&c, err);

	if (rc != TF_OK) {
		*why = rc == TF_E_NOKEY ? TF_MOUNT_E_KEY : TF_MOUNT_E_CONFIG;
		return rc;
	}
	*why = TF_MOUNT_E_OPTION;	/* the messages name the option */
	if (o->cache_size && (rc = tf_config_set_cache_size(c, o->cache_size, err)) != TF_OK)
		goto fail;
	if (o->views)
		tf_config_set_views(c, true);
	if (o->index_dir && !tf_config_set_index_dir(c, o->index_dir)) {
		*why = TF_MOUNT_E_CONFIG;
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
		goto fail;
	}
	if (o->index_at_mount)
		tf_config_set_index_at_mount(c, true);
	if ((o->cache_dir && (rc = tf_config_set_s3(c, "cache_dir", o->cache_dir, err)) != TF_OK) ||
	    (o->cache_dir_size && (rc = tf_config_set_s3(c, "cache_dir_size", o->cache_dir_size, err)) != TF_OK) ||
	    (o->cache_dir_min_free &&
	     (rc = tf_config_set_s3(c, "cache_dir_min_free", o->cache_dir_min_free, err)) != TF_OK))
		goto fail;
	*out = c;
	return TF_OK;
fail:
	tf_config_free(c);
	return rc;
}

/* What loading skipped (plugins), said once, `how` before each. */
static void say_warnings(tf_mount *m, const tf_config *c, tf_log_level level, const char *how)
{
	for (size_t i = 0; i < tf_config_nwarnings(c); i++)
		say(m, level, "%s: %s", how, tf_config_warning(c, i));
}

/* ---- open ------------------------------------------------------------------------------------ */

/* SOURCE through the library: a local directory (resolved), or
 * s3://BUCKET[/PREFIX] with the [s3] settings.  An object store that
 * refuses us or has no such bucket fails here, before anything is
 * mounted. */
static tf_status open_source(tf_mount *m, tf_mount_failure *why, tf_error *err)
{
	const char *spec = m->o.source;
	bool s3 = !strncmp(spec, "s3://", 5);
	char real[PATH_MAX];
	tf_status rc;

	if (!s3 && !realpath(spec, real)) {
		*why = TF_MOUNT_E_SOURCE;
		return tf_err(err, errno == ENOENT ? TF_E_NOTFOUND : TF_E_IO, "%s: %s", spec, strerror(errno));
	}
	rc = tf_source_open(s3 ? spec : real, tf_config_s3(config_of(m)), &m->src, err);
	if (rc == TF_OK)
		return TF_OK;
	*why = !s3 ? TF_MOUNT_E_SOURCE : rc == TF_E_INVAL ? TF_MOUNT_E_CONFIG : TF_MOUNT_E_REFUSED;
	return tf_err_prefix(err, "%s", spec);
}

tf_status tf_mount_open(const tf_mount_options *o, tf_mount **out, tf_mount_failure *why, tf_error *err)
{
	tf_mount *m = calloc(1, sizeof(*m));
	tf_config *c;
	tf_status rc;

	*out = NULL;
	*why = TF_MOUNT_E_OTHER;
	if (!m || !copy_options(&m->o, o)) {
		if (m)
			free_options(&m->o);
		free(m);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	if ((rc = config_make(&m->o, &c, why, err)) != TF_OK) {
		if (*why == TF_MOUNT_E_OPTION) {	/* "-o NAME: ..." */
			char msg[TF_ERRMSG_MAX];
			memcpy(msg, err->msg, sizeof(msg));
			tf_err(err, rc, "-o %s", msg);
		}
		tf_mount_close(m);
		return rc;
	}
	atomic_store(&m->config, c);
	say_warnings(m, c, TF_LOG_WARN, "warning");
	if ((rc = open_source(m, why, err)) != TF_OK) {
		tf_mount_close(m);
		return rc;
	}
	*out = m;
	return TF_OK;
}

static void store_warning(void *ctx, const char *msg)
{
	say(ctx, TF_LOG_WARN, "%s", msg);
}

tf_status tf_mount_open_store(tf_mount *m, tf_mount_failure *why, tf_error *err)
{
	const tf_settings *s = tf_mount_settings(m);
	const char *dir = s->index_dir;
	char def[PATH_MAX];
	tf_status rc;

	if (!dir)
		dir = tf_index_default_dir(def, sizeof(def)) ? def : "none";
	rc = tf_index_open(strcmp(dir, "none") ? dir : NULL, s->index_max_size, store_warning, m, &m->store, err);
	*why = TF_MOUNT_E_CONFIG;
	if (rc == TF_E_ACCESS && m->o.index_dir) {
		char msg[TF_ERRMSG_MAX];
		memcpy(msg, err->msg, sizeof(msg));
		return tf_err(err, rc, "%s (-o index_dir)", msg);
	}
	if (rc == TF_E_ACCESS && s->index_dir)
		return tf_err_prefix(err, "%s", s->index_dir_at ? s->index_dir_at : "?");
	if (rc == TF_E_ACCESS) {	/* the default: no store, and say why */
		say(m, TF_LOG_WARN, "%s: indexes are not persisted", err->msg);
		rc = tf_index_open(NULL, 0, store_warning, m, &m->store, err);
	}
	*why = TF_MOUNT_E_OTHER;
	return rc;
}

/* ---- start and close ------------------------------------------------------------------------- */

tf_status tf_mount_start(tf_mount *m, const tf_source_hooks *hooks, unsigned *workers, tf_error *err)
{
	const tf_settings *s = tf_mount_settings(m);
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	tf_status rc;

	tf_config_lock_keys(config_of(m));	/* locks do not survive fork() */
	if (hooks)
		tf_source_set_hooks(m->src, hooks);
	/* The descriptor pool's share of RLIMIT_NOFILE, as raised by now. */
	tf_source_set_max_fds(m->src, 0);
	/* One worker per CPU and one more: a worker waits a little on each
	 * run's stored bytes, and the spare keeps every core decoding (a cold
	 * cat of 256 MiB of zstd on two cores: 192 ms with two workers, 179
	 * with three, 185 with four). */
	*workers = s->workers ? s->workers : (ncpu > 0 ? (unsigned)ncpu : 2) + 1;
	if ((rc = tf_cache_new(s->cache_size, *workers, &m->cache, err)) != TF_OK ||
	    (rc = tf_catalog_new(m->src, config_of(m), &m->catalog, err)) != TF_OK)
		return rc;
	tf_catalog_set_index(m->catalog, m->store);
	tf_source_set_cache(m->src, m->cache);	/* stored bytes: the one budget */
	if (!(m->entries = tf_entries_new(m->catalog, m->src)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	tf_entries_set_cache(m->entries, m->cache, (size_t)s->index_budget);
	return TF_OK;
}

void tf_mount_stop_plugins(tf_mount *m)
{
	if (!m || !config_of(m))
		return;
	tf_config_stop_plugins(config_of(m));
	for (size_t i = 0; i < m->nretired; i++)
		tf_config_stop_plugins(m->retired[i]);
}

/* Views charge the cache they read through, and so do the source's stored
 * bytes: both let go of it before it goes; files restored from the store
 * are gone before it. */
void tf_mount_close(tf_mount *m)
{
	if (!m)
		return;
	if (m->catalog)
		tf_catalog_drop_views(m->catalog);
	if (m->src)
		tf_source_set_cache(m->src, NULL);
	tf_entries_free(m->entries);
	tf_cache_free(m->cache);
	tf_catalog_free(m->catalog);
	tf_index_free(m->store);
	tf_config_free(config_of(m));	/* wipes the keys */
	for (size_t i = 0; i < m->nretired; i++)
		tf_config_free(m->retired[i]);
	free(m->retired);
	tf_source_free(m->src);
	free_options(&m->o);
	free(m);
}

/* ---- reload ---------------------------------------------------------------------------------- */

/* The configuration in force becomes nc; the old one is retired. */
static tf_status replace_config(tf_mount *m, tf_config *nc, tf_error *err)
{
	tf_config **r = realloc(m->retired, (m->nretired + 1) * sizeof(*r));

	if (!r)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	m->retired = r;
	r[m->nretired++] = config_of(m);
	tf_config_lock_keys(nc);
	atomic_store(&m->config, nc);
	if (m->catalog)
		tf_catalog_set_config(m->catalog, nc);
	return TF_OK;
}

tf_status tf_mount_reload(tf_mount *m, bool *changed, char *changes, size_t n, tf_error *err)
{
	tf_mount_failure why;
	tf_config *nc;
	tf_status rc;

	*changed = false;
	if (n)
		changes[0] = '\0';
	if ((rc = config_make(&m->o, &nc, &why, err)) != TF_OK)
		return rc;
	say_warnings(m, nc, TF_LOG_WARN, "reload");
	if (!tf_config_changes(config_of(m), nc, changes, n)) {
		tf_config_free(nc);
		return TF_OK;
	}
	tf_config_keep_mount_settings(nc, config_of(m));
	if ((rc = replace_config(m, nc, err)) != TF_OK) {
		tf_config_free(nc);
		return rc;
	}
	*changed = true;
	return TF_OK;
}

/* ---- facts ----------------------------------------------------------------------------------- */

const tf_settings *tf_mount_settings(tf_mount *m)
{
	return tf_config_settings(config_of(m));
}

const char *tf_mount_name(const tf_mount *m)
{
	return tf_source_name(m->src);
}

tf_source *tf_mount_source(tf_mount *m)
{
	return m->src;
}

tf_cache *tf_mount_cache(tf_mount *m)
{
	return m->cache;
}

tf_entries *tf_mount_entries(tf_mount *m)
{
	return m->entries;
}

tf_catalog *tf_mount_catalog(tf_mount *m)
{
	return m->catalog;
}

bool tf_mount_contains(const tf_mount *m, int dirfd)
{
	int root = tf_source_local_fd(m->src);
	int dir = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);	/* ours to walk up */
	struct stat top, st, up;
	bool inside = false;

	if (root < 0 || fstat(root, &top) != 0) {
		if (dir >= 0)
			close(dir);
		return false;	/* nothing else can contain a mount */
	}
	while (dir >= 0 && fstat(dir, &st) == 0) {
		int parent;
		if (st.st_dev == top.st_dev && st.st_ino == top.st_ino) {
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

tf_status tf_mount_statfs(tf_mount *m, struct statvfs *out, tf_error *err)
{
	tf_source_fsstat s;
	tf_status rc = tf_source_statfs(m->src, &s, err);

	if (rc != TF_OK)
		return rc;
	*out = (struct statvfs){ 0 };
	out->f_bsize = out->f_frsize = s.bsize;
	out->f_blocks = s.blocks, out->f_bfree = s.bfree, out->f_bavail = s.bavail;
	out->f_files = s.files, out->f_ffree = s.ffree, out->f_favail = s.ffree;
	out->f_namemax = s.namemax;
	out->f_flag = ST_RDONLY;
	return TF_OK;
}

/* ---- index_at_mount -------------------------------------------------------------------------- */

typedef struct ahead {
	tf_mount *m;
	bool (*stop)(void *ctx);
	void *ctx;
} ahead;

/* Index file rel (version v) if a walked [match] rule decodes it. */
static void index_one(tf_mount *m, const char *rel, const tf_version *v)
{
	const tf_rule *r = tf_config_match(config_of(m), rel);
	tf_file *f;
	tf_error err;

	if (!r || r->generic || r->var_data)
		return;	/* arrays' files need no walk; these are not stored */
	atomic_fetch_add(&m->seen, 1);
	if (tf_catalog_open_for(m->catalog, rel, v, TF_OPEN_METADATA, &f, NULL, &err) == TF_OK) {
		atomic_fetch_add(&m->indexed, 1);
		tf_file_unref(f);
	} else {
		atomic_fetch_add(&m->failed, 1);
		say(m, TF_LOG_DEBUG, "index_at_mount: %s", err.msg);
	}
}

static int visit(void *arg, const char *rel, const tf_stat *st)
{
	ahead *a = arg;

	if (a->stop(a->ctx))
		return 1;
	if (st->kind == TF_ENT_REG)
		index_one(a->m, rel, &st->v);
	return 0;
}

tf_status tf_mount_index_ahead(tf_mount *m, bool (*stop)(void *ctx), void *ctx)
{
	ahead a = { m, stop, ctx };
	/* What cannot be listed is passed over: lookups index it, as without us. */
	tf_status rc = tf_walk(m->src, ".", TF_WALK_KEEP_GOING, visit, &a, NULL);

	atomic_store(&m->ahead_done, true);
	say(m, TF_LOG_INFO, "index_at_mount: %" PRIu64 " of %" PRIu64 " files indexed%s", atomic_load(&m->indexed),
	    atomic_load(&m->seen), stop(ctx) ? " (stopped)" : "");
	return rc;
}

/* ---- statistics ------------------------------------------------------------------------------ */

static char *index_text(tf_mount *m, const tf_mount_counts *c)
{
	bool on = c->indexing_ahead;
	tf_index_stats s;
	char *v;

	if (!m->store)
		return NULL;
	tf_index_get_stats(m->store, &s);
	if (asprintf(&v, "dir=%s persist=%s entries=%" PRIu64 " bytes=%" PRIu64 " max_size=%" PRIu64
		     " hits=%" PRIu64 " misses=%" PRIu64 " stale=%" PRIu64 " corrupt=%" PRIu64 " writes=%" PRIu64
		     " write_errors=%" PRIu64 " evictions=%" PRIu64 " walks=%" PRIu64 " walk_bytes=%" PRIu64
		     " background=%s files_seen=%" PRIu64 " files_indexed=%" PRIu64 " files_failed=%" PRIu64
		     " published=%" PRIu64 " published_misses=%" PRIu64 " published_ignored=%" PRIu64,
		     tf_index_dir(m->store), !s.persist ? "no" : s.writable ? "yes" : "read-only", s.entries,
		     s.bytes, s.max_size, s.hits, s.misses, s.stale, s.corrupt, s.writes, s.write_errors,
		     s.evictions, s.walks, s.walk_bytes,
		     !on ? "off" : atomic_load(&m->ahead_done) ? "done" : "running", on ? atomic_load(&m->seen) : 0,
		     on ? atomic_load(&m->indexed) : 0, on ? atomic_load(&m->failed) : 0, s.published,
		     s.published_misses, s.published_ignored) < 0)
		return NULL;
	return v;
}

static char *opens_text(tf_mount *m, const tf_mount_counts *c)
{
	tf_source_fds d;
	char *v;

	tf_source_fd_stats(m->src, &d);
	if (asprintf(&v, "fds=%u fd_max=%u reopens=%" PRIu64 " fd_evictions=%" PRIu64 " users=%zu"
		     " refused=%" PRIu64 " max_user_opens=%u", d.held, d.max, d.reopens, d.evictions, c->users,
		     c->refused, c->max_user_opens) < 0)
		return NULL;
	return v;
}

static char *cache_text(tf_mount *m, const tf_mount_counts *c)
{
	tf_cache_stats s;
	tf_source_stored st;
	struct mallinfo2 mi;
	char *v;

	if (!m->cache)
		return NULL;
	tf_cache_get_stats(m->cache, &s);
	tf_source_stored_stats(m->src, &st);
	mi = mallinfo2();
	if (asprintf(&v, "budget=%zu used=%zu entries=%zu hits=%" PRIu64 " misses=%" PRIu64
		     " evictions=%" PRIu64 " prefetches=%" PRIu64 " recycled=%" PRIu64 " nodes=%zu indexes=%zu"
		     " index_bytes=%zu index_budget=%zu handles=%zu arrays=%zu heap_used=%zu heap_free=%zu heap_mmap=%zu"
		     " charged=%zu stored=%zu stored_bound=%zu stored_parts=%u in_flight=%u queued=%u"
		     " fetched=%" PRIu64 " stored_served=%" PRIu64 " stored_evicted=%" PRIu64 " cancelled=%" PRIu64
		     " aborted=%" PRIu64,
		     s.budget, s.used, s.entries, s.hits, s.misses, s.evictions, s.prefetches, s.recycled, c->nodes,
		     c->indexes, c->index_bytes, (size_t)tf_mount_settings(m)->index_budget, c->handles,
		     tf_catalog_arrays(m->catalog), mi.uordblks, mi.fordblks, mi.hblkhd, s.charged, st.held,
		     st.bound, st.parts, st.in_flight, st.queued, st.fetched, st.served, st.evicted,
		     st.cancelled, st.aborted) < 0)
		return NULL;
	return v;
}

char *tf_mount_stat_text(tf_mount *m, const char *name, const tf_mount_counts *c)
{
	char buf[512];

	if (!strcmp(name, "cache"))
		return cache_text(m, c);
	if (!strcmp(name, "index"))
		return index_text(m, c);
	if (!strcmp(name, "opens"))
		return opens_text(m, c);
	if (!strcmp(name, "disk_cache"))	/* tilefs(1), DISK CACHE */
		return tf_source_disk_cache_text(m->src, buf, sizeof(buf)) ? strdup(buf) : NULL;
	return NULL;
}
