/*
 * tf_test.h - helpers shared by the Check unit tests.
 *
 * Each test program is one file with one suite; TF_TEST_MAIN(suite_fn)
 * supplies main().  Data generators are deterministic (seeded), so a
 * failure reproduces exactly.
 */
#ifndef TF_TEST_H
#define TF_TEST_H

#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "sources/source_local.h"
#include "cache/tf_handle.h"
#include "format/tf_file.h"
#include "format/tf_pipeline.h"
#include "sources/tf_source.h"
#include "sources/tf_source_open.h"
#include "format/tf_tile.h"

/* Where the TileDB-written corpus lives (../shared/corpus beside the
 * project), or NULL if it is absent.  TF_CORPUS in the environment wins. */
const char *tf_test_corpus(void);

/* The local source "/" shared by a test program (freed at exit), and
 * tf_file_open of an absolute path through it (spec->var_data, if any,
 * absolute too). */
tf_source *tf_test_root(void);
tf_status tf_test_file_open(const char *path, const char *name, const tf_file_spec *spec, tf_file **out,
			    tf_error *err);

/* A fresh temporary directory per test (a checked fixture: setup creates
 * it, teardown removes it and the files in it), and paths in it
 * (out[PATH_MAX]; a path that does not fit fails the test). */
void tf_test_tmp_setup(void);
void tf_test_tmp_teardown(void);
void tf_test_tmp_path(char *out, const char *name);
/* Run a shell command made from fmt, or fail the test naming it. */
void tf_test_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Write n bytes to path (created or truncated), or fail the test. */
void tf_test_write_file(const char *path, const void *p, size_t n);
/* A parsed pipeline spec ("zstd | checksum_md5"), or fail the test. */
tf_pipeline *tf_test_pipeline(const char *spec);
/* tf_test_file_open and tf_handle_open that fail the test on error. */
tf_file *tf_test_file_ok(const char *path, const tf_file_spec *spec);
tf_handle *tf_test_handle_ok(tf_file *f);

/* Deterministic generators filling n bytes. */
typedef enum {
	TF_GEN_RANDOM,	/* uniform random bytes */
	TF_GEN_WALK,	/* random walk of `elem`-byte integers (small steps) */
	TF_GEN_RUNS,	/* runs of repeated `elem`-byte values */
	TF_GEN_RAMP,	/* x_i = i * 3 + 7 as `elem`-byte integers */
	TF_GEN_ZERO,
	TF_GEN_FLOATS,	/* doubles (elem 8) or floats (elem 4) of modest range */
} tf_gen;
void tf_test_fill(uint8_t *p, size_t n, tf_gen kind, unsigned elem, uint64_t seed);
/* malloc'd buffer of n bytes (never NULL; n may be 0). */
uint8_t *tf_test_data(size_t n, tf_gen kind, unsigned elem, uint64_t seed);

/* Encode `in` as one chunk with spec/type/cell size, decode it back and
 * ck_assert that the bytes match.  Returns the stored chunk size. */
size_t tf_test_roundtrip(const char *spec, tf_datatype type, uint32_t cell_size,
			 const uint8_t *in, size_t n);

/* Same, with a fully specified environment and pipeline. */
size_t tf_test_roundtrip_env(const tf_pipeline *p, const tf_chunk_env *env,
			     const uint8_t *in, size_t n);

/* Read a whole file (ck_assert on failure); *n receives its size. */
uint8_t *tf_test_read_file(const char *path, size_t *n);

/*
 * Decode every tile of a tile file held in memory with the given pipeline
 * spec and environment; returns TF_OK and fills *out (caller frees) or the
 * error.  A test of one filter against TileDB's bytes uses this.
 */
tf_status tf_test_decode_tiles(const char *spec, const tf_chunk_env *env, const uint8_t *file,
			       size_t n, tf_buf *out, tf_error *err);

/*
 * Known-answer test against the corpus: decode data file `file` (e.g.
 * "a0.tdb") of fragment `frag` (0-based, fragments sorted by name) of corpus
 * case `case_name` with pipeline `spec` and env, and ck_assert the bytes
 * equal expected/unfiltered/f<frag>/<file>.bin.  Returns false (and
 * checks nothing) when the corpus is absent.
 */
bool tf_test_corpus_check(const char *case_name, unsigned frag, const char *file,
			  const char *spec, const tf_chunk_env *env);

#define TF_TEST_MAIN(suite_fn)                                              \
	int main(void)                                                      \
	{                                                                   \
		SRunner *sr = srunner_create(suite_fn());                   \
		int failed;                                                 \
		srunner_run_all(sr, CK_NORMAL);                             \
		failed = srunner_ntests_failed(sr);                         \
		srunner_free(sr);                                           \
		return failed ? EXIT_FAILURE : EXIT_SUCCESS;                \
	}

#endif
