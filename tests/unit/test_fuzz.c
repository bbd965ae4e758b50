/*
 * test_fuzz.c - regressions found by the fuzz targets (tests/fuzz/README,
 * "Campaigns"): one test per finding, each of which failed before its fix.
 * Inputs are built here from the minimized case.
 *
 * Leaks are asserted with the heap's own count (mallinfo2) as well, so a
 * plain `make check` catches them, not only check-valgrind and sanitizer
 * builds (whose allocators the count does not see: there it passes and
 * their own leak checks stand in).  The count includes chunks glibc keeps
 * in per-thread caches, so it is taken over many runs once a few have
 * filled them: a leak grows with the runs, the caches do not.
 */
#include "tf_test.h"

#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cache/tf_cache.h"
#include "config/tf_config.h"
#include "tf_craft.h"
#include "format/tf_file.h"
#include "cache/tf_handle.h"
#include "format/tf_fragment.h"
#include "util/tf_keys.h"
#include "views/tf_view.h"

/* dir/name holding n bytes of p, mode 0600 (a configuration that holds
 * keys must be private); its path in out[PATH_MAX]. */
static void put_file(const char *name, const void *p, size_t n, char *out)
{
	tf_test_tmp_path(out, name);
	tf_test_write_file(out, p, n);
	ck_assert_int_eq(chmod(out, 0600), 0);
}

#define LEAK_RUNS 64
/* Runs before the count is taken: glibc's per-thread cache keeps up to 7
 * freed chunks of each size, counted as in use, and fills over the first
 * runs (by more than LEAK_RUNS small blocks for a configuration load). */
#define WARM_RUNS 8

static size_t heap_in_use(void)
{
	return mallinfo2().uordblks;
}

/* Whether the heap grew by at least one small block per run. */
static bool grew(size_t before)
{
	size_t after = heap_in_use();

	return after > before && after - before >= LEAK_RUNS * 16;
}

/* ---- fuzz_config ------------------------------------------------------------------------ */

#define KEY1_HEX "4142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f60"
#define KEY2_HEX "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

/* fuzz_config, leak: "[array a]\nkey = \n...key = k" - a key given twice in
 * an [array] section leaked the first name.  The last one wins, as in
 * [match] sections. */
START_TEST(test_config_array_key_twice)
{
	static const char text[] = "[key one]\nhex = " KEY1_HEX "\n[key two]\nhex = " KEY2_HEX "\n"
				   "[array a]\nkey = one\nkey = two\n";
	/* Without keys (whose page-aligned storage blurs the heap's count):
	 * the load fails on the unknown key "y", "x" was already leaked. */
	static const char keyless[] = "[array a]\nkey = x\nkey = y\n";
	char path[PATH_MAX];
	tf_config *c;
	tf_error err;
	size_t before;

	put_file("tilefs.ini", text, strlen(text), path);
	ck_assert_msg(tf_config_load(path, &c, &err) == TF_OK, "%s", err.msg);
	ck_assert_ptr_nonnull(tf_config_array_key(c, "a"));
	ck_assert_uint_eq(tf_key_bytes(tf_config_array_key(c, "a"))[1], 0x01);	/* key two */
	tf_config_free(c);
	put_file("tilefs.ini", keyless, strlen(keyless), path);
	ck_assert_int_eq(tf_config_load(path, &c, &err), TF_E_INVAL);
	ck_assert_msg(strstr(err.msg, ":3: no [key y] section"), "%s", err.msg);
	for (int i = 0; i < WARM_RUNS; i++)
		ck_assert_int_eq(tf_config_load(path, &c, &err), TF_E_INVAL);
	before = heap_in_use();
	for (int i = 0; i < LEAK_RUNS; i++)
		ck_assert_int_eq(tf_config_load(path, &c, &err), TF_E_INVAL);
	ck_assert_msg(!grew(before), "the heap grew by %zu bytes", heap_in_use() - before);
}
END_TEST

/* ---- fuzz_file, fuzz_fragment ---------------------------------------------------------- */

/* fuzz_file and fuzz_fragment, "decoded size overflows": tile sizes from
 * fragment metadata were summed into the file's size unchecked, so two
 * tiles of 2^63 bytes made a file of 0 bytes whose tiles lie beyond it. */
START_TEST(test_layout_sizes_overflow)
{
	static const uint8_t two_empty_tiles[16] = { 0 };
	tf_tile_layout lay[2] = { { 0, 8, (uint64_t)1 << 63 }, { 8, 8, (uint64_t)1 << 63 } };
	tf_file_spec spec = { .type = TF_DT_UINT8, .cell_val_num = 1, .tiles = lay, .ntiles = 2 };
	char path[PATH_MAX];
	tf_error err;
	tf_file *f = NULL;

	put_file("a0.tdb", two_empty_tiles, sizeof(two_empty_tiles), path);
	ck_assert_int_eq(tf_test_file_open(path, NULL, &spec, &f, &err), TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "tile 0: decoded size") && strstr(err.msg, "past 2^63"), "%s", err.msg);
	lay[0].size = (uint64_t)1 << 62;	/* as large as an off_t goes: opens */
	lay[1].size = ((uint64_t)1 << 62) - 1;
	ck_assert_msg(tf_test_file_open(path, NULL, &spec, &f, &err) == TF_OK, "%s", err.msg);
	ck_assert_uint_eq(tf_file_size(f), (uint64_t)INT64_MAX);
	tf_file_unref(f);
}
END_TEST

/* fuzz_fragment, "requested allocation size 0x100000000000000": the
 * tiles of a var data file that folded offsets are rebuilt from were
 * taken from fragment metadata unchecked, and rebuilding one read its
 * claimed stored size into memory. */
START_TEST(test_folded_var_tiles_beyond_file)
{
	static const uint8_t empty_tile[8] = { 0 };
	tf_tile_layout off_tiles[1] = { { 0, 8, 8 } }, var_tiles[1] = { { 0, (uint64_t)1 << 56, 0 } };
	tf_file_spec spec = { .type = TF_DT_UINT64, .cell_val_num = 1, .tiles = off_tiles, .ntiles = 1,
			      .var_type = TF_DT_STRING_ASCII, .var_tiles = var_tiles, .nvar_tiles = 1 };
	tf_pipeline *rle = tf_pipeline_new();
	char path[PATH_MAX], var_path[PATH_MAX];
	tf_error err;
	tf_file *f = NULL;

	ck_assert(tf_pipeline_append(rle, TF_F_RLE, NULL) == TF_OK);
	spec.var_pipeline = rle;
	put_file("a0.tdb", empty_tile, sizeof(empty_tile), path);
	put_file("a0_var.tdb", empty_tile, sizeof(empty_tile), var_path);
	spec.var_data = var_path;
	ck_assert_int_eq(tf_test_file_open(path, NULL, &spec, &f, &err), TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "a0_var.tdb: tile 0: stored at 0+72057594037927936, beyond"), "%s",
		      err.msg);
	spec.tiles = NULL;	/* walked, the data tile decoded at open: the same */
	ck_assert_int_eq(tf_test_file_open(path, NULL, &spec, &f, &err), TF_E_CORRUPT);
	tf_pipeline_free(rle);
}
END_TEST

/* fuzz_file, out-of-memory (malloc of 2 GiB): tf_tile_decode made room in
 * its output for what a chunk header claims before the pipeline refused a
 * claim over TF_MAX_CHUNK_BYTES, so a 12-byte header claiming 1.4 GB in a
 * rebuilt folded offsets tile (whose buffer may grow to 2 GiB) allocated
 * 2 GiB.  A refused claim now allocates nothing. */
START_TEST(test_chunk_claim_refused_before_allocating)
{
	uint8_t tile[8 + 12] = { 1 };	/* one chunk: orig 1476395326, nothing stored */
	tf_buf out = TF_BUF_INIT(2 * TF_MAX_CHUNK_BYTES);
	tf_chunk_env env = { .type = TF_DT_STRING_ASCII, .cell_size = 1, .version = 22 };
	tf_workspace *ws = tf_workspace_new();
	tf_pipeline *none = tf_pipeline_new();
	tf_error err;

	tf_put_le32(tile + 8, 1476395326u);
	ck_assert_int_eq(tf_tile_decode(none, &env, ws, tf_span_of(tile, sizeof(tile)), &out, NULL, NULL, &err),
			 TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "claims 1476395326 decoded bytes"), "%s", err.msg);
	ck_assert_uint_lt(out.cap, TF_MAX_CHUNK_BYTES);
	tf_buf_free(&out);
	tf_pipeline_free(none);
	tf_workspace_free(ws);
}
END_TEST

/* ---- found on main's library (tf_source, tf_handle) ------------------------------------ */

/* payload as one unfiltered generic tile (§6), written to path. */
static void put_generic(const char *path, tf_span payload)
{
	tf_chunk_env env = { .type = TF_DT_CHAR, .cell_size = 1, .version = 22 };
	tf_buf pipe = TF_BUF_INIT(SIZE_MAX), tile = TF_BUF_INIT(SIZE_MAX), out = TF_BUF_INIT(SIZE_MAX);
	tf_pipeline *none = tf_pipeline_new();
	tf_workspace *ws = tf_workspace_new();

	ck_assert(tf_pipeline_serialize(none, &pipe, NULL) == TF_OK);
	ck_assert(tf_tile_encode(none, &env, ws, payload, NULL, 0, &tile, NULL) == TF_OK);
	ck_assert(tf_buf_put_u32(&out, 22, NULL) == TF_OK && tf_buf_put_u64(&out, tile.len, NULL) == TF_OK &&
		  tf_buf_put_u64(&out, payload.n, NULL) == TF_OK && tf_buf_put_u8(&out, TF_DT_CHAR, NULL) == TF_OK &&
		  tf_buf_put_u64(&out, 1, NULL) == TF_OK && tf_buf_put_u8(&out, 0, NULL) == TF_OK &&
		  tf_buf_put_u32(&out, (uint32_t)pipe.len, NULL) == TF_OK &&
		  tf_buf_append(&out, pipe.p, pipe.len, NULL) == TF_OK &&
		  tf_buf_append(&out, tile.p, tile.len, NULL) == TF_OK);
	tf_test_write_file(path, out.p, out.len);
	tf_buf_free(&pipe);
	tf_buf_free(&tile);
	tf_buf_free(&out);
	tf_pipeline_free(none);
	tf_workspace_free(ws);
}

/* Fragment metadata of format 1-2 (§8.7) claiming `version`, for an array
 * of one attribute: no tiles, every list and size empty. */
static void put_v1v2_metadata(const char *path, uint32_t version)
{
	tf_buf p = TF_BUF_INIT(SIZE_MAX);

	ck_assert(tf_buf_put_u32(&p, version, NULL) == TF_OK);
	/* domain, MBRs, bounding coordinates, 2 + 1 + 1 tile lists, last tile
	 * cells, 2 file sizes, 1 var file size */
	for (int i = 0; i < 11; i++)
		ck_assert(tf_buf_put_u64(&p, 0, NULL) == TF_OK);
	put_generic(path, tf_span_of(p.p, p.len));
	tf_buf_free(&p);
}

/* fuzz_fragment, heap-buffer-overflow in make_layout: a fragment named as
 * format 1-2 whose metadata said format 9 had its files looked up by
 * format 9's names (d0.tdb: the dimension's index), past the lists format
 * 1-2 metadata holds (attributes and coordinates only). */
START_TEST(test_v1v2_fragment_version)
{
	static const char name[] = "__0123456789abcdef0123456789abcdef_1541540586869";
	tf_pipeline *none = tf_pipeline_new();
	tf_field attr = { .name = "a", .type = TF_DT_INT32, .cell_val_num = 1, .filters = none };
	tf_field dim = { .name = "d", .type = TF_DT_INT32, .cell_val_num = 1, .filters = none };
	tf_schema s = { .version = 1, .layout_version = 1, .capacity = 10, .coords = none, .offsets = none,
			.validity = none, .nattrs = 1, .ndims = 1, .attrs = &attr, .dims = &dim };
	char dir[PATH_MAX], path[PATH_MAX + 32];
	tf_fragment_file ff;
	tf_fragment *fr;
	tf_error err;

	tf_test_tmp_path(dir, name);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	snprintf(path, sizeof(path), "%s/__fragment_metadata.tdb", dir);
	put_v1v2_metadata(path, 1);	/* as TileDB 1.4 wrote it: files named after fields */
	ck_assert_msg(tf_fragment_open(tf_test_root(), dir + 1, name, &s, NULL, NULL, NULL, &fr, &err) == TF_OK,
		      "%s", err.msg);
	ck_assert_msg(tf_fragment_describe(fr, "a.tdb", &ff, &err) == TF_OK, "%s", err.msg);
	tf_fragment_file_clear(&ff);
	ck_assert_int_eq(tf_fragment_describe(fr, "d0.tdb", &ff, &err), TF_E_INVAL);
	tf_fragment_free(fr);
	put_v1v2_metadata(path, 9);
	ck_assert_int_eq(tf_fragment_open(tf_test_root(), dir + 1, name, &s, NULL, NULL, NULL, &fr, &err),
			 TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "format 9 metadata in a fragment named as format 1-2"), "%s", err.msg);
	tf_pipeline_free(none);
}
END_TEST

/* fuzz_file, UBSan "5.48017e+20 is outside the range of representable
 * values of type 'unsigned long'" in ahead_step: a decode-ahead step is
 * the stored run scaled by decoded / stored bytes, and a layout claiming
 * 2^62 decoded bytes for a tile of 8 made it overflow the conversion
 * (undefined behaviour: only a sanitizer build sees it fail; the read
 * must return the honest tile's bytes either way). */
START_TEST(test_ahead_step_of_lying_layout)
{
	tf_chunk_env env = { .type = TF_DT_UINT8, .cell_size = 1, .version = 22 };
	tf_buf file = TF_BUF_INIT(SIZE_MAX);
	tf_workspace *ws = tf_workspace_new();
	tf_pipeline *none = tf_pipeline_new();
	uint8_t *data = tf_test_data(4096, TF_GEN_RANDOM, 1, 11), got[4096];
	tf_tile_layout lay[2];
	tf_file_spec spec = { .pipeline = none, .type = TF_DT_UINT8, .cell_val_num = 1, .tiles = lay, .ntiles = 2 };
	char path[PATH_MAX];
	tf_cache *c;
	tf_handle *h;
	tf_file *f;
	tf_error err;
	size_t n;

	ck_assert(tf_tile_encode(none, &env, ws, tf_span_of(data, 4096), NULL, 0, &file, NULL) == TF_OK);
	lay[0] = (tf_tile_layout){ 0, file.len, 4096 };
	lay[1] = (tf_tile_layout){ file.len, 8, (uint64_t)1 << 62 };	/* a 0-chunk tile */
	ck_assert(tf_buf_put_u64(&file, 0, NULL) == TF_OK);
	tf_test_tmp_path(path, "a0.tdb");
	tf_test_write_file(path, file.p, file.len);
	f = tf_test_file_ok(path, &spec);
	h = tf_test_handle_ok(f);
	ck_assert(tf_cache_new((size_t)4 << 20, 1, &c, &err) == TF_OK);	/* a worker: decode-ahead */
	ck_assert_msg(tf_handle_read(h, c, ws, 0, sizeof(got), got, &n, &err) == TF_OK, "%s", err.msg);
	ck_assert_uint_eq(n, sizeof(got));
	ck_assert_mem_eq(got, data, sizeof(got));
	tf_handle_close(h);
	tf_file_unref(f);
	tf_cache_free(c);
	tf_buf_free(&file);
	tf_pipeline_free(none);
	tf_workspace_free(ws);
	free(data);
}
END_TEST

/* fuzz_view (run on ebc7eab to check the target finds what review found:
 * 490,000 executions), UBSan "division by zero" in load_field: str_empty_tiles
 * with its attribute s made a DATETIME_MONTH of 0 values per cell, so cells
 * of 0 bytes, by which a tile's byte limit was divided.  Such a schema is
 * refused (tf_schema.c check_attribute): the views fail to open, saying so. */
START_TEST(test_view_cells_of_no_values)
{
	char rel[300], name[256];
	tf_craft c;
	tf_schema *s;
	tf_source *src;
	char *arel;
	tf_array *a;
	tf_cache *cache;
	tf_views *v;
	tf_view *w;
	tf_error err;
	tf_status rc;
	uint8_t buf[4096];
	size_t got;

	if (!tf_craft_copy("str_empty_tiles", &c))
		return;
	tf_craft_only_file(&c, "__schema", name);
	snprintf(rel, sizeof(rel), "__schema/%s", name);
	s = tf_craft_schema(&c, rel);
	s->attrs[0].type = TF_DT_DATETIME_YEAR + 1;
	s->attrs[0].cell_val_num = 0;
	tf_craft_write_schema(&c, rel, s);
	tf_schema_free(s);
	ck_assert_int_eq(tf_source_locate(c.dir, NULL, &src, &arel, &err), TF_OK);
	ck_assert_int_eq(tf_array_open(src, arel, NULL, &a, &err), TF_OK);
	ck_assert_int_eq(tf_cache_new(1 << 20, 0, &cache, &err), TF_OK);
	if ((rc = tf_views_open(a, cache, &v, &err)) == TF_OK) {	/* before the fix: on to the division */
		tf_workspace *ws = tf_workspace_new();
		if (tf_view_open(v, "cells.csv", &w, &err) == TF_OK) {
			tf_view_read(w, ws, 0, sizeof(buf), buf, &got, &err);
			tf_view_close(w);
		}
		tf_workspace_free(ws);
		tf_views_unref(v);
	}
	ck_assert_int_eq(rc, TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "attribute s: no values per cell"), "%s", err.msg);
	tf_cache_free(cache);
	tf_array_free(a);
	free(arel);
	tf_source_free(src);
	tf_craft_remove(&c);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("fuzz");
	TCase *tc = tcase_create("regressions");

	tcase_add_checked_fixture(tc, tf_test_tmp_setup, tf_test_tmp_teardown);
	tcase_add_test(tc, test_config_array_key_twice);
	tcase_add_test(tc, test_layout_sizes_overflow);
	tcase_add_test(tc, test_folded_var_tiles_beyond_file);
	tcase_add_test(tc, test_chunk_claim_refused_before_allocating);
	tcase_add_test(tc, test_v1v2_fragment_version);
	tcase_add_test(tc, test_ahead_step_of_lying_layout);
	tcase_add_test(tc, test_view_cells_of_no_values);
	suite_add_tcase(s, tc);
	return s;
}

TF_TEST_MAIN(suite)
