/*
 * tf_cache.c - byte-budgeted LRU of decoded chunks with single-flight claims
 * and a worker pool.
 *
 * Design, with the numbers behind it:
 *
 *  - One mutex guards the table and both lists (a tf_lru set, util/tf_lru.h),
 *    the buffer pools and the job queue.  Every operation under it is O(1)
 *    (amortised: the table doubles when it holds two entries per bucket), nothing under it reads, decodes
 *    or copies chunk bytes, so a 1 MiB request's 16 chunk lookups cost a
 *    few hundred nanoseconds of lock time against ~1 ms of decoding.
 *
 *  - An entry costs its buffer plus ENTRY_COST bytes of bookkeeping, both
 *    charged to the budget: ten million 1-byte chunks under a 16 MiB budget
 *    hold ~130,000 entries, not ten million.
 *
 *  - Buffers for chunks of 32-64 KiB (TileDB's usual size) are 64 KiB
 *    slots carved from 2 MiB slabs that the kernel may back with a huge
 *    page; freed slots are reused, those beyond a 16th of the budget
 *    given back to the kernel (put_slot).  Other sizes are malloc'd by
 *    the filler, outside the lock.
 *
 *  - Two lists of idle entries: the LRU (least recent first) and the done
 *    list.  A pinned entry is on neither (it joins one at its last
 *    release), so evicting takes the first of a list, never walks past
 *    pinned ones: a request pinning 200,000 one-byte units of a file of
 *    tiny tiles, more than the budget holds, made every claim walk them
 *    all (a 200 KB file took 63 s through the mount; now milliseconds).
 *    A reader that passed a whole chunk on to the kernel's page cache
 *    releases it as done; done chunks beyond DONE_KEEP go back to the
 *    pools at once.  A
 *    cold 256 MiB scan thus cycles through a few MiB of hot buffers: on
 *    a fresh daemon, touching new memory cost more CPU (the kernel zeroing
 *    huge pages: 45% of the daemon's profile) than decoding did.
 *
 *  - An entry is LOADING while its claimer fills it; others wanting it wait
 *    on `loaded`.  Failures are not kept.  Entries taken out of the table
 *    (evicted, failed) are `dead` and freed by their last release.
 */
#include "cache/tf_cache.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "util/tf_hash.h"
#include "util/tf_lru.h"

typedef enum { E_LOADING, E_READY, E_FAILED } entry_state;
enum { L_LRU, L_DONE };	/* tf_lru's lists */

/* Keyed (in c->set) until evicted or failed, then `dead`: freed by its
 * last release.  On a list (L_LRU, L_DONE) only while idle and READY. */
struct tf_cache_entry {
	tf_lru_node node;	/* refs: its pins */
	uint64_t owner, index;
	uint8_t *data;
	size_t cap;		/* bytes of buffer charged (a slot, or len) */
	uint32_t len;
	uint8_t state;
	bool to_done;		/* released as done since last acquired: the done list when idle */
	tf_status rc;		/* why filling failed */
	tf_error *err;		/* the same, for waiters */
	tf_cache_entry *spare_next;	/* free list link when recycled */
};

#define E_OF(n) TF_LRU_ENTRY(n, tf_cache_entry, node)

/* >= sizeof(entry) + its share of the table + a malloc'd buffer's header
 * and rounding (a 10-byte chunk takes 32): 467,000 tiny chunks of 200,000
 * one-cell fragments filled a 64 MiB budget with 79 MB at 128. */
#define ENTRY_COST ((size_t)160)
#define SLOT_BYTES ((size_t)64 << 10)
#define SLAB_BYTES ((size_t)2 << 20)
#define QUEUE_CAP 256
#define SPARE_ENTRIES 4096		/* entry structs kept for reuse */

typedef struct free_slot {
	struct free_slot *next;
} free_slot;

struct tf_cache {
	pthread_mutex_t lock;
	pthread_cond_t loaded, work;
	tf_lru *set;			/* the entries by (owner, index); idle ones listed */
	size_t budget, used, done_bytes, done_keep, pinned;
	size_t charged;			/* of used: memory of other holders (tf_cache_charge) */
	uint64_t next_owner, hits, misses, evictions, prefetches, recycled;
	tf_cache_entry *spare;		/* recycled entry structs */
	size_t nspare;
	free_slot *slots;		/* recycled slots, their pages kept */
	free_slot *cold;		/* recycled slots given back to the kernel */
	size_t nslots, slots_keep;	/* slots on `slots`; beyond keep they go cold */
	size_t page;			/* the system's page size (<= a slot) */
	size_t heap_freed, trim_at;	/* malloc'd bytes freed since the last trim */
	bool trim_due;
	void **slabs;
	size_t nslabs, slab_cap, slab_used;
	pthread_t *threads;
	unsigned nworkers, running;
	pthread_key_t in_worker;	/* set in worker threads: their claims are prefetches */
	tf_cache_job queue[QUEUE_CAP];
	size_t qhead, qlen;
	bool stopping;
};

/* ---- lists and table (lock held) --------------------------------------------------------- */

static void unlink_entry(tf_cache *c, tf_cache_entry *e)
{
	if (tf_lru_on(&e->node, L_DONE))
		c->done_bytes -= e->cap + ENTRY_COST;
	tf_lru_unlist(c->set, &e->node);
}

/* Append e to the list (as its most recent member). */
static void append(tf_cache *c, tf_cache_entry *e, unsigned which)
{
	unlink_entry(c, e);
	tf_lru_use(c->set, &e->node, which);
	if (which == L_DONE)
		c->done_bytes += e->cap + ENTRY_COST;
}

typedef struct key {
	uint64_t owner, index;
} key;

static bool same_key(const tf_lru_node *n, const void *k)
{
	const key *want = k;

	return E_OF(n)->owner == want->owner && E_OF(n)->index == want->index;
}

static tf_cache_entry *find(const tf_cache *c, uint64_t owner, uint64_t index)
{
	key k = { owner, index };
	tf_lru_node *n = tf_lru_find(c->set, tf_hash_pair(owner, index), same_key, &k);

	return n ? E_OF(n) : NULL;
}

static void table_insert(tf_cache *c, tf_cache_entry *e)
{
	tf_lru_insert(c->set, &e->node, tf_hash_pair(e->owner, e->index));
	c->used += e->cap + ENTRY_COST;
}

/* Take e out of the table (dead); whoever holds it frees it on release. */
static void table_remove(tf_cache *c, tf_cache_entry *e)
{
	unlink_entry(c, e);
	tf_lru_remove(c->set, &e->node);
	c->used -= e->cap + ENTRY_COST;
}

static bool dead(const tf_cache_entry *e)
{
	return !e->node.keyed;
}

/* ---- buffers and entry structs (lock held) ----------------------------------------------- */

static bool slot_sized(size_t len)
{
	return len > SLOT_BYTES / 2 && len <= SLOT_BYTES;
}

/* A new slab, left untouched: its pages are faulted in by the filler that
 * first writes a slot, outside the lock. */
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

static uint8_t *get_slot(tf_cache *c)
{
	free_slot *f = c->slots;

	if (f) {
		c->slots = f->next;
		c->nslots--;
		return (uint8_t *)f;
	}
	if ((f = c->cold)) {
		c->cold = f->next;
		return (uint8_t *)f;
	}
	if ((!c->nslabs || c->slab_used == SLAB_BYTES) && !add_slab(c))
		return NULL;
	c->slab_used += SLOT_BYTES;
	return (uint8_t *)c->slabs[c->nslabs - 1] + c->slab_used - SLOT_BYTES;
}

/*
 * Memory the daemon no longer uses goes back to the kernel, so that what
 * one array's reads left behind is not added to the next one's peak: one
 * daemon serving 200,000 one-cell fragments' cells.csv, then 300
 * fragments of 1,000,000-cell tiles, peaked at 153 MB under a 64 MiB
 * budget (the first left ~60 MB of small freed blocks in malloc's heap,
 * the second took 64 MiB of fresh slabs), 131,072 KiB allowed.  Slots
 * freed beyond slots_keep (a 16th of the budget; a scan reuses its few
 * hot ones at once) are madvise(MADV_DONTNEED)'d, a syscall under the lock
 * only when slots pile up unused; malloc'd buffers and charges freed past
 * trim_at (an 8th of the budget) make the next thread to leave the lock
 * trim malloc's heaps (glibc's malloc_trim gives back free pages anywhere
 * in them).
 */
static void put_slot(tf_cache *c, uint8_t *p)
{
	free_slot *f = (free_slot *)p;

	if (c->nslots < c->slots_keep) {
		f->next = c->slots;
		c->slots = f;
		c->nslots++;
		return;
	}
	f->next = c->cold;	/* in the first page, which is kept */
	c->cold = f;
	madvise(p + c->page, SLOT_BYTES - c->page, MADV_DONTNEED);	/* zeros until written */
}

static void heap_freed(tf_cache *c, size_t bytes)
{
	if ((c->heap_freed += bytes) >= c->trim_at) {
		c->heap_freed = 0;
		c->trim_due = true;
	}
}

/* Unlock c, trimming malloc's heaps first if due (outside the lock). */
static void unlock_trim(tf_cache *c)
{
	bool due = c->trim_due;

	c->trim_due = false;
	pthread_mutex_unlock(&c->lock);
#ifdef __GLIBC__
	if (due)
		malloc_trim(0);
#endif
}

/* Slots are exactly SLOT_BYTES; no other buffer has that cap. */
static void put_buffer(tf_cache *c, uint8_t *p, size_t cap)
{
	if (p && cap == SLOT_BYTES) {
		put_slot(c, p);
	} else {
		free(p);
		heap_freed(c, cap);
	}
}

static tf_cache_entry *new_entry(tf_cache *c)
{
	tf_cache_entry *e = c->spare;

	if (e) {
		c->spare = e->spare_next;
		c->nspare--;
		memset(e, 0, sizeof(*e));
		return e;
	}
	return calloc(1, sizeof(*e));
}

static void entry_free(tf_cache *c, tf_cache_entry *e)
{
	put_buffer(c, e->data, e->cap);
	free(e->err);
	if (c->nspare < SPARE_ENTRIES) {
		e->spare_next = c->spare;
		c->spare = e;
		c->nspare++;
	} else {
		free(e);
	}
}

/* Evict e (idle and READY).  A victim of a fitting size may hand its
 * buffer to the caller instead of the pools. */
static void evict(tf_cache *c, tf_cache_entry *e, uint8_t **reuse, size_t *reuse_cap, size_t need)
{
	c->evictions++;
	c->recycled += tf_lru_on(&e->node, L_DONE);
	table_remove(c, e);
	if (reuse && !*reuse && e->cap != SLOT_BYTES && e->cap >= need && e->cap <= 2 * need) {
		*reuse = e->data;
		*reuse_cap = e->cap;
		e->data = NULL;
	}
	entry_free(c, e);
}

/* Evict idle entries (the lists hold nothing else), done ones first, then
 * least recently used, until `need` more bytes fit the budget. */
static void make_room(tf_cache *c, size_t need, uint8_t **reuse, size_t *reuse_cap)
{
	static const unsigned order[2] = { L_DONE, L_LRU };
	tf_lru_node *n;

	for (int l = 0; l < 2; l++)
		while (c->used + need > c->budget && (n = tf_lru_oldest(c->set, order[l])))
			evict(c, E_OF(n), reuse, reuse_cap, need);
}

/* Done chunks beyond DONE_KEEP go back to the pools now (oldest first). */
static void trim_done(tf_cache *c)
{
	tf_lru_node *n;

	while (c->done_bytes > c->done_keep && (n = tf_lru_oldest(c->set, L_DONE)))
		evict(c, E_OF(n), NULL, NULL, 0);
}

/* ---- claiming ------------------------------------------------------------------------------- */

/* A new LOADING entry holding one reference (lock held). */
static tf_cache_entry *claim(tf_cache *c, uint64_t owner, uint64_t index, uint32_t len)
{
	tf_cache_entry *e = new_entry(c);

	if (!e)
		return NULL;
	e->owner = owner;
	e->index = index;
	e->len = len;
	e->state = E_LOADING;
	if (slot_sized(len)) {
		make_room(c, SLOT_BYTES + ENTRY_COST, NULL, NULL);
		e->data = get_slot(c);	/* NULL: fill_buffer reports it */
		e->cap = SLOT_BYTES;
	} else {
		make_room(c, len + ENTRY_COST, &e->data, &e->cap);
		if (!e->data)
			e->cap = len;	/* malloc'd by fill_buffer, outside the lock */
	}
	table_insert(c, e);
	tf_lru_hold(c->set, &e->node);
	c->pinned++;
	return e;
}

tf_status tf_cache_acquire(tf_cache *c, uint64_t owner, uint64_t index, uint32_t len,
			   tf_cache_entry **out, tf_cache_state *state, tf_error *err)
{
	tf_cache_entry *e;

	*out = NULL;
	/* A chunk's length comes from its header, which may lie (up to 4 GiB):
	 * one larger than the whole budget is refused before anything is
	 * evicted or allocated for it. */
	if ((size_t)len + ENTRY_COST > c->budget)
		return tf_err(err, TF_E_CORRUPT, "a chunk of %u bytes is larger than the cache budget "
			      "(%zu bytes; corrupt, or raise cache_size)", len, c->budget);
	pthread_mutex_lock(&c->lock);
	if ((e = find(c, owner, index))) {
		c->pinned += e->node.refs == 0;
		unlink_entry(c, e);	/* pinned: on no list */
		tf_lru_hold(c->set, &e->node);
		e->to_done = false;	/* a re-read done chunk is wanted again */
		c->hits++;
		*state = e->state == E_READY ? TF_CACHE_READY : TF_CACHE_LOADING;
	} else if ((e = claim(c, owner, index, len))) {
		c->misses++;
		c->prefetches += pthread_getspecific(c->in_worker) != NULL;
		*state = TF_CACHE_CLAIMED;
	}
	unlock_trim(c);
	if (!e)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	*out = e;
	return TF_OK;
}

tf_cache_entry *tf_cache_lookup(tf_cache *c, uint64_t owner, uint64_t index)
{
	tf_cache_entry *e;

	pthread_mutex_lock(&c->lock);
	if ((e = find(c, owner, index)) && e->state == E_READY) {
		c->pinned += e->node.refs == 0;
		unlink_entry(c, e);	/* pinned: on no list */
		tf_lru_hold(c->set, &e->node);
		e->to_done = false;
		c->hits++;
	} else {
		e = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	return e;
}

uint8_t *tf_cache_fill_buffer(tf_cache *c, tf_cache_entry *e)
{
	(void)c;
	if (!e->data && e->cap != SLOT_BYTES)
		e->data = malloc(e->cap ? e->cap : 1);	/* only the claimer gets here */
	return e->data;
}

void tf_cache_publish(tf_cache *c, tf_cache_entry *e, tf_status rc, const tf_error *err)
{
	pthread_mutex_lock(&c->lock);
	e->state = rc == TF_OK ? E_READY : E_FAILED;
	if (rc != TF_OK) {
		e->rc = rc;
		if (err && (e->err = malloc(sizeof(*e->err))))
			*e->err = *err;
		if (!dead(e))
			table_remove(c, e);
	}
	pthread_cond_broadcast(&c->loaded);
	pthread_mutex_unlock(&c->lock);
}

tf_status tf_cache_wait(tf_cache *c, tf_cache_entry *e, tf_error *err)
{
	tf_status rc;

	pthread_mutex_lock(&c->lock);
	while (e->state == E_LOADING)
		pthread_cond_wait(&c->loaded, &c->lock);
	rc = e->state == E_READY ? TF_OK : e->rc;
	if (rc != TF_OK && e->err && err)
		*err = *e->err;
	else if (rc != TF_OK && !e->err)
		tf_err(err, rc, "chunk %llu could not be decoded", (unsigned long long)e->index);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

const uint8_t *tf_cache_data(const tf_cache_entry *e) { return e->data; }
uint32_t tf_cache_len(const tf_cache_entry *e) { return e->len; }

void tf_cache_release(tf_cache *c, tf_cache_entry *e, bool done)
{
	pthread_mutex_lock(&c->lock);
	if (done && !dead(e) && e->state == E_READY)
		e->to_done = true;
	if (tf_lru_release(&e->node)) {
		c->pinned--;
		if (dead(e)) {
			entry_free(c, e);
		} else if (e->state == E_READY) {	/* idle: most recent of its list */
			append(c, e, e->to_done ? L_DONE : L_LRU);
			if (c->used > c->budget)
				make_room(c, 0, NULL, NULL);
		}
	}
	if (done)
		trim_done(c);
	unlock_trim(c);
}

tf_status tf_cache_get(tf_cache *c, uint64_t owner, uint64_t index, uint32_t len,
		       const tf_cache_source *src, tf_workspace *ws, tf_cache_entry **out,
		       tf_error *err)
{
	tf_cache_state state;
	tf_cache_entry *e;
	uint8_t *dst;
	tf_status rc;

	*out = NULL;
	if ((rc = tf_cache_acquire(c, owner, index, len, &e, &state, err)) != TF_OK)
		return rc;
	if (state == TF_CACHE_CLAIMED) {
		if (!ws)
			rc = tf_err(err, TF_E_NOMEM, "no workspace");
		else if (!(dst = tf_cache_fill_buffer(c, e)))
			rc = tf_err(err, TF_E_NOMEM, "cannot allocate %u bytes for a chunk", len);
		else
			rc = src->load(src->ctx, index, dst, ws, err);
		tf_cache_publish(c, e, rc, err);
	} else if (state == TF_CACHE_LOADING) {
		rc = tf_cache_wait(c, e, err);
	}
	if (rc != TF_OK) {
		tf_cache_release(c, e, false);
		return rc;
	}
	*out = e;
	return TF_OK;
}

/* ---- workers ---------------------------------------------------------------------------- */

bool tf_cache_submit(tf_cache *c, const tf_cache_job *job)
{
	bool queued = false;

	if (!c->nworkers)
		return false;
	pthread_mutex_lock(&c->lock);
	if (!c->stopping && c->qlen < QUEUE_CAP) {
		c->queue[(c->qhead + c->qlen++) % QUEUE_CAP] = *job;
		pthread_cond_signal(&c->work);
		queued = true;
	}
	pthread_mutex_unlock(&c->lock);
	return queued;
}

static void *worker_main(void *arg)
{
	tf_cache *c = arg;
	tf_workspace *ws = tf_workspace_new();

	pthread_setspecific(c->in_worker, c);
	pthread_mutex_lock(&c->lock);
	for (;;) {
		tf_cache_job j;

		while (!c->stopping && c->qlen == 0)
			pthread_cond_wait(&c->work, &c->lock);
		if (c->stopping)
			break;
		j = c->queue[c->qhead];
		c->qhead = (c->qhead + 1) % QUEUE_CAP;
		c->qlen--;
		c->running++;
		pthread_mutex_unlock(&c->lock);
		if (ws)
			j.run(j.ctx, c, ws);
		else if (j.drop)
			j.drop(j.ctx);
		pthread_mutex_lock(&c->lock);
		c->running--;
	}
	pthread_mutex_unlock(&c->lock);
	tf_workspace_free(ws);
	return NULL;
}

unsigned tf_cache_workers(const tf_cache *c)
{
	return c->nworkers;
}

size_t tf_cache_budget(const tf_cache *c)
{
	return c->budget;
}

unsigned tf_cache_backlog(tf_cache *c)
{
	unsigned n;

	pthread_mutex_lock(&c->lock);
	n = (unsigned)c->qlen + c->running;
	pthread_mutex_unlock(&c->lock);
	return n;
}

/* ---- life cycle ------------------------------------------------------------------------------ */

tf_status tf_cache_new(size_t budget, unsigned workers, tf_cache **out, tf_error *err)
{
	tf_cache *c = calloc(1, sizeof(*c));

	if (!c || tf_lru_new(1024, &c->set, NULL) != TF_OK ||
	    !(c->threads = calloc(workers ? workers : 1, sizeof(*c->threads))) ||
	    pthread_key_create(&c->in_worker, NULL) != 0) {
		if (c)
			tf_lru_free(c->set), free(c->threads);
		free(c);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	c->budget = budget;
	/* Done chunks kept for a kernel that asks again (a retry page by page
	 * after an error, a page cache under pressure): a little. */
	c->slots_keep = budget / 16 / SLOT_BYTES;
	c->page = sysconf(_SC_PAGESIZE) > 0 && (size_t)sysconf(_SC_PAGESIZE) < SLOT_BYTES ? (size_t)sysconf(_SC_PAGESIZE) : SLOT_BYTES;
	c->trim_at = budget / 8;
	c->done_keep = budget / 16 < ((size_t)4 << 20) ? budget / 16 : (size_t)4 << 20;
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

static void free_list(tf_cache *c, unsigned which)
{
	tf_lru_node *n;

	while ((n = tf_lru_oldest(c->set, which))) {
		table_remove(c, E_OF(n));
		entry_free(c, E_OF(n));
	}
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
		if (c->queue[c->qhead].drop)
			c->queue[c->qhead].drop(c->queue[c->qhead].ctx);
	free_list(c, L_DONE);
	free_list(c, L_LRU);
	while (c->spare) {
		tf_cache_entry *e = c->spare;
		c->spare = e->spare_next;
		free(e);
	}
	pthread_key_delete(c->in_worker);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->loaded);
	pthread_cond_destroy(&c->work);
	for (size_t i = 0; i < c->nslabs; i++)
		free(c->slabs[i]);
	free(c->slabs);
	tf_lru_free(c->set);
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

void tf_cache_charge(tf_cache *c, ptrdiff_t bytes)
{
	pthread_mutex_lock(&c->lock);
	c->used += (size_t)bytes;	/* wraps back on uncharging */
	c->charged += (size_t)bytes;
	if (bytes > 0)
		make_room(c, 0, NULL, NULL);
	else
		heap_freed(c, (size_t)-bytes);
	unlock_trim(c);
}

void tf_cache_get_stats(tf_cache *c, tf_cache_stats *s)
{
	pthread_mutex_lock(&c->lock);
	*s = (tf_cache_stats){ c->budget, c->used, tf_lru_count(c->set), c->pinned, c->hits, c->misses,
			       c->evictions, c->prefetches, c->recycled, c->charged };
	pthread_mutex_unlock(&c->lock);
}
