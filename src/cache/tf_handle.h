/*
 * tf_handle.h - an open decoded file: its bytes read through the cache.
 *
 * A handle is one open of the stored file(s) of a tf_file (tf_file.h), as
 * the version indexed, from which the decoded bytes are read: pinned
 * slices of cache buffers for a reply that points straight at them, or
 * copies.  Sequential readers get decode-ahead on the cache's workers; a
 * request's missing units are decoded in parallel when workers are idle.
 * Any failing unit fails its request with an error naming file, tile,
 * chunk and filter.  Tools see the units and chunks of a tile.
 *
 * Handles are reference-counted (decode-ahead jobs hold one) and
 * thread-safe.  Implemented by tf_handle.c.
 */
#ifndef TF_HANDLE_H
#define TF_HANDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/tf_cache.h"
#include "format/tf_file.h"
#include "format/tf_pipeline.h"
#include "util/tf_status.h"

/* ---- reading ------------------------------------------------------------------ */

/*
 * A handle: one open of the stored file(s), as the version indexed, from
 * which the decoded bytes are read.  Open handles each hold one, so a file
 * replaced or rewritten after the open gives that handle EIO or the old
 * bytes, never a mix, and closed files hold no descriptor.  Readers are
 * reference-counted (decode-ahead jobs hold one) and thread-safe.
 */
typedef struct tf_handle tf_handle;

/* TF_E_STALE if the stored file is no longer the version f indexed.  A
 * file is read through one cache: reading it through a second one fails
 * (TF_E_INVAL). */
tf_status tf_handle_open(tf_file *f, tf_handle **out, tf_error *err);
tf_handle *tf_handle_ref(tf_handle *r);
void tf_handle_close(tf_handle *r);
tf_file *tf_handle_file(const tf_handle *r);
/* Decode-ahead for sequential readers (on by default).  Off for a reader
 * that reads each of many files a window at a time (the sparse merge:
 * 1,200 handles of 300 fragments each queued a quarter of the budget
 * ahead, and evicted each other's units before their windows came). */
void tf_handle_set_ahead(tf_handle *r, bool on);

/*
 * Decoded bytes as slices of cache buffers, pinned: the bytes of
 * [off, off+len) (clipped at the end of the file) in order, for a reply
 * that points straight at them.  Sequential readers get decode-ahead on
 * the cache's workers; a request's missing units are decoded in parallel
 * when workers are idle.  Any failing unit fails the whole request (its
 * error names file, tile, chunk and filter) and nothing stays pinned.  A
 * file restored from the index store answers only what its own chunk
 * headers prove the entry right about, up to the request's end (a wrong
 * entry: TF_E_CORRUPT from there on).
 * s is the caller's, reused across calls (tf_slices_free at the end).
 */
typedef struct tf_slice {
	const uint8_t *p;
	size_t n;
	tf_cache_entry *e;
	bool whole;		/* the slice is its whole unit */
	bool last;		/* the slice runs to its unit's last byte */
} tf_slice;
typedef struct tf_slices {
	tf_slice *v;
	size_t n, cap;
	uint64_t bytes;		/* sum of the slices' n */
} tf_slices;
tf_status tf_handle_pin(tf_handle *r, tf_cache *c, tf_workspace *ws, uint64_t off, size_t len,
			tf_slices *s, tf_error *err);
/*
 * The same for a reader that can take fewer bytes than it asked for (a
 * short read, as a disk gives before a bad sector): a failing unit ends
 * the range instead of failing all of it.  On an error s still holds,
 * pinned, the bytes before the first failing unit (none when off is in
 * it); the caller unpins s either way.
 */
tf_status tf_handle_pin_prefix(tf_handle *r, tf_cache *c, tf_workspace *ws, uint64_t off, size_t len,
			       tf_slices *s, tf_error *err);
/* Unpin.  passed_on: the caller handed the bytes to a cache of its own
 * (the kernel's page cache): whole units then go first (tf_cache.h). */
void tf_handle_unpin(tf_cache *c, tf_slices *s, bool passed_on);
void tf_slices_free(tf_slices *s);

/* Pin, copy into dst, unpin: *got bytes (fewer only at the end of file). */
tf_status tf_handle_read(tf_handle *r, tf_cache *c, tf_workspace *ws, uint64_t off, size_t len,
			 uint8_t *dst, size_t *got, tf_error *err);
/* The same for a reader going forward through the file (a merge's
 * windows, a dense view's row-major runs): a unit whose last byte it
 * copied is released as done, recycled first (tf_cache.h), since that
 * reader never comes back to it: a 4-million-cell sparse cells.arrow took 120 MB of
 * fresh cache memory for units read once, the kernel zeroing its pages. */
tf_status tf_handle_read_scan(tf_handle *r, tf_cache *c, tf_workspace *ws, uint64_t off, size_t len,
			      uint8_t *dst, size_t *got, tf_error *err);

/* ---- units and chunks, for tools --------------------------------------------- */

/*
 * A tile is decoded in units: whole consecutive chunks, at most 64 KiB
 * decoded together unless one chunk is larger (TileDB's chunks are one
 * unit each).  Load (once) a tile's units; then their facts, or decode one.
 */
tf_status tf_handle_tile_units(tf_handle *r, size_t tile, size_t *nunits, tf_error *err);
typedef struct tf_unit_info {
	uint64_t off;		/* start in the decoded file */
	uint32_t size;		/* decoded bytes */
	uint64_t src_off;	/* stored, headers included */
	uint64_t src_len;
	uint32_t first_chunk, nchunks;
} tf_unit_info;
void tf_handle_unit_info(const tf_handle *r, size_t tile, size_t u, tf_unit_info *out);
tf_status tf_handle_decode_unit(tf_handle *r, tf_workspace *ws, size_t tile, size_t u, uint8_t *dst,
				tf_error *err);

/* Every chunk of a tile, its header read from the stored file. */
typedef struct tf_chunk_info {
	uint64_t off;		/* start in the decoded file */
	uint32_t size;		/* decoded bytes */
	uint64_t src_off;	/* stored chunk, header included */
	uint64_t src_len;
} tf_chunk_info;
typedef int (*tf_chunk_fn)(void *ctx, size_t chunk, const tf_chunk_info *ci);
tf_status tf_handle_each_chunk(tf_handle *r, tf_workspace *ws, size_t tile, tf_chunk_fn fn, void *ctx,
			       tf_error *err);

#endif
