/*
 * test_lru.c - tf_lru, the keyed refcounted LRU set (util/tf_lru.h): keys
 * found after the table doubled many times, lists in order of use, held
 * entries off their list and back at their last release, removal of held
 * entries, and a random run checked against a plain model; and the hash
 * and clock beside it.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "tf_test.h"
#include "util/tf_clock.h"
#include "util/tf_hash.h"
#include "util/tf_lru.h"

typedef struct item {
	tf_lru_node node;
	char name[24];
	bool freed;
} item;

static bool same_name(const tf_lru_node *n, const void *key)
{
	return !strcmp(TF_LRU_ENTRY(n, item, node)->name, key);
}

static item *find(tf_lru *l, const char *name)
{
	tf_lru_node *n = tf_lru_find(l, tf_hash_str(name), same_name, name);

	return n ? TF_LRU_ENTRY(n, item, node) : NULL;
}

static tf_lru *new_lru(size_t buckets)
{
	tf_lru *l = NULL;
	tf_error err;

	ck_assert_int_eq(tf_lru_new(buckets, &l, &err), TF_OK);
	return l;
}

static void mark_freed(tf_lru_node *n, void *ctx)
{
	(*(size_t *)ctx)++;
	TF_LRU_ENTRY(n, item, node)->freed = true;
}

/* 100,000 names into a table of 16 buckets: every one found, none not put. */
START_TEST(test_lru_find_after_growth)
{
	enum { N = 100000 };
	item *v = calloc(N, sizeof(*v));
	tf_lru *l = new_lru(1);
	size_t cleared = 0;

	for (size_t i = 0; i < N; i++) {
		snprintf(v[i].name, sizeof(v[i].name), "f%zu", i);
		tf_lru_insert(l, &v[i].node, tf_hash_str(v[i].name));
	}
	ck_assert_uint_eq(tf_lru_count(l), N);
	for (size_t i = 0; i < N; i += 7)
		ck_assert_ptr_eq(find(l, v[i].name), &v[i]);
	ck_assert_ptr_null(find(l, "f100000"));
	ck_assert_ptr_null(find(l, ""));
	for (size_t i = 0; i < N; i += 2)
		tf_lru_remove(l, &v[i].node);
	ck_assert_uint_eq(tf_lru_count(l), N / 2);
	ck_assert_ptr_null(find(l, "f0"));
	ck_assert_ptr_eq(find(l, "f1"), &v[1]);
	tf_lru_clear(l, mark_freed, &cleared);
	ck_assert_uint_eq(cleared, N / 2);
	ck_assert_uint_eq(tf_lru_count(l), 0);
	for (size_t i = 0; i < N; i++)
		ck_assert(v[i].freed == (i % 2 == 1));
	tf_lru_free(l);
	free(v);
}
END_TEST

/* Names whose hashes share a bucket (all in one of 16) are told apart by key. */
START_TEST(test_lru_same_bucket)
{
	item v[64];
	tf_lru *l = new_lru(16);
	size_t n = 0;

	for (unsigned i = 0; n < 64; i++) {
		char name[24];
		uint64_t h;
		snprintf(name, sizeof(name), "k%u", i);
		h = tf_hash_str(name);
		if (((h ^ h >> 32) & 15) != 3)
			continue;
		memset(&v[n], 0, sizeof(v[n]));
		snprintf(v[n].name, sizeof(v[n].name), "%s", name);
		tf_lru_insert(l, &v[n].node, h);
		n++;
	}
	for (size_t i = 0; i < n; i++)
		ck_assert_ptr_eq(find(l, v[i].name), &v[i]);
	tf_lru_free(l);
}
END_TEST

static void expect_order(tf_lru *l, unsigned which, item *v, const char *want)
{
	char got[64] = "";
	size_t n = 0;

	for (tf_lru_node *p = tf_lru_oldest(l, which); p; p = tf_lru_newer(l, p))
		got[n++] = (char)('a' + (TF_LRU_ENTRY(p, item, node) - v));
	got[n] = '\0';
	ck_assert_str_eq(got, want);
	ck_assert_uint_eq(tf_lru_length(l, which), strlen(want));
	n = strlen(want);
	for (tf_lru_node *p = tf_lru_newest(l, which); p; p = tf_lru_older(l, p))
		ck_assert_int_eq('a' + (TF_LRU_ENTRY(p, item, node) - v), want[--n]);
	ck_assert_uint_eq(n, 0);
}

/* Use moves to the newest end; two lists apart; an entry on one at most. */
START_TEST(test_lru_lists)
{
	item v[6] = { 0 };
	tf_lru *l = new_lru(16);

	for (int i = 0; i < 6; i++) {
		snprintf(v[i].name, sizeof(v[i].name), "%c", 'a' + i);
		tf_lru_insert(l, &v[i].node, tf_hash_str(v[i].name));
		ck_assert(!tf_lru_listed(&v[i].node));
		tf_lru_use(l, &v[i].node, i < 4 ? 0 : 1);
	}
	expect_order(l, 0, v, "abcd");
	expect_order(l, 1, v, "ef");
	tf_lru_use(l, &v[1].node, 0);
	expect_order(l, 0, v, "acdb");
	tf_lru_use(l, &v[0].node, 1);	/* moves between lists */
	expect_order(l, 0, v, "cdb");
	expect_order(l, 1, v, "efa");
	ck_assert(tf_lru_on(&v[0].node, 1) && !tf_lru_on(&v[0].node, 0));
	tf_lru_unlist(l, &v[3].node);
	tf_lru_unlist(l, &v[3].node);	/* twice: a no-op */
	expect_order(l, 0, v, "cb");
	ck_assert(v[3].node.keyed);	/* still found */
	ck_assert_ptr_eq(find(l, "d"), &v[3]);
	tf_lru_remove(l, &v[4].node);	/* out of both */
	expect_order(l, 1, v, "fa");
	ck_assert_ptr_null(find(l, "e"));
	ck_assert_ptr_eq(tf_lru_oldest(l, 0), &v[2].node);
	tf_lru_free(l);
}
END_TEST

/* A held entry leaves its list and is let go by none; at its last release
 * the user lists it again; removed while held, it stays the holder's. */
START_TEST(test_lru_holders)
{
	item v[3] = { 0 };
	tf_lru *l = new_lru(16);

	for (int i = 0; i < 3; i++) {
		snprintf(v[i].name, sizeof(v[i].name), "%c", 'a' + i);
		tf_lru_insert(l, &v[i].node, tf_hash_str(v[i].name));
		tf_lru_use(l, &v[i].node, 0);
	}
	tf_lru_hold(l, &v[0].node);
	tf_lru_hold(l, &v[0].node);
	expect_order(l, 0, v, "bc");
	ck_assert(!tf_lru_release(&v[0].node));
	expect_order(l, 0, v, "bc");
	ck_assert(tf_lru_release(&v[0].node));
	tf_lru_use(l, &v[0].node, 0);
	expect_order(l, 0, v, "bca");
	/* held, then taken out of the table: found no more, the holder's */
	tf_lru_hold(l, &v[1].node);
	tf_lru_remove(l, &v[1].node);
	ck_assert(!v[1].node.keyed);
	ck_assert_ptr_null(find(l, "b"));
	ck_assert(tf_lru_release(&v[1].node));
	/* counted without leaving the list (an entry in use that may go) */
	tf_lru_ref(&v[2].node);
	expect_order(l, 0, v, "ca");
	tf_lru_remove(l, &v[2].node);
	expect_order(l, 0, v, "a");
	ck_assert(tf_lru_release(&v[2].node));
	ck_assert_uint_eq(tf_lru_count(l), 1);
	tf_lru_free(l);
}
END_TEST

/* A random run of finds, uses, holds, releases and evictions against a
 * model kept in arrays: the same entries found, the same order evicted. */
START_TEST(test_lru_model)
{
	enum { N = 200, STEPS = 40000, BOUND = 50 };
	item v[N];
	long stamp[N];		/* the model: when last listed, -1 not listed */
	bool in[N];
	unsigned refs[N];
	tf_lru *l = new_lru(4);
	uint64_t r = 88172645463325252ull;
	long clock = 0;

	memset(v, 0, sizeof(v));
	for (int i = 0; i < N; i++) {
		snprintf(v[i].name, sizeof(v[i].name), "/a/b/%d", i * 7919);
		stamp[i] = -1, in[i] = false, refs[i] = 0;
	}
	for (long s = 0; s < STEPS; s++) {
		int i, oldest = -1;
		size_t listed = 0;
		item *f;

		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		i = (int)(r % N);
		f = find(l, v[i].name);
		ck_assert_ptr_eq(f, in[i] ? &v[i] : NULL);
		switch ((r >> 32) % 4) {
		case 0:	/* get: insert or hold */
			if (!in[i]) {
				tf_lru_insert(l, &v[i].node, tf_hash_str(v[i].name));
				in[i] = true;
			}
			tf_lru_hold(l, &v[i].node);
			refs[i]++, stamp[i] = -1;
			break;
		case 1:	/* release */
		case 2:
			if (!refs[i])
				break;
			refs[i]--;
			if (tf_lru_release(&v[i].node)) {
				ck_assert_uint_eq(refs[i], 0);
				if (in[i]) {
					tf_lru_use(l, &v[i].node, 0);
					stamp[i] = clock++;
				}
			}
			break;
		case 3:	/* drop from the table */
			if (in[i]) {
				tf_lru_remove(l, &v[i].node);
				in[i] = false, stamp[i] = -1;
			}
			break;
		}
		/* the bound: the oldest listed goes, as the model says */
		for (int j = 0; j < N; j++)
			if (stamp[j] >= 0) {
				listed++;
				if (oldest < 0 || stamp[j] < stamp[oldest])
					oldest = j;
			}
		ck_assert_uint_eq(tf_lru_length(l, 0), listed);
		if (listed > BOUND) {
			tf_lru_node *o = tf_lru_oldest(l, 0);
			ck_assert_ptr_eq(o, &v[oldest].node);
			tf_lru_remove(l, o);
			in[oldest] = false, stamp[oldest] = -1;
		}
	}
	tf_lru_free(l);
}
END_TEST

/* The hash is FNV-1a 64 (its published test vectors), continued across
 * calls; the pair mix spreads a counter; the clock never goes back. */
START_TEST(test_hash_and_clock)
{
	int64_t t0, t1;

	ck_assert_uint_eq(tf_hash_str(""), 0xcbf29ce484222325ull);
	ck_assert_uint_eq(tf_hash_str("a"), 0xaf63dc4c8601ec8cull);
	ck_assert_uint_eq(tf_hash_str("foobar"), 0x85944171f73967e8ull);
	ck_assert_uint_eq(tf_hash_more(tf_hash_str("foo"), "bar"), tf_hash_str("foobar"));
	ck_assert_uint_eq(tf_hash_bytes(TF_HASH_SEED, "foobar", 6), tf_hash_str("foobar"));
	ck_assert_uint_ne(tf_hash_pair(1, 2), tf_hash_pair(2, 1));
	ck_assert_uint_ne(tf_hash_pair(0, 1) & 1023, tf_hash_pair(0, 2) & 1023);
	t0 = tf_now_ns();
	t1 = tf_now_ns();
	ck_assert_int_gt(t0, 0);
	ck_assert_int_ge(t1, t0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("lru");
	TCase *tc = tcase_create("lru");

	tcase_add_test(tc, test_lru_find_after_growth);
	tcase_add_test(tc, test_lru_same_bucket);
	tcase_add_test(tc, test_lru_lists);
	tcase_add_test(tc, test_lru_holders);
	tcase_add_test(tc, test_lru_model);
	tcase_add_test(tc, test_hash_and_clock);
	tcase_set_timeout(tc, 300);	/* valgrind */
	suite_add_tcase(s, tc);
	return s;
}

TF_TEST_MAIN(suite)
