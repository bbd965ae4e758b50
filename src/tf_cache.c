/*
 * tf_cache.c - byte-budgeted LRU of decoded chunks with single-flight loads
 * and a decode-ahead worker pool.
 *
 * One mutex guards the table, the LRU list and the job queue; it is never
 * held while decoding.  An entry is LOADING while one thread decodes it;
 * others wanting it wait on `loaded`.  Entries removed from the table
 * (evicted, dropped, failed) are `dead` and freed by their last release.
 */
#include "tf_cache.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef enum { E_LOADING, E_READY, E_FAILED } entry_state;

struct tf_cache_entry {
	uint64_t owner, index;
	uint8_t *data;
	size_t cap;		/* bytes allocated, what the budget counts */
	uint32_t len;
	int refs;
	entry_state state;
	tf_status rc;		/* why loading failed */
	bool dead;
	tf_error *err;		/* why loading failed, for the waiters */
	tf_cache_entry *hnext;	/* hash chain */
	tf_cache_entry *prev, *next; /* LRU list, least recent first */
};

typedef struct job {
	uint64_t owner, index;
	uint32_t len;
	tf_cache_source src;
} job;

#define QUEUE_CAP 256

/* Buffers for chunks of 32-64 KiB, TileDB's usual size, come from 2 MiB
 * slabs the kernel may back with a huge page: filling a cold cache then
 * faults once per 2 MiB instead of once per 4 KiB, and evicted buffers are
 * reused, not freed. */
#define SLOT_BYTES ((size_t)64 << 10)
#define SLAB_BYTES ((size_t)2 << 20)

typedef struct free_slot {
	struct free_slot *next;
} free_slot;

struct tf_cache {
	pthread_mutex_t lock;
	pthread_cond_t loaded, work;
	tf_cache_entry **buckets;
	size_t mask;
	tf_cache_entry lru;	/* sentinel */
	size_t budget, used, entries, pinned;
	uint64_t next_owner, hits, misses, evictions, prefetches;
	pthread_t *threads;
	unsigned nworkers;
	job queue[QUEUE_CAP];
	size_t qhead, qlen;
	bool stopping;
	free_slot *slots;	/* recycled SLOT_BYTES buffers */
	void **slabs;
	size_t nslabs, slab_cap;
	size_t slab_used;	/* bytes handed out of the newest slab */
};

/* ---- table and LRU (lock held) ---------------------------------------------------- */

static size_t slot(const tf_cache *c, uint64_t owner, uint64_t index)
{
	uint64_t h = owner * 0x9e3779b97f4a7c15ull ^ (index + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull;
	return (size_t)(h ^ h >> 29) & c->mask;
}

static tf_cache_entry *find(const tf_cache *c, uint64_t owner, uint64_t index)
{
	tf_cache_entry *e = c->buckets[slot(c, owner, index)];

	while (e && (e->owner != owner || e->index != index))
		e = e->hnext;
	return e;
}

static void lru_unlink(tf_cache_entry *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
	e->prev = e->next = e;
}

static void lru_push(tf_cache *c, tf_cache_entry *e)	/* as most recent */
{
	e->prev = c->lru.prev;
	e->next = &c->lru;
	c->lru.prev->next = e;
	c->lru.prev = e;
}

static void table_insert(tf_cache *c, tf_cache_entry *e)
{
	size_t s = slot(c, e->owner, e->index);

	e->hnext = c->buckets[s];
	c->buckets[s] = e;
	lru_push(c, e);
	c->entries++;
	c->used += e->cap;
}

/* Take e out of the table; it is freed now if nobody holds it. */
static void table_remove(tf_cache *c, tf_cache_entry *e)
{
	tf_cache_entry **p = &c->buckets[slot(c, e->owner, e->index)];

	while (*p != e)
		p = &(*p)->hnext;
	*p = e->hnext;
	lru_unlink(e);
	c->entries--;
	c->used -= e->cap;
	e->dead = true;
}

/* ---- buffers (lock held) ------------------------------------------------------------ */

static bool slot_sized(size_t len)
{
	return len > SLOT_BYTES / 2 && len <= SLOT_BYTES;
}

/* A new slab, left untouched: its pages are faulted in (and zeroed by the
 * kernel) by the decoder that first writes a slot, outside the lock. */
static bool add_slab(tf_cache *c)
{
	void *p, **v;

	if (c->nslabs == c->slab_cap) {
		size_t cap = c->slab_cap ? 2 * c->slab_cap : 16;
		if (!(v = realloc(c->slabs, cap * sizeof(*v))))
			return false;
		c->slabs = v;
		c->slab_cap = cap;
	}
	if (posix_memalign(&p, SLAB_BYTES, SLAB_BYTES) != 0)
		return false;
#ifdef MADV_HUGEPAGE
	madvise(p, SLAB_BYTES, MADV_HUGEPAGE);
#endif
	c->slabs[c->nslabs++] = p;
	c->slab_used = 0;
	return true;
}

/* A slot: a recycled one, else the next untouched one of the newest slab. */
static uint8_t *get_slot(tf_cache *c)
{
	free_slot *f = c->slots;

	if (f) {
		c->slots = f->next;
		return (uint8_t *)f;
	}
	if ((!c->nslabs || c->slab_used == SLAB_BYTES) && !add_slab(c))
		return NULL;
	c->slab_used += SLOT_BYTES;
	return (uint8_t *)c->slabs[c->nslabs - 1] + c->slab_used - SLOT_BYTES;
}

/* Buffers of exactly SLOT_BYTES are slots: others never have that size. */
static void put_buffer(tf_cache *c, uint8_t *p, size_t cap)
{
	free_slot *f = (free_slot *)p;

	if (p && cap == SLOT_BYTES) {
		f->next = c->slots;
		c->slots = f;
	} else {
		free(p);
	}
}

static void entry_free(tf_cache *c, tf_cache_entry *e)
{
	put_buffer(c, e->data, e->cap);
	free(e->err);
	free(e);
}

/* Evict least recently used idle entries until `need` more bytes fit.  One
 * victim of a fitting size may hand its buffer over instead of freeing it:
 * most chunks are 64 KiB, so buffers are recycled rather than churned. */
static void make_room(tf_cache *c, size_t need, uint8_t **reuse, size_t *reuse_cap)
{
	tf_cache_entry *e = c->lru.next;

	while (e != &c->lru && c->used + need > c->budget) {
		tf_cache_entry *victim = e;

		e = e->next;
		if (victim->refs || victim->state != E_READY)
			continue;
		table_remove(c, victim);
		c->evictions++;
		if (reuse && !*reuse && victim->cap != SLOT_BYTES && victim->cap >= need &&
		    victim->cap <= 2 * need) {
			*reuse = victim->data;
			*reuse_cap = victim->cap;
			victim->data = NULL;
		}
		entry_free(c, victim);
	}
}

/* A queued job for (owner, index), or NULL (lock held).  Owner ids are
 * never 0: a job whose owner is 0 was cancelled. */
static job *queued(tf_cache *c, uint64_t owner, uint64_t index)
{
	for (size_t i = 0; i < c->qlen; i++) {
		job *j = &c->queue[(c->qhead + i) % QUEUE_CAP];

		if (j->owner == owner && j->index == index)
			return j;
	}
	return NULL;
}

/* ---- loading -------------------------------------------------------------------------- */

/* A new LOADING entry holding one reference (lock held). */
static tf_cache_entry *start_load(tf_cache *c, uint64_t owner, uint64_t index, uint32_t len)
{
	tf_cache_entry *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->owner = owner;
	e->index = index;
	e->len = len;
	e->refs = 1;
	e->state = E_LOADING;
	if (slot_sized(len)) {
		make_room(c, SLOT_BYTES, NULL, NULL);
		e->data = get_slot(c);	/* NULL: run_load reports it */
		e->cap = SLOT_BYTES;
	} else {
		make_room(c, len, &e->data, &e->cap);
		if (!e->data)
			e->cap = len;	/* allocated by the loader, outside the lock */
	}
	table_insert(c, e);
	c->pinned++;
	return e;
}

static void release_locked(tf_cache *c, tf_cache_entry *e)
{
	if (--e->refs > 0)
		return;
	c->pinned--;
	if (e->dead)
		entry_free(c, e);
	else if (c->used > c->budget)
		make_room(c, 0, NULL, NULL);
}

/* Decode into e with no lock held, then publish the result to waiters. */
static tf_status run_load(tf_cache *c, tf_cache_entry *e, const tf_cache_source *src,
			  tf_workspace *ws, tf_error *err)
{
	tf_status rc;

	if (!ws)
		rc = tf_err(err, TF_E_NOMEM, "no workspace");
	else if (!e->data && (e->cap == SLOT_BYTES || !(e->data = malloc(e->cap ? e->cap : 1))))
		rc = tf_err(err, TF_E_NOMEM, "cannot allocate %u bytes for a chunk", e->len);
	else
		rc = src->load(src->ctx, e->index, e->data, ws, err);
	pthread_mutex_lock(&c->lock);
	e->state = rc == TF_OK ? E_READY : E_FAILED;
	if (rc != TF_OK) {
		/* Failures are not cached: the next reader tries again. */
		e->rc = rc;
		if (err && (e->err = malloc(sizeof(*e->err))))
			*e->err = *err;
		if (!e->dead)
			table_remove(c, e);
	}
	pthread_cond_broadcast(&c->loaded);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* Wait for a chunk someone else is loading (lock held, e pinned). */
static tf_status await(tf_cache *c, tf_cache_entry *e, tf_error *err)
{
	while (e->state == E_LOADING)
		pthread_cond_wait(&c->loaded, &c->lock);
	if (e->state == E_READY)
		return TF_OK;
	if (e->err && err)
		*err = *e->err;
	else if (!e->err)
		tf_err(err, e->rc, "chunk %llu could not be decoded", (unsigned long long)e->index);
	return e->rc;
}

tf_status tf_cache_get(tf_cache *c, uint64_t owner, uint64_t index, uint32_t len,
		       const tf_cache_source *src, tf_workspace *ws, tf_cache_entry **out,
		       tf_error *err)
{
	tf_cache_entry *e;
	job *q;
	tf_status rc;

	/* A chunk's length comes from its header, which may lie (up to 4 GiB):
	 * one larger than the whole budget is refused before anything is
	 * evicted or allocated for it. */
	if (len > c->budget)
		return tf_err(err, TF_E_CORRUPT, "a chunk of %u bytes is larger than the cache budget "
			      "(%zu bytes; corrupt, or raise cache_size)", len, c->budget);
	pthread_mutex_lock(&c->lock);
	if ((e = find(c, owner, index))) {
		if (e->refs++ == 0)
			c->pinned++;
		c->hits++;
		if (e->state == E_READY) {
			lru_unlink(e);
			lru_push(c, e);
		}
		if ((rc = await(c, e, err)) != TF_OK)
			release_locked(c, e);
		pthread_mutex_unlock(&c->lock);
		*out = rc == TF_OK ? e : NULL;
		return rc;
	}
	c->misses++;
	/* A reader got here before the worker: that decode-ahead job is moot. */
	if (c->nworkers && (q = queued(c, owner, index)))
		q->owner = 0;
	e = start_load(c, owner, index, len);
	pthread_mutex_unlock(&c->lock);
	if (!e)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if ((rc = run_load(c, e, src, ws, err)) != TF_OK) {
		tf_cache_release(c, e);
		e = NULL;
	}
	*out = e;
	return rc;
}

const uint8_t *tf_cache_data(const tf_cache_entry *e)
{
	return e->data;
}

void tf_cache_release(tf_cache *c, tf_cache_entry *e)
{
	pthread_mutex_lock(&c->lock);
	release_locked(c, e);
	pthread_mutex_unlock(&c->lock);
}

void tf_cache_release_done(tf_cache *c, tf_cache_entry *e)
{
	pthread_mutex_lock(&c->lock);
	if (!e->dead && e->state == E_READY) {	/* first in line for eviction */
		lru_unlink(e);
		e->next = c->lru.next;
		e->prev = &c->lru;
		c->lru.next->prev = e;
		c->lru.next = e;
	}
	release_locked(c, e);
	pthread_mutex_unlock(&c->lock);
}

/* ---- decode-ahead workers ------------------------------------------------------------------ */

void tf_cache_prefetch(tf_cache *c, uint64_t owner, uint64_t index, uint32_t len,
		       const tf_cache_source *src)
{
	if (!c->nworkers || len > c->budget)
		return;
	pthread_mutex_lock(&c->lock);
	if (!c->stopping && c->qlen < QUEUE_CAP && !find(c, owner, index) && !queued(c, owner, index)) {
		job *j = &c->queue[(c->qhead + c->qlen++) % QUEUE_CAP];

		*j = (job){ owner, index, len, *src };
		if (src->hold)
			src->hold(src->ctx);
		pthread_cond_signal(&c->work);
	}
	pthread_mutex_unlock(&c->lock);
}

static void *worker_main(void *arg)
{
	tf_cache *c = arg;
	tf_workspace *ws = tf_workspace_new();
	tf_error err = { TF_OK, "" };

	pthread_mutex_lock(&c->lock);
	for (;;) {
		tf_cache_entry *e;
		job j;

		while (!c->stopping && c->qlen == 0)
			pthread_cond_wait(&c->work, &c->lock);
		if (c->stopping)
			break;
		j = c->queue[c->qhead];
		c->qhead = (c->qhead + 1) % QUEUE_CAP;
		c->qlen--;
		e = !j.owner || find(c, j.owner, j.index) ? NULL : start_load(c, j.owner, j.index, j.len);
		c->prefetches += e != NULL;
		pthread_mutex_unlock(&c->lock);
		if (e) {
			run_load(c, e, &j.src, ws, &err);
			tf_cache_release(c, e);
		}
		/* Outside the lock: dropping the last hold may free the source,
		 * which calls back into the cache. */
		if (j.src.release)
			j.src.release(j.src.ctx);
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	tf_workspace_free(ws);
	return NULL;
}

unsigned tf_cache_workers(const tf_cache *c)
{
	return c->nworkers;
}

/* ---- life cycle ---------------------------------------------------------------------------- */

tf_status tf_cache_new(size_t budget, unsigned workers, tf_cache **out, tf_error *err)
{
	tf_cache *c = calloc(1, sizeof(*c));
	size_t nb = 1024;

	if (!c)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	while (nb < budget / 16384 && nb < ((size_t)1 << 24))
		nb *= 2;
	c->buckets = calloc(nb, sizeof(*c->buckets));
	c->threads = calloc(workers ? workers : 1, sizeof(*c->threads));
	if (!c->buckets || !c->threads) {
		free(c->buckets);
		free(c->threads);
		free(c);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	c->mask = nb - 1;
	c->budget = budget;
	c->lru.prev = c->lru.next = &c->lru;
	c->next_owner = 1;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->loaded, NULL);
	pthread_cond_init(&c->work, NULL);
	for (; c->nworkers < workers; c->nworkers++)
		if (pthread_create(&c->threads[c->nworkers], NULL, worker_main, c) != 0)
			break;	/* fewer workers: less decode-ahead, still correct */
	*out = c;
	return TF_OK;
}

void tf_cache_free(tf_cache *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->stopping = true;
	pthread_cond_broadcast(&c->work);
	pthread_mutex_unlock(&c->lock);
	for (unsigned i = 0; i < c->nworkers; i++)
		pthread_join(c->threads[i], NULL);
	for (; c->qlen; c->qlen--, c->qhead = (c->qhead + 1) % QUEUE_CAP)
		if (c->queue[c->qhead].src.release)
			c->queue[c->qhead].src.release(c->queue[c->qhead].src.ctx);
	while (c->lru.next != &c->lru) {
		tf_cache_entry *e = c->lru.next;
		table_remove(c, e);
		entry_free(c, e);
	}
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->loaded);
	pthread_cond_destroy(&c->work);
	for (size_t i = 0; i < c->nslabs; i++)
		free(c->slabs[i]);
	free(c->slabs);
	free(c->buckets);
	free(c->threads);
	free(c);
}

uint64_t tf_cache_owner(tf_cache *c)
{
	uint64_t id;

	pthread_mutex_lock(&c->lock);
	id = c->next_owner++;
	pthread_mutex_unlock(&c->lock);
	return id;
}

void tf_cache_drop(tf_cache *c, uint64_t owner)
{
	pthread_mutex_lock(&c->lock);
	for (tf_cache_entry *e = c->lru.next, *next; e != &c->lru; e = next) {
		next = e->next;
		if (e->owner != owner)
			continue;
		table_remove(c, e);
		if (e->refs == 0)
			entry_free(c, e);
	}
	pthread_mutex_unlock(&c->lock);
}

void tf_cache_get_stats(tf_cache *c, tf_cache_stats *s)
{
	pthread_mutex_lock(&c->lock);
	*s = (tf_cache_stats){ c->budget, c->used, c->entries, c->pinned, c->hits, c->misses,
			       c->evictions, c->prefetches };
	pthread_mutex_unlock(&c->lock);
}
