/*
 * test_cache.c - the decoded-chunk cache (tf_cache.c): hits, misses, LRU
 * order, the byte budget with each entry's bookkeeping charged, pinning,
 * failures, fresh owners, claims (acquire, fill, publish, wait), done
 * chunks recycled first, the hash table growing, single flight, parallel
 * loads, worker jobs (run or dropped, exactly once) and a multi-threaded
 * stress run.
 *
 * A fake tf_cache_source stands in for a tile file: load() writes bytes
 * that depend only on (source seed, index), so every returned chunk can be
 * checked, and counts its calls.  Concurrency is steered with a gate in
 * load() (a condition variable the test opens); nothing waits on time.
 * Worker threads never ck_assert (Check may longjmp out of the wrong
 * thread): they record results that the test thread then asserts.
 */
#include "tf_test.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <time.h>

#include "cache/tf_cache.h"

#define MAX_CHUNK 4096
#define NINDEX 64		/* per-index load counters kept by a fake */
#define HANG_GUARD_S 60		/* a rendezvous that never completes is a failure, not a hang */
/* What an entry costs beside its buffer (ENTRY_COST in tf_cache.c): the
 * budget is charged for both. */
#define ENTRY_COST ((size_t)160)
#define COST(len) ((size_t)(len) + ENTRY_COST)

typedef struct fake {
	uint64_t seed;
	uint32_t len;			/* every chunk's length; 0: varied per index */
	atomic_uint loads;
	atomic_uint index_loads[NINDEX];
	atomic_bool fail;		/* load() of fail_index fails */
	uint64_t fail_index;

	/* Steering (only when `steer`): load() announces itself, waits until
	 * `together` loads have entered and the gate is open.  The lock and
	 * condition also announce the jobs' runs and drops. */
	bool steer;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool gate_open;
	unsigned together, max_inside;
	atomic_uint inside, entered, finished;
	bool hung;			/* a wait hit HANG_GUARD_S */
} fake;

/* ---- the fake source ---------------------------------------------------------------------- */

static uint32_t chunk_len(const fake *f, uint64_t index)
{
	if (f->len)
		return f->len;
	return 256 + (uint32_t)((f->seed * 31 + index * 977) % (MAX_CHUNK - 256));
}

static void fill_chunk(const fake *f, uint64_t index, uint8_t *p)
{
	tf_test_fill(p, chunk_len(f, index), TF_GEN_RANDOM, 8, f->seed * 0x100000001b3ull + index);
}

static bool chunk_ok(const fake *f, uint64_t index, const uint8_t *data)
{
	uint32_t n = chunk_len(f, index);
	uint8_t *want = malloc(n ? n : 1);
	bool ok = want != NULL;

	if (ok) {
		fill_chunk(f, index, want);
		ok = memcmp(want, data, n) == 0;
	}
	free(want);
	return ok;
}

/* Wait on the fake's condition until *counter >= n, or record a hang. */
static bool fake_wait_locked(fake *f, const atomic_uint *counter, unsigned n)
{
	struct timespec deadline;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += HANG_GUARD_S;
	while (atomic_load(counter) < n && !f->hung)
		if (pthread_cond_timedwait(&f->cond, &f->lock, &deadline) == ETIMEDOUT)
			f->hung = true;
	return atomic_load(counter) >= n;
}

static bool fake_wait(fake *f, const atomic_uint *counter, unsigned n)
{
	bool ok;

	pthread_mutex_lock(&f->lock);
	ok = fake_wait_locked(f, counter, n);
	pthread_mutex_unlock(&f->lock);
	return ok;
}

static void fake_signal(fake *f, atomic_uint *counter, int delta)
{
	pthread_mutex_lock(&f->lock);
	atomic_fetch_add(counter, (unsigned)delta);
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

/* Counting `entered` (never `inside`, which falls again) tells each load
 * that all the others got in. */
static void fake_steer_enter(fake *f)
{
	pthread_mutex_lock(&f->lock);
	atomic_fetch_add(&f->entered, 1);
	if (atomic_fetch_add(&f->inside, 1) + 1 > f->max_inside)
		f->max_inside = atomic_load(&f->inside);
	pthread_cond_broadcast(&f->cond);
	fake_wait_locked(f, &f->entered, f->together);
	while (!f->gate_open && !f->hung)
		pthread_cond_wait(&f->cond, &f->lock);
	pthread_mutex_unlock(&f->lock);
}

static tf_status fake_load(void *ctx, uint64_t index, uint8_t *dst, tf_workspace *ws, tf_error *err)
{
	fake *f = ctx;
	tf_status rc = TF_OK;

	(void)ws;
	atomic_fetch_add(&f->loads, 1);
	if (index < NINDEX)
		atomic_fetch_add(&f->index_loads[index], 1);
	if (f->steer)
		fake_steer_enter(f);
	if (atomic_load(&f->fail) && index == f->fail_index)
		rc = tf_err(err, TF_E_CORRUPT, "chunk %llu: bad bytes", (unsigned long long)index);
	else
		fill_chunk(f, index, dst);
	if (f->steer) {
		atomic_fetch_sub(&f->inside, 1);
		fake_signal(f, &f->finished, 1);
	}
	return rc;
}

static void fake_init(fake *f, uint64_t seed, uint32_t len, bool steer)
{
	memset(f, 0, sizeof(*f));
	f->seed = seed;
	f->len = len;
	f->steer = steer;
	f->together = 1;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
}

static void fake_open_gate(fake *f)
{
	pthread_mutex_lock(&f->lock);
	f->gate_open = true;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

static void fake_destroy(fake *f)
{
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cond);
}

static tf_cache_source source_of(fake *f)
{
	return (tf_cache_source){ f, fake_load };
}

/* ---- helpers -------------------------------------------------------------------------------- */

static tf_cache *new_cache(size_t budget, unsigned workers)
{
	tf_cache *c = NULL;
	tf_error err;

	ck_assert_msg(tf_cache_new(budget, workers, &c, &err) == TF_OK, "%s", err.msg);
	ck_assert_ptr_nonnull(c);
	return c;
}

static tf_cache_stats stats_of(tf_cache *c)
{
	tf_cache_stats s;

	tf_cache_get_stats(c, &s);
	return s;
}

/* Get (owner, index), check its bytes and return it pinned. */
static tf_cache_entry *get_pinned(tf_cache *c, uint64_t owner, fake *f, uint64_t index, tf_workspace *ws)
{
	tf_cache_source src = source_of(f);
	tf_cache_entry *e = NULL;
	tf_error err = { 0 };
	tf_status rc = tf_cache_get(c, owner, index, chunk_len(f, index), &src, ws, &e, &err);

	ck_assert_msg(rc == TF_OK, "get %llu/%llu: %s", (unsigned long long)owner,
		      (unsigned long long)index, err.msg);
	ck_assert_ptr_nonnull(e);
	ck_assert_uint_eq(tf_cache_len(e), chunk_len(f, index));
	ck_assert_msg(chunk_ok(f, index, tf_cache_data(e)), "chunk %llu has wrong bytes",
		      (unsigned long long)index);
	return e;
}

static void get_release(tf_cache *c, uint64_t owner, fake *f, uint64_t index, tf_workspace *ws)
{
	tf_cache_release(c, get_pinned(c, owner, f, index, ws), false);
}

/* Get, then release as done (the caller passed the whole chunk on). */
static void get_done(tf_cache *c, uint64_t owner, fake *f, uint64_t index, tf_workspace *ws)
{
	tf_cache_release(c, get_pinned(c, owner, f, index, ws), true);
}

/* Spin until the cache has counted n hits: waiters register as hits before
 * they sleep, and the cache offers nothing else to wait on. */
static void wait_for_hits(tf_cache *c, uint64_t n)
{
	while (stats_of(c).hits < n)
		sched_yield();
}

/* ---- one thread at a time --------------------------------------------------------------------- */

START_TEST(test_hits_and_misses)
{
	tf_cache *c = new_cache(1 << 20, 0);
	tf_workspace *ws = tf_workspace_new();
	uint64_t a = tf_cache_owner(c), b = tf_cache_owner(c);
	tf_cache_entry *e;
	tf_cache_stats s;
	fake f;

	fake_init(&f, 1, 1000, false);
	ck_assert_uint_ne(a, 0);
	ck_assert_uint_ne(a, b);
	e = get_pinned(c, a, &f, 5, ws);
	s = stats_of(c);
	ck_assert_uint_eq(s.misses, 1);
	ck_assert_uint_eq(s.hits, 0);
	ck_assert_uint_eq(s.entries, 1);
	ck_assert_uint_eq(s.pinned, 1);
	ck_assert_uint_eq(s.used, COST(1000));
	ck_assert_uint_eq(s.budget, 1 << 20);
	ck_assert_uint_eq(tf_cache_budget(c), 1 << 20);
	tf_cache_release(c, e, false);
	ck_assert_uint_eq(stats_of(c).pinned, 0);

	get_release(c, a, &f, 5, ws);		/* hit */
	get_release(c, b, &f, 5, ws);		/* same index, other owner: miss */
	get_release(c, a, &f, 6, ws);		/* miss */
	get_release(c, b, &f, 5, ws);		/* hit */
	s = stats_of(c);
	ck_assert_uint_eq(s.hits, 2);
	ck_assert_uint_eq(s.misses, 3);
	ck_assert_uint_eq(s.entries, 3);
	ck_assert_uint_eq(s.used, 3 * COST(1000));
	ck_assert_uint_eq(s.evictions, 0);
	ck_assert_uint_eq(s.prefetches, 0);
	ck_assert_uint_eq(s.recycled, 0);
	ck_assert_uint_eq(atomic_load(&f.loads), 3);
	ck_assert_uint_eq(tf_cache_workers(c), 0);
	ck_assert_uint_eq(tf_cache_backlog(c), 0);
	tf_workspace_free(ws);
	tf_cache_free(c);
	fake_destroy(&f);
}
END_TEST

/* Issue 9: a corrupt chunk header claiming up to 4 GiB evicted the whole
 * cache and then tried a 4 GiB allocation.  Now it is refused up front,
 * with everything cached left in place and nothing loaded.  The largest
 * chunk that fits the budget with its bookkeeping is taken. */
START_TEST(test_oversized_chunk_refused)
{
	const size_t budget = 1 << 20;
	tf_cache *c = new_cache(budget, 0);
	tf_workspace *ws = tf_workspace_new();
	uint64_t a = tf_cache_owner(c);
	tf_cache_source src;
	tf_cache_entry *e = NULL;
	tf_cache_state st;
	tf_error err;
	fake f, whole;

	fake_init(&f, 1, 1000, false);
	fake_init(&whole, 2, (uint32_t)(budget - ENTRY_COST), false);
	src = source_of(&f);
	for (uint64_t i = 0; i < 8; i++)
		get_release(c, a, &f, i, ws);
	ck_assert_int_eq(tf_cache_get(c, a, 99, UINT32_MAX, &src, ws, &e, &err), TF_E_CORRUPT);
	ck_assert_ptr_null(e);
	ck_assert_msg(strstr(err.msg, "larger than the cache budget"), "%s", err.msg);
	ck_assert_int_eq(tf_cache_acquire(c, a, 100, (uint32_t)(budget - ENTRY_COST + 1), &e, &st, &err),
			 TF_E_CORRUPT);
	ck_assert_ptr_null(e);
	ck_assert_uint_eq(stats_of(c).entries, 8);
	ck_assert_uint_eq(stats_of(c).evictions, 0);
	ck_assert_uint_eq(stats_of(c).misses, 8);
	ck_assert_uint_eq(atomic_load(&f.loads), 8);

	/* Exactly the budget: everything else goes. */
	get_release(c, a, &whole, 101, ws);
	ck_assert_uint_eq(stats_of(c).entries, 1);
	ck_assert_uint_eq(stats_of(c).used, budget);
	ck_assert_uint_eq(stats_of(c).evictions, 8);
	tf_workspace_free(ws);
	tf_cache_free(c);
	fake_destroy(&f);
	fake_destroy(&whole);
}
END_TEST

/* Four chunks fit.  Touching one protects it; the least recently used goes. */
START_TEST(test_lru_order)
{
	tf_cache *c = new_cache(4 * COST(4096), 0);
	tf_workspace *ws = tf_workspace_new();
	uint64_t o = tf_cache_owner(c);
	fake f;

	fake_init(&f, 2, 4096, false);
	for (uint64_t i = 0; i < 4; i++)
		get_release(c, o, &f, i, ws);
	ck_assert_uint_eq(stats_of(c).evictions, 0);
	get_release(c, o, &f, 0, ws);		/* touch 0: order 1 2 3 0 */
	get_release(c, o, &f, 4, ws);		/* evicts 1: 2 3 0 4 */
	ck_assert_uint_eq(stats_of(c).evictions, 1);
	get_release(c, o, &f, 0, ws);		/* hit: 2 3 4 0 */
	ck_assert_uint_eq(atomic_load(&f.index_loads[0]), 1);
	get_release(c, o, &f, 1, ws);		/* reload, evicts 2: 3 4 0 1 */
	ck_assert_uint_eq(atomic_load(&f.index_loads[1]), 2);
	get_release(c, o, &f, 3, ws);		/* hit: 4 0 1 3 */
	ck_assert_uint_eq(atomic_load(&f.index_loads[3]), 1);
	get_release(c, o, &f, 2, ws);		/* reload, evicts 4 */
	ck_assert_uint_eq(atomic_load(&f.index_loads[2]), 2);
	get_release(c, o, &f, 4, ws);		/* reload, evicts 0 */
	ck_assert_uint_eq(atomic_load(&f.index_loads[4]), 2);
	ck_assert_uint_eq(atomic_load(&f.index_loads[0]), 1);
	ck_assert_uint_eq(stats_of(c).evictions, 4);
	ck_assert_uint_eq(stats_of(c).entries, 4);
	ck_assert_uint_eq(stats_of(c).recycled, 0);
	tf_workspace_free(ws);
	tf_cache_free(c);
	fake_destroy(&f);
}
END_TEST

/* Pinned chunks may push the total over budget; releasing them brings it
 * back under; with one chunk pinned (the one being got) the budget holds
 * whatever the mix of sizes; a chunk larger than the whole budget is
 * refused, evicting nothing. */
START_TEST(test_budget_after_release)
{
	const size_t budget = 10 * 1024;
	tf_cache *c = new_cache(budget, 0);
	tf_workspace *ws = tf_workspace_new();
	uint64_t o = tf_cache_owner(c), rng = 7;
	tf_cache_entry *pins[15];
	fake f, big;

	fake_init(&f, 3, 0, false);
	fake_init(&big, 4, 3 * budget / 2, false);
	for (unsigned i = 0; i < 15; i++)
		pins[i] = get_pinned(c, o, &f, i, ws);
	ck_assert_uint_eq(stats_of(c).pinned, 15);
	ck_assert_uint_gt(stats_of(c).used, budget);
	for (unsigned i = 0; i < 15; i++) {
		ck_assert(chunk_ok(&f, i, tf_cache_data(pins[i])));
		tf_cache_release(c, pins[i], false);
	}
	ck_assert_uint_le(stats_of(c).used, budget);
	ck_assert_uint_eq(stats_of(c).pinned, 0);
	for (unsigned n = 0; n < 2000; n++) {
		tf_cache_entry *e;

		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		e = get_pinned(c, o, &f, (rng >> 33) % NINDEX, ws);
		ck_assert_uint_le(stats_of(c).used, budget);
		tf_cache_release(c, e, (rng >> 20) % 3 == 0);
		ck_assert_uint_eq(stats_of(c).pinned, 0);
		ck_assert_uint_le(stats_of(c).used, budget);
	}
	{
		tf_cache_source bsrc = source_of(&big);
		tf_cache_entry *e = NULL;
		size_t before = stats_of(c).entries;

		ck_assert_int_eq(tf_cache_get(c, tf_cache_owner(c), 0, big.len, &bsrc, ws, &e, NULL),
				 TF_E_CORRUPT);
		ck_assert_uint_eq(stats_of(c).entries, before);
		ck_assert_uint_eq(atomic_load(&big.loads), 0);
	}
	ck_assert_uint_le(stats_of(c).used, budget);
	ck_assert_uint_eq(stats_of(c).pinned, 0);
	tf_workspace_free(ws);
	tf_cache_free(c);
	fake_destroy(&f);
	fake_destroy(&big);
}
END_TEST

#define MANY_PINNED 300000

/* More pinned entries than the budget holds, as a request over a file of
 * one-byte tiles pins (issue 19): claiming each must not walk past the
 * pinned ones.  Eviction walked the LRU through them, ~N^2/2 steps: through
 * the mount a 200 KB file of such tiles took 63 s.  A guard, far beyond
 * what the claims take (milliseconds; seconds under valgrind), tells a
 * quadratic walk from a slow build.  Released, the budget holds again. */
START_TEST(test_many_pinned)
{
	const size_t budget = 64 << 10;
	tf_cache *c = new_cache(budget, 0);
	tf_cache_entry **pins = malloc(MANY_PINNED * sizeof(*pins));
	uint64_t o = tf_cache_owner(c);
	struct timespec t0, t;
	size_t bad = 0;

	ck_assert_ptr_nonnull(pins);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* No ck_assert in the loops: Check records every one (a write each). */
	for (size_t i = 0; i < MANY_PINNED; i++) {
		tf_cache_state st;
		uint8_t *dst;

		if (tf_cache_acquire(c, o, i, 1, &pins[i], &st, NULL) != TF_OK || st != TF_CACHE_CLAIMED ||
		    !(dst = tf_cache_fill_buffer(c, pins[i])))
			ck_abort_msg("claim %zu", i);
		*dst = (uint8_t)(i * 7);
		tf_cache_publish(c, pins[i], TF_OK, NULL);
		if (i % 4096 == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec - t0.tv_sec >= HANG_GUARD_S)
				ck_abort_msg("%zu claims took %d s: eviction walks the pinned entries", i, HANG_GUARD_S);
		}
	}
	ck_assert_uint_eq(stats_of(c).pinned, MANY_PINNED);
	ck_assert_uint_eq(stats_of(c).evictions, 0);
	for (size_t i = 0; i < MANY_PINNED; i++) {
		bad += tf_cache_len(pins[i]) != 1 || *tf_cache_data(pins[i]) != (uint8_t)(i * 7);
		tf_cache_release(c, pins[i], i % 2);
	}
	ck_assert_uint_eq(bad, 0);
	ck_assert_uint_eq(stats_of(c).pinned, 0);
	ck_assert_uint_le(stats_of(c).used, budget);
	free(pins);
	tf_cache_free(c);
}
END_TEST

/* Held chunks stay valid and cached through heavy eviction pressure. */
START_TEST(test_pinned_survive_pressure)
{
	tf_cache *c = new_cache(4 * COST(2048), 0);
	tf_workspace *ws = tf_workspace_new();
	uint64_t o = tf_cache_owner(c), other = tf_cache_owner(c);
	tf_cache_entry *pins[3];
	fake f, g;

	fake_init(&f, 5, 2048, false);
	fake_init(&g, 6, 2048, false);
	for (unsigned i = 0; i < 3; i++)
		pins[i] = get_pinned(c, o, &f, i, ws);
	for (unsigned n = 0; n < 1000; n++)
		get_release(c, other, &g, n % NINDEX, ws);
	ck_assert_uint_gt(stats_of(c).evictions, 900);
	ck_assert_uint_eq(stats_of(c).pinned, 3);
	for (unsigned i = 0; i < 3; i++) {
		ck_assert(chunk_ok(&f, i, tf_cache_data(pins[i])));
		tf_cache_release(c, pins[i], false);
		get_release(c, o, &f, i, ws);	/* still cached */
		ck_assert_uint_eq(atomic_load(&f.index_loads[i]), 1);
	}
	tf_workspace_free(ws);
	tf_cache_free(c);
	fake_destroy(&f);
	fake_destroy(&g);
}
END_TEST

/* A failed load reaches the caller with its message and is not cached. */
START_TEST(test_load_failure)
{
	tf_cache *c = new_cache(1 << 20, 0);
	tf_workspace *ws = tf_workspace_new();
	uint64_t o = tf_cache_owner(c);
	tf_cache_source src;
	tf_cache_entry *e = (tf_cache_entry *)&e;	/* anything but NULL */
	tf_error err = { 0 };
	fake f;

	fake_init(&f, 8, 512, false);
	src = source_of(&f);
	f.fail_index = 7;
	atomic_store(&f.fail, true);
	for (unsigned attempt = 1; attempt <= 2; attempt++) {
		ck_assert_int_eq(tf_cache_get(c, o, 7, 512, &src, ws, &e, &err), TF_E_CORRUPT);
		ck_assert_ptr_null(e);
		ck_assert_str_eq(err.msg, "chunk 7: bad bytes");
		ck_assert_uint_eq(atomic_load(&f.loads), attempt);
		ck_assert_uint_eq(stats_of(c).entries, 0);
		ck_assert_uint_eq(stats_of(c).used, 0);
		ck_assert_uint_eq(stats_of(c).pinned, 0);
	}
	atomic_store(&f.fail, false);
	get_release(c, o, &f, 7, ws);
	ck_assert_uint_eq(atomic_load(&f.loads), 3);
	ck_assert_int_eq(tf_cache_get(c, o, 8, 512, &src, NULL, &e, &err), TF_E_NOMEM);
	ck_assert_ptr_nonnull(strstr(err.msg, "workspace"));
	ck_assert_uint_eq(stats_of(c).entries, 1);
	ck_assert_uint_eq(stats_of(c).pinned, 0);
	tf_workspace_free(ws);
	tf_cache_free(c);
	fake_destroy(&f);
}
END_TEST

/* "Passing a NULL tf_error is always allowed" (tf_status.h). */
START_TEST(test_load_failure_null_err)
{
	tf_cache *c = new_cache(1 << 20, 0);
	tf_workspace *ws = tf_workspace_new();
	tf_cache_entry *e = NULL;
	tf_cache_source src;
	fake f;

	fake_init(&f, 9, 512, false);
	src = source_of(&f);
	f.fail_index = 1;
	atomic_store(&f.fail, true);
	ck_assert_int_eq(tf_cache_get(c, tf_cache_owner(c), 1, 512, &src, ws, &e, NULL), TF_E_CORRUPT);
	ck_assert_ptr_null(e);
	ck_assert_uint_eq(stats_of(c).pinned, 0);
	tf_workspace_free(ws);
	tf_cache_free(c);
	fake_destroy(&f);
}
END_TEST

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * A changed file is a new owner: it never sees the old owner's bytes,
 * even for chunks the old owner still has cached or pinned, and the old
 * owner's chunks age out of the LRU (a pinned one stays readable until
 * released).  Owners are never 0 and never reused.
 */
START_TEST(test_new_owner_never_sees_old_bytes)
{
	tf_cache *c = new_cache(8 * COST(1024), 0);
	tf_workspace *ws = tf_workspace_new();
	uint64_t a = tf_cache_owner(c), b, ids[1000];
	tf_cache_entry *held, *fresh;
	fake f, g;

	fake_init(&f, 10, 1024, false);
	fake_init(&g, 11, 1024, false);	/* the same chunks, other bytes */
	for (uint64_t i = 0; i < 4; i++)
		get_release(c, a, &f, i, ws);
	held = get_pinned(c, a, &f, 1, ws);
	b = tf_cache_owner(c);
	ck_assert_uint_ne(b, a);
	fresh = get_pinned(c, b, &g, 1, ws);	/* g's bytes, checked; a new load */
	ck_assert_ptr_ne(fresh, held);
	ck_assert_uint_eq(atomic_load(&g.index_loads[1]), 1);
	ck_assert(chunk_ok(&f, 1, tf_cache_data(held)));
	tf_cache_release(c, fresh, false);
	for (uint64_t i = 0; i < 4; i++)
		get_release(c, b, &g, i, ws);
	ck_assert_uint_eq(atomic_load(&g.loads), 4);
	ck_assert_uint_eq(stats_of(c).entries, 8);

	/* b's traffic pushes a's chunks out, all but the pinned one. */
	for (uint64_t i = 4; i < 40; i++)
		get_release(c, b, &g, i, ws);
	ck_assert_uint_eq(stats_of(c).pinned, 1);
	ck_assert(chunk_ok(&f, 1, tf_cache_data(held)));
	tf_cache_release(c, held, false);
	get_release(c, a, &f, 1, ws);		/* the pinned one stayed */
	ck_assert_uint_eq(atomic_load(&f.index_loads[1]), 1);
	get_release(c, a, &f, 0, ws);		/* the others went */
	ck_assert_uint_eq(atomic_load(&f.index_loads[0]), 2);

	for (size_t i = 0; i < 1000; i++)
		ck_assert_uint_ne(ids[i] = tf_cache_owner(c), 0);
	qsort(ids, 1000, sizeof(ids[0]), cmp_u64);
	for (size_t i = 0; i < 1000; i++)
		ck_assert(ids[i] != a && ids[i] != b && (i == 0 || ids[i] != ids[i - 1]));
	tf_workspace_free(ws);
	tf_cache_free(c);
	fake_destroy(&f);
	fake_destroy(&g);
}
END_TEST

/* The claim protocol by hand: the first acquire claims, later ones find it
 * loading and wait for the publish; a failure reaches every waiter with
 * its message (or a generic one) and is not kept. */
START_TEST(test_claim_publish_wait)
{
	tf_cache *c = new_cache(1 << 20, 0);
	uint64_t o = tf_cache_owner(c);
	tf_cache_entry *e1, *e2, *e3;
	tf_cache_state st;
	tf_error err = { 0 }, fail;
	uint8_t *p;
	fake f;

	fake_init(&f, 20, 500, false);
	ck_assert_int_eq(tf_cache_acquire(c, o, 9, 500, &e1, &st, &err), TF_OK);
	ck_assert_int_eq(st, TF_CACHE_CLAIMED);
	ck_assert_uint_eq(stats_of(c).misses, 1);
	ck_assert_uint_eq(stats_of(c).entries, 1);
	ck_assert_uint_eq(stats_of(c).pinned, 1);
	ck_assert_uint_eq(stats_of(c).used, COST(500));
	ck_assert_int_eq(tf_cache_acquire(c, o, 9, 500, &e2, &st, &err), TF_OK);
	ck_assert_int_eq(st, TF_CACHE_LOADING);
	ck_assert_ptr_eq(e1, e2);
	ck_assert_uint_eq(stats_of(c).hits, 1);
	ck_assert_ptr_nonnull(p = tf_cache_fill_buffer(c, e1));
	ck_assert_ptr_eq(tf_cache_fill_buffer(c, e1), p);
	fill_chunk(&f, 9, p);
	tf_cache_publish(c, e1, TF_OK, NULL);
	ck_assert_uint_eq(stats_of(c).pinned, 1);	/* still pinned by both */
	ck_assert_int_eq(tf_cache_wait(c, e2, &err), TF_OK);
	ck_assert_uint_eq(tf_cache_len(e2), 500);
	ck_assert(chunk_ok(&f, 9, tf_cache_data(e2)));
	tf_cache_release(c, e1, false);
	tf_cache_release(c, e2, false);
	ck_assert_uint_eq(stats_of(c).pinned, 0);
	ck_assert_int_eq(tf_cache_acquire(c, o, 9, 500, &e1, &st, &err), TF_OK);
	ck_assert_int_eq(st, TF_CACHE_READY);
	ck_assert_int_eq(tf_cache_wait(c, e1, &err), TF_OK);	/* ready: no wait */
	tf_cache_release(c, e1, false);

	/* A failed fill, with a message, then without. */
	ck_assert_int_eq(tf_cache_acquire(c, o, 10, 500, &e1, &st, &err), TF_OK);
	ck_assert_int_eq(st, TF_CACHE_CLAIMED);
	ck_assert_int_eq(tf_cache_acquire(c, o, 10, 500, &e2, &st, &err), TF_OK);
	ck_assert_int_eq(st, TF_CACHE_LOADING);
	tf_err(&fail, TF_E_CHECKSUM, "chunk 10: digest mismatch");
	tf_cache_publish(c, e1, TF_E_CHECKSUM, &fail);
	ck_assert_uint_eq(stats_of(c).entries, 1);	/* only chunk 9 */
	ck_assert_uint_eq(stats_of(c).used, COST(500));
	ck_assert_int_eq(tf_cache_wait(c, e2, &err), TF_E_CHECKSUM);
	ck_assert_str_eq(err.msg, "chunk 10: digest mismatch");
	ck_assert_int_eq(tf_cache_wait(c, e1, NULL), TF_E_CHECKSUM);
	ck_assert_int_eq(tf_cache_acquire(c, o, 10, 500, &e3, &st, &err), TF_OK);
	ck_assert_int_eq(st, TF_CACHE_CLAIMED);	/* nothing kept: claim again */
	ck_assert_uint_eq(stats_of(c).pinned, 2);	/* the failed one, and the new claim */
	tf_cache_release(c, e1, false);
	tf_cache_release(c, e2, false);
	ck_assert_int_eq(tf_cache_acquire(c, o, 10, 500, &e1, &st, &err), TF_OK);
	ck_assert_int_eq(st, TF_CACHE_LOADING);
	tf_cache_publish(c, e3, TF_E_CORRUPT, NULL);
	ck_assert_int_eq(tf_cache_wait(c, e1, &err), TF_E_CORRUPT);
	ck_assert_str_eq(err.msg, "chunk 10 could not be decoded");
	tf_cache_release(c, e1, true);		/* done on a failed one: nothing */
	tf_cache_release(c, e3, false);

	/* A chunk of no bytes still gets a buffer. */
	ck_assert_int_eq(tf_cache_acquire(c, o, 11, 0, &e1, &st, &err), TF_OK);
	ck_assert_int_eq(st, TF_CACHE_CLAIMED);
	ck_assert_ptr_nonnull(tf_cache_fill_buffer(c, e1));
	tf_cache_publish(c, e1, TF_OK, NULL);
	tf_cache_release(c, e1, false);
	ck_assert_uint_eq(stats_of(c).pinned, 0);
	ck_assert_uint_eq(stats_of(c).entries, 2);
	ck_assert_uint_eq(stats_of(c).used, COST(500) + COST(0));
	tf_cache_free(c);
	fake_destroy(&f);
}
END_TEST

/*
 * Done chunks: beyond done_keep (budget / 16 here) they are evicted at
 * once and counted as recycled; the few kept answer a retry; under
 * pressure they go before any LRU chunk, even older ones; a done chunk
 * read again is an ordinary recent chunk.
 */
START_TEST(test_done_chunks)
{
	const size_t budget = 32 * COST(1024);	/* done_keep: two chunks */
	tf_cache *c = new_cache(budget, 0);
	tf_workspace *ws = tf_workspace_new();
	uint64_t o = tf_cache_owner(c), p = tf_cache_owner(c);
	tf_cache_stats s;
	fake f, g;

	fake_init(&f, 21, 1024, false);
	fake_init(&g, 22, 1024, false);
	for (uint64_t i = 0; i < 20; i++)
		get_done(c, o, &f, i, ws);
	s = stats_of(c);
	ck_assert_uint_eq(s.entries, 2);
	ck_assert_uint_eq(s.used, 2 * COST(1024));
	ck_assert_uint_eq(s.recycled, 18);
	ck_assert_uint_eq(s.evictions, 18);
	get_release(c, o, &f, 18, ws);		/* the last two were kept */
	get_release(c, o, &f, 19, ws);
	ck_assert_uint_eq(atomic_load(&f.loads), 20);
	get_release(c, o, &f, 0, ws);		/* an older one was not */
	ck_assert_uint_eq(atomic_load(&f.index_loads[0]), 2);

	/* A full cache: 29 LRU chunks of p, o's three turned done. */
	for (uint64_t i = 0; i < 29; i++)
		get_release(c, p, &g, i, ws);
	ck_assert_uint_eq(stats_of(c).entries, 32);
	ck_assert_uint_eq(stats_of(c).used, budget);
	get_done(c, o, &f, 18, ws);
	get_done(c, o, &f, 19, ws);
	s = stats_of(c);
	ck_assert_uint_eq(s.entries, 32);	/* o/18 and o/19 kept, done */
	ck_assert_uint_eq(s.recycled, 18);
	get_release(c, p, &g, 29, ws);		/* pressure: the older done chunk goes */
	s = stats_of(c);
	ck_assert_uint_eq(s.recycled, 19);
	ck_assert_uint_eq(s.evictions, 19);
	get_release(c, o, &f, 0, ws);		/* the LRU's oldest stayed */
	ck_assert_uint_eq(atomic_load(&f.index_loads[0]), 2);
	get_release(c, o, &f, 19, ws);		/* done, read again: LRU, most recent */
	ck_assert_uint_eq(atomic_load(&f.index_loads[19]), 1);
	get_release(c, p, &g, 30, ws);		/* no done chunk left: p/0 goes */
	s = stats_of(c);
	ck_assert_uint_eq(s.recycled, 19);
	ck_assert_uint_eq(s.evictions, 20);
	get_release(c, o, &f, 19, ws);
	ck_assert_uint_eq(atomic_load(&f.index_loads[19]), 1);
	get_release(c, p, &g, 0, ws);
	ck_assert_uint_eq(atomic_load(&g.index_loads[0]), 2);
	ck_assert_uint_le(stats_of(c).used, budget);
	tf_workspace_free(ws);
	tf_cache_free(c);
	fake_destroy(&f);
	fake_destroy(&g);
}
END_TEST

/* How many bytes of the 64 KiB at p are resident. */
static size_t resident64k(const uint8_t *p)
{
	unsigned char v[16];
	long page = sysconf(_SC_PAGESIZE);
	size_t n = 0;

	ck_assert(page >= 4096 && (65536 / page) <= 16);
	ck_assert_int_eq(mincore((void *)p, 65536, v), 0);
	for (long i = 0; i < 65536 / page; i++)
		n += (v[i] & 1) ? (size_t)page : 0;
	return n;
}

/* Slots freed and not reused go back to the kernel beyond a 16th of the
 * budget: 48 chunks of 64 KiB filled and passed on (done) under 4 MiB
 * leave the 4 kept hot and the 4 done chunks kept resident, and of the
 * others only the page holding the free list's link (768 -> 168 KiB). */
START_TEST(test_idle_slots_returned)
{
	tf_cache *c = new_cache((size_t)4 << 20, 0);
	uint64_t o = tf_cache_owner(c);
	const uint8_t *bufs[48];
	tf_cache_entry *es[48];
	size_t still = 0;

	for (uint64_t i = 0; i < 48; i++) {
		tf_cache_entry *e;
		tf_cache_state st;
		uint8_t *b;

		ck_assert_int_eq(tf_cache_acquire(c, o, i, 65536, &e, &st, NULL), TF_OK);
		ck_assert_int_eq(st, TF_CACHE_CLAIMED);
		ck_assert_ptr_nonnull(b = tf_cache_fill_buffer(c, e));
		memset(b, 0x5a, 65536);
		tf_cache_publish(c, e, TF_OK, NULL);
		bufs[i] = b;
		es[i] = e;
	}
	for (uint64_t i = 0; i < 48; i++)	/* all released at once: 44 go back to the pool */
		tf_cache_release(c, es[i], true);
	for (unsigned i = 0; i < 48; i++)
		still += resident64k(bufs[i]);
	ck_assert_uint_le(still, 8 * 65536 + 40 * (size_t)sysconf(_SC_PAGESIZE));
	tf_cache_free(c);
}
END_TEST

/* Bookkeeping is charged: ten thousand 1-byte chunks under 64 KiB hold
 * budget / (1 + ENTRY_COST) entries, never more bytes than the budget, and
 * the most recent ones are found again. */
START_TEST(test_entry_cost)
{
	const size_t budget = 64 << 10, fit = budget / COST(1);
	tf_cache *c = new_cache(budget, 0);
	tf_workspace *ws = tf_workspace_new();
	uint64_t o = tf_cache_owner(c);
	tf_cache_stats s;
	fake f;

	fake_init(&f, 23, 1, false);
	for (uint64_t i = 0; i < 10000; i++) {
		get_release(c, o, &f, i, ws);
		s = stats_of(c);
		ck_assert_uint_le(s.used, budget);
		ck_assert_uint_le(s.entries, fit);
	}
	s = stats_of(c);
	ck_assert_uint_eq(s.entries, fit);
	ck_assert_uint_eq(s.used, fit * COST(1));
	ck_assert_uint_eq(s.evictions, 10000 - fit);
	for (uint64_t i = 10000 - fit; i < 10000; i++)
		get_release(c, o, &f, i, ws);
	ck_assert_uint_eq(atomic_load(&f.loads), 10000);
	ck_assert_uint_eq(stats_of(c).hits, fit);
	tf_workspace_free(ws);
	tf_cache_free(c);
	fake_destroy(&f);
}
END_TEST

/* The table grows with its entries (1024 buckets to start): twenty
 * thousand entries of two owners are all found again. */
START_TEST(test_table_growth)
{
	tf_cache *c = new_cache(16 << 20, 0);
	tf_workspace *ws = tf_workspace_new();
	uint64_t o[2] = { tf_cache_owner(c), tf_cache_owner(c) };
	fake f[2];

	fake_init(&f[0], 24, 1, false);
	fake_init(&f[1], 25, 1, false);
	for (uint64_t i = 0; i < 10000; i++)
		for (unsigned k = 0; k < 2; k++)
			get_release(c, o[k], &f[k], i, ws);
	ck_assert_uint_eq(stats_of(c).entries, 20000);
	ck_assert_uint_eq(stats_of(c).evictions, 0);
	for (uint64_t i = 10000; i-- > 0;)
		for (unsigned k = 0; k < 2; k++)
			get_release(c, o[k], &f[k], i, ws);
	ck_assert_uint_eq(stats_of(c).hits, 20000);
	ck_assert_uint_eq(atomic_load(&f[0].loads) + atomic_load(&f[1].loads), 20000);
	tf_workspace_free(ws);
	tf_cache_free(c);
	fake_destroy(&f[0]);
	fake_destroy(&f[1]);
}
END_TEST

/* ---- threads -------------------------------------------------------------------------------- */

typedef struct reader {
	tf_cache *c;
	uint64_t owner, index;
	fake *f;
	pthread_barrier_t *start;
	tf_status rc;
	bool bytes_ok;
	tf_error err;
	pthread_t thread;
} reader;

static void *reader_main(void *arg)
{
	reader *r = arg;
	tf_workspace *ws = tf_workspace_new();
	tf_cache_source src = source_of(r->f);
	tf_cache_entry *e = NULL;

	if (r->start)
		pthread_barrier_wait(r->start);
	r->rc = tf_cache_get(r->c, r->owner, r->index, chunk_len(r->f, r->index), &src, ws, &e, &r->err);
	if (r->rc == TF_OK) {
		r->bytes_ok = chunk_ok(r->f, r->index, tf_cache_data(e));
		tf_cache_release(r->c, e, false);
	}
	tf_workspace_free(ws);
	return NULL;
}

static void start_readers(reader *r, unsigned n, tf_cache *c, uint64_t owner, fake *f,
			  const uint64_t *indexes, pthread_barrier_t *start)
{
	for (unsigned i = 0; i < n; i++) {
		r[i] = (reader){ .c = c, .owner = owner, .index = indexes[i], .f = f, .start = start };
		ck_assert_int_eq(pthread_create(&r[i].thread, NULL, reader_main, &r[i]), 0);
	}
}

static void join_readers(reader *r, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		ck_assert_int_eq(pthread_join(r[i].thread, NULL), 0);
}

/* Eight readers of one missing chunk while its load is held at the gate:
 * all wait for that one load and all get its bytes (or its error). */
static void single_flight(bool failing)
{
	enum { N = 8 };
	tf_cache *c = new_cache(1 << 20, 0);
	uint64_t idx[N];
	pthread_barrier_t start;
	reader r[N];
	fake f;

	fake_init(&f, 12, 3000, true);
	f.fail_index = 5;
	atomic_store(&f.fail, failing);
	for (unsigned i = 0; i < N; i++)
		idx[i] = 5;
	pthread_barrier_init(&start, NULL, N);
	start_readers(r, N, c, tf_cache_owner(c), &f, idx, &start);
	ck_assert(fake_wait(&f, &f.entered, 1));
	wait_for_hits(c, N - 1);
	fake_open_gate(&f);
	join_readers(r, N);
	ck_assert(!f.hung);
	ck_assert_uint_eq(atomic_load(&f.loads), 1);
	for (unsigned i = 0; i < N; i++) {
		ck_assert_int_eq(r[i].rc, failing ? TF_E_CORRUPT : TF_OK);
		ck_assert_msg(failing || r[i].bytes_ok, "reader %u saw wrong bytes", i);
		ck_assert_msg(!failing || !strcmp(r[i].err.msg, "chunk 5: bad bytes"),
			      "reader %u got '%s'", i, r[i].err.msg);
	}
	ck_assert_uint_eq(stats_of(c).misses, 1);
	ck_assert_uint_eq(stats_of(c).hits, N - 1);
	ck_assert_uint_eq(stats_of(c).pinned, 0);
	ck_assert_uint_eq(stats_of(c).entries, failing ? 0 : 1);
	pthread_barrier_destroy(&start);
	tf_cache_free(c);
	fake_destroy(&f);
}

START_TEST(test_single_flight)
{
	single_flight(false);
}
END_TEST

START_TEST(test_single_flight_failure)
{
	single_flight(true);
}
END_TEST

/* Misses on different chunks decode at the same time: each load waits in
 * load() until the other is inside too. */
START_TEST(test_parallel_misses)
{
	static const uint64_t idx[] = { 1, 2, 3 };
	tf_cache *c = new_cache(1 << 20, 0);
	reader r[3];
	fake f;

	fake_init(&f, 13, 2000, true);
	f.together = 3;
	fake_open_gate(&f);
	start_readers(r, 3, c, tf_cache_owner(c), &f, idx, NULL);
	join_readers(r, 3);
	ck_assert_msg(!f.hung, "loads of different chunks did not run in parallel");
	ck_assert_uint_eq(f.max_inside, 3);
	for (unsigned i = 0; i < 3; i++) {
		ck_assert_int_eq(r[i].rc, TF_OK);
		ck_assert(r[i].bytes_ok);
	}
	tf_cache_free(c);
	fake_destroy(&f);
}
END_TEST

/* ---- worker jobs ----------------------------------------------------------------------------- */

#define MAX_JOBS 1024

typedef struct job_set job_set;

/* A job gets one chunk through the cache it runs in and records what it saw. */
typedef struct job_rec {
	job_set *set;
	uint64_t owner, index;
	atomic_uint runs, drops;
	tf_status rc;		/* written before the run is announced */
	bool saw_cache, saw_ws, bytes_ok;
} job_rec;

struct job_set {
	tf_cache *c;
	fake *f;
	atomic_uint ran, dropped;	/* over all jobs, announced on f's condition */
	size_t n;			/* jobs submitted */
	job_rec v[MAX_JOBS];
};

static void job_run(void *ctx, tf_cache *c, tf_workspace *ws)
{
	job_rec *j = ctx;
	job_set *s = j->set;
	tf_cache_source src = source_of(s->f);
	tf_cache_entry *e = NULL;

	j->saw_cache = c == s->c;
	j->saw_ws = ws != NULL;
	j->rc = tf_cache_get(c, j->owner, j->index, chunk_len(s->f, j->index), &src, ws, &e, NULL);
	if (j->rc == TF_OK) {
		j->bytes_ok = chunk_ok(s->f, j->index, tf_cache_data(e));
		tf_cache_release(c, e, false);
	}
	atomic_fetch_add(&j->runs, 1);
	fake_signal(s->f, &s->ran, 1);
}

static void job_drop(void *ctx)
{
	job_rec *j = ctx;

	atomic_fetch_add(&j->drops, 1);
	fake_signal(j->set->f, &j->set->dropped, 1);
}

static job_set *job_set_new(tf_cache *c, fake *f)
{
	job_set *s = calloc(1, sizeof(*s));

	ck_assert_ptr_nonnull(s);
	s->c = c;
	s->f = f;
	return s;
}

/* Queue a job getting (owner, index); whether the cache took it. */
static bool submit_job(job_set *s, uint64_t owner, uint64_t index)
{
	job_rec *j;

	ck_assert_uint_lt(s->n, MAX_JOBS);
	j = &s->v[s->n];
	memset(j, 0, sizeof(*j));
	j->set = s;
	j->owner = owner;
	j->index = index;
	if (!tf_cache_submit(s->c, &(tf_cache_job){ job_run, job_drop, j }))
		return false;
	s->n++;
	return true;
}

/* A job runs on a worker, with the cache and a workspace; its claim is
 * counted as a prefetch; a reader then finds the chunk there. */
START_TEST(test_job_runs)
{
	tf_cache *c = new_cache(1 << 20, 2);
	tf_workspace *ws = tf_workspace_new();
	uint64_t o = tf_cache_owner(c);
	job_set *s;
	fake f;

	fake_init(&f, 14, 2500, false);
	s = job_set_new(c, &f);
	ck_assert_uint_eq(tf_cache_workers(c), 2);
	ck_assert(submit_job(s, o, 3));
	ck_assert(fake_wait(&f, &s->ran, 1));
	ck_assert_int_eq(s->v[0].rc, TF_OK);
	ck_assert(s->v[0].saw_cache && s->v[0].saw_ws && s->v[0].bytes_ok);
	ck_assert_uint_eq(stats_of(c).prefetches, 1);
	ck_assert_uint_eq(stats_of(c).misses, 1);
	get_release(c, o, &f, 3, ws);
	ck_assert_uint_eq(stats_of(c).hits, 1);
	ck_assert_uint_eq(stats_of(c).misses, 1);
	ck_assert_uint_eq(atomic_load(&f.loads), 1);

	ck_assert(submit_job(s, o, 3));		/* cached: the job loads nothing */
	ck_assert(fake_wait(&f, &s->ran, 2));
	ck_assert_int_eq(s->v[1].rc, TF_OK);
	ck_assert_uint_eq(stats_of(c).prefetches, 1);
	ck_assert_uint_eq(atomic_load(&f.loads), 1);
	tf_workspace_free(ws);
	tf_cache_free(c);
	for (size_t i = 0; i < s->n; i++) {
		ck_assert_uint_eq(atomic_load(&s->v[i].runs), 1);
		ck_assert_uint_eq(atomic_load(&s->v[i].drops), 0);
	}
	free(s);
	fake_destroy(&f);
}
END_TEST

/* No workers: submit refuses and calls nothing. */
START_TEST(test_submit_no_workers)
{
	tf_cache *c = new_cache(1 << 20, 0);
	job_set *s;
	fake f;

	fake_init(&f, 15, 100, false);
	s = job_set_new(c, &f);
	ck_assert(!submit_job(s, tf_cache_owner(c), 0));
	ck_assert_uint_eq(tf_cache_backlog(c), 0);
	tf_cache_free(c);
	ck_assert_uint_eq(atomic_load(&s->ran), 0);
	ck_assert_uint_eq(atomic_load(&s->dropped), 0);
	ck_assert_uint_eq(atomic_load(&f.loads), 0);
	free(s);
	fake_destroy(&f);
}
END_TEST

/* A job whose load fails leaves nothing behind: the next get loads again. */
START_TEST(test_job_failure)
{
	tf_cache *c = new_cache(1 << 20, 1);
	tf_workspace *ws = tf_workspace_new();
	uint64_t o = tf_cache_owner(c);
	job_set *s;
	fake f;

	fake_init(&f, 16, 700, false);
	s = job_set_new(c, &f);
	f.fail_index = 2;
	atomic_store(&f.fail, true);
	ck_assert(submit_job(s, o, 2));
	ck_assert(fake_wait(&f, &s->ran, 1));
	ck_assert_int_eq(s->v[0].rc, TF_E_CORRUPT);
	ck_assert_uint_eq(stats_of(c).entries, 0);
	ck_assert_uint_eq(stats_of(c).pinned, 0);
	atomic_store(&f.fail, false);
	get_release(c, o, &f, 2, ws);
	ck_assert_uint_eq(atomic_load(&f.loads), 2);
	tf_workspace_free(ws);
	tf_cache_free(c);
	ck_assert_uint_eq(atomic_load(&s->dropped), 0);
	free(s);
	fake_destroy(&f);
}
END_TEST

/* While the only worker's job decodes X, a reader of X waits for that
 * decode instead of starting its own. */
START_TEST(test_job_while_loading)
{
	static const uint64_t idx[] = { 4 };
	tf_cache *c = new_cache(1 << 20, 1);
	uint64_t o = tf_cache_owner(c);
	job_set *s;
	reader r[1];
	fake f;

	fake_init(&f, 17, 1500, true);
	s = job_set_new(c, &f);
	ck_assert(submit_job(s, o, 4));
	ck_assert(fake_wait(&f, &f.entered, 1));
	ck_assert_uint_eq(tf_cache_backlog(c), 1);	/* running */
	start_readers(r, 1, c, o, &f, idx, NULL);
	wait_for_hits(c, 1);
	fake_open_gate(&f);
	join_readers(r, 1);
	ck_assert(fake_wait(&f, &s->ran, 1));
	ck_assert_int_eq(r[0].rc, TF_OK);
	ck_assert(r[0].bytes_ok);
	ck_assert_int_eq(s->v[0].rc, TF_OK);
	ck_assert_uint_eq(atomic_load(&f.loads), 1);
	ck_assert_uint_eq(stats_of(c).misses, 1);
	ck_assert_uint_eq(stats_of(c).prefetches, 1);
	ck_assert_uint_eq(stats_of(c).hits, 1);
	tf_cache_free(c);
	free(s);
	fake_destroy(&f);
}
END_TEST

/* The queue is bounded: with the worker held, jobs queue up to a limit,
 * then submit refuses (calling nothing); the backlog counts the queued and
 * the running; every job taken runs exactly once. */
START_TEST(test_queue_full_and_backlog)
{
	tf_cache *c = new_cache(1 << 20, 1);
	uint64_t o = tf_cache_owner(c);
	size_t queued;
	job_set *s;
	fake f;

	fake_init(&f, 18, 100, true);
	s = job_set_new(c, &f);
	ck_assert(submit_job(s, o, 0));
	ck_assert(fake_wait(&f, &f.entered, 1));	/* the worker holds job 0 */
	while (s->n < MAX_JOBS - 1 && submit_job(s, o, s->n % NINDEX))
		ck_assert_uint_eq(tf_cache_backlog(c), s->n);
	queued = s->n - 1;
	ck_assert_msg(queued >= 16 && s->n < MAX_JOBS - 1, "%zu jobs queued", queued);
	ck_assert(!submit_job(s, o, 1));
	ck_assert_uint_eq(s->n, queued + 1);
	fake_open_gate(&f);
	ck_assert(fake_wait(&f, &s->ran, (unsigned)s->n));
	for (unsigned spin = 0; spin < 60000 && tf_cache_backlog(c); spin++)
		usleep(1000);	/* the worker leaves its last job */
	ck_assert_uint_eq(tf_cache_backlog(c), 0);
	tf_cache_free(c);
	ck_assert_uint_eq(atomic_load(&s->dropped), 0);
	for (size_t i = 0; i < s->n; i++) {
		ck_assert_uint_eq(atomic_load(&s->v[i].runs), 1);
		ck_assert_int_eq(s->v[i].rc, TF_OK);
		ck_assert(s->v[i].bytes_ok);
	}
	free(s);
	fake_destroy(&f);
}
END_TEST

typedef struct freer {
	tf_cache *c;
	fake *f;
	bool started;
} freer;

static void *free_main(void *arg)
{
	freer *fr = arg;

	pthread_mutex_lock(&fr->f->lock);
	fr->started = true;
	pthread_cond_broadcast(&fr->f->cond);
	pthread_mutex_unlock(&fr->f->lock);
	tf_cache_free(fr->c);
	return NULL;
}

/*
 * tf_cache_free drops the queued jobs: each one's drop is called exactly
 * once and its run never.  The worker is kept in a job until free has
 * begun: submit refusing a job while the queue is far from full shows that
 * it is stopping (free joins the held worker, so the cache is still there).
 */
START_TEST(test_free_discards_queue)
{
	tf_cache *c = new_cache(1 << 20, 1);
	uint64_t o = tf_cache_owner(c);
	struct timespec deadline, now;
	job_set *s;
	pthread_t t;
	freer fr;
	fake f;

	fake_init(&f, 19, 600, true);
	s = job_set_new(c, &f);
	ck_assert(submit_job(s, o, 0));
	ck_assert(fake_wait(&f, &f.entered, 1));
	for (uint64_t i = 1; i <= 3; i++)
		ck_assert(submit_job(s, o, i));
	fr = (freer){ c, &f, false };
	ck_assert_int_eq(pthread_create(&t, NULL, free_main, &fr), 0);
	pthread_mutex_lock(&f.lock);
	while (!fr.started)
		pthread_cond_wait(&f.cond, &f.lock);
	pthread_mutex_unlock(&f.lock);
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += HANG_GUARD_S;
	/* Each probe that is taken is one more job to drop; a refusal with the
	 * queue this far from full means stopping. */
	while (submit_job(s, o, s->n % NINDEX)) {
		ck_assert_msg(s->n < 200, "tf_cache_free did not stop the queue");
		clock_gettime(CLOCK_MONOTONIC, &now);
		ck_assert_msg(now.tv_sec < deadline.tv_sec, "tf_cache_free never began stopping");
		usleep(1000);
	}
	fake_open_gate(&f);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_eq(atomic_load(&s->v[0].runs), 1);
	ck_assert_uint_eq(atomic_load(&s->v[0].drops), 0);
	for (size_t i = 1; i < s->n; i++) {
		ck_assert_uint_eq(atomic_load(&s->v[i].runs), 0);
		ck_assert_uint_eq(atomic_load(&s->v[i].drops), 1);
	}
	ck_assert_uint_eq(atomic_load(&s->dropped), s->n - 1);
	ck_assert_uint_eq(atomic_load(&f.loads), 1);
	free(s);
	fake_destroy(&f);
}
END_TEST

/* ---- stress ------------------------------------------------------------------------------------ */

enum { OWNERS = 64, INDEXES = 32, THREADS = 8, OPS = 10000, MAX_PINS = 4 };

typedef struct stress {
	tf_cache *c;
	fake fakes[OWNERS];
	_Atomic uint64_t owners[OWNERS];	/* a new owner now and then: a changed file */
	atomic_uint bad, gets, jobs, jobs_done;
	pthread_barrier_t start;
} stress;

typedef struct pin {
	tf_cache_entry *e;
	const fake *f;
	uint64_t index;
} pin;

typedef struct stress_thread {
	stress *s;
	uint64_t rng;
	pthread_t thread;
} stress_thread;

typedef struct stress_job {
	stress *s;
	unsigned o;
	uint64_t owner, index;
} stress_job;

static uint64_t next_random(uint64_t *s)	/* splitmix64 */
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Check a pinned chunk once more (it must not have changed under us) and
 * give it back, now and then as done. */
static void unpin(stress *s, pin *p, bool done)
{
	if (!chunk_ok(p->f, p->index, tf_cache_data(p->e)))
		atomic_fetch_add(&s->bad, 1);
	tf_cache_release(s->c, p->e, done);
}

static void stress_job_run(void *ctx, tf_cache *c, tf_workspace *ws)
{
	stress_job *j = ctx;
	fake *f = &j->s->fakes[j->o];
	tf_cache_source src = source_of(f);
	tf_cache_entry *e;

	atomic_fetch_add(&j->s->gets, 1);
	if (tf_cache_get(c, j->owner, j->index, chunk_len(f, j->index), &src, ws, &e, NULL) != TF_OK) {
		atomic_fetch_add(&j->s->bad, 1);
	} else {
		if (!chunk_ok(f, j->index, tf_cache_data(e)))
			atomic_fetch_add(&j->s->bad, 1);
		tf_cache_release(c, e, false);
	}
	atomic_fetch_add(&j->s->jobs_done, 1);
	free(j);
}

static void stress_job_drop(void *ctx)
{
	stress_job *j = ctx;

	atomic_fetch_add(&j->s->jobs_done, 1);
	free(j);
}

static void stress_submit(stress *s, unsigned o, uint64_t index)
{
	stress_job *j = malloc(sizeof(*j));

	if (!j) {
		atomic_fetch_add(&s->bad, 1);
		return;
	}
	*j = (stress_job){ s, o, atomic_load(&s->owners[o]), index };
	if (tf_cache_submit(s->c, &(tf_cache_job){ stress_job_run, stress_job_drop, j }))
		atomic_fetch_add(&s->jobs, 1);
	else
		free(j);	/* queue full: best effort */
}

/* Half the traffic goes to a hot set that fits the budget, so hits,
 * misses and evictions all happen. */
static void stress_get(stress *s, uint64_t r, tf_workspace *ws, pin *pins, unsigned *npins)
{
	unsigned o = r & 1 ? (unsigned)(r >> 8) % 4 : (unsigned)(r >> 8) % OWNERS;
	uint64_t i = r & 1 ? (r >> 16) % 8 : (r >> 16) % INDEXES;
	tf_cache_source src = source_of(&s->fakes[o]);
	tf_cache_entry *e;

	atomic_fetch_add(&s->gets, 1);
	if (tf_cache_get(s->c, atomic_load(&s->owners[o]), i, chunk_len(&s->fakes[o], i), &src, ws, &e,
			 NULL) != TF_OK) {
		atomic_fetch_add(&s->bad, 1);
		return;
	}
	pins[(*npins)++] = (pin){ e, &s->fakes[o], i };
	if (!chunk_ok(&s->fakes[o], i, tf_cache_data(e)))
		atomic_fetch_add(&s->bad, 1);
}

static void *stress_main(void *arg)
{
	stress_thread *t = arg;
	stress *s = t->s;
	tf_workspace *ws = tf_workspace_new();
	pin pins[MAX_PINS];
	unsigned npins = 0;

	pthread_barrier_wait(&s->start);
	for (unsigned op = 0; op < OPS; op++) {
		uint64_t r = next_random(&t->rng);
		unsigned o = (unsigned)(r >> 40) % OWNERS;

		if ((r >> 32) % 50 == 0)
			stress_submit(s, o, (r >> 24) % INDEXES);
		else if ((r >> 32) % 997 == 1)
			atomic_store(&s->owners[o], tf_cache_owner(s->c));
		else
			stress_get(s, r, ws, pins, &npins);
		while (npins && (npins == MAX_PINS || (r >> 56) % 3 == 0)) {
			unsigned victim = (unsigned)(r >> 48) % npins;

			unpin(s, &pins[victim], (r >> 20) % 4 == 0);
			pins[victim] = pins[--npins];
			r = next_random(&t->rng);
		}
	}
	while (npins)
		unpin(s, &pins[--npins], false);
	tf_workspace_free(ws);
	return NULL;
}

static void stress_run(stress *s)
{
	stress_thread t[THREADS];

	pthread_barrier_init(&s->start, NULL, THREADS);
	for (unsigned i = 0; i < THREADS; i++) {
		t[i] = (stress_thread){ .s = s, .rng = 1000 + i };
		ck_assert_int_eq(pthread_create(&t[i].thread, NULL, stress_main, &t[i]), 0);
	}
	for (unsigned i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_join(t[i].thread, NULL), 0);
	pthread_barrier_destroy(&s->start);
}

START_TEST(test_stress)
{
	const size_t budget = 96 * 1024;
	stress *s = calloc(1, sizeof(*s));
	tf_cache_stats st;
	unsigned loads = 0;

	ck_assert_ptr_nonnull(s);
	s->c = new_cache(budget, 2);
	for (unsigned o = 0; o < OWNERS; o++) {
		fake_init(&s->fakes[o], 100 + o, 0, false);
		atomic_init(&s->owners[o], tf_cache_owner(s->c));
	}
	stress_run(s);
	/* Jobs may still be queued or running when the readers are done:
	 * wait, bounded, for the workers to finish them. */
	for (unsigned spin = 0; spin < 60000 && atomic_load(&s->jobs_done) < atomic_load(&s->jobs); spin++)
		usleep(1000);
	ck_assert_uint_eq(atomic_load(&s->jobs_done), atomic_load(&s->jobs));
	for (unsigned spin = 0; spin < 60000 && stats_of(s->c).pinned; spin++)
		usleep(1000);	/* the last job's release is done under the lock */
	st = stats_of(s->c);
	ck_assert_uint_gt(atomic_load(&s->jobs), 0);
	ck_assert_uint_eq(atomic_load(&s->bad), 0);
	ck_assert_uint_eq(st.pinned, 0);
	ck_assert_uint_le(st.used, budget);
	ck_assert_uint_eq(st.hits + st.misses, atomic_load(&s->gets));
	ck_assert_uint_gt(st.hits, 0);
	ck_assert_uint_gt(st.evictions, 0);
	ck_assert_uint_gt(st.recycled, 0);
	ck_assert_uint_le(st.prefetches, atomic_load(&s->jobs));
	tf_cache_free(s->c);
	for (unsigned o = 0; o < OWNERS; o++) {
		loads += atomic_load(&s->fakes[o].loads);
		fake_destroy(&s->fakes[o]);
	}
	ck_assert_uint_eq(loads, st.misses);	/* every claim was loaded once */
	free(s);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("cache");
	TCase *basic = tcase_create("basic"), *threads = tcase_create("threads");
	TCase *heavy = tcase_create("stress");

	tcase_add_test(basic, test_oversized_chunk_refused);
	tcase_add_test(basic, test_hits_and_misses);
	tcase_add_test(basic, test_lru_order);
	tcase_add_test(basic, test_budget_after_release);
	tcase_add_test(basic, test_pinned_survive_pressure);
	tcase_add_test(basic, test_load_failure);
	tcase_add_test(basic, test_load_failure_null_err);
	tcase_add_test(basic, test_new_owner_never_sees_old_bytes);
	tcase_add_test(basic, test_claim_publish_wait);
	tcase_add_test(basic, test_done_chunks);
	tcase_add_test(basic, test_idle_slots_returned);
	tcase_add_test(basic, test_entry_cost);
	tcase_add_test(basic, test_table_growth);
	tcase_add_test(basic, test_many_pinned);
	tcase_add_test(threads, test_single_flight);
	tcase_add_test(threads, test_single_flight_failure);
	tcase_add_test(threads, test_parallel_misses);
	tcase_add_test(threads, test_job_runs);
	tcase_add_test(threads, test_submit_no_workers);
	tcase_add_test(threads, test_job_failure);
	tcase_add_test(threads, test_job_while_loading);
	tcase_add_test(threads, test_queue_full_and_backlog);
	tcase_add_test(threads, test_free_discards_queue);
	/* Slow under valgrind and the sanitizers, never for lack of progress. */
	tcase_set_timeout(basic, 120);
	tcase_set_timeout(threads, 120);
	tcase_set_timeout(heavy, 600);
	tcase_add_test(heavy, test_stress);
	suite_add_tcase(s, basic);
	suite_add_tcase(s, threads);
	suite_add_tcase(s, heavy);
	return s;
}

TF_TEST_MAIN(suite)
