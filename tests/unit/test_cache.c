/*
 * test_cache.c - the decoded-chunk cache (tf_cache.c): hits, misses, LRU
 * order, the byte budget, pinning, failures, drop, single flight, parallel
 * loads, decode-ahead workers and a multi-threaded stress run.
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
#include <unistd.h>
#include <time.h>

#include "tf_cache.h"

#define MAX_CHUNK 4096
#define NINDEX 64		/* per-index load counters kept by a fake */
#define HANG_GUARD_S 60		/* a rendezvous that never completes is a failure, not a hang */

typedef struct fake {
	uint64_t seed;
	uint32_t len;			/* every chunk's length; 0: varied per index */
	atomic_uint loads, holds, releases;
	atomic_uint index_loads[NINDEX];
	atomic_bool fail;		/* load() of fail_index fails */
	uint64_t fail_index;

	/* Steering (only when `steer`): load() announces itself, waits until
	 * `together` loads have entered and the gate is open.  The lock and
	 * condition also announce every release(). */
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
	uint8_t *want = malloc(chunk_len(f, index));
	bool ok = want != NULL;

	if (ok) {
		fill_chunk(f, index, want);
		ok = memcmp(want, data, chunk_len(f, index)) == 0;
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

static void fake_hold(void *ctx)
{
	atomic_fetch_add(&((fake *)ctx)->holds, 1);
}

static void fake_release(void *ctx)
{
	fake_signal(ctx, &((fake *)ctx)->releases, 1);
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
	return (tf_cache_source){ f, fake_load, fake_hold, fake_release };
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
	ck_assert_msg(chunk_ok(f, index, tf_cache_data(e)), "chunk %llu has wrong bytes",
		      (unsigned long long)index);
	return e;
}

static void get_release(tf_cache *c, uint64_t owner, fake *f, uint64_t index, tf_workspace *ws)
{
	tf_cache_release(c, get_pinned(c, owner, f, index, ws));
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
	ck_assert_uint_eq(s.used, 1000);
	ck_assert_uint_eq(s.budget, 1 << 20);
	tf_cache_release(c, e);
	ck_assert_uint_eq(stats_of(c).pinned, 0);

	get_release(c, a, &f, 5, ws);		/* hit */
	get_release(c, b, &f, 5, ws);		/* same index, other owner: miss */
	get_release(c, a, &f, 6, ws);		/* miss */
	get_release(c, b, &f, 5, ws);		/* hit */
	s = stats_of(c);
	ck_assert_uint_eq(s.hits, 2);
	ck_assert_uint_eq(s.misses, 3);
	ck_assert_uint_eq(s.entries, 3);
	ck_assert_uint_eq(s.evictions, 0);
	ck_assert_uint_eq(atomic_load(&f.loads), 3);
	ck_assert_uint_eq(tf_cache_workers(c), 0);
	tf_workspace_free(ws);
	tf_cache_free(c);
	fake_destroy(&f);
}
END_TEST

/* Issue 9: a corrupt chunk header claiming up to 4 GiB evicted the whole
 * cache and then tried a 4 GiB allocation.  Now it is refused up front,
 * with everything cached left in place and nothing loaded. */
START_TEST(test_oversized_chunk_refused)
{
	tf_cache *c = new_cache(1 << 20, 0);
	tf_workspace *ws = tf_workspace_new();
	uint64_t a = tf_cache_owner(c);
	tf_cache_source src;
	tf_cache_entry *e = NULL;
	tf_error err;
	fake f;

	fake_init(&f, 1, 1000, false);
	src = source_of(&f);
	for (uint64_t i = 0; i < 8; i++)
		get_release(c, a, &f, i, ws);
	ck_assert_int_eq(tf_cache_get(c, a, 99, UINT32_MAX, &src, ws, &e, &err), TF_E_CORRUPT);
	ck_assert_ptr_null(e);
	ck_assert_msg(strstr(err.msg, "larger than the cache budget"), "%s", err.msg);
	ck_assert_uint_eq(stats_of(c).entries, 8);
	ck_assert_uint_eq(stats_of(c).evictions, 0);
	ck_assert_uint_eq(atomic_load(&f.loads), 8);
	tf_cache_prefetch(c, a, 100, UINT32_MAX, &src);	/* ignored, no crash */
	tf_workspace_free(ws);
	tf_cache_free(c);
	fake_destroy(&f);
}
END_TEST

/* Four chunks fit.  Touching one protects it; the least recently used goes. */
START_TEST(test_lru_order)
{
	tf_cache *c = new_cache(4 * 4096, 0);
	tf_workspace *ws = tf_workspace_new();
	uint64_t o = tf_cache_owner(c);
	fake f;

	fake_init(&f, 2, 4096, false);
	for (uint64_t i = 0; i < 4; i++)
		get_release(c, o, &f, i, ws);
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
	tf_workspace_free(ws);
	tf_cache_free(c);
	fake_destroy(&f);
}
END_TEST

/* Pinned chunks may push the total over budget; releasing them brings it
 * back under; a chunk larger than the whole budget is refused, evicting nothing. */
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
		tf_cache_release(c, pins[i]);
	}
	ck_assert_uint_le(stats_of(c).used, budget);
	for (unsigned n = 0; n < 2000; n++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		get_release(c, o, &f, (rng >> 33) % NINDEX, ws);
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
	}
	ck_assert_uint_le(stats_of(c).used, budget);
	ck_assert_uint_eq(stats_of(c).pinned, 0);
	tf_workspace_free(ws);
	tf_cache_free(c);
	fake_destroy(&f);
	fake_destroy(&big);
}
END_TEST

/* Held chunks stay valid and cached through heavy eviction pressure. */
START_TEST(test_pinned_survive_pressure)
{
	tf_cache *c = new_cache(4 * 2048, 0);
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
	for (unsigned i = 0; i < 3; i++) {
		ck_assert(chunk_ok(&f, i, tf_cache_data(pins[i])));
		tf_cache_release(c, pins[i]);
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
	tf_workspace_free(ws);
	tf_cache_free(c);
	fake_destroy(&f);
}
END_TEST

/* Dropping an owner forgets its chunks at once; pinned ones stay readable
 * until released, and other owners keep theirs. */
START_TEST(test_drop)
{
	tf_cache *c = new_cache(1 << 20, 0);
	tf_workspace *ws = tf_workspace_new();
	uint64_t a = tf_cache_owner(c), b = tf_cache_owner(c);
	tf_cache_entry *held1, *held2, *fresh1;
	fake f, g;

	fake_init(&f, 10, 1024, false);
	fake_init(&g, 11, 1024, false);
	for (uint64_t i = 0; i < 4; i++) {
		get_release(c, a, &f, i, ws);
		get_release(c, b, &g, i, ws);
	}
	held1 = get_pinned(c, a, &f, 1, ws);
	held2 = get_pinned(c, a, &f, 2, ws);
	tf_cache_drop(c, a);
	ck_assert_uint_eq(stats_of(c).entries, 4);
	ck_assert_uint_eq(stats_of(c).used, 4 * 1024);
	ck_assert_uint_eq(stats_of(c).pinned, 2);
	fresh1 = get_pinned(c, a, &f, 1, ws);	/* a new load, beside the dropped one */
	ck_assert_ptr_ne(fresh1, held1);
	ck_assert_uint_eq(atomic_load(&f.index_loads[1]), 2);
	ck_assert(chunk_ok(&f, 1, tf_cache_data(held1)));
	ck_assert(chunk_ok(&f, 2, tf_cache_data(held2)));
	tf_cache_release(c, held1);
	tf_cache_release(c, held2);
	tf_cache_release(c, fresh1);
	ck_assert_uint_eq(stats_of(c).pinned, 0);
	ck_assert_uint_eq(stats_of(c).entries, 5);
	get_release(c, a, &f, 0, ws);
	ck_assert_uint_eq(atomic_load(&f.index_loads[0]), 2);
	for (uint64_t i = 0; i < 4; i++)
		get_release(c, b, &g, i, ws);
	ck_assert_uint_eq(atomic_load(&g.loads), 4);
	tf_cache_drop(c, b);
	tf_cache_drop(c, 12345);		/* unknown owner: nothing */
	ck_assert_uint_eq(stats_of(c).entries, 2);
	tf_workspace_free(ws);
	tf_cache_free(c);
	fake_destroy(&f);
	fake_destroy(&g);
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
		tf_cache_release(r->c, e);
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

/* ---- decode-ahead workers -------------------------------------------------------------------- */

START_TEST(test_prefetch)
{
	tf_cache *c = new_cache(1 << 20, 2);
	tf_workspace *ws = tf_workspace_new();
	uint64_t o = tf_cache_owner(c);
	tf_cache_source src;
	fake f;

	fake_init(&f, 14, 2500, true);
	src = source_of(&f);
	fake_open_gate(&f);
	ck_assert_uint_eq(tf_cache_workers(c), 2);
	tf_cache_prefetch(c, o, 3, 2500, &src);
	ck_assert(fake_wait(&f, &f.finished, 1));
	get_release(c, o, &f, 3, ws);
	ck_assert_uint_eq(stats_of(c).hits, 1);
	ck_assert_uint_eq(stats_of(c).misses, 0);
	ck_assert_uint_eq(stats_of(c).prefetches, 1);
	ck_assert_uint_eq(atomic_load(&f.loads), 1);

	tf_cache_prefetch(c, o, 3, 2500, &src);	/* cached: nothing to do */
	ck_assert_uint_eq(atomic_load(&f.holds), 1);
	tf_workspace_free(ws);
	tf_cache_free(c);
	ck_assert_uint_eq(atomic_load(&f.loads), 1);
	ck_assert_uint_eq(atomic_load(&f.releases), atomic_load(&f.holds));
	fake_destroy(&f);
}
END_TEST

/* No workers: prefetch is a no-op and takes no hold. */
START_TEST(test_prefetch_no_workers)
{
	tf_cache *c = new_cache(1 << 20, 0);
	tf_cache_source src;
	fake f;

	fake_init(&f, 15, 100, false);
	src = source_of(&f);
	tf_cache_prefetch(c, tf_cache_owner(c), 0, 100, &src);
	tf_cache_free(c);
	ck_assert_uint_eq(atomic_load(&f.holds), 0);
	ck_assert_uint_eq(atomic_load(&f.loads), 0);
	fake_destroy(&f);
}
END_TEST

/* A failed prefetch leaves nothing behind: the next get loads again. */
START_TEST(test_prefetch_failure)
{
	tf_cache *c = new_cache(1 << 20, 1);
	tf_workspace *ws = tf_workspace_new();
	uint64_t o = tf_cache_owner(c);
	tf_cache_source src;
	fake f;

	fake_init(&f, 16, 700, true);
	src = source_of(&f);
	fake_open_gate(&f);
	f.fail_index = 2;
	atomic_store(&f.fail, true);
	tf_cache_prefetch(c, o, 2, 700, &src);
	ck_assert(fake_wait(&f, &f.releases, 1));	/* the job is over */
	ck_assert_uint_eq(stats_of(c).entries, 0);
	atomic_store(&f.fail, false);
	get_release(c, o, &f, 2, ws);
	ck_assert_uint_eq(atomic_load(&f.loads), 2);
	tf_workspace_free(ws);
	tf_cache_free(c);
	ck_assert_uint_eq(atomic_load(&f.releases), atomic_load(&f.holds));
	fake_destroy(&f);
}
END_TEST

/* While the only worker decodes X: prefetching X again does nothing, and a
 * reader of X waits for that decode instead of starting its own. */
START_TEST(test_prefetch_while_loading)
{
	static const uint64_t idx[] = { 4 };
	tf_cache *c = new_cache(1 << 20, 1);
	uint64_t o = tf_cache_owner(c);
	tf_cache_source src;
	reader r[1];
	fake f;

	fake_init(&f, 17, 1500, true);
	src = source_of(&f);
	tf_cache_prefetch(c, o, 4, 1500, &src);
	ck_assert(fake_wait(&f, &f.entered, 1));
	tf_cache_prefetch(c, o, 4, 1500, &src);
	ck_assert_uint_eq(atomic_load(&f.holds), 1);
	start_readers(r, 1, c, o, &f, idx, NULL);
	wait_for_hits(c, 1);
	fake_open_gate(&f);
	join_readers(r, 1);
	ck_assert_int_eq(r[0].rc, TF_OK);
	ck_assert(r[0].bytes_ok);
	ck_assert_uint_eq(atomic_load(&f.loads), 1);
	ck_assert_uint_eq(stats_of(c).misses, 0);
	tf_cache_free(c);
	ck_assert_uint_eq(atomic_load(&f.releases), atomic_load(&f.holds));
	fake_destroy(&f);
}
END_TEST

/* A chunk already waiting in the queue is not queued (and held) twice. */
START_TEST(test_prefetch_queued_once)
{
	tf_cache *c = new_cache(1 << 20, 1);
	uint64_t o = tf_cache_owner(c);
	tf_cache_source src;
	unsigned holds;
	fake f;

	fake_init(&f, 18, 1500, true);
	src = source_of(&f);
	tf_cache_prefetch(c, o, 0, 1500, &src);	/* the worker takes it and waits */
	ck_assert(fake_wait(&f, &f.entered, 1));
	tf_cache_prefetch(c, o, 1, 1500, &src);	/* queued */
	tf_cache_prefetch(c, o, 1, 1500, &src);	/* already queued */
	holds = atomic_load(&f.holds);
	fake_open_gate(&f);
	tf_cache_free(c);
	ck_assert_uint_eq(atomic_load(&f.releases), atomic_load(&f.holds));
	ck_assert_uint_eq(holds, 2);
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

/* tf_cache_free discards queued jobs and releases each one's hold.  The
 * worker is kept in a load until free has begun: prefetch refusing a new
 * job (with the 256-job queue far from full) shows that it is stopping. */
START_TEST(test_free_discards_queue)
{
	tf_cache *c = new_cache(1 << 20, 1);
	uint64_t o = tf_cache_owner(c), next = 1;
	tf_cache_source src;
	pthread_t t;
	freer fr;
	fake f;

	fake_init(&f, 19, 600, true);
	src = source_of(&f);
	tf_cache_prefetch(c, o, 0, 600, &src);
	ck_assert(fake_wait(&f, &f.entered, 1));
	for (; next <= 3; next++)
		tf_cache_prefetch(c, o, next, 600, &src);
	ck_assert_uint_eq(atomic_load(&f.holds), 4);
	fr = (freer){ c, &f, false };
	ck_assert_int_eq(pthread_create(&t, NULL, free_main, &fr), 0);
	pthread_mutex_lock(&f.lock);
	while (!fr.started)
		pthread_cond_wait(&f.cond, &f.lock);
	pthread_mutex_unlock(&f.lock);
	for (unsigned before = 0; before != atomic_load(&f.holds); next++) {
		before = atomic_load(&f.holds);
		tf_cache_prefetch(c, o, next, 600, &src);
		sched_yield();
	}
	fake_open_gate(&f);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_eq(atomic_load(&f.releases), atomic_load(&f.holds));
	ck_assert_uint_lt(atomic_load(&f.loads), atomic_load(&f.holds));
	fake_destroy(&f);
}
END_TEST

/* ---- stress ------------------------------------------------------------------------------------ */

enum { OWNERS = 64, INDEXES = 32, THREADS = 8, OPS = 10000, MAX_PINS = 4 };

typedef struct stress {
	tf_cache *c;
	fake fakes[OWNERS];
	uint64_t owners[OWNERS];
	atomic_uint bad, gets;
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

static uint64_t next_random(uint64_t *s)	/* splitmix64 */
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Check a pinned chunk once more (it must not have changed under us) and
 * give it back. */
static void unpin(stress *s, pin *p)
{
	if (!chunk_ok(p->f, p->index, tf_cache_data(p->e)))
		atomic_fetch_add(&s->bad, 1);
	tf_cache_release(s->c, p->e);
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
	if (tf_cache_get(s->c, s->owners[o], i, chunk_len(&s->fakes[o], i), &src, ws, &e, NULL) != TF_OK) {
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

		if ((r >> 32) % 50 == 0) {
			tf_cache_source src = source_of(&s->fakes[o]);
			uint64_t i = (r >> 24) % INDEXES;

			tf_cache_prefetch(s->c, s->owners[o], i, chunk_len(&s->fakes[o], i), &src);
		} else if ((r >> 32) % 997 == 1)
			tf_cache_drop(s->c, s->owners[o]);
		else
			stress_get(s, r, ws, pins, &npins);
		while (npins && (npins == MAX_PINS || (r >> 56) % 3 == 0)) {
			unsigned victim = (unsigned)(r >> 48) % npins;

			unpin(s, &pins[victim]);
			pins[victim] = pins[--npins];
			r = next_random(&t->rng);
		}
	}
	while (npins)
		unpin(s, &pins[--npins]);
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
		s->owners[o] = tf_cache_owner(s->c);
	}
	stress_run(s);
	/* A decode-ahead job may still be running (pinned) when the readers
	 * are done: wait, bounded, for the workers to finish it. */
	for (unsigned spin = 0; spin < 10000 && stats_of(s->c).pinned; spin++)
		usleep(1000);
	st = stats_of(s->c);
	ck_assert_uint_eq(atomic_load(&s->bad), 0);
	ck_assert_uint_eq(st.pinned, 0);
	ck_assert_uint_le(st.used, budget);
	ck_assert_uint_eq(st.hits + st.misses, atomic_load(&s->gets));
	ck_assert_uint_gt(st.hits, 0);
	ck_assert_uint_gt(st.evictions, 0);
	tf_cache_free(s->c);
	for (unsigned o = 0; o < OWNERS; o++) {
		loads += atomic_load(&s->fakes[o].loads);
		ck_assert_uint_eq(atomic_load(&s->fakes[o].releases), atomic_load(&s->fakes[o].holds));
		fake_destroy(&s->fakes[o]);
	}
	ck_assert_uint_eq(loads, st.misses + st.prefetches);
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
	tcase_add_test(basic, test_drop);
	tcase_add_test(threads, test_single_flight);
	tcase_add_test(threads, test_single_flight_failure);
	tcase_add_test(threads, test_parallel_misses);
	tcase_add_test(threads, test_prefetch);
	tcase_add_test(threads, test_prefetch_no_workers);
	tcase_add_test(threads, test_prefetch_failure);
	tcase_add_test(threads, test_prefetch_while_loading);
	tcase_add_test(threads, test_prefetch_queued_once);
	tcase_add_test(threads, test_free_discards_queue);
	/* Slow under valgrind and the sanitizers, never for lack of progress. */
	tcase_set_timeout(threads, 120);
	tcase_set_timeout(heavy, 600);
	tcase_add_test(heavy, test_stress);
	suite_add_tcase(s, basic);
	suite_add_tcase(s, threads);
	suite_add_tcase(s, heavy);
	return s;
}

TF_TEST_MAIN(suite)
