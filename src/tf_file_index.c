/*
 * tf_file_index.c - a walked tile file's index in persisted form, and back.
 *
 * The payload of a store entry (tf_index.h) is LEB128 varints:
 *
 *   kind (1: tiles walked from offset 0, every one chunked)
 *   ntiles, then per tile:
 *     stored (bytes, its u64 chunk count included), nchunks, nunits,
 *     then per unit: src_len << 1 | irregular, and if irregular: decoded
 *     size and chunk count; a regular unit repeats the previous unit's size
 *     and count (the first is compared with 64 KiB and 1: TileDB's chunks)
 *
 * Everything else is implied, because a walk finds tiles back to back from
 * offset 0 and chunks back to back after each tile's count: a tile starts
 * where the last ended, its first unit 8 bytes in, each unit where the last
 * ended; decoded offsets add up.  So the only freedom an entry has is in
 * sizes, and import checks every one: tiles cover the file exactly, units
 * cover their tile exactly, chunk counts add up, each chunk has room for
 * its header, and a unit of several chunks keeps the walk's bounds.  A
 * 2 GiB file of 64 KiB chunks (32,768 units) takes about 100 KB.  The
 * decode checks each chunk header against its unit again.
 */
#include "tf_file_int.h"

#include <stdlib.h>
#include <string.h>

#include "tf_index.h"

#define KIND_WALKED 1u

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

static tf_status get_varint(tf_reader *r, uint64_t *v, const char *what, tf_error *err)
{
	uint64_t x = 0;

	for (unsigned shift = 0, i = 0; i < 10; i++, shift += 7) {
		uint8_t c;
		if (tf_get_u8(r, &c, what, err) != TF_OK)
			return TF_E_CORRUPT;
		if (shift == 63 && c > 1)
			break;
		x |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*v = x;
			return TF_OK;
		}
	}
	return tf_err(err, TF_E_CORRUPT, "%s: bad number", what);
}

/* ---- export ------------------------------------------------------------------------------- */

static tf_status export_tile(const tile_ent *te, const unit_table *ut, tf_buf *b, tf_error *err)
{
	uint64_t size = UNIT_BYTES, nchunks = 1;
	tf_status rc = TF_OK;

	if ((rc = put_varint(b, te->stored, err)) != TF_OK || (rc = put_varint(b, ut->nchunks, err)) != TF_OK ||
	    (rc = put_varint(b, ut->n, err)) != TF_OK)
		return rc;
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

/* ---- import ------------------------------------------------------------------------------- */

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

/* The units of tile te (start, stored and off set; nchunks, n read). */
static tf_status import_units(tf_reader *r, tile_ent *te, uint64_t nchunks, uint64_t n, tf_error *err)
{
	uint64_t src = te->start + TF_TILE_HEADER_SIZE, end = te->start + te->stored, off = te->off;
	unit_ent prev = { .size = (uint32_t)UNIT_BYTES, .nchunks = 1 };
	uint32_t first = 0;
	unit_table *t = malloc(sizeof(*t) + (n ? n : 1) * sizeof(unit_ent));

	if (!t)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	t->n = (size_t)n;
	t->nchunks = nchunks;
	atomic_init(&te->units, t);
	for (uint64_t u = 0; u < n; u++) {
		unit_ent *e = &t->u[u];
		uint64_t v, size = prev.size, count = prev.nchunks;

		if (get_varint(r, &v, "unit", err) != TF_OK ||
		    ((v & 1) && (get_varint(r, &size, "unit size", err) != TF_OK ||
				 get_varint(r, &count, "unit chunks", err) != TF_OK)))
			return TF_E_CORRUPT;
		if (size > UINT32_MAX || count > UINT32_MAX)
			return tf_err(err, TF_E_CORRUPT, "unit %llu: sizes out of range", (unsigned long long)u);
		*e = (unit_ent){ off, src, v >> 1, (uint32_t)size, (uint32_t)count, first };
		if (check_unit(e, nchunks - first, end - src, err) != TF_OK)
			return tf_err_prefix(err, "unit %llu", (unsigned long long)u);
		off += size;
		src += e->src_len;
		first += e->nchunks;
		prev = *e;
	}
	if (src != end || first != nchunks)
		return tf_err(err, TF_E_CORRUPT, "units cover %llu bytes and %u chunks of %llu and %llu",
			      (unsigned long long)(src - te->start), first, (unsigned long long)te->stored,
			      (unsigned long long)nchunks);
	te->size = off - te->off;
	return TF_OK;
}

/* Tile t at pos of a file of fsize bytes. */
static tf_status import_tile(tf_reader *r, tf_file *f, uint64_t pos, uint64_t fsize, tf_error *err)
{
	tile_ent *te = &f->tiles[f->ntiles];
	uint64_t stored, nchunks, n;

	if (get_varint(r, &stored, "tile size", err) != TF_OK || get_varint(r, &nchunks, "chunks", err) != TF_OK ||
	    get_varint(r, &n, "units", err) != TF_OK)
		return TF_E_CORRUPT;
	if (stored < TF_TILE_HEADER_SIZE || stored > fsize - pos)
		return tf_err(err, TF_E_CORRUPT, "%llu stored bytes at %llu", (unsigned long long)stored,
			      (unsigned long long)pos);
	/* Every chunk has a header, every unit a chunk and a byte here. */
	if (nchunks > (stored - TF_TILE_HEADER_SIZE) / TF_CHUNK_HEADER_SIZE || nchunks > UINT32_MAX ||
	    n > nchunks || n > r->n || (n == 0) != (nchunks == 0))
		return tf_err(err, TF_E_CORRUPT, "%llu chunks in %llu units", (unsigned long long)nchunks,
			      (unsigned long long)n);
	*te = (tile_ent){ .start = pos, .stored = stored, .off = f->size, .kind = TILE_CHUNKED };
	atomic_init(&te->units, NULL);
	f->ntiles++;	/* from here on, its units are freed with it */
	if (import_units(r, te, nchunks, n, err) != TF_OK)
		return TF_E_CORRUPT;
	f->size += te->size;
	return TF_OK;
}

static tf_status import_file(tf_file *f, tf_span p, tf_error *err)
{
	tf_reader r = tf_reader_of(p);
	uint64_t kind, ntiles, pos = 0, fsize = f->ver.size;

	if (get_varint(&r, &kind, "kind", err) != TF_OK || get_varint(&r, &ntiles, "tiles", err) != TF_OK)
		return TF_E_CORRUPT;
	if (kind != KIND_WALKED)
		return tf_err(err, TF_E_CORRUPT, "payload of kind %llu", (unsigned long long)kind);
	if (ntiles > r.n / 3 || ntiles > fsize / TF_TILE_HEADER_SIZE)
		return tf_err(err, TF_E_CORRUPT, "%llu tiles", (unsigned long long)ntiles);
	if (!(f->tiles = calloc(ntiles ? (size_t)ntiles : 1, sizeof(*f->tiles))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	f->tcap = (size_t)ntiles;
	for (uint64_t t = 0; t < ntiles; t++) {
		if (import_tile(&r, f, pos, fsize, err) != TF_OK)
			return tf_err_prefix(err, "tile %llu", (unsigned long long)t);
		pos += f->tiles[t].stored;
	}
	if (pos != fsize || r.n)
		return tf_err(err, TF_E_CORRUPT, "tiles cover %llu of %llu bytes, %zu bytes left over",
			      (unsigned long long)pos, (unsigned long long)fsize, r.n);
	return TF_OK;
}

/* Back to no tiles, for the walk to start afresh. */
static void clear_tiles(tf_file *f)
{
	for (size_t t = 0; t < f->ntiles; t++)
		free(atomic_load(&f->tiles[t].units));
	free(f->tiles);
	f->tiles = NULL;
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
	if (!tf_index_key_make(&k, f->src, f->rel, expect ? expect : &st.v) ||
	    tf_index_get(store, &k, &p, NULL) != TF_OK) {
		tf_buf_free(&p);
		return tf_err(err, TF_E_NOTFOUND, "not indexed");
	}
	f->ver = k.v;
	rc = import_file(f, tf_span_of(p.p, p.len), &why);
	tf_buf_free(&p);
	if (rc != TF_OK) {
		clear_tiles(f);
		tf_index_reject(store, &k, why.msg);
		return tf_err(err, TF_E_NOTFOUND, "not indexed");
	}
	f->from_store = true;
	return TF_OK;
}
