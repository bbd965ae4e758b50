/*
 * source_s3_read.c - the stored bytes of an S3 source's objects: ranged
 * GETs (pinned to one version), the disk cache, parts kept across opens,
 * fetch-ahead and reads.
 *
 * Reads: stored bytes in parts.  What is fetched is kept in parts: ranges
 * of one version of one object (keyed by key and ETag; an open is served
 * only parts whose answers carried the Last-Modified it is pinned to), held
 * by the source, not by an open, so the walk of a loose tile file at its first
 * open leaves the bytes its cat reads next, and each byte is fetched once.
 * A read takes what parts hold, waits for a part in flight rather than
 * fetching its bytes again, fetches a part still queued itself, and
 * fetches a gap before the next part (as a part of its own when it is
 * PART_KEEP bytes or more and there is room, else straight into the
 * caller's buffer, in up to PARTS_MAX ranged GETs at once).
 *
 * Fetch-ahead.  A reader going forward (each read starting within SEQ_GAP
 * of where the last ended, as a walk's windows do), or one telling where it
 * goes (tf_object_prefetch: a tf_handle, advised TF_ACCESS_PLANNED, passes
 * the stored offset of its position, as its decode-ahead workers read
 * their runs exactly), gets the window after its position queued as parts
 * for the source's fetcher threads (max_requests of them, so that many
 * ranged GETs in flight).  The window starts at W_FIRST and grows with the
 * distance read (W_GROW times it) up to max_requests x W_PER_REQUEST, in parts of
 * the window over max_requests (W_PART_MIN to W_PART_MAX: adjacent wanted
 * ranges coalesced; ending at multiples of W_ALIGN, so that the disk
 * cache's blocks are fetched whole by one part); a short read fetches
 * little, a long one fills the pipe.  A reader jumping about fetches only the ranges it reads.
 *
 * Memory.  Parts (queued, in flight, loaded) are at most `cap` bytes per
 * source: half the decoded cache's budget once it is attached
 * (tf_source_set_cache, which charges them to it), else STORED_DEFAULT;
 * the least recently used loaded part goes first, and a window that finds
 * no room is not fetched ahead (its reader then fetches what it reads).
 * Closing an open cancels its parts still queued and cuts short those a
 * fetcher is loading for it that no reader waits for.  A part that failed
 * to load is never served: whoever waited fetches that range itself and
 * gets the error if it persists.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sources/source_s3_int.h"
#include "cache/tf_cache.h"

#define W_FIRST ((uint64_t)1 << 20)
#define W_GROW 8			/* window: W_GROW x the distance read */
#define W_PART_MIN ((size_t)1 << 20)
#define W_ALIGN ((uint64_t)1 << 20)	/* parts end at multiples: the disk cache's blocks */
#define W_PART_MAX ((size_t)8 << 20)
#define W_PER_REQUEST ((uint64_t)4 << 20)
#define PART_KEEP ((size_t)64 << 10)
#define STORED_MIN ((size_t)4 << 20)
#define STORED_PARTS 2048		/* parts listed at most: a read scans them */
#define SEQ_GAP ((uint64_t)256 << 10)
#define SEQ_SLACK ((uint64_t)4 << 20)
#define PARTS_MAX 4

/* ---- fetching ------------------------------------------------------------------------------------ */

/*
 * Every answer of one open must carry the same Last-Modified (a store may
 * ignore If-Match and keep an ETag across versions: tests/s3/hostile.py's
 * liar), pinned in o->mtime_ns by the first one.  Two GETs at once could be
 * answered by two versions, and whichever was checked first would be
 * pinned and served, so until the pin is set GETs wait for the first
 * answer (pin_begin), at the cost of a round trip per object opened...
 */
static bool pin_begin(s3_object *o, const s3_bound *b)
{
	bool mine;

	if (atomic_load(&o->pin) == PIN_DONE)
		return false;
	pthread_mutex_lock(&o->pin_mu);
	while (atomic_load(&o->pin) == PIN_BUSY && !s3_bound_over(b)) {
		int64_t until = tf_now_ns() + 200000000;
		struct timespec ts;
		until = until < b->at_ns ? until : b->at_ns;
		ts = (struct timespec){ (time_t)(until / 1000000000), (long)(until % 1000000000) };
		pthread_cond_timedwait(&o->pin_cv, &o->pin_mu, &ts);
	}
	if ((mine = atomic_load(&o->pin) == PIN_NONE))
		atomic_store(&o->pin, PIN_BUSY);
	pthread_mutex_unlock(&o->pin_mu);
	return mine;
}

static void pin_end(s3_object *o, bool pinned)
{
	pthread_mutex_lock(&o->pin_mu);
	if (atomic_load(&o->pin) == PIN_BUSY)	/* (pin_done may have finished it meanwhile) */
		atomic_store(&o->pin, pinned ? PIN_DONE : PIN_NONE);
	pthread_cond_broadcast(&o->pin_cv);
	pthread_mutex_unlock(&o->pin_mu);
}

/* Pin mt as the Last-Modified of o's answers (or find it pinned already):
 * false if another is. */
static bool pin_done(s3_object *o, int64_t mt)
{
	int64_t pinned = 0;

	if (!atomic_compare_exchange_strong(&o->mtime_ns, &pinned, mt) && pinned != mt)
		return false;
	if (atomic_load(&o->pin) != PIN_DONE) {
		pthread_mutex_lock(&o->pin_mu);
		atomic_store(&o->pin, PIN_DONE);
		pthread_cond_broadcast(&o->pin_cv);
		pthread_mutex_unlock(&o->pin_mu);
	}
	return true;
}

/*
 * ... unless the answer names the version listed: one carrying the
 * Last-Modified of the listing (or HEAD) the object was opened by is that
 * version, whoever else answered, so it pins that Last-Modified and is
 * served without anyone waiting.  Whether a store's answers carry its
 * listings' Last-Modified (S3 and Swift: the same second) is learnt from
 * the first answer a source gets, which waited as above; until then, and
 * for ever once an answer disagreed (a store rounding otherwise, or one
 * keeping an ETag across versions: the liar), GETs wait for the first.
 * Whether this answer, with seen, is the listed version, pinned.
 */
static bool pin_listed(s3_object *o, int64_t seen)
{
	return seen && seen == o->base.st.v.mtime_ns && pin_done(o, seen);
}

/* What the first answer pinned says of the store (a source learns once). */
static void learn_listed(s3_object *o)
{
	int unknown = LISTED_UNKNOWN, mt = atomic_load(&o->mtime_ns) == o->base.st.v.mtime_ns;

	if (atomic_load(&o->mtime_ns) && o->base.st.v.mtime_ns > 0)
		atomic_compare_exchange_strong(&o->src->listed, &unknown, mt ? LISTED_AGREE : LISTED_DIFFER);
}

static tf_status get_store(s3_object *o, const s3_bound *b, uint64_t off, void *dst, size_t len, tf_error *err)
{
	_Atomic int64_t seen = 0;
	s3_version v = { o->base.st.v.etag, o->base.st.v.size, &seen };
	bool first;
	tf_status rc;

	if (atomic_load(&o->pin) != PIN_DONE && atomic_load(&o->src->listed) == LISTED_AGREE &&
	    o->base.st.v.mtime_ns > 0) {
		rc = s3_client_get(o->src->client, b, o->key, &v, off, dst, len, err);
		if (rc != TF_OK || pin_listed(o, atomic_load(&seen)))
			goto done;
		/* Another date than the listing's, from a store whose answers
		 * carried their listings' dates: another version (or a store
		 * not always agreeing).  The open keeps the version listed, as
		 * an honest store's 412 would have it; later opens of the
		 * source go the careful way. */
		atomic_store(&o->src->listed, LISTED_DIFFER);
		pin_done(o, o->base.st.v.mtime_ns);
		rc = tf_err(err, TF_E_STALE, "%s key '%s' bytes %" PRIu64 "-%" PRIu64 ": the object was replaced "
			    "(Last-Modified not the listing's)", s3_client_where(o->src->client), o->key, off,
			    off + len - 1);
		goto done;
	}
	v.mtime_ns = &o->mtime_ns;
	first = pin_begin(o, b);
	rc = s3_client_get(o->src->client, b, o->key, &v, off, dst, len, err);
	if (first && rc == TF_OK)
		learn_listed(o);
	if (first)
		pin_end(o, rc == TF_OK);
done:
	if (s3_gone_status(rc))
		s3_forget_parent(o->src, o->base.name);
	return rc;
}

/*
 * The disk cache (cache_dir): blocks of DB bytes at multiples of DB, keyed
 * by endpoint, bucket, key, ETag, size and the listing's Last-Modified, so
 * a replaced object is another key.  A range is served from disk as far as
 * its blocks, from either end, are there and verify; what is left is
 * fetched widened to whole blocks (within the object) and its blocks kept.
 * Blocks are kept only from answers carrying the listing's date, and served
 * only to an open pinned to it (pinning it): a store keeping an ETag across
 * versions would otherwise mix one version's blocks with another's answers.
 */
#define DB TF_DISK_CACHE_BLOCK

static bool disk_key(const s3_object *o, char *buf, size_t n)
{
	char where[512];
	int len;

	if (!s3_client_id(o->src->client, where, sizeof(where)))
		return false;
	if (o->base.st.v.mtime_ns <= 0)
		return false;	/* no date listed: nothing to pin blocks to */
	len = snprintf(buf, n, "%s/%s\n%s\n%" PRIu64 "\n%" PRId64, where, o->key, o->base.st.v.etag,
		       o->base.st.v.size, o->base.st.v.mtime_ns);
	return len > 0 && (size_t)len < n;
}

/* Block i of the object, as far as it overlaps [off, off+len), from disk. */
static bool disk_block(s3_object *o, const char *key, uint64_t i, uint64_t off, uint8_t *dst, size_t len,
		       uint8_t **scratch)
{
	uint64_t at = i * DB, size = o->base.st.v.size;
	size_t blen = (size_t)(size - at < DB ? size - at : DB);
	uint64_t from = off > at ? off : at, to = off + len < at + blen ? off + len : at + blen;

	if (from == at && to == at + blen)	/* the whole block: straight into dst */
		return tf_disk_cache_get(o->src->disk, key, i, dst + (at - off), blen);
	if (!*scratch && !(*scratch = malloc(DB)))
		return false;
	if (!tf_disk_cache_get(o->src->disk, key, i, *scratch, blen))
		return false;
	memcpy(dst + (from - off), *scratch + (from - at), (size_t)(to - from));
	return true;
}

static tf_status get(s3_object *o, const s3_bound *b, uint64_t off, void *dst, size_t len, tf_error *err)
{
	char key[TF_DISK_CACHE_KEY_MAX];
	uint64_t first, last, w_off, w_end, size = o->base.st.v.size;
	uint8_t *scratch = NULL, *buf;
	int64_t listed = o->base.st.v.mtime_ns, pinned = atomic_load(&o->mtime_ns);
	tf_status rc;

	if (!o->src->disk || !len || off + len > size || (pinned && pinned != listed) ||
	    !disk_key(o, key, sizeof(key)))
		return get_store(o, b, off, dst, len, err);
	first = off / DB, last = (off + len - 1) / DB;
	while (first <= last && disk_block(o, key, first, off, dst, len, &scratch))
		first++;
	while (last > first && disk_block(o, key, last, off, dst, len, &scratch))
		last--;
	free(scratch);
	if ((first > off / DB || last < (off + len - 1) / DB) && !pin_done(o, listed))
		return get_store(o, b, off, dst, len, err);	/* pinned otherwise meanwhile */
	if (first > last)
		return TF_OK;
	w_off = first * DB, w_end = (last + 1) * DB < size ? (last + 1) * DB : size;
	buf = w_off == off && w_end == off + len ? dst : malloc((size_t)(w_end - w_off));
	if (!buf)	/* no room to widen: the range as asked */
		return get_store(o, b, off, dst, len, err);
	if ((rc = get_store(o, b, w_off, buf, (size_t)(w_end - w_off), err)) == TF_OK) {
		for (uint64_t at = w_off; at < w_end && atomic_load(&o->mtime_ns) == listed; at += DB)
			tf_disk_cache_put(o->src->disk, key, at / DB, buf + (at - w_off),
					  (size_t)(w_end - at < DB ? w_end - at : DB));
		if (buf != dst) {
			uint64_t from = off > w_off ? off : w_off, to = off + len < w_end ? off + len : w_end;
			memcpy((uint8_t *)dst + (from - off), buf + (from - w_off), (size_t)(to - from));
		}
	}
	if (buf != dst)
		free(buf);
	return rc;
}

typedef struct part {
	s3_object *o;
	const s3_bound *b;
	uint64_t off;
	uint8_t *dst;
	size_t len;
	tf_error err;
	tf_status rc;
	pthread_t th;
	bool started;
} part;

static void *part_main(void *arg)
{
	part *p = arg;

	p->rc = get(p->o, p->b, p->off, p->dst, p->len, &p->err);
	return NULL;
}

/* [off, off+len) in up to PARTS_MAX ranged GETs at once. */
static tf_status fetch(s3_object *o, const s3_bound *b, uint64_t off, void *dst, size_t len, tf_error *err)
{
	size_t n = len / PART_MIN, step;
	part parts[PARTS_MAX];
	tf_status rc = TF_OK;

	n = n < 1 ? 1 : n > PARTS_MAX ? PARTS_MAX : n;
	if (n == 1)
		return get(o, b, off, dst, len, err);
	step = (len / n + 4095) & ~(size_t)4095;
	for (size_t i = 0; i < n; i++) {
		size_t at = i * step;
		parts[i] = (part){ .o = o, .b = b, .off = off + at, .dst = (uint8_t *)dst + at,
				   .len = i + 1 == n ? len - at : step };
		/* The last part runs here; the others in threads of their own. */
		parts[i].started = i + 1 < n && pthread_create(&parts[i].th, NULL, part_main, &parts[i]) == 0;
	}
	for (size_t i = 0; i < n; i++) {
		if (parts[i].started)
			pthread_join(parts[i].th, NULL);
		else
			part_main(&parts[i]);
		if (parts[i].rc != TF_OK && rc == TF_OK) {
			rc = parts[i].rc;
			if (err)
				*err = parts[i].err;
		}
	}
	return rc;
}

/* Bound stored bytes at cap, a reader's window at half of it (pmu held, or
 * the source not yet shared). */
void s3_stored_bound(s3_source *s, size_t cap)
{
	uint64_t w = (uint64_t)s->max_fetchers * W_PER_REQUEST;

	s->cap = cap < STORED_MIN ? STORED_MIN : cap;
	s->wmax = w < s->cap / 2 ? w : s->cap / 2;
	s->wmax = s->wmax < W_FIRST ? W_FIRST : s->wmax;
}

/* ---- stored bytes: parts (src->pmu held unless said) -------------------------------------- */

static bool part_of(const s3_part *p, const s3_object *o)
{
	return p->idh == o->idh && !strcmp(p->id, o->id);
}

/* Memory held (charged to the cache's budget when one is attached). */
static void held_add(s3_source *s, ptrdiff_t n)
{
	s->held = (size_t)((ptrdiff_t)s->held + n);
	if (s->cache) {
		tf_cache_charge(s->cache, n);
		s->charged += n;
	}
}

/* Parts are the list of a tf_lru set without keys (a read finds its part
 * by range, part_at); pins are their tf_lru_ref counts. */
static void parts_unlink(s3_source *s, s3_part *p)
{
	tf_lru_unlist(s->parts, &p->node);
}

static void parts_front(s3_source *s, s3_part *p)
{
	tf_lru_use(s->parts, &p->node, 0);
}

unsigned s3_nparts(const s3_source *s)
{
	return (unsigned)tf_lru_length(s->parts, 0);
}

/* Drop a reference to o (a part queued or loading through it holds one). */
static void object_unref(s3_object *o);

void s3_part_free(s3_source *s, s3_part *p)
{
	parts_unlink(s, p);
	held_add(s, -(ptrdiff_t)p->len);
	if (p->o)
		object_unref(p->o);
	free(p->data);
	free(p->id);
	free(p);
}

/* Unpin p; a part no longer listed goes with its last pin. */
static void part_unpin(s3_source *s, s3_part *p)
{
	if (tf_lru_release(&p->node) && !tf_lru_listed(&p->node))
		s3_part_free(s, p);
}

/* Room for n more bytes and one more part within the bounds: least
 * recently used parts out (ready ones no reader holds). */
bool s3_make_room(s3_source *s, size_t n)
{
	tf_lru_node *at = tf_lru_oldest(s->parts, 0);

	while ((s->held + n > s->cap || s3_nparts(s) >= STORED_PARTS) && at) {
		s3_part *p = PART_OF(at);
		at = tf_lru_newer(s->parts, at);
		if (p->state == P_READY && !p->node.refs) {
			s3_part_free(s, p);
			s->evicted++;
		}
	}
	return s->held + n <= s->cap && s3_nparts(s) < STORED_PARTS;
}

/* A new part of o for [off, off+len), listed, its memory taken; NULL when
 * the bound leaves no room. */
static s3_part *part_new(s3_object *o, uint64_t off, size_t len, part_state state)
{
	s3_source *s = o->src;
	s3_part *p;

	if (len > s->cap / 4 || !s3_make_room(s, len))
		return NULL;
	if (!(p = calloc(1, sizeof(*p))) || !(p->data = malloc(len))) {
		free(p);
		return NULL;
	}
	if (!(p->id = strdup(o->id))) {
		free(p->data);
		free(p);
		return NULL;
	}
	p->idh = o->idh;
	p->off = off, p->len = len, p->state = state;
	atomic_init(&p->abandoned, false);
	held_add(s, (ptrdiff_t)len);
	parts_front(s, p);
	return p;
}

/* The part of o holding off, or NULL; *next: where the next one starts,
 * *prev: where the last one before off ends (0 if none). */
static s3_part *part_near(s3_object *o, uint64_t off, uint64_t *prev, uint64_t *next)
{
	*prev = 0, *next = UINT64_MAX;
	for (tf_lru_node *at = tf_lru_newest(o->src->parts, 0); at; at = tf_lru_older(o->src->parts, at)) {
		s3_part *p = PART_OF(at);
		if (!part_of(p, o))
			continue;
		if (off >= p->off && off - p->off < p->len)
			return p;
		if (p->off > off && p->off < *next)
			*next = p->off;
		if (p->off + p->len <= off && p->off + p->len > *prev)
			*prev = p->off + p->len;
	}
	return NULL;
}

static s3_part *part_at(s3_object *o, uint64_t off, uint64_t *next)
{
	uint64_t prev;

	return part_near(o, off, &prev, next);
}

static void *fetcher_main(void *arg);

/* Queue p for the fetchers, starting one more if all are busy. */
static void part_queue(s3_object *o, s3_part *p)
{
	s3_source *s = o->src;
	pthread_t th;

	p->o = o;
	o->refs++;
	p->qnext = NULL;
	if (s->q_tail)
		s->q_tail->qnext = p;
	else
		s->q_head = p;
	s->q_tail = p;
	s->queued++;
	if (s->idle < s->queued && s->nfetchers < s->max_fetchers &&
	    pthread_create(&th, NULL, fetcher_main, s) == 0)
		s->fetchers[s->nfetchers++] = th;
	pthread_cond_broadcast(&s->fcv);
}

/* Take p off the queue (it is there). */
void s3_queue_remove(s3_source *s, s3_part *p)
{
	s3_part **pp = &s->q_head, *prev = NULL;

	while (*pp && *pp != p)
		prev = *pp, pp = &(*pp)->qnext;
	if (!*pp)
		return;
	*pp = p->qnext;
	if (s->q_tail == p)
		s->q_tail = prev;
	p->qnext = NULL;
	s->queued--;
}

/* Whether the fetch of part arg is for nobody any more (s3_close). */
static bool part_abandoned(void *arg)
{
	return atomic_load(&((s3_part *)arg)->abandoned);
}

/* Fetch p (LOADING, pinned by the caller) through o within bd (NULL: a
 * fetcher's, from now, cut short if o is closed meanwhile), pmu released
 * meanwhile. */
static void part_load(s3_object *o, s3_part *p, const s3_bound *bd, bool parallel)
{
	s3_source *s = o->src;
	s3_bound b = bd ? *bd : s3_bound_now(s);
	tf_status rc;

	if (!bd)
		b.gone = part_abandoned, b.arg = p;

	s->inflight++;
	pthread_mutex_unlock(&s->pmu);
	rc = parallel ? fetch(o, &b, p->off, p->data, p->len, NULL) : get(o, &b, p->off, p->data, p->len, NULL);
	pthread_mutex_lock(&s->pmu);
	s->inflight--;
	s->fetched += p->len;
	s->aborted += rc != TF_OK && atomic_load(&p->abandoned);
	p->mtime_ns = atomic_load(&o->mtime_ns);
	p->state = rc == TF_OK ? P_READY : P_FAILED;
	if (rc != TF_OK)	/* never served: whoever waits fetches for itself */
		parts_unlink(s, p);
	pthread_cond_broadcast(&s->pcv);
}

static void *fetcher_main(void *arg)
{
	s3_source *s = arg;

	pthread_mutex_lock(&s->pmu);
	for (;;) {
		s3_part *p = s->q_head;
		s3_object *o;

		if (s->stopping)
			break;
		if (!p) {
			s->idle++;
			pthread_cond_wait(&s->fcv, &s->pmu);
			s->idle--;
			continue;
		}
		s3_queue_remove(s, p);
		p->state = P_LOADING;
		tf_lru_ref(&p->node);
		o = p->o;
		part_load(o, p, NULL, false);
		p->o = NULL;
		part_unpin(s, p);
		object_unref(o);
	}
	pthread_mutex_unlock(&s->pmu);
	return NULL;
}

/*
 * The size of a part of a stream's window starting at `at`: the window over
 * max_requests (so many GETs fill it), and at least a quarter of its
 * distance ahead of the reader, up to W_PER_REQUEST: a window grows in a few
 * steps a few milliseconds apart as the reader takes in a round of parts,
 * and sized by the window of the moment, the far parts of it were as small
 * as the near ones (1-2 MiB: at 50 ms, 25 MB/s a connection, half of each
 * GET's time is the round trip).  Near parts stay small, to arrive soon.
 */
static size_t part_size(const s3_object *o, uint64_t window, uint64_t at)
{
	uint64_t piece = window / o->src->max_fetchers, ahead = at > o->s_pos ? (at - o->s_pos) / 4 : 0;

	ahead = ahead < W_PER_REQUEST ? ahead : W_PER_REQUEST;
	piece = piece > ahead ? piece : ahead;
	return (size_t)(piece < W_PART_MIN ? W_PART_MIN : piece > W_PART_MAX ? W_PART_MAX : piece);
}

/* Fetch-ahead along a forward reader at stored offset off, which will read
 * up to off+len: parts over what is not there yet of a window that starts
 * at W_FIRST and grows with the distance read (W_GROW times it, as
 * mountpoint-s3's prefetcher multiplies each request by 8), in parts of the
 * window over max_requests (coalesced gaps), W_PART_MIN to W_PART_MAX.  A
 * stream goes on from where its last window ended (s_end), not from the
 * reader's position: a reader jumps a tile's header at a time, and a
 * window from each position would leave the bytes between behind, for a
 * request of a few hundred bytes alone.  Windows end at multiples of
 * W_ALIGN for the same reason. */
static void stream_ahead(s3_object *o, uint64_t off, uint64_t len)
{
	s3_source *s = o->src;
	uint64_t size = o->base.st.v.size, window, to, at, next;

	if (!o->streaming || off + SEQ_SLACK < o->s_start || off > o->s_pos + s->wmax + SEQ_SLACK)
		o->s_start = o->s_pos = o->s_end = off;	/* a new stream */
	o->streaming = true;
	/* Requests of several threads arrive out of order (a planned reader's
	 * positions came 8 MiB back and restarted the window): the stream is
	 * where the furthest of them is. */
	o->s_pos = off > o->s_pos ? off : o->s_pos;
	/* A walk of chunk headers reads every stored byte (a header every few
	 * KiB), so it gets the widest window from its first read: ramping up
	 * from W_FIRST cost it a round trip per doubling. */
	window = o->walked ? s->wmax : W_GROW * (o->s_pos - o->s_start);
	window = window < W_FIRST ? W_FIRST : window > s->wmax ? s->wmax : window;
	to = off + (window < len ? window : len);
	to = to % W_ALIGN && to < UINT64_MAX - W_ALIGN ? to - to % W_ALIGN + W_ALIGN : to;
	to = to < size ? to : size;
	at = o->s_end < off && off - o->s_end <= SEQ_SLACK ? o->s_end : off;
	o->s_end = o->s_end > to ? o->s_end : to;
	while (at < to) {
		s3_part *p = part_at(o, at, &next);
		if (p) {
			at = p->off + p->len;
			continue;
		}
		next = next < to ? next : to;
		while (at < next) {
			size_t piece = part_size(o, window, at);
			uint64_t end = at + piece;
			size_t n;
			if (end % W_ALIGN && end - end % W_ALIGN > at)
				end -= end % W_ALIGN;	/* whole blocks of the disk cache */
			n = next - at < end - at ? (size_t)(next - at) : (size_t)(end - at);
			if (next - at - n < piece / 2)	/* no sliver at the end */
				n = (size_t)(next - at);
			if (!(p = part_new(o, at, n, P_QUEUED))) {
				o->s_end = at;	/* no room: the rest another time */
				return;
			}
			part_queue(o, p);
			at += n;
		}
	}
}

/* ---- reading ----------------------------------------------------------------------------------- */

/* Whether a read at off continues the last one (pmu held). */
static bool continues(const s3_object *o, uint64_t off)
{
	if (!o->tick && off == 0)
		return true;	/* a first read from the start */
	return o->tick && off + SEQ_GAP >= o->seq_end && off <= o->seq_end + SEQ_GAP;
}

/* Wait for p (pinned) to leave LOADING, or for bd to be over: whether it did. */
static bool wait_part(s3_source *s, s3_part *p, const s3_bound *bd)
{
	while (p->state == P_LOADING && !s3_bound_over(bd)) {
		int64_t until = tf_now_ns() + 200000000;
		struct timespec ts;
		until = until < bd->at_ns ? until : bd->at_ns;
		ts = (struct timespec){ (time_t)(until / 1000000000), (long)(until % 1000000000) };
		pthread_cond_timedwait(&s->pcv, &s->pmu, &ts);
	}
	return p->state != P_LOADING;
}

/*
 * A gap [*from, *from + *n) a forward reader fetches itself, widened to
 * whole W_ALIGN blocks within the parts around it (prev, next): the bytes
 * its neighbours will want, so that no gap of a few bytes is left between
 * its part and the stream's for a request of its own.
 */
static void grid_gap(const s3_object *o, uint64_t *from, size_t *n, uint64_t prev, uint64_t next)
{
	uint64_t lo = *from - *from % W_ALIGN, hi = *from + *n, size = o->base.st.v.size;

	hi = hi % W_ALIGN ? hi - hi % W_ALIGN + W_ALIGN : hi;
	lo = lo > prev ? lo : prev;
	hi = hi < next ? hi : next;
	hi = hi < size ? hi : size;
	*from = lo;
	*n = (size_t)(hi - lo);
}

/*
 * One step of a read at *off: served from a part (waited for if in flight;
 * one still queued is fetched here), or the gap before the next part
 * fetched here, kept as a part when it is worth one and there is room,
 * else into dst directly.  A failed part is never served: its range is
 * fetched again here, and that error is the read's.  pmu held.
 */
static tf_status read_step(s3_object *o, const s3_bound *bd, uint64_t *off, uint8_t **dst, size_t *len,
			   tf_error *err)
{
	s3_source *s = o->src;
	uint64_t prev, next, end, from;
	s3_part *p = part_near(o, *off, &prev, &next);
	tf_status rc;
	size_t n, wide;

	if (p) {
		tf_lru_ref(&p->node);
		atomic_store(&p->abandoned, false);	/* wanted again (if not cut already) */
		if (p->state == P_QUEUED) {	/* ours now: no waiting behind the queue */
			s3_object *by = p->o;
			s3_queue_remove(s, p);
			p->state = P_LOADING;
			p->o = NULL;
			part_load(o, p, bd, true);
			object_unref(by);
		}
		if (!wait_part(s, p, bd)) {	/* the caller went, or its deadline */
			part_unpin(s, p);
			return tf_err(err, TF_E_IO, "%s: %llu bytes at %llu: not fetched within the request",
				      o->base.name, (unsigned long long)p->len, (unsigned long long)p->off);
		}
	} else {
		n = next - *off < *len ? (size_t)(next - *off) : *len;
		from = *off, wide = n;
		if (n >= PART_KEEP && o->streaming)
			grid_gap(o, &from, &wide, prev, next);
		if (n >= PART_KEEP && ((p = part_new(o, from, wide, P_LOADING)) ||
				       (wide != n && (p = part_new(o, *off, n, P_LOADING))))) {
			tf_lru_ref(&p->node);
			part_load(o, p, bd, true);
		}
	}
	/* A part loaded through another open is served to this one only if its
	 * answers carried the date this open is pinned to (pinning it). */
	if (p && p->state == P_READY && (!p->mtime_ns || pin_done(o, p->mtime_ns))) {
		n = p->len - (size_t)(*off - p->off);
		n = n < *len ? n : *len;
		parts_front(s, p);
		pthread_mutex_unlock(&s->pmu);
		memcpy(*dst, p->data + (*off - p->off), n);
		pthread_mutex_lock(&s->pmu);
		part_unpin(s, p);
		s->served += n;
		*off += n, *dst += n, *len -= n;
		return TF_OK;
	}
	end = p ? p->off + p->len : next;	/* failed, or no room: fetched here, into dst */
	if (p)
		part_unpin(s, p);
	n = end - *off < *len ? (size_t)(end - *off) : *len;
	s->inflight++;
	pthread_mutex_unlock(&s->pmu);
	rc = fetch(o, bd, *off, *dst, n, err);
	pthread_mutex_lock(&s->pmu);
	s->inflight--;
	s->fetched += n;
	if (rc == TF_OK)
		*off += n, *dst += n, *len -= n;
	if (rc == TF_OK && o->streaming && *off > o->s_end && *off - o->s_end <= SEQ_SLACK)
		o->s_end = *off;	/* fetched: no window goes back for it */
	return rc;
}

static tf_status s3_read(tf_object *base, uint64_t off, void *dst, size_t len, tf_error *err)
{
	s3_object *o = (s3_object *)base;
	s3_source *s = o->src;
	s3_bound b = s3_bound_of(s);
	uint8_t *p = dst;
	tf_status rc = TF_OK;

	pthread_mutex_lock(&s->pmu);
	if (!o->planned && continues(o, off))
		stream_ahead(o, off, o->base.st.v.size - off);
	else if (!o->planned)
		o->streaming = false;
	o->tick++;
	o->seq_end = off + len;
	while (len && rc == TF_OK)
		rc = read_step(o, &b, &off, &p, &len, err);
	pthread_mutex_unlock(&s->pmu);
	return rc;
}

static void s3_prefetch(tf_object *base, uint64_t off, uint64_t len)
{
	s3_object *o = (s3_object *)base;

	pthread_mutex_lock(&o->src->pmu);
	stream_ahead(o, off, len);
	pthread_mutex_unlock(&o->src->pmu);
}

static bool s3_advise(tf_object *base, tf_access how)
{
	s3_object *o = (s3_object *)base;

	if (how == TF_ACCESS_HEADERS) {
		pthread_mutex_lock(&o->src->pmu);
		o->walked = true;	/* see stream_ahead */
		pthread_mutex_unlock(&o->src->pmu);
		return false;	/* headers: a round trip each, so large runs stay */
	}
	if (how != TF_ACCESS_PLANNED)
		return false;
	pthread_mutex_lock(&o->src->pmu);
	o->planned = true;	/* its reader tells us where it goes (s3_prefetch) */
	pthread_mutex_unlock(&o->src->pmu);
	return true;
}

/* One HEAD: whether the object is still the version opened. */
static tf_status s3_check(tf_object *base, tf_error *err)
{
	s3_object *o = (s3_object *)base;
	s3_bound b = s3_bound_of(o->src);
	tf_stat st;
	tf_status rc = s3_head_stat(o->src, &b, o->base.name, &st, err);

	if (rc == TF_OK && !s3_same_version(&st.v, &o->base.st.v)) {
		s3_forget_parent(o->src, o->base.name);
		return tf_err(err, TF_E_STALE, "%s: replaced in the object store while open", o->base.name);
	}
	if (rc == TF_E_NOTFOUND)
		s3_forget_parent(o->src, o->base.name);
	return rc;
}

/* pmu held. */
static void object_unref(s3_object *o)
{
	if (--o->refs)
		return;
	pthread_mutex_destroy(&o->pin_mu);
	pthread_cond_destroy(&o->pin_cv);
	free(o->key), free(o->id), free(o->base.name);
	free(o);
}

/* Parts fetched ahead for this open and wanted by no reader now are for
 * nobody: those still queued are cancelled, those a fetcher is loading cut
 * short (their GET ends at its next progress call: within 50 ms while data
 * flows, about a second when an answer is held back; the part
 * fails and goes, and a reader that comes for it later fetches it anew). */
static void s3_close(tf_object *base)
{
	s3_object *o = (s3_object *)base;
	s3_source *s = o->src;

	pthread_mutex_lock(&s->pmu);
	for (s3_part *p = s->q_head, *nx; p; p = nx) {
		nx = p->qnext;
		if (p->o == o && !p->node.refs) {
			s3_queue_remove(s, p);
			s->cancelled++;
			s3_part_free(s, p);	/* drops its reference to o */
		}
	}
	for (tf_lru_node *at = tf_lru_newest(s->parts, 0); at; at = tf_lru_older(s->parts, at)) {
		s3_part *p = PART_OF(at);
		if (p->o == o && p->state == P_LOADING && p->node.refs == 1)	/* its loader's pin alone */
			atomic_store(&p->abandoned, true);
	}
	object_unref(o);
	pthread_mutex_unlock(&s->pmu);
}

const tf_object_ops s3_object_ops = {
	.close = s3_close, .read = s3_read, .prefetch = s3_prefetch, .check = s3_check,
	.advise = s3_advise,
};
