/*
 * tf_config_diff.c - what a reload changes: two configurations compared,
 * section by section, in words for the log; and the settings only a mount
 * can make carried from the configuration in force to its successor.
 *
 * Sections are matched by name ([match] by glob), so reordering a file
 * says "order" and not "everything changed".  Keys are compared by their
 * bytes in constant time and reported only as "changed": key material and
 * key file contents never reach the text.
 */
#include "config.h"

#include "config/tf_config_diff.h"
#include "config/tf_config_int.h"

#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct said {
	char *buf;
	size_t n, len;
	unsigned items;
} said;

static void say(said *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(said *s, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (!s->n || s->len + 1 >= s->n) {
		s->items++;
		return;
	}
	if (s->items++)
		s->len += (size_t)snprintf(s->buf + s->len, s->n - s->len, "; ");
	if (s->len + 1 >= s->n)
		return;
	va_start(ap, fmt);
	k = vsnprintf(s->buf + s->len, s->n - s->len, fmt, ap);
	va_end(ap);
	s->len = k < 0 ? s->len : s->len + (size_t)k >= s->n ? s->n - 1 : s->len + (size_t)k;
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static bool key_eq(const tf_key *a, const tf_key *b)
{
	return a == b || (a && b && !CRYPTO_memcmp(tf_key_bytes(a), tf_key_bytes(b), TF_KEY_BYTES));
}

static bool fieldspec_eq(const fieldspec *a, const fieldspec *b)
{
	return str_eq(a->filters, b->filters) && a->has_type == b->has_type && a->type == b->type &&
	       a->has_cells == b->has_cells && a->cell_val_num == b->cell_val_num &&
	       a->has_version == b->has_version && a->version == b->version;
}

static const key_sec *key_named(const tf_config *c, const char *name)
{
	for (size_t i = 0; name && i < c->nkeys; i++)
		if (!strcmp(c->keys[i].name, name))
			return &c->keys[i];
	return NULL;
}

static const pipe_sec *pipe_named(const tf_config *c, const char *name)
{
	for (size_t i = 0; name && i < c->npipes; i++)
		if (!strcmp(c->pipes[i].name, name))
			return &c->pipes[i];
	return NULL;
}

static void diff_keys(said *s, const tf_config *a, const tf_config *b)
{
	for (size_t i = 0; i < b->nkeys; i++) {
		const key_sec *o = key_named(a, b->keys[i].name);
		if (!o)
			say(s, "[key %s] added", b->keys[i].name);
		else if (!key_eq(o->key, b->keys[i].key))
			say(s, "[key %s] changed", b->keys[i].name);
	}
	for (size_t i = 0; i < a->nkeys; i++)
		if (!key_named(b, a->keys[i].name))
			say(s, "[key %s] removed", a->keys[i].name);
}

static void diff_pipelines(said *s, const tf_config *a, const tf_config *b)
{
	for (size_t i = 0; i < b->npipes; i++) {
		const pipe_sec *o = pipe_named(a, b->pipes[i].name);
		if (!o)
			say(s, "[pipeline %s] added", b->pipes[i].name);
		else if (!fieldspec_eq(&o->f, &b->pipes[i].f))
			say(s, "[pipeline %s] changed", b->pipes[i].name);
	}
	for (size_t i = 0; i < a->npipes; i++)
		if (!pipe_named(b, a->pipes[i].name))
			say(s, "[pipeline %s] removed", a->pipes[i].name);
}

static const match_sec *rule_for(const tf_config *c, const char *pattern, size_t *at)
{
	for (size_t i = 0; i < c->nrules; i++)
		if (!strcmp(c->rules[i].pattern, pattern)) {
			*at = i;
			return &c->rules[i];
		}
	return NULL;
}

/* Whether rule m decodes as rule o did: the same fields, the same
 * pipeline (by its fields, a named one's included) and key (by bytes). */
static bool rule_eq(const tf_config *a, const match_sec *o, const tf_config *b, const match_sec *m)
{
	const pipe_sec *po = pipe_named(a, o->pipe_name), *pm = pipe_named(b, m->pipe_name);

	return str_eq(o->pipe_name, m->pipe_name) && (!po || !pm || fieldspec_eq(&po->f, &pm->f)) &&
	       fieldspec_eq(&o->f, &m->f) && str_eq(o->key_name, m->key_name) &&
	       key_eq(o->rule.key, m->rule.key) && o->rule.generic == m->rule.generic &&
	       str_eq(o->var_data, m->var_data);
}

static void diff_rules(said *s, const tf_config *a, const tf_config *b)
{
	size_t last = 0, at;
	bool reordered = false;

	for (size_t i = 0; i < b->nrules; i++) {
		const match_sec *o = rule_for(a, b->rules[i].pattern, &at);
		if (!o) {
			say(s, "[match %s] added", b->rules[i].pattern);
			continue;
		}
		if (!rule_eq(a, o, b, &b->rules[i]))
			say(s, "[match %s] changed", b->rules[i].pattern);
		reordered = reordered || at < last;
		last = at;
	}
	for (size_t i = 0; i < a->nrules; i++)
		if (!rule_for(b, a->rules[i].pattern, &at))
			say(s, "[match %s] removed", a->rules[i].pattern);
	if (reordered)
		say(s, "[match] sections reordered (the first match wins)");
}

static const array_sec *array_for(const tf_config *c, const char *path)
{
	for (size_t i = 0; i < c->narrays; i++)
		if (!strcmp(c->arrays[i].path, path))
			return &c->arrays[i];
	return NULL;
}

static void diff_arrays(said *s, const tf_config *a, const tf_config *b)
{
	for (size_t i = 0; i < b->narrays; i++) {
		const array_sec *o = array_for(a, b->arrays[i].path);
		if (!o)
			say(s, "[array %s] added", b->arrays[i].path);
		else if (!str_eq(o->key_name, b->arrays[i].key_name) || !key_eq(o->key, b->arrays[i].key))
			say(s, "[array %s] key changed", b->arrays[i].path);
	}
	for (size_t i = 0; i < a->narrays; i++)
		if (!array_for(b, a->arrays[i].path))
			say(s, "[array %s] removed", a->arrays[i].path);
}

static void diff_settings(said *s, const tf_config *a, const tf_config *b)
{
	const tf_settings *x = &a->s, *y = &b->s;
	static const char later[] = "applies at the next mount";

	if (!str_eq(a->default_key_name, b->default_key_name) || !key_eq(x->default_key, y->default_key))
		say(s, "default_key changed");
	if (x->hide_unmatched != y->hide_unmatched)
		say(s, "unmatched = %s", y->hide_unmatched ? "hide" : "raw");
	if (x->log_level != y->log_level)
		say(s, "log_level changed");
	if (x->metadata_headers != y->metadata_headers)
		say(s, "metadata_walk changed");
	if (x->cache_size != y->cache_size)
		say(s, "cache_size changed: %s", later);
	if (x->index_budget != y->index_budget || x->workers != y->workers)
		say(s, "index_cache or workers changed: %s", later);
	if (x->views != y->views)
		say(s, "views changed: %s", later);
	if (!str_eq(x->index_dir, y->index_dir) || x->index_max_size != y->index_max_size ||
	    x->index_at_mount != y->index_at_mount)
		say(s, "index_dir, index_max_size or index_at_mount changed: %s", later);
	if (!str_eq(a->plugin_path, b->plugin_path))
		say(s, "plugin_path changed: %s", later);
	if (!str_eq(a->s3.endpoint, b->s3.endpoint) || !str_eq(a->s3.region, b->s3.region) ||
	    !str_eq(a->s3.profile, b->s3.profile) || !str_eq(a->s3.credentials, b->s3.credentials) ||
	    a->s3.anonymous != b->s3.anonymous || a->s3.path_style != b->s3.path_style ||
	    a->s3.max_requests != b->s3.max_requests || a->s3.timeout_ms != b->s3.timeout_ms ||
	    a->s3.retries != b->s3.retries || a->s3.list_ttl != b->s3.list_ttl ||
	    a->s3.requester_pays != b->s3.requester_pays || !str_eq(a->s3.expected_owner, b->s3.expected_owner) ||
	    !str_eq(a->s3.cache_dir, b->s3.cache_dir) || a->s3.cache_dir_size != b->s3.cache_dir_size ||
	    a->s3.cache_dir_min_free != b->s3.cache_dir_min_free)
		say(s, "[s3] changed: %s", later);
}

size_t tf_config_changes(const tf_config *old, const tf_config *nc, char *buf, size_t n)
{
	said s = { buf, n, 0, 0 };

	if (n)
		buf[0] = '\0';
	diff_keys(&s, old, nc);
	diff_pipelines(&s, old, nc);
	diff_rules(&s, old, nc);
	diff_arrays(&s, old, nc);
	diff_settings(&s, old, nc);
	return s.items;
}

void tf_config_keep_mount_settings(tf_config *nc, const tf_config *old)
{
	const tf_settings *o = &old->s;

	nc->s.cache_size = o->cache_size;
	nc->s.index_budget = o->index_budget;
	nc->s.workers = o->workers;
	nc->s.views = o->views;
	nc->s.index_dir = o->index_dir;		/* old outlives nc (the caller's promise) */
	nc->s.index_dir_at = o->index_dir_at;
	nc->s.index_max_size = o->index_max_size;
	nc->s.index_at_mount = o->index_at_mount;
}
