/*
 * tf_file.h - one source file seen as its decoded bytes.
 *
 * A file is a sequence of tiles, a tile a sequence of chunks (FORMAT.md
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
#include "util/tf_keys.h"
#include "format/tf_pipeline.h"
#include "sources/tf_source.h"
#include "util/tf_status.h"

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
	const char *var_data;		/* its path in the same source, or NULL */
	const tf_pipeline *var_pipeline; /* the data file's pipeline */
	tf_datatype var_type;		/* the data file's datatype */
	const tf_tile_layout *var_tiles; /* the data file's tiles, if known */
	size_t nvar_tiles;
	bool var_string;		/* force the var-string layout (§10 #21) */
} tf_file_spec;

/*
 * Index file rel of src (which must outlive the file); name (NULL: rel) is
 * what messages call it.  With expect, the file must be that version
 * (TF_E_STALE otherwise); with expect and a tile layout, opening reads
 * nothing.  Every later read checks it still reads that version.
 */
tf_status tf_file_open(tf_source *src, const char *rel, const char *name, const tf_version *expect,
		       const tf_file_spec *spec, tf_file **out, tf_error *err);

/*
 * How a walk is done (tf_file_open_how).  With a store, a file that must be
 * walked (a tile file without a layout, neither generic nor with folded
 * offsets) is first looked up there: an entry of this very version
 * (tf_index.h), validated against the file's size, replaces the walk, and
 * the file is not even opened when expect is given.  A walk's result is
 * stored.  Every walk is counted in the store.  With metadata, only the
 * size is wanted for now: the walk reads chunk headers alone where the
 * source says small reads are cheap (tf_object_advise), else it reads the
 * file through a window, as a walk before reading does (whose bytes the
 * page cache then holds for the reads that follow).
 */
struct tf_index;
typedef struct tf_file_how {
	struct tf_index *store;		/* or NULL; outlives the files opened with it */
	bool metadata;
} tf_file_how;
tf_status tf_file_open_how(tf_source *src, const char *rel, const char *name, const tf_version *expect,
			   const tf_file_spec *spec, const tf_file_how *how, tf_file **out, tf_error *err);
tf_file *tf_file_ref(tf_file *f);
void tf_file_unref(tf_file *f);

uint64_t tf_file_size(const tf_file *f);	/* decoded bytes */
const char *tf_file_name(const tf_file *f);

/* ---- tiles -------------------------------------------------------------------- */

size_t tf_file_ntiles(const tf_file *f);
void tf_file_tile_range(const tf_file *f, size_t tile, uint64_t *off, uint64_t *size);

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
	bool from_store;		/* the index came from the store */
	uint64_t walked_bytes;		/* bytes read walking it (0: no walk) */
} tf_file_info;
void tf_file_get_info(const tf_file *f, tf_file_info *info);
/* Canonical text of the effective pipeline (malloc'd). */
char *tf_file_pipeline_text(const tf_file *f);
/* The effective pipeline as netCDF's _Filter and _Codecs attributes show
 * it (tf_pipeline_filter_attr, tf_pipeline_codecs_json); malloc'd. */
char *tf_file_filter_attr(const tf_file *f);
char *tf_file_codecs_json(const tf_file *f);
/* The persisted form of f's index (tf_index.h's payload: what a walk
 * found, or the entry f was restored from) into out (reset first), to be
 * published; TF_E_INVAL for a file whose index is not persisted (not a
 * walked tile file). */
struct tf_buf;
tf_status tf_file_export_index(const tf_file *f, struct tf_buf *out, tf_error *err);
/* Memory held by the index, for index budgets. */
size_t tf_file_index_bytes(const tf_file *f);
/* Whether the stored file is still the version this index describes. */
bool tf_file_is_current(const tf_file *f, const tf_version *now);
const tf_version *tf_file_version(const tf_file *f);
/* The other stored file the decoded bytes come from (folded offsets: the
 * data file) and its version when indexed (handles read that version or
 * fail TF_E_STALE); NULL when there is none. */
const char *tf_file_dep(const tf_file *f, const tf_version **v);

/* Does the var-string layout (§4.7-4.8) apply to a field by TileDB's rule? */
bool tf_var_string_applies(const tf_pipeline *p, tf_datatype type, uint32_t cell_val_num,
			   uint32_t version);

#endif
