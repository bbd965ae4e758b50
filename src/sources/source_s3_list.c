/*
 * source_s3_list.c - the listing of a directory of an S3 source, made from
 * ListObjectsV2 pages; and of a subtree whole (see "Listing a subtree
 * whole" below), a listing per directory in it.
 *
 * Listings are fetched whole, page after page, within list_max_pages,
 * list_max_bytes (an entry is 32 bytes and its name and ETag) and the
 * request's deadline; a store that repeats a continuation token, or whose
 * page does not advance past the names of the page before, is refused.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sources/source_s3_int.h"

/* ---- listings ------------------------------------------------------------------------------- */

void s3_listing_free(listing *l)
{
	if (l)
		free(l->ents), free(l->text), free(l->rel);
	free(l);
}

tf_stat s3_dent_stat(const s3_source *s, const listing *l, const s3_dent *d)
{
	tf_stat st = { .kind = TF_ENT_REG, .mode = 0444, .uid = s->uid, .gid = s->gid, .nlink = 1 };

	if (d->dir)
		return s3_dir_stat(s);
	st.v.size = d->size;
	st.v.mtime_ns = d->mtime_ns;
	snprintf(st.v.etag, sizeof(st.v.etag), "%s", l->text + d->etag);
	return st;
}

static int cmp_dent(const void *a, const void *b, void *text)
{
	const s3_dent *x = a, *y = b;
	int c = strcmp((const char *)text + x->name, (const char *)text + y->name);

	return c ? c : (int)y->dir - (int)x->dir;	/* same name: the directory first (it wins) */
}

/* The entry named name (ents sorted, one per name), or NULL. */
const s3_dent *s3_listing_lookup(const listing *l, const char *name)
{
	size_t lo = 0, hi = l->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(l->text + l->ents[mid].name, name);
		if (!c)
			return &l->ents[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Sort, drop duplicate names (the directory stays), give back spare room,
 * decide immutability. */
void s3_listing_finish(listing *l)
{
	size_t o = 0;
	void *p;

	qsort_r(l->ents, l->n, sizeof(*l->ents), cmp_dent, l->text);
	for (size_t i = 0; i < l->n; i++)
		if (!o || strcmp(l->text + l->ents[o - 1].name, l->text + l->ents[i].name))
			l->ents[o++] = l->ents[i];
	l->n = o;
	if (l->n && (p = realloc(l->ents, l->n * sizeof(*l->ents))))
		l->ents = p, l->cap = l->n;
	if ((p = realloc(l->text, l->tlen)))
		l->text = p, l->tcap = l->tlen;
	l->bytes = sizeof(*l) + strlen(l->rel) + 1 + l->cap * sizeof(*l->ents) + l->tcap;
	/* A TileDB fragment directory: "__<t1>_<t2>_<uuid>[_<v>]" holding its
	 * metadata file, which TileDB writes after every data file. */
	const char *base = strrchr(l->rel, '/');
	const s3_dent *md = s3_listing_lookup(l, "__fragment_metadata.tdb");
	base = base ? base + 1 : l->rel;
	l->immutable = !strncmp(base, "__", 2) && strchr(base + 2, '_') && md && !md->dir;
}

/* Note a key skipped (one warning for the listing names the first few). */
static void skip(builder *bd, const char *key, const char *why)
{
	char *o;
	size_t i = 0;

	if (bd->nskipped < sizeof(bd->skipped) / sizeof(bd->skipped[0])) {
		o = bd->skipped[bd->nskipped];
		*o++ = '\'';
		for (; key[i] && o - bd->skipped[bd->nskipped] < 64; i++) {
			unsigned char c = (unsigned char)key[i];
			o += c >= 0x20 && c < 0x7f && c != '\\' ? sprintf(o, "%c", c) : sprintf(o, "\\x%02x", c);
		}
		snprintf(o, sizeof(bd->skipped[0]) - (size_t)(o - bd->skipped[bd->nskipped]), "%s' (%s)",
			 key[i] ? "..." : "", why);
	}
	bd->nskipped++;
}

/* Room for one more entry and len more bytes of text; what both arrays
 * hold (their capacity, not only what is used) stays within the bound. */
tf_status s3_listing_reserve(builder *bd, size_t len, tf_error *err)
{
	listing *l = bd->l;
	size_t max = (size_t)bd->s->list_max_bytes, room, nc;
	void *p;

	if (l->n == l->cap) {
		room = (max - l->tcap) / sizeof(*l->ents);
		nc = l->cap ? l->cap * 2 : 64;
		if ((nc = nc < room ? nc : room) <= l->n)
			goto full;
		if (!(p = realloc(l->ents, nc * sizeof(*l->ents))))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		l->ents = p, l->cap = nc;
	}
	if (l->tlen + len > l->tcap) {
		room = max - l->cap * sizeof(*l->ents);
		nc = l->tcap ? l->tcap * 2 : 4096;
		nc = nc > l->tlen + len ? nc : l->tlen + len;
		if ((nc = nc < room ? nc : room) < l->tlen + len)
			goto full;
		if (!(p = realloc(l->text, nc)))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		l->text = p, l->tcap = nc;
	}
	return TF_OK;
full:
	return tf_err(err, TF_E_IO, "%s list '%s': more than %zu bytes of entries (list_max_bytes)",
		      s3_client_where(bd->s->client), bd->prefix, max);
}

uint32_t s3_listing_text(listing *l, const char *t, size_t n)
{
	uint32_t at = (uint32_t)l->tlen;

	memcpy(l->text + l->tlen, t, n);
	l->text[l->tlen + n] = '\0';
	l->tlen += n + 1;
	return at;
}

/* Add the entry name[0..n) (already checked): a file of e, or a directory. */
static tf_status listing_add(builder *bd, const char *name, size_t n, const s3_entry *e, tf_error *err)
{
	listing *l = bd->l;
	size_t elen = e ? strlen(e->etag) : 0;
	tf_status rc = s3_listing_reserve(bd, n + 1 + (elen ? elen + 1 : 0), err);
	s3_dent *d;

	if (rc != TF_OK)
		return rc;
	d = &l->ents[l->n];
	*d = (s3_dent){ .dir = !e };
	d->name = s3_listing_text(l, name, n);
	if (e) {
		d->size = e->size;
		d->mtime_ns = e->mtime_ns - e->mtime_ns % 1000000000;
		d->etag = elen ? s3_listing_text(l, e->etag, elen) : 0;
	}
	l->n++;
	return TF_OK;
}

/*
 * The entries of one page, named relative to the prefix.  A key that can
 * be no name here (one that does not decode, lies outside the prefix, or
 * whose name is empty, '.', '..', holds a '/' or runs past 255 bytes) is
 * skipped and noted; but an object named by the prefix itself ("dir/", a
 * folder marker) is skipped silently.
 */
static tf_status add_page(builder *bd, const s3_list_page *pg, tf_error *err)
{
	const char *prefix = bd->prefix, *why;
	size_t plen = bd->plen;
	tf_status rc = TF_OK;

	for (size_t i = 0; i < pg->nbad; i++)
		skip(bd, pg->bad[i], "a NUL or a bad escape");
	for (size_t i = 0; i < pg->nobjects && rc == TF_OK; i++) {
		const s3_entry *e = &pg->objects[i];
		if (strncmp(e->key, prefix, plen))
			skip(bd, e->key, "outside the prefix");
		else if (!strcmp(e->key + plen, TF_SOURCE_RESERVED))
			continue;	/* reserved: never shown */
		else if (!(why = s3_bad_name(e->key + plen)))
			rc = listing_add(bd, e->key + plen, strlen(e->key + plen), e, err);
		else if (e->key[plen])	/* not the folder marker */
			skip(bd, e->key, why);
	}
	for (size_t i = 0; i < pg->nprefixes && rc == TF_OK; i++) {
		char *p = pg->prefixes[i];
		size_t n = strlen(p);
		if (strncmp(p, prefix, plen) || n <= plen || p[n - 1] != '/') {
			skip(bd, p, "not a directory of the prefix");
			continue;
		}
		p[n - 1] = '\0';
		if (!strcmp(p + plen, TF_SOURCE_RESERVED))
			why = NULL;	/* reserved: never shown */
		else if (!(why = s3_bad_name(p + plen)))
			rc = listing_add(bd, p + plen, n - 1 - plen, NULL, err);
		p[n - 1] = '/';
		if (why)
			skip(bd, p, why);
	}
	return rc;
}

/* Whether the store's page pg leads on: a token never followed before,
 * and (when it has names) a greatest name past the page before's, as
 * pages in key order do.  A store looping or standing still is an error. */
static tf_status page_advances(builder *bd, const s3_list_page *pg, unsigned page, tf_error *err)
{
	const char *max = NULL;
	uint64_t h = pg->truncated ? tf_hash_str(pg->next_token) : 0;
	void *p;

	for (size_t i = 0; i < bd->ntokens && pg->truncated; i++)
		if (bd->tokens[i] == h)
			return tf_err(err, TF_E_IO, "%s list '%s': page %u repeats a continuation token "
				      "(not followed again)", s3_client_where(bd->s->client), bd->prefix, page + 1);
	for (size_t i = 0; i < pg->nobjects; i++)
		if (!max || strcmp(pg->objects[i].key, max) > 0)
			max = pg->objects[i].key;
	for (size_t i = 0; i < pg->nprefixes; i++)
		if (!max || strcmp(pg->prefixes[i], max) > 0)
			max = pg->prefixes[i];
	if (max && bd->last && strcmp(max, bd->last) <= 0)
		return tf_err(err, TF_E_IO, "%s list '%s': page %u does not advance (names up to '%.100s' again)",
			      s3_client_where(bd->s->client), bd->prefix, page + 1, max);
	if (max) {
		free(bd->last);
		if (!(bd->last = strdup(max)))
			return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	if (!pg->truncated)
		return TF_OK;
	if (!(p = realloc(bd->tokens, (bd->ntokens + 1) * sizeof(*bd->tokens))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	bd->tokens = p;
	bd->tokens[bd->ntokens++] = h;
	return TF_OK;
}

typedef tf_status (*page_fn)(void *ctx, const s3_list_page *pg, tf_error *err);

/*
 * Every page of bd's prefix listed (flat: no delimiter), each checked to
 * advance and given to fn, within b and max pages; *stop set (TF_OK) at
 * max with more to come, and set by fn ends the listing as well.
 */
static tf_status list_pages(builder *bd, const s3_bound *b, bool flat, unsigned max, page_fn fn, void *ctx,
			    bool *stop, tf_error *err)
{
	s3_list_page pg = { 0 };
	char *token = NULL;
	tf_status rc = TF_OK;

	for (unsigned page = 0; !*stop; page++) {
		if (page == max) {
			*stop = true;
			break;
		}
		if ((rc = s3_client_list(bd->s->client, b, bd->prefix, token, S3_LIST_PAGE, flat, &pg, err)) != TF_OK ||
		    (rc = page_advances(bd, &pg, page, err)) != TF_OK || (rc = fn(ctx, &pg, err)) != TF_OK)
			break;
		free(token);
		token = pg.truncated ? pg.next_token : NULL;
		pg.next_token = NULL;
		s3_list_page_free(&pg);
		if (!token)
			break;
	}
	s3_list_page_free(&pg);
	free(token);
	return rc;
}

/* Warn once of the keys a listing skipped, naming the first few. */
static void warn_skipped(const builder *bd)
{
	if (!bd->nskipped)
		return;
	tf_source_warn(&bd->s->base, "%s list '%s': %zu key%s skipped, no file name here: %s%s%s%s%s%s",
		       s3_client_where(bd->s->client), bd->prefix, bd->nskipped, bd->nskipped > 1 ? "s" : "",
		       bd->skipped[0], bd->nskipped > 1 ? ", " : "", bd->nskipped > 1 ? bd->skipped[1] : "",
		       bd->nskipped > 2 ? ", " : "", bd->nskipped > 2 ? bd->skipped[2] : "",
		       bd->nskipped > 3 ? ", ..." : "");
}

static tf_status dir_page(void *bd, const s3_list_page *pg, tf_error *err)
{
	return add_page(bd, pg, err);
}

/* List directory rel from the store, every page, within b and the bounds
 * on pages and bytes. */
tf_status s3_fetch_listing(s3_source *s, const s3_bound *b, const char *rel, listing **out, tf_error *err)
{
	char *prefix = s3_key_of(s, rel, true);
	builder bd = { .s = s, .l = calloc(1, sizeof(listing)), .prefix = prefix };
	tf_status rc = bd.l && prefix && (bd.l->rel = strdup(rel)) ? TF_OK : tf_err(err, TF_E_NOMEM, "out of memory");
	bool more = false;

	bd.plen = prefix ? strlen(prefix) : 0;
	if (rc == TF_OK && (rc = s3_listing_reserve(&bd, 1, err)) == TF_OK)
		s3_listing_text(bd.l, "", 0);	/* "" at 0: every directory's ETag */
	if (rc == TF_OK && (rc = list_pages(&bd, b, false, s->list_max_pages, dir_page, &bd, &more, err)) == TF_OK &&
	    more)
		rc = tf_err(err, TF_E_IO, "%s list '%s': more than %u pages (list_max_pages)",
			    s3_client_where(s->client), prefix, s->list_max_pages);
	if (rc == TF_OK)
		warn_skipped(&bd);
	free(prefix), free(bd.tokens), free(bd.last);
	if (rc != TF_OK) {
		s3_listing_free(bd.l);
		return rc;
	}
	s3_listing_finish(bd.l);
	bd.l->at_ns = tf_now_ns();
	*out = bd.l;
	return TF_OK;
}

/* Directory rel's listing from one page pg the store gave (the mount's
 * probe): NULL when pg is not all of it (truncated), does not fit
 * list_max_bytes, skips a key (the warning is the listing's, said once
 * the mount hears it) or no memory; then it is listed as any directory. */
listing *s3_listing_of_page(s3_source *s, const char *rel, const s3_list_page *pg)
{
	char *prefix = s3_key_of(s, rel, true);
	builder bd = { .s = s, .l = calloc(1, sizeof(listing)), .prefix = prefix };
	bool ok = !pg->truncated && bd.l && prefix && (bd.l->rel = strdup(rel)) &&
		  s3_listing_reserve(&bd, 1, NULL) == TF_OK;

	bd.plen = prefix ? strlen(prefix) : 0;
	if (ok) {
		s3_listing_text(bd.l, "", 0);	/* "" at 0: every directory's ETag */
		ok = add_page(&bd, pg, NULL) == TF_OK && !bd.nskipped;
	}
	free(prefix), free(bd.tokens), free(bd.last);
	if (!ok) {
		s3_listing_free(bd.l);
		return NULL;
	}
	s3_listing_finish(bd.l);
	bd.l->at_ns = tf_now_ns();
	return bd.l;
}

/*
 * Listing a subtree whole.  Opening a TileDB array lists its __commits,
 * __schema and __fragments and then every fragment directory: one
 * ListObjectsV2 per directory, one round trip after another.  A directory
 * whose name starts with "__" (TileDB's own: those, and fragment
 * directories of older formats) is listed without a delimiter instead:
 * every key beneath it, in as few pages as it takes, and the listing of
 * each of its subdirectories is built from them and cached, so an array's
 * hundreds of fragment directories cost a page per 1,000 keys, not a LIST
 * each.  The same rules hold as for one directory (names that can be none
 * skipped and warned of, ".tilefs" never shown, folder markers silent,
 * the directory winning a shared name, list_max_bytes).  A subtree of
 * more than TREE_PAGES pages, TREE_DIRS directories or list_max_bytes is
 * listed the ordinary way (delimiter '/'): past that the pages spent on
 * deeper keys outweigh the LISTs saved.  Opening an array then lists its
 * __fragments, __commits and __schema one after another, a round trip
 * each, and __schema/__enumerations, mostly absent, one more: so the first
 * of them whose parent is an array's directory (array_dir) lists that
 * parent whole instead, and a listing made from a whole subtree answers
 * for a subdirectory it does not name (known_empty): one LIST for all.
 */
#define TREE_PAGES 8
#define TREE_DIRS 1024

bool s3_tree_worthy(const char *rel)
{
	const char *base = strrchr(rel, '/');

	return !strncmp(base ? base + 1 : rel, "__", 2);
}

/* A key beneath the listed prefix (or a common prefix a store sent anyway). */
typedef struct tree_key {
	char *path;
	s3_entry e;			/* e.key unused */
	bool is_dir;
} tree_key;

/* An entry of one subdirectory: name in directory dir ("" the listed one). */
typedef struct tree_ent {
	const char *dir, *name;		/* name NULL: only that dir exists (a folder marker) */
	uint32_t dlen, nlen;
	const tree_key *k;		/* a file's key, or NULL: a directory */
} tree_ent;

typedef struct tree {
	builder bd;			/* the pages' proof of progress and the skipped keys */
	tree_key *keys;
	size_t nkeys, ckeys;
	tree_ent *ents;
	size_t nents, cents;
	uint64_t bytes;			/* held, against list_max_bytes */
	bool too_big;
} tree;

static int cmp_span(const char *a, size_t an, const char *b, size_t bn)
{
	int c = memcmp(a, b, an < bn ? an : bn);

	return c ? c : an < bn ? -1 : an > bn;
}

static int cmp_tree_ent(const void *pa, const void *pb)
{
	const tree_ent *a = pa, *b = pb;
	int c = cmp_span(a->dir, a->dlen, b->dir, b->dlen);

	if (c || !a->name || !b->name)
		return c ? c : (int)!!a->name - (int)!!b->name;
	if ((c = cmp_span(a->name, a->nlen, b->name, b->nlen)))
		return c;
	return (int)!!a->k - (int)!!b->k;	/* the directory first (it wins) */
}

static bool tree_charge(tree *t, uint64_t n)
{
	if ((t->bytes += n) > t->bd.s->list_max_bytes)
		t->too_big = true;
	return !t->too_big;
}

static tf_status tree_ent_add(tree *t, const char *dir, size_t dlen, const char *name, size_t nlen,
			      const tree_key *k, tf_error *err)
{
	void *p;

	if (!tree_charge(t, sizeof(tree_ent)))
		return TF_OK;
	if (t->nents == t->cents) {
		size_t nc = t->cents ? t->cents * 2 : 256;
		if (!(p = realloc(t->ents, nc * sizeof(*t->ents))))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		t->ents = p, t->cents = nc;
	}
	t->ents[t->nents++] = (tree_ent){ dir, name, (uint32_t)dlen, (uint32_t)nlen, k };
	return TF_OK;
}

/* Why component c[0..n) can be no file name, or NULL. */
static const char *bad_component(const char *c, size_t n)
{
	return !n ? "an empty name" : (n == 1 && c[0] == '.') || (n == 2 && !strncmp(c, "..", 2)) ? "'.' or '..'"
	     : n > 255 ? "a name over 255 bytes" : NULL;
}

/* The entries key k gives: a directory in each directory above it, then
 * itself; none past a name that can be none (noted, as the whole key) or
 * ".tilefs". */
static tf_status tree_entries(tree *t, const tree_key *k, tf_error *err)
{
	char whole[S3_MAX_NAME + 1];

	const char *p = k->path, *c = p, *slash, *why;
	size_t rn = strlen(TF_SOURCE_RESERVED);
	tf_status rc = TF_OK;

	for (; rc == TF_OK; c = slash + 1) {
		size_t dlen = c > p ? (size_t)(c - p - 1) : 0, n;
		if (!(slash = strchr(c, '/')) && !*c)		/* "dir/": a folder marker */
			return tree_ent_add(t, p, dlen, NULL, 0, NULL, err);
		n = slash ? (size_t)(slash - c) : strlen(c);
		if (n == rn && !strncmp(c, TF_SOURCE_RESERVED, n))
			return TF_OK;			/* reserved: never shown */
		if ((why = bad_component(c, n))) {
			snprintf(whole, sizeof(whole), "%s%s", t->bd.prefix, p);
			skip(&t->bd, whole, why);
			return TF_OK;
		}
		rc = tree_ent_add(t, p, dlen, c, n, slash || k->is_dir ? NULL : k, err);
		if (!slash)
			break;
	}
	return rc;
}

/* Keep one page's keys (their entries come once every page is in). */
static tf_status tree_page(tree *t, const s3_list_page *pg, tf_error *err)
{
	const char *prefix = t->bd.prefix;
	size_t plen = t->bd.plen, total = pg->nobjects + pg->nprefixes;
	void *q;

	for (size_t i = 0; i < pg->nbad; i++)
		skip(&t->bd, pg->bad[i], "a NUL or a bad escape");
	if (t->nkeys + total > t->ckeys) {
		size_t nc = t->ckeys * 2 > t->nkeys + total ? t->ckeys * 2 : t->nkeys + total;
		if (!(q = realloc(t->keys, nc * sizeof(*t->keys))))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		t->keys = q, t->ckeys = nc;
	}
	for (size_t i = 0; i < total && !t->too_big; i++) {
		const char *key = i < pg->nobjects ? pg->objects[i].key : pg->prefixes[i - pg->nobjects];
		tree_key *k = &t->keys[t->nkeys];
		if (strncmp(key, prefix, plen)) {
			skip(&t->bd, key, "outside the prefix");
			continue;
		}
		if (!tree_charge(t, sizeof(*k) + strlen(key + plen) + 1))
			break;
		*k = (tree_key){ .is_dir = i >= pg->nobjects };
		if (!k->is_dir)
			k->e = pg->objects[i], k->e.key = NULL;
		else if (!*key || key[strlen(key) - 1] != '/') {
			skip(&t->bd, key, "not a directory of the prefix");
			continue;
		}
		if (!(k->path = strdup(key + plen)))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		if (k->is_dir)
			k->path[strlen(k->path) - 1] = '\0';	/* "d/" is directory d */
		t->nkeys++;
	}
	return TF_OK;
}

static tf_status tree_page_of(void *t, const s3_list_page *pg, tf_error *err)
{
	return tree_page(t, pg, err);
}

/* The listing of directory dir[0..dlen) beneath rel from ents [lo, hi). */
static tf_status tree_listing(tree *t, const char *rel, size_t lo, size_t hi, listing **out, tf_error *err)
{
	const tree_ent *e = &t->ents[lo];
	builder bd = { .s = t->bd.s, .l = calloc(1, sizeof(listing)), .prefix = t->bd.prefix, .plen = t->bd.plen };
	tf_status rc = TF_OK;
	int n;

	if (!bd.l)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if (!e->dlen)
		n = -!(bd.l->rel = strdup(rel));
	else if (!strcmp(rel, "."))	/* the top: its subdirectories' rels have no "./" */
		n = asprintf(&bd.l->rel, "%.*s", (int)e->dlen, e->dir);
	else
		n = asprintf(&bd.l->rel, "%s/%.*s", rel, (int)e->dlen, e->dir);
	if (n < 0) {
		bd.l->rel = NULL;
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	}
	if (rc == TF_OK && (rc = s3_listing_reserve(&bd, 1, err)) == TF_OK)
		s3_listing_text(bd.l, "", 0);
	for (size_t i = lo; i < hi && rc == TF_OK; i++) {
		e = &t->ents[i];
		if (!e->name || (i > lo && !cmp_tree_ent(&t->ents[i - 1], e)))
			continue;	/* a marker, or a directory named again */
		rc = listing_add(&bd, e->name, e->nlen, e->k ? &e->k->e : NULL, err);
	}
	if (rc != TF_OK) {
		s3_listing_free(bd.l);
		return rc;
	}
	s3_listing_finish(bd.l);
	bd.l->at_ns = tf_now_ns();
	bd.l->whole = true;
	*out = bd.l;
	return TF_OK;
}

/* Build every directory's listing from the keys; none (*n 0) past TREE_DIRS. */
static tf_status tree_listings(tree *t, const char *rel, listing ***out, size_t *n, tf_error *err)
{
	listing **ls = NULL;
	size_t nl = 0, lo = 0;
	tf_status rc = TF_OK;

	/* The listed directory has a listing even when nothing is beneath it. */
	if ((rc = tree_ent_add(t, "", 0, NULL, 0, NULL, err)) != TF_OK)
		return rc;
	for (size_t i = 0; i < t->nkeys && rc == TF_OK && !t->too_big; i++)
		rc = tree_entries(t, &t->keys[i], err);
	if (rc != TF_OK || t->too_big)
		return rc;
	qsort(t->ents, t->nents, sizeof(*t->ents), cmp_tree_ent);
	for (size_t i = 1; i <= t->nents && rc == TF_OK; i++) {
		if (i < t->nents && !cmp_span(t->ents[i].dir, t->ents[i].dlen, t->ents[lo].dir, t->ents[lo].dlen))
			continue;
		if (nl == TREE_DIRS) {
			t->too_big = true;
			break;
		}
		if (!nl && !(ls = calloc(TREE_DIRS, sizeof(*ls))))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		rc = tree_listing(t, rel, lo, i, &ls[nl], err);
		if (rc == TF_OK)
			nl++;
		else if (rc == TF_E_IO)		/* a directory past list_max_bytes */
			t->too_big = true, rc = TF_OK;
		lo = i;
	}
	if (rc != TF_OK || t->too_big) {
		for (size_t i = 0; i < nl; i++)
			s3_listing_free(ls[i]);
		free(ls);
		return rc;
	}
	*out = ls;
	*n = nl;
	return TF_OK;
}

/*
 * Every listing of the subtree rel, listed whole (ls[0] is rel's own;
 * malloc'd, each listing the caller's), or none (*n 0): the subtree is
 * too big for it, list rel the ordinary way.
 */
tf_status s3_fetch_tree(s3_source *s, const s3_bound *b, const char *rel, listing ***ls, size_t *n,
			tf_error *err)
{
	char *prefix = s3_key_of(s, rel, true);
	tree t = { .bd = { .s = s, .prefix = prefix, .plen = prefix ? strlen(prefix) : 0 } };
	tf_status rc = prefix ? TF_OK : tf_err(err, TF_E_NOMEM, "out of memory");
	unsigned max = TREE_PAGES < s->list_max_pages ? TREE_PAGES : s->list_max_pages;

	*n = 0;
	if (rc == TF_OK)
		rc = list_pages(&t.bd, b, true, max, tree_page_of, &t, &t.too_big, err);
	if (rc == TF_OK && !t.too_big && (rc = tree_listings(&t, rel, ls, n, err)) == TF_OK && *n)
		warn_skipped(&t.bd);
	for (size_t i = 0; i < t.nkeys; i++)
		free(t.keys[i].path);
	free(t.keys), free(t.ents), free(prefix), free(t.bd.tokens), free(t.bd.last);
	return rc;
}
