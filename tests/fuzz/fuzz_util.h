/*
 * fuzz_util.h - what the file-level fuzz targets share (header only: each
 * target is one program; see README here).
 *
 *   - a per-process temporary directory (on /dev/shm when there is one:
 *     every input is written to disk, so disk speed is execution speed),
 *     removed when the fuzzer exits;
 *   - the corpus's oracle key, for encrypted seeds;
 *   - fz_exercise(): everything a reader can do with an open tf_file, with
 *     the promises tf_file.h makes checked: tile ranges and chunk lists add
 *     up, and the bytes tf_file_read returns through a small cache (decode-
 *     ahead on) are the bytes tf_file_decode gives chunk by chunk.
 *
 * A broken promise aborts, so libFuzzer saves the input.  With FUZZ_VERBOSE=1
 * in the environment each input's outcome is printed.
 */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H

#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tf_cache.h"
#include "tf_file.h"
#include "tf_keys.h"
#include "tf_pipeline.h"
#include "tf_tile.h"

/* Decoded bytes read and compared per file: far beyond any seed. */
#define FZ_READ_WINDOW ((uint64_t)2 << 20)
/* Chunks decoded one by one only up to this size: a chunk header may claim
 * up to 4 GiB, which the cache refuses anyway (budget below). */
#define FZ_CHUNK_CAP ((uint32_t)1 << 20)
#define FZ_CACHE_BUDGET ((size_t)512 << 10)

/* Not every target uses every helper. */
#define FZ_FN static __attribute__((unused))

static const char fz_oracle_key[] __attribute__((unused)) = "TileDB-oracle-key-0123456789ABCD";
static char fz_dir_path[256];
static bool fz_verbose __attribute__((unused));

FZ_FN void fz_fail(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz: %s: %s\n", what, detail);
	abort();
}

FZ_FN void fz_say(const char *fmt, const char *a, const char *b)
{
	if (fz_verbose) {
		fprintf(stderr, fmt, a, b);
		fputc('\n', stderr);
	}
}

FZ_FN int fz_rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	remove(path);
	return 0;
}

/* Remove dir and everything under it (never follows symlinks). */
FZ_FN void fz_rm_tree(const char *dir)
{
	nftw(dir, fz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

FZ_FN void fz_cleanup(void)
{
	if (fz_dir_path[0])
		fz_rm_tree(fz_dir_path);
}

/* The per-process directory, made on first use. */
FZ_FN const char *fz_dir(void)
{
	struct stat sb;
	const char *base = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) && access("/dev/shm", W_OK) == 0
				   ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

	if (fz_dir_path[0])
		return fz_dir_path;
	snprintf(fz_dir_path, sizeof(fz_dir_path), "%s/tf-fuzz-XXXXXX", base);
	if (!mkdtemp(fz_dir_path))
		fz_fail("temporary directory", fz_dir_path);
	atexit(fz_cleanup);
	fz_verbose = getenv("FUZZ_VERBOSE") != NULL;
	return fz_dir_path;
}

FZ_FN void fz_write(const char *path, const void *p, size_t n, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	const char *at = p;

	if (fd < 0)
		fz_fail("create", path);
	fchmod(fd, mode);	/* an existing file keeps its old mode otherwise */
	while (n) {
		ssize_t w = write(fd, at, n);
		if (w <= 0)
			fz_fail("write", path);
		at += w;
		n -= (size_t)w;
	}
	close(fd);
}

FZ_FN tf_key *fz_key(void)
{
	static tf_key *key;
	tf_error err;

	if (!key && tf_key_from_bytes(fz_oracle_key, strlen(fz_oracle_key), &key, &err) != TF_OK)
		fz_fail("key", err.msg);
	return key;
}

/* payload as one generic tile (§6) appended to out: no filters, or only
 * AES-256-GCM when a key is given, written by format version 22. */
FZ_FN void fz_generic(tf_span payload, const tf_key *key, tf_buf *out)
{
	tf_buf tile = TF_BUF_INIT(SIZE_MAX), pipe = TF_BUF_INIT(SIZE_MAX);
	tf_chunk_env env = { .type = TF_DT_CHAR, .cell_size = 1, .version = 22, .key = key };
	tf_pipeline *p = tf_pipeline_new();
	tf_workspace *ws = tf_workspace_new();
	tf_error err;

	if (!p || !ws || (key && tf_pipeline_append(p, TF_F_AES_256_GCM, &err) != TF_OK) ||
	    tf_pipeline_serialize(p, &pipe, &err) != TF_OK ||
	    tf_tile_encode(p, &env, ws, payload, NULL, 0, &tile, &err) != TF_OK ||
	    tf_buf_put_u32(out, 22, &err) != TF_OK || tf_buf_put_u64(out, tile.len, &err) != TF_OK ||
	    tf_buf_put_u64(out, payload.n, &err) != TF_OK || tf_buf_put_u8(out, TF_DT_CHAR, &err) != TF_OK ||
	    tf_buf_put_u64(out, 1, &err) != TF_OK || tf_buf_put_u8(out, key != NULL, &err) != TF_OK ||
	    tf_buf_put_u32(out, (uint32_t)pipe.len, &err) != TF_OK ||
	    tf_buf_append(out, pipe.p, pipe.len, &err) != TF_OK ||
	    tf_buf_append(out, tile.p, tile.len, &err) != TF_OK)
		fz_fail("generic tile", "cannot encode");
	tf_buf_free(&tile);
	tf_buf_free(&pipe);
	tf_pipeline_free(p);
	tf_workspace_free(ws);
}

/* ---- exercising an open file ------------------------------------------------------ */

/* What chunk-by-chunk decoding said about each byte of the window. */
enum { FZ_UNKNOWN, FZ_DECODED, FZ_FAILED };

typedef struct fz_ref {
	uint64_t n;		/* bytes of the window */
	uint8_t *bytes, *state;
	bool incomplete;	/* a chunk (maybe an empty one) failed or was skipped */
} fz_ref;

FZ_FN void fz_mark(fz_ref *ref, uint64_t off, uint32_t size, const uint8_t *src, int state)
{
	uint64_t n = off < ref->n ? (size < ref->n - off ? size : ref->n - off) : 0;

	if (!n)
		return;
	if (src)
		memcpy(ref->bytes + off, src, (size_t)n);
	memset(ref->state + off, state, (size_t)n);
}

/* Tile ranges follow each other from 0 to the file's size; each loaded
 * tile's chunks follow each other over exactly its range. */
FZ_FN void fz_check_chunks(const tf_file *f, size_t t, uint64_t off, uint64_t size, size_t nc)
{
	uint64_t at = off;

	for (size_t c = 0; c < nc; c++) {
		tf_chunk_info ci;

		tf_file_chunk_info(f, t, c, &ci);
		if (ci.off != at)
			fz_fail("chunks", "a chunk does not start where the one before it ends");
		at += ci.size;
	}
	if (at - off != size)
		fz_fail("chunks", "the chunks of a tile do not add up to its size");
}

/* Decode every chunk (up to FZ_CHUNK_CAP bytes each) into ref. */
FZ_FN void fz_decode_all(const tf_file *f, tf_workspace *ws, fz_ref *ref)
{
	uint64_t expect = 0;
	uint8_t *buf = NULL;
	tf_error err;

	for (size_t t = 0; t < tf_file_ntiles(f); t++) {
		uint64_t off, size;
		size_t nc;

		tf_file_tile_range(f, t, &off, &size);
		if (off != expect)
			fz_fail("tiles", "a tile does not start where the one before it ends");
		if (size > UINT64_MAX - off)
			fz_fail("tiles", "decoded size overflows");
		expect = off + size;
		if (tf_file_tile_chunks(f, t, &nc, &err) != TF_OK) {
			ref->incomplete = true;
			fz_say("tile: %s%s", err.msg, "");
			continue;
		}
		fz_check_chunks(f, t, off, size, nc);
		for (size_t c = 0; c < nc; c++) {
			tf_chunk_info ci;
			tf_status rc;

			tf_file_chunk_info(f, t, c, &ci);
			if (ci.size > FZ_CHUNK_CAP || ci.off >= ref->n) {
				ref->incomplete = true;
				continue;
			}
			if (!(buf = realloc(buf, ci.size ? ci.size : 1)))
				fz_fail("decode", "out of memory");
			rc = tf_file_decode(f, ws, t, c, buf, &err);
			fz_mark(ref, ci.off, ci.size, rc == TF_OK ? buf : NULL, rc == TF_OK ? FZ_DECODED : FZ_FAILED);
			if (rc != TF_OK) {
				ref->incomplete = true;
				fz_say("chunk: %s%s", err.msg, "");
			}
		}
	}
	if (expect != tf_file_size(f))
		fz_fail("tiles", "the tiles do not add up to the file's size");
	free(buf);
}

/* Bytes a read returned are what chunk decoding gave, and never come from
 * a chunk that failed to decode. */
FZ_FN void fz_compare(const fz_ref *ref, uint64_t off, const uint8_t *got, size_t n)
{
	for (size_t i = 0; i < n && off + i < ref->n; i++) {
		uint8_t s = ref->state[off + i];

		if (s == FZ_FAILED)
			fz_fail("read", "tf_file_read returned bytes of a chunk that does not decode");
		if (s == FZ_DECODED && got[i] != ref->bytes[off + i])
			fz_fail("read", "tf_file_read and tf_file_decode disagree");
	}
}

/* Read the window front to back in pieces of varying size through cache c
 * (whose worker decodes ahead), then a few reads at the end. */
FZ_FN void fz_read_all(tf_file *f, tf_cache *c, tf_workspace *ws, const fz_ref *ref)
{
	static const size_t lens[] = { 1, 4093, 65536, 7, 200000, 512, 65535, 3 };
	uint64_t size = tf_file_size(f);
	tf_read_state rs = { 0 };
	uint8_t *buf = malloc(200000);
	tf_error err;

	if (!buf)
		fz_fail("read", "out of memory");
	for (uint64_t off = 0, i = 0; off < ref->n; i++) {
		size_t len = lens[i % (sizeof(lens) / sizeof(lens[0]))], got;
		tf_status rc = tf_file_read(f, c, ws, &rs, off, len, buf, &got, &err);

		if (got > len || (rc == TF_OK && got != (len < size - off ? len : size - off)))
			fz_fail("read", "wrong byte count");
		/* On failure, the got bytes before it were read and must be right. */
		fz_compare(ref, off, buf, got);
		off += rc == TF_OK || !got ? len : got;
	}
	for (uint64_t back = 1; back <= 4096 && back <= size; back *= 64) {
		size_t got;
		tf_status rc = tf_file_read(f, c, ws, NULL, size - back, 100, buf, &got, &err);

		if (got > 100 || (rc == TF_OK && got != (back < 100 ? back : 100)))
			fz_fail("read", "wrong byte count at the end");
	}
	free(buf);
}

/* A small cache with one decode-ahead worker, for one input's files: a
 * file stays bound to the cache it was first read through, so the cache
 * is freed after them (tf_cache_free also drops what its queue holds). */
FZ_FN tf_cache *fz_cache(void)
{
	tf_cache *c;
	tf_error err;

	if (tf_cache_new(FZ_CACHE_BUDGET, 1, &c, &err) != TF_OK)
		fz_fail("cache", err.msg);
	return c;
}

/* What the same bytes decode to in memory (tf_tile_decode or
 * tf_generic_decode over the whole input), for fz_exercise to compare. */
typedef struct fz_expect {
	bool known;		/* false: nothing to compare with */
	bool strict;		/* the memory decode must succeed when the file does */
	tf_status rc;
	const uint8_t *p;
	size_t n;
} fz_expect;

/* Whether every chunk of the file, empty ones too, decoded. */
FZ_FN bool fz_all_decoded(const tf_file *f, const fz_ref *ref)
{
	if (ref->n != tf_file_size(f) || ref->incomplete)
		return false;
	for (uint64_t i = 0; i < ref->n; i++)
		if (ref->state[i] != FZ_DECODED)
			return false;
	return true;
}

/* A file whose every chunk decodes holds what the same bytes decode to in
 * memory: the index must not change them. */
FZ_FN void fz_compare_memory(const tf_file *f, const fz_ref *ref, const fz_expect *want)
{
	if (!want || !want->known || !fz_all_decoded(f, ref))
		return;
	if (want->rc != TF_OK) {
		if (want->strict && want->rc != TF_E_NOMEM)
			fz_fail("memory", "the file decodes, the same bytes in memory do not");
		return;
	}
	if (want->n != ref->n) {
		if (want->strict)
			fz_fail("memory", "the file and the same bytes in memory decode to different sizes");
		return;
	}
	if (want->n && memcmp(want->p, ref->bytes, want->n))
		fz_fail("memory", "the file and the same bytes in memory decode to different bytes");
}

/* Everything a reader does with f, through c; takes over the caller's
 * reference to f.  want (may be NULL): what memory decoding gave. */
FZ_FN void fz_exercise(tf_file *f, tf_cache *c, const fz_expect *want)
{
	tf_workspace *ws = tf_workspace_new();
	uint64_t size = tf_file_size(f);
	fz_ref ref = { size < FZ_READ_WINDOW ? size : FZ_READ_WINDOW, NULL, NULL, false };
	tf_file_info info;
	char *text;

	if (!ws || !(ref.bytes = malloc(ref.n + 1)) || !(ref.state = calloc(ref.n + 1, 1)))
		fz_fail("exercise", "out of memory");
	tf_file_get_info(f, &info);
	if (info.decoded_bytes != size || info.tiles != tf_file_ntiles(f))
		fz_fail("info", "disagrees with the index");
	if (!(text = tf_file_pipeline_text(f)))
		fz_fail("pipeline text", "out of memory");
	free(text);
	(void)tf_file_index_bytes(f);
	fz_decode_all(f, ws, &ref);
	fz_compare_memory(f, &ref, want);
	fz_read_all(f, c, ws, &ref);
	tf_file_unref(f);
	free(ref.bytes);
	free(ref.state);
	tf_workspace_free(ws);
}

#endif
