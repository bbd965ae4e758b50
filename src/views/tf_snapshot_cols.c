/*
 * tf_snapshot_cols.c - ranged column access: a fragment's field as open
 * files (tf_col), held, idle or dormant, and cells of its tiles read
 * through the cache.
 */
#include "config.h"

#include "views/tf_snapshot_int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/tf_locked.h"

static void col_close(tf_col *c)
{
	tf_handle_close(c->data);
	tf_handle_close(c->vfile);
	tf_handle_close(c->validity);
	c->data = c->vfile = c->validity = NULL;
}

void snap_col_free(tf_col *c)
{
	if (!c)
		return;
	col_close(c);
	tf_file_unref(c->fdata);
	tf_file_unref(c->fvar);
	tf_file_unref(c->fvalid);
	free(c);
}

/* ---- columns ------------------------------------------------------------------------------------ */

/* Open the file once indexed as f: a handle on that version. */
static tf_status open_handle(tf_file *f, bool dense, tf_handle **out, tf_error *err)
{
	tf_status rc;

	*out = NULL;
	if (!f)
		return TF_OK;
	rc = tf_handle_open(f, out, err);
	/* Sparse fragments are read a window at a time, many at once (tf_merge). */
	if (rc == TF_OK && !dense)
		tf_handle_set_ahead(*out, false);
	return rc;
}

static tf_status open_role(tf_snapshot *s, const tf_snap_frag *f, const tf_fragment *fr, const char *field,
			   tf_role role, tf_file **out, tf_error *err)
{
	char file[1100], dir[600], rel[2048];

	if (!tf_fragment_field_file(fr, field, role, file, sizeof(file)) || !snap_frag_rel(f, dir, sizeof(dir)) ||
	    snprintf(rel, sizeof(rel), "%s/%s", dir, file) >= (int)sizeof(rel))
		return tf_err(err, TF_E_CORRUPT, "fragment %s has no file for %s", f->name, field);
	return tf_array_open_file(s->a, rel, out, err);
}

/* The column's files opened (again), at the versions first indexed. */
static tf_status col_open(tf_col *c, bool dense, tf_error *err)
{
	tf_status rc;

	if ((rc = open_handle(c->fdata, dense, &c->data, err)) == TF_OK &&
	    (rc = open_handle(c->fvar, dense, &c->vfile, err)) == TF_OK)
		rc = open_handle(c->fvalid, dense, &c->validity, err);
	if (rc != TF_OK)
		col_close(c);
	return rc;
}

/* Format 1 stored coordinates zipped unless compressed (§8.3). */
static bool compressed(const tf_pipeline *p)
{
	for (size_t i = 0; p && i < tf_pipeline_count(p); i++) {
		const tf_filter_class *fc = tf_pipeline_class(p, i);
		if (fc && (fc->id == TF_F_GZIP || fc->id == TF_F_ZSTD || fc->id == TF_F_LZ4 || fc->id == TF_F_RLE ||
			   fc->id == TF_F_BZIP2 || fc->id == TF_F_DOUBLE_DELTA || fc->id == TF_F_DICTIONARY ||
			   fc->id == TF_F_DELTA))
			return true;
	}
	return false;
}

/* Which field of the fragment's own schema the column reads. */
static tf_status resolve_col(tf_snapshot *s, const tf_snap_frag *f, const tf_fragment *fr, tf_col_kind kind,
			     const char *name, tf_col *c, const char **file_field, tf_error *err)
{
	const tf_schema *fs = f->schema;
	const tf_field *want = NULL, *have = NULL;
	bool attr = kind == TF_COL_ATTR || kind == TF_COL_OWN_ATTR;

	*file_field = name;
	c->value_size = 8;
	if (kind == TF_COL_TIMESTAMPS || kind == TF_COL_DELETE_TS) {
		c->type = TF_DT_UINT64;
		c->missing = kind == TF_COL_TIMESTAMPS ? !f->has_ts : !f->has_dm;
		*file_field = kind == TF_COL_TIMESTAMPS ? "__timestamps" : "__delete_timestamps";
		return TF_OK;
	}
	for (size_t i = 0; kind == TF_COL_DIM && i < fs->ndims; i++)
		if (!strcmp(fs->dims[i].name, name))
			have = want = &fs->dims[i], c->dim = (unsigned)i;
	if (attr) {
		have = tf_schema_attr(fs, name);
		want = kind == TF_COL_ATTR ? tf_schema_attr(s->schema, name) : have;
		if (!want)
			want = have;	/* a fragment's own attribute (per-fragment views) */
	}
	if (!want)
		return tf_err(err, TF_E_INVAL, "no field %s", name);
	c->type = want->type;
	c->var = want->cell_val_num == TF_CELL_VAR;
	c->nullable = attr && want->nullable;
	c->value_size = tf_datatype_size(want->type);
	c->missing = !have || have->type != want->type || have->cell_val_num != want->cell_val_num ||
		     have->nullable != want->nullable;
	if (kind == TF_COL_DIM && tf_fragment_version(fr) < 5) {	/* legacy __coords (§8.3) */
		c->layout = tf_fragment_version(fr) == 1 && !compressed(fs->coords) ? LAYOUT_ZIPPED
										     : LAYOUT_UNZIPPED;
		c->ndims = (unsigned)fs->ndims;
		c->value_size = tf_datatype_size(fs->dims[0].type);
		*file_field = "__coords";
	}
	return TF_OK;
}

static tf_status open_col(tf_snapshot *s, size_t frag, tf_col_kind kind, const char *name, tf_col **out,
			  tf_error *err)
{
	const tf_snap_frag *f = &s->frags[frag];
	tf_col *c;
	tf_fragment *fr = NULL;
	const char *field;
	char rel[600];
	tf_status rc;

	if ((rc = tf_snapshot_load(s, frag, err)) != TF_OK)
		return rc;
	if (!(c = calloc(1, sizeof(*c))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	c->cache = s->cache;
	/* The metadata again, from the array (which keeps the recent ones):
	 * it says how each file is laid out. */
	rc = snap_frag_rel(f, rel, sizeof(rel)) ? tf_array_fragment(s->a, rel, &fr, err)
					   : tf_err(err, TF_E_INVAL, "name too long");
	if (rc == TF_OK)
		rc = resolve_col(s, f, fr, kind, name, c, &field, err);
	c->cell_size = c->var ? 8 : c->value_size;
	/* A parsed schema's cells are at most TF_CELL_BYTES_MAX bytes, and
	 * legacy coordinates as many values as it has dimensions. */
	if (rc == TF_OK && !c->var && (kind == TF_COL_ATTR || kind == TF_COL_OWN_ATTR) && !c->missing)
		c->cell_size = (unsigned)tf_field_cell_bytes(tf_schema_attr(f->schema, name));
	c->stored = c->layout != LAYOUT_PLAIN ? (unsigned)tf_u64_mul_sat(c->value_size, c->ndims) : c->cell_size;
	if (rc == TF_OK && (c->cell_size == 0 || c->stored == 0 || c->stored > TF_CELL_BYTES_MAX))
		rc = tf_err(err, TF_E_CORRUPT, "cells of %u bytes", c->stored);
	if (rc == TF_OK && !c->missing) {
		rc = open_role(s, f, fr, field, c->var ? TF_ROLE_OFFSETS : TF_ROLE_DATA, &c->fdata, err);
		if (rc == TF_OK && c->var)
			rc = open_role(s, f, fr, field, TF_ROLE_VAR, &c->fvar, err);
		if (rc == TF_OK && c->nullable)
			rc = open_role(s, f, fr, field, TF_ROLE_VALIDITY, &c->fvalid, err);
		if (rc == TF_OK)
			rc = col_open(c, f->dense, err);
	}
	tf_array_fragment_put(s->a, fr);
	if (rc != TF_OK) {
		snap_col_free(c);
		return tf_err_prefix(err, "fragment %s, field %s", f->name, name);
	}
	*out = c;
	return TF_OK;
}

/* What a column keeps: its files' indexes, and what tf_file_index_bytes
 * does not count (the file's names, spec and pipeline copies: ~1.5 KiB
 * each under massif). */
#define FILE_COST ((size_t)2 << 10)

static size_t col_bytes(const tf_col *c)
{
	tf_file *f[3] = { c->fdata, c->fvar, c->fvalid };
	size_t n = sizeof(*c) + sizeof(col_slot) + 64;

	for (int i = 0; i < 3; i++)
		n += f[i] ? FILE_COST + tf_file_index_bytes(f[i]) : 0;
	return n;
}

static size_t col_hash(const tf_snapshot *s, size_t frag, tf_col_kind kind, const char *name)
{
	uint64_t h = (uint64_t)frag * 0x9e3779b97f4a7c15ull ^ (uint64_t)kind;

	for (const char *c = name; *c; c++)
		h = (h ^ (uint8_t)*c) * 1099511628211ull;
	return (size_t)(h ^ h >> 29) & (s->ncols_b - 1);
}

static col_slot *find_col(tf_snapshot *s, size_t frag, tf_col_kind kind, const char *name)
{
	col_slot *c = s->cols[col_hash(s, frag, kind, name)];

	while (c && (c->frag != frag || c->kind != kind || strcmp(c->name, name)))
		c = c->next;
	return c;
}

/* Two columns per bucket at most: double the table (lock held; a failed
 * growth leaves longer chains). */
static void cols_grow(tf_snapshot *s)
{
	size_t n = s->ncols_b * 2;
	col_slot **b, **old = s->cols;

	if (s->nopen < 2 * s->ncols_b || !(b = calloc(n, sizeof(*b))))
		return;
	s->cols = b;
	s->ncols_b = n;
	for (size_t i = 0; i < n / 2; i++)
		for (col_slot *c = old[i], *next; c; c = next) {
			size_t h = col_hash(s, c->frag, c->kind, c->name);
			next = c->next;
			c->next = b[h];
			b[h] = c;
		}
	free(old);
}

/* ---- the idle and dormant lists (lock held) ---- */

static col_list *list_of(tf_snapshot *s, col_slot *c)
{
	return c->state == COL_IDLE ? &s->idle : c->state == COL_DORMANT ? &s->dormant : NULL;
}

static void list_unlink(tf_snapshot *s, col_slot *c)
{
	col_list *l = list_of(s, c);

	if (!l)
		return;
	*(c->older ? &c->older->newer : &l->old) = c->newer;
	*(c->newer ? &c->newer->older : &l->new) = c->older;
	c->older = c->newer = NULL;
	l->n--;
	l->bytes -= c->bytes;
	c->state = COL_HELD;
}

static void list_push(tf_snapshot *s, col_slot *c, col_state state)
{
	col_list *l;

	c->state = state;
	l = list_of(s, c);
	c->older = l->new;
	c->newer = NULL;
	*(l->new ? &l->new->newer : &l->old) = c;
	l->new = c;
	l->n++;
	l->bytes += c->bytes;
}

/*
 * Beyond TF_SNAPSHOT_IDLE_COLS idle columns, the oldest become dormant
 * (their handles, returned in *shut, are closed by the caller after the
 * lock); beyond kept_limit bytes of idle and dormant indexes, the oldest
 * dormant ones (then idle) leave the table, returned in *gone.
 */
static void evict_kept(tf_snapshot *s, size_t limit, col_slot **gone);

static void trim_cols(tf_snapshot *s, col_slot **shut, size_t *nshut, col_slot **gone)
{
	while (s->idle.n > TF_SNAPSHOT_IDLE_COLS && *nshut < 4) {
		col_slot *c = s->idle.old;

		list_unlink(s, c);
		list_push(s, c, COL_DORMANT);
		c->opening = true;	/* being closed: a reader waits */
		shut[(*nshut)++] = c;
	}
	evict_kept(s, s->kept_limit, gone);
}

/* Idle and dormant columns beyond limit bytes leave the table, the oldest
 * dormant ones first (lock held). */
static void evict_kept(tf_snapshot *s, size_t limit, col_slot **gone)
{
	while (s->idle.n + s->dormant.n && s->idle.bytes + s->dormant.bytes > limit) {
		col_slot *c = s->dormant.old ? s->dormant.old : s->idle.old;
		col_slot **p = &s->cols[col_hash(s, c->frag, c->kind, c->name)];

		if (c->opening)
			break;	/* being closed just now: next time */
		list_unlink(s, c);
		while (*p != c)
			p = &(*p)->next;
		*p = c->next;
		s->nopen--;
		c->next = *gone;
		*gone = c;
	}
}

static void close_slots(col_slot *c)
{
	for (col_slot *next; c; c = next) {
		next = c->next;
		snap_col_free(c->col);
		free(c->name);
		free(c);
	}
}

/* Hold slot (lock held, released on return): a dormant one has its files
 * opened again by this reader, others wait for that. */
static tf_status hold_slot(tf_snapshot *s, col_slot *slot, const tf_col **out, tf_error *err)
{
	bool reopen;
	tf_status rc = TF_OK;

	while (slot->opening)
		pthread_cond_wait(&s->reopened, &s->lock);
	reopen = slot->state == COL_DORMANT;
	list_unlink(s, slot);
	slot->refs++;
	slot->opening = reopen;
	pthread_mutex_unlock(&s->lock);
	if (reopen) {
		rc = col_open(slot->col, s->frags[slot->frag].dense, err);
		pthread_mutex_lock(&s->lock);
		slot->opening = false;
		pthread_cond_broadcast(&s->reopened);
		pthread_mutex_unlock(&s->lock);
		if (rc != TF_OK) {
			tf_snapshot_col_put(s, slot->col);
			return rc;
		}
	}
	*out = slot->col;
	return TF_OK;
}

tf_status tf_snapshot_col(tf_snapshot *s, size_t frag, tf_col_kind kind, const char *name,
			  const tf_col **out, tf_error *err)
{
	col_slot *slot, *mine;
	tf_col *c = NULL;
	tf_status rc;

	*out = NULL;
	pthread_mutex_lock(&s->lock);
	if ((slot = find_col(s, frag, kind, name)))
		return hold_slot(s, slot, out, err);
	pthread_mutex_unlock(&s->lock);
	/* Opened with no lock held: reading metadata and opening files. */
	if ((rc = open_col(s, frag, kind, name, &c, err)) != TF_OK)
		return rc;
	if (!(mine = calloc(1, sizeof(*mine))) || !(mine->name = strdup(name))) {
		free(mine);
		snap_col_free(c);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	mine->frag = frag, mine->kind = kind, mine->col = c;
	mine->bytes = col_bytes(c);
	c->slot = mine;
	pthread_mutex_lock(&s->lock);
	if ((slot = find_col(s, frag, kind, name))) {	/* a racing reader opened it first */
		rc = hold_slot(s, slot, out, err);
		close_slots(mine);
		return rc;
	}
	mine->refs = 1;
	cols_grow(s);
	mine->next = s->cols[col_hash(s, frag, kind, name)];
	s->cols[col_hash(s, frag, kind, name)] = mine;
	s->nopen++;
	pthread_mutex_unlock(&s->lock);
	*out = mine->col;
	return TF_OK;
}

void tf_snapshot_col_put(tf_snapshot *s, const tf_col *c)
{
	col_slot *slot, *gone = NULL, *shut[4];
	size_t nshut = 0;

	if (!c)
		return;
	slot = c->slot;
	pthread_mutex_lock(&s->lock);
	if (--slot->refs == 0) {
		/* Idle, the most recent; a failed reopen leaves it closed. */
		list_push(s, slot, slot->col->data || slot->col->missing ? COL_IDLE : COL_DORMANT);
		trim_cols(s, shut, &nshut, &gone);
	}
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < nshut; i++)
		col_close(shut[i]->col);
	if (nshut) {
		pthread_mutex_lock(&s->lock);
		for (size_t i = 0; i < nshut; i++)
			shut[i]->opening = false;
		pthread_cond_broadcast(&s->reopened);
		pthread_mutex_unlock(&s->lock);
	}
	close_slots(gone);
}

void tf_snapshot_shrink(tf_snapshot *s)
{
	col_slot *gone = NULL;

	pthread_mutex_lock(&s->lock);
	evict_kept(s, 0, &gone);
	pthread_mutex_unlock(&s->lock);
	close_slots(gone);
	tf_array_trim_idle(tf_snapshot_array(s), 0);
}

size_t tf_snapshot_open_cols(tf_snapshot *s)
{
	return tf_locked_size(&s->lock, &s->nopen);
}

bool tf_col_missing(const tf_col *c) { return c->missing; }
bool tf_col_var(const tf_col *c) { return c->var; }
bool tf_col_nullable(const tf_col *c) { return c->nullable; }
unsigned tf_col_cell_size(const tf_col *c) { return c->cell_size; }

/* Exactly len bytes at off of h's decoded bytes (once: tf_col_fixed). */
static tf_status read_exact(const tf_col *c, tf_handle *h, tf_workspace *ws, uint64_t off, uint64_t len,
			    uint8_t *dst, bool once, tf_error *err)
{
	const tf_file *f = tf_handle_file(h);
	size_t got = 0;
	tf_status rc;

	if (len == 0)
		return TF_OK;
	if (len > SIZE_MAX)
		return tf_err(err, TF_E_NOMEM, "read too large");
	rc = once ? tf_handle_read_scan(h, c->cache, ws, off, (size_t)len, dst, &got, err)
		  : tf_handle_read(h, c->cache, ws, off, (size_t)len, dst, &got, err);
	if (rc == TF_OK && got != len)
		rc = tf_err(err, TF_E_CORRUPT, "%s: %llu bytes wanted at %llu, the file decodes to %llu",
			    tf_file_name(f), (unsigned long long)len, (unsigned long long)off,
			    (unsigned long long)tf_file_size(f));
	return rc;
}

/* Tile t of h's file: where it starts in the decoded file and how long it
 * is.  The length the fragment metadata gives is proven first: the tile's
 * stored chunk headers must add up to it (read once per tile; nothing is
 * decoded), so no caller sizes a buffer by a claim alone. */
static tf_status tile_range(tf_handle *h, uint64_t t, uint64_t *off, uint64_t *size, tf_error *err)
{
	const tf_file *f = tf_handle_file(h);
	size_t units;
	tf_status rc;

	if (t >= tf_file_ntiles(f))
		return tf_err(err, TF_E_CORRUPT, "%s: tile %llu of %zu", tf_file_name(f), (unsigned long long)t,
			      tf_file_ntiles(f));
	if ((rc = tf_handle_tile_units(h, (size_t)t, &units, err)) != TF_OK)
		return rc;
	tf_file_tile_range(f, (size_t)t, off, size);
	return TF_OK;
}

/* Cells [cell, cell + n) of cell_size bytes are in a tile of size bytes. */
static tf_status cells_in(const tf_handle *h, uint64_t size, uint64_t cell_size, uint64_t cell, uint64_t n,
			  tf_error *err)
{
	if (cell_size == 0 || size % cell_size || cell > size / cell_size || n > size / cell_size - cell)
		return tf_err(err, TF_E_CORRUPT, "%s: cells %llu+%llu of a tile of %llu bytes (%llu per cell)",
			      tf_file_name(tf_handle_file(h)), (unsigned long long)cell, (unsigned long long)n,
			      (unsigned long long)size, (unsigned long long)cell_size);
	return TF_OK;
}

tf_status tf_col_check_cells(const tf_col *c, uint64_t tile, uint64_t cell, uint64_t n, tf_error *err)
{
	uint64_t off, size;
	tf_status rc = TF_OK;

	if (c->missing)
		return TF_OK;
	if ((rc = tile_range(c->data, tile, &off, &size, err)) != TF_OK ||
	    (rc = cells_in(c->data, size, c->var ? 8 : c->stored, cell, n, err)) != TF_OK)
		return rc;
	if (c->var && (rc = tile_range(c->vfile, tile, &off, &size, err)) != TF_OK)
		return rc;
	if (c->validity && ((rc = tile_range(c->validity, tile, &off, &size, err)) != TF_OK ||
			    (rc = cells_in(c->validity, size, 1, cell, n, err)) != TF_OK))
		return rc;
	return TF_OK;
}

/* Legacy zipped coordinates: dimension c->dim of each cell. */
static tf_status read_zipped(const tf_col *c, tf_workspace *ws, uint64_t off, uint64_t n, uint8_t *dst,
			     bool once, tf_error *err)
{
	uint64_t cell = c->stored, bytes;
	uint8_t *tmp = tf_u64_mul(n, cell, &bytes) && bytes <= SIZE_MAX ? malloc(bytes ? (size_t)bytes : 1) : NULL;
	tf_status rc;

	if (!tmp)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	rc = read_exact(c, c->data, ws, off, bytes, tmp, once, err);
	for (uint64_t i = 0; rc == TF_OK && i < n; i++)
		memcpy(dst + i * c->value_size, tmp + i * cell + (uint64_t)c->dim * c->value_size, c->value_size);
	free(tmp);
	return rc;
}

tf_status tf_col_fixed(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t cell, uint64_t n,
		       uint8_t *dst, bool once, tf_error *err)
{
	uint64_t off, size, vs = c->value_size, ncells;
	tf_status rc;

	if (c->missing || c->var)
		return tf_err(err, TF_E_INVAL, "not a fixed-size column");
	if ((rc = tile_range(c->data, tile, &off, &size, err)) != TF_OK ||
	    (rc = cells_in(c->data, size, c->stored, cell, n, err)) != TF_OK)
		return rc;
	switch (c->layout) {
	case LAYOUT_UNZIPPED:	/* all of dimension 0, then all of 1, ... (§8.3) */
		ncells = size / c->stored;
		return read_exact(c, c->data, ws, off + ((uint64_t)c->dim * ncells + cell) * vs, n * vs, dst, once, err);
	case LAYOUT_ZIPPED:
		return read_zipped(c, ws, off + cell * c->stored, n, dst, once, err);
	default:
		return read_exact(c, c->data, ws, off + cell * c->cell_size, n * c->cell_size, dst, once, err);
	}
}

void tf_pinset_init(tf_pinset *ps, tf_cache *cache)
{
	memset(ps, 0, sizeof(*ps));
	ps->cache = cache;
}

static void unpin_slot(tf_pinset *ps, size_t i)
{
	tf_cache_release(ps->cache, ps->p[i].unit.e, ps->p[i].taken >= ps->p[i].unit.n);
	tf_handle_close(ps->p[i].h);	/* its column may be closed meanwhile */
}

void tf_pinset_release(tf_pinset *ps)
{
	for (size_t i = 0; i < ps->n; i++)
		unpin_slot(ps, i);
	ps->n = 0;
	tf_slices_free(&ps->scratch);
}

/*
 * Pin the decode unit of h holding byte off into slot i.  A one-byte pin
 * gives one slice of that unit's cache entry, which holds the whole unit's
 * decoded bytes: where the slice points into it says where the unit
 * starts.  The entry stays pinned (the slice is the set's) until released.
 */
static tf_status pin_unit_at(tf_pinset *ps, size_t i, tf_handle *h, tf_workspace *ws, uint64_t off,
			     tf_error *err)
{
	tf_slice *sl;
	tf_status rc = tf_handle_pin(h, ps->cache, ws, off, 1, &ps->scratch, err);

	if (rc != TF_OK)
		return rc;
	if (ps->scratch.n != 1) {
		tf_handle_unpin(ps->cache, &ps->scratch, false);
		return tf_err(err, TF_E_CORRUPT, "%s: no unit holds byte %llu", tf_file_name(tf_handle_file(h)),
			      (unsigned long long)off);
	}
	sl = &ps->scratch.v[0];
	ps->p[i].h = tf_handle_ref(h);
	ps->p[i].unit = (tf_slice){ tf_cache_data(sl->e), tf_cache_len(sl->e), sl->e, true };
	ps->p[i].off = off - (uint64_t)(sl->p - ps->p[i].unit.p);
	ps->p[i].taken = 0;
	ps->scratch.n = 0;	/* the entry is ours now: not unpinned with the scratch */
	ps->scratch.bytes = 0;
	return TF_OK;
}

/* The held unit of h holding byte off, pinning it (and letting the least
 * recently used one go) if none does. */
static tf_status pinned_at(tf_pinset *ps, tf_handle *h, tf_workspace *ws, uint64_t off, size_t *slot,
			   tf_error *err)
{
	size_t i, lru = 0;
	tf_status rc;

	for (i = 0; i < ps->n; i++) {
		if (ps->p[i].h == h && off >= ps->p[i].off && off - ps->p[i].off < ps->p[i].unit.n)
			break;
		if (ps->p[i].used < ps->p[lru].used)
			lru = i;
	}
	if (i == ps->n) {
		if (ps->n == TF_PINSET_MAX)
			unpin_slot(ps, i = lru);
		else
			i = ps->n++;
		if ((rc = pin_unit_at(ps, i, h, ws, off, err)) != TF_OK) {
			ps->p[i] = ps->p[--ps->n];
			return rc;
		}
	}
	ps->p[i].used = ++ps->clock;
	*slot = i;
	return TF_OK;
}

tf_status tf_col_fixed_pinned(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t cell, uint64_t n,
			      uint8_t *dst, tf_pinset *ps, tf_error *err)
{
	uint64_t off, size, len;
	size_t i;
	tf_status rc;

	if (c->missing || c->var || c->layout != LAYOUT_PLAIN || c->cache != ps->cache)
		return tf_col_fixed(c, ws, tile, cell, n, dst, false, err);
	if ((rc = tile_range(c->data, tile, &off, &size, err)) != TF_OK ||
	    (rc = cells_in(c->data, size, c->stored, cell, n, err)) != TF_OK)
		return rc;
	off += cell * c->stored;
	for (len = n * c->stored; len > 0 && rc == TF_OK;) {
		if ((rc = pinned_at(ps, c->data, ws, off, &i, err)) == TF_OK) {
			uint64_t end = ps->p[i].off + ps->p[i].unit.n;
			uint64_t take = end - off < len ? end - off : len;

			memcpy(dst, ps->p[i].unit.p + (off - ps->p[i].off), (size_t)take);
			ps->p[i].taken += take;
			dst += take, off += take, len -= take;
		}
	}
	return rc;
}

tf_status tf_col_var_starts(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t cell, uint64_t n,
			    uint64_t *starts, uint64_t *vbase, bool once, tf_error *err)
{
	uint64_t off, size, voff, vsize, end;
	tf_status rc;

	if (c->missing || !c->var)
		return tf_err(err, TF_E_INVAL, "not a var-sized column");
	if ((rc = tile_range(c->data, tile, &off, &size, err)) != TF_OK ||
	    (rc = tile_range(c->vfile, tile, &voff, &vsize, err)) != TF_OK ||
	    (rc = cells_in(c->data, size, 8, cell, n, err)) != TF_OK)
		return rc;
	/* Offsets are relative to the tile's var data; the cell after the
	 * last one starts where the next offset says, or at the tile's end. */
	if ((rc = read_exact(c, c->data, ws, off + cell * 8, n * 8, (uint8_t *)starts, once, err)) != TF_OK)
		return rc;
	end = vsize;
	if (cell + n < size / 8 && (rc = read_exact(c, c->data, ws, off + (cell + n) * 8, 8, (uint8_t *)&end, once, err)) != TF_OK)
		return rc;
	for (uint64_t i = 0; i < n; i++)
		starts[i] = tf_le64((const uint8_t *)&starts[i]);
	starts[n] = tf_le64((const uint8_t *)&end);
	for (uint64_t i = 0; i < n; i++)
		if (starts[i] > starts[i + 1] || starts[i + 1] > vsize)
			return tf_err(err, TF_E_CORRUPT, "%s: tile %llu: cell offsets out of order",
				      tf_file_name(tf_handle_file(c->data)), (unsigned long long)tile);
	if (n == 0 && starts[0] > vsize)
		return tf_err(err, TF_E_CORRUPT, "%s: tile %llu: cell offset past the tile",
			      tf_file_name(tf_handle_file(c->data)), (unsigned long long)tile);
	*vbase = starts[0];
	for (uint64_t i = 0; i <= n; i++)
		starts[i] -= *vbase;
	return TF_OK;
}

tf_status tf_col_var_bytes(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t vbase, uint64_t len,
			   uint8_t *dst, bool once, tf_error *err)
{
	uint64_t voff, vsize;
	tf_status rc;

	if (c->missing || !c->var)
		return tf_err(err, TF_E_INVAL, "not a var-sized column");
	if ((rc = tile_range(c->vfile, tile, &voff, &vsize, err)) != TF_OK)
		return rc;
	if (vbase > vsize || len > vsize - vbase)
		return tf_err(err, TF_E_CORRUPT, "%s: tile %llu: %llu var bytes at %llu of %llu",
			      tf_file_name(tf_handle_file(c->vfile)), (unsigned long long)tile,
			      (unsigned long long)len, (unsigned long long)vbase, (unsigned long long)vsize);
	return read_exact(c, c->vfile, ws, voff + vbase, len, dst, once, err);
}

tf_status tf_col_var_cells(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t cell,
			   uint64_t n, uint64_t *starts, tf_buf *data, bool once, tf_error *err)
{
	uint64_t vbase, base = data->len;
	uint8_t *at;
	tf_status rc;

	if ((rc = tf_col_var_starts(c, ws, tile, cell, n, starts, &vbase, once, err)) != TF_OK)
		return rc;
	if (starts[n] > SIZE_MAX)
		return tf_err(err, TF_E_NOMEM, "cells too large");
	if ((rc = tf_buf_grow(data, (size_t)starts[n], &at, err)) != TF_OK ||
	    (rc = tf_col_var_bytes(c, ws, tile, vbase, starts[n], at, once, err)) != TF_OK)
		return rc;
	data->len += (size_t)starts[n];
	for (uint64_t i = 0; i <= n; i++)
		starts[i] += base;
	return TF_OK;
}

tf_status tf_col_validity(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t cell,
			  uint64_t n, uint8_t *dst, bool once, tf_error *err)
{
	uint64_t off, size;
	tf_status rc;

	if (!c->validity) {
		memset(dst, 1, (size_t)n);
		return TF_OK;
	}
	if ((rc = tile_range(c->validity, tile, &off, &size, err)) != TF_OK ||
	    (rc = cells_in(c->validity, size, 1, cell, n, err)) != TF_OK)
		return rc;
	return read_exact(c, c->validity, ws, off + cell, n, dst, once, err);
}
