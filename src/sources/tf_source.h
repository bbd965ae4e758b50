/*
 * tf_source.h - where stored bytes come from.
 *
 * A source is a tree of stored files named by relative paths ("." is the
 * root, "a/b/c.tdb" a file; no leading or trailing '/', no "." or ".."
 * components).  Two kinds exist behind this one interface, and nothing above
 * it knows which it reads:
 *
 *   - a local directory (source_local.c): every name is resolved beneath the
 *     directory's descriptor (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS,
 *     or a component walk with O_NOFOLLOW), so no symlink, ".." or magic
 *     link ever leads outside it; files are opened O_NONBLOCK and fstat'ed
 *     before anything is read, so a FIFO or device is refused at once;
 *   - an S3 bucket or prefix (source_s3.c): "s3://BUCKET[/PREFIX]", listed
 *     with ListObjectsV2 (delimiter '/'; a directory named __* whole, its
 *     subdirectories' listings made from it), read with ranged GETs.
 *
 * Versions.  Every stat carries a tf_version: what proves a file unchanged
 * (local: device, inode, size, mtime and ctime in ns; S3: ETag and size).
 * An object opened with an expected version is that version or the open
 * fails with TF_E_STALE; every later read of it returns bytes of that
 * version or fails (TF_E_STALE when the file changed under it: size or
 * ctime moved, the ETag no longer matches), never a mix of two versions.
 *
 * Reads are exact: tf_object_read returns all `len` bytes or an error.  A
 * caller wanting few requests asks for whole runs (a tile's chunks, 1-16
 * MiB), not one call per chunk: an object store pays a round trip per call.
 *
 * Every function is thread-safe; an object may be read by many threads at
 * once.  Errors name the file ("a/b.tdb: ...") and, for object stores, the
 * endpoint, key, range and HTTP status, never a credential.
 */
#ifndef TF_SOURCE_H
#define TF_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/tf_status.h"

typedef struct tf_source tf_source;
typedef struct tf_object tf_object;

/* What proves a stored file unchanged.  Fields a kind does not have are 0
 * (or an empty etag). */
typedef struct tf_version {
	uint64_t dev, ino;		/* local */
	uint64_t size;
	int64_t mtime_ns, ctime_ns;	/* local: both; S3: mtime from the listing */
	char etag[72];			/* S3, quotes stripped; "" for local */
} tf_version;

/* FIFOs and sockets are shown as what they are (nothing ever opens them:
 * the kernel makes its own pipe of such an inode); devices are OTHER. */
typedef enum { TF_ENT_REG, TF_ENT_DIR, TF_ENT_LNK, TF_ENT_FIFO, TF_ENT_SOCK, TF_ENT_OTHER } tf_ent_kind;

typedef struct tf_stat {
	tf_ent_kind kind;
	uint32_t mode;			/* permission bits (07777); S3: 0444 / 0555 */
	uint32_t uid, gid;		/* S3: the mounting user's */
	uint32_t nlink;
	tf_version v;			/* v.size is the stored size */
} tf_stat;

/* Whether two versions are the same stored bytes. */
bool tf_version_equal(const tf_version *a, const tf_version *b);

/* dir "/" name into out[n] ("." as dir adds nothing); false if too long. */
bool tf_path_join(char *out, size_t n, const char *dir, const char *name);

/* ---- sources ---------------------------------------------------------------------------- */

/* A source is made by tf_source_open.h (any kind, by its spelling) or by a
 * kind's own constructor (sources/source_local.h). */
void tf_source_free(tf_source *s);

/*
 * Who the work is for.  A driver serving requests on many threads (the FUSE
 * daemon) tells a source, through hooks, which request the calling thread
 * serves: when it started and how to ask whether its caller has gone
 * (killed, interrupted).  A source that can stall (S3) bounds all the work
 * it does for one request by a deadline counted from that start, and gives
 * up early once the caller is gone: no request outlives its caller or the
 * deadline.  On a thread the hook does not know (a tool, the cache's
 * decode-ahead workers, read-ahead), each operation is bounded from its own
 * start.  The warn hook hears, one line at a time, of what a source passed
 * over without failing (a listed key that is no file name).  Without hooks
 * nothing is told and every operation has its own deadline.
 */
typedef struct tf_call {
	int64_t start_ns;		/* CLOCK_MONOTONIC */
	bool (*gone)(void *arg);	/* NULL: never; called from any thread */
	void *arg;			/* valid until the request is answered */
} tf_call;

typedef struct tf_source_hooks {
	bool (*call)(void *ctx, tf_call *out);	/* the calling thread's request; false: none */
	void (*warn)(void *ctx, const char *msg);
	void *ctx;
} tf_source_hooks;

/* Set the hooks (copied) before the source is shared between threads. */
void tf_source_set_hooks(tf_source *s, const tf_source_hooks *h);

/* "local" or "s3"; and how the user spelled the source (for messages). */
const char *tf_source_kind(const tf_source *s);
const char *tf_source_name(const tf_source *s);
/*
 * The name of rel's bytes in keys that outlive the process (the index
 * store's): for an object store "s3:SCHEME://HOST[:PORT]/BUCKET/KEY", so
 * that objects of one name at two endpoints never share a key.  False for
 * a local source (its files are known by device and inode) or when it does
 * not fit.
 */
bool tf_source_object_id(const tf_source *s, const char *rel, char *buf, size_t n);

/*
 * The reserved prefix of an object store: "PREFIX/.tilefs/", where
 * tiletool index --publish puts index entries for every node (tf_index.h).
 * A name ".tilefs" is no file of the source at any depth: listings never
 * show it, and a stat, list or open of a path through it is TF_E_NOTFOUND.
 * A local source has no such prefix (these fail TF_E_INVAL, or false).
 *
 * tf_source_bucket_key: "BUCKET/KEY", rel's name wherever the bucket is
 * reached from (every endpoint of a bucket reads the same reserved objects
 * next to the same objects).  False for a local source or when too long.
 *
 * tf_source_get_reserved: the whole of object PREFIX/.tilefs/NAME, at most
 * max bytes, into *out (malloc'd, *n bytes).  One GET; TF_E_NOTFOUND when
 * there is none (a 404, remembered for list_ttl, so a listing's files cost
 * one request each per ttl at most), TF_E_CORRUPT when larger than max.
 * Nothing read is trusted: the caller checks it.
 *
 * tf_source_put_reserved: write object PREFIX/.tilefs/NAME (a signed PUT;
 * tiletool only: a mount never writes to its source).
 */
bool tf_source_bucket_key(const tf_source *s, const char *rel, char *buf, size_t n);
tf_status tf_source_get_reserved(tf_source *s, const char *name, size_t max, char **out, size_t *n,
				 tf_error *err);
tf_status tf_source_put_reserved(tf_source *s, const char *name, const void *p, size_t n, tf_error *err);
#define TF_SOURCE_RESERVED ".tilefs"

/* The root's descriptor of a local source (for statfs and mount checks), or -1. */
int tf_source_local_fd(const tf_source *s);
/* Whether stats carry the stored files' own owners and modes (a local
 * source), rather than the same ones for everything (an object store). */
bool tf_source_has_modes(const tf_source *s);
/* Requests worth keeping in flight for many small reads (metadata of many
 * fragments): an object store's max_requests, each costing a round trip;
 * 0 for a local source, whose reads are system calls (tf_fanout's figures
 * say when threads pay there). */
unsigned tf_source_in_flight(const tf_source *s);

/*
 * Descriptors.  A local source lends descriptors to its objects from a
 * pool of at most `max` (tf_source_local: half of RLIMIT_NOFILE's soft
 * limit at the time, less a reserve; see source_local.c): an object idle
 * for longest gives its descriptor up first, and opens its file again (the
 * same confined resolution) when next read, which then fails TF_E_STALE if
 * the name no longer holds the object's version.  So any number of objects
 * may be open, and a process's other descriptors (listings, the FUSE
 * device, indexes) never run out because of them.  Descriptors being read
 * are never taken: `held` exceeds `max` by at most the reads in progress.
 * Sources of other kinds hold no descriptors (all zero).
 */
typedef struct tf_source_fds {
	unsigned max;		/* the pool's bound */
	unsigned held;		/* descriptors objects hold now */
	uint64_t reopens;	/* objects that opened their file again */
	uint64_t evictions;	/* descriptors closed for other objects */
} tf_source_fds;
void tf_source_fd_stats(tf_source *s, tf_source_fds *out);
/* Bound the pool at max descriptors (0: the default for RLIMIT_NOFILE as
 * it is now, e.g. after raising it); idle ones beyond it close at once. */
void tf_source_set_max_fds(tf_source *s, unsigned max);

/*
 * Stored bytes an object store holds for reads (fetched ahead of a reader,
 * or kept after a walk for the reads that follow), least recently used out
 * first.  tf_source_set_cache charges them to that cache's budget and
 * bounds them at half of it (else at 64 MiB); NULL detaches the cache,
 * giving back what was charged: before the cache is freed.  Other kinds
 * hold none (all zero).
 */
struct tf_cache;
void tf_source_set_cache(tf_source *s, struct tf_cache *c);
typedef struct tf_source_stored {
	size_t held, bound;	/* bytes of parts (loaded, loading, queued), at most */
	unsigned parts, in_flight, queued;	/* GETs running now, parts waiting for one */
	uint64_t fetched, served, evicted, cancelled;	/* bytes; parts */
	uint64_t aborted;		/* parts cut short in flight: their open was closed */
} tf_source_stored;
void tf_source_stored_stats(tf_source *s, tf_source_stored *out);

/* The disk cache's counters as "name=value ..." text (false: the source
 * keeps none; see sources/disk_cache.h). */
bool tf_source_disk_cache_text(tf_source *s, char *buf, size_t n);

/* Stat rel without following a symlink (a symlink reports itself). */
tf_status tf_source_stat(tf_source *s, const char *rel, tf_stat *st, tf_error *err);

/*
 * Call fn for each entry of directory rel ("." and ".." are not reported).
 * With want_stat, st is the entry's full stat; otherwise only st->kind (and
 * whatever is free, such as S3 sizes) is filled.  fn returns non-zero to
 * stop early (not an error).
 */
typedef int (*tf_list_fn)(void *ctx, const char *name, const tf_stat *st);
tf_status tf_source_list(tf_source *s, const char *rel, bool want_stat, tf_list_fn fn, void *ctx,
			 tf_error *err);

/* The target of symlink rel (local only; TF_E_INVAL elsewhere), NUL-terminated. */
tf_status tf_source_readlink(tf_source *s, const char *rel, char *buf, size_t size, tf_error *err);

typedef struct tf_source_fsstat {
	uint64_t bsize, blocks, bfree, bavail, files, ffree, namemax;
} tf_source_fsstat;
tf_status tf_source_statfs(tf_source *s, tf_source_fsstat *out, tf_error *err);

/* ---- objects: one version of one stored file ------------------------------------------ */

/*
 * Open regular file rel for reading.  With expect, the file must be that
 * version (TF_E_STALE otherwise); *out's version is in tf_object_stat().
 * A directory, FIFO, device or symlink is refused (TF_E_INVAL).  Objects
 * are reference-counted: open gives one reference, tf_object_ref() adds
 * one, tf_object_close() drops one (NULL is fine) and closes at zero.
 */
tf_status tf_object_open(tf_source *s, const char *rel, const tf_version *expect, tf_object **out,
			 tf_error *err);
tf_object *tf_object_ref(tf_object *o);
void tf_object_close(tf_object *o);
const tf_stat *tf_object_stat(const tf_object *o);
const char *tf_object_name(const tf_object *o);
/* Bytes per tf_object_read a caller should aim for when it can choose:
 * a local file wants about 1 MiB, an object store several. */
uint64_t tf_object_io_size(const tf_object *o);

/* Read exactly len bytes at off.  A range past the version's size, or bytes
 * that are no longer that version's, fail: TF_E_STALE; I/O: TF_E_IO. */
tf_status tf_object_read(tf_object *o, uint64_t off, void *dst, size_t len, tf_error *err);

/* Hint that [off, off+len) will be read soon, from off on (local:
 * WILLNEED; an object store: its reader is at off going forward, and it
 * fetches ahead from there within its window, len at most). */
void tf_object_prefetch(tf_object *o, uint64_t off, uint64_t len);

/* Whether the stored file is still this object's version (a cheap check). */
tf_status tf_object_check(tf_object *o, tf_error *err);

/*
 * How an object is about to be read (a hint, for this object only).
 * TF_ACCESS_HEADERS: small reads far apart follow, each depending on the
 * last (a walk of chunk headers, nothing decoded).  A local file then reads
 * without read-ahead, and reads pages not in the page cache with direct I/O
 * of the sectors alone, so a walk neither reads nor caches the chunks.
 * Returns whether such reads are cheap for this kind: an object store pays
 * a round trip per read (false: nothing changes, read in large runs).
 * TF_ACCESS_PLANNED: the caller reads ahead itself, from several threads,
 * in runs it sized with tf_object_io_size, out of order; the source does
 * not guess a direction from them: the caller says where it is with
 * tf_object_prefetch (an object store fetches ahead from there, and the
 * runs find their bytes fetched or in flight, never fetched twice).
 * Returns whether the source changed how it reads.
 */
typedef enum { TF_ACCESS_NORMAL, TF_ACCESS_HEADERS, TF_ACCESS_PLANNED } tf_access;
bool tf_object_advise(tf_object *o, tf_access how);

#endif
