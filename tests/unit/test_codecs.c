/*
 * test_codecs.c - GZIP, LZ4, BZIP2, RLE (fixed and var-string paths) and
 * DICTIONARY: known answers from the TileDB-written corpus (decoded bytes,
 * rebuilt offsets, and our encoder reproducing TileDB's stored chunks),
 * round trips, exact small encodings, corruption and error messages.
 */
#include "tf_test.h"

#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "util/tf_keys.h"

/* ---- helpers ------------------------------------------------------------------- */

static tf_pipeline *parse(const char *spec)
{
	tf_pipeline *p = NULL;
	tf_error err = { 0 };

	ck_assert_msg(tf_pipeline_parse(spec, &p, &err) == TF_OK, "%s: %s", spec, err.msg);
	return p;
}

static tf_chunk_env env_of(tf_datatype type, uint32_t cell_size, bool var_string)
{
	tf_chunk_env env = { .type = type, .cell_size = cell_size, .version = 22,
			     .var_string = var_string };
	return env;
}

/* Encode one chunk; ck_asserts success.  The caller frees *chunk. */
static void encode_chunk(const char *spec, const tf_chunk_env *env, const uint8_t *in, size_t n,
			 const uint64_t *offs, size_t ncells, tf_buf *chunk)
{
	tf_pipeline *p = parse(spec);
	tf_workspace *ws = tf_workspace_new();
	tf_error err = { 0 };

	tf_buf_init(chunk, SIZE_MAX);
	ck_assert_msg(tf_pipeline_encode(p, env, ws, tf_span_of(in, n), offs, ncells, chunk, &err)
		      == TF_OK, "%s: encode: %s", spec, err.msg);
	tf_workspace_free(ws);
	tf_pipeline_free(p);
}

/* Decode one stored chunk into a buffer sized from its header (NULL when
 * the header claims more than `cap`); returns the status. */
static tf_status decode_chunk(const tf_pipeline *p, const tf_chunk_env *env, tf_workspace *ws,
			      tf_span stored, size_t cap, tf_buf *offsets, uint8_t **out,
			      tf_error *err)
{
	uint32_t orig = stored.n >= 4 ? tf_le32(stored.p) : 0;
	uint8_t *dst;
	tf_status rc;

	*out = NULL;
	if (orig > cap)
		return TF_E_NOMEM;
	dst = malloc(orig ? orig : 1);
	ck_assert_ptr_nonnull(dst);
	rc = tf_chunk_decode(p, env, ws, stored, dst, offsets, err);
	if (rc == TF_OK)
		*out = dst;
	else
		free(dst);
	return rc;
}

/* The path of `file` in fragment `frag` of a corpus case (malloc'd). */
static char *corpus_file(const char *case_name, unsigned frag, const char *file)
{
	char pattern[4096], *path;
	glob_t g;

	snprintf(pattern, sizeof(pattern), "%s/%s/array/__fragments/*/%s", tf_test_corpus(),
		 case_name, file);
	ck_assert_msg(glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > frag, "no %s", pattern);
	path = strdup(g.gl_pathv[frag]);
	globfree(&g);
	return path;
}

static uint8_t *corpus_expected(const char *case_name, unsigned frag, const char *file, size_t *n)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s/expected/unfiltered/f%u/%s.bin", tf_test_corpus(),
		 case_name, frag, file);
	return tf_test_read_file(path, n);
}

/* u64 LE offsets as an array (what tf_pipeline_encode takes). */
static uint64_t *offsets_array(const tf_buf *b)
{
	uint64_t *o = malloc(b->len ? b->len : 8);

	ck_assert_ptr_nonnull(o);
	for (size_t i = 0; i < b->len / 8; i++)
		o[i] = tf_le64(b->p + 8 * i);
	return o;
}

/*
 * Decode the tile at the front of `bytes`, then encode every chunk of it
 * again from its decoded bytes (and, on the var-string path, its rebuilt
 * offsets) and ck_assert that we store exactly what TileDB stored.
 * Returns the tile's stored size.
 */
static uint64_t reencode_tile(const tf_pipeline *p, const tf_chunk_env *env, tf_workspace *ws,
			      tf_span bytes, const char *what)
{
	tf_buf out = TF_BUF_INIT(SIZE_MAX), offs = TF_BUF_INIT(SIZE_MAX);
	tf_error err = { 0 };
	uint64_t used, nchunks;
	size_t at = TF_TILE_HEADER_SIZE, start = 0;

	ck_assert_msg(tf_tile_decode(p, env, ws, bytes, &out, env->var_string ? &offs : NULL, &used,
				     &err) == TF_OK, "%s: %s", what, err.msg);
	nchunks = tf_le64(bytes.p);
	for (uint64_t c = 0; c < nchunks; c++) {
		tf_chunk_header h;
		tf_buf enc = TF_BUF_INIT(SIZE_MAX);
		uint64_t *cells = env->var_string ? offsets_array(&offs) : NULL;

		tf_chunk_header_read(bytes.p + at, &h);
		ck_assert_msg(tf_pipeline_encode(p, env, ws, tf_span_of(out.p + start, h.orig_len),
						 cells, offs.len / 8, &enc, &err) == TF_OK,
			      "%s chunk %llu: %s", what, (unsigned long long)c, err.msg);
		ck_assert_msg(enc.len == tf_chunk_stored_size(&h) &&
			      !memcmp(enc.p, bytes.p + at, enc.len),
			      "%s chunk %llu: our %zu bytes differ from TileDB's %llu", what,
			      (unsigned long long)c, enc.len,
			      (unsigned long long)tf_chunk_stored_size(&h));
		at += enc.len;
		start += h.orig_len;
		free(cells);
		tf_buf_free(&enc);
	}
	tf_buf_free(&out);
	tf_buf_free(&offs);
	return used;
}

static void reencode_file(const char *case_name, unsigned frag, const char *file,
			  const char *spec, const tf_chunk_env *env)
{
	char *path = corpus_file(case_name, frag, file), what[256];
	tf_pipeline *p = parse(spec);
	tf_workspace *ws = tf_workspace_new();
	size_t n;
	uint8_t *data = tf_test_read_file(path, &n);

	for (size_t pos = 0, tile = 0; pos < n; tile++) {
		snprintf(what, sizeof(what), "%s/%s tile %zu", case_name, file, tile);
		pos += reencode_tile(p, env, ws, tf_span_of(data + pos, n - pos), what);
	}
	free(data);
	free(path);
	tf_workspace_free(ws);
	tf_pipeline_free(p);
}

/* ---- known answers: fixed-size and plain var tiles ----------------------------- */

typedef struct corpus_case {
	const char *name;
	unsigned frag;
	const char *file;
	const char *spec;
	tf_datatype type;
	uint32_t cell_size;
} corpus_case;

#define ALLTYPES(c, spec)                                                             \
	{ c, 0, "a0.tdb", spec, TF_DT_INT8, 1 }, { c, 0, "a1.tdb", spec, TF_DT_UINT8, 1 },     \
	{ c, 0, "a2.tdb", spec, TF_DT_INT16, 2 }, { c, 0, "a3.tdb", spec, TF_DT_UINT16, 2 },   \
	{ c, 0, "a4.tdb", spec, TF_DT_INT32, 4 }, { c, 0, "a5.tdb", spec, TF_DT_UINT32, 4 },   \
	{ c, 0, "a6.tdb", spec, TF_DT_INT64, 8 }, { c, 0, "a7.tdb", spec, TF_DT_UINT64, 8 },   \
	{ c, 0, "a8.tdb", spec, TF_DT_FLOAT32, 4 }, { c, 0, "a9.tdb", spec, TF_DT_FLOAT64, 8 }

static const corpus_case fixed_cases[] = {
	ALLTYPES("gzip_alltypes", "gzip"),
	ALLTYPES("lz4_alltypes", "lz4"),
	ALLTYPES("bzip2_alltypes", "bzip2"),
	ALLTYPES("rle_alltypes", "rle"),
	{ "gzip_level1", 0, "a0.tdb", "gzip(level=1)", TF_DT_INT32, 4 },
	{ "gzip_level9", 0, "a0.tdb", "gzip(level=9)", TF_DT_INT64, 8 },
	{ "gzip_level9", 0, "a1.tdb", "gzip(level=9)", TF_DT_FLOAT64, 8 },
	{ "bzip2_level9", 0, "a0.tdb", "bzip2(level=9)", TF_DT_FLOAT32, 4 },
	{ "chain_rle_gzip_fixed", 0, "a0.tdb", "rle | gzip", TF_DT_INT16, 2 },
	{ "sparse_1d", 0, "a0.tdb", "gzip", TF_DT_INT32, 4 },
	/* CHAR is not a var-string type: plain byte RLE, offsets stored. */
	{ "str_char_rle", 0, "a0_var.tdb", "rle", TF_DT_CHAR, 1 },
	{ "str_char_rle", 0, "a0.tdb", "zstd", TF_DT_UINT64, 8 },
	/* Var strings under other codecs: ordinary chunked tiles. */
	{ "str_bigtile_chunks", 0, "a0_var.tdb", "bzip2", TF_DT_STRING_ASCII, 1 },
	{ "str_offsets_pd_zstd", 0, "a0_var.tdb", "gzip", TF_DT_STRING_ASCII, 1 },
	{ "dense_partial_last_tile", 0, "a2_var.tdb", "gzip", TF_DT_STRING_ASCII, 1 },
	/* Validity tiles: UINT8, cell size 1, default pipeline RLE. */
	{ "nullable_fixed", 0, "a0_validity.tdb", "rle", TF_DT_UINT8, 1 },
	{ "nullable_fixed", 0, "a1_validity.tdb", "rle", TF_DT_UINT8, 1 },
	{ "nullable_var_string", 0, "a0_validity.tdb", "gzip", TF_DT_UINT8, 1 },
	{ "extra/bool_blob_types", 0, "a0.tdb", "rle", TF_DT_BOOL, 1 },
	{ "extra/bool_blob_types", 0, "a2_var.tdb", "gzip", TF_DT_BLOB, 1 },
	{ "extra/enumeration_attr", 0, "a0.tdb", "rle", TF_DT_UINT8, 1 },
	{ "extra/enumeration_attr", 1, "a0.tdb", "rle", TF_DT_UINT8, 1 },
	{ "extra/consolidated", 0, "a2_var.tdb", "gzip", TF_DT_STRING_ASCII, 1 },
	{ "extra/consolidated", 1, "a2_var.tdb", "gzip", TF_DT_STRING_ASCII, 1 },
	{ "extra/consolidated", 4, "a2_var.tdb", "gzip", TF_DT_STRING_ASCII, 1 },
	{ "extra/sparse_string_dim_dict", 0, "a0.tdb", "lz4", TF_DT_INT32, 4 },
	/* Chains with other filters: our codecs see their metadata parts. */
	{ "chain_bitshuffle_lz4", 0, "a0.tdb", "bitshuffle | lz4", TF_DT_INT32, 4 },
	{ "chain_bitshuffle_lz4", 0, "a1.tdb", "bitshuffle | lz4", TF_DT_FLOAT32, 4 },
	{ "chain_bitshuffle_lz4", 0, "a2.tdb", "bitshuffle | lz4", TF_DT_INT64, 8 },
	{ "chunks_bigtile_byteshuffle_lz4", 0, "a0.tdb", "byteshuffle | lz4", TF_DT_FLOAT64, 8 },
	{ "dense_2d", 0, "a1.tdb", "byteshuffle | lz4", TF_DT_FLOAT64, 8 },
	{ "chain_double_delta_gzip", 0, "a0.tdb", "double_delta | gzip", TF_DT_INT64, 8 },
	{ "chain_double_delta_gzip", 0, "a1.tdb", "double_delta | gzip", TF_DT_UINT64, 8 },
	{ "chain_md5_gzip", 0, "a0.tdb", "checksum_md5 | gzip", TF_DT_INT32, 4 },
	{ "multifrag_sparse", 0, "a0.tdb", "xor | gzip", TF_DT_FLOAT32, 4 },
	{ "multifrag_sparse", 1, "a0.tdb", "xor | gzip", TF_DT_FLOAT32, 4 },
	{ "extra/sparse_var_dim_nullable_attr", 0, "a0_validity.tdb", "bitshuffle | rle",
	  TF_DT_UINT8, 1 },
	{ "extra/sparse_var_dim_nullable_attr", 0, "a1_validity.tdb", "bitshuffle | rle",
	  TF_DT_UINT8, 1 },
};
#define N_FIXED_CASES (sizeof(fixed_cases) / sizeof(fixed_cases[0]))

START_TEST(test_corpus_fixed)
{
	const corpus_case *c = &fixed_cases[_i];
	tf_chunk_env env = env_of(c->type, c->cell_size, false);

	ck_assert(tf_test_corpus_check(c->name, c->frag, c->file, c->spec, &env));
}
END_TEST

START_TEST(test_corpus_fixed_reencode)
{
	const corpus_case *c = &fixed_cases[_i];
	tf_chunk_env env = env_of(c->type, c->cell_size, false);

	reencode_file(c->name, c->frag, c->file, c->spec, &env);
}
END_TEST

/* ---- known answers: the var-string path (offsets rebuilt) ---------------------- */

typedef struct string_case {
	const char *name;
	const char *var_file;
	const char *offsets_file;	/* its on-disk tiles are 8 bytes each */
	const char *spec;
	tf_datatype type;
} string_case;

static const string_case string_cases[] = {
	{ "str_rle", "a0_var.tdb", "a0.tdb", "rle", TF_DT_STRING_ASCII },
	{ "str_rle_zstd", "a0_var.tdb", "a0.tdb", "rle | zstd", TF_DT_STRING_ASCII },
	{ "str_utf8_rle", "a0_var.tdb", "a0.tdb", "rle", TF_DT_STRING_UTF8 },
	{ "str_dict", "a0_var.tdb", "a0.tdb", "dictionary", TF_DT_STRING_ASCII },
	{ "str_empty_tiles", "a1_var.tdb", "a1.tdb", "dictionary", TF_DT_STRING_ASCII },
	{ "sparse_2d", "a1_var.tdb", "a1.tdb", "rle", TF_DT_STRING_ASCII },
	{ "sparse_string_dim", "d0_var.tdb", "d0.tdb", "rle", TF_DT_STRING_ASCII },
	{ "extra/sparse_string_dim_dict", "d0_var.tdb", "d0.tdb", "dictionary", TF_DT_STRING_ASCII },
	{ "extra/sparse_var_dim_nullable_attr", "a0_var.tdb", "a0.tdb", "dictionary",
	  TF_DT_STRING_UTF8 },
};
#define N_STRING_CASES (sizeof(string_cases) / sizeof(string_cases[0]))

/* Every stored offsets tile of the case is num_chunks = 0 (§5.2). */
static size_t count_skipped_offsets_tiles(const string_case *c)
{
	char *path = corpus_file(c->name, 0, c->offsets_file);
	size_t n, tiles;
	uint8_t *data = tf_test_read_file(path, &n);

	ck_assert_uint_eq(n % 8, 0);
	for (tiles = 0; tiles < n / 8; tiles++)
		ck_assert_msg(tf_le64(data + 8 * tiles) == 0, "%s: offsets tile %zu is stored",
			      c->name, tiles);
	free(data);
	free(path);
	return tiles;
}

/* Decode the var file tile by tile with offsets and compare them with
 * TileDB's own unfiltered offsets (every tile starts again at 0). */
static void expect_rebuilt_offsets(const string_case *c, const tf_chunk_env *env)
{
	char *path = corpus_file(c->name, 0, c->var_file);
	tf_buf out = TF_BUF_INIT(SIZE_MAX), offs = TF_BUF_INIT(SIZE_MAX);
	tf_pipeline *p = parse(c->spec);
	tf_workspace *ws = tf_workspace_new();
	tf_error err = { 0 };
	size_t n, wn, tiles = 0;
	uint8_t *data = tf_test_read_file(path, &n);
	uint8_t *want = corpus_expected(c->name, 0, c->offsets_file, &wn);

	for (size_t pos = 0; pos < n; tiles++) {
		uint64_t used;

		ck_assert_msg(tf_tile_decode(p, env, ws, tf_span_of(data + pos, n - pos), &out, &offs,
					     &used, &err) == TF_OK, "%s: %s", c->name, err.msg);
		pos += used;
	}
	ck_assert_uint_eq(tiles, count_skipped_offsets_tiles(c));
	ck_assert_msg(offs.len == wn && !memcmp(offs.p, want, wn),
		      "%s: %zu bytes of rebuilt offsets differ from the %zu expected", c->name,
		      offs.len, wn);
	tf_buf_free(&out);
	tf_buf_free(&offs);
	free(data);
	free(want);
	free(path);
	tf_workspace_free(ws);
	tf_pipeline_free(p);
}

START_TEST(test_corpus_strings)
{
	const string_case *c = &string_cases[_i];
	tf_chunk_env env = env_of(c->type, 1, true);

	ck_assert(tf_test_corpus_check(c->name, 0, c->var_file, c->spec, &env));
	expect_rebuilt_offsets(c, &env);
	reencode_file(c->name, 0, c->var_file, c->spec, &env);
}
END_TEST

/* Encrypted arrays: AES (the filter appended last) undone, then our codec. */
START_TEST(test_corpus_encrypted_strings)
{
	static const char key_text[] = "TileDB-oracle-key-0123456789ABCD";
	tf_chunk_env env = env_of(TF_DT_STRING_ASCII, 1, true);
	tf_key *key = NULL;
	tf_error err = { 0 };

	ck_assert_msg(tf_key_from_bytes(key_text, 32, &key, &err) == TF_OK, "%s", err.msg);
	env.key = key;
	ck_assert(tf_test_corpus_check("enc_str_rle", 0, "a0_var.tdb", "rle | aes_256_gcm", &env));
	env = env_of(TF_DT_INT32, 4, false);
	env.key = key;
	ck_assert(tf_test_corpus_check("enc_dense_zstd", 0, "a1.tdb", "gzip | aes_256_gcm", &env));
	tf_key_free(key);
}
END_TEST

/* Generic tiles (every schema file) are GZIP level 1: decode and re-encode. */
START_TEST(test_corpus_generic_tiles)
{
	char pattern[4096];
	tf_workspace *ws = tf_workspace_new();
	glob_t g;

	snprintf(pattern, sizeof(pattern), "%s/*/array/__schema/__*", tf_test_corpus());
	ck_assert(glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 20);
	for (size_t i = 0; i < g.gl_pathc; i++) {
		tf_buf out = TF_BUF_INIT(SIZE_MAX);
		tf_generic_header h;
		tf_error err = { 0 };
		struct stat sb;
		uint64_t used;
		size_t n;
		uint8_t *data;
		tf_chunk_env env = env_of(TF_DT_CHAR, 1, false);

		if (stat(g.gl_pathv[i], &sb) != 0 || !S_ISREG(sb.st_mode))	/* __enumerations/ */
			continue;
		data = tf_test_read_file(g.gl_pathv[i], &n);
		ck_assert(tf_generic_header_parse(tf_span_of(data, n), &h, &err) == TF_OK);
		if (h.encryption == 0) {
			tf_status rc = tf_generic_decode(tf_span_of(data, n), NULL, ws, &out, &used,
							 &err);

			ck_assert_msg(rc == TF_OK, "%s: %s", g.gl_pathv[i], err.msg);
			ck_assert_uint_eq(used, n);
			ck_assert_uint_eq(out.len, h.tile_size);
			reencode_tile(h.pipeline, &env, ws, tf_span_of(data + h.header_size,
					(size_t)h.persisted_size), g.gl_pathv[i]);
		}
		tf_generic_header_free(&h);
		tf_buf_free(&out);
		free(data);
	}
	globfree(&g);
	tf_workspace_free(ws);
}
END_TEST

/* ---- round trips ------------------------------------------------------------------ */

static const struct {
	tf_datatype type;
	unsigned size;
	tf_gen gen;
} types[] = {
	{ TF_DT_INT8, 1, TF_GEN_WALK }, { TF_DT_UINT8, 1, TF_GEN_RUNS },
	{ TF_DT_INT16, 2, TF_GEN_WALK }, { TF_DT_UINT16, 2, TF_GEN_RUNS },
	{ TF_DT_INT32, 4, TF_GEN_RAMP }, { TF_DT_UINT32, 4, TF_GEN_RUNS },
	{ TF_DT_INT64, 8, TF_GEN_WALK }, { TF_DT_UINT64, 8, TF_GEN_RANDOM },
	{ TF_DT_FLOAT32, 4, TF_GEN_FLOATS }, { TF_DT_FLOAT64, 8, TF_GEN_FLOATS },
	{ TF_DT_CHAR, 1, TF_GEN_RANDOM }, { TF_DT_BLOB, 1, TF_GEN_ZERO },
	{ TF_DT_DATETIME_AS, 8, TF_GEN_RAMP }, { TF_DT_BOOL, 1, TF_GEN_RUNS },
};
#define N_TYPES (sizeof(types) / sizeof(types[0]))

/* Codecs that take any length; the chains give gzip, lz4 and bzip2
 * metadata parts to compress as well. */
static const char *const byte_specs[] = {
	"gzip", "gzip(level=0)", "gzip(level=1)", "gzip(level=9)", "lz4", "bzip2",
	"bzip2(level=9)", "zstd | gzip", "gzip | lz4 | bzip2", "lz4 | zstd",
	"byteshuffle | gzip", "bitshuffle | lz4", "checksum_md5 | bzip2",
	"bitshuffle | checksum_sha256 | gzip(level=1)",
};
#define N_BYTE_SPECS (sizeof(byte_specs) / sizeof(byte_specs[0]))

START_TEST(test_roundtrip_codecs)
{
	const char *spec = byte_specs[_i];
	const size_t lens[] = { 0, 1, 7, 1000, 65536 + 13, 3 * 65536 };

	for (size_t t = 0; t < N_TYPES; t++) {
		for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
			/* odd tails: not a whole number of elements */
			size_t n = lens[l] + (lens[l] > 1 ? types[t].size - 1 : 0);
			uint8_t *in = tf_test_data(n, types[t].gen, types[t].size, 17 * t + l);

			tf_test_roundtrip(spec, types[t].type, types[t].size, in, n);
			free(in);
		}
	}
}
END_TEST

/* Runs of random cells of `cell` bytes (any width, unlike tf_test_fill). */
static uint8_t *cell_runs(size_t ncells, size_t cell, uint64_t seed)
{
	uint8_t *p = malloc(ncells * cell + 1), value[64];
	size_t left = 0;

	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i < ncells; i++, left--) {
		if (left == 0) {
			tf_test_fill(value, cell, TF_GEN_RANDOM, 1, seed++);
			left = 1 + (size_t)(seed * 2654435761u % 97);
		}
		memcpy(p + i * cell, value, cell);
	}
	return p;
}

START_TEST(test_roundtrip_rle_fixed)
{
	const size_t counts[] = { 0, 1, 2, 999, 65536 / 4 + 13, 70000 };
	const uint32_t cells[] = { 1, 2, 3, 4, 8, 12, 16, 24, 40 };	/* cell_val_num x size */
	const char *const specs[] = { "rle", "rle | gzip", "rle | lz4", "rle | bzip2", "rle | zstd" };

	for (size_t s = 0; s < sizeof(specs) / sizeof(specs[0]); s++)
		for (size_t c = 0; c < sizeof(cells) / sizeof(cells[0]); c++)
			for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
				size_t n = counts[k] * cells[c];
				uint8_t *in = cell_runs(counts[k], cells[c], 31 * c + k);

				tf_test_roundtrip(specs[s], TF_DT_UINT8, cells[c], in, n);
				free(in);
			}
	/* Metadata parts are RLE'd with the cell size too: fine at width 1. */
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		uint8_t *in = cell_runs(counts[k], 1, k);

		tf_test_roundtrip("zstd | rle", TF_DT_UINT8, 1, in, counts[k]);
		free(in);
	}
}
END_TEST

/* ---- exact small encodings ---------------------------------------------------------- */

/* The data bytes of the one-filter chunk encoding `in` (after the 16-byte
 * framing header): ck_asserts the header, returns a malloc'd copy. */
static uint8_t *framed_data(const char *spec, tf_chunk_env env, const uint8_t *in, size_t n,
			    size_t *len)
{
	tf_buf chunk;
	tf_chunk_header h;
	uint8_t *data;

	encode_chunk(spec, &env, in, n, NULL, 0, &chunk);
	tf_chunk_header_read(chunk.p, &h);
	ck_assert_uint_eq(h.orig_len, n);
	ck_assert_uint_eq(h.md_len, 16);
	ck_assert_uint_eq(tf_le32(chunk.p + 12), 0);	/* metadata parts */
	ck_assert_uint_eq(tf_le32(chunk.p + 16), 1);	/* data parts */
	ck_assert_uint_eq(tf_le32(chunk.p + 20), n);
	ck_assert_uint_eq(tf_le32(chunk.p + 24), h.filtered_len);
	*len = h.filtered_len;
	data = malloc(*len + 1);
	memcpy(data, chunk.p + 28, *len);
	tf_buf_free(&chunk);
	tf_test_roundtrip(spec, env.type, env.cell_size, in, n);
	return data;
}

static void expect_framed(const char *spec, const uint8_t *in, size_t n, const uint8_t *want,
			  size_t want_len)
{
	size_t len;
	uint8_t *got = framed_data(spec, env_of(TF_DT_UINT8, 1, false), in, n, &len);

	ck_assert_msg(len == want_len && (len == 0 || !memcmp(got, want, len)),
		      "%s: %zu bytes, want %zu", spec, len, want_len);
	free(got);
}

/* An empty part is still a whole stream (FORMAT.md §10 #2). */
START_TEST(test_empty_streams)
{
	static const uint8_t zlib6[] = { 0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01 };
	static const uint8_t zlib1[] = { 0x78, 0x01, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01 };
	static const uint8_t lz4[] = { 0x00 };
	static const uint8_t bz1[] = { 'B', 'Z', 'h', '1', 0x17, 0x72, 0x45, 0x38, 0x50, 0x90,
				       0, 0, 0, 0 };
	static const uint8_t bz9[] = { 'B', 'Z', 'h', '9', 0x17, 0x72, 0x45, 0x38, 0x50, 0x90,
				       0, 0, 0, 0 };

	expect_framed("gzip", NULL, 0, zlib6, sizeof(zlib6));
	expect_framed("gzip(level=1)", NULL, 0, zlib1, sizeof(zlib1));
	expect_framed("lz4", NULL, 0, lz4, sizeof(lz4));
	expect_framed("bzip2", NULL, 0, bz1, sizeof(bz1));
	expect_framed("bzip2(level=-5)", NULL, 0, bz1, sizeof(bz1));
	expect_framed("bzip2(level=9)", NULL, 0, bz9, sizeof(bz9));
	expect_framed("rle", NULL, 0, NULL, 0);
}
END_TEST

START_TEST(test_rle_fixed_layout)
{
	static const uint8_t in[] = { 7, 7, 7, 9, 7, 7 };
	static const uint8_t want1[] = { 7, 0, 3, 9, 0, 1, 7, 0, 2 };
	static const uint8_t want2[] = { 7, 7, 0, 1, 7, 9, 0, 1, 7, 7, 0, 1 };
	static const uint8_t want3[] = { 7, 7, 7, 0, 1, 9, 7, 7, 0, 1 };
	uint8_t *zeros = calloc(200000, 1), *got;
	size_t len;

	got = framed_data("rle", env_of(TF_DT_UINT8, 1, false), in, 6, &len);
	ck_assert(len == sizeof(want1) && !memcmp(got, want1, len));
	free(got);
	/* The value width is the cell size, e.g. cell_val_num 2 or 3 of UINT8. */
	got = framed_data("rle", env_of(TF_DT_UINT8, 2, false), in, 6, &len);
	ck_assert(len == sizeof(want2) && !memcmp(got, want2, len));
	free(got);
	got = framed_data("rle", env_of(TF_DT_UINT8, 3, false), in, 6, &len);
	ck_assert(len == sizeof(want3) && !memcmp(got, want3, len));
	free(got);
	/* 200000 equal values: three full runs of 65535 and one of 3395. */
	got = framed_data("rle", env_of(TF_DT_UINT8, 1, false), zeros, 200000, &len);
	ck_assert_uint_eq(len, 12);
	for (int r = 0; r < 3; r++)
		ck_assert(got[3 * r] == 0 && got[3 * r + 1] == 0xff && got[3 * r + 2] == 0xff);
	ck_assert(got[9] == 0 && got[10] == 0x0d && got[11] == 0x43);
	free(got);
	free(zeros);
}
END_TEST

/* Earlier filters' headers become metadata parts of the codec. */
START_TEST(test_multi_part_framing)
{
	uint8_t *in = tf_test_data(5000, TF_GEN_WALK, 4, 3);
	tf_chunk_env env = env_of(TF_DT_INT32, 4, false);
	tf_buf chunk;

	encode_chunk("zstd | gzip", &env, in, 5000, NULL, 0, &chunk);
	ck_assert_uint_eq(tf_le32(chunk.p + 8), 8 + 2 * 8);	/* gzip header: 2 parts */
	ck_assert_uint_eq(tf_le32(chunk.p + 12), 1);
	ck_assert_uint_eq(tf_le32(chunk.p + 16), 1);
	ck_assert_uint_eq(tf_le32(chunk.p + 20), 16);		/* zstd's own header */
	tf_buf_free(&chunk);
	/* gzip folded zstd's header into its data: lz4 sees gzip's 24-byte
	 * header as its one metadata part. */
	encode_chunk("zstd | gzip | lz4", &env, in, 5000, NULL, 0, &chunk);
	ck_assert_uint_eq(tf_le32(chunk.p + 8), 8 + 2 * 8);
	ck_assert_uint_eq(tf_le32(chunk.p + 12), 1);
	ck_assert_uint_eq(tf_le32(chunk.p + 20), 24);
	tf_buf_free(&chunk);
	/* FORMAT.md §3.5: gzip gets two metadata parts, the checksum
	 * header (covering one md and one data part) and the shuffle's. */
	encode_chunk("byteshuffle | checksum_md5 | gzip", &env, in, 5000, NULL, 0, &chunk);
	ck_assert_uint_eq(tf_le32(chunk.p + 8), 8 + 3 * 8);
	ck_assert_uint_eq(tf_le32(chunk.p + 12), 2);
	ck_assert_uint_eq(tf_le32(chunk.p + 16), 1);
	ck_assert_uint_eq(tf_le32(chunk.p + 20), 8 + 2 * 24);
	ck_assert_uint_eq(tf_le32(chunk.p + 28), 8);
	ck_assert_uint_eq(tf_le32(chunk.p + 36), 5000);
	tf_buf_free(&chunk);
	tf_test_roundtrip("byteshuffle | checksum_md5 | gzip", TF_DT_INT32, 4, in, 5000);
	free(in);
}
END_TEST

/* ---- var strings ----------------------------------------------------------------- */

/* Strings to (concatenated bytes, cell offsets). */
typedef struct strings {
	tf_buf bytes;
	uint64_t *offs;
	size_t n, cap;
} strings;

static void strings_add(strings *s, const void *p, size_t len)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->offs = realloc(s->offs, s->cap * sizeof(*s->offs));
		ck_assert_ptr_nonnull(s->offs);
	}
	s->offs[s->n++] = s->bytes.len;
	ck_assert(tf_buf_append(&s->bytes, p, len, NULL) == TF_OK);
}

static void strings_add_repeat(strings *s, char c, size_t len, size_t times)
{
	char *p = malloc(len + 1);

	memset(p, c, len);
	for (size_t i = 0; i < times; i++)
		strings_add(s, p, len);
	free(p);
}

static void strings_free(strings *s)
{
	tf_buf_free(&s->bytes);
	free(s->offs);
}

/* Encode strings as one var-string chunk, decode it with offsets and
 * compare both; returns the stored chunk (caller frees). */
static tf_buf string_roundtrip(const char *spec, tf_datatype type, const strings *s)
{
	tf_chunk_env env = env_of(type, 1, true);
	tf_pipeline *p = parse(spec);
	tf_workspace *ws = tf_workspace_new();
	tf_buf chunk, offs = TF_BUF_INIT(SIZE_MAX);
	tf_error err = { 0 };
	uint8_t *back;

	encode_chunk(spec, &env, s->bytes.p, s->bytes.len, s->offs, s->n, &chunk);
	ck_assert_msg(decode_chunk(p, &env, ws, tf_span_of(chunk.p, chunk.len), SIZE_MAX, &offs,
				   &back, &err) == TF_OK, "%s: %s", spec, err.msg);
	ck_assert(s->bytes.len == 0 || !memcmp(back, s->bytes.p, s->bytes.len));
	ck_assert_uint_eq(offs.len, 8 * s->n);
	for (size_t i = 0; i < s->n; i++)
		ck_assert_uint_eq(tf_le64(offs.p + 8 * i), s->offs[i]);
	free(back);
	tf_buf_free(&offs);
	tf_workspace_free(ws);
	tf_pipeline_free(p);
	return chunk;
}

static void expect_chunk(const tf_buf *chunk, const uint8_t *md, size_t md_len,
			 const uint8_t *data, size_t data_len)
{
	ck_assert_uint_eq(tf_le32(chunk->p + 8), md_len);
	ck_assert_uint_eq(tf_le32(chunk->p + 4), data_len);
	ck_assert(!memcmp(chunk->p + 12, md, md_len));
	ck_assert(!memcmp(chunk->p + 12 + md_len, data, data_len));
}

START_TEST(test_string_rle_layout)
{
	static const uint8_t md[] = { 0, 0, 0, 0, 1, 0, 0, 0, 5, 0, 0, 0, 7, 0, 0, 0,
				      24, 0, 0, 0, 1, 1 };
	static const uint8_t data[] = { 2, 2, 'a', 'b', 1, 1, 'c' };
	strings s = { TF_BUF_INIT(SIZE_MAX), NULL, 0, 0 };
	tf_buf chunk;

	strings_add(&s, "ab", 2);
	strings_add(&s, "ab", 2);
	strings_add(&s, "c", 1);
	chunk = string_roundtrip("rle", TF_DT_STRING_ASCII, &s);
	expect_chunk(&chunk, md, sizeof(md), data, sizeof(data));
	tf_buf_free(&chunk);
	strings_free(&s);
}
END_TEST

START_TEST(test_dictionary_layout)
{
	static const uint8_t md[] = { 0, 0, 0, 0, 1, 0, 0, 0, 5, 0, 0, 0, 3, 0, 0, 0,
				      24, 0, 0, 0, 1, 1, 5, 0, 0, 0, 2, 'a', 'b', 1, 'c' };
	static const uint8_t data[] = { 0, 1, 0 };
	strings s = { TF_BUF_INIT(SIZE_MAX), NULL, 0, 0 };
	tf_buf chunk;

	strings_add(&s, "ab", 2);
	strings_add(&s, "c", 1);
	strings_add(&s, "ab", 2);
	chunk = string_roundtrip("dictionary", TF_DT_STRING_UTF8, &s);
	expect_chunk(&chunk, md, sizeof(md), data, sizeof(data));
	tf_buf_free(&chunk);
	strings_free(&s);
}
END_TEST

/* TileDB sizes the string-length field without the last run (§4.7); we
 * take every run, so {"a", 300 x 'x'} gets 2-byte lengths and decodes. */
START_TEST(test_string_rle_longest_last)
{
	strings s = { TF_BUF_INIT(SIZE_MAX), NULL, 0, 0 };
	tf_buf chunk;

	strings_add(&s, "a", 1);
	strings_add_repeat(&s, 'x', 300, 1);
	chunk = string_roundtrip("rle", TF_DT_STRING_ASCII, &s);
	ck_assert_uint_eq(chunk.p[12 + 20], 1);	/* run length width */
	ck_assert_uint_eq(chunk.p[12 + 21], 2);	/* string length width */
	tf_buf_free(&chunk);
	strings_free(&s);
}
END_TEST

/* Field widths grow with the longest run, string and cell count. */
START_TEST(test_string_widths)
{
	const char *const specs[] = { "rle", "dictionary", "rle | gzip", "dictionary | lz4",
				      "rle | zstd", "dictionary | bzip2" };

	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		strings s = { TF_BUF_INIT(SIZE_MAX), NULL, 0, 0 };
		tf_buf chunk;

		strings_add_repeat(&s, 'q', 3, 70000);		/* run > 65535 */
		strings_add_repeat(&s, 'z', 70000, 2);		/* string > 65535 */
		strings_add_repeat(&s, 'e', 0, 300);		/* empty strings */
		for (int k = 0; k < 500; k++)
			strings_add_repeat(&s, (char)('a' + k % 26), (size_t)k % 40, 1 + k % 3);
		chunk = string_roundtrip(specs[i], i % 2 ? TF_DT_STRING_UTF8 : TF_DT_STRING_ASCII, &s);
		if (strcmp(specs[i], "rle") == 0)
			ck_assert(chunk.p[12 + 20] == 4 && chunk.p[12 + 21] == 4);
		if (strcmp(specs[i], "dictionary") == 0)
			ck_assert(chunk.p[12 + 20] == 4 && chunk.p[12 + 21] == 4);
		tf_buf_free(&chunk);
		strings_free(&s);
	}
}
END_TEST

START_TEST(test_string_small_cases)
{
	const char *const specs[] = { "rle", "dictionary" };

	for (size_t i = 0; i < 2; i++) {
		strings one = { TF_BUF_INIT(SIZE_MAX), NULL, 0, 0 };
		strings empty = { TF_BUF_INIT(SIZE_MAX), NULL, 0, 0 };
		strings distinct = { TF_BUF_INIT(SIZE_MAX), NULL, 0, 0 };
		tf_buf c1, c2, c3;

		strings_add(&one, "solo", 4);
		strings_add_repeat(&empty, ' ', 0, 128);	/* a tile of empty strings */
		for (int k = 0; k < 300; k++) {
			char buf[16];
			int len = snprintf(buf, sizeof(buf), "s%d", k);
			strings_add(&distinct, buf, (size_t)len);
		}
		c1 = string_roundtrip(specs[i], TF_DT_STRING_ASCII, &one);
		c2 = string_roundtrip(specs[i], TF_DT_STRING_ASCII, &empty);
		c3 = string_roundtrip(specs[i], TF_DT_STRING_ASCII, &distinct);
		ck_assert_uint_eq(tf_le32(c2.p), 0);	/* orig_len of all-empty */
		tf_buf_free(&c1);
		tf_buf_free(&c2);
		tf_buf_free(&c3);
		strings_free(&one);
		strings_free(&empty);
		strings_free(&distinct);
	}
}
END_TEST

/* ---- corruption ---------------------------------------------------------------------- */

typedef struct fuzz_target {
	const char *spec;
	tf_datatype type;
	uint32_t cell_size;
	bool strings;
} fuzz_target;

static const fuzz_target fuzz_targets[] = {
	{ "gzip", TF_DT_INT32, 4, false }, { "lz4", TF_DT_INT32, 4, false },
	{ "bzip2", TF_DT_INT32, 4, false }, { "rle", TF_DT_INT16, 2, false },
	{ "rle", TF_DT_UINT8, 3, false }, { "rle | gzip", TF_DT_INT16, 2, false },
	{ "zstd | gzip | lz4", TF_DT_INT64, 8, false },
	{ "rle", TF_DT_STRING_ASCII, 1, true }, { "dictionary", TF_DT_STRING_ASCII, 1, true },
	{ "rle | zstd", TF_DT_STRING_UTF8, 1, true },
	{ "dictionary | lz4", TF_DT_STRING_ASCII, 1, true },
};
#define N_FUZZ (sizeof(fuzz_targets) / sizeof(fuzz_targets[0]))

static tf_buf fuzz_chunk(const fuzz_target *t)
{
	strings s = { TF_BUF_INIT(SIZE_MAX), NULL, 0, 0 };
	tf_chunk_env env = env_of(t->type, t->cell_size, t->strings);
	tf_buf chunk;

	if (t->strings) {
		for (int k = 0; k < 120; k++)
			strings_add_repeat(&s, (char)('a' + k % 5), (size_t)(k * 7 % 13), 1 + k % 4);
		strings_add_repeat(&s, 'w', 300, 2);
		encode_chunk(t->spec, &env, s.bytes.p, s.bytes.len, s.offs, s.n, &chunk);
	} else {
		uint8_t *in = cell_runs(1500, t->cell_size, 5);

		tf_test_fill(in, 600, TF_GEN_WALK, 2, 9);	/* some variety as well */
		encode_chunk(t->spec, &env, in, 1500 * t->cell_size, NULL, 0, &chunk);
		free(in);
	}
	strings_free(&s);
	return chunk;
}

/* Decode a mangled chunk: any status is fine, a crash or sanitizer report is not. */
static tf_status try_decode(const tf_pipeline *p, const tf_chunk_env *env, tf_workspace *ws,
			    const uint8_t *chunk, size_t n)
{
	tf_buf offs = TF_BUF_INIT((size_t)1 << 26);
	tf_error err = { 0 };
	uint8_t *out;
	tf_status rc = decode_chunk(p, env, ws, tf_span_of(chunk, n), (size_t)1 << 24,
				    env->var_string ? &offs : NULL, &out, &err);

	free(out);
	tf_buf_free(&offs);
	return rc;
}

/* Shorten the metadata or the data by `cut` bytes, fixing the chunk header
 * so that the filters themselves meet the short stream. */
static size_t shorten(const tf_buf *chunk, uint8_t *dst, bool in_md, uint32_t cut)
{
	tf_chunk_header h;

	tf_chunk_header_read(chunk->p, &h);
	memcpy(dst, chunk->p, chunk->len);
	if (in_md) {
		tf_put_le32(dst + 8, h.md_len - cut);
		memmove(dst + 12 + h.md_len - cut, chunk->p + 12 + h.md_len, h.filtered_len);
	} else {
		tf_put_le32(dst + 4, h.filtered_len - cut);
	}
	return chunk->len - cut;
}

START_TEST(test_corruption)
{
	const fuzz_target *t = &fuzz_targets[_i];
	tf_chunk_env env = env_of(t->type, t->cell_size, t->strings);
	tf_pipeline *p = parse(t->spec);
	tf_workspace *ws = tf_workspace_new();
	tf_buf chunk = fuzz_chunk(t);
	uint8_t *bad = malloc(chunk.len);
	tf_chunk_header h;
	uint64_t seed = 12345 + _i;

	tf_chunk_header_read(chunk.p, &h);
	ck_assert(try_decode(p, &env, ws, chunk.p, chunk.len) == TF_OK);
	for (uint32_t cut = 1; cut <= h.md_len; cut++)
		ck_assert(try_decode(p, &env, ws, bad, shorten(&chunk, bad, true, cut)) != TF_OK);
	for (uint32_t cut = 1; cut <= h.filtered_len; cut++)
		ck_assert(try_decode(p, &env, ws, bad, shorten(&chunk, bad, false, cut)) != TF_OK);
	for (int i = 0; i < 2000; i++) {
		size_t bit;

		memcpy(bad, chunk.p, chunk.len);
		tf_test_fill((uint8_t *)&bit, sizeof(bit), TF_GEN_RANDOM, 8, seed++);
		bit %= 8 * chunk.len;
		bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		try_decode(p, &env, ws, bad, chunk.len);
	}
	free(bad);
	tf_buf_free(&chunk);
	tf_workspace_free(ws);
	tf_pipeline_free(p);
}
END_TEST

/* ---- error messages --------------------------------------------------------------- */

static void expect_decode_error(const char *spec, tf_chunk_env env, const tf_buf *chunk,
				const char *needle)
{
	tf_pipeline *p = parse(spec);
	tf_workspace *ws = tf_workspace_new();
	tf_error err = { 0 };
	uint8_t *out;

	ck_assert(decode_chunk(p, &env, ws, tf_span_of(chunk->p, chunk->len), SIZE_MAX, NULL, &out,
			       &err) != TF_OK);
	ck_assert_msg(strstr(err.msg, needle), "message '%s' lacks '%s'", err.msg, needle);
	tf_workspace_free(ws);
	tf_pipeline_free(p);
}

START_TEST(test_error_messages)
{
	uint8_t *in = tf_test_data(4000, TF_GEN_WALK, 4, 1);
	tf_chunk_env env = env_of(TF_DT_INT32, 4, false);
	tf_pipeline *p = NULL;
	tf_error err = { 0 };
	tf_buf chunk;

	ck_assert(tf_pipeline_parse("gzip(level=10)", &p, &err) == TF_E_INVAL);
	ck_assert_msg(strstr(err.msg, "gzip: level 10 is above 9"), "%s", err.msg);
	ck_assert(tf_pipeline_parse("zstd | bzip2(level=12)", &p, &err) == TF_E_INVAL);
	ck_assert_msg(strstr(err.msg, "level 12 is above 9"), "%s", err.msg);

	/* One more byte claimed by both the chunk and gzip's part header. */
	encode_chunk("gzip", &env, in, 4000, NULL, 0, &chunk);
	tf_put_le32(chunk.p, 4001);
	tf_put_le32(chunk.p + 20, 4001);
	expect_decode_error("gzip", env, &chunk, "filter 0 (gzip): gzip: data part 0: "
			    "stream holds 4000 bytes, header says 4001");
	tf_buf_free(&chunk);

	encode_chunk("rle", &env, in, 4000, NULL, 0, &chunk);
	tf_put_le32(chunk.p + 4, tf_le32(chunk.p + 4) - 1);
	tf_put_le32(chunk.p + 24, tf_le32(chunk.p + 24) - 1);
	expect_decode_error("rle", env, &chunk, "are not whole runs of 4-byte values");
	tf_buf_free(&chunk);

	/* Whatever the chunk, dictionary off the var-string path is refused. */
	encode_chunk("gzip", &env, in, 4000, NULL, 0, &chunk);
	expect_decode_error("dictionary", env_of(TF_DT_STRING_ASCII, 1, false), &chunk,
			    "dictionary encoding applies only to var-sized strings");
	tf_buf_free(&chunk);
	free(in);
}
END_TEST

START_TEST(test_string_error_messages)
{
	strings s = { TF_BUF_INIT(SIZE_MAX), NULL, 0, 0 };
	tf_chunk_env env = env_of(TF_DT_STRING_ASCII, 1, true);
	tf_buf chunk;

	strings_add_repeat(&s, 'k', 5, 10);
	strings_add_repeat(&s, 'm', 2, 3);
	/* The offsets size promises one cell more than the runs hold. */
	encode_chunk("rle", &env, s.bytes.p, s.bytes.len, s.offs, s.n, &chunk);
	tf_put_le32(chunk.p + 12 + 16, 8 * 14);
	expect_decode_error("rle", env, &chunk,
			    "runs hold 13 cells of 56 bytes, header says 112 offset bytes");
	tf_buf_free(&chunk);
	/* An id beyond the two dictionary entries. */
	encode_chunk("dictionary", &env, s.bytes.p, s.bytes.len, s.offs, s.n, &chunk);
	chunk.p[chunk.len - 1] = 2;
	expect_decode_error("dictionary", env, &chunk,
			    "cell 12 refers to entry 2 of a 2-entry dictionary");
	tf_buf_free(&chunk);
	strings_free(&s);
}
END_TEST

/* ---- suite -------------------------------------------------------------------------- */

static Suite *suite(void)
{
	Suite *s = suite_create("codecs");
	TCase *corpus;
	TCase *round = tcase_create("roundtrip");
	TCase *layout = tcase_create("layout");
	TCase *bad = tcase_create("corruption");

	if (tf_test_corpus()) {
		corpus = tcase_create("corpus");
		tcase_add_loop_test(corpus, test_corpus_fixed, 0, N_FIXED_CASES);
		tcase_add_loop_test(corpus, test_corpus_fixed_reencode, 0, N_FIXED_CASES);
		tcase_add_loop_test(corpus, test_corpus_strings, 0, N_STRING_CASES);
		tcase_add_test(corpus, test_corpus_encrypted_strings);
		tcase_add_test(corpus, test_corpus_generic_tiles);
		tcase_set_timeout(corpus, 120);
		suite_add_tcase(s, corpus);
	} else {
		printf("corpus absent: skipping known-answer tests\n");
	}
	tcase_add_loop_test(round, test_roundtrip_codecs, 0, N_BYTE_SPECS);
	tcase_add_test(round, test_roundtrip_rle_fixed);
	tcase_set_timeout(round, 300);
	suite_add_tcase(s, round);

	tcase_add_test(layout, test_empty_streams);
	tcase_add_test(layout, test_rle_fixed_layout);
	tcase_add_test(layout, test_multi_part_framing);
	tcase_add_test(layout, test_string_rle_layout);
	tcase_add_test(layout, test_dictionary_layout);
	tcase_add_test(layout, test_string_rle_longest_last);
	tcase_add_test(layout, test_string_widths);
	tcase_add_test(layout, test_string_small_cases);
	tcase_add_test(layout, test_error_messages);
	tcase_add_test(layout, test_string_error_messages);
	tcase_set_timeout(layout, 120);
	suite_add_tcase(s, layout);

	tcase_add_loop_test(bad, test_corruption, 0, N_FUZZ);
	tcase_set_timeout(bad, 300);
	suite_add_tcase(s, bad);
	return s;
}

TF_TEST_MAIN(suite)
