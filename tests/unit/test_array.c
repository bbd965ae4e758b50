/*
 * test_array.c - schemas, fragment metadata and array directories, against
 * the arrays TileDB wrote (../shared/corpus), and against damaged copies.
 */
#include "tf_test.h"

#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/tf_array.h"
#include "tf_craft.h"
#include "format/tf_schema.h"

/* Decode the schema generic tile at path and return its payload. */
static uint8_t *schema_payload(const char *path, size_t *n)
{
	tf_workspace *ws = tf_workspace_new();
	tf_buf out = TF_BUF_INIT(SIZE_MAX);
	size_t raw_n;
	uint8_t *raw = tf_test_read_file(path, &raw_n);
	tf_error err;

	ck_assert_msg(tf_generic_decode(tf_span_of(raw, raw_n), NULL, ws, &out, NULL, &err) == TF_OK,
		      "%s: %s", path, err.msg);
	free(raw);
	tf_workspace_free(ws);
	*n = out.len;
	return out.p;
}

static glob_t corpus_glob(const char *pattern)
{
	char full[4096];
	glob_t g = { 0 };

	snprintf(full, sizeof(full), "%s/%s", tf_test_corpus(), pattern);
	glob(full, 0, NULL, &g);
	return g;
}

START_TEST(test_corpus_schemas)
{
	glob_t g;
	size_t parsed = 0;

	if (!tf_test_corpus()) {
		printf("corpus absent: skipping schema known answers\n");
		return;
	}
	g = corpus_glob("*/array/__schema/__[0-9]*");
	for (size_t i = 0; i < g.gl_pathc; i++) {
		size_t n;
		uint8_t *p;
		tf_schema *s;
		tf_error err;

		if (strstr(g.gl_pathv[i], "/enc_"))	/* encrypted: needs the key */
			continue;
		p = schema_payload(g.gl_pathv[i], &n);
		ck_assert_msg(tf_schema_parse(tf_span_of(p, n), &s, &err) == TF_OK, "%s: %s", g.gl_pathv[i], err.msg);
		ck_assert_uint_eq(s->version, 22);
		ck_assert_uint_ge(s->ndims, 1);
		tf_schema_free(s);
		free(p);
		parsed++;
	}
	globfree(&g);
	ck_assert_uint_ge(parsed, 60);
}
END_TEST

/* Facts of one schema, from its manifest: sparse_2d. */
START_TEST(test_schema_facts)
{
	glob_t g;
	size_t n;
	uint8_t *p;
	tf_schema *s;
	tf_error err;
	char *text;

	if (!tf_test_corpus())
		return;
	g = corpus_glob("sparse_2d/array/__schema/__*");
	ck_assert_uint_eq(g.gl_pathc, 1);
	p = schema_payload(g.gl_pathv[0], &n);
	ck_assert(tf_schema_parse(tf_span_of(p, n), &s, &err) == TF_OK);
	ck_assert(!s->dense);
	ck_assert_uint_eq(s->capacity, 64);
	ck_assert_uint_eq(s->ndims, 2);
	ck_assert_uint_eq(s->nattrs, 2);
	ck_assert_str_eq(s->attrs[1].name, "s");
	ck_assert_uint_eq(s->attrs[1].cell_val_num, TF_CELL_VAR);
	ck_assert_int_eq(s->attrs[1].type, TF_DT_STRING_ASCII);
	text = tf_pipeline_text(tf_schema_dim_filters(s, &s->dims[0]));
	ck_assert_str_eq(text, "double_delta | lz4(level=-1)");
	free(text);
	tf_schema_free(s);
	free(p);
	globfree(&g);
}
END_TEST

/* Every truncation of a schema fails cleanly; bit flips never crash. */
START_TEST(test_schema_damage)
{
	glob_t g;
	size_t n;
	uint8_t *p;
	uint64_t seed = 42;
	tf_schema *s;
	tf_error err;

	if (!tf_test_corpus())
		return;
	g = corpus_glob("nullable_var_string/array/__schema/__*");
	ck_assert_uint_eq(g.gl_pathc, 1);
	p = schema_payload(g.gl_pathv[0], &n);
	for (size_t cut = 0; cut < n; cut++) {
		ck_assert_int_eq(tf_schema_parse(tf_span_of(p, cut), &s, &err), TF_E_CORRUPT);
		ck_assert(strstr(err.msg, "array schema"));
	}
	for (int i = 0; i < 3000; i++) {
		uint8_t *q = malloc(n);
		memcpy(q, p, n);
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		q[(seed >> 33) % n] ^= (uint8_t)(1u << ((seed >> 20) % 8));
		if (tf_schema_parse(tf_span_of(q, n), &s, &err) == TF_OK)
			tf_schema_free(s);
		free(q);
	}
	free(p);
	globfree(&g);
}
END_TEST

/* Copy the fragment metadata of a case into dir, damaged by `damage`. */
static void copy_array(const char *case_name, const char *dir)
{
	char cmd[16384];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && cp -r '%s/%s/array' '%s' && chmod -R u+w '%s'", dir,
		 tf_test_corpus(), case_name, dir, dir);
	ck_assert_int_eq(system(cmd), 0);
}

static tf_status describe_first(const char *dir, const char *file, tf_array_file *af, tf_error *err)
{
	char pattern[4096];
	tf_array *a;
	glob_t g = { 0 };
	tf_status rc;

	snprintf(pattern, sizeof(pattern), "%s/__fragments/*/%s", dir, file);
	ck_assert_int_eq(glob(pattern, 0, NULL, &g), 0);
	ck_assert(dir[0] == '/' && tf_array_open(tf_test_root(), dir + 1, NULL, &a, err) == TF_OK);
	rc = tf_array_describe(a, g.gl_pathv[0] + strlen(dir) + 1, af, err);
	tf_array_free(a);
	globfree(&g);
	return rc;
}

/* A fragment metadata file cut or flipped anywhere: describing its files
 * fails cleanly or succeeds, never crashes; the footer length is checked. */
START_TEST(test_fragment_damage)
{
	char dir[] = "/tmp/tf-array-XXXXXX", arr[64], meta[256];
	uint64_t seed = 7;
	tf_array_file af;
	tf_error err;
	glob_t g = { 0 };
	size_t n;
	uint8_t *orig;

	if (!tf_test_corpus())
		return;
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(arr, sizeof(arr), "%s/a", dir);
	copy_array("sparse_2d", arr);
	snprintf(meta, sizeof(meta), "%s/__fragments/*/__fragment_metadata.tdb", arr);
	ck_assert_int_eq(glob(meta, 0, NULL, &g), 0);
	orig = tf_test_read_file(g.gl_pathv[0], &n);
	ck_assert(describe_first(arr, "a1_var.tdb", &af, &err) == TF_OK);
	ck_assert_str_eq(af.kind, "var");
	ck_assert_str_eq(af.field, "s");
	tf_array_file_clear(&af);
	for (int i = 0; i < 400; i++) {
		FILE *f = fopen(g.gl_pathv[0], "wb");
		size_t len = i < 200 ? n - 1 - (size_t)i * (n / 200) : n;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		if (i >= 200)
			orig[(seed >> 33) % n] ^= 0x10;
		ck_assert_uint_eq(fwrite(orig, 1, len, f), len);
		fclose(f);
		if (describe_first(arr, "d0.tdb", &af, &err) == TF_OK)
			tf_array_file_clear(&af);
		if (i >= 200)
			orig[(seed >> 33) % n] ^= 0x10;
	}
	free(orig);
	globfree(&g);
	snprintf(meta, sizeof(meta), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(meta), 0);
}
END_TEST

/* Names alone: what an array decodes. */
START_TEST(test_decoded_names)
{
	ck_assert(tf_array_is_decoded_name("__schema/__1_1_abc"));
	ck_assert(tf_array_is_decoded_name("__schema/__enumerations/__abc_0"));
	ck_assert(tf_array_is_decoded_name("__array_schema.tdb"));
	ck_assert(tf_array_is_decoded_name("__fragments/__1_2_u_22/a0.tdb"));
	ck_assert(tf_array_is_decoded_name("__fragments/__1_2_u_22/__fragment_metadata.tdb"));
	ck_assert(tf_array_is_decoded_name("__1_2_u_10/d0_var.tdb"));	/* before format 12 */
	ck_assert(tf_array_is_decoded_name("__meta/__1_2_u"));
	ck_assert(tf_array_is_decoded_name("__commits/__1_2_u_22.del"));
	ck_assert(tf_array_is_decoded_name("__fragment_meta/__1_2_u_22.meta"));
	ck_assert(!tf_array_is_decoded_name("__commits/__1_2_u_22.wrt"));
	ck_assert(!tf_array_is_decoded_name("__meta/__1_2_u.vac"));
	ck_assert(!tf_array_is_decoded_name("__lock.tdb"));
	ck_assert(!tf_array_is_decoded_name("__fragments/__1_2_u_22.ok"));
	ck_assert(!tf_array_is_decoded_name("__labels/x/__fragments/f/a0.tdb"));
	ck_assert(!tf_array_is_decoded_name("notes.txt"));
}
END_TEST


/* ---- what TileDB never writes --------------------------------------------------------------------- */

static void set_i32(uint8_t *p, int32_t v) { tf_put_le32(p, (uint32_t)v); }
static void set_f32(uint8_t *p, float v) { memcpy(p, &v, 4); }

/* dense_2d's schema (rows, cols int32 [0,99] x [0,59], extents 32, 16;
 * i32 int32, f64 float64), changed by `how`, written back and parsed:
 * the parse's status and message. */
static tf_status parse_changed(const tf_craft *c, const char *rel, int how, tf_error *err)
{
	tf_schema *s = tf_craft_schema(c, rel), *back = NULL;
	tf_buf payload = TF_BUF_INIT(SIZE_MAX);
	tf_field *rows = &s->dims[0], *cols = &s->dims[1], *i32 = &s->attrs[0], *f64 = &s->attrs[1];
	tf_status rc;

	switch (how) {
	case 1: set_i32(rows->extent, 0); break;
	case 2: set_i32(cols->extent, -16); break;
	case 3: set_i32(cols->domain, 60); break;				/* [60, 59] */
	case 4: f64->cell_val_num = 0; break;
	case 5: f64->cell_val_num = 1u << 29; break;				/* 2^32 bytes: 0 in 32 bits */
	case 6: i32->cell_val_num = 2; break;					/* a fill of one value */
	case 7: rows->cell_val_num = 3; break;
	case 8: rows->type = TF_DT_FLOAT32, set_f32(rows->domain, 0), set_f32(rows->domain + 4, 99),
		set_f32(rows->extent, 0); break;
	case 9: rows->type = TF_DT_FLOAT32, set_f32(rows->domain, 0), set_f32(rows->domain + 4, 99),
		set_f32(rows->extent, NAN); break;
	case 10: rows->type = TF_DT_FLOAT32, set_f32(rows->domain, NAN), set_f32(rows->domain + 4, 99),
		 set_f32(rows->extent, 1); break;
	case 11: rows->type = TF_DT_FLOAT32, set_f32(rows->domain, 0), set_f32(rows->domain + 4, 99),
		 set_f32(rows->extent, 1e-38f); break;				/* tiny, but positive */
	default: break;
	}
	tf_craft_schema_payload(s, &payload);
	rc = tf_schema_parse(tf_span_of(payload.p, payload.len), &back, err);
	tf_schema_free(back);
	tf_schema_free(s);
	tf_buf_free(&payload);
	return rc;
}

/* A schema TileDB could not have written is refused when parsed, so no
 * reader divides by its extent or sizes a buffer by its cells: a zero or
 * negative extent (views: SIGFPE), a cell size that wraps 32 bits (a
 * division by 0), a cell of a fill value it does not hold. */
START_TEST(test_schema_never_written)
{
	static const struct { int how; const char *why; } bad[] = {
		{ 1, "tile extent not positive" }, { 2, "tile extent not positive" },
		{ 3, "domain bounds out of order" }, { 4, "no values per cell" },
		{ 5, "more than a chunk holds" }, { 6, "a fill value of 4 bytes for cells of 8" },
		{ 7, "3 values per cell" }, { 8, "tile extent not positive" }, { 9, "tile extent not positive" },
		{ 10, "domain bounds out of order" },
	};
	char rel[300], name[256];
	tf_craft c;
	tf_error err;

	if (!tf_test_corpus())
		return;
	snprintf(c.dir, sizeof(c.dir), "%s/dense_2d/array", tf_test_corpus());	/* read only */
	tf_craft_only_file(&c, "__schema", name);
	snprintf(rel, sizeof(rel), "__schema/%s", name);
	ck_assert_msg(parse_changed(&c, rel, 0, &err) == TF_OK, "%s", err.msg);	/* written back as read */
	ck_assert_msg(parse_changed(&c, rel, 11, &err) == TF_OK, "%s", err.msg);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(parse_changed(&c, rel, bad[i].how, &err), TF_E_CORRUPT);
		ck_assert_msg(strstr(err.msg, bad[i].why), "%d: %s", bad[i].how, err.msg);
	}
}
END_TEST

/* Formats before 6 store no fill values: a reader makes TileDB's default,
 * one value per cell value.  40 attributes of 2^20 int32 values each made
 * 160 MiB of them from a schema of a few KB; their total is bounded. */
START_TEST(test_schema_default_fills_bounded)
{
	char rel[300], name[256];
	tf_field copies[40], *own;
	tf_buf payload = TF_BUF_INIT(SIZE_MAX);
	tf_craft c;
	tf_schema *s, *back = NULL;
	size_t nown;
	tf_error err;

	if (!tf_test_corpus())
		return;
	snprintf(c.dir, sizeof(c.dir), "%s/dense_2d/array", tf_test_corpus());	/* read only */
	tf_craft_only_file(&c, "__schema", name);
	snprintf(rel, sizeof(rel), "__schema/%s", name);
	s = tf_craft_schema(&c, rel);
	s->version = s->layout_version = 5;
	own = s->attrs, nown = s->nattrs;
	for (size_t i = 0; i < 40; i++) {
		copies[i] = own[0];
		copies[i].cell_val_num = 1u << 20;
	}
	s->attrs = copies;
	for (size_t n = 10; n <= 40; n += 30) {	/* 40 MiB, then 160 MiB */
		s->nattrs = n;
		payload.len = 0;
		tf_craft_schema_payload(s, &payload);
		if (n == 10) {
			ck_assert_msg(tf_schema_parse(tf_span_of(payload.p, payload.len), &back, &err) == TF_OK, "%s",
				      err.msg);
			ck_assert_uint_eq(back->attrs[9].fill_size, 4 << 20);
			tf_schema_free(back);
		} else {
			ck_assert_int_eq(tf_schema_parse(tf_span_of(payload.p, payload.len), &back, &err), TF_E_CORRUPT);
			ck_assert_msg(strstr(err.msg, "default fill values of more than 64 MiB"), "%s", err.msg);
		}
	}
	s->attrs = own, s->nattrs = nown;
	tf_schema_free(s);
	tf_buf_free(&payload);
}
END_TEST

/* A dense tile's decoded size is its cells (the extents' product) times
 * the cell size, from numbers the schema claims: (2^31 - 1)^2 cells of 8
 * bytes wrapped 64 bits, and the tile was described with a size it does
 * not have. */
START_TEST(test_layout_cells_overflow)
{
	char rel[600], name[256], frag[256];
	tf_craft c;
	tf_schema *s;
	tf_array *a;
	tf_array_file af;
	tf_error err;

	if (!tf_craft_copy("dense_2d", &c))
		return;
	tf_craft_only_file(&c, "__schema", name);
	snprintf(rel, sizeof(rel), "__schema/%s", name);
	s = tf_craft_schema(&c, rel);
	set_i32(s->dims[0].extent, INT32_MAX);
	set_i32(s->dims[1].extent, INT32_MAX);
	tf_craft_write_schema(&c, rel, s);	/* the fragment's own schema */
	tf_schema_free(s);
	tf_craft_only_file(&c, "__fragments", frag);
	ck_assert(tf_array_open(tf_test_root(), c.dir + 1, NULL, &a, &err) == TF_OK);
	snprintf(rel, sizeof(rel), "__fragments/%s/a0.tdb", frag);	/* int32: 2^64 - 2^34 + 4 bytes */
	ck_assert_msg(tf_array_describe(a, rel, &af, &err) == TF_OK, "%s", err.msg);
	ck_assert_uint_eq(af.spec.tiles[0].size, (uint64_t)INT32_MAX * INT32_MAX * 4);
	tf_array_file_clear(&af);
	snprintf(rel, sizeof(rel), "__fragments/%s/a1.tdb", frag);	/* float64: past 2^64 */
	ck_assert_int_eq(tf_array_describe(a, rel, &af, &err), TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "cells of 8 bytes"), "%s", err.msg);
	tf_array_free(a);
	tf_craft_remove(&c);
}
END_TEST

/* Issue 19: idle fragments' metadata is bounded by bytes, not only by
 * number: four fragments of 25,000 tiles each hold 200 KB of tile offsets
 * per field once their files are described; under a 256 KiB bound the
 * array keeps what fits, and describing goes on working (before: all
 * four, 3.2 MB; a fragment of a million tiles is 8 MB per field). */
START_TEST(test_fragment_bytes_bounded)
{
	char dir[] = "/tmp/tf_frags.XXXXXX", cmd[8192], rel[600];
	const char *g = getenv("GENARRAY"), *tt = getenv("TILETOOL");
	tf_source *src;
	tf_array *a;
	glob_t gl;
	char *root;
	tf_error err;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	if (g)
		snprintf(cmd, sizeof(cmd), "'%s' %s/a --sparse 1000000 4 10 > /dev/null", g, dir);
	else
		snprintf(cmd, sizeof(cmd), "'%.*s/../contrib/genarray' %s/a --sparse 1000000 4 10 > /dev/null",
			 tt && strrchr(tt, '/') ? (int)(strrchr(tt, '/') - tt) : 1, tt && strrchr(tt, '/') ? tt : ".",
			 dir);
	ck_assert_msg(system(cmd) == 0, "%s", cmd);
	snprintf(cmd, sizeof(cmd), "%s/a", dir);
	ck_assert_int_eq(tf_source_locate(cmd, NULL, &src, &root, &err), TF_OK);
	ck_assert_int_eq(tf_array_open(src, root, NULL, &a, &err), TF_OK);
	tf_array_set_idle_limit(a, 256 << 10);
	snprintf(cmd, sizeof(cmd), "%s/a/__fragments/*/*.tdb", dir);
	ck_assert_int_eq(glob(cmd, 0, NULL, &gl), 0);
	for (size_t i = 0; i < gl.gl_pathc; i++) {
		tf_array_file af;
		snprintf(rel, sizeof(rel), "%s", gl.gl_pathv[i] + strlen(dir) + 3);
		ck_assert_msg(tf_array_describe(a, rel, &af, &err) == TF_OK, "%s: %s", rel, err.msg);
		tf_array_file_clear(&af);
		ck_assert_uint_le(tf_array_idle_bytes(a), 256 << 10);
	}
	globfree(&gl);
	tf_array_free(a);
	free(root);
	tf_source_free(src);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("array");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_corpus_schemas);
	tcase_add_test(tc, test_schema_facts);
	tcase_add_test(tc, test_schema_damage);
	tcase_add_test(tc, test_fragment_damage);
	tcase_add_test(tc, test_decoded_names);
	tcase_add_test(tc, test_schema_never_written);
	tcase_add_test(tc, test_layout_cells_overflow);
	tcase_add_test(tc, test_schema_default_fills_bounded);
	tcase_add_test(tc, test_fragment_bytes_bounded);
	suite_add_tcase(s, tc);
	return s;
}

TF_TEST_MAIN(suite)
