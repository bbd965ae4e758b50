/*
 * disk_cache.h - stored bytes of objects kept on a local disk across mounts.
 *
 * An object is named by a key string the caller builds (for S3: endpoint,
 * bucket, object key, ETag and size: a new version is a new key) and is
 * cached in blocks of TF_DISK_CACHE_BLOCK bytes at multiples of it (the
 * last one short at the object's end).  Every block is a file
 *
 *     DIR/v1/HH/<sha256 of the key, hex>.<block index>
 *
 * (HH: the hash's first byte, 256 directories, so none holds millions of
 * files; mountpoint-s3's disk data cache splits its hashed names the same
 * way) holding a header (magic, version, key length, block index, data
 * length, the data's crc32, the header's crc32), the whole key, then the
 * data.  A block is written to a temporary file of a unique name beside it
 * and renamed into place: a kill -9 or a crash leaves the old state or a
 * whole file, and a reader never sees half a block.  Every read checks
 * magic, version, key (all of it: a hash collision never serves another
 * object's bytes), index, length and checksum; any mismatch is a miss and
 * the file is deleted.  Nothing read from the directory is trusted.
 *
 * Bounds.  max_bytes bounds the blocks' total size and min_free is a floor
 * of free space on the directory's filesystem: below it nothing is
 * written and blocks are evicted until it is restored or none is left.
 * Eviction is least recently used (a hit stamps the file's mtime when it
 * is over a minute old, so later mounts learn recency too), approximated
 * as redis does: the oldest of a few random known blocks goes.  It runs
 * where a put crosses a bound, and in the background thread.
 *
 * Nothing is scanned at open (a large cache made mountpoint-s3's mount
 * time out, its #1251): a background thread, started by the first get or
 * put (so after a daemon's fork), walks the directory once to learn the
 * blocks earlier mounts left, reclaims temporaries older than an hour (a
 * writer killed mid-block), and evicts if the bounds are passed; it walks
 * again every RESCAN interval, to learn what other mounts wrote.  Until
 * the first walk ends, usage counts only the blocks seen so far.
 *
 * Sharing.  Two processes (or two caches in one) may use one directory:
 * temporaries have unique names, rename is atomic, readers verify
 * everything, and a block evicted while another process reads it stays
 * readable through its open descriptor.
 *
 * The directory is created 0700 if missing (its parent must exist) and
 * refused if another user owns it or group or others have any access.
 * A failing disk never fails a read: get is a miss, put does nothing, and
 * the stats count the errors.  Thread-safe.  A process forked after the
 * first get or put (which starts the thread) finds the cache off: only
 * its parent uses it (a daemon opens its source, then forks, then reads).
 */
#ifndef TF_DISK_CACHE_H
#define TF_DISK_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/tf_status.h"

#define TF_DISK_CACHE_BLOCK ((size_t)1 << 20)
#define TF_DISK_CACHE_KEY_MAX 4096

typedef struct tf_disk_cache tf_disk_cache;

typedef struct tf_disk_cache_stats {
	uint64_t hits, misses;		/* blocks asked for */
	uint64_t bad;			/* files that failed a check (and were deleted) */
	uint64_t read_bytes;		/* data bytes served from disk */
	uint64_t written_bytes;		/* data bytes put */
	uint64_t evictions;		/* blocks removed for the bounds */
	uint64_t skipped;		/* puts not made: below the free-space floor */
	uint64_t errors;		/* failed writes, renames, unlinks */
	uint64_t usage;			/* bytes of block files known (headers included) */
	uint64_t max_bytes, min_free;
	uint64_t blocks;		/* block files known */
	bool scanned;			/* the first walk has ended */
} tf_disk_cache_stats;

/* Open (creating it if missing) the cache in dir.  TF_E_ACCESS with a
 * message naming dir when its owner or mode is wrong, TF_E_IO when it
 * cannot be made or opened.  Nothing else is read or started. */
tf_status tf_disk_cache_open(const char *dir, uint64_t max_bytes, uint64_t min_free, tf_disk_cache **out,
			     tf_error *err);
/* Stops the background thread (it may be in the middle of a walk). */
void tf_disk_cache_free(tf_disk_cache *dc);

/* Block idx of the object key, exactly len data bytes (the block's length
 * for the object's size), into dst: true if a block verified, else false
 * (and dst's contents are undefined). */
bool tf_disk_cache_get(tf_disk_cache *dc, const char *key, uint64_t idx, void *dst, size_t len);
/* Keep len (1 to TF_DISK_CACHE_BLOCK) bytes as block idx of key. */
void tf_disk_cache_put(tf_disk_cache *dc, const char *key, uint64_t idx, const void *data, size_t len);

void tf_disk_cache_get_stats(tf_disk_cache *dc, tf_disk_cache_stats *out);
/* Wait until the background thread's first walk has ended, and start it if
 * nothing has (for tests and tools). */
void tf_disk_cache_settle(tf_disk_cache *dc);

#endif
