/* tf_test.c - shared helpers of the unit tests. */
#include "tf_test.h"

#include <dirent.h>
#include <glob.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *tf_test_corpus(void)
{
	static const char *const candidates[] = { "../shared/corpus", "../../shared/corpus" };
	const char *env = getenv("TF_CORPUS");
	struct stat sb;

	if (env && *env)
		return stat(env, &sb) == 0 ? env : NULL;
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++)
		if (stat(candidates[i], &sb) == 0 && S_ISDIR(sb.st_mode))
			return candidates[i];
	return NULL;
}

static uint64_t next(uint64_t *s)	/* splitmix64 */
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void put_elem(uint8_t *p, size_t n, size_t at, unsigned elem, uint64_t v)
{
	for (unsigned b = 0; b < elem && at + b < n; b++)
		p[at + b] = (uint8_t)(v >> (8 * b));
}

void tf_test_fill(uint8_t *p, size_t n, tf_gen kind, unsigned elem, uint64_t seed)
{
	uint64_t s = seed, v = next(&s), run = 0;

	if (elem == 0)
		elem = 1;
	for (size_t i = 0, at = 0; at < n; i++, at += elem) {
		switch (kind) {
		case TF_GEN_RANDOM: v = next(&s); break;
		case TF_GEN_WALK: v += (next(&s) % 7) - 3; break;
		case TF_GEN_RUNS:
			if (run-- == 0) { v = next(&s) % 5; run = next(&s) % 40; }
			break;
		case TF_GEN_RAMP: v = i * 3 + 7; break;
		case TF_GEN_ZERO: v = 0; break;
		case TF_GEN_FLOATS:
			if (elem == 8) {
				double d = (double)(int64_t)(next(&s) % 200000) / 16.0 - 5000.0;
				memcpy(&v, &d, 8);
			} else {
				float f = (float)(int64_t)(next(&s) % 200000) / 16.0f - 5000.0f;
				uint32_t u;
				memcpy(&u, &f, 4);
				v = u;
			}
			break;
		}
		put_elem(p, n, at, elem, v);
	}
}

uint8_t *tf_test_data(size_t n, tf_gen kind, unsigned elem, uint64_t seed)
{
	uint8_t *p = malloc(n ? n : 1);

	ck_assert_ptr_nonnull(p);
	tf_test_fill(p, n, kind, elem, seed);
	return p;
}

size_t tf_test_roundtrip_env(const tf_pipeline *p, const tf_chunk_env *env,
			     const uint8_t *in, size_t n)
{
	tf_workspace *ws = tf_workspace_new();
	tf_buf chunk = TF_BUF_INIT(SIZE_MAX);
	uint8_t *back = malloc(n ? n : 1);
	tf_error err = { 0 };
	tf_status rc;

	ck_assert_ptr_nonnull(ws);
	rc = tf_pipeline_encode(p, env, ws, tf_span_of(in, n), NULL, 0, &chunk, &err);
	ck_assert_msg(rc == TF_OK, "encode: %s", err.msg);
	rc = tf_chunk_decode(p, env, ws, tf_span_of(chunk.p, chunk.len), back, NULL, &err);
	ck_assert_msg(rc == TF_OK, "decode: %s", err.msg);
	ck_assert_msg(n == 0 || memcmp(in, back, n) == 0, "round trip of %zu bytes differs", n);
	free(back);
	tf_workspace_free(ws);
	n = chunk.len;
	tf_buf_free(&chunk);
	return n;
}

size_t tf_test_roundtrip(const char *spec, tf_datatype type, uint32_t cell_size,
			 const uint8_t *in, size_t n)
{
	tf_chunk_env env = { .type = type, .cell_size = cell_size, .version = 22 };
	tf_pipeline *p;
	tf_error err;
	size_t stored;

	ck_assert_msg(tf_pipeline_parse(spec, &p, &err) == TF_OK, "%s: %s", spec, err.msg);
	stored = tf_test_roundtrip_env(p, &env, in, n);
	tf_pipeline_free(p);
	return stored;
}

uint8_t *tf_test_read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p;
	long len;

	ck_assert_msg(f != NULL, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	p = malloc(len ? (size_t)len : 1);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(fread(p, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	*n = (size_t)len;
	return p;
}

tf_status tf_test_decode_tiles(const char *spec, const tf_chunk_env *env, const uint8_t *file,
			       size_t n, tf_buf *out, tf_error *err)
{
	tf_workspace *ws = tf_workspace_new();
	tf_pipeline *p = NULL;
	tf_status rc = tf_pipeline_parse(spec, &p, err);

	tf_buf_init(out, SIZE_MAX);
	for (size_t pos = 0; rc == TF_OK && pos < n;) {
		uint64_t used;
		rc = tf_tile_decode(p, env, ws, tf_span_of(file + pos, n - pos), out, NULL, &used, err);
		pos += used;
	}
	tf_pipeline_free(p);
	tf_workspace_free(ws);
	return rc;
}

bool tf_test_corpus_check(const char *case_name, unsigned frag, const char *file,
			  const char *spec, const tf_chunk_env *env)
{
	const char *root = tf_test_corpus();
	char pattern[4096], expected[4096];
	uint8_t *data, *want;
	size_t n, wn;
	tf_buf out;
	tf_error err = { 0 };
	glob_t g;

	if (!root)
		return false;
	snprintf(pattern, sizeof(pattern), "%s/%s/array/__fragments/*/%s", root, case_name, file);
	ck_assert_msg(glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > frag, "no %s", pattern);
	data = tf_test_read_file(g.gl_pathv[frag], &n);
	snprintf(expected, sizeof(expected), "%s/%s/expected/unfiltered/f%u/%s.bin", root, case_name,
		 frag, file);
	want = tf_test_read_file(expected, &wn);
	ck_assert_msg(tf_test_decode_tiles(spec, env, data, n, &out, &err) == TF_OK, "%s/%s: %s",
		      case_name, file, err.msg);
	ck_assert_msg(out.len == wn && memcmp(out.p, want, wn) == 0,
		      "%s/%s: decoded %zu bytes differ from the %zu expected", case_name, file, out.len, wn);
	tf_buf_free(&out);
	free(data);
	free(want);
	globfree(&g);
	return true;
}

static tf_source *test_root;

static void free_test_root(void)
{
	tf_source_free(test_root);
	test_root = NULL;
}

tf_source *tf_test_root(void)
{
	tf_error err;

	if (!test_root) {
		ck_assert_msg(tf_source_local("/", &test_root, &err) == TF_OK, "%s", err.msg);
		atexit(free_test_root);
	}
	return test_root;
}

tf_status tf_test_file_open(const char *path, const char *name, const tf_file_spec *spec, tf_file **out,
			    tf_error *err)
{
	tf_file_spec s = *spec;
	char *full = realpath(path, NULL), *var = spec->var_data ? realpath(spec->var_data, NULL) : NULL;
	tf_status rc;

	ck_assert_msg(full && (!spec->var_data || var), "%s: no such file", path);
	s.var_data = var ? var + 1 : NULL;
	rc = tf_file_open(tf_test_root(), full + 1, name ? name : path, NULL, &s, out, err);
	free(full);
	free(var);
	return rc;
}

static char tmpdir[64];

void tf_test_tmp_setup(void)
{
	strcpy(tmpdir, "/tmp/tf_test.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

void tf_test_tmp_teardown(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	char path[PATH_MAX];

	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			tf_test_tmp_path(path, e->d_name);
			unlink(path);
		}
	if (d)
		closedir(d);
	rmdir(tmpdir);
}

void tf_test_tmp_path(char *out, const char *name)
{
	int n = snprintf(out, PATH_MAX, "%s/%s", tmpdir, name);

	ck_assert_msg(n >= 0 && n < PATH_MAX, "path too long");
}

void tf_test_write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");

	ck_assert_msg(f != NULL, "cannot create %s", path);
	ck_assert_uint_eq(fwrite(p, 1, n, f), n);
	ck_assert_int_eq(fclose(f), 0);
}

tf_pipeline *tf_test_pipeline(const char *spec)
{
	tf_pipeline *p;
	tf_error err;

	ck_assert_msg(tf_pipeline_parse(spec, &p, &err) == TF_OK, "%s: %s", spec, err.msg);
	return p;
}

tf_file *tf_test_file_ok(const char *path, const tf_file_spec *spec)
{
	tf_file *f;
	tf_error err;

	ck_assert_msg(tf_test_file_open(path, NULL, spec, &f, &err) == TF_OK, "%s", err.msg);
	return f;
}

tf_handle *tf_test_handle_ok(tf_file *f)
{
	tf_handle *h;
	tf_error err;

	ck_assert_msg(tf_handle_open(f, &h, &err) == TF_OK, "%s", err.msg);
	return h;
}

void tf_test_sh(const char *fmt, ...)
{
	char cmd[3 * PATH_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	ck_assert(n > 0 && (size_t)n < sizeof(cmd));
	ck_assert_msg(system(cmd) == 0, "%s", cmd);
}
