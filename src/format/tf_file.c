/*
 * tf_file.c - the parts a stored file's index is made of: walking chunk
 * headers into each tile's decode units (tf_file_int.h), the tile list,
 * decoding a unit from its stored bytes, and the index's facts.  Opening a
 * file is tf_file_open.c, the index store's entries tf_file_index.c,
 * reading through the cache tf_handle.c.
 */
#include "format/tf_file_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/tf_index.h"
#include "format/tf_pipeline_attr.h"

#define WALK_WINDOW (1024 * 1024)	/* see walker */
#define WALK_TAIL (WALK_WINDOW / 2)	/* a rest this short joins the window before it */
#define HEADER_READ 512			/* header walks: the 512-byte blocks holding a header */
#define HEADER_GAP 4096			/* headers closer than this: read the window */
#define DENSE_RUNS 8

/* ---- walking headers ------------------------------------------------------------- */

/* Headers are read through a window: a walk visits them in order.  Chunks
 * are tens of KiB apart, so a wide window reads nearly the whole file: one
 * sequential pass instead of a random read per header, which costs ten times
 * more on most storage, and it fills the page cache with what readers will
 * want next.  (Asking the kernel to read ahead while taking only the header
 * pages was measured slower: 0.43 s against 0.27 s for a cold 70 MB file.)
 *
 * A header walk, for when only the size is wanted (a lookup, not an open),
 * reads each header alone: the 512-byte block(s) holding it, which a local
 * source reads with direct I/O unless cached (tf_object_advise).  Measured
 * on a cold 2 GiB file of 64 KiB chunks stored at 3.8:1 (564 MB): the
 * window reads 100% of it in 0.2-0.5 s; headers alone read 3% (1/32) in
 * 1.9-2.7 s, one device round trip per chunk (contrib/bench-index).  So a
 * header walk spends time to save bytes: it is for lookups, and the index
 * store makes it rare.  Headers closer together than HEADER_GAP would read
 * most of the file anyway: the walk then switches to the window. */

/* A walk never reads past `end` (walk_want), so a walk of a small file
 * (most tile files of an array) needs no full window: one fewer 1 MiB
 * allocation per open, which many concurrent opens of small files feel.
 * A window that would leave less than WALK_TAIL before `end` takes it too:
 * an array's tile of 1 MiB and 200 bytes of headers is then one read, not
 * a window and a sliver (over an object store, a request of 200 bytes
 * costs a round trip like any other). */
walker *tf_file_walker_new(tf_object *obj, uint64_t end, bool headers)
{
	size_t cap = end < WALK_WINDOW + WALK_TAIL ? (size_t)end : WALK_WINDOW + WALK_TAIL;
	walker *w = malloc(sizeof(*w) + cap);

	if (w) {
		w->obj = obj;
		w->end = end;
		w->at = w->len = 0;
		w->headers = headers;
		w->dense = 0;
		w->read = 0;
		w->cap = cap;
	}
	return w;
}

/* Where to read, and how much, for n bytes at off: a window from off, or
 * (a header walk) the whole 512-byte blocks holding them. */
static size_t walk_want(walker *w, uint64_t off, size_t n, uint64_t *start)
{
	uint64_t left = w->end - off, end;

	if (w->headers) {
		bool near = w->len && off >= w->at + w->len && off - (w->at + w->len) < HEADER_GAP;
		w->dense = near ? w->dense + 1 : 0;
		w->headers = w->dense < DENSE_RUNS;
	}
	*start = off;
	if (!w->headers)
		return left <= WALK_WINDOW + WALK_TAIL ? (size_t)left : WALK_WINDOW;
	*start = off - off % HEADER_READ;
	end = (off + n + HEADER_READ - 1) / HEADER_READ * HEADER_READ;
	end = end < w->end ? end : w->end;
	return (size_t)(end - *start);
}

static tf_status walk_read(walker *w, uint64_t off, void *dst, size_t n, tf_error *err)
{
	if (off > w->end || n > w->end - off)
		return tf_err(err, TF_E_CORRUPT, "header at %llu runs past the end of the tile data",
			      (unsigned long long)off);
	if (off < w->at || off + n > w->at + w->len) {
		uint64_t start;
		size_t want = walk_want(w, off, n, &start);
		tf_status rc;

		if (want > w->cap || want < n)	/* cannot be (walk_want): kept as a bound */
			return tf_err(err, TF_E_CORRUPT, "header at %llu does not fit the walk window",
				      (unsigned long long)off);
		if ((rc = tf_object_read(w->obj, start, w->buf, want, err)) != TF_OK)
			return rc;
		w->at = start;
		w->len = want;
		w->read += want;
	}
	memcpy(dst, w->buf + (off - w->at), n);
	return TF_OK;
}

/* ---- unit lists ---------------------------------------------------------------------- */

static tf_status push_unit(unit_table **t, size_t *cap, const unit_ent *u, tf_error *err)
{
	if ((*t)->n == *cap) {
		size_t ncap = *cap ? 2 * *cap : 16;
		unit_table *v = realloc(*t, sizeof(**t) + ncap * sizeof(unit_ent));
		if (!v)
			return tf_err(err, TF_E_NOMEM, "cannot index %zu units", ncap);
		*t = v;
		*cap = ncap;
	}
	(*t)->u[(*t)->n++] = *u;
	return TF_OK;
}

/* Whether chunk h (sz stored bytes) must start a new unit after cur. */
static bool unit_full(const unit_ent *cur, const tf_chunk_header *h, uint64_t sz)
{
	return cur->nchunks == UNIT_CHUNKS || cur->size + (uint64_t)h->orig_len > UNIT_BYTES ||
	       cur->src_len + sz > UNIT_STORED;
}

/*
 * Read the chunk headers of the tile at `pos` (u64 count, then chunks back
 * to back) into a new unit table whose decoded offsets start at `off`.
 * *stored receives the tile's stored size, *size its decoded size.
 */
tf_status tf_file_walk_chunks(walker *w, uint64_t pos, uint64_t off, unit_table **out,
			      uint64_t *stored, uint64_t *size, tf_error *err)
{
	uint8_t raw[TF_CHUNK_HEADER_SIZE];
	uint64_t n, p = pos + TF_TILE_HEADER_SIZE, start = off;
	unit_ent cur = { 0 };
	unit_table *t;
	size_t cap = 0;
	tf_status rc = walk_read(w, pos, raw, TF_TILE_HEADER_SIZE, err);

	if (rc != TF_OK)
		return rc;
	n = tf_le64(raw);
	if (n > (w->end - p) / TF_CHUNK_HEADER_SIZE || n > UINT32_MAX)
		return tf_err(err, TF_E_CORRUPT, "claims %llu chunks in %llu bytes",
			      (unsigned long long)n, (unsigned long long)(w->end - p));
	if (!(t = calloc(1, sizeof(*t))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	for (uint64_t c = 0; c < n && rc == TF_OK; c++) {
		tf_chunk_header h;
		uint64_t sz;

		if ((rc = walk_read(w, p, raw, sizeof(raw), err)) != TF_OK) {
			tf_err_prefix(err, "chunk %llu", (unsigned long long)c);
			break;
		}
		tf_chunk_header_read(raw, &h);
		/* No chunk decodes to more (the decoder refuses it): a larger
		 * claim is a lying header, not a unit the cache must refuse. */
		if (h.orig_len > TF_MAX_CHUNK_BYTES) {
			rc = tf_err(err, TF_E_CORRUPT, "chunk %llu: claims %u decoded bytes, more than a chunk "
				    "can hold", (unsigned long long)c, h.orig_len);
			break;
		}
		if ((sz = tf_chunk_stored_size(&h)) > w->end - p) {
			rc = tf_err(err, TF_E_CORRUPT, "chunk %llu: %llu stored bytes run past the end",
				    (unsigned long long)c, (unsigned long long)sz);
			break;
		}
		if (cur.nchunks && unit_full(&cur, &h, sz)) {
			rc = push_unit(&t, &cap, &cur, err);
			cur.nchunks = 0;
		}
		if (!cur.nchunks)
			cur = (unit_ent){ .off = off, .src_off = p, .first = (uint32_t)c };
		cur.size += h.orig_len;
		cur.src_len += sz;
		cur.nchunks++;
		p += sz;
		off += h.orig_len;
	}
	if (rc == TF_OK && cur.nchunks)
		rc = push_unit(&t, &cap, &cur, err);
	if (rc != TF_OK) {
		free(t);
		return rc;
	}
	t->nchunks = n;
	*out = t;
	*stored = p - pos;
	*size = off - start;
	return TF_OK;
}

/* The one pseudo-unit of a tile that is not chunked (raw bytes, or folded
 * offsets rebuilt from a data tile). */
static tf_status pseudo_table(const tile_ent *te, unit_table **out, tf_error *err)
{
	unit_table *t;

	/* Its decoded size must fit 32 bits (sizes come from fragment
	 * metadata, which may lie), and raw bytes decode to what is stored. */
	if (te->size > UINT32_MAX || (te->kind == TILE_RAW && te->size != te->stored))
		return tf_err(err, TF_E_CORRUPT, "tile of %llu bytes (%llu stored) cannot be one chunk",
			      (unsigned long long)te->size, (unsigned long long)te->stored);
	if (!(t = malloc(sizeof(*t) + sizeof(unit_ent))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	t->n = t->nchunks = 1;
	t->agreed = NULL;
	t->u[0] = (unit_ent){ te->off, te->kind == TILE_RAW ? te->start : te->data_start,
			      te->kind == TILE_RAW ? te->stored : te->data_stored, (uint32_t)te->size, 1, 0 };
	*out = t;
	return TF_OK;
}

/* A folded offsets tile is stored as its chunk count alone, 0 (§4.7).  Its
 * place and size may come from fragment metadata: anything but a 0 count
 * there is a corrupt tile, not the placeholder it was taken for. */
static tf_status check_placeholder(const tile_ent *te, tf_object *obj, tf_error *err)
{
	uint8_t raw[TF_TILE_HEADER_SIZE];
	tf_status rc;

	if (te->stored != TF_TILE_HEADER_SIZE)
		return tf_err(err, TF_E_CORRUPT, "folded offsets tile of %llu stored bytes",
			      (unsigned long long)te->stored);
	if ((rc = tf_object_read(obj, te->start, raw, sizeof(raw), err)) != TF_OK)
		return rc;
	if (tf_le64(raw) != 0)
		return tf_err(err, TF_E_CORRUPT, "folded offsets tile claims %llu chunks, not 0",
			      (unsigned long long)tf_le64(raw));
	return TF_OK;
}

/*
 * A unit whose chunks all claim 0 decoded bytes holds no byte of the file,
 * so no read ever decodes it: a chunk whose orig_len was zeroed would drop
 * its bytes from the file unnoticed (a [match] tile file has no fragment
 * metadata to disagree).  Such units are decoded once, when indexed, to
 * prove them empty.  They are rare, so this costs nothing otherwise.
 */
tf_status tf_file_check_empty(const tf_file *f, const tile_ent *te, tf_object *obj,
			      const unit_table *ut, tf_error *err)
{
	tf_workspace *ws = NULL;
	uint8_t *buf = NULL, none[1];
	tf_status rc = TF_OK;

	/* A data file walked only to find its tiles (fold_tiles decodes
	 * those itself) has no decoder. */
	for (size_t i = 0; f->ndec && rc == TF_OK && i < ut->n; i++) {
		const unit_ent *u = &ut->u[i];
		uint8_t *p;

		if (u->size || !u->nchunks || te->kind != TILE_CHUNKED)
			continue;
		/* src_len was checked against the file's size by the walk. */
		if (u->src_len > SIZE_MAX || (!ws && !(ws = tf_workspace_new())) ||
		    !(p = realloc(buf, u->src_len ? (size_t)u->src_len : 1))) {
			rc = tf_err(err, TF_E_NOMEM, "out of memory");
			break;
		}
		buf = p;
		if ((rc = tf_object_read(obj, u->src_off, buf, (size_t)u->src_len, err)) == TF_OK)
			rc = tf_file_decode_unit(f, te, u, tf_span_of(buf, (size_t)u->src_len), ws, none, err);
		if (rc == TF_OK && ut->agreed)	/* a restored table, not yet the tile's */
			atomic_store_explicit(&ut->agreed[i], 1, memory_order_release);
	}
	free(buf);
	tf_workspace_free(ws);
	return rc;
}

/* Make tile te's unit list from its chunk headers in obj, and check it
 * against what the fragment metadata said of the tile. */
tf_status tf_file_build_table(const tf_file *f, const tile_ent *te, tf_object *obj, unit_table **out,
			      tf_error *err)
{
	uint64_t stored, size;
	unit_table *t = NULL;
	walker *w;
	tf_status rc;

	if (te->kind == TILE_FOLDED && (rc = check_placeholder(te, obj, err)) != TF_OK)
		return rc;
	if (te->kind != TILE_CHUNKED)
		return pseudo_table(te, out, err);
	if (!(w = tf_file_walker_new(obj, te->start + te->stored, false)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	rc = tf_file_walk_chunks(w, te->start, te->off, &t, &stored, &size, err);
	free(w);
	if (rc != TF_OK)
		return rc;
	if (stored != te->stored || size != te->size) {
		free(t);
		return tf_err(err, TF_E_CORRUPT, "chunks take %llu bytes and decode to %llu, the "
			      "fragment metadata says %llu and %llu", (unsigned long long)stored,
			      (unsigned long long)size, (unsigned long long)te->stored,
			      (unsigned long long)te->size);
	}
	if ((rc = tf_file_check_empty(f, te, obj, t, err)) != TF_OK) {
		free(t);
		return rc;
	}
	*out = t;
	return TF_OK;
}

/* One unit's chunks as the walker reads their headers: they must fill it
 * exactly and decode to its size. */
static tf_status check_unit_headers(walker *w, const unit_ent *e, tf_error *err)
{
	uint8_t raw[TF_CHUNK_HEADER_SIZE];
	uint64_t p = e->src_off, end = e->src_off + e->src_len, size = 0;
	tf_status rc;

	for (uint32_t c = 0; c < e->nchunks; c++) {
		tf_chunk_header h;
		uint64_t sz;

		if (end - p < TF_CHUNK_HEADER_SIZE)
			return tf_err(err, TF_E_CORRUPT, "chunk %u: no room for its header", e->first + c);
		if ((rc = walk_read(w, p, raw, sizeof(raw), err)) != TF_OK)
			return tf_err_prefix(err, "chunk %u", e->first + c);
		tf_chunk_header_read(raw, &h);
		if ((sz = tf_chunk_stored_size(&h)) > end - p || h.orig_len > e->size - size)
			return tf_err(err, TF_E_CORRUPT, "chunk %u: header differs from the index", e->first + c);
		p += sz;
		size += h.orig_len;
	}
	if (p != end || size != e->size)
		return tf_err(err, TF_E_CORRUPT, "chunks %u-%u: headers differ from the index", e->first,
			      e->first + e->nchunks - 1);
	return TF_OK;
}

tf_status tf_file_check_units(const tf_file *f, tf_object *obj, size_t t, size_t u0, size_t u1, tf_error *err)
{
	const tile_ent *te = &f->tiles[t];
	const unit_table *ut = atomic_load_explicit(&te->units, memory_order_acquire);
	walker *w;
	tf_status rc = TF_OK;

	if (u0 >= u1)
		return TF_OK;
	if (!(w = tf_file_walker_new(obj, ut->u[u1 - 1].src_off + ut->u[u1 - 1].src_len, false)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	for (size_t u = u0; u < u1 && rc == TF_OK; u++)
		if ((rc = check_unit_headers(w, &ut->u[u], err)) == TF_OK)
			atomic_store_explicit(&ut->agreed[u], 1, memory_order_release);
	free(w);
	return rc;
}

/* ---- the tile list ------------------------------------------------------------------ */

tf_status tf_file_add_tile(tf_file *f, const tile_ent *te, tf_error *err)
{
	/* Sizes may come from fragment metadata: their sum is the file's
	 * st_size (a signed off_t) and must not wrap. */
	if (te->size > (uint64_t)INT64_MAX - f->size)
		return tf_err(err, TF_E_CORRUPT, "tile %zu: decoded size %llu takes the file past 2^63 bytes",
			      f->ntiles, (unsigned long long)te->size);
	if (f->ntiles == f->tcap) {
		size_t cap = f->tcap ? f->tcap * 2 : 16;
		tile_ent *v = realloc(f->tiles, cap * sizeof(*v));
		if (!v)
			return tf_err(err, TF_E_NOMEM, "cannot index %zu tiles", cap);
		f->tiles = v;
		f->tcap = cap;
	}
	f->tiles[f->ntiles] = *te;
	f->tiles[f->ntiles].off = f->size;
	f->size += te->size;
	f->ntiles++;
	return TF_OK;
}

/* Walk every tile in [start, end) of obj: tiles with their units loaded. */
tf_status tf_file_walk(tf_file *f, tf_object *obj, uint64_t start, uint64_t end, tf_error *err)
{
	walker *w = tf_file_walker_new(obj, end, f->walk_headers);
	tf_status rc = TF_OK;

	if (!w)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	for (uint64_t pos = start; rc == TF_OK && pos < end;) {
		tile_ent te = { .start = pos, .kind = TILE_CHUNKED };
		unit_table *t;

		rc = tf_file_walk_chunks(w, pos, f->size, &t, &te.stored, &te.size, err);
		if (rc != TF_OK) {
			tf_err_prefix(err, "tile %zu (at byte %llu)", f->ntiles, (unsigned long long)pos);
			break;
		}
		atomic_init(&te.units, t);
		if ((rc = tf_file_add_tile(f, &te, err)) != TF_OK)
			free(t);
		else if ((rc = tf_file_check_empty(f, &f->tiles[f->ntiles - 1], obj, t, err)) != TF_OK)
			tf_err_prefix(err, "tile %zu", f->ntiles - 1);
		pos += te.stored;
	}
	f->walked = true;
	f->walked_bytes += w->read;
	free(w);
	return rc;
}

/* ---- references ------------------------------------------------------------------------ */

void tf_file_free(tf_file *f)
{
	for (size_t i = 0; i < f->ndec; i++)
		tf_pipeline_free(f->dec[i].pipeline);
	tf_pipeline_free(f->var.pipeline);
	for (size_t t = 0; t < f->ntiles; t++)
		free(atomic_load(&f->tiles[t].units));
	free(f->tiles);
	free(f->saved);
	free(f->saved_tiles);
	pthread_mutex_destroy(&f->proof_lock);
	free(f->dec);
	free(f->var_rel);
	free(f->name);
	free(f->rel);
	free(f);
}

tf_file *tf_file_ref(tf_file *f)
{
	atomic_fetch_add(&f->refs, 1);
	return f;
}

void tf_file_unref(tf_file *f)
{
	if (f && atomic_fetch_sub(&f->refs, 1) == 1)
		tf_file_free(f);
}

/* ---- decoding a unit --------------------------------------------------------------------- */

/* Decode data tile (start, stored) of var: its cell offsets (u64, relative
 * to the tile) land in *offsets, its data in the aux buffer. */
tf_status tf_file_decode_data_tile(const tf_file *f, tf_object *var, tf_workspace *ws, uint64_t start,
				   uint64_t stored, tf_buf *offsets, tf_error *err)
{
	tf_buf *io = tf_workspace_buf(ws, TF_WS_IO), *data = tf_workspace_buf(ws, TF_WS_AUX);
	tf_status rc;

	io->len = data->len = offsets->len = 0;
	data->limit = 2 * TF_MAX_CHUNK_BYTES;
	if (stored > SIZE_MAX)
		return tf_err(err, TF_E_NOMEM, "data tile too large");
	if ((rc = tf_buf_reserve(io, (size_t)stored, err)) != TF_OK ||
	    (rc = tf_object_read(var, start, io->p, (size_t)stored, err)) != TF_OK)
		return rc;
	return tf_tile_decode(f->var.pipeline, &f->var.env, ws, tf_span_of(io->p, (size_t)stored), data,
			      offsets, NULL, err);
}

/* The chunks of unit u, back to back in `stored`, into dst.  *differs:
 * their headers do not say what the index does. */
static tf_status decode_chunks(const tf_file *f, const tile_ent *te, const unit_ent *u, tf_span stored,
			       tf_workspace *ws, uint8_t *dst, bool *differs, tf_error *err)
{
	const decoder *d = &f->dec[te->dec];
	size_t tile = (size_t)(te - f->tiles);
	uint64_t pos = 0, at = 0;

	for (uint32_t i = 0; i < u->nchunks; i++) {
		tf_chunk_header h;
		uint64_t sz;
		tf_status rc;

		if (stored.n - at < TF_CHUNK_HEADER_SIZE)
			return *differs = true, tf_err(err, TF_E_CORRUPT, "tile %zu, chunk %u: header past the unit",
						       tile, u->first + i);
		tf_chunk_header_read(stored.p + at, &h);
		sz = tf_chunk_stored_size(&h);
		/* The index was made from these headers: they cannot differ
		 * unless the bytes are not the version indexed. */
		if (sz > stored.n - at || h.orig_len > u->size - pos)
			return *differs = true, tf_err(err, TF_E_CORRUPT, "tile %zu, chunk %u: header differs "
						       "from the index", tile, u->first + i);
		rc = tf_chunk_decode(d->pipeline, &d->env, ws, tf_span_of(stored.p + at, (size_t)sz),
				     dst + pos, NULL, err);
		if (rc != TF_OK)
			return tf_err_prefix(err, "tile %zu, chunk %u", tile, u->first + i);
		at += sz;
		pos += h.orig_len;
	}
	if (pos != u->size || at != stored.n)
		return *differs = true, tf_err(err, TF_E_CORRUPT, "tile %zu, chunks %u-%u: headers differ from "
					       "the index", tile, u->first, u->first + u->nchunks - 1);
	return TF_OK;
}

/* Mark unit u of te agreed with its headers, if te's table is a restored
 * one and holds u (tf_file_check_empty marks a table not yet te's). */
static void mark_agreed(const tile_ent *te, const unit_ent *u)
{
	const unit_table *ut = atomic_load_explicit(&te->units, memory_order_acquire);

	if (ut && ut->agreed && u >= ut->u && u < ut->u + ut->n)
		atomic_store_explicit(&ut->agreed[u - ut->u], 1, memory_order_release);
}

tf_status tf_file_decode_unit(const tf_file *f, const tile_ent *te, const unit_ent *u, tf_span stored,
			      tf_workspace *ws, uint8_t *dst, tf_error *err)
{
	bool differs = false;
	tf_status rc;

	if (stored.n != u->src_len)
		return tf_err(err, TF_E_CORRUPT, "tile %zu: unit of %llu stored bytes given %zu",
			      (size_t)(te - f->tiles), (unsigned long long)u->src_len, stored.n);
	if (te->kind == TILE_RAW) {
		memcpy(dst, stored.p, u->size);
		return TF_OK;
	}
	if ((rc = decode_chunks(f, te, u, stored, ws, dst, &differs, err)) == TF_OK)
		mark_agreed(te, u);
	else if (differs && f->saved)	/* the entry's claims, proved wrong */
		tf_file_reject_saved(f, (size_t)(te - f->tiles), err ? err->msg : "headers differ from the index");
	return rc;
}

tf_status tf_file_decode_folded(const tf_file *f, tf_object *var, tf_workspace *ws, const unit_ent *u,
				uint8_t *dst, tf_error *err)
{
	tf_buf offsets;
	tf_status rc;

	if (!var)
		return tf_err(err, TF_E_INVAL, "no data file to rebuild offsets from");
	tf_buf_wrap(&offsets, dst, u->size);
	rc = tf_file_decode_data_tile(f, var, ws, u->src_off, u->src_len, &offsets, err);
	if (rc == TF_OK && offsets.len != u->size)
		rc = tf_err(err, TF_E_CORRUPT, "data tile holds %zu cells, the offsets tile %u",
			    offsets.len / 8, u->size / 8);
	return rc == TF_OK ? rc : tf_err_prefix(err, "rebuilding offsets from data tile at %llu",
						(unsigned long long)u->src_off);
}

/* A decoded unit's headers (or a proof) found the store's entry wrong
 * (tf_file_int.h). */
void tf_file_reject_saved(const tf_file *f, size_t t, const char *why)
{
	tf_index_key k;
	char msg[TF_ERRMSG_MAX + 32];

	/* The flag is the one field a shared file changes (like its tables). */
	if (atomic_exchange((atomic_bool *)&f->saved_bad, true) ||
	    !tf_index_key_make(&k, f->src, f->rel, &f->ver))
		return;
	snprintf(msg, sizeof(msg), "tile %zu: %s", t, why);
	if (f->from_published)
		tf_index_reject_published(f->store, f->src, f->rel, &k, msg);
	else
		tf_index_reject(f->store, &k, msg);
}

/* ---- facts --------------------------------------------------------------------------------- */

uint64_t tf_file_size(const tf_file *f) { return f->size; }
const char *tf_file_name(const tf_file *f) { return f->name; }
size_t tf_file_ntiles(const tf_file *f) { return f->ntiles; }

void tf_file_tile_range(const tf_file *f, size_t tile, uint64_t *off, uint64_t *size)
{
	*off = f->tiles[tile].off;
	*size = f->tiles[tile].size;
}

void tf_file_get_info(const tf_file *f, tf_file_info *info)
{
	memset(info, 0, sizeof(*info));
	info->tiles = f->ntiles;
	for (size_t t = 0; t < f->ntiles; t++) {
		const unit_table *ut = atomic_load(&f->tiles[t].units);
		info->chunks += ut ? ut->nchunks : f->saved ? f->saved_tiles[t].nchunks : 0;
	}
	info->stored_bytes = f->ver.size;
	info->decoded_bytes = f->size;
	info->folded_tiles = f->folded;
	info->type = f->dec ? f->dec[0].env.type : TF_DT_CHAR;
	info->cell_val_num = f->generic ? 1 : f->cell_val_num;
	info->version = f->dec ? f->dec[0].env.version : 0;
	info->generic = f->generic;
	info->encrypted = f->dec && tf_pipeline_has(f->dec[0].pipeline, TF_F_AES_256_GCM);
	info->var_string = f->dec && f->dec[0].env.var_string;
	info->from_layout = f->from_layout;
	info->from_store = f->from_store;
	info->walked_bytes = f->walked_bytes;
}

char *tf_file_pipeline_text(const tf_file *f)
{
	return f->ndec ? tf_pipeline_text(f->dec[0].pipeline) : strdup("");
}

char *tf_file_filter_attr(const tf_file *f)
{
	return f->ndec ? tf_pipeline_filter_attr(f->dec[0].pipeline) : strdup("");
}

char *tf_file_codecs_json(const tf_file *f)
{
	return f->ndec ? tf_pipeline_codecs_json(f->dec[0].pipeline, f->dec[0].env.type) : strdup("[]");
}

size_t tf_file_index_bytes(const tf_file *f)
{
	size_t n = sizeof(*f) + f->tcap * sizeof(tile_ent) + f->saved_len +
		   (f->saved ? f->ntiles * sizeof(saved_tile) : 0);

	for (size_t t = 0; t < f->ntiles; t++) {
		const unit_table *ut = atomic_load(&f->tiles[t].units);
		n += ut ? sizeof(*ut) + ut->n * (sizeof(unit_ent) + (ut->agreed ? 1 : 0)) : 0;
	}
	return n;
}

bool tf_file_is_current(const tf_file *f, const tf_version *now)
{
	return tf_version_equal(now, &f->ver);
}

const tf_version *tf_file_version(const tf_file *f)
{
	return &f->ver;
}

const char *tf_file_dep(const tf_file *f, const tf_version **v)
{
	*v = f->var_rel ? &f->var_ver : NULL;
	return f->var_rel;
}
