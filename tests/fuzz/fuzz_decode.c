/*
 * fuzz_decode.c - libFuzzer target: pipeline + tile bytes -> decode.
 *
 * Input layout (make-seeds writes the same):
 *
 *   byte 0   datatype (taken modulo TF_DT_COUNT, so every byte is a valid id)
 *   byte 1   flags, FZ_* below
 *   byte 2   cell_val_num of a fixed field (0 means 1)
 *   byte 3   format version (modulo 24; 0 means 22)
 *   4..      a serialized pipeline (tf_pipeline_deserialize), write order
 *   rest     tile bytes: decoded as a data file (tiles back to back) with
 *            and without an offsets buffer, and as one generic tile
 *
 * A decode may fail with any status, but must never crash, leak or hit
 * undefined behaviour, and what it returns must hang together: the same
 * bytes with and without an offsets buffer, and cell offsets that stay
 * inside their tile and never go backwards.  A broken promise aborts, so
 * libFuzzer saves the input.  The key is fixed (the corpus's oracle key),
 * so encrypted corpus tiles decode and the filters behind AES are reached.
 *
 * With FUZZ_DECODE_VERBOSE=1 in the environment each input's outcome is
 * printed, which is how to check that the seeds decode:
 *     FUZZ_DECODE_VERBOSE=1 ./fuzz_decode -runs=0 SEEDDIR
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/tf_file.h"
#include "util/tf_keys.h"
#include "format/tf_pipeline.h"
#include "format/tf_tile.h"

enum {
	FZ_VAR = 0x01,		/* cell_val_num = TF_CELL_VAR */
	FZ_KEY = 0x02,		/* encrypted: AES-256-GCM appended, key given */
	FZ_FOLDED = 0x04,	/* force the var-string path as tf_file does for
				 * folded offsets (string type, RLE/DICTIONARY first) */
};

#define FZ_HEADER 4
/* Far beyond any seed, small enough that a lying chunk header cannot make
 * a run slow or trip libFuzzer's memory limit. */
#define FZ_OUT_LIMIT ((size_t)64 << 20)

static const char oracle_key[] = "TileDB-oracle-key-0123456789ABCD";
static tf_key *key;
static bool verbose;

typedef struct fz_case {
	tf_pipeline *pipeline;	/* the effective one: AES appended when keyed */
	tf_chunk_env env;
	tf_span tiles;
} fz_case;

static void fz_fail(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_decode: %s: %s\n", what, detail);
	abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	tf_error err;

	(void)argc;
	(void)argv;
	verbose = getenv("FUZZ_DECODE_VERBOSE") != NULL;
	if (tf_key_from_bytes(oracle_key, strlen(oracle_key), &key, &err) != TF_OK)
		fz_fail("key", err.msg);
	return 0;
}

static bool first_filter_folds(const tf_pipeline *p)
{
	const tf_filter_class *c = tf_pipeline_class(p, 0);

	return c && (c->id == TF_F_RLE || c->id == TF_F_DICTIONARY);
}

/* Same rule as tf_file's cell_size_of: var cells count one element. */
static uint32_t cell_size_of(tf_datatype t, uint32_t cell_val_num)
{
	uint64_t n = cell_val_num == TF_CELL_VAR ? 1 : cell_val_num;

	return (uint32_t)(n * tf_datatype_size(t));
}

/* Split the input into its environment, its pipeline and its tile bytes;
 * false when the header or the pipeline cannot be read. */
static bool parse_case(const uint8_t *data, size_t size, fz_case *fc)
{
	tf_reader r;
	uint8_t flags;
	uint32_t cvn, version;
	tf_datatype type;

	if (size < FZ_HEADER)
		return false;
	type = (tf_datatype)(data[0] % TF_DT_COUNT);
	flags = data[1];
	cvn = flags & FZ_VAR ? TF_CELL_VAR : data[2] ? data[2] : 1;
	version = data[3] % 24 ? data[3] % 24 : 22;
	r = tf_reader_of(tf_span_of(data + FZ_HEADER, size - FZ_HEADER));
	if (tf_pipeline_deserialize(&r, &fc->pipeline, NULL) != TF_OK)
		return false;
	fc->env = (tf_chunk_env){ .type = type, .cell_size = cell_size_of(type, cvn),
				  .version = version, .key = flags & FZ_KEY ? key : NULL };
	/* tf_file takes the var-string path by TileDB's version rule, or for a
	 * folded offsets file whenever the data pipeline starts with RLE or
	 * DICTIONARY on a string type: nothing else ever reaches it. */
	fc->env.var_string = tf_var_string_applies(fc->pipeline, type, cvn, version) ||
			     (flags & FZ_FOLDED && cvn == TF_CELL_VAR &&
			      tf_datatype_is_var_string(type) && first_filter_folds(fc->pipeline));
	if (flags & FZ_KEY && tf_pipeline_append(fc->pipeline, TF_F_AES_256_GCM, NULL) != TF_OK) {
		tf_pipeline_free(fc->pipeline);
		return false;
	}
	fc->tiles = tf_span_of(r.p, r.n);
	return true;
}

/* Offsets of one tile: u64 each, never decreasing, none past the tile. */
static void check_offsets(const tf_buf *off, size_t first, uint64_t tile_len)
{
	uint64_t prev = 0;

	if ((off->len - first) % 8)
		fz_fail("offsets", "not a whole number of u64");
	for (size_t at = first; at < off->len; at += 8) {
		uint64_t v = tf_le64(off->p + at);

		if (v < prev || v > tile_len)
			fz_fail("offsets", "out of order or past the end of their tile");
		prev = v;
	}
}

static void report(const char *what, tf_status rc, const tf_error *err, size_t bytes)
{
	if (!verbose)
		return;
	if (rc == TF_OK)
		fprintf(stderr, "fuzz_decode: %s: %zu bytes\n", what, bytes);
	else
		fprintf(stderr, "fuzz_decode: %s: %s\n", what, err->msg);
}

/* Decode every tile like a reader of a data file does: until the bytes
 * end or a tile fails.  Returns the first failure or TF_OK. */
static tf_status decode_tiles(const fz_case *fc, tf_workspace *ws, tf_buf *out, tf_buf *offsets,
			      tf_error *err)
{
	tf_span rest = fc->tiles;
	tf_status rc = TF_OK;

	while (rc == TF_OK && rest.n) {
		size_t start = out->len, first = offsets ? offsets->len : 0;
		uint64_t used = 0;

		rc = tf_tile_decode(fc->pipeline, &fc->env, ws, rest, out, offsets, &used, err);
		if (rc != TF_OK)
			break;
		if (used == 0 || used > rest.n)
			fz_fail("tile", "consumed no bytes or more than there were");
		if (offsets)
			check_offsets(offsets, first, out->len - start);
		rest = tf_span_of(rest.p + used, rest.n - (size_t)used);
	}
	return rc;
}

static void decode_as_tiles(const fz_case *fc, tf_workspace *ws)
{
	tf_buf plain = TF_BUF_INIT(FZ_OUT_LIMIT), with = TF_BUF_INIT(FZ_OUT_LIMIT);
	tf_buf offsets = TF_BUF_INIT(FZ_OUT_LIMIT);
	tf_error err;
	tf_status a, b;

	a = decode_tiles(fc, ws, &plain, NULL, &err);
	report("tiles", a, &err, plain.len);
	if (fc->env.var_string) {
		/* Asking for the offsets must not change what is decoded. */
		b = decode_tiles(fc, ws, &with, &offsets, &err);
		if (a != b)
			fz_fail("tile", "status differs with an offsets buffer");
		if (a == TF_OK && (plain.len != with.len ||
				   (plain.len && memcmp(plain.p, with.p, plain.len))))
			fz_fail("tile", "bytes differ with an offsets buffer");
	}
	tf_buf_free(&plain);
	tf_buf_free(&with);
	tf_buf_free(&offsets);
}

static void decode_as_generic(const fz_case *fc, tf_workspace *ws)
{
	tf_buf out = TF_BUF_INIT(FZ_OUT_LIMIT);
	tf_error err;
	uint64_t used = 0;
	tf_status rc = tf_generic_decode(fc->tiles, fc->env.key, ws, &out, &used, &err);

	report("generic", rc, &err, out.len);
	if (rc == TF_OK && (used == 0 || used > fc->tiles.n))
		fz_fail("generic", "used length outside the input");
	tf_buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tf_workspace *ws;
	fz_case fc;

	if (!parse_case(data, size, &fc))
		return 0;
	/* A fresh workspace per input, so that every saved input reproduces
	 * on its own. */
	if (!(ws = tf_workspace_new()))
		fz_fail("workspace", "out of memory");
	decode_as_tiles(&fc, ws);
	decode_as_generic(&fc, ws);
	tf_workspace_free(ws);
	tf_pipeline_free(fc.pipeline);
	return 0;
}
