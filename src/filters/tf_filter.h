/*
 * tf_filter.h - the interface behind which every filter lives.
 *
 * One filter = one file in src/filters/ exporting one tf_filter_class.  A
 * class knows its own bytes and nothing of files, caches or configs.
 *
 * Decoding (FORMAT.md §3.4).  A chunk carries a metadata stream and a
 * data stream.  The pipeline calls each filter's decode() in reverse write
 * order with a tf_stream:
 *   - md   : metadata still unread; this filter's header is at its front
 *   - data : this filter's input (the output of the filter after it)
 * and the filter leaves in md/data what the filter before it must see:
 *   - metadata-passing filters (shuffles, BWR, positive delta, XOR, scale
 *     float, checksums) read their header from the front of md and set md to
 *     the bytes after it;
 *   - metadata-consuming filters (the compression family and AES) decode
 *     their metadata parts into *md_out and set md to that, and decode their
 *     data parts into *data_out.
 * A filter that produces new data writes it into *data_out (starting at
 * len 0) and points data at it.  data_out may wrap fixed caller memory of
 * exactly the chunk's decoded size: tf_buf_reserve() then refuses to grow,
 * which is how an over-long decode is caught.  Every length and count read
 * from md or data is untrusted and must be checked before use.
 *
 * Encoding works on lists of parts (tf_parts): a filter turns (md parts,
 * data parts) into new (md parts, data parts) exactly as TileDB's forward
 * run does, so that encode output is byte-for-byte what TileDB would store.
 */
#ifndef TF_FILTER_H
#define TF_FILTER_H

#include <stdbool.h>
#include <stdint.h>

#include "util/tf_bytes.h"
#include "util/tf_datatype.h"
#include "util/tf_status.h"

/* Filter type ids as serialized (FORMAT.md §1.1). */
enum {
	TF_F_NONE = 0, TF_F_GZIP = 1, TF_F_ZSTD = 2, TF_F_LZ4 = 3, TF_F_RLE = 4,
	TF_F_BZIP2 = 5, TF_F_DOUBLE_DELTA = 6, TF_F_BIT_WIDTH_REDUCTION = 7,
	TF_F_BITSHUFFLE = 8, TF_F_BYTESHUFFLE = 9, TF_F_POSITIVE_DELTA = 10,
	TF_F_AES_256_GCM = 11, TF_F_CHECKSUM_MD5 = 12, TF_F_CHECKSUM_SHA256 = 13,
	TF_F_DICTIONARY = 14, TF_F_SCALE_FLOAT = 15, TF_F_XOR = 16,
	TF_F_WEBP = 18, TF_F_DELTA = 19,
	TF_F_ID_LIMIT = 20,	/* built-in ids are below this */
	TF_F_NO_ID = 255	/* a class with no TileDB id (an HDF5 plugin stage) */
};

/* Most parameters an HDF5 plugin stage (cd_values) or a plugin's
 * TF_OPTS_CD_VALUES options may have. */
#define TF_MAX_CD_VALUES 16

/* Every option any filter has; each class uses the ones of its layout. */
typedef struct tf_filter_opts {
	int32_t level;		/* compressors; -1 = library default */
	tf_datatype reinterpret; /* delta, double delta; TF_DT_ANY = none */
	uint32_t window;	/* bit width reduction, positive delta (bytes) */
	double scale, offset;	/* scale float */
	uint64_t byte_width;	/* scale float: 1, 2, 4 or 8 */
	float quality;		/* webp */
	uint8_t webp_format, lossless;
	uint16_t y_extent, x_extent;
	uint32_t ncd;		/* TF_OPTS_CD_VALUES: parameter count ... */
	uint32_t cd[TF_MAX_CD_VALUES]; /* ... and the values (HDF5 cd_values) */
} tf_filter_opts;

/* How a class's options are serialized and spelled (FORMAT.md §2.3). */
typedef enum tf_opts_layout {
	TF_OPTS_NONE,		/* no option bytes */
	TF_OPTS_COMPRESSOR,	/* u8 compressor, i32 level */
	TF_OPTS_REINTERPRET,	/* u8 compressor, i32 level, [u8 reinterpret] */
	TF_OPTS_WINDOW,		/* u32 max window */
	TF_OPTS_SCALE_FLOAT,	/* f64 scale, f64 offset, u64 byte width */
	TF_OPTS_WEBP,		/* f32, u8, u8, u16, u16, 2 pad bytes */
	TF_OPTS_CD_VALUES,	/* u32 parameters, HDF5 style (plugins only) */
} tf_opts_layout;

typedef struct tf_key tf_key;		/* tf_keys.h */
typedef struct tf_scratch tf_scratch;	/* per-thread codec contexts, below */

/* What one filter needs to know besides its options and its bytes. */
typedef struct tf_stage {
	tf_datatype type;	/* type_in[i]: the datatype this filter sees (§2.4) */
	tf_datatype tile_type;	/* type_in[0]: the tile's base datatype */
	uint32_t cell_size;	/* tile cell size: fixed-path RLE value width (§4.6) */
	uint32_t version;	/* format version: BWR/PD on date/time (§4.11) */
	bool var_string;	/* RLE/DICTIONARY take the var-string path (§4.7) */
	const tf_key *key;	/* AES-256-GCM key, or NULL */
	tf_buf *offsets;	/* var-string decode: rebuilt u64 cell offsets are
				 * appended here (relative to the chunk); may be NULL */
	const uint64_t *cell_offsets; /* var-string encode: offsets of the cells */
	size_t ncells;		/* in this chunk (relative to the chunk start) */
	tf_scratch *scratch;	/* reusable codec contexts of this thread */
	size_t limit;		/* ceiling for any buffer this stage allocates */
	const struct tf_filter_class *cls; /* the class being run (plugin adapters
				 * find their plugin through cls->impl) */
} tf_stage;

typedef struct tf_stream {
	tf_span md;
	tf_span data;
	tf_buf *md_out;
	tf_buf *data_out;
} tf_stream;

/* An ordered list of owned buffers, for encoding. */
typedef struct tf_parts {
	tf_buf *v;
	size_t n, cap;
} tf_parts;

typedef struct tf_filter_class {
	uint8_t id;
	const char *name;	/* canonical spelling in specs */
	const char *alias;	/* also accepted, or NULL */
	tf_opts_layout layout;
	uint8_t compressor;	/* compressor-enum byte (§1.2) for the compression family */
	uint32_t reinterpret_since; /* first format version whose options carry reinterpret */
	bool consumes_md;	/* compression family and AES: md parts are re-encoded */
	/* Output datatype for input t (§2.4); NULL means unchanged. */
	tf_datatype (*out_type)(const tf_filter_opts *o, tf_datatype t);
	/* Reject options that can never work (NULL: all accepted). */
	tf_status (*check)(const tf_filter_opts *o, tf_error *err);
	tf_status (*decode)(const tf_filter_opts *o, const tf_stage *st, tf_stream *s, tf_error *err);
	tf_status (*encode)(const tf_filter_opts *o, const tf_stage *st, tf_parts *md,
			    tf_parts *data, tf_error *err);
	/* Plugins (filters/plugin.h): nonzero for an HDF5 filter stage, its id
	 * in the HDF5 registry (id is then TF_F_NO_ID); the adapter's data. */
	uint32_t hdf5_id;
	const void *impl;
} tf_filter_class;

/* The registry of built-in classes: by serialized id or by
 * (case-insensitive) name.  Plugins live in a tf_plugins object
 * (filters/plugin.h), which pipeline parsing consults after this. */
const tf_filter_class *tf_filter_by_id(unsigned id);
const tf_filter_class *tf_filter_by_name(const char *name, size_t len);
/* Defaults TileDB uses for options not given (§2.3). */
void tf_filter_opts_default(const tf_filter_class *c, tf_filter_opts *o);

/* ---- helpers shared by filter implementations --------------------------- */

/* Start *out (len 0) with room for n bytes, limited by st->limit when growable. */
tf_status tf_stage_output(const tf_stage *st, tf_buf *out, size_t n, tf_error *err);

void tf_parts_init(tf_parts *p);
void tf_parts_free(tf_parts *p);
/* Append a new empty part (limit: unbounded) and return it. */
tf_status tf_parts_add(tf_parts *p, tf_buf **part, tf_error *err);
/* Append a copy of bytes as a new part. */
tf_status tf_parts_add_copy(tf_parts *p, const void *src, size_t n, tf_error *err);
/* Move every part of src to the end of dst; src ends empty. */
tf_status tf_parts_move(tf_parts *dst, tf_parts *src, tf_error *err);
size_t tf_parts_total(const tf_parts *p);
/* Prepend one part (for headers that go in front of earlier metadata). */
tf_status tf_parts_prepend(tf_parts *p, tf_buf *part, tf_error *err);

/* Per-thread reusable contexts (e.g. a ZSTD_DCtx), created on first use. */
enum { TF_SLOT_ZSTD_D, TF_SLOT_ZSTD_C, TF_SLOT_CIPHER, TF_SLOT_COUNT };
void *tf_scratch_get(tf_scratch *s, unsigned slot, void *(*create)(void), void (*destroy)(void *));
tf_scratch *tf_scratch_new(void);
void tf_scratch_free(tf_scratch *s);

/* Every class, one per file in src/filters/. */
extern const tf_filter_class tf_filter_none, tf_filter_gzip, tf_filter_zstd,
	tf_filter_lz4, tf_filter_rle, tf_filter_bzip2, tf_filter_double_delta,
	tf_filter_bit_width_reduction, tf_filter_bitshuffle, tf_filter_byteshuffle,
	tf_filter_positive_delta, tf_filter_aes_256_gcm, tf_filter_checksum_md5,
	tf_filter_checksum_sha256, tf_filter_dictionary, tf_filter_scale_float,
	tf_filter_xor, tf_filter_webp, tf_filter_delta;

#endif
