/*
 * tf_lru.c - the keyed, refcounted LRU set (the design is in tf_lru.h).
 */
#include "util/tf_lru.h"

#include <stdlib.h>

struct tf_lru {
	tf_lru_node **buckets;
	size_t mask, count;
	tf_lru_node heads[TF_LRU_LISTS];	/* list sentinels: next is the oldest */
	size_t lengths[TF_LRU_LISTS];
};

static size_t slot(const tf_lru *l, uint64_t h)
{
	return (size_t)(h ^ h >> 32) & l->mask;
}

tf_status tf_lru_new(size_t buckets, tf_lru **out, tf_error *err)
{
	tf_lru *l = calloc(1, sizeof(*l));
	size_t n = 16;

	while (n < buckets && n < ((size_t)1 << 30))
		n *= 2;
	if (!l || !(l->buckets = calloc(n, sizeof(*l->buckets)))) {
		free(l);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	l->mask = n - 1;
	for (unsigned i = 0; i < TF_LRU_LISTS; i++)
		l->heads[i].prev = l->heads[i].next = &l->heads[i];
	*out = l;
	return TF_OK;
}

void tf_lru_free(tf_lru *l)
{
	if (!l)
		return;
	free(l->buckets);
	free(l);
}

/* ---- the table ------------------------------------------------------------------------------ */

tf_lru_node *tf_lru_find(const tf_lru *l, uint64_t h, tf_lru_same_fn same, const void *key)
{
	tf_lru_node *n = l->buckets[slot(l, h)];

	while (n && (n->hash != h || !same(n, key)))
		n = n->hnext;
	return n;
}

/* Two entries per bucket at most: double the table (amortised O(1)). */
static void grow(tf_lru *l)
{
	size_t oldn = l->mask + 1, n = oldn * 2;
	tf_lru_node **b = calloc(n, sizeof(*b)), **old = l->buckets;

	if (!b)
		return;	/* longer chains, still correct */
	l->buckets = b;
	l->mask = n - 1;
	for (size_t i = 0; i < oldn; i++)
		for (tf_lru_node *e = old[i], *next; e; e = next) {
			size_t s = slot(l, e->hash);
			next = e->hnext;
			e->hnext = b[s];
			b[s] = e;
		}
	free(old);
}

void tf_lru_insert(tf_lru *l, tf_lru_node *n, uint64_t h)
{
	size_t s;

	if (l->count >= 2 * (l->mask + 1))
		grow(l);
	s = slot(l, h);
	n->hash = h;
	n->hnext = l->buckets[s];
	l->buckets[s] = n;
	n->keyed = true;
	l->count++;
}

void tf_lru_remove(tf_lru *l, tf_lru_node *n)
{
	tf_lru_node **p = &l->buckets[slot(l, n->hash)];

	tf_lru_unlist(l, n);
	if (!n->keyed)
		return;
	while (*p != n)
		p = &(*p)->hnext;
	*p = n->hnext;
	n->hnext = NULL;
	n->keyed = false;
	l->count--;
}

void tf_lru_clear(tf_lru *l, void (*fn)(tf_lru_node *n, void *ctx), void *ctx)
{
	for (size_t i = 0; i <= l->mask; i++)
		while (l->buckets[i]) {
			tf_lru_node *n = l->buckets[i];
			tf_lru_remove(l, n);
			fn(n, ctx);
		}
}

size_t tf_lru_count(const tf_lru *l)
{
	return l->count;
}

/* ---- the lists ------------------------------------------------------------------------------ */

void tf_lru_unlist(tf_lru *l, tf_lru_node *n)
{
	if (!n->list)
		return;
	l->lengths[n->list - 1]--;
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = NULL;
	n->list = 0;
}

void tf_lru_use(tf_lru *l, tf_lru_node *n, unsigned which)
{
	tf_lru_node *s = &l->heads[which];

	tf_lru_unlist(l, n);
	n->prev = s->prev;
	n->next = s;
	s->prev->next = n;
	s->prev = n;
	n->list = (uint8_t)(which + 1);
	l->lengths[which]++;
}

size_t tf_lru_length(const tf_lru *l, unsigned which)
{
	return l->lengths[which];
}

tf_lru_node *tf_lru_oldest(const tf_lru *l, unsigned which)
{
	tf_lru_node *n = l->heads[which].next;

	return n == &l->heads[which] ? NULL : n;
}

tf_lru_node *tf_lru_newest(const tf_lru *l, unsigned which)
{
	tf_lru_node *n = l->heads[which].prev;

	return n == &l->heads[which] ? NULL : n;
}

tf_lru_node *tf_lru_newer(const tf_lru *l, const tf_lru_node *n)
{
	return n->next == &l->heads[n->list - 1] ? NULL : n->next;
}

tf_lru_node *tf_lru_older(const tf_lru *l, const tf_lru_node *n)
{
	return n->prev == &l->heads[n->list - 1] ? NULL : n->prev;
}

/* ---- holders -------------------------------------------------------------------------------- */

void tf_lru_hold(tf_lru *l, tf_lru_node *n)
{
	if (n->refs++ == 0)
		tf_lru_unlist(l, n);
}
