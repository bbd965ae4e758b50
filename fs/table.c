/*
 * table.c - decoded files the driver knows: path -> current chunk index.
 *
 * A node holds the tf_file built for the source as it was when indexed;
 * a lookup that finds the source changed (inode, size or mtime) builds a
 * fresh index, and open handles keep the one they started with, so no read
 * mixes old and new bytes.  Indexes of files nobody has open are evicted,
 * least recently used first, to keep them within the index budget.
 */
#include "tilefs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fs_node {
	char *rel;
	tf_file *file;		/* NULL if indexing failed */
	tf_version src;		/* the source the index (or failure) is for */
	uint64_t generation;	/* bumped whenever the index is rebuilt */
	uint64_t opened_generation; /* generation the last open saw */
	int pins;		/* lookups in progress and open handles */
	int index_errno;
	char *error;		/* last decode or index error */
	char *field, *role, *fragment;	/* what the array says the file is */
	uint32_t format_version;
	size_t bytes;
	fs_node *hnext, *prev, *next;
};

static size_t hash_path(const char *s)
{
	size_t h = 5381;

	while (*s)
		h = h * 33 ^ (unsigned char)*s++;
	return h;
}

int fs_table_init(fs_table *t, size_t index_budget)
{
	memset(t, 0, sizeof(*t));
	t->nbuckets = 1024;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	t->index_budget = index_budget;
	pthread_mutex_init(&t->lock, NULL);
	return t->buckets ? 0 : -ENOMEM;
}

static void clear_facts(fs_node *n)
{
	free(n->field);
	free(n->role);
	free(n->fragment);
	n->field = n->role = n->fragment = NULL;
	n->format_version = 0;
}

static void node_free(fs_node *n)
{
	tf_file_unref(n->file);
	clear_facts(n);
	free(n->rel);
	free(n->error);
	free(n);
}

void fs_table_destroy(fs_table *t)
{
	for (size_t i = 0; i < t->nbuckets; i++)
		for (fs_node *n = t->buckets[i], *next; n; n = next) {
			next = n->hnext;
			node_free(n);
		}
	free(t->buckets);
	pthread_mutex_destroy(&t->lock);
}

/* ---- hash and LRU (lock held) ------------------------------------------------------------- */

static void lru_unlink(fs_table *t, fs_node *n)
{
	*(n->prev ? &n->prev->next : &t->lru_head) = n->next;
	*(n->next ? &n->next->prev : &t->lru_tail) = n->prev;
	n->prev = n->next = NULL;
}

static void lru_touch(fs_table *t, fs_node *n)	/* make n the most recent */
{
	if (t->lru_tail == n)
		return;
	if (n->prev || n->next || t->lru_head == n)
		lru_unlink(t, n);
	n->prev = t->lru_tail;
	*(t->lru_tail ? &t->lru_tail->next : &t->lru_head) = n;
	t->lru_tail = n;
}

static fs_node *find(fs_table *t, const char *rel)
{
	fs_node *n = t->buckets[hash_path(rel) % t->nbuckets];

	while (n && strcmp(n->rel, rel))
		n = n->hnext;
	return n;
}

static void grow_buckets(fs_table *t)
{
	size_t nb = t->nbuckets * 2;
	fs_node **b = calloc(nb, sizeof(*b));

	if (!b)
		return;	/* longer chains, still correct */
	for (size_t i = 0; i < t->nbuckets; i++)
		for (fs_node *n = t->buckets[i], *next; n; n = next) {
			next = n->hnext;
			n->hnext = b[hash_path(n->rel) % nb];
			b[hash_path(n->rel) % nb] = n;
		}
	free(t->buckets);
	t->buckets = b;
	t->nbuckets = nb;
}

static fs_node *insert(fs_table *t, const char *rel)
{
	fs_node *n = calloc(1, sizeof(*n));
	size_t b;

	if (!n || !(n->rel = strdup(rel))) {
		free(n);
		return NULL;
	}
	if (t->count >= 2 * t->nbuckets)
		grow_buckets(t);
	b = hash_path(rel) % t->nbuckets;
	n->hnext = t->buckets[b];
	t->buckets[b] = n;
	t->count++;
	lru_touch(t, n);
	return n;
}

static void unhash(fs_table *t, fs_node *n)
{
	fs_node **p = &t->buckets[hash_path(n->rel) % t->nbuckets];

	while (*p != n)
		p = &(*p)->hnext;
	*p = n->hnext;
	t->count--;
	lru_unlink(t, n);
	t->index_bytes -= n->bytes;
}

/* Drop unpinned nodes, oldest first, until the indexes fit the budget. */
static void evict(fs_table *t)
{
	for (fs_node *n = t->lru_head, *next; n && t->index_bytes > t->index_budget; n = next) {
		next = n->next;
		if (n->pins)
			continue;
		unhash(t, n);
		node_free(n);
	}
}

/* ---- building an index ------------------------------------------------------------------------ */

bool fs_is_decoded(tilefs *fs, const char *rel)
{
	const char *inner;

	if (tf_config_match(fs->config, rel))
		return true;
	return fs_array_of(fs, rel, &inner) && tf_array_is_decoded_name(inner);
}

void fs_version_of(const struct stat *sb, tf_version *v)
{
	*v = (tf_version){ .dev = sb->st_dev, .ino = sb->st_ino, .size = (uint64_t)sb->st_size,
			   .mtime_ns = (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec,
			   .ctime_ns = (int64_t)sb->st_ctim.tv_sec * 1000000000 + sb->st_ctim.tv_nsec };
}

/* The sibling data file of an offsets rule with var_data: its path and the
 * rule that decodes it supply the data's pipeline and datatype. */
static tf_status add_var_data(const tilefs *fs, const char *rel, const tf_rule *r,
			      tf_file_spec *spec, char *sibling, size_t n, tf_error *err)
{
	const char *slash = strrchr(rel, '/');
	const tf_rule *dr;

	if (snprintf(sibling, n, "%.*s%s", slash ? (int)(slash - rel + 1) : 0, rel,
		     r->var_data) >= (int)n)
		return tf_err(err, TF_E_INVAL, "var_data path too long");
	if (!(dr = tf_config_match(fs->config, sibling)))
		return tf_err(err, TF_E_INVAL, "var_data %s: no [match] rule decodes it", sibling);
	spec->var_data = sibling;
	spec->var_pipeline = dr->pipeline;
	spec->var_type = dr->type;
	return TF_OK;
}

/* Facts a node keeps for its attributes: from the array, or none. */
typedef struct facts {
	char *field, *role, *fragment;
	uint32_t format_version;
} facts;

/* A file no rule matches, inside a TileDB array: its array says how. */
static tf_status build_from_array(tilefs *fs, const char *rel, const tf_version *v, tf_file **out,
				  facts *fx, tf_error *err)
{
	const char *inner;
	tf_array *a = fs_array_of(fs, rel, &inner);
	tf_array_file af;
	tf_status rc;

	if (!a)
		return tf_err(err, TF_E_IO, "%s: its TileDB array cannot be opened", rel);
	if ((rc = tf_array_describe(a, inner, &af, err)) != TF_OK)
		return tf_err_prefix(err, "%s", rel);
	rc = tf_file_open(fs->src, af.path, rel, v, &af.spec, out, err);
	fx->field = af.field ? strdup(af.field) : NULL;
	fx->role = af.kind ? strdup(af.kind) : NULL;
	fx->fragment = af.fragment ? strdup(af.fragment) : NULL;
	fx->format_version = af.format_version;
	tf_array_file_clear(&af);
	return rc;
}

static tf_status build_index(tilefs *fs, const char *rel, const tf_version *v, tf_file **out, facts *fx,
			     tf_error *err)
{
	const tf_rule *r = tf_config_match(fs->config, rel);
	char var_path[PATH_MAX];
	tf_file_spec spec;
	tf_status rc;

	if (!r)
		return build_from_array(fs, rel, v, out, fx, err);
	spec = (tf_file_spec){ .pipeline = r->pipeline, .type = r->type, .cell_val_num = r->cell_val_num,
			       .version = r->version, .key = r->key, .generic = r->generic };
	if (r->var_data && (rc = add_var_data(fs, rel, r, &spec, var_path, sizeof(var_path), err)) != TF_OK)
		return tf_err_prefix(err, "%s", rel);
	return tf_file_open(fs->src, rel, rel, v, &spec, out, err);
}

static void set_error_locked(fs_node *n, const char *msg)
{
	free(n->error);
	n->error = strdup(msg);
}

/* Build the index for n (pinned) with the lock released; install it unless
 * another thread got there first. */
static void refresh(tilefs *fs, fs_node *n, const tf_version *st)
{
	fs_table *t = &fs->table;
	tf_file *f = NULL;
	facts fx = { 0 };
	tf_error err;
	tf_status rc;

	pthread_mutex_unlock(&t->lock);
	rc = build_index(fs, n->rel, st, &f, &fx, &err);
	if (rc != TF_OK)
		fs_log(TF_LOG_ERROR, "%s", err.msg);
	pthread_mutex_lock(&t->lock);
	if ((n->file && tf_file_is_current(n->file, st)) ||
	    (!n->file && n->index_errno && tf_version_equal(&n->src, st))) {
		tf_file_unref(f);	/* lost the race: keep theirs */
		free(fx.field), free(fx.role), free(fx.fragment);
		return;
	}
	clear_facts(n);
	n->field = fx.field;
	n->role = fx.role;
	n->fragment = fx.fragment;
	n->format_version = fx.format_version;
	tf_file_unref(n->file);
	t->index_bytes -= n->bytes;
	n->file = f;
	n->src = *st;
	n->generation++;
	n->bytes = f ? tf_file_index_bytes(f) : 0;
	n->index_errno = rc == TF_OK ? 0 : tf_status_errno(rc);
	t->index_bytes += n->bytes;
	if (rc != TF_OK)
		set_error_locked(n, err.msg);
}

/* ---- lookups ------------------------------------------------------------------------------------ */

fs_node *fs_lookup(tilefs *fs, const char *rel, const struct stat *st, bool pin,
		   tf_file **file, bool *reused, int *errp)
{
	fs_table *t = &fs->table;
	tf_version v;
	fs_node *n;

	fs_version_of(st, &v);
	*file = NULL;
	*reused = false;
	*errp = 0;
	if (!fs_is_decoded(fs, rel))
		return NULL;
	pthread_mutex_lock(&t->lock);
	if (!(n = find(t, rel)) && !(n = insert(t, rel))) {
		pthread_mutex_unlock(&t->lock);
		*errp = -ENOMEM;
		return NULL;
	}
	n->pins++;
	lru_touch(t, n);
	if (n->file ? !tf_file_is_current(n->file, &v) : !(n->index_errno && tf_version_equal(&n->src, &v)))
		refresh(fs, n, &v);
	if (n->file) {
		*file = tf_file_ref(n->file);
		*reused = n->generation == n->opened_generation;
	} else {
		*errp = -n->index_errno;
	}
	if (pin)	/* held until fs_node_release(): the kernel opened it */
		n->opened_generation = n->generation;
	else
		n->pins--;
	evict(t);
	pthread_mutex_unlock(&t->lock);
	return n;
}

void fs_node_release(tilefs *fs, fs_node *n)
{
	pthread_mutex_lock(&fs->table.lock);
	n->pins--;
	evict(&fs->table);
	pthread_mutex_unlock(&fs->table.lock);
}

void fs_node_set_error(tilefs *fs, fs_node *n, const char *msg)
{
	pthread_mutex_lock(&fs->table.lock);
	set_error_locked(n, msg);
	pthread_mutex_unlock(&fs->table.lock);
}

void fs_node_facts(tilefs *fs, fs_node *n, fs_facts *out)
{
	pthread_mutex_lock(&fs->table.lock);
	snprintf(out->field, sizeof(out->field), "%s", n->field ? n->field : "");
	snprintf(out->role, sizeof(out->role), "%s", n->role ? n->role : "");
	snprintf(out->fragment, sizeof(out->fragment), "%s", n->fragment ? n->fragment : "");
	out->format_version = n->format_version;
	pthread_mutex_unlock(&fs->table.lock);
}

char *fs_node_error(tilefs *fs, fs_node *n)
{
	char *s;

	pthread_mutex_lock(&fs->table.lock);
	s = n->error ? strdup(n->error) : NULL;
	pthread_mutex_unlock(&fs->table.lock);
	return s;
}
