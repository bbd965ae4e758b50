/*
 * tf_tile.h - tiles, chunks and generic tiles as stored (FORMAT.md §3, §6).
 *
 *   tile    = u64 num_chunks, then num_chunks chunks back to back
 *   chunk   = u32 orig_len, u32 filtered_len, u32 metadata_len, metadata, data
 *   generic = 34-byte header + serialized pipeline + one tile
 *
 * These functions work on bytes in memory; tf_file does the file I/O.
 */
#ifndef TF_TILE_H
#define TF_TILE_H

#include <stdbool.h>
#include <stdint.h>

#include "util/tf_bytes.h"
#include "format/tf_pipeline.h"

#define TF_CHUNK_HEADER_SIZE 12
#define TF_TILE_HEADER_SIZE 8		/* u64 num_chunks */
#define TF_GENERIC_BASE_SIZE 34

typedef struct tf_chunk_header {
	uint32_t orig_len;	/* decoded bytes of this chunk */
	uint32_t filtered_len;	/* stored data bytes (after the metadata) */
	uint32_t md_len;	/* stored metadata bytes */
} tf_chunk_header;

static inline void tf_chunk_header_read(const uint8_t *p, tf_chunk_header *h)
{
	h->orig_len = tf_le32(p);
	h->filtered_len = tf_le32(p + 4);
	h->md_len = tf_le32(p + 8);
}

/* Bytes the chunk occupies on disk, header included. */
static inline uint64_t tf_chunk_stored_size(const tf_chunk_header *h)
{
	return TF_CHUNK_HEADER_SIZE + (uint64_t)h->md_len + h->filtered_len;
}

/* Decode one stored chunk (header included) into dst[orig_len]. */
tf_status tf_chunk_decode(const tf_pipeline *p, const tf_chunk_env *env, tf_workspace *ws,
			  tf_span stored, uint8_t *dst, tf_buf *offsets, tf_error *err);

/*
 * Decode the tile at the front of `bytes`, appending its decoded bytes to
 * out (and, on the var-string path, its cell offsets relative to the tile
 * to *offsets).  *used receives the tile's stored size.  Errors name the
 * chunk ("chunk 2: filter 0 (zstd): ...").
 */
tf_status tf_tile_decode(const tf_pipeline *p, const tf_chunk_env *env, tf_workspace *ws,
			 tf_span bytes, tf_buf *out, tf_buf *offsets, uint64_t *used,
			 tf_error *err);

typedef struct tf_generic_header {
	uint32_t version;	/* format version of the writing library */
	uint64_t persisted_size; /* stored tile bytes after the header */
	uint64_t tile_size;	/* decoded payload bytes */
	uint8_t datatype;	/* CHAR for every current generic tile */
	uint64_t cell_size;
	uint8_t encryption;	/* 0 none, 1 AES-256-GCM */
	uint32_t pipeline_size;
	tf_pipeline *pipeline;	/* owned; includes AES when encrypted */
	size_t header_size;	/* 34 + pipeline_size */
} tf_generic_header;

tf_status tf_generic_header_parse(tf_span bytes, tf_generic_header *h, tf_error *err);
void tf_generic_header_free(tf_generic_header *h);

/*
 * Decode the generic tile at the front of `bytes` into out (appended).
 * key may be NULL; an encrypted tile then fails with TF_E_NOKEY.
 * *used (may be NULL) receives the generic tile's total stored size.
 */
tf_status tf_generic_decode(tf_span bytes, const tf_key *key, tf_workspace *ws, tf_buf *out,
			    uint64_t *used, tf_error *err);

/*
 * Writer side (§3.3): where TileDB starts the chunks of a tile of
 * tile_size bytes.  For var data (cell_offsets != NULL) cells are never
 * split; otherwise chunks hold whole cells of env->cell_size bytes.
 * *starts is malloc'd; *n chunks (0 for an empty fixed tile).
 */
tf_status tf_tile_chunk_starts(const tf_pipeline *p, const tf_chunk_env *env, uint64_t tile_size,
			       const uint64_t *cell_offsets, size_t ncells, uint64_t **starts,
			       size_t *n, tf_error *err);

/* Encode one whole tile as TileDB stores it, appending to out. */
tf_status tf_tile_encode(const tf_pipeline *p, const tf_chunk_env *env, tf_workspace *ws,
			 tf_span tile, const uint64_t *cell_offsets, size_t ncells, tf_buf *out,
			 tf_error *err);

/* Whether a writer would put the whole tile in one chunk (§3.3 step 1). */
bool tf_tile_unchunked(const tf_pipeline *p, const tf_chunk_env *env, bool var);

#define TF_WRITER_CHUNK 65536	/* max_tile_chunk_size (constants.cc) */

#endif
