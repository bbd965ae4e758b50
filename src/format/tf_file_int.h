/*
 * tf_file_int.h - the index of a stored file as its parts share it:
 * tf_file.c (walking, unit tables, decoding), tf_file_open.c (opening),
 * tf_file_index.c (the store's entries, proving them) and
 * cache/tf_handle.c (reading through the cache).  Nothing else includes
 * this file.
 */
#ifndef TF_FILE_INT_H
#define TF_FILE_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "format/tf_file.h"
#include "format/tf_tile.h"

typedef enum { TILE_CHUNKED, TILE_FOLDED, TILE_RAW } tile_kind;

/*
 * A decode unit: whole consecutive chunks of one tile, together at most
 * UNIT_BYTES decoded unless one chunk alone is larger, at most UNIT_CHUNKS
 * chunks and UNIT_STORED stored bytes unless one chunk alone is larger.
 * The index and the cache hold units, not chunks: TileDB's 64 KiB chunks
 * are one unit each, and a tile of ten million 1-byte chunks is ~150 units
 * (bounded index memory and cache entries), decoded a run at a time.
 */
#define UNIT_BYTES ((uint64_t)64 << 10)
#define UNIT_CHUNKS 65536u
#define UNIT_STORED ((uint64_t)4 << 20)

/* A unit's key in the cache, under its file's owner id. */
#define UNIT_KEY(tile, u) ((uint64_t)(tile) << 32 | (uint64_t)(u))

typedef struct unit_ent {
	uint64_t off;		/* start in the decoded file */
	uint64_t src_off;	/* its first chunk, header included */
	uint64_t src_len;	/* stored bytes of all its chunks */
	uint32_t size;		/* decoded bytes */
	uint32_t nchunks;
	uint32_t first;		/* index in its tile of its first chunk */
} unit_ent;

typedef struct unit_table {
	size_t n;
	uint64_t nchunks;	/* chunks of the tile */
	/* A tile restored from the store: per unit, set once its chunk
	 * headers agreed with the entry (when decoded, or walked); NULL for
	 * tables made from headers. */
	atomic_uchar *agreed;
	unit_ent u[];
} unit_table;

typedef struct tile_ent {
	uint64_t start, stored;	/* where the tile is stored */
	uint64_t off, size;	/* its decoded range */
	tile_kind kind;
	unsigned dec;		/* which decoder: generic files have one per tile */
	uint64_t data_start, data_stored; /* folded: the data tile it comes from */
	_Atomic(unit_table *) units;	/* NULL until first needed */
} tile_ent;

/* A tile restored from the store: where its units are in the payload. */
typedef struct saved_tile {
	size_t at, len;		/* its unit list in tf_file.saved */
	uint64_t nchunks, nunits;
} saved_tile;

/* A pipeline and what it needs to run. */
typedef struct decoder {
	tf_pipeline *pipeline;	/* effective: AES appended when keyed */
	tf_chunk_env env;
} decoder;

struct tf_file {
	atomic_int refs;
	char *name, *rel;
	tf_source *src;		/* borrowed: outlives every file */
	tf_version ver;		/* the version indexed */
	char *var_rel;		/* folded offsets: the data file, or NULL */
	tf_version var_ver;	/* ... the version of it indexed (what handles read) */
	decoder *dec;
	size_t ndec;
	decoder var;		/* folded offsets: the data file's decoder */
	tile_ent *tiles;
	size_t ntiles, tcap;
	uint64_t size;
	uint64_t folded;
	bool generic, from_layout;
	bool walk_headers;	/* walks read headers alone (tf_file_how.metadata) */
	bool walked, from_store;
	bool from_published;	/* from_store, but the entry was the bucket's (tf_index.h) */
	uint64_t walked_bytes;
	uint8_t *saved;		/* from the store: its payload, or NULL */
	size_t saved_len;
	saved_tile *saved_tiles;	/* per tile, with saved */
	struct tf_index *store;	/* where saved came from (outlives f) */
	atomic_bool saved_bad;	/* its entry was found wrong and rejected */
	/* With saved: decoded bytes [0, proved) are where the entry says,
	 * every unit and tile before proved's end having agreed with its
	 * headers; proof_tile and proof_unit are the next to prove, under
	 * proof_lock (tf_file_index.c). */
	_Atomic uint64_t proved;
	pthread_mutex_t proof_lock;
	size_t proof_tile, proof_unit;
	uint32_t cell_val_num;
	_Atomic(struct tf_cache *) cache; /* the one cache it is read through */
	_Atomic uint64_t owner;	/* our id in that cache */
};

/* ---- tf_file.c: the parts ---------------------------------------------------------- */

/* A walk of chunk headers through a window (tf_file.c says why). */
typedef struct walker {
	tf_object *obj;
	uint64_t end;		/* the walk stays before this offset */
	uint64_t at;		/* file offset of buf[0] */
	size_t len;
	bool headers;		/* a header walk (until headers prove dense) */
	unsigned dense;		/* header reads in a row close to the last */
	uint64_t read;		/* bytes read */
	size_t cap;		/* of buf: the window, or less for a shorter walk */
	uint8_t buf[];
} walker;
/* A walker of obj up to end (free() it); headers: read headers alone. */
walker *tf_file_walker_new(tf_object *obj, uint64_t end, bool headers);
/* The chunks of the tile whose count is at pos, decoded from off: their
 * units into *out, the tile's stored and decoded bytes. */
tf_status tf_file_walk_chunks(walker *w, uint64_t pos, uint64_t off, unit_table **out, uint64_t *stored,
			      uint64_t *size, tf_error *err);
/* Decode ut's units of no decoded byte once, to prove them empty. */
tf_status tf_file_check_empty(const tf_file *f, const tile_ent *te, tf_object *obj, const unit_table *ut,
			      tf_error *err);
/* Tile te's unit list from its chunk headers in obj, checked against te. */
tf_status tf_file_build_table(const tf_file *f, const tile_ent *te, tf_object *obj, unit_table **out,
			      tf_error *err);
/* Append te to f's tiles, at the end of its decoded bytes. */
tf_status tf_file_add_tile(tf_file *f, const tile_ent *te, tf_error *err);
/* Walk every tile in [start, end) of obj: tiles with their units loaded. */
tf_status tf_file_walk(tf_file *f, tf_object *obj, uint64_t start, uint64_t end, tf_error *err);
/* Decode data tile (start, stored) of var (folded offsets). */
tf_status tf_file_decode_data_tile(const tf_file *f, tf_object *var, tf_workspace *ws, uint64_t start,
				   uint64_t stored, tf_buf *offsets, tf_error *err);
/* Check units [u0, u1) of restored tile t against their chunk headers in
 * obj (read, not decoded), marking them agreed; TF_E_CORRUPT: they differ. */
tf_status tf_file_check_units(const tf_file *f, tf_object *obj, size_t t, size_t u0, size_t u1, tf_error *err);
/* Decode unit u of tile te from its stored bytes (all its chunks, as
 * stored) into dst[u->size]; errors name the chunk. */
tf_status tf_file_decode_unit(const tf_file *f, const tile_ent *te, const unit_ent *u, tf_span stored,
			      tf_workspace *ws, uint8_t *dst, tf_error *err);
/* Rebuild a folded offsets tile (its one unit) from the data tile in var. */
tf_status tf_file_decode_folded(const tf_file *f, tf_object *var, tf_workspace *ws, const unit_ent *u,
				uint8_t *dst, tf_error *err);
void tf_file_free(tf_file *f);
/* The entry f was restored from is wrong (at tile t): warned and removed
 * from the store, once; nothing beyond what is proved is read from then. */
void tf_file_reject_saved(const tf_file *f, size_t t, const char *why);

/* ---- tf_file_index.c: the store's entries --------------------------------------------- */

/* The persisted form of a walked file's tiles and units.  Restore fills
 * f's tiles from store (TF_E_NOTFOUND: walk it); persist stores them. */
struct tf_index;
tf_status tf_file_restore(tf_file *f, struct tf_index *store, const tf_version *expect, tf_error *err);
void tf_file_persist(const tf_file *f, struct tf_index *store);
/* The units of restored tile t, made from the payload and checked
 * (TF_E_CORRUPT: the entry is wrong). */
tf_status tf_file_restore_tile(const tf_file *f, size_t t, unit_table **out, tf_error *err);
/* The unit list of tile t, the first time from the entry f was restored
 * from, else read from obj (its chunk headers). */
tf_status tf_file_load_tile(const tf_file *f, tf_object *obj, size_t t, const unit_table **out,
			    tf_error *err);
/*
 * A restored file's bytes [off, end) were decoded: make sure they are
 * where the entry put them, i.e. that every unit and tile up to end has
 * agreed with its chunk headers (tf_file_index.c says how).  Units near
 * off are awaited or decoded through cache c (owner f->owner); farther
 * ones have their headers read from obj.  TF_E_CORRUPT once the entry is
 * found wrong.
 */
struct tf_cache;
tf_status tf_file_prove(const tf_file *f, tf_object *obj, struct tf_cache *c, tf_workspace *ws, uint64_t off,
			uint64_t end, tf_error *err);

#endif
