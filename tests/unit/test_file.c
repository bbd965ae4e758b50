/*
 * test_file.c - tf_file over real files, read through handles, and the
 * writer side of tf_tile.
 *
 *   - the index: tiles, decode units and chunk headers of files with many
 *     tiles and chunks, empty tiles and zero-length chunks; every unit
 *     decoded on its own; reads through a small cache (with and without
 *     workers) at every chunk boundary, across tiles, past the end; tiles
 *     given by the caller instead of walked;
 *   - writer chunking against TileDB's own: corpus tiles re-encoded must
 *     give the chunk headers the manifests list, and the very same file
 *     where no AES (random IVs) is involved;
 *   - offsets folded into string RLE / dictionary data, rebuilt as TileDB
 *     would have stored them;
 *   - every truncation and thousands of bit flips of small files on disk:
 *     a clean failure or bytes, never a crash; never wrong bytes where a
 *     checksum or AES-GCM tag guards them;
 *   - error messages naming file, tile, chunk and filter.
 * The read path's own behaviours (units of tiny chunks, stale files, done
 * chunks, concurrent readers, pins) are test_handle.c's.
 */
#include "tf_test.h"

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cache/tf_cache.h"
#include "format/tf_file.h"
#include "cache/tf_handle.h"
#include "util/tf_keys.h"

#define KEY_A "TileDB-oracle-key-0123456789ABCD"	/* the corpus's key */
#define KEY_B "another-key-of-32-bytes-00000000"
#define HANG_GUARD_MS 60000	/* bounded polling for workers to go idle */

/* Format a path into out[PATH_MAX]; a path that does not fit fails the test. */
static void __attribute__((format(printf, 2, 3))) path_printf(char *out, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, PATH_MAX, fmt, ap);
	va_end(ap);
	ck_assert_msg(n >= 0 && n < PATH_MAX, "path too long");
}

/* ---- pipelines, keys, encoding ------------------------------------------------------- */

static tf_key *key_of(const char *text)
{
	tf_key *k;
	tf_error err;

	ck_assert_msg(tf_key_from_bytes(text, strlen(text), &k, &err) == TF_OK, "%s", err.msg);
	return k;
}

/* The pipeline a writer runs: AES-256-GCM last when encrypted (§9). */
static tf_pipeline *writer_pipeline(const char *spec, const tf_key *key)
{
	tf_pipeline *p = tf_test_pipeline(spec);

	if (key)
		ck_assert(tf_pipeline_append(p, TF_F_AES_256_GCM, NULL) == TF_OK);
	return p;
}

/* A tile file made by our writer: stored bytes and what they decode to. */
typedef struct made_file {
	tf_buf stored;
	uint8_t *plain;
	size_t size;
} made_file;

static void made_free(made_file *m)
{
	tf_buf_free(&m->stored);
	free(m->plain);
}

/* Fixed-size cells: tiles of the given byte sizes, values from `kind`. */
static void make_fixed(const char *spec, tf_datatype type, uint32_t cvn, const tf_key *key,
		       const size_t *tiles, size_t ntiles, tf_gen kind, uint64_t seed, made_file *m)
{
	tf_chunk_env env = { .type = type, .cell_size = cvn * tf_datatype_size(type), .version = 22,
			     .key = key };
	tf_pipeline *p = writer_pipeline(spec, key);
	tf_workspace *ws = tf_workspace_new();
	size_t at = 0;
	tf_error err;

	m->size = 0;
	for (size_t t = 0; t < ntiles; t++)
		m->size += tiles[t];
	m->plain = tf_test_data(m->size, kind, tf_datatype_size(type), seed);
	tf_buf_init(&m->stored, SIZE_MAX);
	for (size_t t = 0; t < ntiles; at += tiles[t++])
		ck_assert_msg(tf_tile_encode(p, &env, ws, tf_span_of(m->plain + at, tiles[t]), NULL, 0,
					     &m->stored, &err) == TF_OK, "tile %zu: %s", t, err.msg);
	tf_workspace_free(ws);
	tf_pipeline_free(p);
}

/* A var STRING_ASCII tile of `ncells` cells of the given lengths (letters),
 * appended to m->plain; its stored form to m->stored. */
static void add_var_tile(const tf_pipeline *p, const tf_chunk_env *env, tf_workspace *ws,
			 const size_t *lens, size_t ncells, made_file *m)
{
	uint64_t *off = malloc((ncells ? ncells : 1) * sizeof(*off));
	size_t start = m->size, n = 0;
	tf_error err;

	ck_assert_ptr_nonnull(off);
	for (size_t c = 0; c < ncells; n += lens[c++])
		off[c] = n;
	m->plain = realloc(m->plain, start + n + 1);
	ck_assert_ptr_nonnull(m->plain);
	for (size_t i = 0; i < n; i++)
		m->plain[start + i] = (uint8_t)('a' + (start + i) * 7 % 26);
	m->size += n;
	ck_assert_msg(tf_tile_encode(p, env, ws, tf_span_of(m->plain + start, n), off, ncells,
				     &m->stored, &err) == TF_OK, "%s", err.msg);
	free(off);
}

/* ---- chunks and units ------------------------------------------------------------------- */

/* The chunks of one tile as tf_handle_each_chunk reports them. */
typedef struct chunk_list {
	tf_chunk_info *v;
	size_t n, cap;
	size_t bad_index;	/* chunks reported out of order */
} chunk_list;

static int collect_chunk(void *ctx, size_t chunk, const tf_chunk_info *ci)
{
	chunk_list *l = ctx;

	if (chunk != l->n)
		l->bad_index++;
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 16;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		if (!l->v)
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
	ck_assert_uint_eq(l.bad_index, 0);
	return l;
}

static size_t units_of(tf_handle *h, size_t tile)
{
	size_t n;
	tf_error err;

	ck_assert_msg(tf_handle_tile_units(h, tile, &n, &err) == TF_OK, "tile %zu: %s", tile, err.msg);
	return n;
}

/* Tile t's chunks lie back to back from the tile's decoded start (and, for
 * stored chunks, in the file), and its units are runs of whole chunks:
 * each unit's ranges are those of its chunks. */
static void check_units_match_chunks(tf_handle *h, size_t t, const chunk_list *l)
{
	uint64_t toff, tsize, sum = 0;
	size_t n = units_of(h, t), c = 0;

	tf_file_tile_range(tf_handle_file(h), t, &toff, &tsize);
	for (size_t i = 0; i < l->n; sum += l->v[i++].size) {
		ck_assert_uint_eq(l->v[i].off, toff + sum);
		ck_assert(i == 0 || l->v[i].src_off >= l->v[i - 1].src_off + l->v[i - 1].src_len);
	}
	ck_assert_uint_eq(sum, tsize);
	for (size_t u = 0; u < n; u++) {
		tf_unit_info ui;
		uint64_t src_len = 0, size = 0;

		tf_handle_unit_info(h, t, u, &ui);
		ck_assert_uint_eq(ui.first_chunk, c);
		ck_assert_uint_ge(ui.nchunks, 1);
		ck_assert_uint_le(c + ui.nchunks, l->n);
		ck_assert_uint_eq(ui.off, l->v[c].off);
		ck_assert_uint_eq(ui.src_off, l->v[c].src_off);
		for (uint32_t k = 0; k < ui.nchunks; k++, c++) {
			src_len += l->v[c].src_len;
			size += l->v[c].size;
		}
		ck_assert_uint_eq(ui.src_len, src_len);
		ck_assert_uint_eq(ui.size, size);
		/* At most 64 KiB decoded unless one chunk alone is larger. */
		ck_assert(ui.nchunks == 1 || ui.size <= 65536);
	}
	ck_assert_uint_eq(c, l->n);
}

/*
 * Decode every unit of every tile on its own and compare it with plain;
 * the units (and the chunks) must tile the decoded file without gap or
 * overlap.  Returns the number of chunks.
 */
static size_t check_all_units(tf_handle *h, tf_workspace *ws, const uint8_t *plain, uint64_t size)
{
	tf_file *f = tf_handle_file(h);
	uint64_t expect_off = 0;
	size_t chunks = 0;
	tf_error err;

	ck_assert_uint_eq(tf_file_size(f), size);
	for (size_t t = 0; t < tf_file_ntiles(f); t++) {
		uint64_t toff, tsize, sum = 0;
		size_t n = units_of(h, t);
		chunk_list l = chunks_of(h, ws, t);

		tf_file_tile_range(f, t, &toff, &tsize);
		ck_assert_uint_eq(toff, expect_off);
		for (size_t u = 0; u < n; u++) {
			tf_unit_info ui;
			uint8_t *dst;

			tf_handle_unit_info(h, t, u, &ui);
			ck_assert_uint_eq(ui.off, toff + sum);
			dst = malloc(ui.size ? ui.size : 1);
			ck_assert_msg(tf_handle_decode_unit(h, ws, t, u, dst, &err) == TF_OK, "%s", err.msg);
			ck_assert_msg(ui.size == 0 || memcmp(dst, plain + ui.off, ui.size) == 0,
				      "tile %zu unit %zu differs", t, u);
			free(dst);
			sum += ui.size;
		}
		ck_assert_uint_eq(sum, tsize);
		check_units_match_chunks(h, t, &l);
		chunks += l.n;
		free(l.v);
		expect_off += tsize;
	}
	ck_assert_uint_eq(expect_off, size);
	return chunks;
}

/* Read [off, off+len) through the cache and compare with plain. */
static void check_read(tf_handle *h, tf_cache *c, tf_workspace *ws, const uint8_t *plain, uint64_t size,
		       uint64_t off, size_t len)
{
	size_t want = off >= size ? 0 : (size - off < len ? (size_t)(size - off) : len), got = 99;
	uint8_t *dst = malloc(len ? len : 1);
	tf_error err;

	ck_assert_ptr_nonnull(dst);
	ck_assert_msg(tf_handle_read(h, c, ws, off, len, dst, &got, &err) == TF_OK,
		      "read %zu at %llu: %s", len, (unsigned long long)off, err.msg);
	ck_assert_msg(got == want, "read %zu at %llu: got %zu, want %zu", len,
		      (unsigned long long)off, got, want);
	ck_assert_msg(want == 0 || memcmp(dst, plain + off, want) == 0, "read %zu at %llu differs",
		      len, (unsigned long long)off);
	free(dst);
}

/* Where every chunk starts, then the end of the file (our files have few). */
static uint64_t *chunk_boundaries(tf_handle *h, tf_workspace *ws, size_t *n)
{
	tf_file *f = tf_handle_file(h);
	size_t cap = 64;
	uint64_t *v = malloc(cap * sizeof(*v));

	ck_assert_ptr_nonnull(v);
	*n = 0;
	for (size_t t = 0; t < tf_file_ntiles(f); t++) {
		chunk_list l = chunks_of(h, ws, t);

		for (size_t c = 0; c < l.n; c++) {
			ck_assert_uint_lt(*n, cap - 1);
			v[(*n)++] = l.v[c].off;
		}
		free(l.v);
	}
	v[(*n)++] = tf_file_size(f);
	return v;
}

/* Wait (bounded) until no job is queued or running: then nothing is pinned
 * but by the test itself. */
static void wait_idle(tf_cache *c)
{
	for (unsigned ms = 0; ms < HANG_GUARD_MS && tf_cache_backlog(c); ms++)
		usleep(1000);
	ck_assert_uint_eq(tf_cache_backlog(c), 0);
}

static uint64_t misses_of(tf_cache *c)
{
	tf_cache_stats st;

	tf_cache_get_stats(c, &st);
	return st.misses;
}

/* ---- many tiles, many chunks ------------------------------------------------------------ */

/* int32 tiles: 3 chunks, exactly one chunk, one cell, none, 4 chunks, a tail. */
static const size_t many_tiles[] = { 150000, 65536, 4, 0, 200004, 12 };
#define N_MANY (sizeof(many_tiles) / sizeof(many_tiles[0]))
#define MANY_SPEC "delta | bitshuffle | zstd"

START_TEST(test_index_and_chunks)
{
	static const size_t chunks_per_tile[N_MANY] = { 3, 1, 1, 0, 4, 1 };
	tf_file_spec spec = { .type = TF_DT_INT32, .cell_val_num = 1 };
	tf_workspace *ws = tf_workspace_new();
	char path[PATH_MAX];
	tf_file_info info;
	made_file m;
	tf_handle *h;
	tf_file *f;

	make_fixed(MANY_SPEC, TF_DT_INT32, 1, NULL, many_tiles, N_MANY, TF_GEN_WALK, 1, &m);
	tf_test_tmp_path(path, "many.tdb");
	tf_test_write_file(path, m.stored.p, m.stored.len);
	spec.pipeline = tf_test_pipeline(MANY_SPEC);
	f = tf_test_file_ok(path, &spec);
	h = tf_test_handle_ok(f);
	ck_assert_ptr_eq(tf_handle_file(h), f);
	ck_assert_uint_eq(tf_file_ntiles(f), N_MANY);
	for (size_t t = 0; t < N_MANY; t++) {
		chunk_list l = chunks_of(h, ws, t);

		ck_assert_uint_eq(l.n, chunks_per_tile[t]);
		/* TileDB's chunks (64 KiB at most) are one unit each. */
		ck_assert_uint_eq(units_of(h, t), chunks_per_tile[t]);
		free(l.v);
	}
	ck_assert_uint_eq(check_all_units(h, ws, m.plain, m.size), 10);
	tf_file_get_info(f, &info);
	ck_assert_uint_eq(info.tiles, N_MANY);
	ck_assert_uint_eq(info.chunks, 10);
	ck_assert_uint_eq(info.stored_bytes, m.stored.len);
	ck_assert_uint_eq(info.decoded_bytes, m.size);
	ck_assert(!info.encrypted && !info.generic && !info.var_string && !info.from_layout);
	tf_handle_close(h);
	tf_file_unref(f);
	tf_pipeline_free((tf_pipeline *)spec.pipeline);
	tf_workspace_free(ws);
	made_free(&m);
}
END_TEST

/* Reads at every chunk boundary +-1, short and chunk-spanning, across
 * tiles, past the end, and sequentially; a cache smaller than the file.
 * Two handles of one file share its cached units. */
START_TEST(test_reads_through_cache)
{
	static const size_t lens[] = { 1, 3, 65536 + 5 };
	unsigned workers = (unsigned)_i;
	tf_file_spec spec = { .type = TF_DT_INT32, .cell_val_num = 1 };
	tf_workspace *ws = tf_workspace_new();
	char path[PATH_MAX];
	uint64_t *starts;
	size_t nstarts;
	tf_cache_stats st;
	tf_handle *h, *h2;
	tf_cache *c;
	made_file m;
	tf_file *f;

	make_fixed(MANY_SPEC, TF_DT_INT32, 1, NULL, many_tiles, N_MANY, TF_GEN_WALK, 2, &m);
	tf_test_tmp_path(path, "many.tdb");
	tf_test_write_file(path, m.stored.p, m.stored.len);
	spec.pipeline = tf_test_pipeline(MANY_SPEC);
	f = tf_test_file_ok(path, &spec);
	h = tf_test_handle_ok(f);
	ck_assert(tf_cache_new(200 * 1024, workers, &c, NULL) == TF_OK);
	starts = chunk_boundaries(h, ws, &nstarts);
	for (size_t i = 0; i < nstarts; i++)
		for (uint64_t from = starts[i] ? starts[i] - 1 : 0; from <= starts[i] + 1; from++)
			for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
				check_read(h, c, ws, m.plain, m.size, from, lens[l]);
	check_read(h, c, ws, m.plain, m.size, 0, m.size);		/* every tile at once */
	check_read(h, c, ws, m.plain, m.size, m.size - 2, 100);	/* runs past the end */
	check_read(h, c, ws, m.plain, m.size, m.size + 7, 100);	/* starts past the end */
	check_read(h, c, ws, m.plain, m.size, 10, 0);
	for (uint64_t off = 0; off < m.size; off += 10000)		/* a sequential reader */
		check_read(h, c, ws, m.plain, m.size, off, 10000);
	wait_idle(c);
	tf_cache_get_stats(c, &st);
	h2 = tf_test_handle_ok(f);	/* the last units read are still there */
	check_read(h2, c, ws, m.plain, m.size, m.size - 1000, 1000);
	ck_assert_uint_eq(misses_of(c), st.misses);
	tf_handle_close(h2);
	ck_assert_uint_gt(st.evictions, 0);
	ck_assert_uint_le(st.used, st.budget);	/* nothing in flight: the budget holds */
	ck_assert_uint_eq(st.pinned, 0);
	free(starts);
	tf_handle_close(h);
	tf_file_unref(f);
	tf_cache_free(c);
	tf_pipeline_free((tf_pipeline *)spec.pipeline);
	tf_workspace_free(ws);
	made_free(&m);
}
END_TEST

/*
 * Zero-length chunks (FORMAT.md §3.3 step 4): a var tile of only empty
 * strings is one chunk of 0 bytes, and a last cell kept in a chunk that
 * overflows closes it at the tile's end, leaving an empty last chunk.
 */
START_TEST(test_zero_length_chunks)
{
	static const size_t empty100[100], two[] = { 30000, 40000 }, tens[] = {
		10, 10, 10, 10, 10, 10, 10, 10, 10, 10 }, empty2[2];
	static const struct { const size_t *lens; size_t n; size_t chunks[2]; size_t nchunks; } tiles[] = {
		{ empty100, 100, { 0 }, 1 }, { two, 2, { 70000, 0 }, 2 },
		{ tens, 10, { 100 }, 1 }, { empty2, 2, { 0 }, 1 },
	};
	tf_chunk_env env = { .type = TF_DT_STRING_ASCII, .cell_size = 1, .version = 22 };
	tf_file_spec spec = { .type = TF_DT_STRING_ASCII, .cell_val_num = TF_CELL_VAR };
	tf_workspace *ws = tf_workspace_new();
	made_file m = { .stored = TF_BUF_INIT(SIZE_MAX) };
	char path[PATH_MAX];
	uint64_t *starts;
	size_t nstarts;
	tf_handle *h;
	tf_cache *c;
	tf_file *f;

	spec.pipeline = tf_test_pipeline("zstd");
	for (size_t t = 0; t < 4; t++)
		add_var_tile(spec.pipeline, &env, ws, tiles[t].lens, tiles[t].n, &m);
	tf_test_tmp_path(path, "empty_var.tdb");
	tf_test_write_file(path, m.stored.p, m.stored.len);
	f = tf_test_file_ok(path, &spec);
	h = tf_test_handle_ok(f);
	ck_assert_uint_eq(tf_file_ntiles(f), 4);
	for (size_t t = 0; t < 4; t++) {
		chunk_list l = chunks_of(h, ws, t);

		ck_assert_uint_eq(l.n, tiles[t].nchunks);
		for (size_t k = 0; k < l.n; k++)
			ck_assert_uint_eq(l.v[k].size, tiles[t].chunks[k]);
		free(l.v);
	}
	check_all_units(h, ws, m.plain, m.size);
	ck_assert(tf_cache_new(1 << 20, 0, &c, NULL) == TF_OK);
	starts = chunk_boundaries(h, ws, &nstarts);
	for (size_t i = 0; i < nstarts; i++)
		for (uint64_t from = starts[i] > 2 ? starts[i] - 2 : 0; from <= starts[i] + 2; from++)
			check_read(h, c, ws, m.plain, m.size, from, 5);
	check_read(h, c, ws, m.plain, m.size, 0, m.size);
	free(starts);
	tf_handle_close(h);
	tf_file_unref(f);
	tf_cache_free(c);
	tf_pipeline_free((tf_pipeline *)spec.pipeline);
	tf_workspace_free(ws);
	made_free(&m);
}
END_TEST

/* Where each tile of a file in memory is stored and what it decodes to,
 * as fragment metadata would say; returns the number of tiles. */
static size_t layout_of(const tf_buf *stored, tf_tile_layout *out, size_t max)
{
	size_t n = 0;

	for (uint64_t at = 0; at < stored->len; n++) {
		uint64_t nchunks = tf_le64(stored->p + at), p = at + TF_TILE_HEADER_SIZE, size = 0;

		for (uint64_t c = 0; c < nchunks; c++) {
			tf_chunk_header h;

			tf_chunk_header_read(stored->p + p, &h);
			size += h.orig_len;
			p += tf_chunk_stored_size(&h);
		}
		ck_assert_uint_lt(n, max);
		out[n] = (tf_tile_layout){ at, p - at, size };
		at = p;
	}
	return n;
}

/* Tiles given by the caller (from fragment metadata): nothing is walked at
 * open, a tile's chunks are read when first needed and checked then. */
START_TEST(test_tiles_from_layout)
{
	tf_file_spec spec = { .type = TF_DT_INT32, .cell_val_num = 1 };
	tf_workspace *ws = tf_workspace_new();
	tf_tile_layout layout[N_MANY];
	char path[PATH_MAX];
	uint8_t buf[16];
	tf_file_info info;
	tf_cache_stats st;
	tf_error err;
	made_file m;
	tf_handle *h;
	tf_cache *c;
	tf_file *f;
	size_t n;

	make_fixed(MANY_SPEC, TF_DT_INT32, 1, NULL, many_tiles, N_MANY, TF_GEN_WALK, 3, &m);
	tf_test_tmp_path(path, "layout.tdb");
	tf_test_write_file(path, m.stored.p, m.stored.len);
	spec.pipeline = tf_test_pipeline(MANY_SPEC);
	spec.tiles = layout;
	spec.ntiles = layout_of(&m.stored, layout, N_MANY);
	ck_assert_uint_eq(spec.ntiles, N_MANY);
	f = tf_test_file_ok(path, &spec);
	tf_file_get_info(f, &info);
	ck_assert(info.from_layout);
	ck_assert_uint_eq(info.chunks, 0);	/* nothing read yet */
	ck_assert_uint_eq(tf_file_size(f), m.size);
	h = tf_test_handle_ok(f);
	ck_assert(tf_cache_new(1 << 20, 0, &c, NULL) == TF_OK);
	check_read(h, c, ws, m.plain, m.size, 0, m.size);
	tf_file_get_info(f, &info);
	ck_assert_uint_eq(info.chunks, 10);	/* loaded by the read */
	check_all_units(h, ws, m.plain, m.size);
	tf_handle_close(h);
	tf_file_unref(f);

	layout[4].size += 4;	/* metadata that disagrees with the chunks */
	f = tf_test_file_ok(path, &spec);
	h = tf_test_handle_ok(f);
	ck_assert_int_eq(tf_handle_tile_units(h, 4, &n, &err), TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "tile 4: chunks take") && strstr(err.msg, "fragment metadata says"),
		      "%s", err.msg);
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(tf_handle_read(h, c, ws, m.size - 20, 16, buf, &n, &err), TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "tile 4: chunks take"), "%s", err.msg);
	tf_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.pinned, 0);
	check_read(h, c, ws, m.plain, m.size, 0, 1000);	/* the other tiles read */
	tf_handle_close(h);
	tf_file_unref(f);
	layout[4].size -= 4;
	layout[5].stored = m.stored.len;	/* a tile beyond the file's end */
	ck_assert_int_eq(tf_test_file_open(path, NULL, &spec, &f, &err), TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "tile 5: stored at"), "%s", err.msg);
	tf_cache_free(c);
	tf_pipeline_free((tf_pipeline *)spec.pipeline);
	tf_workspace_free(ws);
	made_free(&m);
}
END_TEST

/* ---- reading corpus manifests: just enough JSON ------------------------------------------ */

static const char *json_ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

/* p at a string's opening quote: just past its closing one. */
static const char *json_string_end(const char *p)
{
	for (p++; *p && *p != '"'; p++)
		if (*p == '\\' && p[1])
			p++;
	return *p ? p + 1 : p;
}

/* Just past the value at p, whatever it is. */
static const char *json_skip(const char *p)
{
	int depth = 0;

	p = json_ws(p);
	do {
		if (*p == '"') {
			p = json_string_end(p);
		} else if (*p == '{' || *p == '[') {
			depth++;
			p++;
		} else if (*p == '}' || *p == ']') {
			depth--;
			p++;
		} else if (depth == 0) {	/* number, true, false, null */
			while (*p && !strchr(",]} \t\r\n", *p))
				p++;
		} else {
			p++;
		}
	} while (*p && depth > 0);
	return p;
}

/* The value of member `key` of the object at p, or NULL. */
static const char *json_member(const char *p, const char *key)
{
	size_t klen = strlen(key);

	if (!p || *(p = json_ws(p)) != '{')
		return NULL;
	for (p = json_ws(p + 1); *p == '"';) {
		const char *k = p + 1, *end = json_string_end(p);

		p = json_ws(end);
		if (*p != ':')
			return NULL;
		p = json_ws(p + 1);
		if ((size_t)(end - 1 - k) == klen && memcmp(k, key, klen) == 0)
			return p;
		p = json_ws(json_skip(p));
		if (*p == ',')
			p = json_ws(p + 1);
	}
	return NULL;
}

/* Element i of the array at p, or NULL. */
static const char *json_item(const char *p, size_t i)
{
	if (!p || *(p = json_ws(p)) != '[')
		return NULL;
	for (p = json_ws(p + 1); *p && *p != ']'; i--) {
		if (i == 0)
			return p;
		p = json_ws(json_skip(p));
		if (*p == ',')
			p = json_ws(p + 1);
	}
	return NULL;
}

/* Elements of the array at arr. */
static size_t json_count(const char *arr)
{
	size_t n = 0;

	while (json_item(arr, n))
		n++;
	return n;
}

static uint64_t json_u64(const char *p)
{
	ck_assert_ptr_nonnull(p);
	return strtoull(p, NULL, 10);
}

/* ---- the corpus ------------------------------------------------------------------------------ */

typedef struct corpus_data {
	char *manifest;		/* NUL-terminated text */
	const char *entry;	/* fragments[frag].data_files[file] */
	char dir[PATH_MAX];	/* the case's directory */
} corpus_data;

static void corpus_open(const char *name, unsigned frag, const char *file, corpus_data *cd)
{
	char path[PATH_MAX];
	uint8_t *raw;
	size_t n;

	path_printf(cd->dir, "%s/%s", tf_test_corpus(), name);
	path_printf(path, "%s/manifest.json", cd->dir);
	raw = tf_test_read_file(path, &n);
	cd->manifest = malloc(n + 1);
	ck_assert_ptr_nonnull(cd->manifest);
	memcpy(cd->manifest, raw, n);
	cd->manifest[n] = '\0';
	free(raw);
	cd->entry = json_member(json_member(json_item(json_member(cd->manifest, "fragments"), frag),
					    "data_files"), file);
	ck_assert_msg(cd->entry != NULL, "%s: no fragment %u file %s in the manifest", name, frag, file);
}

/* Path of the stored file (the manifest's "path", relative to the case). */
static void corpus_stored_path(const corpus_data *cd, char *out)
{
	const char *p = json_member(cd->entry, "path");
	const char *end = p ? json_string_end(p) : NULL;

	ck_assert_ptr_nonnull(p);
	path_printf(out, "%s/%.*s", cd->dir, (int)(end - p - 2), p + 1);
}

/* expected/unfiltered/f<frag>/<file>.bin: TileDB's own unfiltered tiles. */
static uint8_t *corpus_expected(const char *name, unsigned frag, const char *file, size_t *n)
{
	char path[PATH_MAX];

	path_printf(path, "%s/%s/expected/unfiltered/f%u/%s.bin", tf_test_corpus(), name, frag, file);
	return tf_test_read_file(path, n);
}

/* ---- writer chunking against TileDB's ------------------------------------------------------ */

enum { WC_MCS0 = 1, WC_MCS1024 = 2, WC_KEY = 4 };

typedef struct writer_case {
	const char *name;
	unsigned frag;
	const char *file;
	const char *offsets;	/* var data: the offsets file that gives its cells */
	const char *spec;
	tf_datatype type;
	uint32_t cell_val_num;
	unsigned flags;		/* WC_* */
} writer_case;

#define VAR TF_CELL_VAR
static const writer_case writer_cases[] = {
	/* fixed tiles over 64 KiB: 64 KiB chunks of whole cells, a shorter last */
	{ "chunks_bigtile_none", 0, "a0.tdb", NULL, "", TF_DT_INT32, 1, 0 },
	{ "chunks_bigtile_zstd", 0, "a0.tdb", NULL, "zstd", TF_DT_INT32, 1, 0 },
	{ "chunks_bigtile_zstd", 0, "a1.tdb", NULL, "zstd", TF_DT_FLOAT64, 1, 0 },
	{ "chunks_bigtile_zstd", 0, "a2.tdb", NULL, "zstd", TF_DT_UINT8, 1, 0 },
	{ "chunks_bigtile_zstd", 0, "a3.tdb", NULL, "zstd", TF_DT_INT32, 3, 0 },	/* 65532 */
	{ "chunks_bigtile_bitshuffle_zstd", 0, "a0.tdb", NULL, "bitshuffle | zstd", TF_DT_FLOAT64, 1, 0 },
	{ "chunks_bigtile_byteshuffle_lz4", 0, "a0.tdb", NULL, "byteshuffle | lz4", TF_DT_FLOAT64, 1, 0 },
	{ "max_chunk_size_0", 0, "a0.tdb", NULL, "zstd", TF_DT_FLOAT64, 1, WC_MCS0 },
	{ "max_chunk_size_1024", 0, "a0.tdb", NULL, "zstd", TF_DT_INT64, 1, WC_MCS1024 },
	{ "bitshuffle_oddsize", 0, "a0.tdb", NULL, "bitshuffle", TF_DT_INT32, 1, 0 },
	{ "chain_long6_int", 0, "a0.tdb", NULL,
	  "positive_delta | bit_width_reduction | byteshuffle | xor | zstd | checksum_sha256",
	  TF_DT_INT64, 1, 0 },
	{ "nullable_fixed", 0, "a0_validity.tdb", NULL, "rle", TF_DT_UINT8, 1, 0 },
	{ "extra/bool_blob_types", 0, "a1.tdb", NULL, "zstd", TF_DT_BLOB, 4, 0 },
	{ "str_bigtile_chunks", 0, "a0.tdb", NULL, "delta | zstd", TF_DT_UINT64, 1, 0 },
	/* var tiles: cells never split, chunks close by the 32/64/96 KiB rule */
	{ "str_bigtile_chunks", 0, "a0_var.tdb", "a0.tdb", "bzip2", TF_DT_STRING_ASCII, VAR, 0 },
	{ "extra/big_tile_multichunk_var", 0, "a0_var.tdb", "a0.tdb", "zstd", TF_DT_STRING_ASCII, VAR, 0 },
	{ "extra/big_tile_multichunk_var", 0, "a1_var.tdb", "a1.tdb", "", TF_DT_STRING_ASCII, VAR, 0 },
	{ "str_empty_tiles", 0, "a0_var.tdb", "a0.tdb", "zstd", TF_DT_STRING_ASCII, VAR, 0 },
	{ "dense_partial_last_tile", 0, "a2_var.tdb", "a2.tdb", "gzip", TF_DT_STRING_ASCII, VAR, 0 },
	{ "var_int32", 0, "a0_var.tdb", "a0.tdb", "zstd", TF_DT_INT32, VAR, 0 },
	{ "extra/bool_blob_types", 0, "a2_var.tdb", "a2.tdb", "gzip", TF_DT_BLOB, VAR, 0 },
	/* string RLE / dictionary: one chunk per tile, whatever its size */
	{ "str_rle", 0, "a0_var.tdb", "a0.tdb", "rle", TF_DT_STRING_ASCII, VAR, 0 },
	{ "str_rle_zstd", 0, "a0_var.tdb", "a0.tdb", "rle | zstd", TF_DT_STRING_ASCII, VAR, 0 },
	{ "str_dict", 0, "a0_var.tdb", "a0.tdb", "dictionary", TF_DT_STRING_ASCII, VAR, 0 },
	{ "str_utf8_rle", 0, "a0_var.tdb", "a0.tdb", "rle", TF_DT_STRING_UTF8, VAR, 0 },
	{ "str_empty_tiles", 0, "a1_var.tdb", "a1.tdb", "dictionary", TF_DT_STRING_ASCII, VAR, 0 },
	{ "extra/sparse_var_dim_nullable_attr", 0, "a0_var.tdb", "a0.tdb", "dictionary",
	  TF_DT_STRING_UTF8, VAR, 0 },
	/* encrypted: headers only, the bytes differ by their random IVs */
	{ "enc_dense_zstd", 0, "a0.tdb", NULL, "byteshuffle | zstd", TF_DT_FLOAT64, 1, WC_KEY },
	{ "enc_str_rle", 0, "a0_var.tdb", "a0.tdb", "rle", TF_DT_STRING_ASCII, VAR, WC_KEY },
	{ "extra/enc_consolidated_meta", 4, "a2_var.tdb", "a2.tdb", "gzip", TF_DT_STRING_ASCII, VAR, WC_KEY },
};
#define N_WRITER_CASES (sizeof(writer_cases) / sizeof(writer_cases[0]))

/* The cell offsets of every tile of a var data file, from the expected
 * bytes of its offsets file (u64, relative to each tile). */
typedef struct cells {
	corpus_data od;		/* the offsets file in the manifest */
	const char *tile_sizes;	/* its unfiltered_tile_sizes */
	uint8_t *offsets;
	size_t len;
	size_t next;		/* first cell of the next tile */
} cells;

static void cells_open(const writer_case *wc, cells *cl)
{
	corpus_open(wc->name, wc->frag, wc->offsets, &cl->od);
	cl->tile_sizes = json_member(cl->od.entry, "unfiltered_tile_sizes");
	ck_assert_ptr_nonnull(cl->tile_sizes);
	cl->offsets = corpus_expected(wc->name, wc->frag, wc->offsets, &cl->len);
	cl->next = 0;
}

static void cells_free(cells *cl)
{
	free(cl->od.manifest);
	free(cl->offsets);
}

/* Cell offsets of tile t (malloc'd), *n of them. */
static uint64_t *cells_of_tile(cells *cl, size_t t, size_t *n)
{
	uint64_t *v;

	*n = (size_t)json_u64(json_item(cl->tile_sizes, t)) / 8;
	ck_assert_uint_le((cl->next + *n) * 8, cl->len);
	v = malloc((*n ? *n : 1) * sizeof(*v));
	ck_assert_ptr_nonnull(v);
	for (size_t c = 0; c < *n; c++)
		v[c] = tf_le64(cl->offsets + 8 * (cl->next + c));
	cl->next += *n;
	return v;
}

/* Our encoding of one tile against the manifest's chunk list for it. */
static void compare_chunk_headers(const writer_case *wc, size_t t, const uint8_t *enc, size_t n,
				  const char *chunks)
{
	size_t nchunks = json_count(chunks), at = TF_TILE_HEADER_SIZE;

	ck_assert_uint_ge(n, TF_TILE_HEADER_SIZE);
	ck_assert_msg(tf_le64(enc) == nchunks, "%s/%s tile %zu: %llu chunks, TileDB wrote %zu",
		      wc->name, wc->file, t, (unsigned long long)tf_le64(enc), nchunks);
	for (size_t c = 0; c < nchunks; c++) {
		const char *want = json_item(chunks, c);
		tf_chunk_header h;

		ck_assert_uint_le(at + TF_CHUNK_HEADER_SIZE, n);
		tf_chunk_header_read(enc + at, &h);
		ck_assert_msg(h.orig_len == json_u64(json_item(want, 0)) &&
			      h.filtered_len == json_u64(json_item(want, 1)) &&
			      h.md_len == json_u64(json_item(want, 2)),
			      "%s/%s tile %zu chunk %zu: [%u, %u, %u], TileDB wrote [%llu, %llu, %llu]",
			      wc->name, wc->file, t, c, h.orig_len, h.filtered_len, h.md_len,
			      (unsigned long long)json_u64(json_item(want, 0)),
			      (unsigned long long)json_u64(json_item(want, 1)),
			      (unsigned long long)json_u64(json_item(want, 2)));
		at += tf_chunk_stored_size(&h);
	}
	ck_assert_uint_eq(at, n);
}

static uint64_t tile_size_in_manifest(const char *chunks)
{
	uint64_t size = 0;

	for (size_t c = 0; json_item(chunks, c); c++)
		size += json_u64(json_item(json_item(chunks, c), 0));
	return size;
}

static tf_chunk_env writer_env(const writer_case *wc, const tf_pipeline *p, const tf_key *key)
{
	bool var = wc->cell_val_num == TF_CELL_VAR;
	tf_chunk_env env = { .type = wc->type, .version = 22, .key = key,
			     .cell_size = (var ? 1 : wc->cell_val_num) * tf_datatype_size(wc->type),
			     .var_string = tf_var_string_applies(p, wc->type, wc->cell_val_num, 22) };

	return env;
}

/*
 * Re-encode TileDB's unfiltered tiles with the field's pipeline: every
 * chunk header must be the one TileDB wrote (§3.3, var data with the cell
 * offsets of the same tile), and without AES the whole file must be.
 */
START_TEST(test_writer_matches_tiledb)
{
	const writer_case *wc = &writer_cases[_i];
	tf_key *key = wc->flags & WC_KEY ? key_of(KEY_A) : NULL;
	tf_pipeline *p = writer_pipeline(wc->spec, key);
	tf_chunk_env env = writer_env(wc, p, key);
	tf_workspace *ws = tf_workspace_new();
	tf_buf out = TF_BUF_INIT(SIZE_MAX);
	char stored_path[PATH_MAX];
	const char *tiles;
	uint8_t *plain, *stored;
	size_t plain_len, stored_len, at = 0, ntiles;
	corpus_data cd;
	cells cl;

	if (wc->flags & (WC_MCS0 | WC_MCS1024))
		tf_pipeline_set_max_chunk_size(p, wc->flags & WC_MCS0 ? 0 : 1024);
	corpus_open(wc->name, wc->frag, wc->file, &cd);
	if (wc->offsets)
		cells_open(wc, &cl);
	plain = corpus_expected(wc->name, wc->frag, wc->file, &plain_len);
	tiles = json_member(cd.entry, "tiles");
	ntiles = json_count(tiles);
	ck_assert_uint_gt(ntiles, 0);
	for (size_t t = 0; t < ntiles; t++) {
		const char *chunks = json_member(json_item(tiles, t), "chunks");
		uint64_t size = tile_size_in_manifest(chunks), *offs = NULL;
		size_t before = out.len, ncells = 0;
		tf_error err;

		ck_assert_uint_le(at + size, plain_len);
		if (wc->offsets)
			offs = cells_of_tile(&cl, t, &ncells);
		ck_assert_msg(tf_tile_encode(p, &env, ws, tf_span_of(plain + at, (size_t)size), offs, ncells,
					     &out, &err) == TF_OK, "%s/%s tile %zu: %s", wc->name, wc->file,
			      t, err.msg);
		compare_chunk_headers(wc, t, out.p + before, out.len - before, chunks);
		free(offs);
		at += (size_t)size;
	}
	ck_assert_uint_eq(at, plain_len);
	corpus_stored_path(&cd, stored_path);
	stored = tf_test_read_file(stored_path, &stored_len);
	ck_assert_uint_eq(out.len, stored_len);
	if (!key)
		ck_assert_msg(memcmp(out.p, stored, stored_len) == 0, "%s/%s: our file differs from "
			      "TileDB's", wc->name, wc->file);
	free(stored);
	free(plain);
	if (wc->offsets)
		cells_free(&cl);
	free(cd.manifest);
	tf_buf_free(&out);
	tf_workspace_free(ws);
	tf_pipeline_free(p);
	tf_key_free(key);
}
END_TEST

/* ---- folded offsets (§4.7-4.8) ------------------------------------------------------------------ */

typedef struct folded_case {
	const char *name;
	const char *offsets, *data;	/* file names */
	const char *data_spec;
	tf_datatype data_type;
	bool key;
} folded_case;

/* Every one of these has the default offsets pipeline, zstd. */
static const folded_case folded_cases[] = {
	{ "str_rle", "a0.tdb", "a0_var.tdb", "rle", TF_DT_STRING_ASCII, false },
	{ "str_rle_zstd", "a0.tdb", "a0_var.tdb", "rle | zstd", TF_DT_STRING_ASCII, false },
	{ "str_dict", "a0.tdb", "a0_var.tdb", "dictionary", TF_DT_STRING_ASCII, false },
	{ "str_utf8_rle", "a0.tdb", "a0_var.tdb", "rle", TF_DT_STRING_UTF8, false },
	{ "str_empty_tiles", "a1.tdb", "a1_var.tdb", "dictionary", TF_DT_STRING_ASCII, false },
	{ "extra/sparse_string_dim_dict", "d0.tdb", "d0_var.tdb", "dictionary", TF_DT_STRING_ASCII, false },
	{ "extra/sparse_var_dim_nullable_attr", "a0.tdb", "a0_var.tdb", "dictionary", TF_DT_STRING_UTF8,
	  false },
	{ "enc_str_rle", "a0.tdb", "a0_var.tdb", "rle", TF_DT_STRING_ASCII, true },
};
#define N_FOLDED_CASES (sizeof(folded_cases) / sizeof(folded_cases[0]))

/* Decode a whole file through a cache (and unit by unit) and compare it
 * with `want`; the file is unreferenced. */
static void check_whole_file(tf_file *f, const uint8_t *want, size_t n)
{
	tf_workspace *ws = tf_workspace_new();
	tf_handle *h = tf_test_handle_ok(f);
	tf_cache *c;

	ck_assert(tf_cache_new(1 << 20, 2, &c, NULL) == TF_OK);
	check_read(h, c, ws, want, n, 0, n + 1);
	check_all_units(h, ws, want, n);
	tf_handle_close(h);
	tf_file_unref(f);
	tf_cache_free(c);
	tf_workspace_free(ws);
}

START_TEST(test_folded_offsets)
{
	const folded_case *fc = &folded_cases[_i];
	tf_key *key = fc->key ? key_of(KEY_A) : NULL;
	tf_file_spec spec = { .type = TF_DT_UINT64, .cell_val_num = 1, .key = key,
			      .var_type = fc->data_type };
	tf_file_spec data_spec = { .type = fc->data_type, .cell_val_num = TF_CELL_VAR, .key = key };
	char opath[PATH_MAX], dpath[PATH_MAX];
	corpus_data od, dd;
	tf_file_info info;
	uint8_t *want;
	size_t n;
	tf_file *f;

	corpus_open(fc->name, 0, fc->offsets, &od);
	corpus_open(fc->name, 0, fc->data, &dd);
	corpus_stored_path(&od, opath);
	corpus_stored_path(&dd, dpath);
	spec.pipeline = tf_test_pipeline("zstd");
	spec.var_pipeline = data_spec.pipeline = tf_test_pipeline(fc->data_spec);
	spec.var_data = dpath;
	f = tf_test_file_ok(opath, &spec);
	tf_file_get_info(f, &info);
	ck_assert_uint_eq(info.folded_tiles, json_u64(json_member(od.entry, "num_tiles")));
	ck_assert_uint_eq(info.folded_tiles, info.tiles);
	want = corpus_expected(fc->name, 0, fc->offsets, &n);
	check_whole_file(f, want, n);
	free(want);

	/* The data file itself, on the var-string path by TileDB's rule. */
	f = tf_test_file_ok(dpath, &data_spec);
	tf_file_get_info(f, &info);
	ck_assert(info.var_string);
	want = corpus_expected(fc->name, 0, fc->data, &n);
	check_whole_file(f, want, n);
	free(want);
	free(od.manifest);
	free(dd.manifest);
	tf_pipeline_free((tf_pipeline *)spec.pipeline);
	tf_pipeline_free((tf_pipeline *)spec.var_pipeline);
	tf_key_free(key);
}
END_TEST

/* Folding needs a data pipeline that starts with rle or dictionary. */
START_TEST(test_folded_offsets_need_string_codec)
{
	tf_file_spec spec = { .type = TF_DT_UINT64, .cell_val_num = 1,
			      .var_type = TF_DT_STRING_ASCII };
	char opath[PATH_MAX], dpath[PATH_MAX];
	corpus_data od, dd;
	tf_error err;
	tf_file *f;

	corpus_open("str_rle", 0, "a0.tdb", &od);
	corpus_open("str_rle", 0, "a0_var.tdb", &dd);
	corpus_stored_path(&od, opath);
	corpus_stored_path(&dd, dpath);
	spec.pipeline = tf_test_pipeline("zstd");
	spec.var_pipeline = tf_test_pipeline("zstd");
	spec.var_data = dpath;
	ck_assert_int_eq(tf_test_file_open(opath, "offs", &spec, &f, &err), TF_E_INVAL);
	ck_assert_msg(strstr(err.msg, "offs: offsets are folded only into STRING_ASCII/UTF8 data"),
		      "%s", err.msg);
	free(od.manifest);
	free(dd.manifest);
	tf_pipeline_free((tf_pipeline *)spec.pipeline);
	tf_pipeline_free((tf_pipeline *)spec.var_pipeline);
}
END_TEST

/* ---- corruption on disk ------------------------------------------------------------------------ */

typedef struct victim {
	const char *name;
	const char *spec;
	size_t tiles[2];	/* bytes of its two tiles */
	bool key;		/* encrypted: AES-256-GCM last */
	bool generic;		/* two generic tiles instead of a tile file */
	bool guarded;		/* ends in a checksum or AES: altered bytes never decode */
} victim;

static const victim victims[] = {
	{ "plain", "", { 512, 508 }, false, false, false },
	{ "zstd", "zstd", { 70000, 512 }, false, false, false },
	{ "checksum_md5", "byteshuffle | checksum_md5", { 512, 508 }, false, false, true },
	{ "checksum_sha256", "zstd | checksum_sha256", { 70000, 512 }, false, false, true },
	{ "aes", "bitshuffle | lz4", { 70000, 512 }, true, false, true },
	{ "generic", "gzip(level=1)", { 3000, 70000 }, false, true, false },
	{ "generic_aes", "gzip(level=1)", { 3000, 70000 }, true, true, true },
};
#define N_VICTIMS (sizeof(victims) / sizeof(victims[0]))
#define PROBE_MAX ((uint32_t)16 << 20)	/* no honest chunk here is larger */

/* One generic tile (§6): 34-byte header, its pipeline, one tile. */
static void add_generic_tile(const victim *v, const tf_key *key, tf_workspace *ws,
			     const uint8_t *plain, size_t n, tf_buf *out)
{
	tf_chunk_env env = { .type = TF_DT_CHAR, .cell_size = 1, .version = 22, .key = key };
	tf_pipeline *p = writer_pipeline(v->spec, key);
	tf_buf pipe = TF_BUF_INIT(SIZE_MAX), tile = TF_BUF_INIT(SIZE_MAX);

	ck_assert(tf_pipeline_serialize(p, &pipe, NULL) == TF_OK);
	ck_assert(tf_tile_encode(p, &env, ws, tf_span_of(plain, n), NULL, 0, &tile, NULL) == TF_OK);
	ck_assert(tf_buf_put_u32(out, 22, NULL) == TF_OK);
	ck_assert(tf_buf_put_u64(out, tile.len, NULL) == TF_OK);
	ck_assert(tf_buf_put_u64(out, n, NULL) == TF_OK);
	ck_assert(tf_buf_put_u8(out, TF_DT_CHAR, NULL) == TF_OK);
	ck_assert(tf_buf_put_u64(out, 1, NULL) == TF_OK);
	ck_assert(tf_buf_put_u8(out, key ? 1 : 0, NULL) == TF_OK);
	ck_assert(tf_buf_put_u32(out, (uint32_t)pipe.len, NULL) == TF_OK);
	ck_assert(tf_buf_append(out, pipe.p, pipe.len, NULL) == TF_OK);
	ck_assert(tf_buf_append(out, tile.p, tile.len, NULL) == TF_OK);
	tf_buf_free(&pipe);
	tf_buf_free(&tile);
	tf_pipeline_free(p);
}

/* A unit of the undamaged file. */
typedef struct unit_ref {
	size_t tile, unit;
	uint64_t off;
	uint32_t size;
} unit_ref;

/* A victim file on disk, what its units were, and what probing it saw. */
typedef struct victim_file {
	const victim *v;
	tf_key *key;
	char path[PATH_MAX];
	tf_file_spec spec;
	made_file m;
	unit_ref units[8];
	size_t nunits;
	tf_cache *cache;	/* whole-file reads, one owner per probe */
	uint8_t *buf;		/* room for the whole file */
	size_t opened, decoded, rejected, reads;
} victim_file;

static void make_victim(const victim *v, victim_file *vf)
{
	tf_workspace *ws = tf_workspace_new();
	tf_handle *h;
	tf_file *f;

	memset(vf, 0, sizeof(*vf));
	vf->v = v;
	vf->key = v->key ? key_of(KEY_A) : NULL;
	vf->spec = (tf_file_spec){ .type = TF_DT_INT32, .cell_val_num = 1, .key = vf->key,
				   .generic = v->generic, .pipeline = tf_test_pipeline(v->spec) };
	if (!v->generic) {
		make_fixed(v->spec, TF_DT_INT32, 1, vf->key, v->tiles, 2, TF_GEN_RUNS, 7, &vf->m);
	} else {
		vf->m.size = v->tiles[0] + v->tiles[1];
		vf->m.plain = tf_test_data(vf->m.size, TF_GEN_RUNS, 1, 7);
		tf_buf_init(&vf->m.stored, SIZE_MAX);
		add_generic_tile(v, vf->key, ws, vf->m.plain, v->tiles[0], &vf->m.stored);
		add_generic_tile(v, vf->key, ws, vf->m.plain + v->tiles[0], v->tiles[1], &vf->m.stored);
	}
	tf_test_tmp_path(vf->path, v->name);
	tf_test_write_file(vf->path, vf->m.stored.p, vf->m.stored.len);
	f = tf_test_file_ok(vf->path, &vf->spec);
	h = tf_test_handle_ok(f);
	check_all_units(h, ws, vf->m.plain, vf->m.size);
	for (size_t t = 0; t < tf_file_ntiles(f); t++)
		for (size_t u = 0, n = units_of(h, t); u < n; u++) {
			tf_unit_info ui;

			ck_assert_uint_lt(vf->nunits, sizeof(vf->units) / sizeof(vf->units[0]));
			tf_handle_unit_info(h, t, u, &ui);
			vf->units[vf->nunits++] = (unit_ref){ t, u, ui.off, ui.size };
		}
	tf_handle_close(h);
	tf_file_unref(f);
	ck_assert(tf_cache_new(1 << 20, 0, &vf->cache, NULL) == TF_OK);
	vf->buf = malloc(vf->m.size + 1);
	ck_assert_ptr_nonnull(vf->buf);
	tf_workspace_free(ws);
}

static void victim_free(victim_file *vf)
{
	tf_cache_stats st;

	tf_cache_get_stats(vf->cache, &st);
	ck_assert_uint_eq(st.pinned, 0);
	ck_assert_uint_le(st.used, st.budget);
	tf_cache_free(vf->cache);
	free(vf->buf);
	made_free(&vf->m);
	tf_pipeline_free((tf_pipeline *)vf->spec.pipeline);
	tf_key_free(vf->key);
}

static const unit_ref *original_unit(const victim_file *vf, size_t t, size_t u)
{
	for (size_t i = 0; i < vf->nunits; i++)
		if (vf->units[i].tile == t && vf->units[i].unit == u)
			return &vf->units[i];
	return NULL;
}

/* A failure must name the file and tile t (SIZE_MAX: any tile), and a
 * decoding failure the chunk. */
static void check_failure(const tf_error *err, tf_status rc, size_t t)
{
	char where[64];

	if (t == SIZE_MAX)
		snprintf(where, sizeof(where), "victim: tile ");
	else
		snprintf(where, sizeof(where), "victim: tile %zu", t);
	ck_assert_msg(strncmp(err->msg, where, strlen(where)) == 0 &&
		      (t == SIZE_MAX || strchr(":,", err->msg[strlen(where)])),
		      "'%s' lacks '%s'", err->msg, where);
	ck_assert_msg(rc == TF_E_IO || rc == TF_E_STALE || rc == TF_E_NOMEM || strstr(err->msg, "chunk"),
		      "'%s' does not name the chunk", err->msg);
}

/*
 * Decode unit u of tile t of a damaged file.  Bytes that come back must be
 * the original unit's when `strict` (nothing altered, e.g. truncation) or
 * the victim is guarded.  (Its offset in the file may differ: a flipped
 * length in an earlier tile's header moves the tiles after it, and that
 * tile then fails.)
 */
static void probe_unit(victim_file *vf, tf_handle *h, tf_workspace *ws, size_t t, size_t u, bool strict)
{
	const unit_ref *orig;
	tf_unit_info ui;
	tf_error err;
	tf_status rc;
	uint8_t *dst;

	tf_handle_unit_info(h, t, u, &ui);
	if (ui.size > PROBE_MAX) {	/* a flipped length: the flip hit a header */
		vf->rejected++;
		return;
	}
	dst = malloc(ui.size ? ui.size : 1);
	ck_assert_ptr_nonnull(dst);
	if ((rc = tf_handle_decode_unit(h, ws, t, u, dst, &err)) != TF_OK) {
		check_failure(&err, rc, t);
		vf->rejected++;
	} else {
		orig = original_unit(vf, t, u);
		ck_assert_msg(!(strict || vf->v->guarded) ||
			      (orig && orig->size == ui.size &&
			       (ui.size == 0 || memcmp(dst, vf->m.plain + orig->off, ui.size) == 0)),
			      "%s: tile %zu unit %zu decoded to altered bytes", vf->v->name, t, u);
		vf->decoded++;
	}
	free(dst);
}

/* The whole file through the cache: a clean failure naming the tile, or
 * bytes; where they must be the original's, a prefix of them (a file cut
 * at a tile's end is a shorter file). */
static void probe_read(victim_file *vf, tf_handle *h, tf_workspace *ws, bool strict)
{
	uint64_t size = tf_file_size(tf_handle_file(h));
	tf_error err;
	tf_status rc;
	size_t got;

	if (size > vf->m.size + PROBE_MAX)
		return;
	if (size > vf->m.size) {
		uint8_t *p = realloc(vf->buf, size);
		ck_assert_ptr_nonnull(p);
		vf->buf = p;
	}
	rc = tf_handle_read(h, vf->cache, ws, 0, (size_t)size, vf->buf, &got, &err);
	if (rc != TF_OK) {
		check_failure(&err, rc, SIZE_MAX);
		return;
	}
	ck_assert_uint_eq(got, size);
	ck_assert_msg(!(strict || vf->v->guarded) ||
		      (got <= vf->m.size && memcmp(vf->buf, vf->m.plain, got) == 0),
		      "%s: a whole read gave altered bytes", vf->v->name);
	vf->reads++;
}

static void probe(victim_file *vf, tf_workspace *ws, bool strict)
{
	tf_error err = { 0 };
	tf_handle *h;
	tf_file *f;

	if (tf_test_file_open(vf->path, "victim", &vf->spec, &f, &err) != TF_OK) {
		ck_assert_msg(strncmp(err.msg, "victim: ", 8) == 0, "'%s' does not name the file", err.msg);
		vf->rejected++;
		return;
	}
	vf->opened++;
	h = tf_test_handle_ok(f);
	for (size_t t = 0; t < tf_file_ntiles(f); t++) {
		size_t n;
		tf_status rc;

		if ((rc = tf_handle_tile_units(h, t, &n, &err)) != TF_OK) {
			check_failure(&err, rc, t);
			continue;
		}
		for (size_t u = 0; u < n; u++)
			probe_unit(vf, h, ws, t, u, strict);
	}
	probe_read(vf, h, ws, strict);
	tf_handle_close(h);
	tf_file_unref(f);
}

/* Every length from the whole file down to nothing. */
START_TEST(test_truncations)
{
	tf_workspace *ws = tf_workspace_new();
	victim_file vf;
	int fd;

	make_victim(&victims[_i], &vf);
	fd = open(vf.path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	for (size_t n = vf.m.stored.len + 1; n-- > 0;) {
		ck_assert_int_eq(ftruncate(fd, (off_t)n), 0);
		probe(&vf, ws, true);
	}
	close(fd);
	/* The whole file, tile boundaries and nothing at all open. */
	ck_assert_uint_ge(vf.opened, 3);
	ck_assert_uint_ge(vf.decoded, vf.nunits);
	ck_assert_uint_ge(vf.reads, 3);
	victim_free(&vf);
	tf_workspace_free(ws);
}
END_TEST

static uint64_t next_random(uint64_t *s)	/* splitmix64 */
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* 3000 seeded single-bit flips, each undone before the next. */
START_TEST(test_bit_flips)
{
	tf_workspace *ws = tf_workspace_new();
	uint64_t seed = 1000 + (uint64_t)_i;
	victim_file vf;
	int fd;

	make_victim(&victims[_i], &vf);
	fd = open(vf.path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	for (int i = 0; i < 3000; i++) {
		uint64_t r = next_random(&seed);
		size_t pos = (size_t)(r % vf.m.stored.len);
		uint8_t b = vf.m.stored.p[pos] ^ (uint8_t)(1u << (r >> 32) % 8);

		ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)pos), 1);
		probe(&vf, ws, false);
		ck_assert_int_eq(pwrite(fd, &vf.m.stored.p[pos], 1, (off_t)pos), 1);
	}
	close(fd);
	ck_assert_uint_gt(vf.opened, 0);
	ck_assert_uint_gt(vf.rejected, 0);
	vf.opened = vf.decoded = 0;	/* undone: the file is whole again */
	probe(&vf, ws, true);
	ck_assert_uint_eq(vf.decoded, vf.nunits);
	victim_free(&vf);
	tf_workspace_free(ws);
}
END_TEST

/* ---- error messages -------------------------------------------------------------------------- */

/* A file of two int32 tiles of one chunk each. */
static void make_two_tiles(const char *spec, const tf_key *key, const char *name, char *path,
			   made_file *m)
{
	static const size_t tiles[] = { 4096, 4096 };

	make_fixed(spec, TF_DT_INT32, 1, key, tiles, 2, TF_GEN_WALK, 11, m);
	tf_test_tmp_path(path, name);
	tf_test_write_file(path, m->stored.p, m->stored.len);
}

/* Where the data of the first chunk of tile t starts (after its metadata). */
static uint64_t chunk_data_at(tf_file *f, size_t t, const made_file *m)
{
	tf_workspace *ws = tf_workspace_new();
	tf_handle *h = tf_test_handle_ok(f);
	chunk_list l = chunks_of(h, ws, t);
	tf_chunk_header hd;
	uint64_t at;

	ck_assert_uint_gt(l.n, 0);
	tf_chunk_header_read(m->stored.p + l.v[0].src_off, &hd);
	at = l.v[0].src_off + TF_CHUNK_HEADER_SIZE + hd.md_len;
	free(l.v);
	tf_handle_close(h);
	tf_workspace_free(ws);
	return at;
}

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

/* A decode error, direct and through the cache (twice: failures are not
 * kept), with its message; nothing stays pinned.  f is unreferenced. */
static void expect_chunk_error(tf_file *f, size_t t, uint64_t off, tf_status code, const char *needle)
{
	tf_workspace *ws = tf_workspace_new();
	tf_handle *h = tf_test_handle_ok(f);
	tf_cache_stats st;
	uint8_t dst[4096];
	size_t got;
	tf_error err;
	tf_cache *c;

	ck_assert_uint_eq(units_of(h, t), 1);
	ck_assert_int_eq(tf_handle_decode_unit(h, ws, t, 0, dst, &err), code);
	ck_assert_msg(strstr(err.msg, needle), "'%s' lacks '%s'", err.msg, needle);
	ck_assert(tf_cache_new(1 << 20, 0, &c, NULL) == TF_OK);
	for (int i = 0; i < 2; i++) {
		memset(&err, 0, sizeof(err));
		got = 99;
		ck_assert_int_eq(tf_handle_read(h, c, ws, off, 100, dst, &got, &err), code);
		ck_assert_msg(strstr(err.msg, needle), "read: '%s' lacks '%s'", err.msg, needle);
		ck_assert_uint_eq(got, 0);
	}
	tf_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.misses, 2);
	ck_assert_uint_eq(st.pinned, 0);
	ck_assert_uint_eq(st.entries, 0);
	tf_handle_close(h);
	tf_file_unref(f);
	tf_cache_free(c);
	tf_workspace_free(ws);
}

START_TEST(test_error_names_tile_chunk_filter)
{
	tf_file_spec spec = { .type = TF_DT_INT32, .cell_val_num = 1 };
	char path[PATH_MAX];
	made_file m;
	tf_file *f;

	make_two_tiles("zstd", NULL, "zstd.tdb", path, &m);
	spec.pipeline = tf_test_pipeline("zstd");
	f = tf_test_file_ok(path, &spec);
	patch(path, chunk_data_at(f, 1, &m), 0xff);	/* the zstd frame's magic */
	tf_file_unref(f);
	f = tf_test_file_ok(path, &spec);
	ck_assert_str_eq(tf_file_name(f), path);	/* no name given: the path */
	expect_chunk_error(f, 1, 4096, TF_E_CORRUPT, "zstd.tdb: tile 1, chunk 0: filter 0 (zstd)");
	tf_pipeline_free((tf_pipeline *)spec.pipeline);
	made_free(&m);
}
END_TEST

START_TEST(test_error_checksum_and_key)
{
	tf_key *a = key_of(KEY_A), *b = key_of(KEY_B);
	tf_file_spec spec = { .type = TF_DT_INT32, .cell_val_num = 1 };
	char sum_path[PATH_MAX], aes_path[PATH_MAX];
	made_file sum, aes;
	tf_file *f;

	make_two_tiles("zstd | checksum_md5", NULL, "sum.tdb", sum_path, &sum);
	spec.pipeline = tf_test_pipeline("zstd | checksum_md5");
	f = tf_test_file_ok(sum_path, &spec);
	patch(sum_path, chunk_data_at(f, 0, &sum) + 5, 0x10);
	tf_file_unref(f);
	expect_chunk_error(tf_test_file_ok(sum_path, &spec), 0, 0, TF_E_CHECKSUM,
			   "sum.tdb: tile 0, chunk 0: filter 1 (checksum_md5)");
	tf_pipeline_free((tf_pipeline *)spec.pipeline);

	make_two_tiles("zstd", a, "aes.tdb", aes_path, &aes);
	spec.pipeline = tf_test_pipeline("zstd");
	spec.key = b;	/* the wrong key: the tag cannot match */
	expect_chunk_error(tf_test_file_ok(aes_path, &spec), 1, 4096, TF_E_AUTH,
			   "aes.tdb: tile 1, chunk 0: filter 1 (aes_256_gcm)");
	spec.key = a;
	check_whole_file(tf_test_file_ok(aes_path, &spec), aes.plain, aes.size);
	tf_pipeline_free((tf_pipeline *)spec.pipeline);
	made_free(&sum);
	made_free(&aes);
	tf_key_free(a);
	tf_key_free(b);
}
END_TEST

/* Open failures name the file and the tile (and where it is). */
START_TEST(test_error_open)
{
	static const victim gen = { "generic_aes", "gzip(level=1)", { 100, 100 }, true, true, true };
	tf_file_spec spec = { .type = TF_DT_INT32, .cell_val_num = 1 };
	tf_workspace *ws = tf_workspace_new();
	tf_buf g = TF_BUF_INIT(SIZE_MAX);
	tf_key *key = key_of(KEY_A);
	char path[PATH_MAX], want[128], gpath[PATH_MAX];
	uint8_t plain[100] = { 0 };
	tf_tile_layout lay[2];
	tf_error err;
	made_file m;
	tf_file *f;

	make_two_tiles("zstd", NULL, "cut.tdb", path, &m);
	ck_assert_uint_eq(layout_of(&m.stored, lay, 2), 2);
	ck_assert_int_eq(truncate(path, (off_t)m.stored.len - 1), 0);
	spec.pipeline = tf_test_pipeline("zstd");
	ck_assert_int_eq(tf_test_file_open(path, NULL, &spec, &f, &err), TF_E_CORRUPT);
	snprintf(want, sizeof(want), "cut.tdb: tile 1 (at byte %llu): chunk 0:",
		 (unsigned long long)lay[1].start);
	ck_assert_msg(strstr(err.msg, want), "'%s' lacks '%s'", err.msg, want);
	tf_pipeline_free((tf_pipeline *)spec.pipeline);

	add_generic_tile(&gen, key, ws, plain, sizeof(plain), &g);
	tf_test_tmp_path(gpath, "meta.tdb");
	tf_test_write_file(gpath, g.p, g.len);
	spec = (tf_file_spec){ .generic = true };
	ck_assert_int_eq(tf_test_file_open(gpath, "meta", &spec, &f, &err), TF_E_NOKEY);
	ck_assert_msg(strstr(err.msg, "meta: generic tile 0 (at byte 0): generic tile is encrypted"),
		      "%s", err.msg);
	spec.key = key;
	check_whole_file(tf_test_file_ok(gpath, &spec), plain, sizeof(plain));
	tf_buf_free(&g);
	tf_key_free(key);
	made_free(&m);
	tf_workspace_free(ws);
}
END_TEST

/* Issue 19 item 6: with header walks advised, a small read straddling the
 * end of a 256 MiB residency window looked up the page cache residency of
 * a page past the window: a one-byte heap over-read of the mincore() map
 * (seen by ASan and valgrind).  A range the window does not hold whole is
 * read directly; the bytes are right either way, and so is the end. */
START_TEST(test_header_read_straddles_window)
{
	const uint64_t edge = (uint64_t)256 << 20, size = edge + 8192;
	static const char mark[] = "before the edge|after the edge";
	char path[PATH_MAX], *dir;
	uint8_t got[sizeof(mark)];
	tf_source *src;
	tf_object *o;
	tf_error err;
	FILE *f;

	tf_test_tmp_path(path, "big");
	ck_assert_ptr_nonnull(f = fopen(path, "wb"));
	ck_assert_int_eq(fseeko(f, (off_t)(edge - 15), SEEK_SET), 0);	/* sparse: no disk used */
	ck_assert_uint_eq(fwrite(mark, 1, sizeof(mark), f), sizeof(mark));
	ck_assert_int_eq(ftruncate(fileno(f), (off_t)size), 0);
	ck_assert_int_eq(fclose(f), 0);
	dir = strdup(path);
	*strrchr(dir, '/') = '\0';
	ck_assert_int_eq(tf_source_local(dir, &src, &err), TF_OK);
	ck_assert_int_eq(tf_object_open(src, "big", NULL, &o, &err), TF_OK);
	ck_assert(tf_object_advise(o, TF_ACCESS_HEADERS));
	for (int pass = 0; pass < 2; pass++) {	/* cold, then cached: either way */
		ck_assert_msg(tf_object_read(o, edge - 15, got, sizeof(got), &err) == TF_OK, "%s", err.msg);
		ck_assert_mem_eq(got, mark, sizeof(mark));
		ck_assert_int_eq(tf_object_read(o, size - 8, got, 8, &err), TF_OK);
		ck_assert_int_ne(tf_object_read(o, size - 8, got, 16, &err), TF_OK);	/* past the end */
	}
	tf_object_close(o);
	tf_source_free(src);
	free(dir);
}
END_TEST

/* ---- suite -------------------------------------------------------------------------------------- */

static Suite *suite(void)
{
	Suite *s = suite_create("file");
	TCase *files = tcase_create("files");
	TCase *bad = tcase_create("corruption");

	tcase_add_checked_fixture(files, tf_test_tmp_setup, tf_test_tmp_teardown);
	tcase_add_test(files, test_index_and_chunks);
	tcase_add_loop_test(files, test_reads_through_cache, 0, 3);	/* 0, 1, 2 workers */
	tcase_add_test(files, test_zero_length_chunks);
	tcase_add_test(files, test_tiles_from_layout);
	tcase_add_test(files, test_error_names_tile_chunk_filter);
	tcase_add_test(files, test_error_checksum_and_key);
	tcase_add_test(files, test_error_open);
	tcase_add_test(files, test_header_read_straddles_window);
	tcase_set_timeout(files, 120);
	suite_add_tcase(s, files);

	if (tf_test_corpus()) {
		TCase *corpus = tcase_create("corpus");	/* only when added: else it leaks */

		tcase_add_loop_test(corpus, test_writer_matches_tiledb, 0, N_WRITER_CASES);
		tcase_add_loop_test(corpus, test_folded_offsets, 0, N_FOLDED_CASES);
		tcase_add_test(corpus, test_folded_offsets_need_string_codec);
		tcase_set_timeout(corpus, 300);
		suite_add_tcase(s, corpus);
	} else {
		printf("corpus absent: skipping writer-chunking and folded-offsets tests\n");
	}

	tcase_add_checked_fixture(bad, tf_test_tmp_setup, tf_test_tmp_teardown);
	tcase_add_loop_test(bad, test_truncations, 0, N_VICTIMS);
	tcase_add_loop_test(bad, test_bit_flips, 0, N_VICTIMS);
	tcase_set_timeout(bad, 600);
	suite_add_tcase(s, bad);
	return s;
}

TF_TEST_MAIN(suite)
