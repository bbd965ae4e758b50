/*
 * tf_view_index.c - reading a CSV state at any offset: the index of where
 * each block of text starts, the pieces of text made and kept in the cache,
 * and the sizes remembered across mounts (claims proved when read).
 */
#include "config.h"

#include "views/tf_view_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void remember(csv *c, uint64_t size);

/* ---- the index ------------------------------------------------------------------------------- */

static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* Entry i's state into state[S] (lock held). */
static void entry_state(const csv *c, size_t i, uint64_t *state)
{
	const uint8_t *p = c->st + c->sat[i];

	for (size_t k = 0; k < c->S; k++) {
		uint64_t v = 0;
		for (unsigned shift = 0;; shift += 7) {
			uint8_t b = *p++;
			v |= (uint64_t)(b & 0x7f) << shift;
			if (!(b & 0x80) || shift >= 63)
				break;
		}
		state[k] = v;
	}
}

size_t view_index_bytes(const csv *c)
{
	return c->nent * (sizeof(uint64_t) + sizeof(size_t)) + c->sat[c->nent];
}

/* Every other entry goes, the first and the last stay (lock held). */
static void thin(csv *c)
{
	size_t k = 0, at = 0;

	for (size_t i = 0; i < c->nent; i++) {
		size_t from = c->sat[i], len = c->sat[i + 1] - from;

		if (i % 2 && i + 1 < c->nent)
			continue;
		memmove(c->st + at, c->st + from, len);
		c->off[k] = c->off[i];
		c->sat[k] = at;
		at += len;
		k++;
	}
	c->nent = k;
	c->sat[k] = at;
	c->level++;
}

/* The index's memory charged to the cache (lock held). */
void view_index_charge(csv *c)
{
	size_t now = c->ecap * (sizeof(uint64_t) + sizeof(size_t)) + c->stcap + c->bcap * sizeof(tf_arrow_block) +
		     c->tail.cap + c->scratch;

	if (now != c->charged)
		tf_cache_charge(tf_snapshot_cache(c->v->s), (ptrdiff_t)now - (ptrdiff_t)c->charged);
	c->charged = now;
}

/* Append an entry at text offset `at` with state `state` (lock held). */
tf_status view_append_entry(csv *c, uint64_t at, const uint64_t *state, tf_error *err)
{
	size_t need;

	if (c->nent + 2 > c->ecap) {
		size_t cap = c->ecap ? 2 * c->ecap : 64;
		uint64_t *off = realloc(c->off, cap * sizeof(*off));
		size_t *sat = off ? realloc(c->sat, cap * sizeof(*sat)) : NULL;

		if (off)
			c->off = off;
		if (!sat)
			return tf_err(err, TF_E_NOMEM, "out of memory");
		c->sat = sat;
		c->ecap = cap;
	}
	if (c->nent == 0)
		c->sat[0] = 0;
	need = c->sat[c->nent] + 10 * c->S;
	if (need > c->stcap) {
		size_t cap = need + need / 4;	/* not doubled: one state can be 2 MB */
		uint8_t *st;

		if (!(st = realloc(c->st, cap)))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		c->st = st;
		c->stcap = cap;
	}
	c->off[c->nent] = at;
	c->sat[c->nent + 1] = c->sat[c->nent];
	for (size_t k = 0; k < c->S; k++)
		c->sat[c->nent + 1] += put_varint(c->st + c->sat[c->nent + 1], state[k]);
	c->nent++;
	while (view_index_bytes(c) > c->limit && c->nent > 2)
		thin(c);
	view_index_charge(c);
	return TF_OK;
}

/* The text formatted so far ends here (lock held). */
uint64_t view_frontier(const csv *c)
{
	return c->off[c->nent - 1];
}

/* A piece: text [at, at + len) of the segment starting at entry `from`. */
typedef struct piece_src {
	csv *c;
	unsigned level;
	uint64_t seg, seg_end;	/* the segment's text */
	uint64_t at;
	uint32_t len;
	const tf_cancel *cancel;
} piece_src;

static uint64_t piece_key(unsigned level, uint64_t at)
{
	return (uint64_t)level << 56 | at;
}

/* Offer a piece met on the way (not waited for: a claim another thread
 * holds may wait on ours). */
static void offer_piece(csv *c, unsigned level, uint64_t at, const uint8_t *p, uint32_t len)
{
	tf_cache *cache = tf_snapshot_cache(c->v->s);
	tf_cache_entry *e;
	tf_cache_state st;
	uint8_t *dst;

	if (tf_cache_acquire(cache, c->owner, piece_key(level, at), len, &e, &st, NULL) != TF_OK)
		return;
	if (st == TF_CACHE_CLAIMED) {
		if ((dst = tf_cache_fill_buffer(cache, e)))
			memcpy(dst, p, len);
		tf_cache_publish(cache, e, dst ? TF_OK : TF_E_NOMEM, NULL);
	}
	tf_cache_release(cache, e, false);
}

/* The last entry at or before text offset pos (lock held). */
static size_t entry_before(const csv *c, uint64_t pos)
{
	size_t lo = 0, hi = c->nent;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		*(c->off[mid] <= pos ? &lo : &hi) = mid;
	}
	return lo;
}

/* Cache loader: format the segment again, block by block, from the entry
 * before it (its own, unless the index was thinned since), up to the piece
 * wanted; the segment's pieces before it are offered to the cache on the
 * way (a thinned segment read in order formats once). */
static tf_status load_piece(void *ctx, uint64_t index, uint8_t *dst, tf_workspace *ws, tf_error *err)
{
	piece_src *b = ctx;
	csv *c = b->c;
	uint64_t *in = malloc(2 * (c->S + 1) * sizeof(uint64_t)), *out = in ? in + c->S + 1 : NULL;
	uint64_t pos = 0, want_end = b->at + b->len;
	tf_buf text = TF_BUF_INIT((size_t)4 << 30), part = TF_BUF_INIT((size_t)4 << 30);
	producer p = { 0 };
	bool end = false, filled = false;
	tf_status rc = in ? TF_OK : tf_err(err, TF_E_NOMEM, "out of memory");

	(void)index;
	if (rc == TF_OK) {
		pthread_mutex_lock(&c->lock);
		size_t j = entry_before(c, b->seg);
		pos = c->off[j];
		entry_state(c, j, in);
		pthread_mutex_unlock(&c->lock);
		rc = view_prod_init(c, &p, b->cancel, err);
	}
	if (rc == TF_OK)
		rc = view_prod_begin(c, &p, ws, b->cancel, err);
	while (rc == TF_OK && pos < want_end && !end) {
		text.len = 0;
		if ((rc = view_produce(c, &p, ws, in, &text, out, &end, err)) != TF_OK)
			break;
		/* Text of this block inside pieces: cut and placed. */
		for (size_t k = pos < b->seg ? (size_t)(b->seg - pos < text.len ? b->seg - pos : text.len) : 0;
		     k < text.len && rc == TF_OK;) {
			uint64_t at = pos + k, pstart = b->seg + (at - b->seg) / c->piece * c->piece;
			uint64_t pend = pstart + c->piece < b->seg_end ? pstart + c->piece : b->seg_end;
			size_t take = (size_t)(pend - at) < text.len - k ? (size_t)(pend - at) : text.len - k;

			if (at >= b->seg_end)
				break;
			rc = tf_buf_append(&part, text.p + k, take, err);
			k += take;
			if (rc == TF_OK && at + take == pend) {	/* a piece complete */
				if (pstart == b->at && part.len == b->len)
					memcpy(dst, part.p, b->len), filled = true;
				else if (pstart != b->at)
					offer_piece(c, b->level, pstart, part.p, (uint32_t)part.len);
				part.len = 0;
			}
		}
		pos += text.len;
		memcpy(in, out, c->S * sizeof(uint64_t));
	}
	if (rc == TF_OK && !filled)
		rc = tf_err(err, TF_E_STALE, "text at %llu formats to other bytes than before (the array "
			    "changed under the view?)", (unsigned long long)b->at);
	view_prod_end(c, &p);
	view_prod_free(c, &p);
	tf_buf_free(&text);
	tf_buf_free(&part);
	free(in);
	return rc;
}

/* The record batches of the block formatted at text offset `start`, for
 * the footer (ext and lock held). */
static tf_status add_blocks(csv *c, uint64_t start, tf_error *err)
{
	size_t n;
	const tf_arrow_block *b = c->prod.batch ? tf_arrow_take_blocks(c->prod.batch, &n) : NULL;

	for (size_t i = 0; b && i < n; i++) {
		if (c->nblocks == c->bcap) {
			size_t cap = c->bcap ? 2 * c->bcap : 16;
			tf_arrow_block *nb = realloc(c->blocks, cap * sizeof(*nb));
			if (!nb)
				return tf_err(err, TF_E_NOMEM, "out of memory");
			c->blocks = nb, c->bcap = cap;
		}
		c->blocks[c->nblocks] = b[i];
		c->blocks[c->nblocks++].offset += c->header.len + start;
	}
	return TF_OK;
}

/* Format the next block at the frontier and index it (ext held).  Its
 * text goes to the cache as the pieces of the new segment, if offer: a
 * sizing pass counts the text and keeps only the index (its pieces would
 * evict the decoded tiles it is reading, and the reader starts from the
 * beginning anyway). */
tf_status view_extend_one(csv *c, tf_workspace *ws, const tf_cancel *cancel, bool offer, tf_error *err)
{
	uint64_t *in = NULL, *out = malloc((c->S + 1) * sizeof(uint64_t)), start;
	tf_buf local = TF_BUF_INIT((size_t)4 << 30);
	/* An Arrow block (megabytes) keeps its buffer: fresh pages each time
	 * cost more than writing them (the kernel zeroes them). */
	tf_buf *text = c->arrow ? &c->block : &local;
	unsigned level;
	bool end = false, warm;
	tf_status rc = out ? TF_OK : tf_err(err, TF_E_NOMEM, "out of memory");

	text->len = 0;
	pthread_mutex_lock(&c->lock);
	start = view_frontier(c);
	level = c->level;
	/* A merge standing at the frontier goes on from there: no state to
	 * decode (200,000 cursors for 200,000 fragments). */
	warm = c->kind == CSV_ARRAY_SPARSE && c->prod.ready && c->prod.warm && c->prod.at == start;
	if (rc == TF_OK && !warm && !(in = malloc((c->S + 1) * sizeof(uint64_t))))
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	if (in)
		entry_state(c, c->nent - 1, in);
	pthread_mutex_unlock(&c->lock);
	if (rc == TF_OK && !c->prod.ready)
		rc = view_prod_init(c, &c->prod, cancel, err);
	if (rc == TF_OK && (rc = view_prod_begin(c, &c->prod, ws, cancel, err)) == TF_OK)
		rc = view_produce(c, &c->prod, ws, in, text, out, &end, err);
	if (c->prod.ready) {
		c->prod.warm = rc == TF_OK;
		c->prod.at = start + text->len;
		view_prod_end(c, &c->prod);
	}
	pthread_mutex_lock(&c->lock);
	if (rc == TF_OK && c->arrow)
		rc = add_blocks(c, start, err);
	if (rc == TF_OK && text->len) {	/* the index first: the pieces' keys depend on its level */
		rc = view_append_entry(c, start + text->len, out, err);
		level = c->level;
	}
	if (rc == TF_OK && (end || !text->len) && c->arrow)
		rc = tf_arrow_file_tail(c->ar, c->blocks, c->nblocks, &c->tail, err);
	if (rc == TF_OK && (end || !text->len))
		c->complete = true;
	if (c->arrow)
		view_index_charge(c);
	pthread_mutex_unlock(&c->lock);
	if (rc == TF_OK && (end || !text->len))
		remember(c, c->header.len + start + text->len + c->tail.len);
	for (size_t k = 0; rc == TF_OK && offer && k < text->len; k += c->piece) {
		size_t n = text->len - k < c->piece ? text->len - k : c->piece;
		offer_piece(c, level, start + k, text->p + k, (uint32_t)n);
	}
	if (rc == TF_OK && (end || !text->len))
		view_prod_free(c, &c->prod);	/* its windows are needed no more */
	if (!c->arrow || rc != TF_OK || end || !text->len)
		tf_buf_free(text);
	text->len = 0;
	if (c->arrow) {	/* what the extender keeps, charged */
		size_t held = c->block.cap + (c->prod.batch ? tf_arrow_batch_held(c->prod.batch) : 0);
		pthread_mutex_lock(&c->lock);
		c->scratch = held;
		view_index_charge(c);
		pthread_mutex_unlock(&c->lock);
	}
	free(in);
	free(out);
	return rc;
}

/* The piece holding text offset pos, extending the index as needed;
 * *eof if pos is past the end. */
static tf_status find_piece(csv *c, tf_workspace *ws, uint64_t pos, const tf_cancel *cancel, piece_src *ps,
			    bool *eof, tf_error *err)
{
	tf_status rc = TF_OK;

	*eof = false;
	for (;;) {
		pthread_mutex_lock(&c->lock);
		if (pos < view_frontier(c)) {
			size_t lo = 0, hi = c->nent - 1;
			while (hi - lo > 1) {
				size_t mid = lo + (hi - lo) / 2;
				*(c->off[mid] <= pos ? &lo : &hi) = mid;
			}
			ps->c = c;
			ps->level = c->level;
			ps->seg = c->off[lo];
			ps->seg_end = c->off[lo + 1];
			ps->at = ps->seg + (pos - ps->seg) / c->piece * c->piece;
			ps->len = (uint32_t)(ps->seg_end - ps->at < c->piece ? ps->seg_end - ps->at : c->piece);
			ps->cancel = cancel;
			pthread_mutex_unlock(&c->lock);
			return TF_OK;
		}
		*eof = c->complete;
		pthread_mutex_unlock(&c->lock);
		if (*eof || rc != TF_OK)
			return rc;
		if (tf_cancelled(cancel))
			return tf_err(err, TF_E_INTR, "interrupted");
		pthread_mutex_lock(&c->ext);
		pthread_mutex_lock(&c->lock);
		bool more = pos >= view_frontier(c) && !c->complete;
		pthread_mutex_unlock(&c->lock);
		if (more)
			rc = view_extend_one(c, ws, cancel, true, err);
		pthread_mutex_unlock(&c->ext);
		if (rc != TF_OK)
			return rc;
	}
}

/* ---- sizes remembered across mounts ---------------------------------------------------------- */

static uint64_t fnv(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return (h ^ 0xff) * 1099511628211ull;	/* a name's end counts */
}

/*
 * The key of this state's CSVs (v->lock held), made once: the names in
 * the array's directories (the snapshot's fingerprint), the fragments a
 * read sees and the delete conditions, in order, and the text rules'
 * version.  None (false) when the text depends on when it is read: a
 * fragment or delete whose time is past the snapshot's (cells filtered by
 * their timestamps).
 */
static bool views_state(tf_views *v)
{
	tf_snapshot *s = v->s;
	uint64_t now = tf_snapshot_time(s), h = 1469598103934665603ull;
	bool ok = true;

	if (v->state_made)
		return v->persist;
	for (size_t k = 0; k < tf_snapshot_nvisible(s); k++) {
		const tf_snap_frag *f = tf_snapshot_frag(s, tf_snapshot_visible(s, k));
		ok = ok && f->t2 <= now;
		h = fnv(h, f->name);
	}
	for (size_t i = 0; i < tf_snapshot_ndeletes(s); i++) {
		ok = ok && tf_snapshot_delete(s, i)->t <= now;
		h = fnv(h, tf_snapshot_delete(s, i)->marker);
	}
	memset(&v->state, 0, sizeof(v->state));
	v->state.size = tf_snapshot_fingerprint(s);
	v->state.mtime_ns = (int64_t)h;
	v->state.ctime_ns = CSV_TEXT_VERSION;
	v->state.ino = tf_snapshot_nvisible(s);
	v->state.dev = tf_snapshot_ndeletes(s);
	v->persist = ok;
	v->state_made = true;
	return ok;
}

/* The store's key of the CSV of frag (SIZE_MAX: the array's), v->lock
 * held; false if its size is not to be remembered. */
static bool csv_key(tf_views *v, size_t frag, bool arrow, tf_index_key *k)
{
	const char *file = arrow ? ARROW_NAME : CSV_NAME;
	int n;

	if (!v->store || !views_state(v))
		return false;
	memset(k, 0, sizeof(*k));
	k->v = v->state;
	n = frag == SIZE_MAX ? snprintf(k->id, sizeof(k->id), "%s/%s", v->store_id, file)
			     : snprintf(k->id, sizeof(k->id), "%s/" FRAGMENTS "/%s/%s", v->store_id,
					tf_snapshot_frag(v->s, frag)->name, file);
	return n > 0 && (size_t)n < sizeof(k->id);
}

/* The slot of frag's remembered size (v->lock held; NULL: no memory). */
static uint64_t *claim_slot(tf_views *v, size_t frag, bool arrow)
{
	size_t n = tf_snapshot_nfrags(v->s);
	uint64_t **fc = arrow ? &v->frag_arrow_claim : &v->frag_claim;

	if (frag == SIZE_MAX)
		return arrow ? &v->array_arrow_claim : &v->array_claim;
	if (!*fc && (*fc = malloc((n + 1) * sizeof(uint64_t))))
		for (size_t i = 0; i <= n; i++)
			(*fc)[i] = CLAIM_UNASKED;
	return *fc ? &(*fc)[frag] : NULL;
}

/* The size the store remembers for frag's CSV in this state (the store is
 * asked once per state and CSV). */
bool view_remembered(tf_views *v, size_t frag, bool arrow, uint64_t *size)
{
	tf_index_key k;
	uint64_t *slot, got = CLAIM_NONE;
	bool keyed;

	pthread_mutex_lock(&v->lock);
	slot = v->store ? claim_slot(v, frag, arrow) : NULL;
	if (slot && *slot == CLAIM_UNASKED) {
		keyed = csv_key(v, frag, arrow, &k);
		pthread_mutex_unlock(&v->lock);
		if (keyed) {
			tf_buf payload = TF_BUF_INIT(4096);	/* the whole entry is read into it */

			if (tf_index_get(v->store, &k, &payload, NULL) == TF_OK && payload.len == 8 &&
			    tf_le64(payload.p) <= (uint64_t)INT64_MAX)
				got = tf_le64(payload.p);
			tf_buf_free(&payload);
		}
		pthread_mutex_lock(&v->lock);
		if (*slot == CLAIM_UNASKED)
			*slot = got;
	}
	got = slot ? *slot : CLAIM_NONE;
	pthread_mutex_unlock(&v->lock);
	*size = got;
	return got < CLAIM_NONE;
}

static size_t csv_frag_index(const csv *c)
{
	return c->kind == CSV_FRAG_DENSE || c->kind == CSV_FRAG_SPARSE ? c->frag : SIZE_MAX;
}

/* c's size, now known, for the next mount. */
static void remember(csv *c, uint64_t size)
{
	tf_views *v = c->v;
	tf_index_key k;
	uint64_t *slot;
	uint8_t b[8];
	bool put = false;

	pthread_mutex_lock(&v->lock);
	if (csv_key(v, csv_frag_index(c), c->arrow, &k)) {
		slot = claim_slot(v, csv_frag_index(c), c->arrow);
		put = !slot || *slot != size;
		if (slot)
			*slot = size;
	}
	pthread_mutex_unlock(&v->lock);
	if (put) {
		tf_put_le64(b, size);
		tf_index_put(v->store, &k, b, sizeof(b));
	}
}

/* A remembered size the text does not bear out: rejected from the store. */
static void forget(csv *c, const char *why)
{
	tf_views *v = c->v;
	tf_index_key k;
	uint64_t *slot;
	bool keyed;

	pthread_mutex_lock(&v->lock);
	keyed = csv_key(v, csv_frag_index(c), c->arrow, &k);
	if ((slot = claim_slot(v, csv_frag_index(c), c->arrow)))
		*slot = CLAIM_NONE;
	pthread_mutex_unlock(&v->lock);
	if (keyed)
		tf_index_reject(v->store, &k, why);
}

/*
 * A read that reached a remembered size, or ended before it: the text must
 * end exactly there (formatted up to it, and a byte past it asked for),
 * else the size was wrong (a stale or forged entry): the entry goes, the
 * read fails (EIO), and the CSV shows its true size from then on.
 */
static tf_status prove_claim(csv *c, tf_workspace *ws, uint64_t read_end, bool short_read, const tf_cancel *cancel,
			     tf_error *err)
{
	uint64_t claim, end = 0;
	piece_src ps;
	bool eof = false, ok;
	tf_status rc = TF_OK;
	char why[200];

	pthread_mutex_lock(&c->lock);
	claim = c->claim;
	ok = !c->claimed || c->proved || (!short_read && read_end < claim);
	pthread_mutex_unlock(&c->lock);
	if (ok)
		return TF_OK;
	if (claim >= c->header.len && (rc = find_piece(c, ws, claim - c->header.len, cancel, &ps, &eof, err)) != TF_OK)
		return rc;
	pthread_mutex_lock(&c->lock);
	end = c->header.len + view_frontier(c) + c->tail.len;
	ok = eof && c->complete && end == claim;
	if (ok)
		c->proved = true;
	else
		c->claimed = false;
	pthread_mutex_unlock(&c->lock);
	if (ok)
		return TF_OK;
	snprintf(why, sizeof(why), "a %s of %llu%s bytes, not the %llu remembered", c->arrow ? ARROW_NAME : "CSV",
		 (unsigned long long)end,
		 eof ? "" : " or more", (unsigned long long)claim);
	forget(c, why);
	return tf_err(err, TF_E_CORRUPT, "%s: %s (index entry removed)", tf_array_dir(tf_snapshot_array(c->v->s)),
		      why);
}

tf_status view_csv_read(csv *c, tf_workspace *ws, uint64_t off, size_t len, uint8_t *dst, size_t *got,
			  bool kept, const tf_cancel *cancel, tf_error *err)
{
	tf_cache *cache = tf_snapshot_cache(c->v->s);
	piece_src ps = { 0 };
	size_t done = 0;
	bool eof = false;
	tf_status rc = TF_OK;

	if (off < c->header.len) {
		done = c->header.len - off < len ? (size_t)(c->header.len - off) : len;
		memcpy(dst, c->header.p + off, done);
	}
	while (rc == TF_OK && done < len) {
		uint64_t pos = off + done - c->header.len;
		tf_cache_source cs = { &ps, load_piece };
		tf_cache_entry *e;
		size_t n;

		if ((rc = find_piece(c, ws, pos, cancel, &ps, &eof, err)) != TF_OK || eof)
			break;
		rc = tf_cache_get(cache, c->owner, piece_key(ps.level, ps.at), ps.len, &cs, ws, &e, err);
		if (rc == TF_E_INTR && !tf_cancelled(cancel)) {
			rc = TF_OK;	/* the reader formatting it went away, not ours: again */
			continue;
		}
		if (rc != TF_OK)
			break;
		n = ps.at + ps.len - pos < len - done ? (size_t)(ps.at + ps.len - pos) : len - done;
		memcpy(dst + done, tf_cache_data(e) + (pos - ps.at), n);
		done += n;
		/* "Done" when read whole by a reader that keeps it (a page
		 * cache): else a piece costs formatting its block again.  Not
		 * when read to its end only: concurrent requests (the kernel's
		 * readahead) read a piece's start after its end, and the done
		 * list had let it go (cells.arrow formatted ~4% of its batches
		 * twice).  The kernel's 1 MiB requests leave 1 piece in 16. */
		tf_cache_release(cache, e, kept && pos == ps.at && n == ps.len);
	}
	if (rc == TF_OK && eof && c->arrow && done < len) {	/* the tail after the last block */
		pthread_mutex_lock(&c->lock);
		uint64_t at = off + done - c->header.len - view_frontier(c);
		if (at < c->tail.len) {
			size_t n = c->tail.len - at < len - done ? (size_t)(c->tail.len - at) : len - done;
			memcpy(dst + done, c->tail.p + at, n);
			done += n;
		}
		pthread_mutex_unlock(&c->lock);
	}
	*got = done;
	/* A read reaching a remembered size, or ending before it. */
	if (rc == TF_OK)
		rc = prove_claim(c, ws, off + done, done < len, cancel, err);
	return rc;
}
