/*
 * tf_perm.c - who may read what is made of several stored files.
 *
 * Showing one owner U and group G for inputs of several owners: a class is
 * shown readable only if every user the kernel would put in it can read
 * every input, whatever else is true of that user.  For an input t
 * (owner u, group g, classes c):
 *
 *   owner class (the caller is U):  u == U ? c has OWNER
 *                                   : (GROUP and OTHER: U may be in g or not)
 *   group class (not U, in G):      (u == U or c has OWNER: it may be u)
 *                                   and (g == G ? GROUP : GROUP and OTHER)
 *   other class (not U, not in G):  (u == U or c has OWNER)
 *                                   and (g == G ? OTHER : GROUP and OTHER)
 *
 * With one owner and one group this is exactly the classes every input
 * grants.  U and G are chosen among the inputs' owners (and root, which
 * reads anyway, so that nobody else is the owner) and groups, for the
 * widest answer: others first, then the group, then the owner; the first
 * input's owner and group when that is as wide as any.
 */
#include "config.h"

#include "sources/tf_perm.h"

#include <stdlib.h>
#include <string.h>

#define MAX_CANDIDATES 16	/* owners and groups tried for tf_perm_show */

void tf_perm_clear(tf_perm *p)
{
	free(p->v);
	*p = (tf_perm)TF_PERM_INIT;
}

void tf_perm_close(tf_perm *p)
{
	p->closed = true;
}

static void add_in(tf_perm *p, tf_perm_in in)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->v[i].uid == in.uid && p->v[i].gid == in.gid && p->v[i].classes == in.classes)
			return;
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 4;
		tf_perm_in *v = realloc(p->v, cap * sizeof(*v));

		if (!v) {
			p->closed = true;	/* an input forgotten would let too many in */
			return;
		}
		p->v = v;
		p->cap = cap;
	}
	p->v[p->n++] = in;
}

/* The classes for which mode grants all of want (bits of one class, 0-7). */
static unsigned classes_of(uint32_t mode, unsigned want)
{
	return ((mode >> 6 & want) == want ? TF_PERM_OWNER : 0) | ((mode >> 3 & want) == want ? TF_PERM_GROUP : 0) |
	       ((mode & want) == want ? TF_PERM_OTHER : 0);
}

void tf_perm_add_stat(tf_perm *p, const tf_stat *st)
{
	add_in(p, (tf_perm_in){ st->uid, st->gid, classes_of(st->mode, st->kind == TF_ENT_DIR ? 5 : 4) });
}

void tf_perm_add_perm(tf_perm *p, const tf_perm *q)
{
	p->closed |= q->closed;
	for (size_t i = 0; i < q->n; i++)
		add_in(p, q->v[i]);
}

void tf_perm_copy(tf_perm *p, const tf_perm *q)
{
	tf_perm_clear(p);
	tf_perm_add_perm(p, q);
}

typedef struct dir_ctx {
	tf_perm *p;
	tf_perm_want_fn want;
} dir_ctx;

static int add_entry(void *arg, const char *name, const tf_stat *st)
{
	dir_ctx *d = arg;

	if (!d->want || d->want(name, st))
		tf_perm_add_stat(d->p, st);
	return 0;
}

void tf_perm_add_path(tf_perm *p, tf_source *src, const char *rel)
{
	tf_stat st;
	tf_status rc = tf_source_stat(src, rel, &st, NULL);

	if (rc == TF_OK)
		tf_perm_add_stat(p, &st);
	else if (rc != TF_E_NOTFOUND)
		tf_perm_close(p);
}

void tf_perm_add_dir(tf_perm *p, tf_source *src, const char *dir, bool self, tf_perm_want_fn want)
{
	dir_ctx d = { p, want };
	tf_status rc;

	if (self)
		tf_perm_add_path(p, src, dir);
	rc = tf_source_list(src, dir, true, add_entry, &d, NULL);
	if (rc != TF_OK && rc != TF_E_NOTFOUND)
		tf_perm_close(p);
}

static bool in_groups(uint32_t g, uint32_t gid, const uint32_t *groups, size_t n)
{
	if (g == gid)
		return true;
	for (size_t i = 0; i < n; i++)
		if (groups[i] == g)
			return true;
	return false;
}

bool tf_perm_allows(const tf_perm *p, uint32_t uid, uint32_t gid, const uint32_t *groups, size_t n)
{
	if (uid == 0)
		return true;
	if (p->closed)
		return false;
	for (size_t i = 0; i < p->n; i++) {
		const tf_perm_in *t = &p->v[i];
		unsigned cls = uid == t->uid ? TF_PERM_OWNER : in_groups(t->gid, gid, groups, n) ? TF_PERM_GROUP
			     : TF_PERM_OTHER;

		if (!(t->classes & cls))
			return false;
	}
	return true;
}

bool tf_perm_needs_groups(const tf_perm *p, uint32_t uid, uint32_t gid)
{
	if (uid == 0 || p->closed)
		return false;
	for (size_t i = 0; i < p->n; i++) {
		const tf_perm_in *t = &p->v[i];

		if (uid != t->uid && gid != t->gid &&
		    !(t->classes & TF_PERM_GROUP) != !(t->classes & TF_PERM_OTHER))
			return true;
	}
	return false;
}

/* The classes shown readable with owner u and group g (see the top). */
static unsigned shown(const tf_perm *p, uint32_t u, uint32_t g)
{
	unsigned out = TF_PERM_OWNER | TF_PERM_GROUP | TF_PERM_OTHER;

	for (size_t i = 0; i < p->n; i++) {
		const tf_perm_in *t = &p->v[i];
		bool owner = t->classes & TF_PERM_OWNER, group = t->classes & TF_PERM_GROUP,
		     other = t->classes & TF_PERM_OTHER;
		bool maybe_owner = t->uid == u || owner;

		if (!(t->uid == u ? owner : group && other))
			out &= ~TF_PERM_OWNER;
		if (!(maybe_owner && (t->gid == g ? group : group && other)))
			out &= ~TF_PERM_GROUP;
		if (!(maybe_owner && (t->gid == g ? other : group && other)))
			out &= ~TF_PERM_OTHER;
	}
	return out;
}

/* How much an answer lets in: others first, then the group, then the
 * owner. */
static unsigned score(unsigned classes)
{
	return (classes & TF_PERM_OTHER ? 4 : 0) + (classes & TF_PERM_GROUP ? 2 : 0) +
	       (classes & TF_PERM_OWNER ? 1 : 0);
}

/* Up to MAX_CANDIDATES distinct owners (uids: true) or groups of p, in
 * the order first added. */
static size_t candidates(const tf_perm *p, bool uids, uint32_t *out)
{
	size_t n = 0;

	for (size_t i = 0; i < p->n && n < MAX_CANDIDATES; i++) {
		uint32_t x = uids ? p->v[i].uid : p->v[i].gid;
		size_t j = 0;

		while (j < n && out[j] != x)
			j++;
		if (j == n)
			out[n++] = x;
	}
	return n;
}

void tf_perm_show(const tf_perm *p, uint32_t *uid, uint32_t *gid, unsigned *classes)
{
	uint32_t us[MAX_CANDIDATES + 1], gs[MAX_CANDIDATES];
	size_t nu, ng;
	unsigned best = 0;

	*uid = *gid = 0;
	*classes = 0;
	if (p->closed)
		return;
	if (!p->n) {
		*classes = TF_PERM_OWNER | TF_PERM_GROUP | TF_PERM_OTHER;
		return;
	}
	nu = candidates(p, true, us);
	ng = candidates(p, false, gs);
	us[nu++] = 0;	/* root owns it: nobody is in the owner class but root */
	*uid = us[0], *gid = gs[0];
	for (size_t i = 0; i < nu; i++)
		for (size_t j = 0; j < ng; j++) {
			unsigned c = shown(p, us[i], gs[j]);

			if (score(c) > best || (i == 0 && j == 0)) {
				best = score(c);
				*uid = us[i], *gid = gs[j], *classes = c;
			}
		}
}

uint32_t tf_perm_mode(unsigned classes, bool dir)
{
	uint32_t bits = dir ? 5 : 4;

	return (classes & TF_PERM_OWNER ? bits << 6 : 0) | (classes & TF_PERM_GROUP ? bits << 3 : 0) |
	       (classes & TF_PERM_OTHER ? bits : 0);
}
