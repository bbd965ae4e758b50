/*
 * tf_handle.c - an open decoded file: its bytes read through the cache.
 *
 * A request for [off, end) acquires every unit it overlaps from the cache:
 * ready ones are used as they are, ones another thread is filling are
 * waited for, and absent ones are claimed.  Claimed units are filled in
 * runs: one read of the stored bytes of consecutive units (an object store
 * pays a round trip per read), then each unit decoded from memory.  When
 * workers are idle a request's claims are split between this thread and
 * them, so one 1 MiB request decodes on every core.
 *
 * Decode-ahead: a reader that continues where its last request ended gets
 * the following window of the file queued as jobs of whole runs, which
 * workers claim and fill like a request does.  Units a request gets to
 * first are claimed by the request; the job skips them, so no unit is
 * decoded twice.  The window stays a quarter of the budget at most, so
 * decoded-ahead units are not evicted before the reader gets to them.
 *
 * Every claim is published (filled or failed) before its claimer waits for
 * anything, so waiting threads never wait on each other in a cycle.
 */
#include "cache/tf_handle.h"

#include <stdlib.h>
#include <string.h>

#include "cache/tf_cache.h"
#include "format/tf_file_int.h"

struct tf_handle {
	atomic_int refs;
	tf_file *f;
	tf_object *obj;		/* the stored file, the version indexed */
	tf_object *var;		/* folded offsets: the data file, else NULL */
	_Atomic uint64_t next;	/* where the last request ended */
	_Atomic uint64_t ahead;	/* decode-ahead queued up to here */
	_Atomic uint64_t streak; /* bytes read sequentially so far */
	atomic_bool planned;	/* the objects advised TF_ACCESS_PLANNED */
	atomic_bool no_ahead;	/* its reader gathers pieces of many files (tf_handle_set_ahead) */
};

#define AHEAD_MIN ((uint64_t)8 << 20)	/* decode-ahead window, at least */
#define RUN_MIN ((uint64_t)1 << 20)	/* stored bytes per decode-ahead read, at first */
#define SEQ_SLACK ((uint64_t)4 << 20)	/* concurrent requests arrive out of order */
#define SEQ_FIRST ((uint64_t)1 << 20)	/* a first request this near 0 starts a scan */
#define NO_REQUEST UINT64_MAX		/* r->next before the first request */
/* Decoded bytes per job, at most: far beyond any cache's window (a quarter
 * of its budget), and far below 2^62, so windows of four steps cannot wrap. */
#define STEP_MAX ((uint64_t)1 << 40)

/* A claimed unit, to be filled. */
typedef struct claim {
	size_t tile, u;
	tf_cache_entry *e;
} claim;

/* ---- opening ----------------------------------------------------------------------------- */

tf_status tf_handle_open(tf_file *f, tf_handle **out, tf_error *err)
{
	tf_handle *r = calloc(1, sizeof(*r));
	tf_status rc;

	if (!r)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if ((rc = tf_object_open(f->src, f->rel, &f->ver, &r->obj, err)) == TF_OK && f->folded)
		rc = tf_object_open(f->src, f->var_rel, &f->var_ver, &r->var, err);
	if (rc != TF_OK) {
		tf_object_close(r->obj);
		free(r);
		return tf_err_prefix(err, "%s", f->name);
	}
	atomic_init(&r->refs, 1);
	atomic_init(&r->next, NO_REQUEST);
	atomic_init(&r->ahead, 0);
	atomic_init(&r->streak, 0);
	atomic_init(&r->planned, false);
	atomic_init(&r->no_ahead, false);
	r->f = tf_file_ref(f);
	*out = r;
	return TF_OK;
}

tf_handle *tf_handle_ref(tf_handle *r)
{
	atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
	return r;
}

void tf_handle_close(tf_handle *r)
{
	if (!r || atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
		return;
	tf_object_close(r->obj);
	tf_object_close(r->var);
	tf_file_unref(r->f);
	free(r);
}

tf_file *tf_handle_file(const tf_handle *r)
{
	return r->f;
}

void tf_handle_set_ahead(tf_handle *r, bool on)
{
	atomic_store(&r->no_ahead, !on);
}

/* Our owner id in cache c, or 0 if the file is read through another
 * cache already: owner ids are a cache's own, so one of its ids could name
 * another file's entries in a second cache. */
static uint64_t owner_in(tf_file *f, tf_cache *c)
{
	tf_cache *bound = NULL;
	uint64_t id = 0, fresh;

	if (!atomic_compare_exchange_strong(&f->cache, &bound, c) && bound != c)
		return 0;
	while (!(id = atomic_load(&f->owner))) {
		fresh = tf_cache_owner(c);
		atomic_compare_exchange_strong(&f->owner, &id, fresh);	/* a racing reader's may win */
	}
	return id;
}

/* ---- filling claimed units ---------------------------------------------------------------- */

static void publish_error(tf_cache *c, const claim *v, size_t n, const tf_error *err)
{
	for (size_t i = 0; i < n; i++)
		tf_cache_publish(c, v[i].e, err->code, err);
}

/* Decode units v[0..n) (consecutive in one tile, stored back to back) from
 * their stored bytes at p. */
static void decode_batch(tf_handle *r, tf_cache *c, tf_workspace *ws, const claim *v, size_t n,
			 const uint8_t *p, uint64_t base)
{
	const tile_ent *te = &r->f->tiles[v[0].tile];
	const unit_table *ut = atomic_load_explicit(&te->units, memory_order_acquire);

	for (size_t i = 0; i < n; i++) {
		const unit_ent *u = &ut->u[v[i].u];
		uint8_t *dst = tf_cache_fill_buffer(c, v[i].e);
		tf_error err;
		tf_status rc;

		if (!dst)
			rc = tf_err(&err, TF_E_NOMEM, "cannot allocate %u bytes", u->size);
		else if (te->kind == TILE_FOLDED)
			rc = tf_file_decode_folded(r->f, r->var, ws, u, dst, &err);
		else
			rc = tf_file_decode_unit(r->f, te, u, tf_span_of(p + (u->src_off - base),
					      (size_t)u->src_len), ws, dst, &err);
		if (rc != TF_OK && te->kind == TILE_FOLDED)
			tf_err_prefix(&err, "%s: tile %zu", r->f->name, v[i].tile);
		else if (rc != TF_OK)
			tf_err_prefix(&err, "%s", r->f->name);	/* it names tile and chunk */
		tf_cache_publish(c, v[i].e, rc, &err);
	}
}

/* Fill claims v[0..n), sorted, in runs: consecutive units of one tile read
 * with one read of at most io_size stored bytes (or one unit). */
static void fill_claims(tf_handle *r, tf_cache *c, tf_workspace *ws, const claim *v, size_t n)
{
	tf_buf *io = tf_workspace_buf(ws, TF_WS_IO);
	uint64_t io_size = tf_object_io_size(r->obj);

	for (size_t i = 0, k; i < n; i = k) {
		const tile_ent *te = &r->f->tiles[v[i].tile];
		const unit_table *ut = atomic_load_explicit(&te->units, memory_order_acquire);
		uint64_t base = ut->u[v[i].u].src_off, end = base + ut->u[v[i].u].src_len;
		tf_error err;

		for (k = i + 1; k < n && te->kind != TILE_FOLDED && v[k].tile == v[i].tile &&
		     v[k].u == v[k - 1].u + 1 && ut->u[v[k].u].src_off + ut->u[v[k].u].src_len - base <= io_size;
		     k++)
			end = ut->u[v[k].u].src_off + ut->u[v[k].u].src_len;
		if (te->kind == TILE_FOLDED) {
			decode_batch(r, c, ws, v + i, k - i, NULL, 0);
			continue;
		}
		if (end - base > SIZE_MAX ||
		    tf_buf_reserve(io, (size_t)(end - base), &err) != TF_OK ||
		    tf_object_read(r->obj, base, io->p, (size_t)(end - base), &err) != TF_OK) {
			tf_err_prefix(&err, "%s: tile %zu", r->f->name, v[i].tile);
			publish_error(c, v + i, k - i, &err);
			continue;
		}
		decode_batch(r, c, ws, v + i, k - i, io->p, base);
	}
}

/* A share of a request's claims, filled on a worker. */
typedef struct claims_job {
	tf_handle *r;
	tf_cache *c;
	size_t n;
	claim v[];
} claims_job;

static void run_claims(void *ctx, tf_cache *c, tf_workspace *ws)
{
	claims_job *j = ctx;

	fill_claims(j->r, c, ws, j->v, j->n);	/* the request holds the pins */
	tf_handle_close(j->r);
	free(j);
}

static void drop_claims(void *ctx)
{
	claims_job *j = ctx;
	tf_error err;

	/* Only when the cache is freed under a request: never in a mount. */
	tf_err(&err, TF_E_IO, "%s: shutting down", j->r->f->name);
	publish_error(j->c, j->v, j->n, &err);
	tf_handle_close(j->r);
	free(j);
}

/* Hand claims v[0..n) to a worker: false if it cannot take them. */
static bool share_claims(tf_handle *r, tf_cache *c, const claim *v, size_t n)
{
	claims_job *j = malloc(sizeof(*j) + n * sizeof(claim));
	tf_cache_job job = { run_claims, drop_claims, j };

	if (!j)
		return false;
	j->r = tf_handle_ref(r);
	j->c = c;
	j->n = n;
	memcpy(j->v, v, n * sizeof(claim));
	if (tf_cache_submit(c, &job))
		return true;
	tf_handle_close(r);
	free(j);
	return false;
}

/* Fill a request's claims: shared with idle workers when there are several
 * units, the first share always by this thread. */
static void fill_request(tf_handle *r, tf_cache *c, tf_workspace *ws, claim *v, size_t n)
{
	unsigned workers = tf_cache_workers(c), busy = workers ? tf_cache_backlog(c) : 0;
	size_t parts = 1 + (busy < workers ? workers - busy : 0), share;

	if (parts > n)
		parts = n;
	share = parts ? (n + parts - 1) / parts : n;
	for (size_t at = share; parts > 1 && at < n; at += share) {
		size_t k = n - at < share ? n - at : share;
		if (!share_claims(r, c, v + at, k))
			fill_claims(r, c, ws, v + at, k);
	}
	fill_claims(r, c, ws, v, n < share ? n : share);
}

/* ---- finding units --------------------------------------------------------------------- */

/* The last tile starting at or before off; empty tiles share their start
 * with the next one, so this skips them.  Same for units in a tile. */
static size_t tile_at(const tf_file *f, uint64_t off)
{
	size_t lo = 0, hi = f->ntiles;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		*(f->tiles[mid].off <= off ? &lo : &hi) = mid;
	}
	return lo;
}

static size_t unit_at(const unit_table *t, uint64_t off)
{
	size_t lo = 0, hi = t->n;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		*(t->u[mid].off <= off ? &lo : &hi) = mid;
	}
	return lo;
}

typedef tf_status (*unit_visit)(void *arg, size_t tile, size_t u, const unit_ent *e, tf_error *err);

/* Call visit for every non-empty unit overlapping [from, to), in order,
 * loading unit lists as needed. */
static tf_status each_unit(tf_handle *r, uint64_t from, uint64_t to, unit_visit visit, void *arg,
			   tf_error *err)
{
	const tf_file *f = r->f;
	tf_status rc = TF_OK;

	size_t t;

	if (from >= to || !f->ntiles)
		return TF_OK;
	/* Empty tiles hold no byte but must still prove themselves empty
	 * (loading one decodes it): those starting where we start come
	 * before tile_at's answer, and one at the very end counts too. */
	for (t = tile_at(f, from); t > 0 && f->tiles[t - 1].off >= from && !f->tiles[t - 1].size; t--)
		;
	for (; rc == TF_OK && t < f->ntiles && (f->tiles[t].off < to || (to == f->size && !f->tiles[t].size));
	     t++) {
		const tile_ent *te = &f->tiles[t];
		const unit_table *ut = NULL;

		if (!te->size && te->off >= from && te->kind == TILE_CHUNKED)
			rc = tf_file_load_tile(f, r->obj, t, &ut, err);
		if (!te->size || te->off + te->size <= from)
			continue;
		if ((rc = tf_file_load_tile(f, r->obj, t, &ut, err)) != TF_OK)
			break;
		for (size_t u = unit_at(ut, from); rc == TF_OK && u < ut->n && ut->u[u].off < to; u++)
			if (ut->u[u].size && ut->u[u].off + ut->u[u].size > from)
				rc = visit(arg, t, u, &ut->u[u], err);
	}
	return rc;
}

/* ---- decode-ahead ----------------------------------------------------------------------------- */

typedef struct ahead_job {
	tf_handle *r;
	uint64_t owner, from, to;	/* decoded range, within one tile */
	tf_cache *c;
	claim *v;
	size_t n, cap;
} ahead_job;

static tf_status claim_ahead(void *arg, size_t tile, size_t u, const unit_ent *e, tf_error *err)
{
	ahead_job *j = arg;
	tf_cache_state st;
	tf_cache_entry *ce;
	claim *v;

	/* The reader already went past it (it outran the workers): decoding it
	 * now would only park it in the LRU, where nobody reads it again. */
	if (e->off + e->size <= atomic_load(&j->r->next))
		return TF_OK;
	if (tf_cache_acquire(j->c, j->owner, UNIT_KEY(tile, u), e->size, &ce, &st, err) != TF_OK)
		return TF_OK;	/* best effort: the reader will say what is wrong */
	if (st != TF_CACHE_CLAIMED) {
		tf_cache_release(j->c, ce, false);	/* there, or someone else's */
		return TF_OK;
	}
	if (j->n == j->cap) {
		size_t cap = j->cap ? 2 * j->cap : 32;
		if (!(v = realloc(j->v, cap * sizeof(*v)))) {
			tf_cache_publish(j->c, ce, TF_E_NOMEM, NULL);
			tf_cache_release(j->c, ce, false);
			return TF_E_NOMEM;
		}
		j->v = v;
		j->cap = cap;
	}
	j->v[j->n++] = (claim){ tile, u, ce };
	return TF_OK;
}

static void run_ahead(void *ctx, tf_cache *c, tf_workspace *ws)
{
	ahead_job *j = ctx;

	j->c = c;
	each_unit(j->r, j->from, j->to, claim_ahead, j, NULL);
	fill_claims(j->r, c, ws, j->v, j->n);
	for (size_t i = 0; i < j->n; i++)
		tf_cache_release(c, j->v[i].e, false);
	free(j->v);
	tf_handle_close(j->r);
	free(j);
}

static void drop_ahead(void *ctx)
{
	ahead_job *j = ctx;

	tf_handle_close(j->r);
	free(j);
}

/*
 * Decoded bytes per decode-ahead job: one source read each, of RUN_MIN
 * stored bytes at first, growing with the sequential streak up to the
 * source's preferred size (1 MiB locally, several for an object store, as
 * mountpoint-s3 and TileDB's VFS read).  At least 256 KiB decoded.
 */
static uint64_t ahead_step(const tf_handle *r, uint64_t streak)
{
	uint64_t stored = r->f->ver.size ? r->f->ver.size : 1, run = streak / 2;
	double ratio = (double)r->f->size / (double)stored, want;
	uint64_t step;

	run = run < RUN_MIN ? RUN_MIN : run;
	run = run < tf_object_io_size(r->obj) ? run : tf_object_io_size(r->obj);
	/* The decoded size may be what a layout claims (fragment metadata can
	 * lie): a product past 2^64 would not even convert back. */
	want = (double)run * (ratio > 1 ? ratio : 1);
	step = want < (double)STEP_MAX ? (uint64_t)want : STEP_MAX;
	return step < ((uint64_t)256 << 10) ? (uint64_t)256 << 10 : step;
}

static bool submit_ahead(tf_handle *r, tf_cache *c, uint64_t owner, uint64_t from, uint64_t to)
{
	ahead_job *j = calloc(1, sizeof(*j));
	tf_cache_job job = { run_ahead, drop_ahead, j };

	if (!j)
		return false;
	*j = (ahead_job){ .r = tf_handle_ref(r), .owner = owner, .from = from, .to = to };
	if (tf_cache_submit(c, &job))
		return true;
	drop_ahead(j);
	return false;
}

/* From the first decode-ahead job on, this handle sizes and spreads its
 * reads itself (ahead_step, fill_request): the source is told so, and an
 * object store stops reading ahead ranges the workers fetch anyway.  A
 * handle without workers (tiletool) keeps the source's own read-ahead. */
static void plan_reads(tf_handle *r)
{
	if (atomic_exchange(&r->planned, true))
		return;
	tf_object_advise(r->obj, TF_ACCESS_PLANNED);
	if (r->var)
		tf_object_advise(r->var, TF_ACCESS_PLANNED);
}

/* An object store fetches the stored bytes from the reader's position on,
 * ahead of the decoding, with many requests in flight (its window grows
 * from a first megabyte); decode-ahead runs then find them fetched or in
 * flight.  Tiles are stored in decoded order, so the stored offset of the
 * unit at `end` (of its tile while its units are not listed yet) is where
 * the reader is.  A local file reads ahead in its kernel already. */
static void fetch_ahead(tf_handle *r, uint64_t end)
{
	const tf_file *f = r->f;
	const tile_ent *te;
	const unit_table *ut;
	uint64_t at;

	if (tf_source_local_fd(f->src) >= 0 || end >= f->size || !f->ntiles)
		return;
	te = &f->tiles[tile_at(f, end)];
	if (te->kind == TILE_FOLDED)
		return;	/* its bytes are in the data file, read whole per tile */
	at = te->start;
	if ((ut = atomic_load_explicit(&te->units, memory_order_acquire)) && ut->n) {
		size_t u = unit_at(ut, end);
		at = u < ut->n ? ut->u[u].src_off : at;
	}
	tf_object_prefetch(r->obj, at, UINT64_MAX);
}

/* A reader continuing where it left off: queue the window after `end`,
 * four jobs deep at least (several reads in flight), at most a quarter of
 * the budget. */
static void decode_ahead(tf_handle *r, tf_cache *c, uint64_t owner, uint64_t off, uint64_t end)
{
	const tf_file *f = r->f;
	uint64_t prev = atomic_exchange(&r->next, end), ahead = atomic_load(&r->ahead);
	uint64_t window, step, from, to, streak;

	if (atomic_load_explicit(&r->no_ahead, memory_order_relaxed))
		return;

	/* A first request far into the file is a random read, not the start
	 * of a scan: it must not decode the window after it (a 4 KiB read of
	 * a view decoded 46 tiles). */
	if (prev == NO_REQUEST ? off > SEQ_FIRST : off > prev + SEQ_SLACK || prev > off + SEQ_SLACK) {
		atomic_store(&r->streak, 0);
		return;
	}
	streak = atomic_fetch_add(&r->streak, end - off) + (end - off);
	if (!tf_cache_workers(c))
		return;
	plan_reads(r);
	fetch_ahead(r, end);
	step = ahead_step(r, streak);
	window = 4 * step < AHEAD_MIN ? AHEAD_MIN : 4 * step;
	window = window < tf_cache_budget(c) / 4 ? window : tf_cache_budget(c) / 4;
	step = step < window / 4 ? step : window / 4;
	from = ahead > end ? ahead : end;
	to = end + window < f->size ? end + window : f->size;
	if (from >= to || (to - from < step && to < f->size) ||
	    !atomic_compare_exchange_strong(&r->ahead, &ahead, to))
		return;	/* nothing worth a job yet, or another request queued it */
	while (from < to) {
		size_t t = tile_at(f, from);
		uint64_t tile_end = f->tiles[t].off + f->tiles[t].size;
		uint64_t stop = from + step < to ? from + step : to;

		if (tile_end <= from)
			break;	/* only empty tiles left */
		stop = stop < tile_end ? stop : tile_end;	/* a job stays in one tile */
		if (!submit_ahead(r, c, owner, from, stop)) {
			atomic_store(&r->ahead, from);	/* queue full: later */
			return;
		}
		from = stop;
	}
}

/* ---- requests ----------------------------------------------------------------------------- */

typedef struct pin_job {
	tf_handle *r;
	tf_cache *c;
	uint64_t owner, pos;
	tf_slices *s;
	claim *claims;
	size_t nclaims;
} pin_job;

static claim *claims_of(tf_slices *s)
{
	return (claim *)(void *)(s->v + s->cap);
}

/* Room for one more slice and one more claim in the caller's scratch: one
 * allocation holds both arrays, slices then as many claims, reused from
 * one request to the next. */
static tf_status grow_slices(tf_slices *s, size_t nclaims, tf_error *err)
{
	size_t cap = s->cap ? 2 * s->cap : 64;
	tf_slice *v;

	if (s->n < s->cap)
		return TF_OK;
	if (!(v = malloc(cap * (sizeof(tf_slice) + sizeof(claim)))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if (s->n)
		memcpy(v, s->v, s->n * sizeof(tf_slice));
	if (nclaims)
		memcpy(v + cap, claims_of(s), nclaims * sizeof(claim));
	free(s->v);
	s->v = v;
	s->cap = cap;
	return TF_OK;
}

static tf_status pin_unit(void *arg, size_t tile, size_t u, const unit_ent *e, tf_error *err)
{
	pin_job *j = arg;
	uint64_t from = j->pos - e->off;
	tf_cache_state st;
	tf_cache_entry *ce;
	tf_slice *sl;
	tf_status rc;

	if (j->pos < e->off || from >= e->size)	/* an index that does not add up */
		return tf_err(err, TF_E_CORRUPT, "%s: tile %zu, unit %zu: index inconsistent at %llu",
			      j->r->f->name, tile, u, (unsigned long long)j->pos);
	if ((rc = grow_slices(j->s, j->nclaims, err)) != TF_OK)
		return rc;
	j->claims = claims_of(j->s);
	if ((rc = tf_cache_acquire(j->c, j->owner, UNIT_KEY(tile, u), e->size, &ce, &st, err)) != TF_OK)
		return tf_err_prefix(err, "%s: tile %zu", j->r->f->name, tile);
	sl = &j->s->v[j->s->n++];
	*sl = (tf_slice){ .p = (const uint8_t *)(uintptr_t)from, .n = (size_t)(e->size - from), .e = ce,
			  .whole = from == 0, .last = true };
	if (st == TF_CACHE_CLAIMED)
		j->claims[j->nclaims++] = (claim){ tile, u, ce };
	j->pos += sl->n;
	return TF_OK;
}

/* Wait for every slice (claims shared with workers are filled under our
 * pins), turn offsets into pointers and clip the last.  The slices before
 * the first failing one stay, s->bytes of them; the others are unpinned
 * and that failure returned. */
static tf_status finish_pins(tf_cache *c, tf_slices *s, uint64_t off, uint64_t end, tf_error *err)
{
	tf_status rc, first = TF_OK;
	uint64_t at = 0;
	size_t good = s->n;

	s->bytes = 0;
	for (size_t i = 0; i < s->n; i++) {
		tf_slice *sl = &s->v[i];
		size_t from = (size_t)(uintptr_t)sl->p;

		if ((rc = tf_cache_wait(c, sl->e, first == TF_OK ? err : NULL)) != TF_OK && first == TF_OK) {
			first = rc;
			good = i;
		}
		if (first != TF_OK)
			continue;
		sl->p = tf_cache_data(sl->e) + from;
		if (at + sl->n > end - off) {
			sl->n = (size_t)(end - off - at);
			sl->whole = sl->last = false;
		}
		at += sl->n;
	}
	for (size_t i = good; i < s->n; i++)
		tf_cache_release(c, s->v[i].e, false);
	s->n = good;
	s->bytes = at;
	return first;
}

/* Pin [off, off+len): on a failure, the bytes before the failing unit stay
 * pinned in s (a failure to find units counts from where it happened). */
static tf_status pin_range(tf_handle *r, tf_cache *c, tf_workspace *ws, uint64_t off, size_t len,
			   tf_slices *s, tf_error *err)
{
	tf_file *f = r->f;
	pin_job j = { r, c, owner_in(f, c), off, s, NULL, 0 };
	tf_error werr;
	tf_status rc, wrc;
	uint64_t end;

	s->n = 0;
	s->bytes = 0;
	if (!j.owner)
		return tf_err(err, TF_E_INVAL, "%s: read through a second cache", f->name);
	if (off >= f->size || len == 0)
		return TF_OK;
	end = len < f->size - off ? off + len : f->size;
	decode_ahead(r, c, j.owner, off, end);
	rc = each_unit(r, off, end, pin_unit, &j, err);
	/* Claims are filled before anyone waits, even when a later unit of
	 * the range failed to be found: another reader may be waiting on one
	 * of them, and its intact bytes must not fail with our error. */
	fill_request(r, c, ws, j.claims, j.nclaims);
	/* A unit that failed comes before where finding units failed. */
	if ((wrc = finish_pins(c, s, off, end, &werr)) != TF_OK) {
		rc = wrc;
		if (err)
			*err = werr;
	}
	/* A layout from the index store is a claim until proved up to the
	 * last byte served: a lie anywhere before it moves every offset. */
	if (f->saved && s->bytes &&
	    (wrc = tf_file_prove(f, r->obj, c, ws, off, off + s->bytes, &werr)) != TF_OK) {
		tf_handle_unpin(c, s, false);
		rc = wrc;
		if (err)
			*err = werr;
	}
	return rc;
}

tf_status tf_handle_pin(tf_handle *r, tf_cache *c, tf_workspace *ws, uint64_t off, size_t len,
			tf_slices *s, tf_error *err)
{
	tf_status rc = pin_range(r, c, ws, off, len, s, err);

	if (rc != TF_OK)
		tf_handle_unpin(c, s, false);
	return rc;
}

tf_status tf_handle_pin_prefix(tf_handle *r, tf_cache *c, tf_workspace *ws, uint64_t off, size_t len,
			       tf_slices *s, tf_error *err)
{
	return pin_range(r, c, ws, off, len, s, err);
}

void tf_handle_unpin(tf_cache *c, tf_slices *s, bool passed_on)
{
	for (size_t i = 0; i < s->n; i++)
		tf_cache_release(c, s->v[i].e, passed_on && s->v[i].whole);
	s->n = 0;
	s->bytes = 0;
}

void tf_slices_free(tf_slices *s)
{
	free(s->v);
	*s = (tf_slices){ 0 };
}

static tf_status read_copy(tf_handle *r, tf_cache *c, tf_workspace *ws, uint64_t off, size_t len,
			   uint8_t *dst, size_t *got, bool scan, tf_error *err)
{
	tf_slices s = { 0 };
	tf_status rc = tf_handle_pin(r, c, ws, off, len, &s, err);

	*got = 0;
	for (size_t i = 0; rc == TF_OK && i < s.n; i++) {
		memcpy(dst + *got, s.v[i].p, s.v[i].n);
		*got += s.v[i].n;
	}
	for (size_t i = 0; i < s.n; i++)
		tf_cache_release(c, s.v[i].e, scan && s.v[i].last);
	s.n = 0;
	tf_slices_free(&s);
	return rc;
}

tf_status tf_handle_read(tf_handle *r, tf_cache *c, tf_workspace *ws, uint64_t off, size_t len,
			 uint8_t *dst, size_t *got, tf_error *err)
{
	return read_copy(r, c, ws, off, len, dst, got, false, err);
}

tf_status tf_handle_read_scan(tf_handle *r, tf_cache *c, tf_workspace *ws, uint64_t off, size_t len,
			      uint8_t *dst, size_t *got, tf_error *err)
{
	return read_copy(r, c, ws, off, len, dst, got, true, err);
}

/* ---- units and chunks, for tools --------------------------------------------------------- */

tf_status tf_handle_tile_units(tf_handle *r, size_t tile, size_t *nunits, tf_error *err)
{
	const unit_table *ut = NULL;
	tf_status rc = tf_file_load_tile(r->f, r->obj, tile, &ut, err);

	*nunits = rc == TF_OK ? ut->n : 0;
	return rc;
}

void tf_handle_unit_info(const tf_handle *r, size_t tile, size_t u, tf_unit_info *out)
{
	const unit_ent *e = &atomic_load_explicit(&r->f->tiles[tile].units, memory_order_acquire)->u[u];

	*out = (tf_unit_info){ e->off, e->size, e->src_off, e->src_len, e->first, e->nchunks };
}

/* The stored bytes of a unit, in the workspace's IO buffer. */
static tf_status read_unit(tf_handle *r, tf_workspace *ws, const unit_ent *u, tf_error *err)
{
	tf_buf *io = tf_workspace_buf(ws, TF_WS_IO);
	tf_status rc;

	if (u->src_len > SIZE_MAX)
		return tf_err(err, TF_E_NOMEM, "unit too large");
	if ((rc = tf_buf_reserve(io, (size_t)u->src_len, err)) == TF_OK)
		rc = tf_object_read(r->obj, u->src_off, io->p, (size_t)u->src_len, err);
	return rc;
}

tf_status tf_handle_decode_unit(tf_handle *r, tf_workspace *ws, size_t tile, size_t u, uint8_t *dst,
				tf_error *err)
{
	const tile_ent *te = &r->f->tiles[tile];
	const unit_table *ut = atomic_load_explicit(&te->units, memory_order_acquire);
	tf_status rc;

	if (!ut || u >= ut->n)
		return tf_err(err, TF_E_INVAL, "%s: tile %zu, unit %zu: not loaded", r->f->name, tile, u);
	if (te->kind == TILE_FOLDED) {
		if ((rc = tf_file_decode_folded(r->f, r->var, ws, &ut->u[u], dst, err)) != TF_OK)
			tf_err_prefix(err, "tile %zu", tile);
	} else if ((rc = read_unit(r, ws, &ut->u[u], err)) != TF_OK) {
		tf_err_prefix(err, "tile %zu", tile);
	} else {
		rc = tf_file_decode_unit(r->f, te, &ut->u[u], tf_span_of(tf_workspace_buf(ws, TF_WS_IO)->p,
					 (size_t)ut->u[u].src_len), ws, dst, err);
	}
	return rc == TF_OK ? rc : tf_err_prefix(err, "%s", r->f->name);
}

/* The chunk headers of one unit, as stored. */
static tf_status unit_chunks(tf_handle *r, tf_workspace *ws, const tile_ent *te, const unit_ent *u,
			     tf_chunk_fn fn, void *ctx, tf_error *err)
{
	uint64_t at = 0, off = u->off;
	const uint8_t *p;
	tf_status rc;

	if (te->kind != TILE_CHUNKED) {
		tf_chunk_info ci = { u->off, u->size, u->src_off, u->src_len };
		return fn(ctx, u->first, &ci) ? TF_E_INVAL : TF_OK;
	}
	if ((rc = read_unit(r, ws, u, err)) != TF_OK)
		return rc;
	p = tf_workspace_buf(ws, TF_WS_IO)->p;	/* after read_unit: it may move */
	for (uint32_t i = 0; i < u->nchunks; i++) {
		tf_chunk_header h;
		tf_chunk_info ci;

		if (u->src_len - at < TF_CHUNK_HEADER_SIZE)
			return tf_err(err, TF_E_CORRUPT, "chunk %u: header past its unit", u->first + i);
		tf_chunk_header_read(p + at, &h);
		ci = (tf_chunk_info){ off, h.orig_len, u->src_off + at, tf_chunk_stored_size(&h) };
		if (fn(ctx, u->first + i, &ci))
			return TF_E_INVAL;
		at += ci.src_len;
		off += h.orig_len;
	}
	return TF_OK;
}

tf_status tf_handle_each_chunk(tf_handle *r, tf_workspace *ws, size_t tile, tf_chunk_fn fn, void *ctx,
			       tf_error *err)
{
	const tile_ent *te = &r->f->tiles[tile];
	const unit_table *ut = NULL;
	tf_status rc = tf_file_load_tile(r->f, r->obj, tile, &ut, err);

	for (size_t u = 0; rc == TF_OK && u < ut->n; u++)
		rc = unit_chunks(r, ws, te, &ut->u[u], fn, ctx, err);
	return rc == TF_OK || rc == TF_E_INVAL ? TF_OK : rc;
}
