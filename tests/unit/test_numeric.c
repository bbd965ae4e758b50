/*
 * test_numeric.c - the numeric transform filters: delta, double delta,
 * bit width reduction, positive delta, bitshuffle, byteshuffle, xor and
 * scale float.
 *
 *   corpus   : TileDB 2.29.2's tiles decode to its unfiltered bytes, and
 *              re-encoding those bytes gives TileDB's chunks back exactly;
 *   layout   : hand-checked bytes from doc/FORMAT.md, and the shuffles
 *              against straightforward reference implementations;
 *   roundtrip: every datatype, odd sizes and chains with other filters;
 *   errors   : precise messages; corrupt input never crashes.
 */
#include "tf_test.h"

#include <glob.h>
#include <stdio.h>
#include <string.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- helpers -------------------------------------------------------------------------- */

static tf_pipeline *parse(const char *spec)
{
	tf_pipeline *p = NULL;
	tf_error err = { 0 };

	ck_assert_msg(tf_pipeline_parse(spec, &p, &err) == TF_OK, "%s: %s", spec, err.msg);
	return p;
}

static tf_datatype dtype(const char *name)
{
	tf_datatype t;

	ck_assert_msg(tf_datatype_parse(name, &t), "unknown datatype %s", name);
	return t;
}

/* Encode n bytes as one stored chunk (header, metadata, data) into *chunk. */
static tf_status encode_chunk(const char *spec, const tf_chunk_env *env, const uint8_t *in, size_t n,
			      tf_buf *chunk, tf_error *err)
{
	tf_pipeline *p = parse(spec);
	tf_workspace *ws = tf_workspace_new();
	tf_status rc;

	tf_buf_init(chunk, SIZE_MAX);
	rc = tf_pipeline_encode(p, env, ws, tf_span_of(in, n), NULL, 0, chunk, err);
	tf_workspace_free(ws);
	tf_pipeline_free(p);
	return rc;
}

/* Decode a stored chunk into a buffer of its (claimed) orig_len. */
static tf_status decode_chunk(const char *spec, const tf_chunk_env *env, const uint8_t *chunk,
			      size_t n, uint8_t **out, tf_error *err)
{
	tf_pipeline *p = parse(spec);
	tf_workspace *ws = tf_workspace_new();
	size_t orig = n >= 4 ? tf_le32(chunk) : 0;
	tf_status rc;

	*out = malloc(orig ? orig : 1);
	ck_assert_ptr_nonnull(*out);
	rc = tf_chunk_decode(p, env, ws, tf_span_of(chunk, n), *out, NULL, err);
	tf_workspace_free(ws);
	tf_pipeline_free(p);
	return rc;
}

static tf_chunk_env env_of(tf_datatype t, uint32_t version)
{
	tf_chunk_env env = { .type = t, .cell_size = tf_datatype_size(t), .version = version };

	return env;
}

/* ---- known answers from the corpus ------------------------------------------------------ */

typedef struct corpus_file {
	const char *name;	/* case directory, relative to the corpus root */
	unsigned frag;
	const char *file;
	const char *spec;
	const char *type;
	uint32_t cell_size;
} corpus_file;

/* Every data file of the corpus whose pipeline has a numeric filter
 * (generated from each case's manifest.json). */
static const corpus_file corpus[] = {
	{ "delta_ints", 0, "a0.tdb", "delta", "int8", 1 },
	{ "delta_ints", 0, "a1.tdb", "delta", "uint8", 1 },
	{ "delta_ints", 0, "a2.tdb", "delta", "int16", 2 },
	{ "delta_ints", 0, "a3.tdb", "delta", "uint16", 2 },
	{ "delta_ints", 0, "a4.tdb", "delta", "int32", 4 },
	{ "delta_ints", 0, "a5.tdb", "delta", "uint32", 4 },
	{ "delta_ints", 0, "a6.tdb", "delta", "int64", 8 },
	{ "delta_ints", 0, "a7.tdb", "delta", "uint64", 8 },
	{ "delta_noise", 0, "a0.tdb", "delta", "int64", 8 },
	{ "delta_noise", 0, "a1.tdb", "delta", "uint32", 4 },
	{ "delta_float_reinterpret", 0, "a0.tdb", "delta(reinterpret=int32)", "float32", 4 },
	{ "delta_float_reinterpret", 0, "a1.tdb", "delta(reinterpret=int64)", "float64", 8 },
	{ "delta_float_reinterpret", 0, "a2.tdb", "delta(reinterpret=int32)", "int64", 8 },
	{ "chain_delta_zstd", 0, "a0.tdb", "delta | zstd(level=-1)", "int64", 8 },
	{ "chain_delta_zstd", 0, "a1.tdb", "delta | zstd(level=-1)", "int32", 4 },
	{ "double_delta_ints", 0, "a0.tdb", "double_delta", "int8", 1 },
	{ "double_delta_ints", 0, "a1.tdb", "double_delta", "uint8", 1 },
	{ "double_delta_ints", 0, "a2.tdb", "double_delta", "int16", 2 },
	{ "double_delta_ints", 0, "a3.tdb", "double_delta", "uint16", 2 },
	{ "double_delta_ints", 0, "a4.tdb", "double_delta", "int32", 4 },
	{ "double_delta_ints", 0, "a5.tdb", "double_delta", "uint32", 4 },
	{ "double_delta_ints", 0, "a6.tdb", "double_delta", "int64", 8 },
	{ "double_delta_ints", 0, "a7.tdb", "double_delta", "uint64", 8 },
	{ "double_delta_noise", 0, "a0.tdb", "double_delta", "int32", 4 },
	{ "double_delta_noise", 0, "a1.tdb", "double_delta", "uint32", 4 },
	{ "double_delta_noise", 0, "a2.tdb", "double_delta", "int16", 2 },
	{ "double_delta_noise", 0, "a3.tdb", "double_delta", "uint8", 1 },
	{ "double_delta_ramp", 0, "a0.tdb", "double_delta", "int32", 4 },
	{ "double_delta_ramp", 0, "a1.tdb", "double_delta", "uint64", 8 },
	{ "double_delta_ramp", 0, "a2.tdb", "double_delta", "int8", 1 },
	{ "double_delta_float_reinterpret", 0, "a0.tdb", "double_delta(reinterpret=int32)", "float32", 4 },
	{ "double_delta_float_reinterpret", 0, "a1.tdb", "double_delta(reinterpret=int64)", "float64", 8 },
	{ "double_delta_float_reinterpret", 0, "a2.tdb", "double_delta(reinterpret=uint64)", "float64", 8 },
	{ "chain_double_delta_gzip", 0, "a0.tdb", "double_delta | gzip(level=-1)", "int64", 8 },
	{ "chain_double_delta_gzip", 0, "a1.tdb", "double_delta | gzip(level=-1)", "uint64", 8 },
	{ "bwr_ints", 0, "a0.tdb", "bit_width_reduction(window=256)", "int8", 1 },
	{ "bwr_ints", 0, "a1.tdb", "bit_width_reduction(window=256)", "uint8", 1 },
	{ "bwr_ints", 0, "a2.tdb", "bit_width_reduction(window=256)", "int16", 2 },
	{ "bwr_ints", 0, "a3.tdb", "bit_width_reduction(window=256)", "uint16", 2 },
	{ "bwr_ints", 0, "a4.tdb", "bit_width_reduction(window=256)", "int32", 4 },
	{ "bwr_ints", 0, "a5.tdb", "bit_width_reduction(window=256)", "uint32", 4 },
	{ "bwr_ints", 0, "a6.tdb", "bit_width_reduction(window=256)", "int64", 8 },
	{ "bwr_ints", 0, "a7.tdb", "bit_width_reduction(window=256)", "uint64", 8 },
	{ "bwr_window64", 0, "a0.tdb", "bit_width_reduction(window=64)", "int32", 4 },
	{ "bwr_window64", 0, "a1.tdb", "bit_width_reduction(window=64)", "int64", 8 },
	{ "bwr_window64", 0, "a2.tdb", "bit_width_reduction(window=64)", "uint16", 2 },
	{ "chain_bwr_zstd", 0, "a0.tdb", "bit_width_reduction(window=256) | zstd(level=-1)", "int32", 4 },
	{ "chain_bwr_zstd", 0, "a1.tdb", "bit_width_reduction(window=256) | zstd(level=-1)", "int64", 8 },
	{ "positive_delta_ints", 0, "a0.tdb", "positive_delta(window=1024)", "int8", 1 },
	{ "positive_delta_ints", 0, "a1.tdb", "positive_delta(window=1024)", "uint8", 1 },
	{ "positive_delta_ints", 0, "a2.tdb", "positive_delta(window=1024)", "int16", 2 },
	{ "positive_delta_ints", 0, "a3.tdb", "positive_delta(window=1024)", "uint16", 2 },
	{ "positive_delta_ints", 0, "a4.tdb", "positive_delta(window=1024)", "int32", 4 },
	{ "positive_delta_ints", 0, "a5.tdb", "positive_delta(window=1024)", "uint32", 4 },
	{ "positive_delta_ints", 0, "a6.tdb", "positive_delta(window=1024)", "int64", 8 },
	{ "positive_delta_ints", 0, "a7.tdb", "positive_delta(window=1024)", "uint64", 8 },
	{ "bitshuffle_alltypes", 0, "a0.tdb", "bitshuffle", "int8", 1 },
	{ "bitshuffle_alltypes", 0, "a1.tdb", "bitshuffle", "uint8", 1 },
	{ "bitshuffle_alltypes", 0, "a2.tdb", "bitshuffle", "int16", 2 },
	{ "bitshuffle_alltypes", 0, "a3.tdb", "bitshuffle", "uint16", 2 },
	{ "bitshuffle_alltypes", 0, "a4.tdb", "bitshuffle", "int32", 4 },
	{ "bitshuffle_alltypes", 0, "a5.tdb", "bitshuffle", "uint32", 4 },
	{ "bitshuffle_alltypes", 0, "a6.tdb", "bitshuffle", "int64", 8 },
	{ "bitshuffle_alltypes", 0, "a7.tdb", "bitshuffle", "uint64", 8 },
	{ "bitshuffle_alltypes", 0, "a8.tdb", "bitshuffle", "float32", 4 },
	{ "bitshuffle_alltypes", 0, "a9.tdb", "bitshuffle", "float64", 8 },
	{ "bitshuffle_oddsize", 0, "a0.tdb", "bitshuffle", "int32", 4 },
	{ "bitshuffle_oddsize", 0, "a1.tdb", "bitshuffle", "int16", 2 },
	{ "bitshuffle_oddsize", 0, "a2.tdb", "bitshuffle", "float64", 8 },
	{ "chain_bitshuffle_lz4", 0, "a0.tdb", "bitshuffle | lz4(level=-1)", "int32", 4 },
	{ "chain_bitshuffle_lz4", 0, "a1.tdb", "bitshuffle | lz4(level=-1)", "float32", 4 },
	{ "chain_bitshuffle_lz4", 0, "a2.tdb", "bitshuffle | lz4(level=-1)", "int64", 8 },
	{ "chunks_bigtile_bitshuffle_zstd", 0, "a0.tdb", "bitshuffle | zstd(level=-1)", "float64", 8 },
	{ "byteshuffle_alltypes", 0, "a0.tdb", "byteshuffle", "int8", 1 },
	{ "byteshuffle_alltypes", 0, "a1.tdb", "byteshuffle", "uint8", 1 },
	{ "byteshuffle_alltypes", 0, "a2.tdb", "byteshuffle", "int16", 2 },
	{ "byteshuffle_alltypes", 0, "a3.tdb", "byteshuffle", "uint16", 2 },
	{ "byteshuffle_alltypes", 0, "a4.tdb", "byteshuffle", "int32", 4 },
	{ "byteshuffle_alltypes", 0, "a5.tdb", "byteshuffle", "uint32", 4 },
	{ "byteshuffle_alltypes", 0, "a6.tdb", "byteshuffle", "int64", 8 },
	{ "byteshuffle_alltypes", 0, "a7.tdb", "byteshuffle", "uint64", 8 },
	{ "byteshuffle_alltypes", 0, "a8.tdb", "byteshuffle", "float32", 4 },
	{ "byteshuffle_alltypes", 0, "a9.tdb", "byteshuffle", "float64", 8 },
	{ "chain_byteshuffle_zstd", 0, "a0.tdb", "byteshuffle | zstd(level=-1)", "float64", 8 },
	{ "chain_byteshuffle_zstd", 0, "a1.tdb", "byteshuffle | zstd(level=-1)", "int32", 4 },
	{ "chain_byteshuffle_zstd", 0, "a2.tdb", "byteshuffle | zstd(level=-1)", "uint16", 2 },
	{ "chunks_bigtile_byteshuffle_lz4", 0, "a0.tdb", "byteshuffle | lz4(level=-1)", "float64", 8 },
	{ "xor_alltypes", 0, "a0.tdb", "xor", "int8", 1 },
	{ "xor_alltypes", 0, "a1.tdb", "xor", "uint8", 1 },
	{ "xor_alltypes", 0, "a2.tdb", "xor", "int16", 2 },
	{ "xor_alltypes", 0, "a3.tdb", "xor", "uint16", 2 },
	{ "xor_alltypes", 0, "a4.tdb", "xor", "int32", 4 },
	{ "xor_alltypes", 0, "a5.tdb", "xor", "uint32", 4 },
	{ "xor_alltypes", 0, "a6.tdb", "xor", "int64", 8 },
	{ "xor_alltypes", 0, "a7.tdb", "xor", "uint64", 8 },
	{ "xor_alltypes", 0, "a8.tdb", "xor", "float32", 4 },
	{ "xor_alltypes", 0, "a9.tdb", "xor", "float64", 8 },
	{ "scale_float_widths", 0, "a0.tdb", "scale_float(scale=1, offset=-20, byte_width=1)", "float64", 8 },
	{ "scale_float_widths", 0, "a1.tdb", "scale_float(scale=0.25, offset=-100, byte_width=2)", "float64", 8 },
	{ "scale_float_widths", 0, "a2.tdb", "scale_float(scale=0.25, offset=-100, byte_width=4)", "float64", 8 },
	{ "scale_float_widths", 0, "a3.tdb", "scale_float(scale=0.25, offset=-100, byte_width=8)", "float64", 8 },
	{ "scale_float_widths", 0, "a4.tdb", "scale_float(scale=0.25, offset=-100, byte_width=2)", "float32", 4 },
	{ "scale_float_widths", 0, "a5.tdb", "scale_float(scale=0.5, offset=3, byte_width=4)", "float32", 4 },
	{ "chain_scale_float_xor_zstd", 0, "a0.tdb",
	  "scale_float(scale=0.25, offset=-100, byte_width=4) | xor | zstd(level=-1)", "float64", 8 },
	{ "chain_scale_float_xor_zstd", 0, "a1.tdb",
	  "scale_float(scale=0.25, offset=-100, byte_width=2) | xor | zstd(level=-1)", "float32", 4 },
	{ "chain_long6_int", 0, "a0.tdb", "positive_delta(window=1024) | bit_width_reduction(window=256) | "
	  "byteshuffle | xor | zstd(level=-1) | checksum_sha256", "int64", 8 },
	{ "chain_long6_int", 0, "a1.tdb", "positive_delta(window=1024) | bit_width_reduction(window=256) | "
	  "byteshuffle | xor | zstd(level=-1) | checksum_sha256", "uint32", 4 },
	{ "str_offsets_double_delta", 0, "a0.tdb", "double_delta", "uint64", 8 },
	{ "extra/datetime_bwr_pd", 0, "a0.tdb", "bit_width_reduction(window=256)", "datetime_ms", 8 },
	{ "extra/datetime_bwr_pd", 0, "a1.tdb", "positive_delta(window=1024)", "time_ns", 8 },
	{ "extra/datetime_bwr_pd", 0, "a2.tdb", "double_delta", "datetime_us", 8 },
	{ "extra/datetime_bwr_pd", 0, "a3.tdb", "delta | zstd(level=-1)", "datetime_sec", 8 },
	{ "extra/datetime_bwr_pd", 0, "a4.tdb",
	  "positive_delta(window=1024) | bit_width_reduction(window=256) | zstd(level=-1)", "time_ms", 8 },
	{ "extra/datetime_bwr_pd", 0, "a5.tdb", "byteshuffle | lz4(level=-1)", "datetime_ns", 8 },
	{ "dense_2d", 0, "a1.tdb", "byteshuffle | lz4(level=-1)", "float64", 8 },
	{ "multifrag_sparse", 0, "a0.tdb", "xor | gzip(level=-1)", "float32", 4 },
	{ "multifrag_sparse", 0, "d0.tdb", "positive_delta(window=1024) | zstd(level=-1)", "int64", 8 },
	{ "multifrag_sparse", 1, "a0.tdb", "xor | gzip(level=-1)", "float32", 4 },
	{ "multifrag_sparse", 1, "d0.tdb", "positive_delta(window=1024) | zstd(level=-1)", "int64", 8 },
};

static tf_chunk_env corpus_env(const corpus_file *c)
{
	tf_chunk_env env = { .type = dtype(c->type), .cell_size = c->cell_size, .version = 22 };

	return env;
}

START_TEST(test_corpus_decode)
{
	const corpus_file *c = &corpus[_i];
	tf_chunk_env env = corpus_env(c);

	tf_test_corpus_check(c->name, c->frag, c->file, c->spec, &env);
}
END_TEST

/* Read the stored file and its expected unfiltered bytes; false if absent. */
static bool corpus_read(const corpus_file *c, uint8_t **file, size_t *n, uint8_t **want, size_t *wn)
{
	const char *root = tf_test_corpus();
	char path[4096];
	glob_t g;

	if (!root)
		return false;
	snprintf(path, sizeof(path), "%s/%s/array/__fragments/*/%s", root, c->name, c->file);
	ck_assert_msg(glob(path, 0, NULL, &g) == 0 && g.gl_pathc > c->frag, "no %s", path);
	*file = tf_test_read_file(g.gl_pathv[c->frag], n);
	globfree(&g);
	snprintf(path, sizeof(path), "%s/%s/expected/unfiltered/f%u/%s.bin", root, c->name, c->frag,
		 c->file);
	*want = tf_test_read_file(path, wn);
	return true;
}

/*
 * Encoders must write what TileDB writes: re-encode every chunk of the
 * file from its unfiltered bytes and compare with the stored chunk.  Only
 * pipelines of deterministic filters take part: a codec library other than
 * the writer's may legitimately compress differently.
 */
static void check_reencode(const corpus_file *c)
{
	tf_chunk_env env = corpus_env(c);
	uint8_t *file, *want;
	size_t n, wn, pos = 0, dpos = 0;

	if (!corpus_read(c, &file, &n, &want, &wn))
		return;
	while (pos < n) {
		uint64_t nchunks = tf_le64(file + pos);

		for (pos += 8; nchunks-- > 0;) {
			tf_chunk_header h;
			tf_buf chunk;
			tf_error err = { 0 };

			ck_assert_uint_le(pos + TF_CHUNK_HEADER_SIZE, n);
			tf_chunk_header_read(file + pos, &h);
			ck_assert_uint_le(dpos + h.orig_len, wn);
			ck_assert_msg(encode_chunk(c->spec, &env, want + dpos, h.orig_len, &chunk,
						   &err) == TF_OK, "%s/%s: %s", c->name, c->file, err.msg);
			ck_assert_msg(chunk.len == tf_chunk_stored_size(&h) &&
				      memcmp(chunk.p, file + pos, chunk.len) == 0,
				      "%s/%s: chunk at %zu re-encodes differently", c->name, c->file, pos);
			tf_buf_free(&chunk);
			pos += tf_chunk_stored_size(&h);
			dpos += h.orig_len;
		}
	}
	ck_assert_uint_eq(dpos, wn);
	free(file);
	free(want);
}

START_TEST(test_corpus_reencode)
{
	const corpus_file *c = &corpus[_i];

	if (!strstr(c->spec, "zstd") && !strstr(c->spec, "gzip") && !strstr(c->spec, "lz4"))
		check_reencode(c);
}
END_TEST

/* ---- layouts checked by hand ------------------------------------------------------------- */

/* Metadata and data of a stored chunk. */
static void chunk_parts(const tf_buf *chunk, tf_span *md, tf_span *data)
{
	tf_chunk_header h;

	tf_chunk_header_read(chunk->p, &h);
	ck_assert_uint_eq(chunk->len, tf_chunk_stored_size(&h));
	*md = tf_span_of(chunk->p + TF_CHUNK_HEADER_SIZE, h.md_len);
	*data = tf_span_of(chunk->p + TF_CHUNK_HEADER_SIZE + h.md_len, h.filtered_len);
}

static void expect_encoding(const char *spec, tf_datatype t, uint32_t version, const void *in,
			    size_t n, const void *md, size_t md_n, const void *data, size_t data_n)
{
	tf_chunk_env env = env_of(t, version);
	tf_buf chunk;
	tf_span m, d;
	tf_error err = { 0 };

	ck_assert_msg(encode_chunk(spec, &env, in, n, &chunk, &err) == TF_OK, "%s", err.msg);
	chunk_parts(&chunk, &m, &d);
	ck_assert_msg(m.n == md_n && (md_n == 0 || memcmp(m.p, md, md_n) == 0),
		      "%s: metadata of %zu bytes differs", spec, m.n);
	ck_assert_msg(d.n == data_n && (data_n == 0 || memcmp(d.p, data, data_n) == 0),
		      "%s: data of %zu bytes differs", spec, d.n);
	tf_buf_free(&chunk);
}

/* expect_encoding, plus the way back. */
static void expect_lossless(const char *spec, tf_datatype t, const void *in, size_t n,
			    const void *md, size_t md_n, const void *data, size_t data_n)
{
	tf_chunk_env env = env_of(t, 22);
	tf_pipeline *p = parse(spec);

	expect_encoding(spec, t, 22, in, n, md, md_n, data, data_n);
	tf_test_roundtrip_env(p, &env, in, n);
	tf_pipeline_free(p);
}

/* §4.9: B from |x1 - x0| and every |dd|, sign bit then B bits, MSB first. */
START_TEST(test_double_delta_layout)
{
	static const int32_t one[] = { -5 }, ramp[] = { 1, 2, 4, 7, 9 };
	static const uint8_t md1[] = { 0, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 13, 0, 0, 0 };
	static const uint8_t d1[] = { 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xfb, 0xff, 0xff, 0xff };
	/* deltas 1 2 3 2, dd +1 +1 -1: B = 1, records 01 01 11 */
	static const uint8_t md2[] = { 0, 0, 0, 0, 1, 0, 0, 0, 20, 0, 0, 0, 25, 0, 0, 0 };
	static const uint8_t d2[] = { 1, 5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0,
				      0, 0, 0, 0, 0, 0, 0, 0x5c };
	/* int8: dd = -300 needs B = 9 >= 7, so the part is stored raw */
	static const int8_t jump[] = { 0, 100, -100 };
	static const uint8_t md3[] = { 0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 12, 0, 0, 0 };
	static const uint8_t d3[] = { 9, 3, 0, 0, 0, 0, 0, 0, 0, 0, 100, 0x9c };

	expect_lossless("double_delta", TF_DT_INT32, one, sizeof(one), md1, sizeof(md1), d1, sizeof(d1));
	expect_lossless("double_delta", TF_DT_INT32, ramp, sizeof(ramp), md2, sizeof(md2), d2, sizeof(d2));
	/* strings are uint8 values: deltas 1 1 2, dd 0 +1: B = 1, records 00 01 */
	static const uint8_t str[] = { 1, 2, 3, 5 };
	static const uint8_t md4[] = { 0, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 19, 0, 0, 0 };
	static const uint8_t d4[] = { 1, 4, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0x10 };

	expect_lossless("double_delta", TF_DT_INT8, jump, sizeof(jump), md3, sizeof(md3), d3, sizeof(d3));
	expect_lossless("double_delta", TF_DT_STRING_UCS2, str, 4, md4, sizeof(md4), d4, sizeof(d4));
}
END_TEST

/* Records straddling words: B = 40 for 70 values, against a bit-by-bit
 * packer written from §4.9. */
START_TEST(test_double_delta_records)
{
	enum { N = 70, B = 40 };
	int64_t v[N];
	uint8_t want[9 + 16 + 8 * ((N - 2) * (B + 1) / 64 + 1)] = { 0 };
	size_t bit = 0;
	tf_chunk_env env = env_of(TF_DT_INT64, 22);
	tf_buf chunk;
	tf_span md, d;
	tf_error err;

	v[0] = 3, v[1] = -7;
	for (int i = 2; i < N; i++)	/* dd alternates between +-(2^39 + i) */
		v[i] = 2 * v[i - 1] - v[i - 2] + ((i & 1) ? -1 : 1) * (((int64_t)1 << 39) + i);
	want[0] = B;
	tf_put_le64(want + 1, N);
	memcpy(want + 9, v, 16);
	for (int i = 2; i < N; i++) {
		int64_t dd = (v[i] - v[i - 1]) - (v[i - 1] - v[i - 2]);
		uint64_t rec = (uint64_t)(dd < 0) << B | (uint64_t)(dd < 0 ? -dd : dd);

		for (int k = B; k >= 0; k--, bit++) {	/* word w, bit 63 - bit % 64 */
			uint8_t *word = want + 25 + 8 * (bit / 64);
			unsigned at = 63 - bit % 64;

			word[at / 8] |= (uint8_t)(((rec >> k) & 1) << (at % 8));
		}
	}
	ck_assert(encode_chunk("double_delta", &env, (uint8_t *)v, sizeof(v), &chunk, &err) == TF_OK);
	chunk_parts(&chunk, &md, &d);
	ck_assert_uint_eq(d.n, 25 + 8 * ((bit + 63) / 64));
	ck_assert(memcmp(d.p, want, d.n) == 0);
	tf_buf_free(&chunk);
	tf_test_roundtrip("double_delta", TF_DT_INT64, 8, (uint8_t *)v, sizeof(v));
}
END_TEST

/* §4.10: u64 n, x0, deltas truncated to the width. */
START_TEST(test_delta_layout)
{
	static const uint16_t v[] = { 10, 7, 65535, 2 };
	static const uint8_t md[] = { 0, 0, 0, 0, 1, 0, 0, 0, 8, 0, 0, 0, 16, 0, 0, 0 };
	static const uint8_t d[] = { 4, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0xfd, 0xff, 0xf8, 0xff, 3, 0 };

	/* every string type is coded as uint8, whatever its character width */
	static const uint8_t s[] = { 1, 2, 3, 5 };
	static const uint8_t mds[] = { 0, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 12, 0, 0, 0 };
	static const uint8_t ds[] = { 4, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 2 };

	expect_lossless("delta", TF_DT_UINT16, v, sizeof(v), md, sizeof(md), d, sizeof(d));
	expect_lossless("delta", TF_DT_STRING_UTF16, s, 4, mds, sizeof(mds), ds, sizeof(ds));
	expect_lossless("delta", TF_DT_STRING_UCS4, s, 4, mds, sizeof(mds), ds, sizeof(ds));
}
END_TEST

/* §4.11: per window min, bits, ORIGINAL byte count; values narrowed with
 * T's signedness; raw when the range needs the full width. */
START_TEST(test_bwr_layout)
{
	static const int32_t v[] = { 1000, 1200, -3, 70000, 70001 };
	static const uint8_t md[] = {
		20, 0, 0, 0, 3, 0, 0, 0,
		0xe8, 0x03, 0, 0, 16, 8, 0, 0, 0,	/* range 200: int16 */
		0xfd, 0xff, 0xff, 0xff, 32, 8, 0, 0, 0,	/* range 70003: raw */
		0x71, 0x11, 0x01, 0x00, 8, 4, 0, 0, 0,	/* one value: range 0 */
	};
	static const uint8_t d[] = { 0, 0, 200, 0, 0xfd, 0xff, 0xff, 0xff, 0x70, 0x11, 0x01, 0, 0 };
	/* unsigned: range + 1 = 255 fits 8 bits, 256 does not; signed: 127 / 128 */
	static const uint16_t u8ok[] = { 0, 254 }, u8no[] = { 0, 255 };
	static const int16_t s8ok[] = { 0, 126 }, s8no[] = { 0, 127 };
	static const uint8_t mdu[] = { 4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 8, 4, 0, 0, 0 };
	static const uint8_t mdr[] = { 4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 16, 4, 0, 0, 0 };
	static const uint8_t du[] = { 0, 254 }, dr[] = { 0, 0, 255, 0 }, ds[] = { 0, 126 };
	static const uint8_t dsr[] = { 0, 0, 127, 0 };

	expect_lossless("bit_width_reduction(window=8)", TF_DT_INT32, v, sizeof(v), md, sizeof(md),
			d, sizeof(d));
	expect_lossless("bwr", TF_DT_UINT16, u8ok, 4, mdu, sizeof(mdu), du, 2);
	expect_lossless("bwr", TF_DT_UINT16, u8no, 4, mdr, sizeof(mdr), dr, 4);
	expect_lossless("bwr", TF_DT_INT16, s8ok, 4, mdu, sizeof(mdu), ds, 2);
	expect_lossless("bwr", TF_DT_INT16, s8no, 4, mdr, sizeof(mdr), dsr, 4);
}
END_TEST

/* §4.12: per window first value and byte count; deltas from x_0. */
START_TEST(test_positive_delta_layout)
{
	static const int16_t v[] = { 5, 9, 9, 20, 30 };
	static const uint8_t md[] = { 3, 0, 0, 0, 5, 0, 4, 0, 0, 0, 9, 0, 4, 0, 0, 0,
				      30, 0, 2, 0, 0, 0 };
	static const uint8_t d[] = { 0, 0, 4, 0, 0, 0, 11, 0, 0, 0 };
	/* 1-byte types are coded too, unlike bit width reduction */
	static const uint8_t b[] = { 1, 2, 200 }, mdb[] = { 1, 0, 0, 0, 1, 3, 0, 0, 0 };
	static const uint8_t db[] = { 0, 1, 198 };

	expect_lossless("positive_delta(window=4)", TF_DT_INT16, v, sizeof(v), md, sizeof(md), d,
			sizeof(d));
	expect_lossless("positive_delta", TF_DT_UINT8, b, 3, mdb, sizeof(mdb), db, 3);
}
END_TEST

/* §10 #7: no header at all where BWR / POSITIVE_DELTA do not apply;
 * date/time types count only from format 20 on. */
START_TEST(test_window_filters_pass_through)
{
	static const uint8_t v[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
	static const int64_t ms[] = { 1000, 1005 };
	static const uint8_t md[] = { 16, 0, 0, 0, 1, 0, 0, 0, 0xe8, 3, 0, 0, 0, 0, 0, 0, 8, 16, 0,
				      0, 0 };
	static const uint8_t dw[] = { 0, 5 };
	static const char *const bwr_raw[] = { "int8", "uint8", "bool", "blob", "char",
					       "float32", "float64", "string_ascii", "any" };
	static const char *const pd_raw[] = { "char", "float32", "float64", "string_utf8",
					      "string_ucs4", "any" };

	for (size_t i = 0; i < ARRAY_SIZE(bwr_raw); i++)
		expect_encoding("bwr", dtype(bwr_raw[i]), 22, v, 16, NULL, 0, v, 16);
	for (size_t i = 0; i < ARRAY_SIZE(pd_raw); i++)
		expect_encoding("positive_delta", dtype(pd_raw[i]), 22, v, 16, NULL, 0, v, 16);
	expect_encoding("bwr", dtype("datetime_ms"), 19, v, 16, NULL, 0, v, 16);
	expect_encoding("positive_delta", dtype("time_ns"), 19, v, 16, NULL, 0, v, 16);
	expect_encoding("bwr", dtype("datetime_ms"), 20, ms, 16, md, sizeof(md), dw, 2);
}
END_TEST

/* §3.5 worked layouts: a compression filter after a shuffle frames the
 * shuffle header as its metadata part (bitshuffle: 12 bytes with a tail). */
START_TEST(test_shuffle_then_codec_layout)
{
	uint8_t *in = tf_test_data(1001, TF_GEN_WALK, 4, 1);
	tf_chunk_env env = env_of(TF_DT_INT32, 22);
	tf_buf chunk;
	tf_span md, d;
	tf_error err;

	ck_assert(encode_chunk("byteshuffle | zstd", &env, in, 1001, &chunk, &err) == TF_OK);
	chunk_parts(&chunk, &md, &d);
	ck_assert_uint_eq(md.n, 24);
	ck_assert_uint_eq(tf_le32(md.p), 1);
	ck_assert_uint_eq(tf_le32(md.p + 4), 1);
	ck_assert_uint_eq(tf_le32(md.p + 8), 8);
	ck_assert_uint_eq(tf_le32(md.p + 16), 1001);
	tf_buf_free(&chunk);
	ck_assert(encode_chunk("bitshuffle | lz4", &env, in, 1001, &chunk, &err) == TF_OK);
	chunk_parts(&chunk, &md, &d);
	ck_assert_uint_eq(md.n, 24);
	ck_assert_uint_eq(tf_le32(md.p + 8), 12);	/* u32 2, u32 1000, u32 1 */
	ck_assert_uint_eq(tf_le32(md.p + 16), 1001);
	tf_buf_free(&chunk);
	free(in);
}
END_TEST

/* ---- shuffles and xor against reference implementations ------------------------------- */

/* Bitshuffle as §4.13 defines it, one bit at a time. */
static void ref_bitshuffle(const uint8_t *in, uint8_t *out, size_t len, unsigned es)
{
	size_t aligned = len - len % 8;

	memcpy(out, in, len);
	if (aligned % es)
		return;
	for (size_t off = 0, blk; off < aligned; off += blk) {
		size_t m;

		blk = aligned - off < 8192 ? aligned - off : 8192;
		m = blk / es / 8 * 8;
		memset(out + off, 0, m * es);
		for (size_t p = 0; p < 8 * es; p++)
			for (size_t e = 0; e < m; e++) {
				unsigned bit = in[off + e * es + p / 8] >> (p % 8) & 1;
				size_t at = p * m + e;

				out[off + at / 8] |= (uint8_t)(bit << (at % 8));
			}
	}
}

static void ref_byteshuffle(const uint8_t *in, uint8_t *out, size_t len, unsigned es)
{
	size_t n = len / es;

	memcpy(out, in, len);
	for (size_t i = 0; i < n; i++)
		for (unsigned j = 0; j < es; j++)
			out[j * n + i] = in[i * es + j];
}

static void ref_xor(const uint8_t *in, uint8_t *out, size_t len, unsigned es)
{
	memcpy(out, in, len);
	for (size_t i = es; i < len / es * es; i++)
		out[i] = in[i] ^ in[i - es];
}

typedef void (*ref_fn)(const uint8_t *in, uint8_t *out, size_t len, unsigned es);

/* The data the one-filter pipeline stores must be the reference output. */
static void check_against(const char *spec, ref_fn ref, tf_datatype t, size_t len, uint64_t seed)
{
	tf_chunk_env env = env_of(t, 22);
	uint8_t *in = tf_test_data(len, TF_GEN_RANDOM, 1, seed), *want = malloc(len + 1);
	tf_buf chunk;
	tf_span md, d;
	tf_error err = { 0 };

	ck_assert_ptr_nonnull(want);
	ref(in, want, len, tf_datatype_size(t));
	ck_assert_msg(encode_chunk(spec, &env, in, len, &chunk, &err) == TF_OK, "%s", err.msg);
	chunk_parts(&chunk, &md, &d);
	ck_assert_msg(d.n == len && (len == 0 || memcmp(d.p, want, len) == 0),
		      "%s on %s, %zu bytes: differs from the reference", spec, tf_datatype_name(t), len);
	tf_buf_free(&chunk);
	tf_test_roundtrip(spec, t, tf_datatype_size(t), in, len);
	free(in);
	free(want);
}

static const size_t ref_sizes[] = {
	0, 1, 7, 8, 16, 24, 40, 64, 72, 100, 136, 1000, 8192, 8192 + 24, 8192 + 36,
	3 * 8192 + 40, 65536, 65536 + 13, 65560,
};

START_TEST(test_shuffles_match_reference)
{
	static const tf_datatype types[] = { TF_DT_INT8, TF_DT_INT16, TF_DT_INT32, TF_DT_FLOAT64 };

	for (size_t t = 0; t < ARRAY_SIZE(types); t++)
		for (size_t i = 0; i < ARRAY_SIZE(ref_sizes); i++) {
			check_against("bitshuffle", ref_bitshuffle, types[t], ref_sizes[i], i);
			check_against("byteshuffle", ref_byteshuffle, types[t], ref_sizes[i], i);
			check_against("xor", ref_xor, types[t], ref_sizes[i], i);
		}
}
END_TEST

/* ---- scale float ------------------------------------------------------------------------ */

/* §4.16: (x - offset) / scale in F, rounded half away from zero, then
 * converted as x86-64 does (out of range: INT_MIN of 32 or 64 bits). */
START_TEST(test_scale_float_encode)
{
	static const double x[] = { 2.5, -2.5, 0.49999999999999994, -0.5, 300, 1e10, 1e30 };
	static const uint8_t md1[] = { 1, 0, 0, 0, 7, 0, 0, 0 }, md4[] = { 1, 0, 0, 0, 28, 0, 0, 0 };
	static const uint8_t d1[] = { 3, 0xfd, 0, 0xff, 44, 0, 0 };
	static const uint8_t d4[] = { 3, 0, 0, 0, 0xfd, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff,
				      0xff, 0xff, 44, 1, 0, 0, 0, 0, 0, 0x80, 0, 0, 0, 0x80 };
	/* f32: 8388609 - 0.5 rounds to 8388608 in single precision (8388609 in double) */
	static const float f[] = { 8388609.0f };
	static const uint8_t mdf[] = { 1, 0, 0, 0, 4, 0, 0, 0 }, df[] = { 0, 0, 0x80, 0 };

	expect_encoding("scale_float(byte_width=1)", TF_DT_FLOAT64, 22, x, sizeof(x), md1,
			sizeof(md1), d1, sizeof(d1));
	expect_encoding("scale_float(byte_width=4)", TF_DT_FLOAT64, 22, x, sizeof(x), md4,
			sizeof(md4), d4, sizeof(d4));
	expect_encoding("scale_float(scale=1, offset=0.5, byte_width=4)", TF_DT_FLOAT32, 22, f,
			sizeof(f), mdf, sizeof(mdf), df, sizeof(df));
}
END_TEST

/* §4.16: back as (F)(scale * (double)(F)w + offset); for f32 the stored
 * integer is rounded to float first: 2^24 + 1 -> 2^24, + 0.4 -> 2^24. */
START_TEST(test_scale_float_decode)
{
	static const uint8_t chunk[] = {
		4, 0, 0, 0, 4, 0, 0, 0, 8, 0, 0, 0,	/* orig 4, data 4, md 8 */
		1, 0, 0, 0, 4, 0, 0, 0,
		1, 0, 0, 1,				/* 16777217 */
	};
	tf_chunk_env env = env_of(TF_DT_FLOAT32, 22);
	float want = 16777216.0f, got;
	uint8_t *out;
	tf_error err;

	ck_assert(decode_chunk("scale_float(scale=1, offset=0.4, byte_width=4)", &env, chunk,
			       sizeof(chunk), &out, &err) == TF_OK);
	memcpy(&got, out, 4);
	ck_assert(got == want);
	free(out);
}
END_TEST

/*
 * Several parts: TileDB stores them in reverse order and lists their
 * lengths in input order, which only round-trips for equal lengths
 * (§10 #14).  Our encoder lists the lengths in stored order, so unequal
 * parts survive; equal parts give TileDB's bytes.
 */
START_TEST(test_scale_float_parts)
{
	static const double a[] = { 1, 2, 3 }, b[] = { 4, 5, 6, 7, 8 };
	tf_filter_opts o;
	tf_stage st = { .type = TF_DT_FLOAT64, .limit = SIZE_MAX };
	tf_parts md, data;
	tf_buf out = TF_BUF_INIT(SIZE_MAX), mdo = TF_BUF_INIT(SIZE_MAX);
	tf_stream s;
	tf_error err;

	tf_filter_opts_default(&tf_filter_scale_float, &o);
	o.byte_width = 2;
	tf_parts_init(&md);
	tf_parts_init(&data);
	ck_assert(tf_parts_add_copy(&data, a, sizeof(a), &err) == TF_OK);
	ck_assert(tf_parts_add_copy(&data, b, sizeof(b), &err) == TF_OK);
	ck_assert(tf_filter_scale_float.encode(&o, &st, &md, &data, &err) == TF_OK);
	ck_assert_uint_eq(md.n, 1);
	ck_assert_uint_eq(md.v[0].len, 12);
	ck_assert_uint_eq(tf_le32(md.v[0].p + 4), 10);	/* b first */
	ck_assert_uint_eq(tf_le32(md.v[0].p + 8), 6);
	ck_assert_uint_eq(data.n, 1);
	ck_assert_uint_eq(tf_le16(data.v[0].p), 4);
	ck_assert_uint_eq(tf_le16(data.v[0].p + 10), 1);
	s = (tf_stream){ tf_span_of(md.v[0].p, md.v[0].len), tf_span_of(data.v[0].p, data.v[0].len),
			 &mdo, &out };
	ck_assert(tf_filter_scale_float.decode(&o, &st, &s, &err) == TF_OK);
	ck_assert_uint_eq(s.data.n, sizeof(a) + sizeof(b));
	ck_assert(memcmp(s.data.p, a, sizeof(a)) == 0);
	ck_assert(memcmp(s.data.p + sizeof(a), b, sizeof(b)) == 0);
	ck_assert_uint_eq(s.md.n, 0);
	tf_buf_free(&out);
	tf_buf_free(&mdo);
	tf_parts_free(&md);
	tf_parts_free(&data);
}
END_TEST

/* §2.4: the datatype each later filter sees. */
START_TEST(test_output_types)
{
	tf_pipeline *p = parse("scale_float(byte_width=2) | xor | delta(reinterpret=uint8) | "
			       "double_delta | bitshuffle");

	ck_assert_int_eq(tf_pipeline_type_at(p, 1, TF_DT_FLOAT64), TF_DT_INT16);
	ck_assert_int_eq(tf_pipeline_type_at(p, 2, TF_DT_FLOAT64), TF_DT_INT16);
	ck_assert_int_eq(tf_pipeline_type_at(p, 3, TF_DT_FLOAT64), TF_DT_UINT8);
	ck_assert_int_eq(tf_pipeline_type_at(p, 4, TF_DT_FLOAT64), TF_DT_UINT8);
	tf_pipeline_free(p);
	p = parse("xor | double_delta(reinterpret=int32) | positive_delta");
	ck_assert_int_eq(tf_pipeline_type_at(p, 1, TF_DT_FLOAT32), TF_DT_INT32);
	ck_assert_int_eq(tf_pipeline_type_at(p, 1, dtype("datetime_ns")), TF_DT_INT64);
	ck_assert_int_eq(tf_pipeline_type_at(p, 2, TF_DT_FLOAT64), TF_DT_INT32);
	tf_pipeline_free(p);
}
END_TEST

/* ---- round trips ------------------------------------------------------------------------ */

static const char *const every_type[] = {
	"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
	"float32", "float64", "char", "bool", "blob", "geom_wkb", "string_ascii",
	"string_utf16", "string_ucs4", "any", "datetime_ms", "time_ns",
};

static const size_t rt_sizes[] = { 0, 1, 3, 7, 8, 13, 64, 1000, 4096 + 5, 8192 + 24, 65536 + 13 };

/* Values 0 .. 99 that never decrease, whatever the width and signedness
 * (positive delta refuses anything else). */
static uint8_t *rising_data(size_t n, unsigned es)
{
	uint8_t *p = tf_test_data(n, TF_GEN_ZERO, es, 0);
	size_t count = n / es + 1;

	for (size_t i = 0; i * es < n; i++)
		p[i * es] = (uint8_t)(i * 100 / count);
	return p;
}

static bool is_float(tf_datatype t)
{
	return t == TF_DT_FLOAT32 || t == TF_DT_FLOAT64;
}

/* Round-trip spec over every type (skip: types it refuses), size and generator. */
static void roundtrip_all(const char *spec, bool floats_ok, bool rising, bool small_random)
{
	static const tf_gen gens[] = { TF_GEN_RANDOM, TF_GEN_WALK, TF_GEN_RUNS, TF_GEN_RAMP };

	for (size_t t = 0; t < ARRAY_SIZE(every_type); t++) {
		tf_datatype type = dtype(every_type[t]);
		unsigned es = tf_datatype_size(type);

		if (is_float(type) && !floats_ok)
			continue;
		for (size_t i = 0; i < ARRAY_SIZE(rt_sizes); i++)
			for (size_t g = 0; g < ARRAY_SIZE(gens); g++) {
				uint8_t *in;

				if ((gens[g] == TF_GEN_RANDOM && small_random && es == 8) ||
				    (rising && g > 0))
					continue;	/* deltas would leave int64; one set */
				in = rising ? rising_data(rt_sizes[i], es)
					    : tf_test_data(rt_sizes[i], gens[g], es, 7 * i + g);
				tf_test_roundtrip(spec, type, es, in, rt_sizes[i]);
				free(in);
			}
	}
}

START_TEST(test_roundtrip_shuffles_xor)
{
	roundtrip_all("bitshuffle", true, false, false);
	roundtrip_all("byteshuffle", true, false, false);
	roundtrip_all("xor", true, false, false);
}
END_TEST

START_TEST(test_roundtrip_windows)
{
	roundtrip_all("bit_width_reduction", true, false, false);
	roundtrip_all("bit_width_reduction(window=64)", true, false, false);
	roundtrip_all("bit_width_reduction(window=3)", true, false, false);
	roundtrip_all("positive_delta(window=64)", true, true, false);
	roundtrip_all("positive_delta(window=5)", true, true, false);
}
END_TEST

START_TEST(test_roundtrip_deltas)
{
	roundtrip_all("delta", false, false, false);
	roundtrip_all("delta(reinterpret=int16)", true, false, false);
	roundtrip_all("double_delta", false, false, true);
	roundtrip_all("double_delta(reinterpret=uint8)", true, false, false);
	roundtrip_all("double_delta(reinterpret=int32)", true, false, false);
}
END_TEST

/* Exact for multiples of 1/16 in [-5000, 7500): see TF_GEN_FLOATS. */
START_TEST(test_roundtrip_scale_float)
{
	static const char *const specs[] = {
		"scale_float(scale=0.0625, offset=-5000, byte_width=4)",
		"scale_float(scale=0.0625, offset=-5000, byte_width=8)",
		"scale_float(scale=0.0625, offset=-5000, byte_width=4) | xor | bitshuffle | lz4",
	};

	for (size_t s = 0; s < ARRAY_SIZE(specs); s++)
		for (unsigned fs = 4; fs <= 8; fs += 4)
			for (size_t i = 0; i < ARRAY_SIZE(rt_sizes); i++) {
				size_t n = rt_sizes[i] / fs * fs;
				uint8_t *in = tf_test_data(n, TF_GEN_FLOATS, fs, i);

				tf_test_roundtrip(specs[s], fs == 4 ? TF_DT_FLOAT32 : TF_DT_FLOAT64,
						  fs, in, n);
				free(in);
			}
}
END_TEST

/* Chains: earlier headers become metadata parts of the codecs after them,
 * including parts that are no whole number of values (bitshuffle's 12-byte
 * header through an int64 double delta). */
START_TEST(test_roundtrip_chains)
{
	static const struct { const char *spec, *type; tf_gen gen; bool rising; } chains[] = {
		/* zeros: bitshuffled int64 data would overflow double delta's int64 */
		{ "bitshuffle | double_delta", "int64", TF_GEN_ZERO, false },
		{ "bitshuffle | double_delta", "int16", TF_GEN_WALK, false },
		{ "bitshuffle | delta", "uint64", TF_GEN_WALK, false },
		{ "bit_width_reduction | delta | zstd", "int32", TF_GEN_WALK, false },
		{ "bit_width_reduction(window=64) | double_delta | gzip", "uint32", TF_GEN_WALK, false },
		{ "xor | bitshuffle | lz4", "float64", TF_GEN_FLOATS, false },
		{ "xor | gzip", "float32", TF_GEN_FLOATS, false },
		{ "xor | zstd", "int64", TF_GEN_WALK, false },
		{ "bitshuffle | lz4", "int32", TF_GEN_RUNS, false },
		{ "byteshuffle | bzip2", "int16", TF_GEN_WALK, false },
		{ "delta(reinterpret=int32) | bitshuffle | zstd", "float32", TF_GEN_FLOATS, false },
		{ "bitshuffle | xor | double_delta | zstd", "int32", TF_GEN_WALK, false },
		{ "byteshuffle | checksum_md5 | delta", "int64", TF_GEN_RANDOM, false },
		{ "positive_delta(window=64) | bit_width_reduction | byteshuffle | xor | zstd | "
		  "checksum_sha256", "int64", TF_GEN_ZERO, true },
		{ "positive_delta(window=64) | bit_width_reduction | byteshuffle | xor | zstd | "
		  "checksum_sha256", "uint32", TF_GEN_ZERO, true },
		{ "positive_delta(window=64) | double_delta | bitshuffle", "datetime_us", TF_GEN_ZERO, true },
	};

	for (size_t c = 0; c < ARRAY_SIZE(chains); c++) {
		tf_datatype t = dtype(chains[c].type);
		unsigned es = tf_datatype_size(t);

		for (size_t i = 0; i < ARRAY_SIZE(rt_sizes); i++) {
			size_t n = chains[c].gen == TF_GEN_FLOATS ? rt_sizes[i] / es * es : rt_sizes[i];
			uint8_t *in = chains[c].rising ? rising_data(n, es)
						       : tf_test_data(n, chains[c].gen, es, i);

			tf_test_roundtrip(chains[c].spec, t, es, in, n);
			free(in);
		}
	}
}
END_TEST

/* ---- errors ----------------------------------------------------------------------------- */

static void expect_encode_error(const char *spec, tf_datatype t, const uint8_t *in, size_t n,
				tf_status code, const char *needle)
{
	tf_chunk_env env = env_of(t, 22);
	tf_buf chunk;
	tf_error err = { 0 };

	ck_assert_int_eq(encode_chunk(spec, &env, in, n, &chunk, &err), code);
	ck_assert_msg(strstr(err.msg, needle), "%s: '%s' lacks '%s'", spec, err.msg, needle);
	tf_buf_free(&chunk);
}

START_TEST(test_encode_errors)
{
	static const int32_t down[] = { 1, 2, 3, 2 };
	uint8_t *rnd = tf_test_data(800, TF_GEN_RANDOM, 8, 5), v[8] = { 0 };
	tf_pipeline *p = NULL;
	tf_error err = { 0 };

	expect_encode_error("positive_delta", TF_DT_INT32, (const uint8_t *)down, sizeof(down),
			    TF_E_INVAL, "filter 0 (positive_delta): delta is not positive");
	expect_encode_error("double_delta", TF_DT_INT64, rnd, 800, TF_E_INVAL,
			    "delta exceeds the range of int64");
	expect_encode_error("double_delta", TF_DT_FLOAT64, v, 8, TF_E_INVAL,
			    "cannot double-delta-code float64 values");
	expect_encode_error("delta", TF_DT_FLOAT32, v, 8, TF_E_INVAL,
			    "cannot delta-code float32 values");
	tf_test_roundtrip("xor | delta", TF_DT_FLOAT32, 4, v, 8);	/* xor makes it int32 */
	free(rnd);
	ck_assert_int_eq(tf_pipeline_parse("scale_float(byte_width=3)", &p, &err), TF_E_INVAL);
	ck_assert_msg(strstr(err.msg, "byte_width must be 1, 2, 4 or 8, not 3"), "%s", err.msg);
}
END_TEST

/* A hand-made chunk: header, metadata, data. */
static void make_chunk(tf_buf *c, uint32_t orig, const void *md, size_t md_n, const void *data,
		       size_t data_n)
{
	tf_error err;

	tf_buf_init(c, SIZE_MAX);
	ck_assert(tf_buf_put_u32(c, orig, &err) == TF_OK);
	ck_assert(tf_buf_put_u32(c, (uint32_t)data_n, &err) == TF_OK);
	ck_assert(tf_buf_put_u32(c, (uint32_t)md_n, &err) == TF_OK);
	ck_assert(tf_buf_append(c, md, md_n, &err) == TF_OK);
	ck_assert(tf_buf_append(c, data, data_n, &err) == TF_OK);
}

static void expect_decode(const char *spec, tf_datatype t, const tf_buf *chunk, tf_status code,
			  const char *needle)
{
	tf_chunk_env env = env_of(t, 22);
	uint8_t *out;
	tf_error err = { 0 };

	ck_assert_int_eq(decode_chunk(spec, &env, chunk->p, chunk->len, &out, &err), code);
	ck_assert_msg(code == TF_OK || strstr(err.msg, needle), "%s: '%s' lacks '%s'", spec,
		      err.msg, needle);
	free(out);
}

/* What TileDB's codecs write for parts that are no whole number of values:
 * dropped trailing bytes cannot be decoded; the stray values written for
 * an empty part are ignored. */
START_TEST(test_delta_partial_parts)
{
	static const uint8_t md10[] = { 0, 0, 0, 0, 1, 0, 0, 0, 10, 0, 0, 0, 16, 0, 0, 0 };
	static const uint8_t lossy[] = { 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0 };
	static const uint8_t md0[] = { 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0, 0 };
	static const uint8_t empty[] = { 0, 0, 0, 0, 0, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef };
	static const uint8_t md0dd[] = { 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 13, 0, 0, 0 };
	static const uint8_t empty_dd[] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef };
	tf_buf c;

	make_chunk(&c, 10, md10, sizeof(md10), lossy, sizeof(lossy));
	expect_decode("delta", TF_DT_INT32, &c, TF_E_CORRUPT,
		      "filter 0 (delta): delta: data part 0: the last 2 bytes of the 10-byte part "
		      "were dropped by the encoder");
	tf_buf_free(&c);
	make_chunk(&c, 0, md0, sizeof(md0), empty, sizeof(empty));
	expect_decode("delta", TF_DT_INT32, &c, TF_OK, NULL);
	tf_buf_free(&c);
	make_chunk(&c, 0, md0dd, sizeof(md0dd), empty_dd, sizeof(empty_dd));
	expect_decode("double_delta", TF_DT_INT16, &c, TF_OK, NULL);
	tf_buf_free(&c);
}
END_TEST

/* Corrupt headers name what is wrong. */
START_TEST(test_decode_errors)
{
	static const int32_t v[] = { 1000, 1001 };
	tf_chunk_env env = env_of(TF_DT_INT32, 22);
	tf_buf c;
	tf_error err;

	ck_assert(encode_chunk("bwr", &env, (const uint8_t *)v, 8, &c, &err) == TF_OK);
	c.p[TF_CHUNK_HEADER_SIZE + 8 + 4] = 12;	/* the window's bits */
	expect_decode("bwr", TF_DT_INT32, &c, TF_E_CORRUPT,
		      "filter 0 (bit_width_reduction): window 0 has bit width 12");
	tf_buf_free(&c);
	ck_assert(encode_chunk("byteshuffle", &env, (const uint8_t *)v, 8, &c, &err) == TF_OK);
	tf_put_le32(c.p + TF_CHUNK_HEADER_SIZE + 4, 9);
	expect_decode("byteshuffle", TF_DT_INT32, &c, TF_E_CORRUPT,
		      "byteshuffle parts hold 9 bytes but the data has 8");
	tf_buf_free(&c);
	ck_assert(encode_chunk("double_delta", &env, (const uint8_t *)v, 8, &c, &err) == TF_OK);
	c.p[TF_CHUNK_HEADER_SIZE + 16 + 1] = 3;	/* n */
	expect_decode("double_delta", TF_DT_INT32, &c, TF_E_CORRUPT,
		      "3 values where a part of 8 bytes holds 2");
	tf_buf_free(&c);
	ck_assert(encode_chunk("positive_delta", &env, (const uint8_t *)v, 8, &c, &err) == TF_OK);
	c.len--;	/* the data loses a byte */
	tf_put_le32(c.p + 4, 7);
	expect_decode("positive_delta", TF_DT_INT32, &c, TF_E_CORRUPT,
		      "windows hold 8 bytes but the data has 7");
	tf_buf_free(&c);
}
END_TEST

/* ---- corrupt input ---------------------------------------------------------------------- */

/* Decode whatever the bytes claim; only a crash or sanitizer report fails. */
static void try_decode(const tf_pipeline *p, const tf_chunk_env *env, tf_workspace *ws,
		       const uint8_t *c, size_t n)
{
	size_t orig = n >= 4 ? tf_le32(c) : 0;
	uint8_t *copy = malloc(n ? n : 1), *dst;
	tf_error err;

	if (orig > ((size_t)4 << 20)) {	/* a flipped high bit of orig_len */
		free(copy);
		return;
	}
	dst = malloc(orig ? orig : 1);
	ck_assert(copy && dst);
	memcpy(copy, c, n);	/* exactly n bytes, so overreads are caught */
	(void)tf_chunk_decode(p, env, ws, tf_span_of(copy, n), dst, NULL, &err);
	free(dst);
	free(copy);
}

static void mangle(const char *spec, const char *type, size_t n, bool rising)
{
	tf_chunk_env env = env_of(dtype(type), 22);
	unsigned es = tf_datatype_size(env.type);
	uint8_t *in = rising ? rising_data(n, es) : tf_test_data(n, TF_GEN_WALK, es, n);
	tf_pipeline *p = parse(spec);
	tf_workspace *ws = tf_workspace_new();
	uint64_t seed = 0x1234 + n;
	tf_buf c;
	tf_error err;

	ck_assert_msg(encode_chunk(spec, &env, in, n, &c, &err) == TF_OK, "%s", err.msg);
	for (size_t len = 0; len < c.len; len++)
		try_decode(p, &env, ws, c.p, len);
	for (int k = 0; k < 2000; k++) {
		size_t bit;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		bit = (size_t)(seed >> 33) % (c.len * 8);
		c.p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		try_decode(p, &env, ws, c.p, c.len);
		c.p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	tf_buf_free(&c);
	tf_workspace_free(ws);
	tf_pipeline_free(p);
	free(in);
}

static const struct { const char *spec, *type; size_t n; bool rising; } mangled[] = {
	{ "delta", "int32", 1001, false },
	{ "double_delta", "int32", 1000, false },
	{ "double_delta", "int64", 800, false },
	{ "double_delta", "uint8", 300, false },
	{ "bit_width_reduction(window=64)", "int32", 1000, false },
	{ "bit_width_reduction(window=32)", "uint64", 800, false },
	{ "positive_delta(window=64)", "int16", 1000, true },
	{ "bitshuffle", "int32", 8192 + 100, false },
	{ "bitshuffle", "float64", 1003, false },
	{ "byteshuffle", "float64", 1003, false },
	{ "xor", "int16", 1001, false },
	{ "scale_float(scale=0.0625, offset=-5000, byte_width=2)", "float64", 800, false },
	{ "bitshuffle | double_delta | zstd", "int16", 1003, false },
	{ "bit_width_reduction | delta", "int32", 1000, false },
	{ "positive_delta | bit_width_reduction | byteshuffle | xor | zstd", "uint32", 1000, true },
};

START_TEST(test_corrupt_chunks)
{
	mangle(mangled[_i].spec, mangled[_i].type, mangled[_i].n, mangled[_i].rising);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("numeric");
	TCase *tc = tcase_create("corpus");

	if (tf_test_corpus()) {
		tcase_add_loop_test(tc, test_corpus_decode, 0, ARRAY_SIZE(corpus));
		tcase_add_loop_test(tc, test_corpus_reencode, 0, ARRAY_SIZE(corpus));
	} else {
		printf("corpus absent: skipping known-answer tests\n");
	}
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	tc = tcase_create("layout");
	tcase_add_test(tc, test_double_delta_layout);
	tcase_add_test(tc, test_double_delta_records);
	tcase_add_test(tc, test_delta_layout);
	tcase_add_test(tc, test_bwr_layout);
	tcase_add_test(tc, test_positive_delta_layout);
	tcase_add_test(tc, test_window_filters_pass_through);
	tcase_add_test(tc, test_shuffle_then_codec_layout);
	tcase_add_test(tc, test_shuffles_match_reference);
	tcase_add_test(tc, test_scale_float_encode);
	tcase_add_test(tc, test_scale_float_decode);
	tcase_add_test(tc, test_scale_float_parts);
	tcase_add_test(tc, test_output_types);
	suite_add_tcase(s, tc);
	tc = tcase_create("roundtrip");
	tcase_add_test(tc, test_roundtrip_shuffles_xor);
	tcase_add_test(tc, test_roundtrip_windows);
	tcase_add_test(tc, test_roundtrip_deltas);
	tcase_add_test(tc, test_roundtrip_scale_float);
	tcase_add_test(tc, test_roundtrip_chains);
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);
	tc = tcase_create("errors");
	tcase_add_test(tc, test_encode_errors);
	tcase_add_test(tc, test_delta_partial_parts);
	tcase_add_test(tc, test_decode_errors);
	tcase_add_loop_test(tc, test_corrupt_chunks, 0, ARRAY_SIZE(mangled));
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);
	return s;
}

TF_TEST_MAIN(suite)
