/* test_pipeline.c - pipeline text/serialized forms and the chunk runner. */
#include "tf_test.h"

#include <string.h>

static char *canon(const char *spec)
{
	tf_pipeline *p;
	tf_error err;
	char *s;

	ck_assert_msg(tf_pipeline_parse(spec, &p, &err) == TF_OK, "%s: %s", spec, err.msg);
	s = tf_pipeline_text(p);
	tf_pipeline_free(p);
	return s;
}

static void expect_canon(const char *spec, const char *want)
{
	char *got = canon(spec);

	ck_assert_str_eq(got, want);
	free(got);
}

static void expect_error(const char *spec, const char *needle)
{
	tf_pipeline *p = NULL;
	tf_error err = { 0 };
	tf_status rc = tf_pipeline_parse(spec, &p, &err);

	ck_assert_msg(rc == TF_E_INVAL, "'%s' should fail", spec);
	ck_assert_msg(strstr(err.msg, needle), "'%s': message '%s' lacks '%s'", spec, err.msg, needle);
}

START_TEST(test_text_forms)
{
	expect_canon("", "");
	expect_canon("  ", "");
	expect_canon("zstd", "zstd(level=-1)");
	expect_canon("delta(reinterpret=int64) | bitshuffle | zstd(level=7)",
		     "delta(reinterpret=int64) | bitshuffle | zstd(level=7)");
	expect_canon("DELTA( reinterpret = INT64 )|BitShuffle|ZSTD(7)",
		     "delta(reinterpret=int64) | bitshuffle | zstd(level=7)");
	expect_canon("tiledb:19 | 8 | 2,7", "delta | bitshuffle | zstd(level=7)");
	expect_canon("19,-1,1 | 8", "delta(reinterpret=int64) | bitshuffle");
	expect_canon("bit_width_reduction(window=64) | positive_delta",
		     "bit_width_reduction(window=64) | positive_delta(window=1024)");
	expect_canon("scale_float(scale=0.5, offset=-3.25, byte_width=2)",
		     "scale_float(scale=0.5, offset=-3.25, byte_width=2)");
	expect_canon("15,0.1,0,4", "scale_float(scale=0.1, offset=0, byte_width=4)");
	expect_canon("dictionary_encoding | checksum_sha256 | md5", "dictionary(level=-1) | checksum_sha256 | checksum_md5");
	expect_canon("bitshuffle()", "bitshuffle");
}
END_TEST

START_TEST(test_text_errors)
{
	expect_error("zstdd", "unknown filter 'zstdd'");
	expect_error("zstd | | lz4", "filter 2 is empty");
	expect_error("zstd(lvl=3)", "unknown option 'lvl'");
	expect_error("zstd(level=x)", "bad value 'x' for option level");
	/* Found by fuzz_config: a float option past float's range became inf,
	 * whose printed form ("quality=inf") did not parse back. */
	expect_error("webp(quality=1e39)", "bad value '1e39' for option quality");
	expect_error("18,222222222222222222222222222222222222222222222", "for option quality");
	expect_error("delta(reinterpret=int65)", "bad value 'int65'");
	expect_error("bitshuffle(3)", "too many parameters");
	expect_error("zstd(level=3", "unbalanced");
	expect_error("99", "unknown filter id '99'");
	expect_error("17", "unknown filter id '17'");
	expect_error("2,level=3", "positional");
	expect_error("scale_float(byte_width=16)", "byte_width");
}
END_TEST

START_TEST(test_serialize_roundtrip)
{
	const char *spec = "delta(reinterpret=uint32) | bit_width_reduction(window=128) | "
			   "scale_float(scale=2.5, offset=1, byte_width=4) | xor | zstd(level=19) | "
			   "checksum_md5 | positive_delta(window=64) | double_delta(reinterpret=int16)";
	tf_pipeline *p, *q;
	tf_buf b = TF_BUF_INIT(SIZE_MAX);
	tf_reader r;
	tf_error err;
	char *a, *c;

	ck_assert(tf_pipeline_parse(spec, &p, &err) == TF_OK);
	ck_assert(tf_pipeline_serialize(p, &b, &err) == TF_OK);
	r = tf_reader_of(tf_span_of(b.p, b.len));
	ck_assert_msg(tf_pipeline_deserialize(&r, &q, &err) == TF_OK, "%s", err.msg);
	ck_assert_uint_eq(r.n, 0);
	a = tf_pipeline_text(p);
	c = tf_pipeline_text(q);
	ck_assert_str_eq(a, c);
	free(a);
	free(c);
	tf_pipeline_free(p);
	tf_pipeline_free(q);
	tf_buf_free(&b);
}
END_TEST

/* Serialized bytes as TileDB writes them: the 5-byte form of DELTA options
 * (format < 19) and the compressor byte deciding the codec. */
START_TEST(test_serialized_variants)
{
	static const uint8_t old_delta[] = {
		0, 0, 1, 0, 2, 0, 0, 0,		/* max chunk 65536, 2 filters */
		19, 5, 0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff,	/* DELTA, 5 option bytes */
		1, 5, 0, 0, 0, 2, 3, 0, 0, 0,	/* type GZIP but compressor ZSTD level 3 */
	};
	static const uint8_t bad_len[] = { 0, 0, 1, 0, 1, 0, 0, 0, 7, 3, 0, 0, 0, 1, 2, 3 };
	static const uint8_t too_many[] = { 0, 0, 1, 0, 0xff, 0xff, 0xff, 0xff };
	tf_pipeline *p;
	tf_reader r = tf_reader_of(tf_span_of(old_delta, sizeof(old_delta)));
	tf_error err;
	char *s;

	ck_assert_msg(tf_pipeline_deserialize(&r, &p, &err) == TF_OK, "%s", err.msg);
	s = tf_pipeline_text(p);
	ck_assert_str_eq(s, "delta | zstd(level=3)");
	free(s);
	tf_pipeline_free(p);
	r = tf_reader_of(tf_span_of(bad_len, sizeof(bad_len)));
	ck_assert_int_eq(tf_pipeline_deserialize(&r, &p, &err), TF_E_CORRUPT);
	r = tf_reader_of(tf_span_of(too_many, sizeof(too_many)));
	ck_assert_int_eq(tf_pipeline_deserialize(&r, &p, &err), TF_E_CORRUPT);
	for (size_t n = 0; n < sizeof(old_delta); n++) {	/* every truncation fails cleanly */
		r = tf_reader_of(tf_span_of(old_delta, n));
		ck_assert_int_eq(tf_pipeline_deserialize(&r, &p, &err), TF_E_CORRUPT);
	}
}
END_TEST

START_TEST(test_zstd_roundtrip_sizes)
{
	static const size_t sizes[] = { 0, 1, 7, 4096, 65536, 100003 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint8_t *d = tf_test_data(sizes[i], TF_GEN_WALK, 4, i);
		tf_test_roundtrip("zstd(level=3)", TF_DT_INT32, 4, d, sizes[i]);
		tf_test_roundtrip("", TF_DT_INT32, 4, d, sizes[i]);
		free(d);
	}
}
END_TEST

/* A chunk whose header lies about its decoded size must fail, not overrun. */
START_TEST(test_decode_size_mismatch)
{
	tf_chunk_env env = { .type = TF_DT_UINT8, .cell_size = 1, .version = 22 };
	tf_workspace *ws = tf_workspace_new();
	uint8_t *d = tf_test_data(1000, TF_GEN_RUNS, 1, 3), dst[2000];
	tf_buf chunk = TF_BUF_INIT(SIZE_MAX);
	tf_pipeline *p;
	tf_error err;

	ck_assert(tf_pipeline_parse("zstd", &p, &err) == TF_OK);
	ck_assert(tf_pipeline_encode(p, &env, ws, tf_span_of(d, 1000), NULL, 0, &chunk, &err) == TF_OK);
	for (uint32_t claim = 999; claim <= 1001; claim += 2) {
		tf_put_le32(chunk.p, claim);
		ck_assert_int_eq(tf_chunk_decode(p, &env, ws, tf_span_of(chunk.p, chunk.len), dst,
						 NULL, &err), TF_E_CORRUPT);
		ck_assert_msg(strstr(err.msg, claim < 1000 ? "filter 0 (zstd)" : "header says 1001"),
			      "%s", err.msg);
	}
	tf_buf_free(&chunk);
	tf_pipeline_free(p);
	tf_workspace_free(ws);
	free(d);
}
END_TEST

/* Issue 9 (use-after-free): the caller's IO and AUX buffers survive a
 * decode however large they are.  decode_data_tile holds a whole data tile
 * in AUX across its chunks' decodes; the pipeline used to free both
 * buffers over 8 MiB after each chunk, and the tile was then read freed. */
START_TEST(test_caller_buffers_kept)
{
	tf_chunk_env env = { .type = TF_DT_UINT8, .cell_size = 1, .version = 22 };
	tf_workspace *ws = tf_workspace_new();
	uint8_t *d = tf_test_data(1000, TF_GEN_RUNS, 1, 3), dst[1000];
	tf_buf chunk = TF_BUF_INIT(SIZE_MAX);
	tf_pipeline *p;
	tf_error err;

	ck_assert(tf_pipeline_parse("zstd", &p, &err) == TF_OK);
	ck_assert(tf_pipeline_encode(p, &env, ws, tf_span_of(d, 1000), NULL, 0, &chunk, &err) == TF_OK);
	for (unsigned which = TF_WS_IO; which <= TF_WS_AUX; which++) {
		tf_buf *b = tf_workspace_buf(ws, which);
		size_t big = (size_t)24 << 20;	/* over the 8 MiB scratch kept */

		ck_assert(tf_buf_reserve(b, big, &err) == TF_OK);
		memset(b->p, 0x5a, big);
		const uint8_t *before = b->p;
		ck_assert_int_eq(tf_chunk_decode(p, &env, ws, tf_span_of(chunk.p, chunk.len), dst, NULL,
						 &err), TF_OK);
		ck_assert_msg(b->p == before && b->cap >= big, "buffer %u released by the pipeline", which);
		ck_assert(b->p[0] == 0x5a && b->p[big - 1] == 0x5a);
		ck_assert(memcmp(dst, d, 1000) == 0);
	}
	tf_buf_free(&chunk);
	tf_pipeline_free(p);
	tf_workspace_free(ws);
	free(d);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("pipeline");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_text_forms);
	tcase_add_test(tc, test_text_errors);
	tcase_add_test(tc, test_serialize_roundtrip);
	tcase_add_test(tc, test_serialized_variants);
	tcase_add_test(tc, test_zstd_roundtrip_sizes);
	tcase_add_test(tc, test_decode_size_mismatch);
	tcase_add_test(tc, test_caller_buffers_kept);
	suite_add_tcase(s, tc);
	return s;
}

TF_TEST_MAIN(suite)
