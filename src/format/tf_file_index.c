/*
 * tf_file_index.c - a walked tile file's index in persisted form, and back;
 * a tile's units from that entry or its headers (tf_file_load_tile), and
 * the proof that the entry is right.
 *
 * The payload of a store entry (tf_index.h) is LEB128 varints:
 *
 *   kind (1: tiles walked from offset 0, every one chunked)
 *   ntiles, then per tile:
 *     stored (bytes, its u64 chunk count included), size (decoded bytes),
 *     nchunks, nunits, ulen (bytes of the unit list that follows), then per
 *     unit: src_len << 1 | irregular, and if irregular: decoded size and
 *     chunk count; a regular unit repeats the previous unit's size and count
 *     (the first is compared with 64 KiB and 1: TileDB's chunks)
 *
 * Everything else is implied, because a walk finds tiles back to back from
 * offset 0 and chunks back to back after each tile's count: a tile starts
 * where the last ended, its first unit 8 bytes in, each unit where the last
 * ended; decoded offsets add up.  So the only freedom an entry has is in
 * sizes, and they are claims, trusted only as far as the file's own chunk
 * headers bear them out:
 *
 *   - at restore, that tiles cover the file exactly, each with room for its
 *     chunks' headers and its units for their list: all a lookup needs;
 *   - when a tile is first read, that its units cover it exactly, add up to
 *     its decoded size and chunk count, that each chunk has room for its
 *     header, and that a unit of several chunks keeps the walk's bounds;
 *   - when a unit is decoded, that its chunk headers say what the entry
 *     does (stored and decoded sizes, chunk by chunk): a unit that differs
 *     rejects the entry;
 *   - before a read is answered (tf_file_prove), that every unit and tile
 *     before its end has agreed with its headers, in file order.  Each
 *     unit's place in the decoded file is the sum of the sizes before it,
 *     so a lie about tile 0 would put every later unit's true bytes at a
 *     wrong offset, their own headers agreeing; proved in order, the
 *     offsets are facts.  A unit agrees by being decoded (free: a reader
 *     from the start decodes everything in order anyway) or, far behind a
 *     read that jumped ahead, by its headers being read (what a walk reads,
 *     once); a tile's count is read (8 bytes) as the proof enters it.
 *
 * A rejected entry is removed from the store (warned), and this index of
 * the file answers nothing beyond what was proved (EIO): the next index of
 * it walks.  Never bytes at a wrong place.
 *
 * An entry published in the bucket (tf_index.h) is used when the store
 * has none, and trusted exactly as far: it is restored and proved the
 * same way.  It is copied into the store once proved whole (the file read
 * to its end), so that the store holds only what was walked or proved
 * here; found wrong, it is ignored by this process from then on.
 *
 * Why units are made late: a lookup wants the size alone.  The payload is
 * kept as it is (about 3 bytes a unit: 100 KB for a 2 GiB file of 64 KiB
 * chunks, against 1.3 MB of unit tables) and each tile's units are made
 * from it when first read (tf_file_restore_tile), like an array's tiles'.
 * Measured for that file (on a loaded machine): a restore costs 25-40 us;
 * scanning its 32,768 units as well, 140-185 us; building every table at
 * once, 730 us.
 */
#include "format/tf_file_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/tf_cache.h"
#include "cache/tf_index.h"

#define KIND_WALKED 1u
/* Units this close before a read's start are proved through the cache:
 * another reader's decode awaited, or decoded here and kept for it
 * (concurrent requests of one sequential reader arrive up to a few MiB out
 * of order: tf_handle.c's SEQ_SLACK), never read twice.  Farther ones,
 * behind a reader that jumped, have their headers read, not decoded. */
#define PROVE_NEAR ((uint64_t)4 << 20)

/* ---- varints ---------------------------------------------------------------------------- */

static tf_status put_varint(tf_buf *b, uint64_t v, tf_error *err)
{
	uint8_t tmp[10];
	size_t n = 0;

	do {
		tmp[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	return tf_buf_append(b, tmp, n, err);
}

/* The varint at *p (before end) into *v; false if cut short or over 64 bits. */
static inline bool get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;

	for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
		uint8_t c = *(*p)++;
		if (shift == 63 && c > 1)
			return false;
		x |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*v = x;
			return true;
		}
	}
	return false;
}

/* ---- export ------------------------------------------------------------------------------- */

static tf_status export_units(const unit_table *ut, tf_buf *b, tf_error *err)
{
	uint64_t size = UNIT_BYTES, nchunks = 1;
	tf_status rc = TF_OK;

	for (size_t u = 0; u < ut->n && rc == TF_OK; u++) {
		const unit_ent *e = &ut->u[u];
		bool irregular = e->size != size || e->nchunks != nchunks;

		rc = put_varint(b, e->src_len << 1 | irregular, err);
		if (rc == TF_OK && irregular && (rc = put_varint(b, e->size, err)) == TF_OK)
			rc = put_varint(b, e->nchunks, err);
		size = e->size;
		nchunks = e->nchunks;
	}
	return rc;
}

static tf_status export_tile(const tile_ent *te, const unit_table *ut, tf_buf *b, tf_error *err)
{
	tf_buf units = TF_BUF_INIT(TF_INDEX_MAX_ENTRY);
	tf_status rc = export_units(ut, &units, err);

	if (rc == TF_OK && (rc = put_varint(b, te->stored, err)) == TF_OK &&
	    (rc = put_varint(b, te->size, err)) == TF_OK && (rc = put_varint(b, ut->nchunks, err)) == TF_OK &&
	    (rc = put_varint(b, ut->n, err)) == TF_OK && (rc = put_varint(b, units.len, err)) == TF_OK)
		rc = tf_buf_append(b, units.p, units.len, err);
	tf_buf_free(&units);
	return rc;
}

static tf_status export_file(const tf_file *f, tf_buf *b, tf_error *err)
{
	tf_status rc;

	if ((rc = put_varint(b, KIND_WALKED, err)) != TF_OK || (rc = put_varint(b, f->ntiles, err)) != TF_OK)
		return rc;
	for (size_t t = 0; t < f->ntiles && rc == TF_OK; t++) {
		const unit_table *ut = atomic_load(&f->tiles[t].units);
		if (f->tiles[t].kind != TILE_CHUNKED || !ut)
			return tf_err(err, TF_E_INVAL, "tile %zu is not walked", t);
		rc = export_tile(&f->tiles[t], ut, b, err);
	}
	return rc;
}

tf_status tf_file_export_index(const tf_file *f, tf_buf *out, tf_error *err)
{
	out->len = 0;
	if (f->from_store && !atomic_load(&f->saved_bad))
		return tf_buf_append(out, f->saved, f->saved_len, err);
	if (!f->walked)
		return tf_err(err, TF_E_INVAL, "%s: its index is not persisted (not a walked tile file)", f->name);
	return export_file(f, out, err);
}

void tf_file_persist(const tf_file *f, struct tf_index *store)
{
	tf_buf b = TF_BUF_INIT(TF_INDEX_MAX_ENTRY);
	tf_index_key k;

	if (!f->walked || f->from_store || !tf_index_key_make(&k, f->src, f->rel, &f->ver))
		return;
	if (export_file(f, &b, NULL) == TF_OK)
		tf_index_put(store, &k, b.p, b.len);
	tf_buf_free(&b);
}

/* ---- units from a payload ---------------------------------------------------------------------- */

/* A unit's chunk count and sizes, as the walk would have made them. */
static tf_status check_unit(const unit_ent *e, uint64_t chunks_left, uint64_t bytes_left, tf_error *err)
{
	if (!e->nchunks || e->nchunks > chunks_left || e->nchunks > UNIT_CHUNKS)
		return tf_err(err, TF_E_CORRUPT, "unit of %u chunks, %llu left", e->nchunks,
			      (unsigned long long)chunks_left);
	if (e->src_len > bytes_left || e->src_len < (uint64_t)TF_CHUNK_HEADER_SIZE * e->nchunks)
		return tf_err(err, TF_E_CORRUPT, "unit of %llu stored bytes, %llu left",
			      (unsigned long long)e->src_len, (unsigned long long)bytes_left);
	if (e->nchunks > 1 && (e->size > UNIT_BYTES || e->src_len > UNIT_STORED))
		return tf_err(err, TF_E_CORRUPT, "unit of %u chunks and %u bytes", e->nchunks, e->size);
	return TF_OK;
}

/* The units of tile te (start, stored, off and size set) from its saved
 * list into t->u, checked. */
static tf_status parse_units(const tile_ent *te, const saved_tile *sv, const uint8_t *payload, unit_table *t,
			     tf_error *err)
{
	const uint8_t *p = payload + sv->at, *end = p + sv->len;
	uint64_t src = te->start + TF_TILE_HEADER_SIZE, stop = te->start + te->stored, off = te->off;
	unit_ent e, prev = { .size = (uint32_t)UNIT_BYTES, .nchunks = 1 };
	uint32_t first = 0;

	for (uint64_t u = 0; u < sv->nunits; u++) {
		uint64_t v, size = prev.size, count = prev.nchunks;

		if (!get_varint(&p, end, &v) ||
		    ((v & 1) && (!get_varint(&p, end, &size) || !get_varint(&p, end, &count))))
			return tf_err(err, TF_E_CORRUPT, "unit %llu: cut short", (unsigned long long)u);
		if (size > UINT32_MAX || count > UINT32_MAX)
			return tf_err(err, TF_E_CORRUPT, "unit %llu: sizes out of range", (unsigned long long)u);
		e = (unit_ent){ off, src, v >> 1, (uint32_t)size, (uint32_t)count, first };
		if (check_unit(&e, sv->nchunks - first, stop - src, err) != TF_OK)
			return tf_err_prefix(err, "unit %llu", (unsigned long long)u);
		t->u[u] = e;
		off += size;
		src += e.src_len;
		first += e.nchunks;
		prev = e;
	}
	if (p != end || src != stop || first != sv->nchunks || off - te->off != te->size)
		return tf_err(err, TF_E_CORRUPT, "units cover %llu bytes, %u chunks and %llu decoded of %llu, "
			      "%llu and %llu", (unsigned long long)(src - te->start), first,
			      (unsigned long long)(off - te->off), (unsigned long long)te->stored,
			      (unsigned long long)sv->nchunks, (unsigned long long)te->size);
	return TF_OK;
}

tf_status tf_file_restore_tile(const tf_file *f, size_t t, unit_table **out, tf_error *err)
{
	const saved_tile *sv = &f->saved_tiles[t];
	size_t n = sv->nunits ? (size_t)sv->nunits : 1;
	unit_table *ut = malloc(sizeof(*ut) + n * (sizeof(unit_ent) + sizeof(atomic_uchar)));
	tf_status rc;

	if (!ut)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	ut->n = (size_t)sv->nunits;
	ut->nchunks = sv->nchunks;
	ut->agreed = (atomic_uchar *)(void *)(ut->u + n);
	for (size_t u = 0; u < n; u++)
		atomic_init(&ut->agreed[u], 0);
	if ((rc = parse_units(&f->tiles[t], sv, f->saved, ut, err)) != TF_OK) {
		free(ut);
		return rc;
	}
	*out = ut;
	return TF_OK;
}

/* ---- a tile's units ----------------------------------------------------------------------------- */

/*
 * Tile t's units from the store entry f was restored from, checked as a
 * walk checks its own (their empty units decoded to prove them so), with
 * no other read: each unit's chunk headers are checked when it is decoded,
 * and its place before its bytes are served (tf_file_prove).  Units the
 * entry gets wrong reject it.
 */
static tf_status restore_table(const tf_file *f, size_t t, tf_object *obj, unit_table **out, tf_error *err)
{
	tf_error why;
	tf_status rc = tf_file_restore_tile(f, t, out, &why);

	if (rc == TF_OK && (rc = tf_file_check_empty(f, &f->tiles[t], obj, *out, &why)) != TF_OK)
		free(*out);
	if (rc == TF_OK)
		return TF_OK;
	if (rc == TF_E_CORRUPT)
		tf_file_reject_saved(f, t, why.msg);
	return tf_err(err, rc, "%s", why.msg);
}

/* Lock-free: a racing loader's table may win; ours is then freed. */
tf_status tf_file_load_tile(const tf_file *f, tf_object *obj, size_t t, const unit_table **out,
			    tf_error *err)
{
	tile_ent *te = &f->tiles[t];
	unit_table *have = atomic_load_explicit(&te->units, memory_order_acquire), *mine = NULL;
	tf_status rc;

	if (!have) {
		rc = f->saved ? restore_table(f, t, obj, &mine, err) : tf_file_build_table(f, te, obj, &mine, err);
		if (rc != TF_OK)
			return tf_err_prefix(err, "%s: tile %zu", f->name, t);
		if (atomic_compare_exchange_strong(&te->units, &have, mine))
			have = mine;
		else
			free(mine);
	}
	*out = have;
	return TF_OK;
}

/* ---- proving ---------------------------------------------------------------------------------- */

typedef struct unit_load {
	tf_file *f;
	tf_object *obj;
	const tile_ent *te;
	const unit_ent *u;
} unit_load;

/* Fill a claimed unit: its stored bytes read and decoded (which checks
 * its headers). */
static tf_status load_unit(void *ctx, uint64_t index, uint8_t *dst, tf_workspace *ws, tf_error *err)
{
	unit_load *l = ctx;
	tf_buf *io = tf_workspace_buf(ws, TF_WS_IO);
	tf_status rc;

	(void)index;
	if (l->u->src_len > SIZE_MAX)
		return tf_err(err, TF_E_NOMEM, "unit too large");
	if ((rc = tf_buf_reserve(io, (size_t)l->u->src_len, err)) == TF_OK &&
	    (rc = tf_object_read(l->obj, l->u->src_off, io->p, (size_t)l->u->src_len, err)) == TF_OK)
		rc = tf_file_decode_unit(l->f, l->te, l->u, tf_span_of(io->p, (size_t)l->u->src_len), ws, dst, err);
	return rc;
}

/* Unit u of tile t through the cache: ready (decoded, so checked), being
 * decoded by another reader (awaited), or decoded here.  Its own failure
 * is not ours: its headers are read next. */
static void prove_in_cache(tf_file *f, tf_object *obj, tf_cache *c, tf_workspace *ws, size_t t, size_t u)
{
	const unit_table *ut = atomic_load_explicit(&f->tiles[t].units, memory_order_acquire);
	unit_load l = { f, obj, &f->tiles[t], &ut->u[u] };
	tf_cache_source src = { &l, load_unit };
	tf_cache_entry *e;

	if (tf_cache_get(c, atomic_load(&f->owner), UNIT_KEY(t, u), ut->u[u].size, &src, ws, &e, NULL) == TF_OK)
		tf_cache_release(c, e, false);
}

/* The tile count the proof enters tile t by: 8 bytes at its start. */
static tf_status check_count(const tf_file *f, tf_object *obj, size_t t, tf_error *err)
{
	uint8_t raw[TF_TILE_HEADER_SIZE];
	tf_status rc = tf_object_read(obj, f->tiles[t].start, raw, sizeof(raw), err);

	if (rc == TF_OK && tf_le64(raw) != f->saved_tiles[t].nchunks)
		rc = tf_err(err, TF_E_CORRUPT, "holds %llu chunks, the index says %llu",
			    (unsigned long long)tf_le64(raw), (unsigned long long)f->saved_tiles[t].nchunks);
	return rc;
}

/* All of f is proved: a published entry has earned its place in the
 * store (proof lock held: once). */
static void proved_whole(tf_file *f)
{
	tf_index_key k;

	atomic_store_explicit(&f->proved, UINT64_MAX, memory_order_release);
	if (f->from_published && !atomic_load(&f->saved_bad) && tf_index_key_make(&k, f->src, f->rel, &f->ver))
		tf_index_put(f->store, &k, f->saved, f->saved_len);
}

/* Prove the next unit (or the next tile, when it has none), for a read
 * from off.  Lock held. */
static tf_status prove_next(tf_file *f, tf_object *obj, tf_cache *c, tf_workspace *ws, uint64_t off,
			    tf_error *err)
{
	size_t t = f->proof_tile, u = f->proof_unit, u1;
	const tile_ent *te = &f->tiles[t];
	const unit_table *ut;
	tf_status rc;

	if (t >= f->ntiles) {	/* no tile at all */
		proved_whole(f);
		return TF_OK;
	}
	if (atomic_load(&f->saved_bad))
		return tf_err(err, TF_E_CORRUPT, "tile %zu: not read: the index entry was found wrong (removed: "
			      "the file is walked when next indexed)", t);
	if ((rc = tf_file_load_tile(f, obj, t, &ut, err)) != TF_OK)
		return rc;	/* a wrong unit list has rejected the entry */
	if (u == 0 && (rc = check_count(f, obj, t, err)) != TF_OK) {
		if (rc == TF_E_CORRUPT)
			tf_file_reject_saved(f, t, err ? err->msg : "chunk count");
		return tf_err_prefix(err, "tile %zu", t);
	}
	if (u < ut->n && !atomic_load_explicit(&ut->agreed[u], memory_order_acquire)) {
		if (c && ut->u[u].off + ut->u[u].size + PROVE_NEAR > off)
			prove_in_cache(f, obj, c, ws, t, u);
		/* Not decoded: its headers, with those of the units after it
		 * that are neither agreed nor near (one read for a long gap). */
		for (u1 = u + 1; u1 < ut->n && !atomic_load(&ut->agreed[u1]) && ut->u[u1].off + PROVE_NEAR <= off;
		     u1++)
			;
		if (!atomic_load_explicit(&ut->agreed[u], memory_order_acquire) &&
		    (rc = tf_file_check_units(f, obj, t, u, u1, err)) != TF_OK) {
			if (rc == TF_E_CORRUPT)
				tf_file_reject_saved(f, t, err ? err->msg : "headers differ");
			return tf_err_prefix(err, "tile %zu", t);
		}
	}
	if (u < ut->n) {
		f->proof_unit++;
		atomic_store_explicit(&f->proved, ut->u[u].off + ut->u[u].size, memory_order_release);
	}
	if (f->proof_unit >= ut->n) {
		f->proof_tile++;
		f->proof_unit = 0;
		/* All of it: its last (empty) tiles too, whatever end is asked. */
		if (f->proof_tile == f->ntiles)
			proved_whole(f);
		else
			atomic_store_explicit(&f->proved, te->off + te->size, memory_order_release);
	}
	return TF_OK;
}

tf_status tf_file_prove(const tf_file *cf, tf_object *obj, tf_cache *c, tf_workspace *ws, uint64_t off,
			uint64_t end, tf_error *err)
{
	/* The proof is, with the tables, what a shared file changes. */
	tf_file *f = (tf_file *)cf;
	tf_status rc = TF_OK;

	/* Up to end; a read to the end of the file, through its last tiles
	 * (empty ones hold no byte, but a wrong one would hide some). */
	if (end >= f->size)
		end = UINT64_MAX;
	if (atomic_load_explicit(&f->proved, memory_order_acquire) >= end)
		return TF_OK;
	pthread_mutex_lock(&f->proof_lock);
	while (rc == TF_OK && atomic_load_explicit(&f->proved, memory_order_relaxed) < end)
		rc = prove_next(f, obj, c, ws, off, err);
	pthread_mutex_unlock(&f->proof_lock);
	return rc == TF_OK ? rc : tf_err_prefix(err, "%s", f->name);
}

/* ---- restoring ---------------------------------------------------------------------------------- */

/* The tile at pos of a file of fsize bytes, its units checked. */
static tf_status restore_tile(tf_file *f, const uint8_t *payload, const uint8_t **p, const uint8_t *end,
			      uint64_t pos, tf_error *err)
{
	tile_ent *te = &f->tiles[f->ntiles];
	saved_tile *sv = &f->saved_tiles[f->ntiles];
	uint64_t stored, size, ulen, fsize = f->ver.size;

	if (!get_varint(p, end, &stored) || !get_varint(p, end, &size) || !get_varint(p, end, &sv->nchunks) ||
	    !get_varint(p, end, &sv->nunits) || !get_varint(p, end, &ulen))
		return tf_err(err, TF_E_CORRUPT, "cut short");
	if (stored < TF_TILE_HEADER_SIZE || stored > fsize - pos)
		return tf_err(err, TF_E_CORRUPT, "%llu stored bytes at %llu", (unsigned long long)stored,
			      (unsigned long long)pos);
	/* Every chunk has a header, every unit a chunk and a byte here. */
	if (sv->nchunks > (stored - TF_TILE_HEADER_SIZE) / TF_CHUNK_HEADER_SIZE || sv->nchunks > UINT32_MAX ||
	    sv->nunits > sv->nchunks || sv->nunits > ulen || ulen > (uint64_t)(end - *p) ||
	    (sv->nunits == 0) != (sv->nchunks == 0) || size > UINT64_MAX - f->size)
		return tf_err(err, TF_E_CORRUPT, "%llu chunks in %llu units of %llu bytes",
			      (unsigned long long)sv->nchunks, (unsigned long long)sv->nunits,
			      (unsigned long long)ulen);
	*te = (tile_ent){ .start = pos, .stored = stored, .off = f->size, .size = size, .kind = TILE_CHUNKED };
	atomic_init(&te->units, NULL);
	sv->at = (size_t)(*p - payload);
	sv->len = (size_t)ulen;
	*p += ulen;
	f->ntiles++;
	f->size += size;
	return TF_OK;
}

static tf_status restore_file(tf_file *f, const uint8_t *payload, size_t n, tf_error *err)
{
	const uint8_t *p = payload, *end = payload + n;
	uint64_t kind, ntiles, pos = 0;

	if (!get_varint(&p, end, &kind) || !get_varint(&p, end, &ntiles))
		return tf_err(err, TF_E_CORRUPT, "cut short");
	if (kind != KIND_WALKED)
		return tf_err(err, TF_E_CORRUPT, "payload of kind %llu", (unsigned long long)kind);
	if (ntiles > (uint64_t)(end - p) / 5 || ntiles > f->ver.size / TF_TILE_HEADER_SIZE)
		return tf_err(err, TF_E_CORRUPT, "%llu tiles", (unsigned long long)ntiles);
	if (!(f->tiles = calloc(ntiles ? (size_t)ntiles : 1, sizeof(*f->tiles))) ||
	    !(f->saved_tiles = calloc(ntiles ? (size_t)ntiles : 1, sizeof(*f->saved_tiles))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	f->tcap = (size_t)ntiles;
	for (uint64_t t = 0; t < ntiles; t++) {
		if (restore_tile(f, payload, &p, end, pos, err) != TF_OK)
			return tf_err_prefix(err, "tile %llu", (unsigned long long)t);
		pos += f->tiles[t].stored;
	}
	if (pos != f->ver.size || p != end)
		return tf_err(err, TF_E_CORRUPT, "tiles cover %llu of %llu bytes, %zu bytes left over",
			      (unsigned long long)pos, (unsigned long long)f->ver.size, (size_t)(end - p));
	return TF_OK;
}

/* Back to no tiles, for the walk to start afresh. */
static void clear_tiles(tf_file *f)
{
	free(f->tiles);
	free(f->saved_tiles);
	f->tiles = NULL;
	f->saved_tiles = NULL;
	f->ntiles = f->tcap = 0;
	f->size = 0;
}

tf_status tf_file_restore(tf_file *f, struct tf_index *store, const tf_version *expect, tf_error *err)
{
	tf_buf p = TF_BUF_INIT(TF_INDEX_MAX_ENTRY);
	tf_index_key k;
	tf_error why;
	tf_stat st;
	tf_status rc;

	/* Without a version from the caller, the one there now (a file that
	 * cannot be stat'ed is left to the open to report). */
	if (!expect && (tf_source_stat(f->src, f->rel, &st, NULL) != TF_OK || st.kind != TF_ENT_REG))
		return tf_err(err, TF_E_NOTFOUND, "not indexed");
	if (!tf_index_key_make(&k, f->src, f->rel, expect ? expect : &st.v))
		return tf_err(err, TF_E_NOTFOUND, "not indexed");
	/* The store's, else the bucket's (checked the same way). */
	if (tf_index_get(store, &k, &p, NULL) != TF_OK &&
	    !(f->from_published = tf_index_get_published(store, f->src, f->rel, &k, &p, NULL) == TF_OK)) {
		tf_buf_free(&p);
		return tf_err(err, TF_E_NOTFOUND, "not indexed");
	}
	f->ver = k.v;
	if ((rc = restore_file(f, p.p, p.len, &why)) != TF_OK) {
		clear_tiles(f);
		tf_buf_free(&p);
		if (f->from_published)
			tf_index_reject_published(store, f->src, f->rel, &k, why.msg);
		else
			tf_index_reject(store, &k, why.msg);
		f->from_published = false;
		return tf_err(err, TF_E_NOTFOUND, "not indexed");
	}
	f->saved = p.p;	/* taken over: tiles' units are made from it */
	f->saved_len = p.len;
	f->store = store;
	f->from_store = true;
	return TF_OK;
}
