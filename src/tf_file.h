/*
 * tf_file.h - one source file seen as its decoded bytes.
 *
 * A file is a sequence of tiles, a tile a sequence of chunks (FORMAT-NOTES
 * §3.1-3.2).  tf_file keeps a two-level index: every tile's decoded range,
 * and each tile's chunk list, which maps the tile's decoded bytes to where
 * its chunks are stored.  Where the caller knows the tiles (a fragment's
 * metadata gives every tile's offset and decoded size, §8.6), opening reads
 * nothing but the caller's list and a tile's chunk headers are read the
 * first time a read touches it.  Otherwise opening walks every tile and
 * chunk header once; nothing is decoded either way.  A read of any range
 * decodes only the chunks that hold it.
 *
 * tf_file is immutable after open apart from lazily loaded chunk lists
 * (published atomically), safe to share between threads, and
 * reference-counted so asynchronous work can keep it alive.
 *
 * Kinds of source files:
 *   - tile files (data, offsets, validity) with the field's pipeline,
 *     datatype and cell_val_num from the caller;
 *   - generic tiles (schema, metadata...): a sequence of self-describing
 *     generic tiles from offset 0, optionally followed by bytes shown as they
 *     are (the footer of a fragment metadata file);
 *   - offsets files whose tiles were folded into the var data (string RLE
 *     and dictionary, §4.7-4.8: offsets tiles with 0 chunks): given the data
 *     file, such a tile is rebuilt from the data tile as TileDB would have
 *     stored it (u64, relative to the tile).
 */
#ifndef TF_FILE_H
#define TF_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "tf_keys.h"
#include "tf_pipeline.h"
#include "tf_status.h"

typedef struct tf_file tf_file;

/* Where a tile is stored and how many bytes it decodes to. */
typedef struct tf_tile_layout {
	uint64_t start;		/* offset of the tile (its u64 chunk count) */
	uint64_t stored;	/* stored bytes, chunks included */
	uint64_t size;		/* decoded bytes */
} tf_tile_layout;

typedef struct tf_file_spec {
	const tf_pipeline *pipeline;	/* write order, without encryption */
	tf_datatype type;		/* the field's datatype */
	uint32_t cell_val_num;		/* values per cell, or TF_CELL_VAR */
	uint32_t version;		/* format version (0 means 22) */
	const tf_key *key;		/* encrypted: AES-256-GCM is appended */
	bool generic;			/* generic tiles: their headers say it all */
	uint64_t generic_end;		/* generic: tiles end here, raw bytes follow
					 * (0: the whole file is generic tiles) */
	/* Tiles known from fragment metadata (NULL: walk the file). */
	const tf_tile_layout *tiles;
	size_t ntiles;
	/* An offsets file whose tiles may be folded into this var data file: */
	const char *var_data;		/* path, or NULL */
	const tf_pipeline *var_pipeline; /* the data file's pipeline */
	tf_datatype var_type;		/* the data file's datatype */
	const tf_tile_layout *var_tiles; /* the data file's tiles, if known */
	size_t nvar_tiles;
	bool var_string;		/* force the var-string layout (§10 #21) */
} tf_file_spec;

/* path is opened; name (may be NULL = path) is what messages call it. */
tf_status tf_file_open(const char *path, const char *name, const tf_file_spec *spec,
		       tf_file **out, tf_error *err);
tf_file *tf_file_ref(tf_file *f);
void tf_file_unref(tf_file *f);

uint64_t tf_file_size(const tf_file *f);	/* decoded bytes */
const char *tf_file_name(const tf_file *f);

/* ---- tile by tile ---------------------------------------------------------- */

size_t tf_file_ntiles(const tf_file *f);
void tf_file_tile_range(const tf_file *f, size_t tile, uint64_t *off, uint64_t *size);
/* Load (once) the chunk list of a tile; *nchunks receives its length. */
tf_status tf_file_tile_chunks(const tf_file *f, size_t tile, size_t *nchunks, tf_error *err);

typedef struct tf_chunk_info {
	uint64_t off;		/* start in the decoded file */
	uint32_t size;		/* decoded bytes */
	uint64_t src_off;	/* stored chunk (or data tile it is rebuilt from) */
	uint64_t src_len;
} tf_chunk_info;

/* Facts of chunk c of a loaded tile. */
void tf_file_chunk_info(const tf_file *f, size_t tile, size_t c, tf_chunk_info *out);
/* Decode chunk c of a loaded tile into dst[size].  Errors name the file,
 * tile, chunk and filter. */
tf_status tf_file_decode(const tf_file *f, tf_workspace *ws, size_t tile, size_t c, uint8_t *dst,
			 tf_error *err);

/* ---- facts ----------------------------------------------------------------- */

typedef struct tf_file_info {
	uint64_t tiles;
	uint64_t chunks;		/* of the tiles loaded so far */
	uint64_t stored_bytes;		/* bytes of the source file */
	uint64_t decoded_bytes;
	uint64_t folded_tiles;		/* offsets tiles rebuilt from data */
	tf_datatype type;
	uint32_t cell_val_num;
	uint32_t version;
	bool generic, encrypted, var_string, from_layout;
} tf_file_info;
void tf_file_get_info(const tf_file *f, tf_file_info *info);
/* Canonical text of the effective pipeline (malloc'd). */
char *tf_file_pipeline_text(const tf_file *f);
/* The effective pipeline as netCDF's _Filter and _Codecs attributes show
 * it (tf_pipeline_filter_attr, tf_pipeline_codecs_json); malloc'd. */
char *tf_file_filter_attr(const tf_file *f);
char *tf_file_codecs_json(const tf_file *f);
/* Memory held by the index, for index budgets. */
size_t tf_file_index_bytes(const tf_file *f);
/* Whether the source file on disk is still the one this index describes. */
bool tf_file_is_current(const tf_file *f, const struct stat *now);
/* Open a stored file for reading: O_NOFOLLOW and O_NONBLOCK until fstat
 * (into *st) says it is a regular file, so a FIFO, device or symlink
 * swapped in is refused at once instead of blocking a thread.  Returns the
 * fd, or -1 with errno set (EINVAL: not a regular file). */
int tf_open_regular(const char *path, struct stat *st);
/* Whether two stats describe the same version of a file (device, inode,
 * size, modification time). */
bool tf_same_source(const struct stat *a, const struct stat *b);

/*
 * Reading through a cache.  A tf_read_state per open file lets sequential
 * readers be detected; their next chunks are then decoded ahead on the
 * cache's workers.  With rs, a chunk that one read takes whole becomes the
 * first to be evicted: the caller (the kernel's page cache) keeps it.
 * rs may be NULL (no decode-ahead, plain LRU).  Reads past the end return
 * fewer bytes.  Safe to call from many threads at once.
 */
typedef struct tf_cache tf_cache;
typedef struct tf_read_state {
	_Atomic uint64_t next;		/* where a sequential reader goes next */
	_Atomic uint64_t ahead;		/* decode-ahead already queued up to here */
} tf_read_state;

tf_status tf_file_read(tf_file *f, tf_cache *c, tf_workspace *ws, tf_read_state *rs, uint64_t off,
		       size_t len, uint8_t *dst, size_t *got, tf_error *err);

/* Does the var-string layout (§4.7-4.8) apply to a field by TileDB's rule? */
bool tf_var_string_applies(const tf_pipeline *p, tf_datatype type, uint32_t cell_val_num,
			   uint32_t version);

#endif
