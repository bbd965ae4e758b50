/*
 * test_handle.c - the read path (tf_handle.c over tf_file.c and tf_cache.c):
 *
 *   - decode units: a tile of 100,000 one-byte chunks is a few units, read
 *     byte-exact under a small cache that never holds many entries;
 *   - a corrupt chunk inside a multi-chunk unit: the error names the chunk,
 *     the other units still read, nothing stays pinned;
 *   - stale files: replaced (rename over), rewritten in place with other
 *     bytes of the same size, truncated: TF_E_STALE, never other bytes;
 *   - done chunks: a 64 MiB scan passed on keeps the cache far under its
 *     32 MiB budget by recycling, and fills it when not passed on;
 *   - decode-ahead for a sequential reader (prefetches), and correctness
 *     of eight concurrent readers of one file (every byte compared);
 *   - pins: slices survive pressure, a request larger than the budget is
 *     pinned whole, a unit larger than the budget is refused cleanly.
 * Reader threads never ck_assert (Check may longjmp out of the wrong
 * thread): they count failures that the test thread then asserts.
 */
#include "tf_test.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/tf_cache.h"
#include "format/tf_file.h"
#include "cache/tf_handle.h"

#define HANG_GUARD_MS 60000	/* bounded polling: workers idle, times moving */
#define UNIT ((size_t)64 << 10)	/* TileDB's chunks, one decode unit each */
#define MIB ((size_t)1 << 20)

/* ---- helpers ------------------------------------------------------------------------------ */

static tf_cache *new_cache(size_t budget, unsigned workers)
{
	tf_cache *c = NULL;
	tf_error err;

	ck_assert_msg(tf_cache_new(budget, workers, &c, &err) == TF_OK, "%s", err.msg);
	return c;
}

static tf_cache_stats stats_of(tf_cache *c)
{
	tf_cache_stats s;

	tf_cache_get_stats(c, &s);
	return s;
}

/* Wait (bounded) until no job is queued or running. */
static void wait_idle(tf_cache *c)
{
	for (unsigned ms = 0; ms < HANG_GUARD_MS && tf_cache_backlog(c); ms++)
		usleep(1000);
	ck_assert_uint_eq(tf_cache_backlog(c), 0);
}

/* Append tiles of the given sizes of plain, as our writer stores them. */
static void encode_tiles(const char *spec, tf_datatype type, const uint8_t *plain, const size_t *tiles,
			 size_t ntiles, tf_buf *out)
{
	tf_chunk_env env = { .type = type, .cell_size = tf_datatype_size(type), .version = 22 };
	tf_pipeline *p = tf_test_pipeline(spec);
	tf_workspace *ws = tf_workspace_new();
	tf_error err;

	for (size_t t = 0, at = 0; t < ntiles; at += tiles[t++])
		ck_assert_msg(tf_tile_encode(p, &env, ws, tf_span_of(plain + at, tiles[t]), NULL, 0, out,
					     &err) == TF_OK, "tile %zu: %s", t, err.msg);
	tf_workspace_free(ws);
	tf_pipeline_free(p);
}

/* Append one tile of n bytes of plain cut into chunks of `chunk` bytes,
 * each encoded on its own with spec (any chunk size a writer might use). */
static void encode_chunked_tile(const char *spec, const uint8_t *plain, size_t n, size_t chunk, tf_buf *out)
{
	tf_chunk_env env = { .type = TF_DT_UINT8, .cell_size = 1, .version = 22 };
	tf_pipeline *p = tf_test_pipeline(spec);
	tf_workspace *ws = tf_workspace_new();
	tf_error err;

	ck_assert(tf_buf_put_u64(out, (n + chunk - 1) / chunk, NULL) == TF_OK);
	for (size_t at = 0; at < n; at += chunk)
		ck_assert_msg(tf_pipeline_encode(p, &env, ws, tf_span_of(plain + at, n - at < chunk ? n - at : chunk),
						 NULL, 0, out, &err) == TF_OK, "%s", err.msg);
	tf_workspace_free(ws);
	tf_pipeline_free(p);
}

/* A file of tiles written to the temporary directory: its decoded bytes,
 * and its spec (pipeline owned). */
typedef struct test_file {
	char path[PATH_MAX];
	tf_file_spec spec;
	uint8_t *plain;
	size_t size;
	tf_buf stored;
} test_file;

static void test_file_make(test_file *tf, const char *name, const char *spec, tf_datatype type,
			   const size_t *tiles, size_t ntiles, tf_gen kind, uint64_t seed)
{
	memset(tf, 0, sizeof(*tf));
	for (size_t t = 0; t < ntiles; t++)
		tf->size += tiles[t];
	tf->plain = tf_test_data(tf->size, kind, tf_datatype_size(type), seed);
	tf_buf_init(&tf->stored, SIZE_MAX);
	encode_tiles(spec, type, tf->plain, tiles, ntiles, &tf->stored);
	tf->spec = (tf_file_spec){ .type = type, .cell_val_num = 1, .pipeline = tf_test_pipeline(spec) };
	tf_test_tmp_path(tf->path, name);
	tf_test_write_file(tf->path, tf->stored.p, tf->stored.len);
}

static void test_file_free(test_file *tf)
{
	tf_pipeline_free((tf_pipeline *)tf->spec.pipeline);
	tf_buf_free(&tf->stored);
	free(tf->plain);
}

/* Read [off, off+len) and compare with plain (size bytes). */
static void check_read(tf_handle *h, tf_cache *c, tf_workspace *ws, const uint8_t *plain, uint64_t size,
		       uint64_t off, size_t len)
{
	size_t want = off >= size ? 0 : (size - off < len ? (size_t)(size - off) : len), got = 99;
	uint8_t *dst = malloc(len ? len : 1);
	tf_error err;

	ck_assert_ptr_nonnull(dst);
	ck_assert_msg(tf_handle_read(h, c, ws, off, len, dst, &got, &err) == TF_OK,
		      "read %zu at %llu: %s", len, (unsigned long long)off, err.msg);
	ck_assert_msg(got == want, "read %zu at %llu: got %zu, want %zu", len, (unsigned long long)off,
		      got, want);
	ck_assert_msg(want == 0 || memcmp(dst, plain + off, want) == 0, "read %zu at %llu differs", len,
		      (unsigned long long)off);
	free(dst);
}

/* A read that must fail with code and a message containing needle; nothing
 * is returned and nothing stays pinned (with workers, a decode-ahead job
 * may hold pins of its own for a while: callers wait_idle() and check). */
static void check_read_fails(tf_handle *h, tf_cache *c, tf_workspace *ws, uint64_t off, size_t len,
			     tf_status code, const char *needle)
{
	uint8_t *dst = malloc(len ? len : 1);
	tf_error err = { 0 };
	size_t got = 99;

	ck_assert_ptr_nonnull(dst);
	ck_assert_int_eq(tf_handle_read(h, c, ws, off, len, dst, &got, &err), code);
	ck_assert_msg(strstr(err.msg, needle), "read %zu at %llu: '%s' lacks '%s'", len,
		      (unsigned long long)off, err.msg, needle);
	ck_assert_uint_eq(got, 0);
	if (!tf_cache_workers(c))
		ck_assert_uint_eq(stats_of(c).pinned, 0);
	free(dst);
}

typedef struct chunk_list {
	tf_chunk_info *v;
	size_t n, cap;
} chunk_list;

static int collect_chunk(void *ctx, size_t chunk, const tf_chunk_info *ci)
{
	chunk_list *l = ctx;

	if (chunk != l->n)
		return 1;	/* out of order: the count below tells */
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 1024;
		if (!(l->v = realloc(l->v, l->cap * sizeof(*l->v))))
			return 1;
	}
	l->v[l->n++] = *ci;
	return 0;
}

static chunk_list chunks_of(tf_handle *h, tf_workspace *ws, size_t tile)
{
	chunk_list l = { 0 };
	tf_error err;

	ck_assert_msg(tf_handle_each_chunk(h, ws, tile, collect_chunk, &l, &err) == TF_OK, "%s", err.msg);
	return l;
}

static size_t units_of(tf_handle *h, size_t tile)
{
	size_t n;
	tf_error err;

	ck_assert_msg(tf_handle_tile_units(h, tile, &n, &err) == TF_OK, "tile %zu: %s", tile, err.msg);
	return n;
}

/* ---- 1. units of tiny chunks ----------------------------------------------------------------- */

#define TINY 100000	/* one-byte chunks in tile 0 */
#define TAIL 70000	/* tile 1: ordinary chunks */

/* Tile 0 by hand: u64 count, then {u32 orig_len 1, u32 filtered_len 1,
 * u32 md_len 0, the byte}: what an empty pipeline stores for each chunk. */
static void make_tiny_file(test_file *tf)
{
	static const size_t tail[] = { TAIL };

	memset(tf, 0, sizeof(*tf));
	tf->size = TINY + TAIL;
	tf->plain = tf_test_data(tf->size, TF_GEN_RANDOM, 1, 31);
	tf_buf_init(&tf->stored, SIZE_MAX);
	ck_assert(tf_buf_put_u64(&tf->stored, TINY, NULL) == TF_OK);
	for (size_t i = 0; i < TINY; i++)
		ck_assert(tf_buf_put_u32(&tf->stored, 1, NULL) == TF_OK &&
			  tf_buf_put_u32(&tf->stored, 1, NULL) == TF_OK &&
			  tf_buf_put_u32(&tf->stored, 0, NULL) == TF_OK &&
			  tf_buf_put_u8(&tf->stored, tf->plain[i], NULL) == TF_OK);
	encode_tiles("", TF_DT_UINT8, tf->plain + TINY, tail, 1, &tf->stored);
	tf->spec = (tf_file_spec){ .type = TF_DT_UINT8, .cell_val_num = 1, .pipeline = tf_test_pipeline("") };
	tf_test_tmp_path(tf->path, "tiny.tdb");
	tf_test_write_file(tf->path, tf->stored.p, tf->stored.len);
}

/* The units of the tiny tile: few, whole runs of chunks, 64 KiB at most,
 * each decoding to its bytes; the chunks as stored. */
static void check_tiny_index(tf_handle *h, tf_workspace *ws, const test_file *tf)
{
	size_t n = units_of(h, 0);
	uint64_t off = 0, chunks = 0;
	uint8_t *dst = malloc(UNIT);
	chunk_list l;
	tf_error err;

	ck_assert_ptr_nonnull(dst);
	ck_assert_msg(n >= 2 && n <= 4, "%zu units", n);
	for (size_t u = 0; u < n; u++) {
		tf_unit_info ui;

		tf_handle_unit_info(h, 0, u, &ui);
		ck_assert_uint_eq(ui.off, off);
		ck_assert_uint_eq(ui.first_chunk, chunks);
		ck_assert_uint_eq(ui.nchunks, ui.size);
		ck_assert_uint_le(ui.size, UNIT);
		ck_assert_uint_eq(ui.src_off, 8 + 13 * chunks);
		ck_assert_uint_eq(ui.src_len, 13 * (uint64_t)ui.nchunks);
		ck_assert_msg(tf_handle_decode_unit(h, ws, 0, u, dst, &err) == TF_OK, "%s", err.msg);
		ck_assert(memcmp(dst, tf->plain + off, ui.size) == 0);
		off += ui.size;
		chunks += ui.nchunks;
	}
	ck_assert_uint_eq(off, TINY);
	ck_assert_uint_eq(chunks, TINY);
	l = chunks_of(h, ws, 0);
	ck_assert_uint_eq(l.n, TINY);
	for (size_t i = 0; i < TINY; i++)
		ck_assert(l.v[i].off == i && l.v[i].size == 1 && l.v[i].src_off == 8 + 13 * i &&
			  l.v[i].src_len == 13);
	free(l.v);
	free(dst);
}

static void check_small(tf_cache *c)
{
	tf_cache_stats st = stats_of(c);

	ck_assert_uint_lt(st.entries, 100);
	ck_assert_uint_le(st.used, st.budget);
}

START_TEST(test_tiny_chunks_units)
{
	tf_workspace *ws = tf_workspace_new();
	tf_cache *c = new_cache(MIB, 2);
	uint64_t rng = 5;
	tf_file_info info;
	test_file tf;
	tf_handle *h;
	tf_file *f;

	make_tiny_file(&tf);
	f = tf_test_file_ok(tf.path, &tf.spec);
	h = tf_test_handle_ok(f);
	tf_file_get_info(f, &info);
	ck_assert_uint_eq(info.chunks, TINY + 2);
	ck_assert_uint_eq(tf_file_size(f), tf.size);
	/* The index holds units, not 100,000 chunks. */
	ck_assert_uint_lt(tf_file_index_bytes(f), 4096);
	check_tiny_index(h, ws, &tf);
	check_read(h, c, ws, tf.plain, tf.size, 0, tf.size);
	check_small(c);
	for (int i = 0; i < 300; i++) {
		uint64_t off, len;

		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		off = (rng >> 20) % tf.size;
		len = 1 + (rng >> 44) % 20000;
		check_read(h, c, ws, tf.plain, tf.size, off, (size_t)len);
		check_small(c);
	}
	for (uint64_t off = 0; off < tf.size; off += 4096) {	/* sequential, decode-ahead */
		check_read(h, c, ws, tf.plain, tf.size, off, 4096);
		check_small(c);
	}
	wait_idle(c);
	check_small(c);
	ck_assert_uint_eq(stats_of(c).pinned, 0);
	tf_handle_close(h);
	tf_file_unref(f);
	tf_cache_free(c);
	test_file_free(&tf);
	tf_workspace_free(ws);
}
END_TEST

/* ---- 2. a corrupt chunk inside a unit -------------------------------------------------------- */

static void patch(const char *path, uint64_t at, uint8_t xor)
{
	int fd = open(path, O_RDWR);
	uint8_t b;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &b, 1, (off_t)at), 1);
	b ^= xor;
	ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)at), 1);
	close(fd);
}

#define SMALL_CHUNKS 2000	/* of 100 bytes: 655 to a unit */
#define BAD_CHUNK 1000

START_TEST(test_corrupt_chunk_in_unit)
{
	static const size_t tail[] = { TAIL };
	tf_workspace *ws = tf_workspace_new();
	tf_cache *c = new_cache(MIB, 0);
	size_t tile0 = SMALL_CHUNKS * 100, n, bad = SIZE_MAX;
	tf_cache_stats before;
	tf_unit_info ui;
	test_file tf = { 0 };
	tf_error err;
	chunk_list l;
	tf_handle *h;
	tf_file *f;
	uint8_t *dst;

	tf.size = tile0 + TAIL;
	tf.plain = tf_test_data(tf.size, TF_GEN_RUNS, 1, 41);
	tf_buf_init(&tf.stored, SIZE_MAX);
	encode_chunked_tile("zstd | checksum_md5", tf.plain, tile0, 100, &tf.stored);
	encode_tiles("zstd | checksum_md5", TF_DT_UINT8, tf.plain + tile0, tail, 1, &tf.stored);
	tf.spec = (tf_file_spec){ .type = TF_DT_UINT8, .cell_val_num = 1,
				  .pipeline = tf_test_pipeline("zstd | checksum_md5") };
	tf_test_tmp_path(tf.path, "small.tdb");
	tf_test_write_file(tf.path, tf.stored.p, tf.stored.len);

	/* Damage the data of chunk 1000 (after its header and digest). */
	f = tf_test_file_ok(tf.path, &tf.spec);
	h = tf_test_handle_ok(f);
	l = chunks_of(h, ws, 0);
	ck_assert_uint_eq(l.n, SMALL_CHUNKS);
	{
		tf_chunk_header hd;
		tf_chunk_header_read(tf.stored.p + l.v[BAD_CHUNK].src_off, &hd);
		patch(tf.path, l.v[BAD_CHUNK].src_off + TF_CHUNK_HEADER_SIZE + hd.md_len, 0x40);
	}
	free(l.v);
	tf_handle_close(h);
	tf_file_unref(f);

	f = tf_test_file_ok(tf.path, &tf.spec);
	h = tf_test_handle_ok(f);
	n = units_of(h, 0);
	ck_assert_uint_ge(n, 3);
	dst = malloc(UNIT);
	ck_assert_ptr_nonnull(dst);
	for (size_t u = 0; u < n; u++) {
		tf_handle_unit_info(h, 0, u, &ui);
		ck_assert_uint_gt(ui.nchunks, 1);
		if (BAD_CHUNK >= ui.first_chunk && BAD_CHUNK < ui.first_chunk + ui.nchunks) {
			bad = u;
			ck_assert_int_eq(tf_handle_decode_unit(h, ws, 0, u, dst, &err), TF_E_CHECKSUM);
			ck_assert_msg(strstr(err.msg, "small.tdb: tile 0, chunk 1000: filter 1 (checksum_md5)"),
				      "%s", err.msg);
			for (int i = 0; i < 2; i++)	/* not kept: tried again, same error */
				check_read_fails(h, c, ws, ui.off + 7, 100, TF_E_CHECKSUM, "tile 0, chunk 1000:");
		} else {
			check_read(h, c, ws, tf.plain, tf.size, ui.off, ui.size);
		}
	}
	ck_assert_msg(bad != SIZE_MAX && bad > 0 && bad < n - 1, "chunk 1000 in unit %zu of %zu", bad, n);
	check_read(h, c, ws, tf.plain, tf.size, tile0, TAIL);	/* the other tile */
	before = stats_of(c);
	check_read_fails(h, c, ws, 0, tf.size, TF_E_CHECKSUM, "chunk 1000");	/* all at once */
	ck_assert_uint_eq(stats_of(c).misses, before.misses + 1);	/* only the bad unit missed */
	check_read(h, c, ws, tf.plain, tf.size, 0, 1000);
	free(dst);
	tf_handle_close(h);
	tf_file_unref(f);
	tf_cache_free(c);
	test_file_free(&tf);
	tf_workspace_free(ws);
}
END_TEST

/* A request spanning an intact tile and one whose chunk list cannot be
 * loaded (fragment metadata gives the tiles; units are read lazily) fails,
 * but the intact tile's units it had claimed are decoded and kept: another
 * reader waiting on them must get their bytes, not this request's error. */
START_TEST(test_failed_request_fills_its_claims)
{
	tf_chunk_env env = { .type = TF_DT_UINT8, .cell_size = 1, .version = 22 };
	tf_buf file = TF_BUF_INIT(SIZE_MAX);
	tf_workspace *ws = tf_workspace_new();
	tf_pipeline *none = tf_pipeline_new();
	uint8_t *data = tf_test_data(4096, TF_GEN_RANDOM, 1, 12), got[8192];
	tf_tile_layout lay[2];
	tf_file_spec spec = { .pipeline = none, .type = TF_DT_UINT8, .cell_val_num = 1, .tiles = lay, .ntiles = 2 };
	tf_cache *c = new_cache(MIB, 0);
	char path[PATH_MAX];
	tf_cache_stats before;
	tf_handle *h;
	tf_file *f;
	tf_error err;
	size_t n;

	ck_assert(tf_tile_encode(none, &env, ws, tf_span_of(data, 4096), NULL, 0, &file, NULL) == TF_OK);
	lay[0] = (tf_tile_layout){ 0, file.len, 4096 };
	lay[1] = (tf_tile_layout){ file.len, 16, 4096 };	/* 5 chunks claimed in 8 bytes */
	ck_assert(tf_buf_put_u64(&file, 5, NULL) == TF_OK);
	ck_assert(tf_buf_put_u64(&file, 0, NULL) == TF_OK);
	tf_test_tmp_path(path, "a1.tdb");
	tf_test_write_file(path, file.p, file.len);
	f = tf_test_file_ok(path, &spec);
	h = tf_test_handle_ok(f);
	ck_assert(tf_handle_read(h, c, ws, 0, sizeof(got), got, &n, &err) != TF_OK);
	before = stats_of(c);
	check_read(h, c, ws, data, 4096, 0, 4096);
	ck_assert_uint_eq(stats_of(c).misses, before.misses);	/* decoded by the failed request */
	ck_assert_uint_eq(stats_of(c).pinned, 0);
	tf_handle_close(h);
	tf_file_unref(f);
	tf_cache_free(c);
	tf_buf_free(&file);
	tf_pipeline_free(none);
	tf_workspace_free(ws);
	free(data);
}
END_TEST

/* ---- 3. stale files ---------------------------------------------------------------------------- */

static const size_t two_tiles[] = { 100000, 100000 };

/* Rewrite path in place with n other bytes until its times show it (the
 * local source compares size, mtime and ctime): bounded polling, since a
 * write within one clock tick may leave both times as they were. */
static void rewrite_in_place(const char *path, const void *p, size_t n, const tf_version *old)
{
	int fd = open(path, O_WRONLY);
	struct stat sb;
	unsigned ms = 0;

	ck_assert_int_ge(fd, 0);
	for (;; ms++) {
		ck_assert_int_eq(pwrite(fd, p, n, 0), (ssize_t)n);
		ck_assert_int_eq(fstat(fd, &sb), 0);
		ck_assert_uint_eq(sb.st_size, old->size);
		if ((int64_t)sb.st_ctim.tv_sec * 1000000000 + sb.st_ctim.tv_nsec != old->ctime_ns)
			break;
		ck_assert_msg(ms < HANG_GUARD_MS, "the file's ctime never moved");
		usleep(1000);
	}
	close(fd);
}

/* Replaced by a rename: the index's version is gone, so a new handle is
 * refused.  A handle opened before keeps reading the old file, which only
 * lost its name (unlinking moved its ctime, nothing else). */
static void check_old_or_stale(tf_handle *h, tf_cache *c, tf_workspace *ws, const test_file *a)
{
	uint8_t *buf = malloc(a->size);
	tf_error err;
	tf_status rc;
	size_t got;

	ck_assert_ptr_nonnull(buf);
	rc = tf_handle_read(h, c, ws, 0, a->size, buf, &got, &err);
	ck_assert_msg(rc == TF_OK && got == a->size && !memcmp(buf, a->plain, got),
		      "the old handle gave %d: %s", rc, rc ? err.msg : "other bytes");
	ck_assert_uint_eq(stats_of(c).pinned, 0);
	free(buf);
}

START_TEST(test_stale_replaced)
{
	tf_workspace *ws = tf_workspace_new();
	tf_cache *c = new_cache(MIB, 0);
	char tmp[PATH_MAX];
	test_file a, b;
	tf_handle *h, *old;
	tf_error err;
	tf_file *f, *f2;

	test_file_make(&a, "a.tdb", "zstd", TF_DT_INT32, two_tiles, 2, TF_GEN_WALK, 1);
	test_file_make(&b, "b.tdb", "zstd", TF_DT_INT32, two_tiles, 2, TF_GEN_WALK, 2);
	f = tf_test_file_ok(a.path, &a.spec);
	old = tf_test_handle_ok(f);
	tf_test_tmp_path(tmp, "a.tdb.new");
	tf_test_write_file(tmp, b.stored.p, b.stored.len);
	ck_assert_int_eq(rename(tmp, a.path), 0);
	ck_assert_int_eq(tf_handle_open(f, &h, &err), TF_E_STALE);
	ck_assert_msg(strstr(err.msg, "a.tdb") && strstr(err.msg, "changed"), "%s", err.msg);
	check_old_or_stale(old, c, ws, &a);
	f2 = tf_test_file_ok(a.path, &a.spec);	/* the new file: a new owner */
	h = tf_test_handle_ok(f2);
	check_read(h, c, ws, b.plain, b.size, 0, b.size);
	check_old_or_stale(old, c, ws, &a);
	tf_handle_close(h);
	tf_handle_close(old);
	tf_file_unref(f2);
	tf_file_unref(f);
	tf_cache_free(c);
	test_file_free(&a);
	test_file_free(&b);
	tf_workspace_free(ws);
}
END_TEST

/* Cache owner ids are a cache's own: a file read through one cache is
 * refused by a second (its id there could name another file's entries),
 * never answered with wrong bytes. */
START_TEST(test_second_cache_refused)
{
	tf_workspace *ws = tf_workspace_new();
	tf_cache *c1 = new_cache(MIB, 0), *c2 = new_cache(MIB, 0);
	test_file a, b;
	tf_handle *ha, *hb;
	tf_file *fa, *fb;
	uint8_t buf[4096];
	tf_error err;
	size_t got;

	test_file_make(&a, "a.tdb", "zstd", TF_DT_INT32, two_tiles, 2, TF_GEN_WALK, 1);
	test_file_make(&b, "b.tdb", "zstd", TF_DT_INT32, two_tiles, 2, TF_GEN_WALK, 2);
	fa = tf_test_file_ok(a.path, &a.spec);
	fb = tf_test_file_ok(b.path, &b.spec);
	ha = tf_test_handle_ok(fa);
	hb = tf_test_handle_ok(fb);
	check_read(hb, c2, ws, b.plain, b.size, 0, sizeof(buf));	/* b: owner 1 of c2 */
	check_read(ha, c1, ws, a.plain, a.size, 0, sizeof(buf));	/* a: owner 1 of c1 */
	ck_assert_int_eq(tf_handle_read(ha, c2, ws, 0, sizeof(buf), buf, &got, &err), TF_E_INVAL);
	ck_assert_msg(strstr(err.msg, "second cache"), "%s", err.msg);
	check_read(ha, c1, ws, a.plain, a.size, 0, sizeof(buf));
	tf_handle_close(ha);
	tf_handle_close(hb);
	tf_file_unref(fa);
	tf_file_unref(fb);
	tf_cache_free(c1);
	tf_cache_free(c2);
	test_file_free(&a);
	test_file_free(&b);
	tf_workspace_free(ws);
}
END_TEST

/* Rewritten in place with other bytes of the same size after the handle
 * was opened: what was not cached fails TF_E_STALE, what was cached is the
 * old version's; never the new bytes through the old index. */
START_TEST(test_stale_rewritten)
{
	tf_workspace *ws = tf_workspace_new();
	tf_cache *c = new_cache(MIB, 0);
	uint8_t buf[1000];
	test_file a, b;
	tf_error err;
	tf_status rc;
	tf_handle *h, *h2;
	tf_file *f;
	size_t got;

	/* No compression: the same tiles give the same stored size. */
	test_file_make(&a, "a.tdb", "", TF_DT_UINT8, two_tiles, 2, TF_GEN_RANDOM, 3);
	test_file_make(&b, "b.tdb", "", TF_DT_UINT8, two_tiles, 2, TF_GEN_RANDOM, 4);
	ck_assert_uint_eq(a.stored.len, b.stored.len);
	f = tf_test_file_ok(a.path, &a.spec);
	h = tf_test_handle_ok(f);
	check_read(h, c, ws, a.plain, a.size, 0, sizeof(buf));
	rewrite_in_place(a.path, b.stored.p, b.stored.len, tf_file_version(f));
	check_read_fails(h, c, ws, 150000, sizeof(buf), TF_E_STALE, "a.tdb");
	check_read_fails(h, c, ws, 70000, sizeof(buf), TF_E_STALE, "changed");
	rc = tf_handle_read(h, c, ws, 0, sizeof(buf), buf, &got, &err);
	ck_assert_msg(rc == TF_E_STALE || (rc == TF_OK && got == sizeof(buf) && !memcmp(buf, a.plain, got)),
		      "a cached range gave %d", rc);
	ck_assert_int_eq(tf_handle_open(f, &h2, &err), TF_E_STALE);
	tf_handle_close(h);
	tf_file_unref(f);
	f = tf_test_file_ok(a.path, &a.spec);
	h = tf_test_handle_ok(f);
	check_read(h, c, ws, b.plain, b.size, 0, b.size);
	tf_handle_close(h);
	tf_file_unref(f);
	tf_cache_free(c);
	test_file_free(&a);
	test_file_free(&b);
	tf_workspace_free(ws);
}
END_TEST

/* Truncated under an open handle: every read that reaches the file fails. */
START_TEST(test_stale_truncated)
{
	tf_workspace *ws = tf_workspace_new();
	tf_cache *c = new_cache(MIB, 2);
	test_file a;
	tf_error err;
	tf_handle *h, *h2;
	tf_file *f;

	test_file_make(&a, "a.tdb", "zstd", TF_DT_INT32, two_tiles, 2, TF_GEN_WALK, 5);
	f = tf_test_file_ok(a.path, &a.spec);
	h = tf_test_handle_ok(f);
	ck_assert_int_eq(truncate(a.path, (off_t)a.stored.len / 2), 0);
	check_read_fails(h, c, ws, 150000, 1000, TF_E_STALE, "a.tdb");	/* cut off */
	check_read_fails(h, c, ws, 0, 1000, TF_E_STALE, "a.tdb");	/* still there */
	check_read_fails(h, c, ws, 0, a.size, TF_E_STALE, "a.tdb");
	ck_assert_int_eq(tf_handle_open(f, &h2, &err), TF_E_STALE);
	wait_idle(c);
	ck_assert_uint_eq(stats_of(c).pinned, 0);
	ck_assert_uint_eq(stats_of(c).entries, 0);
	tf_handle_close(h);
	tf_file_unref(f);
	tf_cache_free(c);
	test_file_free(&a);
	tf_workspace_free(ws);
}
END_TEST

/* ---- 4. done chunks ---------------------------------------------------------------------------- */

#define SCAN_TILES 64		/* of 1 MiB: a 64 MiB file */
#define SCAN_BUDGET (32 * MIB)
#define SCAN_REQUEST (128 << 10)
/* tf_cache.c: done_keep = min(budget / 16, 4 MiB); tf_handle.c: the
 * decode-ahead window is 8 MiB at most (and a quarter of the budget). */
#define DONE_KEEP (SCAN_BUDGET / 16)
#define AHEAD_WINDOW (8 * MIB)

/* Unit k of the scan file: `base` with k in its first 8 bytes. */
static void write_scan_file(const char *path, const uint8_t *base)
{
	static const size_t tile[] = { MIB };
	uint8_t *plain = malloc(MIB);
	tf_buf out = TF_BUF_INIT(SIZE_MAX);
	FILE *fp = fopen(path, "wb");

	ck_assert(plain && fp);
	for (uint64_t t = 0; t < SCAN_TILES; t++) {
		for (uint64_t u = 0; u < MIB / UNIT; u++) {
			uint64_t k = t * (MIB / UNIT) + u;
			memcpy(plain + u * UNIT, base, UNIT);
			memcpy(plain + u * UNIT, &k, sizeof(k));
		}
		out.len = 0;
		encode_tiles("", TF_DT_UINT8, plain, tile, 1, &out);
		ck_assert_uint_eq(fwrite(out.p, 1, out.len, fp), out.len);
	}
	ck_assert_int_eq(fclose(fp), 0);
	tf_buf_free(&out);
	free(plain);
}

/* The pinned slices of [off, off + SCAN_REQUEST): whole units, each the
 * right one. */
static void check_scan_slices(const tf_slices *s, uint64_t off, const uint8_t *base)
{
	ck_assert_uint_eq(s->bytes, SCAN_REQUEST);
	ck_assert_uint_eq(s->n, SCAN_REQUEST / UNIT);
	for (size_t i = 0; i < s->n; i++) {
		uint64_t k;

		ck_assert(s->v[i].whole && s->v[i].n == UNIT);
		memcpy(&k, s->v[i].p, sizeof(k));
		ck_assert_uint_eq(k, off / UNIT + i);
		ck_assert(memcmp(s->v[i].p + 8, base + 8, UNIT - 8) == 0);
	}
}

/* A 64 MiB sequential scan with a 32 MiB budget, its units passed on
 * (like replies that went to the page cache) or not. */
START_TEST(test_done_recycling)
{
	bool passed_on = _i == 1;
	tf_workspace *ws = tf_workspace_new();
	tf_cache *c = new_cache(SCAN_BUDGET, 2);
	uint8_t *base = tf_test_data(UNIT, TF_GEN_RANDOM, 1, 77);
	tf_file_spec spec = { .type = TF_DT_UINT8, .cell_val_num = 1, .pipeline = tf_test_pipeline("") };
	tf_slices s = { 0 };
	size_t max_used = 0;
	char path[PATH_MAX];
	tf_cache_stats st;
	tf_error err;
	tf_handle *h;
	tf_file *f;

	tf_test_tmp_path(path, "scan.tdb");
	write_scan_file(path, base);
	f = tf_test_file_ok(path, &spec);
	ck_assert_uint_eq(tf_file_size(f), SCAN_TILES * MIB);
	h = tf_test_handle_ok(f);
	for (uint64_t off = 0; off < SCAN_TILES * MIB; off += SCAN_REQUEST) {
		ck_assert_msg(tf_handle_pin(h, c, ws, off, SCAN_REQUEST, &s, &err) == TF_OK, "%s", err.msg);
		check_scan_slices(&s, off, base);
		tf_handle_unpin(c, &s, passed_on);
		st = stats_of(c);
		max_used = st.used > max_used ? st.used : max_used;
	}
	wait_idle(c);
	st = stats_of(c);
	ck_assert_uint_eq(st.pinned, 0);
	ck_assert_uint_le(st.used, st.budget);
	/* Each unit decoded once, give or take a decode-ahead job that checked
	 * the reader's position just before the reader went past (a unit
	 * decoded again for nobody; before the fix, 30% of them). */
	ck_assert_uint_ge(st.misses, SCAN_TILES * MIB / UNIT);
	ck_assert_uint_le(st.misses, SCAN_TILES * MIB / UNIT + 32);
	if (passed_on) {
		ck_assert_msg(max_used <= DONE_KEEP + AHEAD_WINDOW + 16 * UNIT, "used up to %zu", max_used);
		ck_assert_uint_gt(st.recycled, SCAN_TILES * MIB / UNIT / 2);
	} else {
		ck_assert_uint_ge(st.used, SCAN_BUDGET - 2 * UNIT);	/* full */
		ck_assert_uint_eq(st.recycled, 0);
		ck_assert_uint_gt(st.evictions, 0);
	}
	tf_slices_free(&s);
	tf_handle_close(h);
	tf_file_unref(f);
	tf_cache_free(c);
	tf_pipeline_free((tf_pipeline *)spec.pipeline);
	free(base);
	tf_workspace_free(ws);
}
END_TEST

/* ---- 5. decode-ahead and concurrent readers ----------------------------------------------------- */

static const size_t four_mib[] = { MIB, MIB, MIB, MIB };

/* A sequential reader gets the window after it decoded by the workers
 * (counted as prefetches); its next request then claims nothing itself. */
START_TEST(test_decode_ahead)
{
	tf_workspace *ws = tf_workspace_new();
	tf_cache *c = new_cache(8 * MIB, 2);
	tf_cache_stats st, st2;
	test_file a;
	tf_handle *h;
	tf_file *f;

	test_file_make(&a, "a.tdb", "zstd", TF_DT_INT32, four_mib, 4, TF_GEN_WALK, 6);
	f = tf_test_file_ok(a.path, &a.spec);
	h = tf_test_handle_ok(f);
	check_read(h, c, ws, a.plain, a.size, 0, UNIT);
	check_read(h, c, ws, a.plain, a.size, UNIT, UNIT);
	wait_idle(c);
	st = stats_of(c);
	ck_assert_uint_gt(st.prefetches, 0);
	check_read(h, c, ws, a.plain, a.size, 2 * UNIT, MIB);
	wait_idle(c);
	st2 = stats_of(c);
	ck_assert_uint_eq(st2.misses - st2.prefetches, st.misses - st.prefetches);
	ck_assert_uint_ge(st2.hits, st.hits + MIB / UNIT);
	ck_assert_uint_eq(st2.pinned, 0);
	tf_handle_close(h);
	tf_file_unref(f);
	tf_cache_free(c);
	test_file_free(&a);
	tf_workspace_free(ws);
}
END_TEST

enum { READERS = 8, READER_OPS = 40 };

typedef struct shared_read {
	tf_cache *c;
	const test_file *tf;
	tf_handle *shared;		/* readers 0-3 share it, 4-7 open their own */
	tf_file *f;
	atomic_uint bad, ops;
	pthread_mutex_t lock;
	char first_error[TF_ERRMSG_MAX + 64];
	pthread_barrier_t start;
} shared_read;

typedef struct read_thread {
	shared_read *s;
	unsigned id;
	pthread_t thread;
} read_thread;

static void record_bad(shared_read *s, const char *what, uint64_t off, size_t len)
{
	atomic_fetch_add(&s->bad, 1);
	pthread_mutex_lock(&s->lock);
	if (!s->first_error[0])
		snprintf(s->first_error, sizeof(s->first_error), "%s (%zu at %llu)", what, len,
			 (unsigned long long)off);
	pthread_mutex_unlock(&s->lock);
}

/* One read, every byte compared. */
static void reader_op(shared_read *s, tf_handle *h, tf_workspace *ws, uint8_t *buf, uint64_t off, size_t len)
{
	uint64_t size = s->tf->size;
	size_t want = off >= size ? 0 : (size - off < len ? (size_t)(size - off) : len), got;
	tf_error err;

	atomic_fetch_add(&s->ops, 1);
	if (tf_handle_read(h, s->c, ws, off, len, buf, &got, &err) != TF_OK)
		record_bad(s, err.msg, off, len);
	else if (got != want || memcmp(buf, s->tf->plain + off, got) != 0)
		record_bad(s, "wrong bytes", off, len);
}

static void *reader_main(void *arg)
{
	read_thread *t = arg;
	shared_read *s = t->s;
	tf_workspace *ws = tf_workspace_new();
	uint8_t *buf = malloc(MIB);
	uint64_t rng = 900 + t->id, size = s->tf->size;
	tf_handle *h = NULL;

	if (t->id < READERS / 2)
		h = tf_handle_ref(s->shared);
	else if (tf_handle_open(s->f, &h, NULL) != TF_OK)
		h = NULL;
	pthread_barrier_wait(&s->start);
	for (unsigned op = 0; h && ws && buf && op < READER_OPS; op++) {
		uint64_t r = rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t off = (r >> 16) % (size + 100);

		if (r % 8 == 0) {		/* a sequential run */
			for (int k = 0; k < 6; k++, off += 48 << 10)
				reader_op(s, h, ws, buf, off, 48 << 10);
		} else if (r % 8 == 1) {	/* a kernel-sized request */
			reader_op(s, h, ws, buf, off, MIB);
		} else {
			reader_op(s, h, ws, buf, off, 1 + (size_t)((r >> 40) % 20000));
		}
	}
	if (!h || !ws || !buf)
		record_bad(s, "no handle, workspace or buffer", 0, 0);
	tf_handle_close(h);
	free(buf);
	tf_workspace_free(ws);
	return NULL;
}

/* A cold 1 MiB read with idle workers (its claims shared with them), then
 * eight readers at once: random ranges, sequential runs, 1 MiB requests. */
START_TEST(test_concurrent_readers)
{
	static const size_t tiles[] = { 300000, 1048576, 4, 0, 700004, 1500000 };
	tf_workspace *ws = tf_workspace_new();
	shared_read s = { 0 };
	read_thread t[READERS];
	tf_cache_stats st;
	test_file a;

	test_file_make(&a, "a.tdb", "zstd", TF_DT_INT32, tiles, 6, TF_GEN_WALK, 7);
	s.c = new_cache(MIB, 2);
	s.tf = &a;
	s.f = tf_test_file_ok(a.path, &a.spec);
	s.shared = tf_test_handle_ok(s.f);
	check_read(s.shared, s.c, ws, a.plain, a.size, 100000, MIB);
	pthread_mutex_init(&s.lock, NULL);
	pthread_barrier_init(&s.start, NULL, READERS);
	for (unsigned i = 0; i < READERS; i++) {
		t[i] = (read_thread){ .s = &s, .id = i };
		ck_assert_int_eq(pthread_create(&t[i].thread, NULL, reader_main, &t[i]), 0);
	}
	for (unsigned i = 0; i < READERS; i++)
		ck_assert_int_eq(pthread_join(t[i].thread, NULL), 0);
	ck_assert_msg(atomic_load(&s.bad) == 0, "%u bad reads, first: %s", atomic_load(&s.bad), s.first_error);
	ck_assert_uint_ge(atomic_load(&s.ops), READERS * READER_OPS);
	wait_idle(s.c);
	st = stats_of(s.c);
	ck_assert_uint_eq(st.pinned, 0);
	ck_assert_uint_le(st.used, st.budget);
	ck_assert_uint_gt(st.evictions, 0);
	pthread_barrier_destroy(&s.start);
	pthread_mutex_destroy(&s.lock);
	tf_handle_close(s.shared);
	tf_file_unref(s.f);
	tf_cache_free(s.c);
	test_file_free(&a);
	tf_workspace_free(ws);
}
END_TEST

/* ---- 6. pins ---------------------------------------------------------------------------------- */

/* The bytes of pinned slices, in order, equal plain from off on. */
static void check_slices(const tf_slices *s, const uint8_t *plain, uint64_t off, uint64_t bytes)
{
	uint64_t at = off;

	ck_assert_uint_eq(s->bytes, bytes);
	for (size_t i = 0; i < s->n; at += s->v[i++].n)
		ck_assert_msg(memcmp(s->v[i].p, plain + at, s->v[i].n) == 0, "slice %zu differs", i);
	ck_assert_uint_eq(at, off + bytes);
}

/* A request larger than the budget is pinned whole (each unit fits; pins
 * are never evicted) and its slices survive heavy pressure; unpinned, the
 * budget holds again.  Empty and clipped requests. */
START_TEST(test_pins_beyond_budget)
{
	static const size_t tiles[] = { MIB, MIB };
	const size_t budget = 256 << 10;
	tf_workspace *ws = tf_workspace_new();
	tf_cache *c = new_cache(budget, 0);
	tf_slices s = { 0 }, t = { 0 };
	tf_cache_stats st;
	test_file a;
	tf_error err;
	tf_handle *h;
	tf_file *f;

	test_file_make(&a, "a.tdb", "lz4", TF_DT_UINT8, tiles, 2, TF_GEN_RUNS, 8);
	f = tf_test_file_ok(a.path, &a.spec);
	h = tf_test_handle_ok(f);
	ck_assert_msg(tf_handle_pin(h, c, ws, 0, MIB, &s, &err) == TF_OK, "%s", err.msg);
	check_slices(&s, a.plain, 0, MIB);
	st = stats_of(c);
	ck_assert_uint_eq(st.pinned, MIB / UNIT);
	ck_assert_uint_gt(st.used, budget);
	for (uint64_t off = MIB; off < 2 * MIB; off += UNIT)	/* pressure */
		check_read(h, c, ws, a.plain, a.size, off, UNIT);
	st = stats_of(c);
	ck_assert_uint_gt(st.evictions, 0);
	ck_assert_uint_eq(st.pinned, MIB / UNIT);
	check_slices(&s, a.plain, 0, MIB);
	tf_handle_unpin(c, &s, false);
	ck_assert_uint_eq(stats_of(c).pinned, 0);
	ck_assert_uint_le(stats_of(c).used, budget);

	ck_assert(tf_handle_pin(h, c, ws, 5, 0, &s, &err) == TF_OK && s.n == 0 && s.bytes == 0);
	ck_assert(tf_handle_pin(h, c, ws, a.size, 10, &s, &err) == TF_OK && s.n == 0);
	ck_assert(tf_handle_pin(h, c, ws, a.size - 10, 100, &s, &err) == TF_OK);
	check_slices(&s, a.plain, a.size - 10, 10);
	ck_assert(!s.v[s.n - 1].whole);
	ck_assert(tf_handle_pin(h, c, ws, a.size - 10, 100, &t, &err) == TF_OK);	/* twice */
	ck_assert_ptr_eq(t.v[0].e, s.v[0].e);
	tf_handle_unpin(c, &t, true);
	tf_handle_unpin(c, &s, true);	/* not whole: not done */
	ck_assert_uint_eq(stats_of(c).pinned, 0);
	ck_assert_uint_eq(stats_of(c).recycled, 0);
	tf_slices_free(&s);
	tf_slices_free(&t);
	tf_handle_close(h);
	tf_file_unref(f);
	tf_cache_free(c);
	test_file_free(&a);
	tf_workspace_free(ws);
}
END_TEST

#define HUGE_CHUNK 300000	/* one chunk, larger than the 256 KiB budget */

/* A unit larger than the whole budget is refused (its length may be a
 * lie), cleanly: the request fails, nothing stays pinned or claimed, the
 * rest of the file reads, and the unit still decodes outside the cache. */
START_TEST(test_unit_beyond_budget)
{
	static const size_t tile0[] = { 150000 };
	tf_workspace *ws = tf_workspace_new();
	tf_cache *c = new_cache(256 << 10, 0);
	tf_slices s = { 0 };
	test_file a = { 0 };
	tf_unit_info ui;
	tf_error err;
	tf_handle *h;
	tf_file *f;
	uint8_t *dst;

	a.size = tile0[0] + HUGE_CHUNK;
	a.plain = tf_test_data(a.size, TF_GEN_RANDOM, 1, 9);
	tf_buf_init(&a.stored, SIZE_MAX);
	encode_tiles("", TF_DT_UINT8, a.plain, tile0, 1, &a.stored);
	encode_chunked_tile("", a.plain + tile0[0], HUGE_CHUNK, HUGE_CHUNK, &a.stored);
	a.spec = (tf_file_spec){ .type = TF_DT_UINT8, .cell_val_num = 1, .pipeline = tf_test_pipeline("") };
	tf_test_tmp_path(a.path, "huge.tdb");
	tf_test_write_file(a.path, a.stored.p, a.stored.len);
	f = tf_test_file_ok(a.path, &a.spec);
	h = tf_test_handle_ok(f);
	ck_assert_uint_eq(units_of(h, 1), 1);
	tf_handle_unit_info(h, 1, 0, &ui);
	ck_assert_uint_eq(ui.size, HUGE_CHUNK);

	ck_assert_int_eq(tf_handle_pin(h, c, ws, 0, a.size, &s, &err), TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "huge.tdb: tile 1") && strstr(err.msg, "larger than the cache budget"),
		      "%s", err.msg);
	ck_assert_uint_eq(s.n, 0);
	ck_assert_uint_eq(stats_of(c).pinned, 0);
	/* tile 0's claims were filled all the same (another reader may wait on them) */
	ck_assert_uint_eq(stats_of(c).entries, units_of(h, 0));
	check_read_fails(h, c, ws, tile0[0] + 5, 10, TF_E_CORRUPT, "larger than the cache budget");
	check_read(h, c, ws, a.plain, a.size, 0, tile0[0]);
	dst = malloc(HUGE_CHUNK);
	ck_assert_ptr_nonnull(dst);
	ck_assert_msg(tf_handle_decode_unit(h, ws, 1, 0, dst, &err) == TF_OK, "%s", err.msg);
	ck_assert(memcmp(dst, a.plain + tile0[0], HUGE_CHUNK) == 0);
	free(dst);
	tf_slices_free(&s);
	tf_handle_close(h);
	tf_file_unref(f);
	tf_cache_free(c);
	test_file_free(&a);
	tf_workspace_free(ws);
}
END_TEST

/* ---- suite -------------------------------------------------------------------------------------- */

/* Pin [off, off+len) for a reader that takes a short read: the status, and
 * the pinned bytes before the first failing unit compared with plain. */
static tf_status pin_prefix(tf_handle *h, tf_cache *c, tf_workspace *ws, const uint8_t *plain, uint64_t off,
			    size_t len, uint64_t want_bytes, tf_error *err)
{
	tf_slices s = { 0 };
	tf_status rc = tf_handle_pin_prefix(h, c, ws, off, len, &s, err);

	check_slices(&s, plain, off, want_bytes);
	tf_handle_unpin(c, &s, false);
	tf_slices_free(&s);
	ck_assert_uint_eq(stats_of(c).pinned, 0);
	return rc;
}

#define KIB_TILES 8
#define BAD_TILE 2

/* A short read (issue 19): 1 KiB tiles, tile 2 damaged.  A reader that can
 * take fewer bytes gets those before the bad unit and its error; none when
 * it starts in it; all when it starts after.  tf_handle_pin still fails the
 * whole request. */
START_TEST(test_prefix_before_bad_unit)
{
	static const size_t tiles[KIB_TILES] = { 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024 };
	tf_workspace *ws = tf_workspace_new();
	tf_cache *c = new_cache(MIB, 0);
	tf_slices s = { 0 };
	test_file a;
	tf_chunk_header hd;
	chunk_list l;
	tf_error err;
	tf_handle *h;
	tf_file *f;

	test_file_make(&a, "kib.tdb", "zstd | checksum_md5", TF_DT_UINT8, tiles, KIB_TILES, TF_GEN_RANDOM, 19);
	f = tf_test_file_ok(a.path, &a.spec);
	h = tf_test_handle_ok(f);
	l = chunks_of(h, ws, BAD_TILE);
	tf_chunk_header_read(a.stored.p + l.v[0].src_off, &hd);
	patch(a.path, l.v[0].src_off + TF_CHUNK_HEADER_SIZE + hd.md_len, 0x40);
	free(l.v);
	tf_handle_close(h);	/* the version indexed is gone */
	tf_file_unref(f);
	f = tf_test_file_ok(a.path, &a.spec);
	h = tf_test_handle_ok(f);

	ck_assert_int_eq(pin_prefix(h, c, ws, a.plain, 0, 8192, 2048, &err), TF_E_CHECKSUM);
	ck_assert_msg(strstr(err.msg, "kib.tdb: tile 2, chunk 0"), "%s", err.msg);
	ck_assert_int_eq(pin_prefix(h, c, ws, a.plain, 100, 5000, 1948, &err), TF_E_CHECKSUM);
	ck_assert_int_eq(pin_prefix(h, c, ws, a.plain, 2047, 2, 1, &err), TF_E_CHECKSUM);
	ck_assert_int_eq(pin_prefix(h, c, ws, a.plain, 2048, 8192, 0, &err), TF_E_CHECKSUM);
	ck_assert_int_eq(pin_prefix(h, c, ws, a.plain, 3071, 1, 0, &err), TF_E_CHECKSUM);
	ck_assert_int_eq(pin_prefix(h, c, ws, a.plain, 3072, 8192, 5120, &err), TF_OK);
	ck_assert_int_eq(pin_prefix(h, c, ws, a.plain, 0, 2048, 2048, &err), TF_OK);
	/* The whole request fails for a reader that cannot take less. */
	ck_assert_int_eq(tf_handle_pin(h, c, ws, 0, 8192, &s, &err), TF_E_CHECKSUM);
	ck_assert_uint_eq(s.n, 0);
	ck_assert_uint_eq(s.bytes, 0);
	ck_assert_uint_eq(stats_of(c).pinned, 0);
	tf_slices_free(&s);
	tf_handle_close(h);
	tf_file_unref(f);
	tf_cache_free(c);
	test_file_free(&a);
	tf_workspace_free(ws);
}
END_TEST

/* The same when the failure is in finding a tile's units (an array's
 * chunk list read lazily): the bytes of the tiles before it. */
START_TEST(test_prefix_before_bad_tile_list)
{
	tf_chunk_env env = { .type = TF_DT_UINT8, .cell_size = 1, .version = 22 };
	tf_buf file = TF_BUF_INIT(SIZE_MAX);
	tf_workspace *ws = tf_workspace_new();
	tf_pipeline *none = tf_pipeline_new();
	uint8_t *data = tf_test_data(4096, TF_GEN_RANDOM, 1, 20);
	tf_tile_layout lay[2];
	tf_file_spec spec = { .pipeline = none, .type = TF_DT_UINT8, .cell_val_num = 1, .tiles = lay, .ntiles = 2 };
	tf_cache *c = new_cache(MIB, 0);
	char path[PATH_MAX];
	tf_handle *h;
	tf_file *f;
	tf_error err;

	ck_assert(tf_tile_encode(none, &env, ws, tf_span_of(data, 4096), NULL, 0, &file, NULL) == TF_OK);
	lay[0] = (tf_tile_layout){ 0, file.len, 4096 };
	lay[1] = (tf_tile_layout){ file.len, 16, 4096 };	/* 5 chunks claimed in 8 bytes */
	ck_assert(tf_buf_put_u64(&file, 5, NULL) == TF_OK);
	ck_assert(tf_buf_put_u64(&file, 0, NULL) == TF_OK);
	tf_test_tmp_path(path, "a2.tdb");
	tf_test_write_file(path, file.p, file.len);
	f = tf_test_file_ok(path, &spec);
	h = tf_test_handle_ok(f);
	ck_assert_int_ne(pin_prefix(h, c, ws, data, 1000, 8192, 3096, &err), TF_OK);
	ck_assert_int_ne(pin_prefix(h, c, ws, data, 4096, 100, 0, &err), TF_OK);
	tf_handle_close(h);
	tf_file_unref(f);
	tf_cache_free(c);
	tf_buf_free(&file);
	tf_pipeline_free(none);
	tf_workspace_free(ws);
	free(data);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("handle");
	TCase *units = tcase_create("units"), *stale = tcase_create("stale");
	TCase *memory = tcase_create("memory"), *threads = tcase_create("threads");
	TCase *all[] = { units, stale, memory, threads };

	tcase_add_test(units, test_tiny_chunks_units);
	tcase_add_test(units, test_corrupt_chunk_in_unit);
	tcase_add_test(units, test_failed_request_fills_its_claims);
	tcase_add_test(units, test_prefix_before_bad_unit);
	tcase_add_test(units, test_prefix_before_bad_tile_list);
	tcase_add_test(stale, test_stale_replaced);
	tcase_add_test(stale, test_stale_rewritten);
	tcase_add_test(stale, test_stale_truncated);
	tcase_add_test(stale, test_second_cache_refused);
	tcase_add_loop_test(memory, test_done_recycling, 0, 2);	/* passed on: no, yes */
	tcase_add_test(memory, test_pins_beyond_budget);
	tcase_add_test(memory, test_unit_beyond_budget);
	tcase_add_test(threads, test_decode_ahead);
	tcase_add_test(threads, test_concurrent_readers);
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		tcase_add_checked_fixture(all[i], tf_test_tmp_setup, tf_test_tmp_teardown);
		/* Slow under valgrind and the sanitizers, never for lack of progress. */
		tcase_set_timeout(all[i], 600);
		suite_add_tcase(s, all[i]);
	}
	return s;
}

TF_TEST_MAIN(suite)
