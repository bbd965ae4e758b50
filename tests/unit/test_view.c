/*
 * test_view.c - array views: cell text and NumPy headers, delete
 * conditions, the sparse merge's runs against its cells, and tf_views
 * over corpus arrays (ranged and concurrent reads equal to a whole pass,
 * listings, xattrs, a changed array).
 */
#include "tf_test.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>
#include <zlib.h>

#include "views/tf_cells.h"
#include "views/tf_condition.h"
#include "tf_craft.h"
#include "cache/tf_index.h"
#include "views/tf_merge.h"
#include "views/tf_view.h"

/* The directory part of path (a static copy). */
static const char *dirname_of(const char *path)
{
	static char d[4096];
	const char *slash = strrchr(path, '/');

	snprintf(d, sizeof(d), "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
	return d;
}

/* ---- text of values ---------------------------------------------------------------------- */

static char *text_of(tf_datatype t, uint32_t cvn, const void *p, size_t n, bool valid)
{
	static char out[4096];
	tf_buf b = TF_BUF_INIT(SIZE_MAX);
	tf_cellfmt f = { t, cvn, NULL };

	ck_assert_int_eq(tf_cell_format(&b, &f, p, n, valid, NULL), TF_OK);
	ck_assert_uint_lt(b.len, sizeof(out));
	memcpy(out, b.p ? b.p : (uint8_t *)"", b.len);
	out[b.len] = '\0';
	tf_buf_free(&b);
	return out;
}

START_TEST(test_float_shortest)
{
	static const double d[] = { 0.1, 1.0 / 3, 1e300, 5e-324, 123456789.125, 2.5, -0.0, 1e21, 1e-7,
				    0.30000000000000004, 9007199254740993.0, 1.7976931348623157e308 };
	static const char *const want[] = { "0.1", "0.333333333333333", "1e+300", "4.94065645841247e-324",
					    "123456789.125", "2.5", "-0", "1e+21", "1e-07",
					    "0.30000000000000004", "9007199254740992", "1.7976931348623157e+308" };
	char buf[32];
	uint64_t seed = 7;

	for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++) {
		tf_fmt_f64(buf, d[i]);
		if (i == 1)	/* 1/3 needs 16 digits */
			ck_assert_str_eq(buf, "0.3333333333333333");
		else
			ck_assert_str_eq(buf, want[i]);
	}
	tf_fmt_f32(buf, 0.1f);
	ck_assert_str_eq(buf, "0.1");
	tf_fmt_f32(buf, 16777217.0f);
	ck_assert_str_eq(buf, "16777216");
	tf_fmt_f32(buf, 3.14159274f);
	ck_assert_str_eq(buf, "3.1415927");
	/* Random bit patterns: every one parses back, and one digit fewer would not. */
	for (int i = 0; i < 4000; i++) {
		uint64_t u;
		double v, w;
		int digits;
		char shorter[400];

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		u = seed ^ seed >> 29;
		memcpy(&v, &u, 8);
		if (!isfinite(v))
			continue;
		tf_fmt_f64(buf, v);
		ck_assert_msg(strtod(buf, NULL) == v, "%s", buf);
		digits = (int)strcspn(buf + (buf[0] == '-'), "e") - (strchr(buf, '.') != NULL);
		if (digits > 1) {
			snprintf(shorter, sizeof(shorter), "%.*g", digits - 1, v);
			w = strtod(shorter, NULL);
			ck_assert_msg(w != v || strlen(shorter) >= strlen(buf), "%s round-trips shorter as %s", buf, shorter);
		}
	}
	tf_fmt_f64(buf, NAN);
	ck_assert_str_eq(buf, "nan");
	tf_fmt_f64(buf, -INFINITY);
	ck_assert_str_eq(buf, "-inf");
}
END_TEST

START_TEST(test_datetimes)
{
	static const struct { tf_datatype t; int64_t v; const char *want; } cases[] = {
		{ TF_DT_DATETIME_YEAR, 49, "2019" },
		{ TF_DT_DATETIME_YEAR + 1, 591, "2019-04" },
		{ TF_DT_DATETIME_YEAR + 2, 2500, "2017-11-30" },
		{ TF_DT_DATETIME_YEAR + 3, 18000, "2019-04-14" },
		{ TF_DT_DATETIME_YEAR + 3, -800000, "-221-09-04" },
		{ TF_DT_DATETIME_YEAR + 3, 3000000, "10183-09-21" },
		{ TF_DT_DATETIME_YEAR + 4, 450000, "2021-05-03T00Z" },
		{ TF_DT_DATETIME_YEAR + 5, 27000000, "2021-05-03T00:00Z" },
		{ TF_DT_DATETIME_YEAR + 6, 1555249510, "2019-04-14T13:45:10Z" },
		{ TF_DT_DATETIME_YEAR + 7, 1555249510123, "2019-04-14T13:45:10.123Z" },
		{ TF_DT_DATETIME_YEAR + 8, -1, "1969-12-31T23:59:59.999999Z" },
		{ TF_DT_DATETIME_YEAR + 9, 1, "1970-01-01T00:00:00.000000001Z" },
		{ TF_DT_DATETIME_AS, -5, "1969-12-31T23:59:59.999999999999999995Z" },
		{ TF_DT_DATETIME_YEAR + 3, INT64_MIN, "NaT" },
		{ TF_DT_TIME_HR, 25, "25" },
		{ TF_DT_TIME_HR + 1, 61, "01:01" },
		{ TF_DT_TIME_HR + 2, -3661, "-01:01:01" },
		{ TF_DT_TIME_HR + 3, 5000, "00:00:05.000" },
		{ TF_DT_TIME_AS, 1, "00:00:00.000000000000000001" },
		{ TF_DT_TIME_HR + 5, INT64_MIN, "NaT" },
	};
	char buf[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tf_fmt_datetime(buf, cases[i].t, cases[i].v);
		ck_assert_str_eq(buf, cases[i].want);
	}
}
END_TEST

START_TEST(test_fields)
{
	static const int32_t three[] = { 1, -2, 2147483647 };
	static const uint8_t blob[] = { 0x00, 0xab, 0x10 };
	static const uint16_t utf16[] = { 0x67, 0xfc, 0xd83d, 0xde00 };	/* g ü U+1F600 */
	int8_t neg = -128;
	uint64_t big = UINT64_MAX;
	uint8_t flag = 7;

	ck_assert_str_eq(text_of(TF_DT_INT32, 3, three, sizeof(three), true), "1 -2 2147483647");
	ck_assert_str_eq(text_of(TF_DT_INT8, 1, &neg, 1, true), "-128");
	ck_assert_str_eq(text_of(TF_DT_UINT64, 1, &big, 8, true), "18446744073709551615");
	ck_assert_str_eq(text_of(TF_DT_BOOL, 1, &flag, 1, true), "1");
	ck_assert_str_eq(text_of(TF_DT_INT32, TF_CELL_VAR, three, 0, true), "\"\"");
	ck_assert_str_eq(text_of(TF_DT_INT32, 1, three, 4, false), "");
	ck_assert_str_eq(text_of(TF_DT_STRING_ASCII, TF_CELL_VAR, "", 0, true), "\"\"");
	ck_assert_str_eq(text_of(TF_DT_STRING_ASCII, TF_CELL_VAR, "plain", 5, true), "plain");
	ck_assert_str_eq(text_of(TF_DT_STRING_UTF8, TF_CELL_VAR, "a,b", 3, true), "\"a,b\"");
	ck_assert_str_eq(text_of(TF_DT_CHAR, TF_CELL_VAR, "say \"hi\"\n", 9, true), "\"say \"\"hi\"\"\n\"");
	ck_assert_str_eq(text_of(TF_DT_BLOB, 3, blob, 3, true), "00ab10");
	ck_assert_str_eq(text_of(TF_DT_BLOB, TF_CELL_VAR, blob, 0, true), "\"\"");
	ck_assert_str_eq(text_of(TF_DT_STRING_UTF16, TF_CELL_VAR, utf16, sizeof(utf16), true),
			 "g\xc3\xbc\xf0\x9f\x98\x80");
}
END_TEST

/* An enumeration payload: version, name, path, type, cell_val_num,
 * ordered, data, [offsets]. */
static size_t enum_payload(uint8_t *p, bool var)
{
	tf_buf b;

	tf_buf_wrap(&b, p, 512);
	tf_buf_put_u32(&b, 0, NULL);
	tf_buf_put_u32(&b, 6, NULL), tf_buf_append(&b, "colors", 6, NULL);
	tf_buf_put_u32(&b, 4, NULL), tf_buf_append(&b, "__e0", 4, NULL);
	tf_buf_put_u8(&b, var ? TF_DT_STRING_UTF8 : TF_DT_INT32, NULL);
	tf_buf_put_u32(&b, var ? TF_CELL_VAR : 1, NULL);
	tf_buf_put_u8(&b, 0, NULL);
	if (var) {
		tf_buf_put_u64(&b, 11, NULL), tf_buf_append(&b, "redgreenb,u", 11, NULL);
		tf_buf_put_u64(&b, 24, NULL);
		tf_buf_put_u64(&b, 0, NULL), tf_buf_put_u64(&b, 3, NULL), tf_buf_put_u64(&b, 8, NULL);
	} else {
		tf_buf_put_u64(&b, 8, NULL), tf_buf_put_u32(&b, 16, NULL), tf_buf_put_u32(&b, 32, NULL);
	}
	return b.len;
}

START_TEST(test_enumerations)
{
	uint8_t p[512];
	size_t n = enum_payload(p, true);
	tf_enum *e;
	tf_buf b = TF_BUF_INIT(SIZE_MAX);
	tf_cellfmt f = { TF_DT_UINT8, 1, NULL };
	uint8_t idx[] = { 0, 2, 3, 255 };
	int16_t sidx = -1;

	ck_assert_int_eq(tf_enum_parse(tf_span_of(p, n), &e, NULL), TF_OK);
	ck_assert_uint_eq(tf_enum_count(e), 3);
	f.enumeration = e;
	for (size_t i = 0; i < 4; i++) {
		ck_assert_int_eq(tf_cell_format(&b, &f, &idx[i], 1, true, NULL), TF_OK);
		tf_buf_put_u8(&b, ';', NULL);
	}
	f.type = TF_DT_INT16;
	ck_assert_int_eq(tf_cell_format(&b, &f, (uint8_t *)&sidx, 2, true, NULL), TF_OK);
	ck_assert_uint_eq(b.len, strlen("red;\"b,u\";;;"));
	ck_assert(!memcmp(b.p, "red;\"b,u\";;;", b.len));	/* no value: empty */
	tf_enum_free(e);
	b.len = 0;
	n = enum_payload(p, false);
	ck_assert_int_eq(tf_enum_parse(tf_span_of(p, n), &e, NULL), TF_OK);
	f = (tf_cellfmt){ TF_DT_UINT8, 1, e };
	ck_assert_int_eq(tf_cell_format(&b, &f, &idx[0], 1, true, NULL), TF_OK);
	ck_assert(b.len == 2 && !memcmp(b.p, "16", 2));
	tf_enum_free(e);
	tf_buf_free(&b);
	/* Every truncation of a valid payload is refused, never read past. */
	n = enum_payload(p, true);
	for (size_t cut = 0; cut < n; cut++) {
		tf_error err;
		ck_assert_int_eq(tf_enum_parse(tf_span_of(p, cut), &e, &err), TF_E_CORRUPT);
	}
}
END_TEST

START_TEST(test_npy_header)
{
	uint64_t shape2[] = { 100, 60 }, shape1[] = { 1024 }, shape3[] = { 5, 7, 3 };
	tf_buf b = TF_BUF_INIT(1 << 16);
	char dt[40], text[64];
	uint32_t inner;

	ck_assert_int_eq(tf_npy_header("<i4", shape2, 2, &b, NULL), TF_OK);
	ck_assert_uint_eq(b.len % 64, 0);
	ck_assert(!memcmp(b.p, "\x93NUMPY\x01\x00", 8));
	ck_assert_uint_eq(b.p[8] | b.p[9] << 8, b.len - 10);
	ck_assert_int_eq(b.p[b.len - 1], '\n');
	ck_assert(strstr((char *)b.p + 10, "{'descr': '<i4', 'fortran_order': False, 'shape': (100, 60), }"));
	tf_npy_shape_text(shape1, 1, text, sizeof(text));
	ck_assert_str_eq(text, "(1024,)");
	tf_npy_shape_text(shape3, 3, text, sizeof(text));
	ck_assert_str_eq(text, "(5, 7, 3)");
	ck_assert(tf_npy_dtype(TF_DT_FLOAT64, 1, dt, sizeof(dt), &inner) && !strcmp(dt, "<f8") && inner == 1);
	ck_assert(tf_npy_dtype(TF_DT_INT32, 3, dt, sizeof(dt), &inner) && !strcmp(dt, "<i4") && inner == 3);
	ck_assert(tf_npy_dtype(TF_DT_DATETIME_YEAR + 7, 1, dt, sizeof(dt), &inner) && !strcmp(dt, "<M8[ms]"));
	ck_assert(tf_npy_dtype(TF_DT_TIME_AS, 1, dt, sizeof(dt), &inner) && !strcmp(dt, "<m8[as]"));
	ck_assert(tf_npy_dtype(TF_DT_CHAR, 8, dt, sizeof(dt), &inner) && !strcmp(dt, "|S8") && inner == 1);
	ck_assert(tf_npy_dtype(TF_DT_BOOL, 1, dt, sizeof(dt), &inner) && !strcmp(dt, "|b1"));
	ck_assert(!tf_npy_dtype(TF_DT_STRING_ASCII, TF_CELL_VAR, dt, sizeof(dt), &inner));
	tf_buf_free(&b);
}
END_TEST

/* A view's shape has up to 65 axes of up to 20 digits: the text was cut at
 * 512 bytes, and the header written with the cut shape (no closing
 * parenthesis).  All of it now, and refused only when it cannot be. */
START_TEST(test_npy_header_long_shape)
{
	uint64_t shape[65];
	char text[TF_NPY_SHAPE_MAX], small[16];
	tf_buf b = TF_BUF_INIT(1 << 16);
	size_t n;

	for (size_t i = 0; i < 65; i++)
		shape[i] = UINT64_MAX - i;
	n = tf_npy_shape_text(shape, 65, text, sizeof(text));
	ck_assert_uint_lt(n, sizeof(text));
	ck_assert_uint_eq(strlen(text), n);
	ck_assert(!strncmp(text, "(18446744073709551615, 18446744073709551614, ", 45));
	ck_assert_str_eq(text + n - 23, ", 18446744073709551551)");
	ck_assert_uint_eq(tf_npy_shape_text(shape, 65, small, sizeof(small)), n);	/* cut, length told */
	ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
	ck_assert_int_eq(tf_npy_header("<f8", shape, 65, &b, NULL), TF_OK);
	ck_assert_uint_eq(b.len % 64, 0);
	ck_assert(b.len > 10 + n && b.p[b.len - 1] == '\n');
	b.p[b.len - 1] = '\0';
	ck_assert(strstr((char *)b.p + 10, text));
	tf_buf_free(&b);
}
END_TEST

/* ---- delete conditions ------------------------------------------------------------------------ */

static void put_value(tf_buf *b, uint8_t op, const char *field, const void *v, size_t n)
{
	tf_buf_put_u8(b, 1, NULL);
	tf_buf_put_u8(b, op, NULL);
	tf_buf_put_u32(b, (uint32_t)strlen(field), NULL);
	tf_buf_append(b, field, strlen(field), NULL);
	tf_buf_put_u64(b, n, NULL);
	tf_buf_append(b, v, n, NULL);
}

static bool keeps(const tf_cond *c, int32_t v, const char *s, bool s_null)
{
	tf_cond_value vals[4];

	memset(vals, 0, sizeof(vals));
	for (size_t i = 0; i < tf_cond_nfields(c); i++) {
		bool is_v = !strcmp(tf_cond_field(c, i), "v");
		vals[i] = (tf_cond_value){ is_v ? TF_DT_INT32 : TF_DT_STRING_ASCII, !is_v, false, !is_v && s_null,
					   is_v ? (const uint8_t *)&v : (const uint8_t *)s, is_v ? 4 : strlen(s) };
	}
	return tf_cond_keeps(c, vals);
}

START_TEST(test_conditions)
{
	int32_t m500 = -500;
	tf_buf b = TF_BUF_INIT(SIZE_MAX);
	tf_cond *c;
	tf_error err;

	/* v >= -500: how TileDB stores "delete where v < -500" (corpus .del). */
	put_value(&b, 3, "v", &m500, 4);
	ck_assert_int_eq(tf_cond_parse(tf_span_of(b.p, b.len), &c, NULL), TF_OK);
	ck_assert(keeps(c, -500, "", false) && keeps(c, 7, "", false) && !keeps(c, -501, "", false));
	tf_cond_free(c);
	/* NOT (v < -500 AND s IN {"x", "yy"}) OR s == null */
	b.len = 0;
	tf_buf_put_u8(&b, 0, NULL), tf_buf_put_u8(&b, 1, NULL), tf_buf_put_u64(&b, 2, NULL);	/* OR */
	tf_buf_put_u8(&b, 0, NULL), tf_buf_put_u8(&b, 2, NULL), tf_buf_put_u64(&b, 1, NULL);	/* NOT */
	tf_buf_put_u8(&b, 0, NULL), tf_buf_put_u8(&b, 0, NULL), tf_buf_put_u64(&b, 2, NULL);	/* AND */
	put_value(&b, 0, "v", &m500, 4);
	put_value(&b, 6, "s", "xyy", 3);
	tf_buf_put_u64(&b, 16, NULL), tf_buf_put_u64(&b, 0, NULL), tf_buf_put_u64(&b, 1, NULL);
	put_value(&b, 4, "s", "", 0);	/* EQ null */
	ck_assert_int_eq(tf_cond_parse(tf_span_of(b.p, b.len), &c, NULL), TF_OK);
	ck_assert_uint_eq(tf_cond_nfields(c), 2);
	ck_assert(!keeps(c, -600, "yy", false));
	ck_assert(keeps(c, -600, "y", false));
	ck_assert(keeps(c, 0, "x", false));
	ck_assert(keeps(c, -600, "x", true));	/* null: IN fails, EQ null holds */
	tf_cond_free(c);
	/* Every truncation fails cleanly. */
	for (size_t cut = 0; cut < b.len; cut++)
		ck_assert_int_ne(tf_cond_parse(tf_span_of(b.p, cut), &c, &err), TF_OK);
	tf_buf_free(&b);
}
END_TEST

/* Known answers from TileDB's own tests (tiledb/sm/misc/test/unit_hilbert.cc,
 * test/src/unit-cppapi-hilbert.cc: int32 dimensions [0, 100] x [0, 200]). */
START_TEST(test_hilbert)
{
	static const uint64_t two[][3] = { { 2, 3, 9 }, { 0, 0, 0 }, { 0, 3, 5 }, { 3, 0, 15 }, { 5, 4, 35 },
					   { 4, 2, 30 } };
	static const uint64_t three[][4] = { { 0, 0, 0, 0 }, { 0, 0, 1, 1 }, { 0, 1, 0, 3 }, { 1, 0, 0, 7 } };
	static const struct { int32_t d1, d2; uint64_t h; } pts[] = {
		{ 1, 3, 673795214387276ull }, { 1, 1, 972175364522868ull }, { 2, 1, 1282377960629798ull },
		{ 2, 2, 2093929125029754ull }, { 3, 7, 8953131325824998ull }, { 5, 4, 14307296941447292ull },
		{ 4, 2, 15960414315352633ull }, { 7, 7, 34410827116042986ull },
	};
	tf_field d1 = { .type = TF_DT_INT32, .cell_val_num = 1 }, d2 = d1;
	int32_t dom1[2] = { 0, 100 }, dom2[2] = { 0, 200 };
	uint64_t x[3];

	for (size_t i = 0; i < 6; i++) {
		x[0] = two[i][0], x[1] = two[i][1];
		ck_assert_uint_eq(tf_hilbert_index(x, 2, 4), two[i][2]);
	}
	for (size_t i = 0; i < 4; i++) {
		memcpy(x, three[i], sizeof(x));
		ck_assert_uint_eq(tf_hilbert_index(x, 3, 4), three[i][3]);
	}
	memcpy(d1.domain, dom1, 8), memcpy(d2.domain, dom2, 8);
	for (size_t i = 0; i < sizeof(pts) / sizeof(pts[0]); i++) {
		x[0] = tf_hilbert_coord(&d1, (const uint8_t *)&pts[i].d1, 4, 31);
		x[1] = tf_hilbert_coord(&d2, (const uint8_t *)&pts[i].d2, 4, 31);
		ck_assert_uint_eq(tf_hilbert_index(x, 2, 31), pts[i].h);
	}
}
END_TEST

/* ---- views over corpus arrays --------------------------------------------------------------------- */

typedef struct opened {
	tf_source *src;
	char *rel;
	tf_array *a;
	tf_cache *cache;
	tf_views *v;
} opened;

/* The views of the array at path, through a cache of `cache` bytes. */
static void open_views_at(const char *path, size_t cache, opened *o)
{
	tf_error err;

	ck_assert_msg(tf_source_locate(path, NULL, &o->src, &o->rel, &err) == TF_OK, "%s", err.msg);
	ck_assert_int_eq(tf_array_open(o->src, o->rel, NULL, &o->a, &err), TF_OK);
	ck_assert_int_eq(tf_cache_new(cache, 1, &o->cache, &err), TF_OK);
	ck_assert_msg(tf_views_open(o->a, o->cache, &o->v, &err) == TF_OK, "%s", err.msg);
}

/* The same of corpus case case_name; false without the corpus. */
static bool open_views(const char *case_name, size_t cache, opened *o)
{
	char dir[4096];

	if (!tf_test_corpus())
		return false;
	snprintf(dir, sizeof(dir), "%s/%s/array", tf_test_corpus(), case_name);
	open_views_at(dir, cache, o);
	return true;
}

static void close_views(opened *o)
{
	tf_views_unref(o->v);
	tf_cache_free(o->cache);
	tf_array_free(o->a);
	free(o->rel);
	tf_source_free(o->src);
}

/* The whole view, in pieces of `piece` bytes. */
static uint8_t *read_all(tf_view *w, size_t piece, uint64_t *n)
{
	tf_workspace *ws = tf_workspace_new();
	uint8_t *all = NULL;
	size_t got;
	tf_error err;

	*n = 0;
	do {
		all = realloc(all, *n + piece);
		ck_assert_msg(tf_view_read(w, ws, *n, piece, all + *n, &got, &err) == TF_OK, "%s", err.msg);
		*n += got;
	} while (got);
	tf_workspace_free(ws);
	return all;
}

/* Reads of random ranges equal the same bytes of a whole pass. */
static void check_ranges(tf_view *w, const uint8_t *all, uint64_t n, uint64_t seed, unsigned count)
{
	tf_workspace *ws = tf_workspace_new();
	uint8_t *buf = malloc(70000);

	for (unsigned i = 0; i < count; i++) {
		uint64_t off, len;
		size_t got;
		tf_error err;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		off = (seed >> 17) % (n + 2);
		len = (seed >> 3) % (i % 4 == 0 ? 70000 : 300) + 1;
		ck_assert_msg(tf_view_read(w, ws, off, (size_t)len, buf, &got, &err) == TF_OK, "%s", err.msg);
		ck_assert_uint_eq(got, off >= n ? 0 : (n - off < len ? n - off : len));
		ck_assert(got == 0 || !memcmp(buf, all + off, got));
	}
	free(buf);
	tf_workspace_free(ws);
}

static void check_view(const char *case_name, const char *rel, size_t cache)
{
	uint8_t *all, *again;
	uint64_t n, m, size;
	opened o;
	tf_view *w;
	tf_view_stat st;
	tf_error err;

	if (!open_views(case_name, cache, &o))
		return;
	ck_assert_msg(tf_view_open(o.v, rel, &w, &err) == TF_OK, "%s: %s", rel, err.msg);
	all = read_all(w, 4096, &n);
	ck_assert_uint_gt(n, 0);
	ck_assert(tf_view_size(w, &size) && size == n);	/* known once read to the end */
	ck_assert_int_eq(tf_views_stat(o.v, rel, &st, &err), TF_OK);
	ck_assert(st.size_known && st.size == n && !st.dir);
	again = read_all(w, 1 << 20, &m);
	ck_assert(m == n && !memcmp(all, again, n));
	check_ranges(w, all, n, 42, 400);
	tf_view_close(w);
	free(all);
	free(again);
	close_views(&o);
}

START_TEST(test_views_ranges)
{
	check_view("sparse_2d", "cells.csv", 64 << 20);
	check_view("extra/sparse_dups_consolidated_deletes", "cells.csv", 64 << 20);
	check_view("extra/consolidated", "cells.csv", 1 << 20);	/* blocks evicted and made again */
	check_view("dense_2d", "cells.csv", 1 << 20);
	check_view("dense_2d", "f64.raw", 1 << 20);
	check_view("dense_2d", "i32.npy", 64 << 20);
	check_view("chunks_bigtile_zstd", "i32x3.npy", 1 << 20);
	check_view("sparse_string_dim", "fragments/__1795312353578_1795312353578_1ef64c734594ddfcff7b6bc4e4fa5207_22/cells.csv",
		   1 << 20);
	check_view("extra/consolidated", "cells.arrow", 1 << 20);
	check_view("dense_2d", "cells.arrow", 1 << 20);
	check_view("nullable_var_string", "cells.arrow", 1 << 20);
	check_view("sparse_string_dim", "fragments/__1795312353578_1795312353578_1ef64c734594ddfcff7b6bc4e4fa5207_22/cells.arrow",
		   1 << 20);
}
END_TEST

/* tf_view_size_now: the size before any read, that of the bytes then
 * read, and tf_views_stat says it. */
static void check_size_now(const char *case_name, const char *rel, size_t cache)
{
	tf_workspace *ws = tf_workspace_new();
	uint64_t size, n;
	opened o;
	tf_view *w;
	tf_view_stat st;
	tf_error err;
	bool known;

	if (!open_views(case_name, cache, &o))
		return;
	ck_assert_msg(tf_view_open(o.v, rel, &w, &err) == TF_OK, "%s: %s", rel, err.msg);
	ck_assert_int_eq(tf_views_stat(o.v, rel, &st, &err), TF_OK);
	ck_assert(!st.size_known || strstr(rel, ".csv") == NULL);
	ck_assert_msg(tf_view_size_now(w, ws, NULL, &size, &known, &err) == TF_OK, "%s: %s", rel, err.msg);
	ck_assert(known);
	ck_assert_int_eq(tf_views_stat(o.v, rel, &st, &err), TF_OK);
	ck_assert(st.size_known && st.size == size);
	free(read_all(w, 4096, &n));
	ck_assert_uint_eq(n, size);
	ck_assert_uint_gt(n, 0);
	tf_view_close(w);
	close_views(&o);
	tf_workspace_free(ws);
}

START_TEST(test_views_size_now)
{
	check_size_now("sparse_2d", "cells.csv", 64 << 20);
	check_size_now("extra/sparse_dups_consolidated_deletes", "cells.csv", 64 << 20);
	check_size_now("extra/consolidated", "cells.csv", 1 << 20);
	check_size_now("dense_2d", "cells.csv", 1 << 20);
	check_size_now("dense_2d", "f64.raw", 1 << 20);
	check_size_now("sparse_string_dim",
		       "fragments/__1795312353578_1795312353578_1ef64c734594ddfcff7b6bc4e4fa5207_22/cells.csv", 1 << 20);
}
END_TEST

/* The one entry of store directory dir into *path; false if none. */
static bool only_entry(const char *dir, char *path, size_t n)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int found = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		if (strstr(e->d_name, ".idx") && ++found)
			snprintf(path, n, "%s/%s", dir, e->d_name);
	closedir(d);
	ck_assert_int_le(found, 1);
	return found == 1;
}

/* Views of sparse_2d remembering sizes in store as array "test:sparse_2d":
 * the size view `name` shows before any read. */
static bool stat_remembered(opened *o, tf_index *store, const char *name, uint64_t *size)
{
	tf_view_stat st;
	tf_error err;

	if (!open_views("sparse_2d", 64 << 20, o))
		return false;
	tf_views_set_store(o->v, store, "test:sparse_2d");
	ck_assert_int_eq(tf_views_stat(o->v, name, &st, &err), TF_OK);
	*size = st.size;
	return st.size_known;
}

/*
 * A view's size, once known, is remembered in the index store for that
 * state of the array, under the view's own name (not `other`'s): new
 * views (a remount) show it before any read.  An entry that lies (a size
 * 10 bytes short, its checksum made good) is shown, but the read reaching
 * it fails (TF_E_CORRUPT) rather than end the text early; the entry is
 * removed and the true size shown.
 */
static void check_size_remembered(const char *name, const char *other)
{
	char dir[] = "/tmp/tf_sizes.XXXXXX", path[4200];
	tf_workspace *ws = tf_workspace_new();
	uint8_t e[4096], buf[4096], *all;
	uint64_t size, again, n = 0;
	tf_index *store;
	tf_view_stat st;
	opened o;
	tf_view *w;
	tf_error err;
	tf_status rc = TF_OK;
	size_t len, got = 1;
	FILE *f;
	bool known;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_msg(tf_index_open(dir, 0, NULL, NULL, &store, &err) == TF_OK, "%s", err.msg);
	ck_assert(!stat_remembered(&o, store, name, &size));
	ck_assert_int_eq(tf_view_open(o.v, name, &w, &err), TF_OK);
	ck_assert_int_eq(tf_view_size_now(w, ws, NULL, &size, &known, &err), TF_OK);
	ck_assert(known && size > 0);
	tf_view_close(w);
	if (other) {
		ck_assert_int_eq(tf_views_stat(o.v, other, &st, &err), TF_OK);
		ck_assert(!st.size_known);	/* its own: not this one */
	}
	close_views(&o);
	ck_assert(only_entry(dir, path, sizeof(path)));

	ck_assert(stat_remembered(&o, store, name, &again));
	ck_assert_uint_eq(again, size);
	ck_assert_int_eq(tf_view_open(o.v, name, &w, &err), TF_OK);
	ck_assert(tf_view_size(w, &again) && again == size);	/* no pass */
	all = read_all(w, 4096, &n);
	ck_assert_uint_eq(n, size);
	ck_assert(!strstr(name, ".arrow") || !memcmp(all + n - 6, "ARROW1", 6));
	free(all);
	tf_view_close(w);
	close_views(&o);

	/* Forged: the payload (the entry's last 8 bytes) 10 bytes short. */
	ck_assert_ptr_nonnull(f = fopen(path, "r+b"));
	len = fread(e, 1, sizeof(e), f);
	ck_assert(len > 24 && len < sizeof(e));
	tf_put_le64(e + len - 8, size - 10);
	tf_put_le32(e + 12, (uint32_t)crc32_z(0, e + 16, len - 16));
	ck_assert(fseek(f, 0, SEEK_SET) == 0 && fwrite(e, 1, len, f) == len && fclose(f) == 0);
	ck_assert(stat_remembered(&o, store, name, &again));
	ck_assert_uint_eq(again, size - 10);
	ck_assert_int_eq(tf_view_open(o.v, name, &w, &err), TF_OK);
	for (n = 0; rc == TF_OK && got && n < size - 10; n += got)
		rc = tf_view_read(w, ws, n, n + sizeof(buf) < size - 10 ? sizeof(buf) : size - 10 - n, buf, &got, &err);
	ck_assert_int_eq(rc, TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "not the") != NULL, "%s", err.msg);
	ck_assert_int_eq(tf_views_stat(o.v, name, &st, &err), TF_OK);
	ck_assert(st.size_known && st.size == size);
	tf_view_close(w);
	close_views(&o);
	ck_assert(!only_entry(dir, path, sizeof(path)));	/* removed */

	tf_index_free(store);
	rmdir(dir);
	tf_workspace_free(ws);
}

START_TEST(test_views_size_remembered)
{
	if (tf_test_corpus())
		check_size_remembered("cells.csv", NULL);
}
END_TEST

/* A whole pass over a .raw view copies every byte of each decode unit
 * once: the units go back as passed on whole and their buffers are
 * recycled, instead of filling the cache with fresh memory. */
START_TEST(test_views_raw_recycles)
{
	tf_cache_stats st;
	uint64_t n;
	opened o;
	tf_view *w;
	tf_error err;

	if (!open_views("chunks_bigtile_zstd", 1 << 20, &o))
		return;
	ck_assert_msg(tf_view_open(o.v, "i32x3.raw", &w, &err) == TF_OK, "%s", err.msg);
	free(read_all(w, 256 << 10, &n));
	ck_assert_uint_eq(n, 1200000);
	tf_cache_get_stats(o.cache, &st);
	ck_assert_msg(st.recycled > 0, "no unit recycled: %llu misses, %llu evictions",
		      (unsigned long long)st.misses, (unsigned long long)st.evictions);
	tf_view_close(w);
	close_views(&o);
}
END_TEST

/* A CSV read from its middle first: the index is built up to there. */
START_TEST(test_views_random_first)
{
	uint8_t *all;
	uint64_t n;
	opened o;
	tf_view *w;
	tf_view_stat st;

	if (!open_views("multifrag_sparse", 1 << 20, &o))
		return;
	ck_assert_int_eq(tf_view_open(o.v, "cells.csv", &w, NULL), TF_OK);
	ck_assert_int_eq(tf_views_stat(o.v, "cells.csv", &st, NULL), TF_OK);
	ck_assert(!st.size_known && st.size == 0);	/* direct I/O, size 0 */
	check_ranges(w, (const uint8_t *)"", 0, 9, 0);
	{
		tf_workspace *ws = tf_workspace_new();
		uint8_t buf[100];
		size_t got;
		ck_assert_int_eq(tf_view_read(w, ws, 5000, sizeof(buf), buf, &got, NULL), TF_OK);
		ck_assert_uint_eq(got, sizeof(buf));
		all = read_all(w, 777, &n);
		ck_assert(!memcmp(buf, all + 5000, sizeof(buf)));
		tf_workspace_free(ws);
	}
	check_ranges(w, all, n, 5, 200);
	free(all);
	tf_view_close(w);
	close_views(&o);
}
END_TEST

typedef struct reader_arg {
	tf_view *w;
	const uint8_t *all;
	uint64_t n, seed;
} reader_arg;

static void *reader(void *p)
{
	reader_arg *r = p;

	check_ranges(r->w, r->all, r->n, r->seed, 300);
	return NULL;
}

/* Many threads reading one view, while its CSV index is still being built. */
START_TEST(test_views_threads)
{
	static const char *const rels[] = { "cells.csv", "i32.raw", "cells.arrow" };
	pthread_t t[4];
	reader_arg args[4];
	opened o;

	if (!open_views("dense_2d", 1 << 20, &o))
		return;
	for (size_t k = 0; k < 3; k++) {
		uint64_t n;
		tf_view *w, *whole;
		uint8_t *all;

		ck_assert_int_eq(tf_view_open(o.v, rels[k], &whole, NULL), TF_OK);
		all = read_all(whole, 65536, &n);
		tf_view_close(whole);
		tf_views_unref(o.v);	/* a fresh state: nothing indexed yet */
		ck_assert_int_eq(tf_views_open(o.a, o.cache, &o.v, NULL), TF_OK);
		ck_assert_int_eq(tf_view_open(o.v, rels[k], &w, NULL), TF_OK);
		for (int i = 0; i < 4; i++) {
			args[i] = (reader_arg){ w, all, n, 100 + (uint64_t)i };
			ck_assert_int_eq(pthread_create(&t[i], NULL, reader, &args[i]), 0);
		}
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
		tf_view_close(w);
		free(all);
	}
	close_views(&o);
}
END_TEST

typedef struct listing {
	char names[64][300];
	tf_view_stat st[64];
	int n;
} listing;

static int collect(void *ctx, const char *name, const tf_view_stat *st)
{
	listing *l = ctx;

	ck_assert_int_lt(l->n, 64);
	snprintf(l->names[l->n], sizeof(l->names[0]), "%s", name);
	l->st[l->n++] = *st;
	return 0;
}

START_TEST(test_views_listing)
{
	listing l = { .n = 0 };
	char value[128];
	size_t len;
	opened o;
	tf_error err;

	if (!open_views("dense_2d", 1 << 20, &o))
		return;
	ck_assert_int_eq(tf_views_list(o.v, "", collect, &l, &err), TF_OK);
	ck_assert_int_eq(l.n, 7);
	ck_assert_str_eq(l.names[0], "cells.csv");
	ck_assert_str_eq(l.names[6], "cells.arrow");
	ck_assert(!l.st[6].size_known);
	ck_assert(!l.st[0].size_known);	/* nothing formatted yet */
	ck_assert_str_eq(l.names[1], "fragments");
	ck_assert(l.st[1].dir);
	ck_assert_str_eq(l.names[2], "i32.raw");
	ck_assert(l.st[2].size_known && l.st[2].size == 6000 * 4);
	ck_assert_str_eq(l.names[3], "i32.npy");
	ck_assert_str_eq(l.names[4], "f64.raw");
	ck_assert_uint_eq(l.st[4].size, 6000 * 8);
	ck_assert_int_eq(tf_views_getxattr(o.v, "f64.npy", "user.tilefs.shape", value, sizeof(value), &len, NULL),
			 TF_OK);
	ck_assert(len == 9 && !memcmp(value, "(100, 60)", 9));
	ck_assert_int_eq(tf_views_getxattr(o.v, "i32.raw", "user.tilefs.dtype", value, sizeof(value), &len, NULL),
			 TF_OK);
	ck_assert(len == 3 && !memcmp(value, "<i4", 3));
	ck_assert_int_eq(tf_views_getxattr(o.v, "cells.csv", "user.tilefs.dtype", value, sizeof(value), &len, &err),
			 TF_E_INVAL);
	ck_assert_int_eq(tf_views_listxattr(o.v, "i32.raw", NULL, 0, &len, NULL), TF_OK);
	ck_assert_uint_eq(len, sizeof("user.tilefs.shape") + sizeof("user.tilefs.dtype"));
	l.n = 0;
	ck_assert_int_eq(tf_views_list(o.v, "fragments", collect, &l, NULL), TF_OK);
	ck_assert_int_eq(l.n, 1);
	ck_assert_int_eq(tf_views_stat(o.v, "nosuch.raw", &l.st[0], &err), TF_E_INVAL);
	ck_assert_int_eq(tf_views_stat(o.v, "fragments/nosuch/cells.csv", &l.st[0], &err), TF_E_INVAL);
	ck_assert_int_eq(tf_views_list(o.v, "cells.csv", collect, &l, &err), TF_E_INVAL);
	close_views(&o);
}
END_TEST

/* A copy of an array changes: the old views keep their state, a new
 * tf_views sees the change. */
START_TEST(test_views_change)
{
	char tmp[] = "/tmp/tf-views-XXXXXX", cmd[8192], path[4200];
	uint8_t *before, *after;
	uint64_t nb, na;
	tf_source *src;
	char *rel;
	tf_array *a;
	tf_cache *cache;
	tf_views *v, *v2;
	tf_view *w;

	if (!tf_test_corpus())
		return;
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	snprintf(cmd, sizeof(cmd), "cp -r '%s/multifrag_dense_disjoint/array' '%s/a'", tf_test_corpus(), tmp);
	ck_assert_int_eq(system(cmd), 0);
	snprintf(path, sizeof(path), "%s/a", tmp);
	ck_assert_int_eq(tf_source_locate(path, NULL, &src, &rel, NULL), TF_OK);
	ck_assert_int_eq(tf_array_open(src, rel, NULL, &a, NULL), TF_OK);
	ck_assert_int_eq(tf_cache_new(1 << 20, 0, &cache, NULL), TF_OK);
	ck_assert_int_eq(tf_views_open(a, cache, &v, NULL), TF_OK);
	ck_assert(tf_views_current(v));
	ck_assert_int_eq(tf_view_open(v, "i64.raw", &w, NULL), TF_OK);
	before = read_all(w, 1000, &nb);
	ck_assert_uint_eq(nb, 1024 * 8);
	/* Withdraw the commit of the second fragment: reads no longer see it. */
	snprintf(cmd, sizeof(cmd), "rm '%s'/a/__commits/__1795312354032_*.wrt", tmp);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert(!tf_views_current(v));
	free(read_all(w, 1000, &na));
	ck_assert_uint_eq(na, nb);	/* the open view keeps its state */
	tf_view_close(w);
	ck_assert_int_eq(tf_views_open(a, cache, &v2, NULL), TF_OK);
	ck_assert_int_eq(tf_view_open(v2, "i64.raw", &w, NULL), TF_OK);
	after = read_all(w, 1000, &na);
	ck_assert_uint_eq(na, 512 * 8);	/* the non-empty domain is the first fragment's */
	ck_assert(!memcmp(after, before, na));
	tf_view_close(w);
	tf_views_unref(v2);
	tf_views_unref(v);
	tf_cache_free(cache);
	tf_array_free(a);
	free(rel);
	tf_source_free(src);
	free(before);
	free(after);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* ---- hostile arrays (tf_craft.h): no lie crashes, hangs or starves ------------------------------------ */

/* Views of a crafted copy: open's status (o->v set when TF_OK). */
static tf_status open_crafted(const tf_craft *c, opened *o, tf_error *err)
{
	memset(o, 0, sizeof(*o));
	ck_assert_int_eq(tf_source_locate(c->dir, NULL, &o->src, &o->rel, err), TF_OK);
	ck_assert_int_eq(tf_array_open(o->src, o->rel, NULL, &o->a, err), TF_OK);
	ck_assert_int_eq(tf_cache_new(8 << 20, 1, &o->cache, err), TF_OK);
	return tf_views_open(o->a, o->cache, &o->v, err);
}

static void close_crafted(opened *o)
{
	if (o->v)
		tf_views_unref(o->v);
	tf_cache_free(o->cache);
	tf_array_free(o->a);
	free(o->rel);
	tf_source_free(o->src);
}

/* The status of reading a whole view (its bytes counted into *n). */
static tf_status read_status(tf_views *v, const char *rel, uint64_t *n, tf_error *err)
{
	tf_workspace *ws = tf_workspace_new();
	uint8_t *buf = malloc(1 << 16);
	size_t got = 0;
	tf_view *w = NULL;
	tf_status rc = tf_view_open(v, rel, &w, err);

	*n = 0;
	while (rc == TF_OK && (rc = tf_view_read(w, ws, *n, 1 << 16, buf, &got, err)) == TF_OK && got)
		*n += got;
	tf_view_close(w);
	free(buf);
	tf_workspace_free(ws);
	return rc;
}

/* "__schema/<the one schema>" of a copy, in rel[300]. */
static void schema_rel(const tf_craft *c, char *rel)
{
	char name[256];

	tf_craft_only_file(c, "__schema", name);
	snprintf(rel, 300, "__schema/%s", name);
}

/* A schema newer than the fragments' (a name that sorts after it),
 * written from `s`. */
static void add_newer_schema(const tf_craft *c, const tf_schema *s)
{
	char rel[300];

	schema_rel(c, rel);
	rel[strlen(rel) - 1] = rel[strlen(rel) - 1] == 'f' ? 'e' : 'f';	/* after: the timestamps lead */
	memcpy(rel + strlen("__schema/__"), "2", 1);
	tf_craft_write_schema(c, rel, s);
}

/* Issue 19 item 2: tf_dense took extents from the newest schema, the
 * fragment had been checked against its own: `head @views/cells.csv`
 * (and tiletool export) died of SIGFPE on a newer schema with a zero
 * extent.  Such a schema is refused, and the views say why. */
START_TEST(test_view_zero_extent_newer_schema)
{
	char rel[300];
	tf_craft c;
	tf_schema *s;
	opened o;
	uint64_t n;
	tf_error err;
	tf_status rc;

	if (!tf_craft_copy("dense_2d", &c))
		return;
	schema_rel(&c, rel);
	s = tf_craft_schema(&c, rel);
	tf_put_le32(s->dims[0].extent, 0);
	add_newer_schema(&c, s);
	tf_schema_free(s);
	if ((rc = open_crafted(&c, &o, &err)) == TF_OK)	/* before the fix: a signal below */
		rc = read_status(o.v, "cells.csv", &n, &err);
	ck_assert_int_eq(rc, TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "tile extent not positive"), "%s", err.msg);
	close_crafted(&o);
	tf_craft_remove(&c);
}
END_TEST

/* A newer schema that tiles the array otherwise (extent 7, not 32): the
 * fragment is laid out by its own schema, the merge by the newest; they
 * must agree, or the array's views are EIO with the reason (the fragment's
 * own view still reads, by its own schema). */
START_TEST(test_view_newer_schema_other_tiling)
{
	char rel[300], frag[256], fcsv[600];
	tf_craft c;
	tf_schema *s;
	opened o;
	uint64_t n, before;
	tf_view_stat st;
	tf_error err;

	if (!tf_craft_copy("dense_2d", &c))
		return;
	tf_craft_only_file(&c, "__fragments", frag);
	snprintf(fcsv, sizeof(fcsv), "fragments/%s/cells.csv", frag);
	ck_assert_int_eq(open_crafted(&c, &o, &err), TF_OK);
	ck_assert_int_eq(read_status(o.v, fcsv, &before, &err), TF_OK);
	close_crafted(&o);
	schema_rel(&c, rel);
	s = tf_craft_schema(&c, rel);
	tf_put_le32(s->dims[0].extent, 7);
	add_newer_schema(&c, s);
	tf_schema_free(s);
	ck_assert_int_eq(open_crafted(&c, &o, &err), TF_OK);
	ck_assert_int_eq(read_status(o.v, "cells.csv", &n, &err), TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "tiles the array otherwise than the newest schema: dimension rows"), "%s",
		      err.msg);
	ck_assert_int_eq(tf_views_stat(o.v, "i32.raw", &st, &err), TF_E_INVAL);	/* no matrices */
	ck_assert_int_eq(read_status(o.v, fcsv, &n, &err), TF_OK);
	ck_assert_uint_eq(n, before);
	close_crafted(&o);
	tf_craft_remove(&c);
}
END_TEST

/* A newer schema whose i32 is int64 (dropped and added again): a
 * fragment's own view is read with the schema it was written with, and
 * showed i32's fill value where it stores int32 values. */
START_TEST(test_view_fragment_own_attribute)
{
	char rel[300], frag[256], fcsv[600];
	tf_craft c;
	tf_schema *s;
	opened o;
	uint64_t nb, na;
	uint8_t *before, *after;
	tf_view *w;
	tf_error err;

	if (!tf_craft_copy("dense_2d", &c))
		return;
	tf_craft_only_file(&c, "__fragments", frag);
	snprintf(fcsv, sizeof(fcsv), "fragments/%s/cells.csv", frag);
	ck_assert_int_eq(open_crafted(&c, &o, &err), TF_OK);
	ck_assert_int_eq(tf_view_open(o.v, fcsv, &w, &err), TF_OK);
	before = read_all(w, 65536, &nb);
	tf_view_close(w);
	close_crafted(&o);
	schema_rel(&c, rel);
	s = tf_craft_schema(&c, rel);
	s->attrs[0].type = TF_DT_INT64;
	free(s->attrs[0].fill);
	s->attrs[0].fill = calloc(1, 8), s->attrs[0].fill_size = 8;
	add_newer_schema(&c, s);
	tf_schema_free(s);
	ck_assert_int_eq(open_crafted(&c, &o, &err), TF_OK);
	ck_assert_int_eq(tf_view_open(o.v, fcsv, &w, &err), TF_OK);
	after = read_all(w, 65536, &na);
	ck_assert_msg(na == nb && !memcmp(before, after, nb), "the fragment's own view changed");
	tf_view_close(w);
	free(before);
	free(after);
	close_crafted(&o);
	tf_craft_remove(&c);
}
END_TEST

/* Sparse: a newer schema whose dimension is int64 where the fragment's is
 * int32.  Coordinates were compared as the newest schema's type: 8-byte
 * reads of 4-byte values (a heap over-read at a tile's end). */
START_TEST(test_view_sparse_newer_schema_other_dims)
{
	char rel[300];
	tf_craft c;
	tf_schema *s;
	opened o;
	uint64_t n;
	tf_error err;

	if (!tf_craft_copy("sparse_2d", &c))
		return;
	schema_rel(&c, rel);
	s = tf_craft_schema(&c, rel);
	s->dims[1].type = TF_DT_INT64;
	tf_put_le64(s->dims[1].domain, 0), tf_put_le64(s->dims[1].domain + 8, 999);
	tf_put_le64(s->dims[1].extent, 100);
	add_newer_schema(&c, s);
	tf_schema_free(s);
	ck_assert_int_eq(open_crafted(&c, &o, &err), TF_OK);
	ck_assert_int_eq(read_status(o.v, "cells.csv", &n, &err), TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "dimension 1 is d1 (int32), not d1 (int64)"), "%s", err.msg);
	close_crafted(&o);
	tf_craft_remove(&c);
}
END_TEST

/* Peak resident memory (VmHWM) in KiB, after resetting it. */
static long peak_kib(bool reset)
{
	FILE *f;
	char line[256];
	long kib = -1;

	if (reset) {
		ck_assert_ptr_nonnull(f = fopen("/proc/self/clear_refs", "w"));
		ck_assert_int_ge(fputs("5", f), 0);
		ck_assert_int_eq(fclose(f), 0);
	}
	ck_assert_ptr_nonnull(f = fopen("/proc/self/status", "r"));
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmHWM:", 6))
			kib = atol(line + 6);
	fclose(f);
	ck_assert_int_ge(kib, 0);
	return kib;
}

/* Issue 19 item 3: a dense tile's cells are the extents' product, which
 * the schema claims; load_field allocated a validity byte per claimed cell
 * before anything said the tile holds them.  Extents 32768 x 16384 over a
 * 5 KB array: 512 MiB touched, then the read failed.  The tile's chunk
 * headers are read first now: nothing is allocated for a tile that lies. */
START_TEST(test_view_tile_cells_checked_first)
{
	char rel[300], frag[256], fcsv[600];
	tf_craft c;
	tf_schema *s;
	opened o;
	uint64_t n;
	long before;
	tf_error err;

	if (!tf_craft_copy("dense_2d", &c))
		return;
	schema_rel(&c, rel);
	s = tf_craft_schema(&c, rel);
	tf_put_le32(s->dims[0].domain + 4, 32767), tf_put_le32(s->dims[0].extent, 32768);
	tf_put_le32(s->dims[1].domain + 4, 16383), tf_put_le32(s->dims[1].extent, 16384);
	tf_craft_write_schema(&c, rel, s);	/* the fragment's own */
	tf_schema_free(s);
	tf_craft_only_file(&c, "__fragments", frag);
	snprintf(fcsv, sizeof(fcsv), "fragments/%s/cells.csv", frag);
	ck_assert_int_eq(open_crafted(&c, &o, &err), TF_OK);
	before = peak_kib(true);
	ck_assert_int_eq(read_status(o.v, fcsv, &n, &err), TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "the fragment metadata says 2094 and 2147483648"), "%s", err.msg);
	ck_assert_int_eq(read_status(o.v, "cells.csv", &n, &err), TF_E_CORRUPT);
	ck_assert_msg(peak_kib(false) - before < 64 << 10, "%ld KiB more at the peak", peak_kib(false) - before);
	close_crafted(&o);
	tf_craft_remove(&c);
}
END_TEST

/* The views campaign (tests/robust), str_rle_zstd with an extent of 2^27:
 * its string offsets are folded into the data (§4.7), so the tile's
 * count of cells comes from the schema and fragment metadata alone, with
 * no chunk headers of its own to prove it; a validity byte set for each
 * of the 2^27 cells of a non-nullable attribute touched 128 MiB before
 * the read failed.  Non-nullable cells have no validity bytes now. */
START_TEST(test_view_folded_tile_cells_untouched)
{
	char rel[300], frag[256], fcsv[600];
	tf_craft c;
	tf_schema *s;
	opened o;
	uint64_t n;
	long before;
	tf_error err;

	if (!tf_craft_copy("str_rle_zstd", &c))
		return;
	schema_rel(&c, rel);
	s = tf_craft_schema(&c, rel);
	tf_put_le64(s->dims[0].domain + 8, ((uint64_t)1 << 27) - 1), tf_put_le64(s->dims[0].extent, (uint64_t)1 << 27);
	tf_craft_write_schema(&c, rel, s);	/* the fragment's own */
	tf_schema_free(s);
	tf_craft_only_file(&c, "__fragments", frag);
	snprintf(fcsv, sizeof(fcsv), "fragments/%s/cells.csv", frag);
	ck_assert_int_eq(open_crafted(&c, &o, &err), TF_OK);
	before = peak_kib(true);
	ck_assert_int_ne(read_status(o.v, fcsv, &n, &err), TF_OK);
	ck_assert_int_ne(read_status(o.v, "cells.csv", &n, &err), TF_OK);
	ck_assert_msg(peak_kib(false) - before < 64 << 10, "%ld KiB more at the peak", peak_kib(false) - before);
	close_crafted(&o);
	tf_craft_remove(&c);
}
END_TEST

/* Issue 19 item 6: a float64 attribute of 2^29 values per cell is 2^32
 * bytes a cell, 0 in the 32 bits views kept it in: stat of f64.raw divided
 * by zero.  Its schema holds a fill value of 8 bytes, not of one cell. */
START_TEST(test_view_cell_size_wraps)
{
	char rel[300];
	tf_craft c;
	tf_schema *s;
	opened o;
	tf_view_stat st;
	tf_error err;
	tf_status rc;

	if (!tf_craft_copy("dense_2d", &c))
		return;
	schema_rel(&c, rel);
	s = tf_craft_schema(&c, rel);
	s->attrs[1].cell_val_num = 1u << 29;
	tf_craft_write_schema(&c, rel, s);
	tf_schema_free(s);
	if ((rc = open_crafted(&c, &o, &err)) == TF_OK)	/* before the fix: SIGFPE below */
		rc = tf_views_stat(o.v, "f64.raw", &st, &err);
	ck_assert_int_eq(rc, TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "attribute f64: cells of 4294967296 bytes"), "%s", err.msg);
	close_crafted(&o);
	tf_craft_remove(&c);
}
END_TEST

/* Replace the one occurrence of `from` in file rel of the copy. */
static void patch_once(const tf_craft *c, const char *rel, const void *from, const void *to, size_t n)
{
	char path[4096];
	size_t len;
	uint8_t *p, *at = NULL;

	tf_craft_path(c, rel, path);
	p = tf_test_read_file(path, &len);
	for (size_t i = 0; i + n <= len; i++)
		if (!memcmp(p + i, from, n)) {
			ck_assert_msg(!at, "%s: more than one match", rel);
			at = p + i;
		}
	ck_assert_ptr_nonnull(at);
	memcpy(at, to, n);
	tf_test_write_file(path, p, len);
	free(p);
}

/* Issue 19 items 6 and 9: a matrix of 2^60 float64 cells is 2^63 bytes,
 * which st_size (an off_t) cannot say: it showed as -2^63 bytes and failed
 * with no log line.  Shown now with size 0, and opening it fails with the
 * reason (the driver logs it); its shape is still there. */
START_TEST(test_view_matrix_past_off_t)
{
	static const int32_t ned[4] = { 0, 99, 0, 59 }, huge[4] = { 0, INT32_MAX, 0, (1 << 29) - 1 };
	char rel[600], frag[256], value[64];
	tf_craft c;
	tf_schema *s;
	opened o;
	tf_view_stat st;
	tf_view *w;
	size_t len;
	tf_error err;

	if (!tf_craft_copy("dense_2d", &c))
		return;
	schema_rel(&c, rel);
	s = tf_craft_schema(&c, rel);
	tf_put_le32(s->dims[0].domain + 4, INT32_MAX), tf_put_le32(s->dims[1].domain + 4, (1u << 29) - 1);
	tf_craft_write_schema(&c, rel, s);
	tf_schema_free(s);
	tf_craft_only_file(&c, "__fragments", frag);
	snprintf(rel, sizeof(rel), "__fragments/%s/__fragment_metadata.tdb", frag);
	patch_once(&c, rel, ned, huge, sizeof(ned));	/* the footer's non-empty domain */
	ck_assert_msg(open_crafted(&c, &o, &err) == TF_OK, "%s", err.msg);
	ck_assert_int_eq(tf_views_stat(o.v, "i32.raw", &st, &err), TF_OK);	/* 2^62 bytes: fine */
	ck_assert_uint_eq(st.size, (uint64_t)1 << 62);
	ck_assert_int_eq(tf_views_stat(o.v, "f64.raw", &st, &err), TF_OK);
	ck_assert(st.size_known && st.size == 0);
	ck_assert_int_eq(tf_views_stat(o.v, "f64.npy", &st, &err), TF_OK);
	ck_assert(st.size_known && st.size == 0);
	ck_assert_int_eq(tf_view_open(o.v, "f64.raw", &w, &err), TF_E_UNSUPPORTED);
	ck_assert_msg(strstr(err.msg, "@views/f64.raw: 1152921504606846976 cells of 8 bytes, more than a file "
				      "can hold"), "%s", err.msg);
	ck_assert_int_eq(tf_view_open(o.v, "f64.npy", &w, &err), TF_E_UNSUPPORTED);
	ck_assert_int_eq(tf_views_getxattr(o.v, "f64.raw", "user.tilefs.shape", value, sizeof(value), &len, &err),
			 TF_OK);
	ck_assert(len == 23 && !memcmp(value, "(2147483648, 536870912)", len));
	close_crafted(&o);
	tf_craft_remove(&c);
}
END_TEST

/* A space tile's last cell is its first plus the extent less one, which
 * wrapped past 2^64 - 1 for an int64 domain of the full range with an
 * extent of 2^63 - 1: the cells of the last tile became a run of ~2^64
 * cells (a dense read then wrote past its batch).  The dense runs of
 * gzip_level1 moved to the top of that domain add up to its cells. */
START_TEST(test_view_tile_end_past_2_64)
{
	static const int64_t ned[2] = { 0, 1023 }, top[2] = { INT64_MAX - 1023, INT64_MAX };
	char rel[600], frag[256];
	tf_craft c;
	tf_schema *s;
	opened o;
	tf_snapshot *snap;
	tf_dense *d;
	tf_run *runs = NULL;
	size_t nruns = 0, cap = 0;
	uint64_t total = 0, n;
	tf_error err;

	if (!tf_craft_copy("gzip_level1", &c))
		return;
	schema_rel(&c, rel);
	s = tf_craft_schema(&c, rel);
	tf_put_le64(s->dims[0].domain, (uint64_t)INT64_MIN), tf_put_le64(s->dims[0].domain + 8, INT64_MAX);
	tf_put_le64(s->dims[0].extent, INT64_MAX);
	tf_craft_write_schema(&c, rel, s);
	tf_schema_free(s);
	tf_craft_only_file(&c, "__fragments", frag);
	snprintf(rel, sizeof(rel), "__fragments/%s/__fragment_metadata.tdb", frag);
	patch_once(&c, rel, ned, top, sizeof(ned));
	ck_assert_msg(open_crafted(&c, &o, &err) == TF_OK, "%s", err.msg);
	ck_assert_int_eq(tf_snapshot_open(o.a, o.cache, &snap, &err), TF_OK);
	ck_assert_msg(tf_dense_open(snap, &d, &err) == TF_OK, "%s", err.msg);
	ck_assert_uint_eq(tf_dense_ncells(d), 1024);
	ck_assert_int_eq(tf_dense_runs(d, 0, 1024, &runs, &nruns, &cap, &err), TF_OK);
	for (size_t i = 0; i < nruns; i++) {
		ck_assert_uint_le(runs[i].n, 1024);
		total += runs[i].n;
	}
	ck_assert_uint_eq(total, 1024);
	ck_assert_uint_eq(nruns, 2);	/* tiles 1 and 2 of the fragment */
	ck_assert_uint_eq(runs[1].n, 2);
	ck_assert_int_ne(read_status(o.v, "cells.csv", &n, &err), TF_OK);	/* tiles of 2^63 - 1 cells */
	free(runs);
	tf_dense_free(d);
	tf_snapshot_unref(snap);
	close_crafted(&o);
	tf_craft_remove(&c);
}
END_TEST

/* Issue 19 item 6: a real dimension's space tile is (v - low) / extent,
 * truncated to an integer; with an extent of 1e-38 the quotient is
 * infinite, and casting it was undefined (UBSan float-cast-overflow in a
 * sanitizer build).  Clamped now; the merge reads every cell. */
START_TEST(test_view_real_extent_quotient)
{
	static const float lo = -3e38f, hi = 3e38f, ext = 1e-38f;
	char rel[300];
	tf_craft c;
	tf_schema *s;
	opened o;
	uint64_t n, before;
	tf_error err;

	if (!tf_craft_copy("sparse_1d_default_coords_filters", &c))
		return;
	ck_assert_int_eq(open_crafted(&c, &o, &err), TF_OK);
	ck_assert_int_eq(read_status(o.v, "cells.csv", &before, &err), TF_OK);
	close_crafted(&o);
	schema_rel(&c, rel);
	s = tf_craft_schema(&c, rel);
	ck_assert_int_eq(s->dims[0].type, TF_DT_UINT32);	/* its 4-byte coordinates, read as floats */
	s->dims[0].type = TF_DT_FLOAT32;
	memcpy(s->dims[0].domain, &lo, 4), memcpy(s->dims[0].domain + 4, &hi, 4), memcpy(s->dims[0].extent, &ext, 4);
	tf_craft_write_schema(&c, rel, s);
	tf_schema_free(s);
	ck_assert_int_eq(open_crafted(&c, &o, &err), TF_OK);
	ck_assert_msg(read_status(o.v, "cells.csv", &n, &err) == TF_OK, "%s", err.msg);
	ck_assert_uint_gt(n, before / 2);	/* every cell, its coordinate as a float */
	close_crafted(&o);
	tf_craft_remove(&c);
}
END_TEST

/* ---- an endless CSV --------------------------------------------------------------------- */

/* genarray, beside tiletool unless GENARRAY says where. */
static void genarray(const char *args)
{
	const char *g = getenv("GENARRAY"), *tt = getenv("TILETOOL");
	char cmd[8192];

	if (g)
		snprintf(cmd, sizeof(cmd), "'%s' %s > /dev/null", g, args);
	else
		snprintf(cmd, sizeof(cmd), "'%s/../contrib/genarray' %s > /dev/null", tt ? dirname_of(tt) : ".", args);
	ck_assert_msg(system(cmd) == 0, "%s", cmd);
}

static bool cancel_third(void *ctx)
{
	return ++*(int *)ctx >= 3;
}

/*
 * Issue 19: a dense array with two cells at opposite corners of a box of
 * 2^62 cells has a CSV that never ends (the fill value everywhere else).
 * Its index (a state per ~20 KiB block under a 64 KiB cache) grew by 16 bytes
 * a block, forever; now it stays within its bound (4 KiB here), thinning,
 * and reads anywhere in the thinned stretch give the bytes the first pass
 * gave.  A read far ahead is given up when its reader goes away.
 */
START_TEST(test_views_index_bounded)
{
	char dir[] = "/tmp/tf_corners.XXXXXX", args[4200], rm[4200];
	const uint64_t want = (uint64_t)12 << 20;
	uint8_t *all = malloc(want);
	tf_workspace *ws = tf_workspace_new();
	opened o;
	tf_view *w;
	size_t got;
	uint64_t n = 0;
	tf_error err;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(args, sizeof(args), "%s/c 2147483646 2147483646 2 2 0", dir);
	genarray(args);
	snprintf(args, sizeof(args), "%s/c 2147483646 2147483646 2 2 0 none --append 0 0 0 0 10", dir);
	genarray(args);
	snprintf(args, sizeof(args), "%s/c 2147483646 2147483646 2 2 0 none --append 2147483645 2147483645 "
		 "2147483645 2147483645 20", dir);
	genarray(args);
	snprintf(args, sizeof(args), "%s/c", dir);
	open_views_at(args, 64 << 10, &o);
	ck_assert_msg(tf_view_open(o.v, "cells.csv", &w, &err) == TF_OK, "%s", err.msg);
	while (n < want) {
		ck_assert_msg(tf_view_read(w, ws, n, 65536, all + n, &got, &err) == TF_OK, "%s", err.msg);
		ck_assert_uint_eq(got, 65536);
		n += got;
		ck_assert_uint_le(tf_view_index_bytes(w), 4 << 10);
	}
	ck_assert(!memcmp(all, "r,c,a\n0,0,10\n0,1,-2147483648\n", 29));
	for (uint64_t i = 0, seed = 7; i < 60; i++) {	/* anywhere in the thinned stretch */
		uint8_t buf[5000];
		uint64_t off;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		off = (seed >> 17) % (n - sizeof(buf));
		ck_assert_msg(tf_view_read(w, ws, off, sizeof(buf), buf, &got, &err) == TF_OK, "%s", err.msg);
		ck_assert(got == sizeof(buf) && !memcmp(buf, all + off, sizeof(buf)));
	}
	/* An endless CSV is not sized: said at once, nothing formatted. */
	{
		uint64_t size;
		bool known = true;

		ck_assert_int_eq(tf_view_size_now(w, ws, NULL, &size, &known, &err), TF_OK);
		ck_assert(!known);
	}
	/* A read 10 GB further, given up when its reader goes away (the 3rd
	 * time it is asked): TF_E_INTR soon, and the view reads on. */
	{
		int asked = 0;
		tf_cancel gone = { cancel_third, &asked };
		uint8_t buf[100];

		ck_assert_int_eq(tf_view_read_cancellable(w, ws, (uint64_t)10 << 30, sizeof(buf), buf, &got, &gone,
							  &err), TF_E_INTR);
		ck_assert_int_eq(asked, 3);
		ck_assert_int_eq(tf_view_read(w, ws, 0, sizeof(buf), buf, &got, &err), TF_OK);
		ck_assert(got == sizeof(buf) && !memcmp(buf, all, sizeof(buf)));
	}
	tf_view_close(w);
	close_views(&o);
	tf_workspace_free(ws);
	free(all);
	snprintf(rm, sizeof(rm), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(rm), 0);
}
END_TEST


/*
 * Issue 19: a fragment's CSV state (~11 KB: columns, header, index, the
 * producer's cursors) was kept for the views' life once opened: reading
 * every fragments/F/cells.csv of 2,000 fragments kept 22 MB outside the
 * budget until unmount.  Now those no view has open go beyond 64, their
 * sizes remembered: 300 one-cell fragments read one after another keep at
 * most 65 states, every size stays known and a second read is the same.
 * tf_views_shrink lets every idle one go, and the array's idle metadata.
 */
START_TEST(test_fragment_csvs_bounded)
{
	char dir[] = "/tmp/tf_fcsv.XXXXXX", args[4200], name[300], rel[400];
	tf_workspace *ws = tf_workspace_new();
	uint64_t *sizes = calloc(300, sizeof(uint64_t));
	opened o;
	tf_error err;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(args, sizeof(args), "%s/a --sparse 300 300 100 disjoint", dir);
	genarray(args);
	snprintf(args, sizeof(args), "%s/a", dir);
	open_views_at(args, 16 << 20, &o);
	ck_assert_uint_eq(tf_views_nvisible(o.v), 300);
	for (int kind = 0; kind < 2; kind++) {	/* cells.csv, then cells.arrow (same list) */
	const char *file = kind ? "cells.arrow" : "cells.csv";
	for (int pass = 0; pass < 2; pass++)
		for (size_t k = 0; k < 300; k++) {
			uint8_t buf[4096];
			tf_view_stat st;
			tf_view *w;
			size_t got;

			ck_assert(tf_views_visible_dir(o.v, k, name, sizeof(name)));
			snprintf(rel, sizeof(rel), "fragments/%s/%s", strrchr(name, '/') ? strrchr(name, '/') + 1 : name, file);
			ck_assert_msg(tf_view_open(o.v, rel, &w, &err) == TF_OK, "%s: %s", rel, err.msg);
			ck_assert_msg(tf_view_read(w, ws, 0, sizeof(buf), buf, &got, &err) == TF_OK, "%s", err.msg);
			ck_assert_uint_gt(got, 0);
			ck_assert_uint_lt(got, sizeof(buf));
			ck_assert(pass == 0 || sizes[k] == got);
			sizes[k] = got;
			tf_view_close(w);
			ck_assert_uint_le(tf_views_csv_states(o.v), 65);
			ck_assert_int_eq(tf_views_stat(o.v, rel, &st, &err), TF_OK);
			ck_assert(st.size_known && st.size == got);
		}
	for (size_t k = 0; k < 300; k++) {	/* let go long ago: still known */
		tf_view_stat st;

		ck_assert(tf_views_visible_dir(o.v, k, name, sizeof(name)));
		snprintf(rel, sizeof(rel), "fragments/%s/%s", strrchr(name, '/') ? strrchr(name, '/') + 1 : name, file);
		ck_assert_int_eq(tf_views_stat(o.v, rel, &st, &err), TF_OK);
		ck_assert(st.size_known && st.size == sizes[k]);
	}
	tf_views_shrink(o.v);	/* views not used for a while: what is kept goes */
	ck_assert_uint_eq(tf_views_csv_states(o.v), 0);
	ck_assert_uint_eq(tf_array_idle_bytes(o.a), 0);
	for (size_t k = 0; k < 300; k += 7) {	/* and they read the same */
		uint8_t buf[4096];
		tf_view *w;
		size_t got;

		ck_assert(tf_views_visible_dir(o.v, k, name, sizeof(name)));
		snprintf(rel, sizeof(rel), "fragments/%s/%s", strrchr(name, '/') ? strrchr(name, '/') + 1 : name, file);
		ck_assert_msg(tf_view_open(o.v, rel, &w, &err) == TF_OK, "%s: %s", rel, err.msg);
		ck_assert_msg(tf_view_read(w, ws, 0, sizeof(buf), buf, &got, &err) == TF_OK, "%s", err.msg);
		ck_assert_uint_eq(got, sizes[k]);
		tf_view_close(w);
	}
	}
	close_views(&o);
	tf_workspace_free(ws);
	free(sizes);
	snprintf(args, sizeof(args), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(args), 0);
}
END_TEST

/* cells.arrow of arrays of several record batches (150,000 cells: 3),
 * under a cache of 1 MiB (batches of 128 KiB: more), read whole, then in
 * random ranges (pieces evicted and formatted again from their batch),
 * equal; the file ends with the tail after the last batch. */
START_TEST(test_arrow_ranges)
{
	char dir[] = "/tmp/tf_arrow.XXXXXX", args[4200];
	const char *kinds[] = { "dense 300 500 100 100 3 zstd", "sparse --sparse 120000 3 10000 dups lz4" };

	ck_assert_ptr_nonnull(mkdtemp(dir));
	for (int k = 0; k < 2; k++) {
		opened o;
		tf_view *w;
		tf_view_stat st;
		uint8_t *all;
		uint64_t n, size;
		tf_error err;

		snprintf(args, sizeof(args), "%s/%s", dir, kinds[k]);
		genarray(args);
		snprintf(args, sizeof(args), "%s/%.*s", dir, (int)strcspn(kinds[k], " "), kinds[k]);
		open_views_at(args, 1 << 20, &o);
		ck_assert_msg(tf_view_open(o.v, "cells.arrow", &w, &err) == TF_OK, "%s", err.msg);
		ck_assert(!tf_view_size(w, &size));
		all = read_all(w, 100000, &n);
		ck_assert_uint_gt(n, 150000 * 12);
		ck_assert(!memcmp(all, "ARROW1\0\0", 8) && !memcmp(all + n - 6, "ARROW1", 6));
		ck_assert(tf_view_size(w, &size) && size == n);
		ck_assert_int_eq(tf_views_stat(o.v, "cells.arrow", &st, &err), TF_OK);
		ck_assert(st.size_known && st.size == n);
		check_ranges(w, all, n, 7 + (uint64_t)k, 300);
		free(all);
		tf_view_close(w);
		close_views(&o);
	}
	snprintf(args, sizeof(args), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(args), 0);
}
END_TEST

/* cells.arrow's extender keeps its block and batch buffers between its
 * readers' requests (megabytes: fresh pages cost more than the writing),
 * charged to the budget, and gives them back when no view has it open. */
START_TEST(test_arrow_idle_releases)
{
	char dir[] = "/tmp/tf_arrel.XXXXXX", args[4200];
	tf_workspace *ws = tf_workspace_new();
	tf_cache_stats open_st, closed_st;
	opened o;
	tf_view *w;
	uint8_t buf[100];
	size_t got;
	tf_error err;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(args, sizeof(args), "%s/d 300 500 100 100 3", dir);
	genarray(args);
	snprintf(args, sizeof(args), "%s/d", dir);
	open_views_at(args, 16 << 20, &o);
	ck_assert_msg(tf_view_open(o.v, "cells.arrow", &w, &err) == TF_OK, "%s", err.msg);
	ck_assert_msg(tf_view_read(w, ws, 100000, sizeof(buf), buf, &got, &err) == TF_OK, "%s", err.msg);
	ck_assert_uint_eq(got, sizeof(buf));
	tf_cache_get_stats(o.cache, &open_st);
	tf_view_close(w);
	tf_cache_get_stats(o.cache, &closed_st);
	/* a batch of 65,536 cells of 12 bytes, and its block: ~1.5 MB */
	ck_assert_msg(open_st.charged >= closed_st.charged + (1 << 20), "charged %zu open, %zu closed",
		      open_st.charged, closed_st.charged);
	close_views(&o);
	tf_workspace_free(ws);
	snprintf(args, sizeof(args), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(args), 0);
}
END_TEST

/* A whole read of a sparse array's cells.arrow and cells.csv leaves the
 * cache nearly empty: the merge's windows copy each decoded unit out once
 * and let it go as done when they reach its end, and a reader that keeps
 * what it reads (tf_view_set_kept: the driver's page cache) lets each piece
 * it read whole go as done; both are recycled, so a streaming read reuses
 * a few megabytes of warm memory.  Without set_kept the pieces stay.  (A
 * 4-million-cell sparse cells.arrow took 239 MB of RSS, its units and
 * pieces in fresh pages the kernel zeroed; now ~30 MB.) */
START_TEST(test_views_sparse_scan_recycles)
{
	char dir[] = "/tmp/tf_scanrec.XXXXXX", args[4200];
	static const char *const names[] = { "cells.arrow", "cells.csv" };

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(args, sizeof(args), "%s/s --sparse 400000 1 20000 lz4", dir);
	genarray(args);
	for (int kept = 0; kept < 2; kept++)
		for (size_t k = 0; k < 2; k++) {
			tf_workspace *ws = tf_workspace_new();
			tf_cache_stats st;
			opened o;
			tf_view *w;
			uint64_t n;
			size_t held;
			tf_error err;

			snprintf(args, sizeof(args), "%s/s", dir);
			open_views_at(args, 64 << 20, &o);
			ck_assert_msg(tf_view_open(o.v, names[k], &w, &err) == TF_OK, "%s", err.msg);
			tf_view_set_kept(w, kept);
			free(read_all(w, 1 << 20, &n));	/* the kernel's requests */
			ck_assert_uint_gt(n, 400000 * 20);
			tf_cache_get_stats(o.cache, &st);
			/* kept: the decoded units (~12 MB) and the pieces (n
			 * bytes) are never all held, the done list keeps 4 MiB */
			held = st.used - st.charged;
			if (kept)
				ck_assert_msg(held <= (6 << 20) && st.recycled > 0, "%s: %zu bytes held after a "
					      "read of %llu, %llu recycled", names[k], held, (unsigned long long)n,
					      (unsigned long long)st.recycled);
			else
				ck_assert_msg(held >= n, "%s: the pieces went: %zu bytes held of %llu read", names[k],
					      held, (unsigned long long)n);
			tf_view_close(w);
			close_views(&o);
			tf_workspace_free(ws);
		}
	snprintf(args, sizeof(args), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(args), 0);
}
END_TEST

/* The same of cells.arrow: its own entry, beside none of the CSV's. */
START_TEST(test_arrow_size_remembered)
{
	if (tf_test_corpus())
		check_size_remembered("cells.arrow", "cells.csv");
}
END_TEST

/* ---- the sparse merge's runs ------------------------------------------------------------------ */

/* Every dimension and attribute of the array, as a view reads them. */
static size_t merge_fields(tf_snapshot *snap, tf_fieldspec *spec)
{
	const tf_schema *sc = tf_snapshot_schema(snap);
	size_t n = 0;

	for (size_t d = 0; d < sc->ndims; d++)
		spec[n++] = (tf_fieldspec){ TF_COL_DIM, sc->dims[d].name, &sc->dims[d] };
	for (size_t a = 0; a < sc->nattrs; a++)
		spec[n++] = (tf_fieldspec){ TF_COL_ATTR, sc->attrs[a].name, &sc->attrs[a] };
	return n;
}

/* One output cell appended to out: per field its validity, length and
 * bytes (a null's bytes too), from a run's window or a copied row. */
static void merge_cell(tf_buf *out, const tf_sparse *it, size_t nf, const tf_sparse_run *run, uint64_t c,
		       const tf_row *row)
{
	for (size_t i = 0; i < nf; i++) {
		const uint8_t *p;
		size_t n;
		bool valid;
		uint8_t h[5];

		if (run && run->buf)
			tf_cellbuf_get(run->buf, tf_sparse_field(it, i), c, &p, &n, &valid);
		else
			p = row->bytes.p + row->off[i], n = row->len[i], valid = row->valid[i];
		h[0] = valid;
		tf_put_le32(h + 1, (uint32_t)n);
		ck_assert_int_eq(tf_buf_append(out, h, 5, NULL), TF_OK);
		ck_assert_int_eq(tf_buf_append(out, p ? p : (const uint8_t *)"", n, NULL), TF_OK);
	}
}

/* The merge's cells one at a time (tf_sparse_next): the reference. */
static uint64_t merge_by_cells(tf_snapshot *snap, tf_workspace *ws, tf_buf *out)
{
	tf_fieldspec spec[64];
	size_t nf = merge_fields(snap, spec);
	tf_sparse *it;
	tf_row row;
	tf_error err;
	uint64_t n = 0;
	bool end = false;

	ck_assert_msg(tf_sparse_open(snap, spec, nf, NULL, &it, &err) == TF_OK, "%s", err.msg);
	ck_assert_int_eq(tf_row_init(&row, nf, &err), TF_OK);
	ck_assert_msg(tf_sparse_seek(it, ws, NULL, &err) == TF_OK, "%s", err.msg);
	for (;;) {
		ck_assert_msg(tf_sparse_next(it, ws, &row, &end, &err) == TF_OK, "%s", err.msg);
		if (end)
			break;
		merge_cell(out, it, nf, NULL, 0, &row);
		n++;
	}
	tf_row_free(&row);
	tf_sparse_free(it);
	return n;
}

typedef struct run_counts {
	uint64_t cells, runs, long_runs, rows;	/* rows: cells the cell path copied */
} run_counts;

/* The same by runs, each taken in part (a pseudo-random count of its
 * cells, none at times), the merge parked and resumed between runs now
 * and then (its windows may be evicted meanwhile), and every so often
 * left for a new merge seeked to its state, as a view's index does. */
static void merge_by_runs(tf_snapshot *snap, tf_workspace *ws, uint32_t seed, tf_buf *out, run_counts *rc)
{
	tf_fieldspec spec[64];
	size_t nf = merge_fields(snap, spec);
	tf_sparse *it, *next;
	tf_sparse_run run;
	tf_row row;
	tf_error err;
	uint64_t *state;
	bool end = false;

	memset(rc, 0, sizeof(*rc));
	ck_assert_msg(tf_sparse_open(snap, spec, nf, NULL, &it, &err) == TF_OK, "%s", err.msg);
	ck_assert_int_eq(tf_row_init(&row, nf, &err), TF_OK);
	ck_assert_ptr_nonnull(state = calloc(tf_sparse_state_len(it) + 1, sizeof(*state)));
	ck_assert_msg(tf_sparse_seek(it, ws, NULL, &err) == TF_OK, "%s", err.msg);
	for (;;) {
		uint64_t k;

		ck_assert_msg(tf_sparse_next_run(it, ws, &row, &run, &end, &err) == TF_OK, "%s", err.msg);
		if (end)
			break;
		ck_assert_uint_ge(run.n, 1);
		seed = seed * 1103515245u + 12345u;
		k = run.buf ? (seed >> 16) % (run.n + 1) : 1;	/* a copied row is taken whole */
		if (run.buf && (seed >> 8) % 4)
			k = run.n;
		for (uint64_t i = 0; i < k; i++)
			merge_cell(out, it, nf, &run, run.first + i, &row);
		if (run.buf)
			tf_sparse_took(it, k);
		rc->cells += k, rc->runs += run.buf != NULL, rc->long_runs += run.buf && k > 1, rc->rows += !run.buf;
		if ((seed >> 4) % 16 == 0) {
			tf_sparse_park(it);
			ck_assert_msg(tf_sparse_resume(it, ws, NULL, &err) == TF_OK, "%s", err.msg);
		} else if ((seed >> 4) % 64 == 1) {
			tf_sparse_get_state(it, state);
			ck_assert_msg(tf_sparse_open(snap, spec, nf, NULL, &next, &err) == TF_OK, "%s", err.msg);
			ck_assert_msg(tf_sparse_seek(next, ws, state, &err) == TF_OK, "%s", err.msg);
			tf_sparse_free(it);
			it = next;
		}
	}
	free(state);
	tf_row_free(&row);
	tf_sparse_free(it);
}

/* Array dir (of source root), merged by cells and by runs under a cache
 * of `cache` bytes: the same cells, to the byte. */
static void check_runs(const char *dir, size_t cache, run_counts *rc)
{
	tf_source *src;
	char *root;
	tf_array *a;
	tf_cache *c;
	tf_snapshot *snap;
	tf_workspace *ws = tf_workspace_new();
	tf_buf cells = TF_BUF_INIT(SIZE_MAX), runs = TF_BUF_INIT(SIZE_MAX);
	tf_error err;
	uint64_t n;

	ck_assert_ptr_nonnull(ws);
	ck_assert_msg(tf_source_locate(dir, NULL, &src, &root, &err) == TF_OK, "%s", err.msg);
	ck_assert_int_eq(tf_array_open(src, root, NULL, &a, &err), TF_OK);
	ck_assert_int_eq(tf_cache_new(cache, 1, &c, &err), TF_OK);
	ck_assert_int_eq(tf_snapshot_open(a, c, &snap, &err), TF_OK);
	n = merge_by_cells(snap, ws, &cells);
	for (uint32_t seed = 1; seed <= 3; seed++) {
		runs.len = 0;
		merge_by_runs(snap, ws, seed, &runs, rc);
		ck_assert_uint_eq(rc->cells, n);
		ck_assert_msg(runs.len == cells.len && !memcmp(runs.p, cells.p, cells.len),
			      "%s, seed %u: %llu cells by runs differ from the cells one by one", dir, seed,
			      (unsigned long long)n);
	}
	tf_buf_free(&cells), tf_buf_free(&runs);
	tf_snapshot_unref(snap);
	tf_cache_free(c);
	tf_array_free(a);
	free(root);
	tf_source_free(src);
	tf_workspace_free(ws);
}

/*
 * Runs through the sparse merge (tf_sparse_next_run) give the cells
 * tf_sparse_next gives, to the byte: fragments interleaved in blocks whose
 * edge cells later fragments write again (a run ends before a duplicate,
 * which the cell path resolves: the newest wins, or with duplicates all
 * come, newest first), interleaved cell by cell, one fragment, with a
 * nullable string whose nulls hold bytes; tiles longer than the windows
 * and windows cut mid-block; runs taken in part, the merge parked,
 * resumed and seeked between them.  Then the corpus's sparse arrays
 * (deletes, timestamps, duplicates, string dimensions).
 */
START_TEST(test_merge_runs)
{
	static const char *const gen[] = { "b --sparse 6000 4 100 blocks=10 nullable lz4",
					   "bd --sparse 6000 4 100 blocks=10 dups nullable",
					   "big --sparse 9000 4 1000 blocks=37 nullable",
					   "c --sparse 3000 3 100 nullable", "one --sparse 3000 1 1000 nullable" };
	static const char *const cases[] = { "sparse_1d", "sparse_2d", "multifrag_sparse", "sparse_string_dim",
					     "extra/sparse_dups_timestamps", "extra/sparse_dups_consolidated_deletes",
					     "extra/sparse_var_dim_nullable_attr" };
	char dir[] = "/tmp/tf_runs.XXXXXX", args[4200];
	run_counts rc;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	for (size_t i = 0; i < sizeof(gen) / sizeof(gen[0]); i++) {
		snprintf(args, sizeof(args), "%s/%s", dir, gen[i]);
		genarray(args);
		snprintf(args, sizeof(args), "%s/%.*s", dir, (int)strcspn(gen[i], " "), gen[i]);
		check_runs(args, 1 << 20, &rc);
		if (i != 3)	/* runs there were (not cell by cell) */
			ck_assert_uint_gt(rc.long_runs, 0);
		if (i == 0 || i == 2)	/* and duplicates the cell path resolved (none with dups) */
			ck_assert_uint_gt(rc.rows, 0);
	}
	snprintf(args, sizeof(args), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(args), 0);
	for (size_t i = 0; tf_test_corpus() && i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(args, sizeof(args), "%s/%s/array", tf_test_corpus(), cases[i]);
		check_runs(args, 1 << 20, &rc);
	}
}
END_TEST

static Suite *view_suite(void)
{
	Suite *s = suite_create("view");
	TCase *tc = tcase_create("text");
	TCase *corpus, *hostile;

	tcase_set_timeout(tc, 60);	/* valgrind runs them too */
	tcase_add_test(tc, test_float_shortest);
	tcase_add_test(tc, test_datetimes);
	tcase_add_test(tc, test_fields);
	tcase_add_test(tc, test_enumerations);
	tcase_add_test(tc, test_npy_header);
	tcase_add_test(tc, test_npy_header_long_shape);
	tcase_add_test(tc, test_conditions);
	tcase_add_test(tc, test_hilbert);
	tcase_add_test(tc, test_views_index_bounded);
	tcase_add_test(tc, test_fragment_csvs_bounded);
	tcase_add_test(tc, test_arrow_ranges);
	tcase_add_test(tc, test_arrow_idle_releases);
	tcase_add_test(tc, test_views_sparse_scan_recycles);
	tcase_add_test(tc, test_merge_runs);
	suite_add_tcase(s, tc);
	if (tf_test_corpus()) {
		corpus = tcase_create("corpus");
		tcase_set_timeout(corpus, 120);
		tcase_add_test(corpus, test_views_ranges);
		tcase_add_test(corpus, test_views_size_now);
		tcase_add_test(corpus, test_views_size_remembered);
		tcase_add_test(corpus, test_arrow_size_remembered);
		tcase_add_test(corpus, test_views_raw_recycles);
		tcase_add_test(corpus, test_views_random_first);
		tcase_add_test(corpus, test_views_threads);
		tcase_add_test(corpus, test_views_listing);
		tcase_add_test(corpus, test_views_change);
		suite_add_tcase(s, corpus);
		hostile = tcase_create("hostile");
		tcase_set_timeout(hostile, 120);
		tcase_add_test(hostile, test_view_zero_extent_newer_schema);
		tcase_add_test(hostile, test_view_newer_schema_other_tiling);
		tcase_add_test(hostile, test_view_sparse_newer_schema_other_dims);
		tcase_add_test(hostile, test_view_fragment_own_attribute);
		tcase_add_test(hostile, test_view_tile_cells_checked_first);
		tcase_add_test(hostile, test_view_folded_tile_cells_untouched);
		tcase_add_test(hostile, test_view_cell_size_wraps);
		tcase_add_test(hostile, test_view_matrix_past_off_t);
		tcase_add_test(hostile, test_view_tile_end_past_2_64);
		tcase_add_test(hostile, test_view_real_extent_quotient);
		suite_add_tcase(s, hostile);
	} else {
		printf("corpus absent: only the text tests run\n");
	}
	return s;
}

TF_TEST_MAIN(view_suite)
