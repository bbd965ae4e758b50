/* tf_tile.c - chunks, tiles and generic tiles in memory (FORMAT.md §3, §6). */
#include "format/tf_tile.h"

#include <stdlib.h>

tf_status tf_chunk_decode(const tf_pipeline *p, const tf_chunk_env *env, tf_workspace *ws,
			  tf_span stored, uint8_t *dst, tf_buf *offsets, tf_error *err)
{
	tf_reader r = tf_reader_of(stored);
	tf_chunk_header h;
	tf_span hdr, md, data;
	tf_status rc;

	if ((rc = tf_get_span(&r, TF_CHUNK_HEADER_SIZE, &hdr, "chunk header", err)) != TF_OK)
		return rc;
	tf_chunk_header_read(hdr.p, &h);
	if ((rc = tf_get_span(&r, h.md_len, &md, "chunk metadata", err)) != TF_OK ||
	    (rc = tf_get_span(&r, h.filtered_len, &data, "chunk data", err)) != TF_OK)
		return rc;
	return tf_pipeline_decode(p, env, ws, md, data, h.orig_len, dst, offsets, err);
}

/* Shift the offsets a chunk emitted (from `first` on) by its start in the tile. */
static void rebase_offsets(tf_buf *offsets, size_t first, uint64_t base)
{
	for (size_t at = first; base && at + 8 <= offsets->len; at += 8)
		tf_put_le64(offsets->p + at, tf_le64(offsets->p + at) + base);
}

tf_status tf_tile_decode(const tf_pipeline *p, const tf_chunk_env *env, tf_workspace *ws,
			 tf_span bytes, tf_buf *out, tf_buf *offsets, uint64_t *used,
			 tf_error *err)
{
	tf_reader r = tf_reader_of(bytes);
	uint64_t nchunks, start = out->len;
	tf_status rc;

	if ((rc = tf_get_u64(&r, &nchunks, "tile chunk count", err)) != TF_OK)
		return rc;
	/* Every chunk needs at least its 12-byte header. */
	if (nchunks > r.n / TF_CHUNK_HEADER_SIZE)
		return tf_err(err, TF_E_CORRUPT, "tile claims %llu chunks in %zu bytes",
			      (unsigned long long)nchunks, r.n);
	for (uint64_t c = 0; c < nchunks; c++) {
		size_t first = offsets ? offsets->len : 0;
		tf_chunk_header h;
		tf_span stored;
		uint8_t *dst;

		if (r.n < TF_CHUNK_HEADER_SIZE)
			return tf_err(err, TF_E_CORRUPT, "chunk %llu: truncated header", (unsigned long long)c);
		tf_chunk_header_read(r.p, &h);
		/* More than any chunk decodes to: a lying header (corrupt), not
		 * a buffer too small for it (which would read as ENOMEM).  Refused
		 * before out grows by it, so such a header allocates nothing. */
		if (h.orig_len > TF_MAX_CHUNK_BYTES)
			return tf_err(err, TF_E_CORRUPT, "chunk %llu: claims %u decoded bytes",
				      (unsigned long long)c, h.orig_len);
		if ((rc = tf_get_span(&r, tf_chunk_stored_size(&h), &stored, "chunk", err)) != TF_OK ||
		    (rc = tf_buf_grow(out, h.orig_len, &dst, err)) != TF_OK ||
		    (rc = tf_chunk_decode(p, env, ws, stored, dst, offsets, err)) != TF_OK)
			return tf_err_prefix(err, "chunk %llu", (unsigned long long)c);
		if (offsets)
			rebase_offsets(offsets, first, out->len - start);
		out->len += h.orig_len;
	}
	if (used)
		*used = bytes.n - r.n;
	return TF_OK;
}

tf_status tf_generic_header_parse(tf_span bytes, tf_generic_header *h, tf_error *err)
{
	tf_reader r = tf_reader_of(bytes), pr;
	tf_span pipe;
	tf_status rc;

	memset(h, 0, sizeof(*h));
	if ((rc = tf_get_u32(&r, &h->version, "generic tile version", err)) != TF_OK ||
	    (rc = tf_get_u64(&r, &h->persisted_size, "generic tile persisted size", err)) != TF_OK ||
	    (rc = tf_get_u64(&r, &h->tile_size, "generic tile size", err)) != TF_OK ||
	    (rc = tf_get_u8(&r, &h->datatype, "generic tile datatype", err)) != TF_OK ||
	    (rc = tf_get_u64(&r, &h->cell_size, "generic tile cell size", err)) != TF_OK ||
	    (rc = tf_get_u8(&r, &h->encryption, "generic tile encryption", err)) != TF_OK ||
	    (rc = tf_get_u32(&r, &h->pipeline_size, "generic tile pipeline size", err)) != TF_OK ||
	    (rc = tf_get_span(&r, h->pipeline_size, &pipe, "generic tile pipeline", err)) != TF_OK)
		return rc;
	if (!tf_datatype_valid(h->datatype) || h->encryption > 1 || h->cell_size == 0 ||
	    h->cell_size > UINT32_MAX)
		return tf_err(err, TF_E_CORRUPT, "generic tile header: bad datatype %u, cell size %llu "
			      "or encryption %u", h->datatype, (unsigned long long)h->cell_size,
			      h->encryption);
	pr = tf_reader_of(pipe);
	if ((rc = tf_pipeline_deserialize(&pr, &h->pipeline, err)) != TF_OK)
		return tf_err_prefix(err, "generic tile header");
	if (pr.n != 0) {
		tf_generic_header_free(h);
		return tf_err(err, TF_E_CORRUPT, "generic tile header: %zu bytes after its pipeline", pr.n);
	}
	if (tf_pipeline_has(h->pipeline, TF_F_AES_256_GCM) != (h->encryption == 1)) {
		tf_generic_header_free(h);
		return tf_err(err, TF_E_CORRUPT, "generic tile header: encryption type %u disagrees "
			      "with its pipeline", h->encryption);
	}
	h->header_size = TF_GENERIC_BASE_SIZE + (size_t)h->pipeline_size;
	return TF_OK;
}

void tf_generic_header_free(tf_generic_header *h)
{
	tf_pipeline_free(h->pipeline);
	h->pipeline = NULL;
}

tf_status tf_generic_decode(tf_span bytes, const tf_key *key, tf_workspace *ws, tf_buf *out,
			    uint64_t *used, tf_error *err)
{
	tf_generic_header h;
	tf_chunk_env env;
	tf_span tile;
	size_t start = out->len;
	tf_status rc;

	if ((rc = tf_generic_header_parse(bytes, &h, err)) != TF_OK)
		return rc;
	if (h.persisted_size > bytes.n - h.header_size) {
		rc = tf_err(err, TF_E_CORRUPT, "generic tile: %llu stored bytes claimed, %zu present",
			    (unsigned long long)h.persisted_size, bytes.n - h.header_size);
		goto done;
	}
	tile = tf_span_of(bytes.p + h.header_size, (size_t)h.persisted_size);
	env = (tf_chunk_env){ .type = h.datatype, .cell_size = (uint32_t)h.cell_size,
			      .version = h.version, .key = key };
	if (h.encryption && !key) {
		rc = tf_err(err, TF_E_NOKEY, "generic tile is encrypted and no key was given");
		goto done;
	}
	rc = tf_tile_decode(h.pipeline, &env, ws, tile, out, NULL, NULL, err);
	if (rc == TF_OK && out->len - start != h.tile_size)
		rc = tf_err(err, TF_E_CORRUPT, "generic tile decodes to %zu bytes, header says %llu",
			    out->len - start, (unsigned long long)h.tile_size);
	if (rc == TF_OK && used)
		*used = h.header_size + h.persisted_size;
done:
	tf_generic_header_free(&h);
	return rc;
}

/* ---- writer side (§3.3) -------------------------------------------------------------- */

bool tf_tile_unchunked(const tf_pipeline *p, const tf_chunk_env *env, bool var)
{
	bool var_string = var && tf_datatype_is_var_string(env->type);

	if (tf_pipeline_max_chunk_size(p) == 0)
		return true;
	if (var_string && env->var_string)
		return true;
	return !var_string && tf_pipeline_has(p, TF_F_WEBP);
}

static tf_status push_start(uint64_t **v, size_t *n, size_t *cap, uint64_t x, tf_error *err)
{
	if (*n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		uint64_t *nv = realloc(*v, ncap * sizeof(*nv));
		if (!nv)
			return tf_err(err, TF_E_NOMEM, "out of memory");
		*v = nv;
		*cap = ncap;
	}
	(*v)[(*n)++] = x;
	return TF_OK;
}

/* get_var_chunk_sizes (filter_pipeline.cc): keep a cell that overflows the
 * chunk when the chunk is at most half full or stays within 1.5x, else
 * start a new chunk with it; an oversized cell gets a chunk of its own. */
static tf_status var_starts(uint64_t chunk, uint64_t tile_size, const uint64_t *off, size_t ncells,
			    uint64_t **v, size_t *n, size_t *cap, tf_error *err)
{
	uint64_t cur = 0, lo = chunk / 2, hi = chunk + chunk / 2;
	tf_status rc = push_start(v, n, cap, 0, err);

	for (size_t c = 0; c < ncells && rc == TF_OK; c++) {
		uint64_t end = c + 1 < ncells ? off[c + 1] : tile_size, size = end - off[c];
		uint64_t grown = cur + size;

		if (grown <= chunk) {
			cur = grown;
		} else if (cur <= lo || grown <= hi) {
			rc = push_start(v, n, cap, end, err);
			cur = 0;
		} else {
			rc = push_start(v, n, cap, off[c], err);
			cur = size;
			if (rc == TF_OK && size > chunk) {
				if (c + 1 < ncells)
					rc = push_start(v, n, cap, end, err);
				cur = 0;
			}
		}
	}
	return rc;
}

tf_status tf_tile_chunk_starts(const tf_pipeline *p, const tf_chunk_env *env, uint64_t tile_size,
			       const uint64_t *cell_offsets, size_t ncells, uint64_t **starts,
			       size_t *n, tf_error *err)
{
	uint64_t cell = cell_offsets ? tf_datatype_size(env->type) : env->cell_size, chunk;
	size_t cap = 0;
	tf_status rc = TF_OK;

	*starts = NULL;
	*n = 0;
	if (cell == 0)
		return tf_err(err, TF_E_INVAL, "cell size 0");
	/* compute_chunk_size (tile.cc): whole cells, at least one, at most 64 KiB. */
	chunk = (tile_size < TF_WRITER_CHUNK ? tile_size : TF_WRITER_CHUNK) / cell * cell;
	if (chunk < cell)
		chunk = cell;
	if (tf_tile_unchunked(p, env, cell_offsets != NULL) || tile_size == chunk)
		return tile_size || cell_offsets ? push_start(starts, n, &cap, 0, err) : TF_OK;
	if (cell_offsets)
		return var_starts(chunk, tile_size, cell_offsets, ncells, starts, n, &cap, err);
	for (uint64_t at = 0; at < tile_size && rc == TF_OK; at += chunk)
		rc = push_start(starts, n, &cap, at, err);
	return rc;
}

tf_status tf_tile_encode(const tf_pipeline *p, const tf_chunk_env *env, tf_workspace *ws,
			 tf_span tile, const uint64_t *cell_offsets, size_t ncells, tf_buf *out,
			 tf_error *err)
{
	uint64_t *starts;
	size_t n, cell = 0;
	tf_status rc = tf_tile_chunk_starts(p, env, tile.n, cell_offsets, ncells, &starts, &n, err);

	if (rc == TF_OK)
		rc = tf_buf_put_u64(out, n, err);
	for (size_t i = 0; i < n && rc == TF_OK; i++) {
		uint64_t end = i + 1 < n ? starts[i + 1] : tile.n, base = starts[i];
		uint64_t *rel = NULL;
		size_t first = cell, count = 0;

		/* The var-string encoder wants the chunk's own cell offsets; empty
		 * cells at the tile's very end belong to its last chunk. */
		while (cell_offsets && cell < ncells && (i + 1 == n || cell_offsets[cell] < end))
			cell++;
		count = cell - first;
		if (env->var_string && count && !(rel = malloc(count * sizeof(*rel))))
			rc = tf_err(err, TF_E_NOMEM, "out of memory");
		for (size_t c = 0; rel && c < count; c++)
			rel[c] = cell_offsets[first + c] - base;
		if (rc == TF_OK)
			rc = tf_pipeline_encode(p, env, ws, tf_span_of(tile.p + base, (size_t)(end - base)),
						rel, count, out, err);
		free(rel);
		if (rc != TF_OK)
			tf_err_prefix(err, "chunk %zu", i);
	}
	free(starts);
	return rc;
}
