/*
 * source_impl.h - for implementations of tf_source.h only.
 *
 * A source kind fills a table of operations and embeds `struct tf_source`
 * (and `struct tf_object` for its objects) as the first member of its own
 * structs.  tf_source.c checks relative paths before any operation runs, so
 * an implementation sees only "." or names without empty, "." or ".."
 * components and without leading or trailing '/'.
 */
#ifndef TF_SOURCE_IMPL_H
#define TF_SOURCE_IMPL_H

#include <stdatomic.h>

#include "sources/tf_source.h"

typedef struct tf_source_ops {
	const char *kind;
	void (*free)(tf_source *s);
	tf_status (*stat)(tf_source *s, const char *rel, tf_stat *st, tf_error *err);
	tf_status (*list)(tf_source *s, const char *rel, bool want_stat, tf_list_fn fn, void *ctx,
			  tf_error *err);
	tf_status (*readlink)(tf_source *s, const char *rel, char *buf, size_t size, tf_error *err);
	tf_status (*statfs)(tf_source *s, tf_source_fsstat *out, tf_error *err);
	tf_status (*open)(tf_source *s, const char *rel, const tf_version *expect, tf_object **out,
			  tf_error *err);
	/* Kinds holding descriptors (may be NULL: none). */
	void (*fd_stats)(tf_source *s, tf_source_fds *out);
	void (*set_max_fds)(tf_source *s, unsigned max);
	/* tf_source_object_id; may be NULL (false) */
	bool (*object_id)(const tf_source *s, const char *rel, char *buf, size_t n);
	/* tf_source_bucket_key, tf_source_get_reserved, tf_source_put_reserved:
	 * object stores only (NULL: false, TF_E_INVAL) */
	bool (*bucket_key)(const tf_source *s, const char *rel, char *buf, size_t n);
	tf_status (*get_reserved)(tf_source *s, const char *name, size_t max, char **out, size_t *n,
				  tf_error *err);
	tf_status (*put_reserved)(tf_source *s, const char *name, const void *p, size_t n, tf_error *err);
	/* tf_source_set_cache, tf_source_stored_stats (may be NULL: none held) */
	void (*set_cache)(tf_source *s, struct tf_cache *c);
	void (*stored_stats)(tf_source *s, tf_source_stored *out);
	bool (*disk_cache_text)(tf_source *s, char *buf, size_t n);	/* may be NULL: no disk cache */
} tf_source_ops;

typedef struct tf_object_ops {
	void (*close)(tf_object *o);
	tf_status (*read)(tf_object *o, uint64_t off, void *dst, size_t len, tf_error *err);
	void (*prefetch)(tf_object *o, uint64_t off, uint64_t len);
	tf_status (*check)(tf_object *o, tf_error *err);
	bool (*advise)(tf_object *o, tf_access how);	/* may be NULL: false */
} tf_object_ops;

struct tf_source {
	const tf_source_ops *ops;
	char *name;		/* as the user spelled it */
	int local_fd;		/* the root directory of a local source, else -1 */
	tf_source_hooks hooks;	/* all NULL unless set */
	unsigned in_flight;	/* tf_source_in_flight: 0 for a local source */
};

struct tf_object {
	const tf_object_ops *ops;
	atomic_int refs;	/* tf_object_open gives 1; ops->close runs at 0 */
	tf_stat st;		/* the version this object reads */
	char *name;		/* rel, for messages */
	uint64_t io_size;	/* preferred bytes per read */
};

/* The calling thread's request (tf_call): from the hook, else one that
 * starts now and whose caller never goes. */
void tf_source_call(const tf_source *s, tf_call *out);
/* A line for the warn hook (nothing without one). */
void tf_source_warn(const tf_source *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The S3 kind (source_s3.c): spec is "s3://BUCKET[/PREFIX]". */
struct tf_s3_settings;
tf_status tf_source_s3(const char *spec, const struct tf_s3_settings *s3, tf_source **out,
		       tf_error *err);

#endif
