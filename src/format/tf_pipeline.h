/*
 * tf_pipeline.h - a filter pipeline: parse (serialized or text), print,
 * and run it over one chunk in either direction.
 *
 * Serialized form (FORMAT.md §2.1-2.3): u32 max_chunk_size, u32 count,
 * then per filter u8 type, u32 options length, options.
 *
 * The text form (parse, print) is tf_spec.h's, included here; the netCDF
 * attribute forms are tf_pipeline_attr.h's.
 */
#ifndef TF_PIPELINE_H
#define TF_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "util/tf_bytes.h"
#include "util/tf_datatype.h"
#include "filters/tf_filter.h"
#include "format/tf_spec.h"
#include "util/tf_status.h"

typedef struct tf_pipeline tf_pipeline;

#define TF_MAX_FILTERS 32		/* far above any real pipeline */
#define TF_DEFAULT_MAX_CHUNK 65536	/* serialized default; readers ignore it */

tf_pipeline *tf_pipeline_new(void);
tf_pipeline *tf_pipeline_dup(const tf_pipeline *p);
void tf_pipeline_free(tf_pipeline *p);

/* Read the serialized form.  Whether DELTA/DOUBLE_DELTA options carry a
 * reinterpret byte (format >= 19/20) is read from their options length. */
tf_status tf_pipeline_deserialize(tf_reader *r, tf_pipeline **out, tf_error *err);
tf_status tf_pipeline_serialize(const tf_pipeline *p, tf_buf *out, tf_error *err);
/* Append a filter with default options (e.g. AES for an encrypted field). */
tf_status tf_pipeline_append(tf_pipeline *p, unsigned id, tf_error *err);
size_t tf_pipeline_count(const tf_pipeline *p);
const tf_filter_class *tf_pipeline_class(const tf_pipeline *p, size_t i);
bool tf_pipeline_has(const tf_pipeline *p, unsigned id);
uint32_t tf_pipeline_max_chunk_size(const tf_pipeline *p);
void tf_pipeline_set_max_chunk_size(tf_pipeline *p, uint32_t v);
/* Datatype the filter at index i sees, for a tile of base type t (§2.4). */
tf_datatype tf_pipeline_type_at(const tf_pipeline *p, size_t i, tf_datatype t);

/* What decoding a chunk needs besides the pipeline and the bytes. */
typedef struct tf_chunk_env {
	tf_datatype type;	/* the tile's base datatype */
	uint32_t cell_size;	/* the tile's cell size in bytes (§2.4 table) */
	uint32_t version;	/* format version of the fragment */
	bool var_string;	/* filter 0 is RLE/DICTIONARY on the var-string path */
	const tf_key *key;	/* for an AES-256-GCM filter; NULL if none */
} tf_chunk_env;

/* Per-thread scratch: intermediate buffers and codec contexts, reused. */
typedef struct tf_workspace tf_workspace;
tf_workspace *tf_workspace_new(void);
void tf_workspace_free(tf_workspace *ws);
/* Two more scratch buffers for the caller's own use (reading stored bytes,
 * decoding a whole tile); the pipeline never touches them. */
enum { TF_WS_IO, TF_WS_AUX };
tf_buf *tf_workspace_buf(tf_workspace *ws, unsigned which);

/* Largest orig_len a chunk may claim, so a lying header cannot make us
 * allocate without bound.  TileDB's own limit is 4 GiB (u32). */
#define TF_MAX_CHUNK_BYTES ((size_t)1 << 30)

/*
 * Decode one chunk (its metadata and data, as stored) into exactly orig_len
 * bytes at dst.  On the var-string path the cell offsets of the chunk
 * (relative to its start) are appended to *offsets as u64 if offsets != NULL.
 * Errors name the filter ("filter 2 (zstd): ...").
 */
tf_status tf_pipeline_decode(const tf_pipeline *p, const tf_chunk_env *env, tf_workspace *ws,
			     tf_span md, tf_span data, uint32_t orig_len, uint8_t *dst,
			     tf_buf *offsets, tf_error *err);

/*
 * Encode one chunk and append it, as stored (u32 orig_len, u32 filtered_len,
 * u32 metadata_len, metadata, data), to out.  cell_offsets/ncells describe
 * the cells of a var-string chunk and are ignored otherwise.
 */
tf_status tf_pipeline_encode(const tf_pipeline *p, const tf_chunk_env *env, tf_workspace *ws,
			     tf_span in, const uint64_t *cell_offsets, size_t ncells,
			     tf_buf *out, tf_error *err);

#endif
