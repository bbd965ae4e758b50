/*
 * tf_snapshot_facts.c - loading fragments' metadata on demand: its facts
 * (dense boxes, sparse lower corners) kept in chunks charged to the budget,
 * and the failures remembered.
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

#include "util/tf_fanout.h"

/* ---- metadata, on demand ------------------------------------------------------------------- */

/* A domain value (integer or date/time type t) minus the domain's lower
 * bound, as the unsigned distance. */
static uint64_t dim_offset(tf_datatype t, const uint8_t *v, const uint8_t *lo)
{
	unsigned size = tf_datatype_size(t);
	uint64_t a = tf_le_n(v, size), b = tf_le_n(lo, size);

	if ((tf_datatype_is_signed(t) || tf_datatype_is_datetime(t)) && size < 8) {
		a = (uint64_t)((int64_t)(a << (64 - 8 * size)) >> (64 - 8 * size));
		b = (uint64_t)((int64_t)(b << (64 - 8 * size)) >> (64 - 8 * size));
	}
	return a - b;
}

/*
 * Boxes and corners live in chunks of the snapshot's (a malloc of 12 bytes
 * per fragment costs 32, and 200,000 of them count): 8-aligned pieces, the
 * chunks linked through their first 8 bytes, freed with the snapshot.
 */
#define FACTS_CHUNK ((size_t)64 << 10)

/* Memory the snapshot holds, charged to the cache's budget (given back
 * when it goes): 200,000 fragments are 30 MB a snapshot keeps as long as
 * the views live, which the cache makes room for. */
void snap_charge(tf_snapshot *s, size_t n)
{
	atomic_fetch_add(&s->charged, n);
	tf_cache_charge(s->cache, (ptrdiff_t)n);
}

static void *facts_alloc(tf_snapshot *s, size_t n)
{
	uint8_t *chunk, *p = NULL;
	size_t got = 0;

	n = (n + 7) & ~(size_t)7;
	pthread_mutex_lock(&s->load_lock);
	if (n + 8 > FACTS_CHUNK) {	/* a huge one: a chunk of its own, linked second */
		if ((chunk = malloc(n + 8))) {
			uint8_t *after = NULL;

			if (s->facts) {
				memcpy(&after, s->facts, sizeof(after));
				memcpy(s->facts, &chunk, sizeof(chunk));
			} else {
				s->facts = chunk;
				s->facts_used = FACTS_CHUNK;	/* full: the next gets a chunk */
			}
			memcpy(chunk, &after, sizeof(after));
			p = chunk + 8;
			got = n + 8;
		}
	} else {
		if (!s->facts || s->facts_used + n > FACTS_CHUNK) {
			if ((chunk = malloc(FACTS_CHUNK))) {
				memcpy(chunk, &s->facts, sizeof(s->facts));
				s->facts = chunk;
				s->facts_used = 8;
				got = FACTS_CHUNK;
			}
		}
		if (s->facts && s->facts_used + n <= FACTS_CHUNK) {
			p = s->facts + s->facts_used;
			s->facts_used += n;
		}
	}
	pthread_mutex_unlock(&s->load_lock);
	if (p)
		memset(p, 0, n);
	if (got)
		snap_charge(s, got);
	return p;
}

/* Dense fragments: the non-empty domain and its tiles, per dimension. */
static tf_status dense_box(tf_snapshot *s, tf_snap_frag *f, const tf_fragment *fr, tf_error *err)
{
	const tf_schema *sc = f->schema;
	size_t n = sc->ndims;
	uint64_t *lo, *hi, *tlo, *tn;
	tf_span l, h;
	tf_status rc;

	if (!(f->box = facts_alloc(s, (4 * n + 1) * sizeof(uint64_t))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	lo = f->box, hi = lo + n, tlo = hi + n, tn = tlo + n;
	f->ntiles = 1;
	for (size_t d = 0; d < n; d++) {
		const tf_field *dim = &sc->dims[d];
		unsigned size = tf_datatype_size(dim->type);
		uint64_t ext = tf_schema_dim_extent(dim);

		if ((rc = tf_fragment_ned(fr, d, &l, &h, err)) != TF_OK)
			return rc;
		if (!dim->has_extent || ext == 0 || tf_datatype_is_real(dim->type) || l.n != size || h.n != size)
			return tf_err(err, TF_E_UNSUPPORTED, "fragment %s: dimension %s is not an integer "
				      "dimension with a tile extent", f->name, dim->name);
		lo[d] = dim_offset(dim->type, l.p, dim->domain);
		hi[d] = dim_offset(dim->type, h.p, dim->domain);
		if (lo[d] > hi[d] || hi[d] > dim_offset(dim->type, dim->domain + size, dim->domain))
			return tf_err(err, TF_E_CORRUPT, "fragment %s: non-empty domain of %s outside the "
				      "domain", f->name, dim->name);
		tlo[d] = lo[d] / ext;
		tn[d] = hi[d] / ext - tlo[d] + 1;
		if (f->ntiles > UINT64_MAX / tn[d])
			return tf_err(err, TF_E_CORRUPT, "fragment %s: too many tiles", f->name);
		f->ntiles *= tn[d];
	}
	return TF_OK;
}

/* Sparse fragments: the lower corner of the non-empty domain, packed (see
 * tf_snap_frag.corner); none when the metadata has no usable domain (formats
 * 1-2, a null domain, or formats 1-4 storing every dimension in the first
 * one's type when the types differ). */
static void sparse_corner(tf_snapshot *s, tf_snap_frag *f, const tf_fragment *fr)
{
	const tf_schema *sc = f->schema;
	size_t total = 0, at = 0;
	tf_span lo, hi;

	for (size_t d = 0; d < sc->ndims; d++) {
		const tf_field *dim = &sc->dims[d];

		if (tf_fragment_ned(fr, d, &lo, &hi, NULL) != TF_OK || lo.n > UINT32_MAX ||
		    (dim->cell_val_num != TF_CELL_VAR && lo.n != tf_datatype_size(dim->type)))
			return;
		total += 4 + ((lo.n + 3) & ~(size_t)3);
	}
	if (!sc->ndims || !(f->corner = facts_alloc(s, total)))
		return;
	for (size_t d = 0; d < sc->ndims; d++) {
		tf_fragment_ned(fr, d, &lo, &hi, NULL);
		tf_put_le32(f->corner + at, (uint32_t)lo.n);
		memcpy(f->corner + at + 4, lo.p, lo.n);
		at += 4 + ((lo.n + 3) & ~(size_t)3);
	}
}

static tf_status read_facts(tf_snapshot *s, tf_snap_frag *f, tf_error *err)
{
	char rel[600];
	tf_fragment *fr;
	tf_status rc;

	if (!snap_frag_rel(f, rel, sizeof(rel)))
		return tf_err(err, TF_E_INVAL, "fragment %s: name too long", f->name);
	if ((rc = tf_array_fragment(s->a, rel, &fr, err)) != TF_OK)
		return rc;
	f->schema = tf_fragment_schema(fr);
	f->dense = tf_fragment_dense(fr);
	f->has_ts = tf_fragment_has_timestamps(fr);
	f->has_dm = tf_fragment_has_delete_meta(fr);
	if (f->dense) {
		rc = dense_box(s, f, fr, err);
	} else {
		f->ntiles = tf_fragment_sparse_tiles(fr);
		f->last_cells = f->ntiles ? tf_fragment_tile_cells(fr, f->ntiles - 1, f->ntiles) : 0;
		sparse_corner(s, f, fr);
	}
	tf_array_fragment_put(s->a, fr);
	return rc;
}

static tf_status failure_of(tf_snapshot *s, size_t frag, tf_error *err)
{
	tf_status rc = TF_E_CORRUPT;

	pthread_mutex_lock(&s->load_lock);
	for (failure *f = s->failures; f; f = f->next)
		if (f->frag == frag) {
			rc = f->error.code ? f->error.code : TF_E_CORRUPT;
			if (err)
				*err = f->error;
			break;
		}
	pthread_mutex_unlock(&s->load_lock);
	return rc;
}

/* Read fragment frag's facts: the reader that moved it from UNREAD to
 * LOADING does, with no lock held; others wanting it wait. */
static void load_one(tf_snapshot *s, size_t frag)
{
	tf_snap_frag *f = &s->frags[frag];
	failure *fl = NULL;
	tf_error e;
	bool ok = read_facts(s, f, &e) == TF_OK;

	if (!ok) {
		f->box = NULL;	/* its piece of the chunks stays unused */
		if ((fl = calloc(1, sizeof(*fl)))) {
			fl->frag = frag;
			fl->error = e;
		}
	}
	pthread_mutex_lock(&s->load_lock);
	if (fl) {
		fl->next = s->failures;
		s->failures = fl;
	}
	atomic_store_explicit(&s->meta[frag], ok ? META_READ : META_FAILED, memory_order_release);
	pthread_cond_broadcast(&s->loaded);
	pthread_mutex_unlock(&s->load_lock);
}

tf_status tf_snapshot_load(tf_snapshot *s, size_t frag, tf_error *err)
{
	uint8_t st = atomic_load_explicit(&s->meta[frag], memory_order_acquire), unread = META_UNREAD;

	if (st == META_UNREAD && atomic_compare_exchange_strong(&s->meta[frag], &unread, META_LOADING))
		load_one(s, frag);
	if ((st = atomic_load_explicit(&s->meta[frag], memory_order_acquire)) == META_LOADING) {
		pthread_mutex_lock(&s->load_lock);
		while ((st = atomic_load_explicit(&s->meta[frag], memory_order_acquire)) == META_LOADING)
			pthread_cond_wait(&s->loaded, &s->load_lock);
		pthread_mutex_unlock(&s->load_lock);
	}
	return st == META_READ ? TF_OK : failure_of(s, frag, err);
}

/*
 * Reading every visible fragment's metadata is an open and a read or two
 * per fragment (200,000 fragments: 600,000 system calls, and as many
 * blocks from the disk when cold), so it runs on TF_FANOUT_IO threads:
 * on the cache's 3 workers and the caller, the first record of
 * 200,000 one-cell fragments' cells.csv took 5.9 s once their
 * directories were walked (cold data), 3.3 s on 48 threads.  The
 * caller's thread asks whether to stop between steps.
 */
#define LOAD_STEP 64

typedef struct bulk_load {
	tf_snapshot *s;
	const tf_cancel *cancel;
} bulk_load;

static bool bulk_step(void *ctx, size_t lo, size_t hi, unsigned slot)
{
	bulk_load *b = ctx;

	for (size_t i = lo; i < hi; i++)
		tf_snapshot_load(b->s, b->s->visible[i], NULL);
	return slot == 0 && tf_cancelled(b->cancel);
}

tf_status tf_snapshot_load_visible(tf_snapshot *s, const tf_cancel *cancel, tf_error *err)
{
	bulk_load b = { s, cancel };
	unsigned threads = s->nvisible > 4 * LOAD_STEP ? TF_FANOUT_IO : 1;
	bool stopped;
	tf_status rc = TF_OK;

	tf_fanout(s->nvisible, LOAD_STEP, threads, bulk_step, &b, &stopped);
	if (stopped)
		return tf_err(err, TF_E_INTR, "interrupted reading fragment metadata");
	for (size_t i = 0; i < s->nvisible && rc == TF_OK; i++)
		rc = tf_snapshot_load(s, s->visible[i], err);	/* every answer, in order */
	return rc;
}
