/*
 * tf_file.h - one source file seen as its decoded bytes.
 *
 * Opening a file builds its chunk index once: a sorted table mapping each
 * chunk's decoded range to where it is stored, built by walking tile and
 * chunk headers (FORMAT-NOTES §3.1-3.2) without decoding anything.  A read
 * of any range then decodes only the chunks that hold it.  tf_file is
 * immutable after open and safe to share between threads; it is
 * reference-counted so asynchronous work can keep it alive.
 *
 * Kinds of source files:
 *   - plain tile files (data, offsets, validity) with a pipeline, datatype
 *     and cell_val_num from the caller;
 *   - generic tiles (schema, metadata...), whose header carries the pipeline;
 *   - offsets files whose tiles were folded into the data file (string RLE
 *     and dictionary, §4.7-4.8: offsets tiles with 0 chunks): given the data
 *     file, each such tile is rebuilt from the data tile as TileDB would
 *     have stored it (u64, relative to the tile).
 */
#ifndef TF_FILE_H
#define TF_FILE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "tf_keys.h"
#include "tf_pipeline.h"
#include "tf_status.h"

typedef struct tf_file tf_file;

typedef struct tf_file_spec {
	const tf_pipeline *pipeline;	/* write order, without encryption */
	tf_datatype type;		/* the field's datatype */
	uint32_t cell_val_num;		/* values per cell, or TF_CELL_VAR */
	uint32_t version;		/* format version (0 means 22) */
	const tf_key *key;		/* encrypted: AES-256-GCM is appended */
	bool generic;			/* a generic tile: its header says it all */
	/* An offsets file (pipeline = offsets pipeline, type uint64) whose
	 * tiles may be folded into this var data file: */
	const char *var_data;		/* path, or NULL */
	const tf_pipeline *var_pipeline; /* the data file's pipeline */
	tf_datatype var_type;		/* the data file's datatype */
} tf_file_spec;

/* path is opened; name (may be NULL = path) is what messages call it. */
tf_status tf_file_open(const char *path, const char *name, const tf_file_spec *spec,
		       tf_file **out, tf_error *err);
tf_file *tf_file_ref(tf_file *f);
void tf_file_unref(tf_file *f);

uint64_t tf_file_size(const tf_file *f);	/* decoded bytes */
size_t tf_file_nchunks(const tf_file *f);
/* Index of the chunk holding decoded offset off (off < size). */
size_t tf_file_chunk_at(const tf_file *f, uint64_t off);
/* Decoded range of chunk i. */
void tf_file_chunk_range(const tf_file *f, size_t i, uint64_t *off, uint32_t *len);
/* Decode chunk i into dst (its length from tf_file_chunk_range).  Errors
 * name the file, tile, chunk and filter. */
tf_status tf_file_decode_chunk(const tf_file *f, tf_workspace *ws, size_t i, uint8_t *dst,
			       tf_error *err);

typedef struct tf_file_info {
	uint64_t tiles, chunks;
	uint64_t stored_bytes;		/* bytes of the source file */
	uint64_t decoded_bytes;
	uint64_t folded_tiles;		/* offsets tiles rebuilt from data */
	tf_datatype type;
	uint32_t cell_val_num;
	uint32_t version;
	bool generic, encrypted, var_string;
} tf_file_info;
void tf_file_get_info(const tf_file *f, tf_file_info *info);
/* Canonical text of the effective pipeline (malloc'd). */
char *tf_file_pipeline_text(const tf_file *f);
const char *tf_file_name(const tf_file *f);
/* Memory held by the chunk index, for index budgets. */
size_t tf_file_index_bytes(const tf_file *f);
/* Per-chunk facts for listings: tile, chunk-in-tile, stored offset/size. */
void tf_file_chunk_where(const tf_file *f, size_t i, uint32_t *tile, uint32_t *chunk,
			 uint64_t *src_off, uint64_t *src_len);

/*
 * Reading through a cache.  A tf_read_state per open file lets sequential
 * readers be detected; their next chunks are then decoded ahead on the
 * cache's workers.  rs may be NULL (no decode-ahead).  Reads past the end
 * return fewer bytes.  Safe to call from many threads at once.
 */
typedef struct tf_cache tf_cache;
typedef struct tf_read_state {
	_Atomic uint64_t next;		/* where a sequential reader goes next */
	_Atomic uint64_t ahead;		/* decode-ahead already queued up to here */
} tf_read_state;

tf_status tf_file_read(tf_file *f, tf_cache *c, tf_workspace *ws, tf_read_state *rs, uint64_t off,
		       size_t len, uint8_t *dst, size_t *got, tf_error *err);

/* Whether the source file on disk is still the one this index describes. */
bool tf_file_is_current(const tf_file *f, const struct stat *now);

/* Does the var-string layout (§4.7-4.8) apply to a field by TileDB's rule? */
bool tf_var_string_applies(const tf_pipeline *p, tf_datatype type, uint32_t cell_val_num,
			   uint32_t version);

#endif
