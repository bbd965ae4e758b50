/*
 * test_plugins.c - filter plugins (filters/plugin.c, hdf5.c), the hdf5:ID
 * spec form with netCDF constants, and the _Filter / _Codecs views of a
 * pipeline (tf_pipeline_attr.c).
 *
 * Plugins come from the build (TF_TEST_PLUGINS: tests/plugins/{good,bad},
 * TF_SAMPLE_PLUGINS: contrib/plugins) and from Debian's hdf5-filter-plugin
 * package (TF_HDF5_PLUGINS: libh5bz2.so, libh5lz4.so).  Without the Debian
 * package its test case is left out with a message (an error when
 * TILEFS_CI=1).
 */
#include "tf_test.h"

#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "filters/callout.h"
#include "filters/plugin.h"
#include "format/tf_pipeline_attr.h"
#include "config/tf_config.h"

/* Sanitizer builds: Debian's libh5bz2.so leaks on a corrupt stream, which
 * test_debian_plugins decodes on purpose (tests/lsan.supp says more). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:BZ2_bzDecompressInit\nleak:BZ2_decompress\n";
}

static const char *dir_of(const char *var, const char *sub, char *buf, size_t n)
{
	const char *d = getenv(var);

	ck_assert_msg(d && *d, "%s is not set (run through make check)", var);
	ck_assert_uint_lt((size_t)snprintf(buf, n, "%s%s", d, sub), n);
	return buf;
}

typedef struct warns {
	int n;
	char all[4096];
} warns;

static void on_warn(void *ctx, const char *msg)
{
	warns *w = ctx;
	size_t len = strlen(w->all);

	w->n++;
	snprintf(w->all + len, sizeof(w->all) - len, "%s\n", msg);
}

static tf_plugins *load(const char *path, warns *w)
{
	tf_plugins *pl = NULL;
	tf_error err;

	ck_assert_msg(tf_plugins_load(path, on_warn, w, &pl, &err) == TF_OK, "%s", err.msg);
	return pl;
}

static tf_pipeline *parse(const tf_plugins *pl, const char *spec)
{
	tf_pipeline *p = NULL;
	tf_error err;

	ck_assert_msg(tf_pipeline_parse_with(spec, pl, &p, &err) == TF_OK, "%s: %s", spec, err.msg);
	return p;
}

static void expect_parse_error(const tf_plugins *pl, const char *spec, const char *want)
{
	tf_pipeline *p = NULL;
	tf_error err;

	ck_assert_msg(tf_pipeline_parse_with(spec, pl, &p, &err) == TF_E_INVAL, "%s parsed", spec);
	ck_assert_msg(strstr(err.msg, want), "%s: '%s' lacks '%s'", spec, err.msg, want);
}

/* Encode n bytes as one tile (64 KiB chunks), decode it, compare; returns
 * the stored size.  The tile is left in *stored when non-NULL. */
static size_t roundtrip(const tf_pipeline *p, tf_datatype t, const uint8_t *in, size_t n, tf_buf *stored)
{
	tf_chunk_env env = { .type = t, .cell_size = tf_datatype_size(t), .version = 22 };
	tf_workspace *ws = tf_workspace_new();
	tf_buf enc = TF_BUF_INIT(SIZE_MAX), dec = TF_BUF_INIT(SIZE_MAX);
	uint64_t used;
	tf_error err;
	size_t size;

	ck_assert_msg(tf_tile_encode(p, &env, ws, tf_span_of(in, n), NULL, 0, &enc, &err) == TF_OK,
		      "encode: %s", err.msg);
	ck_assert_msg(tf_tile_decode(p, &env, ws, tf_span_of(enc.p, enc.len), &dec, NULL, &used, &err) == TF_OK,
		      "decode: %s", err.msg);
	ck_assert_uint_eq(used, enc.len);
	ck_assert_uint_eq(dec.len, n);
	ck_assert(n == 0 || memcmp(dec.p, in, n) == 0);
	size = enc.len;
	if (stored)
		*stored = enc;
	else
		tf_buf_free(&enc);
	tf_buf_free(&dec);
	tf_workspace_free(ws);
	return size;
}

static tf_status decode_tile(const tf_pipeline *p, tf_datatype t, tf_span stored, tf_buf *out, tf_error *err)
{
	tf_chunk_env env = { .type = t, .cell_size = tf_datatype_size(t), .version = 22 };
	tf_workspace *ws = tf_workspace_new();
	uint64_t used;
	tf_status rc = tf_tile_decode(p, &env, ws, stored, out, NULL, &used, err);

	tf_workspace_free(ws);
	return rc;
}

static void expect_views(const tf_pipeline *p, tf_datatype t, const char *filter, const char *codecs)
{
	char *f = tf_pipeline_filter_attr(p), *c = tf_pipeline_codecs_json(p, t);

	ck_assert_str_eq(f, filter);
	ck_assert_str_eq(c, codecs);
	free(f);
	free(c);
}

/* ---- the sample tilefs plugin (contrib/plugins/bytexor.c) ----------------------------------- */

START_TEST(test_sample_plugin)
{
	char d[PATH_MAX];
	warns w = { 0 };
	tf_plugins *pl = load(dir_of("TF_SAMPLE_PLUGINS", "", d, sizeof(d)), &w);
	uint8_t *in = tf_test_data(200000, TF_GEN_RUNS, 4, 7);
	tf_pipeline *p, *q;
	char *text;

	ck_assert_int_eq(w.n, 0);
	ck_assert_ptr_eq(tf_plugins_by_name(pl, "BYTEXOR", 7), tf_plugins_by_id(pl, 200));
	ck_assert_uint_eq(tf_plugins_count(pl), 1);
	ck_assert_ptr_null(tf_plugins_by_hdf5_id(pl, 200));
	p = parse(pl, "bytexor(90) | zstd");
	q = parse(pl, "200,90 | 2");
	text = tf_pipeline_text(q);
	ck_assert_str_eq(text, "bytexor(90) | zstd(level=-1)");
	free(text);
	ck_assert_uint_eq(roundtrip(p, TF_DT_INT32, in, 200000, NULL), roundtrip(q, TF_DT_INT32, in, 200000, NULL));
	expect_views(p, TF_DT_INT32, "200,90|2,4294967295",
		     "[{\"id\": \"tilefs.bytexor\", \"cd_values\": [90]}, {\"id\": \"zstd\", \"level\": -1}]");
	tf_pipeline_free(q);
	q = parse(pl, "bytexor");	/* default key */
	roundtrip(q, TF_DT_UINT8, in, 1000, NULL);
	tf_pipeline_free(q);
	/* Metadata of the filters before it passes through it (decoded on its
	 * own thread, on copies: filters/plugin.c native_decode). */
	q = parse(pl, "checksum_md5 | bytexor(3) | byteshuffle | checksum_sha256");
	roundtrip(q, TF_DT_INT32, in, 200000, NULL);
	expect_parse_error(pl, "bytexor(300)", "key byte");
	expect_parse_error(pl, "bytexor(1, 2)", "key byte");
	expect_parse_error(NULL, "bytexor", "unknown filter 'bytexor' (not built in; no plugin path is set)");
	expect_parse_error(NULL, "200", "unknown filter id '200' (not built in; no plugin path is set)");
	tf_pipeline_free(p);
	tf_pipeline_free(q);
	tf_plugins_free(pl);
	free(in);
}
END_TEST

/* ---- plugins that must be refused --------------------------------------------------------- */

START_TEST(test_refused_plugins)
{
	char bad[PATH_MAX], tmp[] = "/tmp/tf_plugins.XXXXXX", corrupt[PATH_MAX + 16], path[3 * PATH_MAX];
	warns w = { 0 };
	tf_plugins *pl;
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(tmp));
	snprintf(corrupt, sizeof(corrupt), "%s/corrupt.so", tmp);
	ck_assert_ptr_nonnull(f = fopen(corrupt, "w"));
	fputs("\177ELF but not really\n", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s:%s:/nonexistent/plugins", dir_of("TF_TEST_PLUGINS", "/bad", bad, sizeof(bad)), tmp);
	pl = load(path, &w);
	ck_assert_msg(w.n == 1 && strstr(w.all, "plugin directory /nonexistent/plugins skipped: No such file"),
		      "%s", w.all);
	/* Each file is tried when a pipeline names a filter no plugin before it provides. */
	expect_parse_error(pl, "hdf5:40000", "no HDF5 plugin provides filter 40000 (plugin path '");
	ck_assert_uint_eq(tf_plugins_count(pl), 0);
	ck_assert_msg(w.n == 5, "%d warnings:\n%s", w.n, w.all);
	ck_assert_msg(strstr(w.all, "/abi.so skipped: built for plugin ABI 99, this tilefs has 1"), "%s", w.all);
	ck_assert_msg(strstr(w.all, "/builtin.so skipped: filter id 2 is TileDB's zstd: a plugin cannot replace it"), "%s", w.all);
	ck_assert_msg(strstr(w.all, "/h5type.so skipped: H5PLget_plugin_type() is 1, not a filter (0)"), "%s", w.all);
	ck_assert_msg(strstr(w.all, "/corrupt.so skipped: "), "%s", w.all);
	expect_parse_error(pl, "newer", "unknown filter 'newer' (not built in; plugin path '");
	ck_assert_int_eq(w.n, 5);	/* once each */
	tf_plugins_free(pl);
	unlink(corrupt);
	rmdir(tmp);
}
END_TEST

/* Which plugin directories are trusted: every directory on the way and
 * every symlink followed (filters/plugin.c open_trusted_dir). */
static size_t count_in(const char *path, warns *w)
{
	tf_plugins *pl;
	size_t n;

	memset(w, 0, sizeof(*w));
	pl = load(path, w);
	n = tf_plugins_by_name(pl, "bytexor", 7) ? 1 : 0;
	tf_plugins_free(pl);
	return n;
}

START_TEST(test_plugin_dir_trust)
{
	char tmp[] = "/tmp/tf_plugtrust.XXXXXX", sample[PATH_MAX], p[3][PATH_MAX + 64], want[3 * PATH_MAX];
	struct passwd *nobody = getpwnam("nobody");
	warns w;

	ck_assert_ptr_nonnull(nobody);
	dir_of("TF_SAMPLE_PLUGINS", "", sample, sizeof(sample));
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	/* A symlink of ours to a trusted directory is followed, "." and ".." too. */
	snprintf(p[0], sizeof(p[0]), "%s/mine", tmp);
	ck_assert_int_eq(symlink(sample, p[0]), 0);
	ck_assert_uint_eq(count_in(p[0], &w), 1);
	snprintf(p[1], sizeof(p[1]), "%s/./../%s/mine/", tmp, strrchr(tmp, '/') + 1);
	ck_assert_uint_eq(count_in(p[1], &w), 1);
	ck_assert_msg(w.n == 0, "%s", w.all);
	/* Someone else's symlink chooses where we would go: refused. */
	snprintf(p[1], sizeof(p[1]), "%s/theirs", tmp);
	ck_assert_int_eq(symlink(sample, p[1]), 0);
	ck_assert_int_eq(lchown(p[1], nobody->pw_uid, (gid_t)-1), 0);
	ck_assert_uint_eq(count_in(p[1], &w), 0);
	snprintf(want, sizeof(want), "plugin directory %s refused: symlink %s is owned by uid %u (not root or uid %u)\n",
		 p[1], p[1], (unsigned)nobody->pw_uid, (unsigned)geteuid());
	ck_assert_str_eq(w.all, want);
	/* A sticky directory others may write: fine above a plugin directory,
	 * not as one (anyone could add a file to it). */
	snprintf(p[2], sizeof(p[2]), "%s/sticky", tmp);
	ck_assert_int_eq(mkdir(p[2], 0755), 0);
	ck_assert_int_eq(chmod(p[2], 01777), 0);
	strcat(p[2], "/mine");
	ck_assert_int_eq(symlink(sample, p[2]), 0);
	ck_assert_uint_eq(count_in(p[2], &w), 1);
	ck_assert_msg(w.n == 0, "%s", w.all);
	*strrchr(p[2], '/') = '\0';
	ck_assert_uint_eq(count_in(p[2], &w), 0);
	ck_assert_msg(strstr(w.all, "/sticky is writable by others (mode 1777)"), "%s", w.all);
	/* A symlink loop is an error, not a hang. */
	snprintf(want, sizeof(want), "%s/loop", tmp);
	ck_assert_int_eq(symlink(want, want), 0);
	ck_assert_uint_eq(count_in(want, &w), 0);
	ck_assert_msg(strstr(w.all, "skipped: Too many levels of symbolic links"), "%s", w.all);
	unlink(want);
	strcat(p[2], "/mine");
	unlink(p[2]);
	*strrchr(p[2], '/') = '\0';
	rmdir(p[2]);
	unlink(p[1]);
	unlink(p[0]);
	rmdir(tmp);
}
END_TEST

/* Nothing is loaded until a pipeline names a filter no loaded plugin
 * provides, and then only the files up to the first that does, in path
 * order (tests/plugins/fake.c: the marker plugin's constructor appends to
 * $TF_PLUGIN_MARKER). */
static bool marked(const char *marker)
{
	struct stat st;

	return stat(marker, &st) == 0;
}

START_TEST(test_lazy_loading)
{
	char good[PATH_MAX], marker_dir[PATH_MAX], path[2 * PATH_MAX + 2], tmp[] = "/tmp/tf_pluglazy.XXXXXX";
	char marker[sizeof(tmp) + 8];
	tf_pipeline *p;
	tf_plugins *pl;
	warns w = { 0 };

	dir_of("TF_TEST_PLUGINS", "/good", good, sizeof(good));
	dir_of("TF_TEST_PLUGINS", "/marker", marker_dir, sizeof(marker_dir));
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	snprintf(marker, sizeof(marker), "%s/marker", tmp);
	setenv("TF_PLUGIN_MARKER", marker, 1);
	/* Listed, even first: not loaded while nothing names a plugin filter. */
	snprintf(path, sizeof(path), "%s:%s", marker_dir, good);
	pl = load(path, &w);
	p = parse(pl, "tiledb:19,-1,1 | zstd | 2");
	tf_pipeline_free(p);
	ck_assert_uint_eq(tf_plugins_count(pl), 0);
	tf_plugins_free(pl);
	ck_assert(!marked(marker));
	/* Named: the files up to the first provider, in path order. */
	snprintf(path, sizeof(path), "%s:%s", good, marker_dir);
	pl = load(path, &w);
	p = parse(pl, "hdf5:40000");
	ck_assert_uint_eq(tf_plugins_count(pl), 1);
	ck_assert(!marked(marker));
	tf_pipeline_free(p);
	p = parse(pl, "hdf5:40001 | 40000");	/* now the marker, the one that provides it */
	ck_assert(marked(marker));
	ck_assert_uint_eq(tf_plugins_count(pl), 2);
	ck_assert_str_eq(tf_plugins_file(pl, 1), strcat(marker_dir, "/marker.so"));
	tf_pipeline_free(p);
	tf_plugins_free(pl);
	ck_assert_msg(w.n == 0, "%s", w.all);
	unsetenv("TF_PLUGIN_MARKER");
	unlink(marker);
	rmdir(tmp);
}
END_TEST

START_TEST(test_duplicate_plugins)
{
	char good[PATH_MAX], path[4 * PATH_MAX + 4], sample[PATH_MAX];
	warns w = { 0 };
	tf_plugins *pl;

	dir_of("TF_TEST_PLUGINS", "/good", good, sizeof(good));
	dir_of("TF_SAMPLE_PLUGINS", "", sample, sizeof(sample));
	snprintf(path, sizeof(path), "%s:%s:%s:%s", good, sample, good, sample);
	pl = load(path, &w);
	ck_assert_ptr_null(tf_plugins_by_hdf5_id(pl, 40009));	/* every file tried */
	ck_assert_uint_eq(tf_plugins_count(pl), 2);
	ck_assert_msg(w.n == 2 && strstr(w.all, "HDF5 filter 40000 is provided by ") &&
		      strstr(w.all, "filter 200 'bytexor' clashes with 200 'bytexor' of "), "%s", w.all);
	tf_plugins_free(pl);
}
END_TEST

/* ---- an HDF5 plugin's buffer handling (tests/plugins/fake.c, id 40000) -------------------- */

START_TEST(test_hdf5_buffers)
{
	char good[PATH_MAX];
	warns w = { 0 };
	tf_plugins *pl = load(dir_of("TF_TEST_PLUGINS", "/good", good, sizeof(good)), &w);
	uint8_t *in = tf_test_data(150000, TF_GEN_WALK, 2, 3);
	tf_pipeline *grow = parse(pl, "hdf5:40000"), *swap = parse(pl, "40000,2 | md5");
	tf_pipeline *lie = parse(pl, "hdf5:40000,1"), *lie_inner = parse(pl, "zstd | hdf5:40000,1");
	tf_pipeline *inner = parse(pl, "zstd | hdf5:40000");
	tf_buf stored, out = TF_BUF_INIT(SIZE_MAX);
	tf_error err;

	ck_assert_int_eq(w.n, 0);
	/* Each chunk grows by the plugin's 8-byte header, nothing else. */
	ck_assert_uint_eq(roundtrip(grow, TF_DT_INT16, in, 150000, NULL), 8 + 3 * (12 + 8) + 150000);
	roundtrip(swap, TF_DT_INT16, in, 150000, NULL);
	roundtrip(grow, TF_DT_INT16, in, 0, NULL);	/* an empty tile */
	/* A plugin claiming more bytes than the chunk header allows. */
	roundtrip(grow, TF_DT_INT16, in, 150000, &stored);
	ck_assert_int_eq(decode_tile(lie, TF_DT_INT16, tf_span_of(stored.p, stored.len), &out, &err), TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "chunk 0: filter 0 (hdf5:40000): output of 65636 bytes exceeds its "
			     "expected size 65536"), "%s", err.msg);
	/* A plugin saying it wrote more than the buffer it hands back holds, in
	 * *buf_size (3) or only by what malloc gave it (4): refused before a
	 * byte is copied (the copy read past its buffer: garbage, or a crash). */
	for (unsigned mode = 3; mode <= 4; mode++) {
		char spec[32];
		tf_pipeline *over;

		snprintf(spec, sizeof(spec), "hdf5:40000,%u", mode);
		over = parse(pl, spec);
		out.len = 0;
		ck_assert_int_eq(decode_tile(over, TF_DT_INT16, tf_span_of(stored.p, stored.len), &out, &err),
				 TF_E_CORRUPT);
		ck_assert_msg(strstr(err.msg, "chunk 0: filter 0 (hdf5:40000): the HDF5 plugin returned 65536 "
				     "bytes in a buffer of "), "%s", err.msg);
		tf_pipeline_free(over);
	}
	/* A stream the plugin refuses: its failure, named. */
	stored.p[TF_TILE_HEADER_SIZE + TF_CHUNK_HEADER_SIZE + 3] ^= 1;
	out.len = 0;
	ck_assert_int_eq(decode_tile(grow, TF_DT_INT16, tf_span_of(stored.p, stored.len), &out, &err), TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "filter 0 (hdf5:40000): the HDF5 plugin's filter failed (decoding "), "%s", err.msg);
	tf_buf_free(&stored);
	/* ... or more than the next stage's input had: that stage sees it. */
	roundtrip(inner, TF_DT_INT16, in, 1000, &stored);
	out.len = 0;
	ck_assert_int_eq(decode_tile(lie_inner, TF_DT_INT16, tf_span_of(stored.p, stored.len), &out, &err), TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "zstd: 100 bytes of data beyond its parts"), "%s", err.msg);
	tf_buf_free(&stored);
	tf_buf_free(&out);
	tf_pipeline_free(grow), tf_pipeline_free(swap), tf_pipeline_free(lie), tf_pipeline_free(lie_inner);
	tf_pipeline_free(inner);
	tf_plugins_free(pl);
	free(in);
}
END_TEST

/* A tilefs plugin's output must lie in the buffers it was given (its input,
 * its outputs): one elsewhere is refused, not copied from (fake.c KIND_WILD). */
START_TEST(test_native_output_bounds)
{
	char wild[PATH_MAX];
	warns w = { 0 };
	tf_plugins *pl = load(dir_of("TF_TEST_PLUGINS", "/wild", wild, sizeof(wild)), &w);
	tf_pipeline *none = parse(pl, ""), *p = parse(pl, "wild");
	static const uint8_t in[16] = "the data, 16 B.";
	tf_buf stored, out = TF_BUF_INIT(SIZE_MAX);
	tf_error err;

	roundtrip(none, TF_DT_UINT8, in, sizeof(in), &stored);
	ck_assert_int_eq(decode_tile(p, TF_DT_UINT8, tf_span_of(stored.p, stored.len), &out, &err), TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "filter 0 (wild): the plugin left its output outside the buffers it was given"),
		      "%s", err.msg);
	tf_buf_free(&stored);
	tf_buf_free(&out);
	tf_pipeline_free(none), tf_pipeline_free(p);
	tf_plugins_free(pl);
}
END_TEST

/* ---- calls into plugin code that never return (filters/callout.c) ------------------------- */

/* A job that tells it started, then waits for its gate; drop tells it ran. */
typedef struct blocker {
	int started[2], gate[2], dropped[2];	/* pipes */
	tf_callout *c;
	tf_status rc;
} blocker;

static void block_job(void *job)
{
	blocker *b = job;
	char x = 1;

	ck_assert_int_eq(write(b->started[1], &x, 1), 1);
	ck_assert_int_eq(read(b->gate[0], &x, 1), 1);
}

static void drop_job(void *job)
{
	blocker *b = job;
	char x = 1;

	ck_assert_int_eq(write(b->dropped[1], &x, 1), 1);
}

static void *call_blocker(void *arg)
{
	blocker *b = arg;
	tf_error err;

	b->rc = tf_callout_run(b->c, block_job, drop_job, b, &err);
	return NULL;
}

static bool readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1;
}

static void blocker_init(blocker *b, tf_callout *c)
{
	memset(b, 0, sizeof(*b));
	ck_assert(pipe(b->started) == 0 && pipe(b->gate) == 0 && pipe(b->dropped) == 0);
	b->c = c;
}

static void blocker_close(blocker *b)
{
	for (int i = 0; i < 2; i++)
		close(b->started[i]), close(b->gate[i]), close(b->dropped[i]);
}

START_TEST(test_callout_stop)
{
	blocker hung, queued, late;
	pthread_t t1, t2;
	tf_callout *c;
	tf_error err;
	char x = 1;

	ck_assert(tf_callout_new(1, &c, &err) == TF_OK);
	blocker_init(&hung, c), blocker_init(&queued, c), blocker_init(&late, c);
	/* A call that returns: TF_OK, the job is the caller's (not dropped). */
	ck_assert_int_eq(write(late.gate[1], &x, 1), 1);
	ck_assert_int_eq(tf_callout_run(c, block_job, drop_job, &late, &err), TF_OK);
	ck_assert(!readable(late.dropped[0]));
	/* One stuck in the plugin, one queued behind it (one thread). */
	ck_assert_int_eq(pthread_create(&t1, NULL, call_blocker, &hung), 0);
	ck_assert_int_eq(read(hung.started[0], &x, 1), 1);
	ck_assert_int_eq(pthread_create(&t2, NULL, call_blocker, &queued), 0);
	/* Stopped: both callers come back with EIO at once. */
	tf_callout_stop(c);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	ck_assert_int_eq(hung.rc, TF_E_IO);
	ck_assert_int_eq(queued.rc, TF_E_IO);
	ck_assert(readable(queued.dropped[0]) && !readable(queued.started[0]));	/* never ran */
	ck_assert(!readable(hung.dropped[0]));		/* still running */
	ck_assert_int_eq(tf_callout_run(c, block_job, drop_job, &late, &err), TF_E_IO);
	ck_assert_msg(strstr(err.msg, "abandoned"), "%s", err.msg);
	ck_assert(readable(late.dropped[0]));
	/* Freed with a thread still inside: it is left to finish alone. */
	ck_assert(!tf_callout_free(c));
	ck_assert_int_eq(write(hung.gate[1], &x, 1), 1);
	ck_assert_int_eq(read(hung.dropped[0], &x, 1), 1);	/* dropped when it returned */
	blocker_close(&hung), blocker_close(&queued), blocker_close(&late);
	/* Freed idle: joined. */
	ck_assert(tf_callout_new(2, &c, &err) == TF_OK);
	ck_assert(tf_callout_free(c));
}
END_TEST

/* ---- netCDF filter constants --------------------------------------------------------------- */

START_TEST(test_netcdf_constants)
{
	char good[PATH_MAX];
	warns w = { 0 };
	tf_plugins *pl = load(dir_of("TF_TEST_PLUGINS", "/good", good, sizeof(good)), &w);
	tf_pipeline *p = parse(pl, "hdf5:40000, -17b, 23ub, -25S, 27us, 93u, 789f, 1.5d, -9l, 18UL, 4294967296, -1");
	static const char want[] = "40000,4294967279,23,4294967271,27,93,1145389056,0,1073217536,"
				   "4294967287,4294967295,18,0,0,1,4294967295";
	char *text = tf_pipeline_text(p), *f = tf_pipeline_filter_attr(p);
	tf_pipeline *q;

	ck_assert_str_eq(f, want);
	ck_assert_str_eq(text, "hdf5:" "40000,4294967279,23,4294967271,27,93,1145389056,0,1073217536,"
			 "4294967287,4294967295,18,0,0,1,4294967295");
	q = parse(pl, text);	/* the text form reads back */
	free(f);
	f = tf_pipeline_filter_attr(q);
	ck_assert_str_eq(f, want);
	free(f), free(text);
	tf_pipeline_free(q);
	tf_pipeline_free(p);
	p = parse(pl, "40000,0x10");	/* a bare id above 255 is HDF5's; hex has no tag */
	expect_views(p, TF_DT_UINT8, "40000,16", "[{\"id\": \"hdf5.40000\", \"cd_values\": [16]}]");
	tf_pipeline_free(p);
	expect_parse_error(pl, "hdf5:40000,1.5", "bad parameter '1.5'");
	expect_parse_error(pl, "hdf5:40000,128b", "bad parameter '128b'");
	expect_parse_error(pl, "hdf5:40000,-1u", "bad parameter '-1u'");
	expect_parse_error(pl, "hdf5:40000,-2147483649", "bad parameter");
	expect_parse_error(pl, "hdf5:40000,1x", "bad parameter '1x'");
	expect_parse_error(pl, "hdf5:40000,level=3", "parameters are positional");
	expect_parse_error(pl, "hdf5:40000,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16d", "more than 16 parameters");
	expect_parse_error(pl, "hdf5:70000", "HDF5 filter id 70000 is out of range");
	expect_parse_error(pl, "hdf5:x", "bad filter id 'x'");
	expect_parse_error(NULL, "hdf5:307,9", "no HDF5 plugin provides filter 307 (no plugin path is set)");
	tf_plugins_free(pl);
}
END_TEST

/* ---- _Filter and _Codecs of built-in filters ------------------------------------------------ */

static void views_of(const char *spec, tf_datatype t, const char *filter, const char *codecs)
{
	tf_pipeline *p = parse(NULL, spec);

	expect_views(p, t, filter, codecs);
	tf_pipeline_free(p);
}

START_TEST(test_builtin_views)
{
	views_of("", TF_DT_INT32, "", "[]");
	views_of("zstd", TF_DT_INT32, "2,4294967295", "[{\"id\": \"zstd\", \"level\": -1}]");
	views_of("2,4294967295", TF_DT_INT32, "2,4294967295", "[{\"id\": \"zstd\", \"level\": -1}]");
	views_of("delta | byteshuffle | lz4", TF_DT_INT64, "19,4294967295,17|9|3,4294967295",
		 "[{\"id\": \"delta\", \"dtype\": \"<i8\"}, {\"id\": \"shuffle\", \"elementsize\": 8}, "
		 "{\"id\": \"lz4\", \"acceleration\": 1}]");
	views_of("delta(reinterpret=uint16) | bitshuffle", TF_DT_FLOAT32, "19,4294967295,8|8",
		 "[{\"id\": \"delta\", \"dtype\": \"<u2\"}, {\"id\": \"bitshuffle\", \"elementsize\": 2}]");
	views_of("byteshuffle", TF_DT_ANY, "9", "[{\"id\": \"shuffle\"}]");
	views_of("gzip(level=9) | bzip2", TF_DT_UINT8, "1,9|5,4294967295",
		 "[{\"id\": \"zlib\", \"level\": 9}, {\"id\": \"bz2\", \"level\": 1}]");
	views_of("bit_width_reduction(window=64) | positive_delta | double_delta(reinterpret=int8)",
		 TF_DT_UINT32, "7,64|10,1024|6,4294967295,5",
		 "[{\"id\": \"tiledb.bit_width_reduction\", \"window\": 64}, "
		 "{\"id\": \"tiledb.positive_delta\", \"window\": 1024}, "
		 "{\"id\": \"tiledb.double_delta\", \"reinterpret\": \"int8\"}]");
	views_of("scale_float(scale=1.5, offset=-2, byte_width=4) | xor | md5 | checksum_sha256",
		 TF_DT_FLOAT64, "15,0,1073217536,0,3221225472,4,0|16|12|13",
		 "[{\"id\": \"tiledb.scale_float\", \"scale\": 1.5, \"offset\": -2.0, \"byte_width\": 4}, "
		 "{\"id\": \"tiledb.xor\"}, {\"id\": \"tiledb.checksum_md5\"}, {\"id\": \"tiledb.checksum_sha256\"}]");
	views_of("rle | dictionary", TF_DT_STRING_ASCII, "4,4294967295|14,4294967295",
		 "[{\"id\": \"tiledb.rle\", \"level\": -1}, {\"id\": \"tiledb.dictionary\", \"level\": -1}]");
}
END_TEST

/* Every built-in class, alone, on every datatype: valid JSON, one object
 * with a string id.  And a NaN from a stored pipeline stays valid JSON. */
START_TEST(test_codecs_always_json)
{
	static const uint8_t nan_scale[] = { 0, 0, 1, 0, 1, 0, 0, 0, 15, 24, 0, 0, 0,
					     0, 0, 0, 0, 0, 0, 0xf8, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0,
					     8, 0, 0, 0, 0, 0, 0, 0 };
	tf_reader r = tf_reader_of(tf_span_of(nan_scale, sizeof(nan_scale)));
	tf_pipeline *p;
	tf_error err;
	char *s;

	for (unsigned id = 0; id < TF_F_ID_LIMIT; id++) {
		if (!tf_filter_by_id(id))
			continue;
		for (unsigned t = 0; t <= TF_DT_COUNT; t++) {
			json_t *j;
			json_error_t jerr;

			p = tf_pipeline_new();
			ck_assert(tf_pipeline_append(p, id, &err) == TF_OK);
			s = tf_pipeline_codecs_json(p, t == TF_DT_COUNT ? TF_DT_ANY : (tf_datatype)t);
			j = json_loads(s, 0, &jerr);
			ck_assert_msg(j && json_array_size(j) == 1 &&
				      json_is_string(json_object_get(json_array_get(j, 0), "id")),
				      "filter %u type %u: %s (%s)", id, t, s, jerr.text);
			json_decref(j);
			free(s);
			tf_pipeline_free(p);
		}
	}
	ck_assert_msg(tf_pipeline_deserialize(&r, &p, &err) == TF_OK, "%s", err.msg);
	s = tf_pipeline_codecs_json(p, TF_DT_FLOAT64);
	ck_assert_str_eq(s, "[{\"id\": \"tiledb.scale_float\", \"scale\": null, \"offset\": 0.0, \"byte_width\": 8}]");
	free(s);
	tf_pipeline_free(p);
}
END_TEST

/* ---- Debian's HDF5 plugins (hdf5-filter-plugin) ---------------------------------------------- */

START_TEST(test_debian_plugins)
{
	warns w = { 0 };
	tf_plugins *pl = load(getenv("TF_HDF5_PLUGINS"), &w);
	uint8_t *text = tf_test_data(300000, TF_GEN_RUNS, 1, 11), *ints = tf_test_data(200000, TF_GEN_WALK, 4, 5);
	tf_pipeline *bz = parse(pl, "hdf5:307,9"), *bz1 = parse(pl, "hdf5:307"), *lz = parse(pl, "byteshuffle | hdf5:32004 | sha256");
	tf_pipeline *lzb = parse(pl, "32004,4096");
	tf_buf stored, out = TF_BUF_INIT(SIZE_MAX);
	tf_error err;

	ck_assert_msg(w.n == 0, "%s", w.all);
	ck_assert_uint_eq(tf_plugins_count(pl), 2);
	ck_assert_ptr_nonnull(tf_plugins_by_hdf5_id(pl, 307));
	ck_assert_ptr_nonnull(tf_plugins_by_hdf5_id(pl, 32004));
	ck_assert_uint_lt(roundtrip(bz, TF_DT_UINT8, text, 300000, NULL), 300000 / 4);
	roundtrip(bz1, TF_DT_UINT8, text, 300000, NULL);
	roundtrip(lz, TF_DT_INT32, ints, 200000, NULL);
	roundtrip(lzb, TF_DT_INT32, ints, 200000, NULL);
	expect_views(bz, TF_DT_UINT8, "307,9", "[{\"id\": \"bz2\", \"level\": 9}]");
	expect_views(lz, TF_DT_INT32, "9|32004|13", "[{\"id\": \"shuffle\", \"elementsize\": 4}, "
		     "{\"id\": \"hdf5.32004\", \"cd_values\": []}, {\"id\": \"tiledb.checksum_sha256\"}]");
	/* A damaged bzip2 stream: the plugin's own error, reported for the chunk. */
	roundtrip(bz, TF_DT_UINT8, text, 300000, &stored);
	stored.p[TF_TILE_HEADER_SIZE + TF_CHUNK_HEADER_SIZE + 40] ^= 0x55;
	ck_assert_int_eq(decode_tile(bz, TF_DT_UINT8, tf_span_of(stored.p, stored.len), &out, &err), TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "chunk 0: filter 0 (hdf5:307): the HDF5 plugin's filter failed"), "%s", err.msg);
	tf_buf_free(&stored);
	tf_buf_free(&out);
	tf_pipeline_free(bz), tf_pipeline_free(bz1), tf_pipeline_free(lz), tf_pipeline_free(lzb);
	tf_plugins_free(pl);
	free(text);
	free(ints);
}
END_TEST

START_TEST(test_debian_missing)
{
	ck_abort_msg("CI must run the Debian plugin tests: apt-get install hdf5-filter-plugin");
}
END_TEST

/* ---- plugin_path in the configuration ------------------------------------------------------------ */

static char *write_config(const char *dir, const char *text)
{
	static char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/t.ini", dir);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
	return path;
}

START_TEST(test_config_plugin_path)
{
	char tmp[] = "/tmp/tf_plugcfg.XXXXXX", sample[PATH_MAX], link[PATH_MAX + 16], bad[PATH_MAX + 16];
	char text[2 * PATH_MAX];
	const tf_rule *r;
	tf_config *c;
	tf_error err;
	char *s;
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(tmp));
	snprintf(link, sizeof(link), "%s/plugins", tmp);
	ck_assert_int_eq(symlink(dir_of("TF_SAMPLE_PLUGINS", "", sample, sizeof(sample)), link), 0);
	snprintf(bad, sizeof(bad), "%s/bad", tmp);
	ck_assert_int_eq(mkdir(bad, 0700), 0);
	snprintf(bad, sizeof(bad), "%s/bad/x.so", tmp);
	ck_assert_ptr_nonnull(f = fopen(bad, "w"));
	fclose(f);
	/* Relative directories are relative to the file; a bad plugin tried
	 * before the one a rule names warns. */
	ck_assert_msg(tf_config_load(write_config(tmp, "[match *.x]\nfilters = bytexor(7) | zstd\n"
						  "[tilefs]\nplugin_path = bad:plugins\n"), &c, &err) == TF_OK, "%s", err.msg);
	r = tf_config_match(c, "a.x");
	s = tf_pipeline_text(r->pipeline);
	ck_assert_str_eq(s, "bytexor(7) | zstd(level=-1)");
	free(s);
	ck_assert_uint_eq(tf_plugins_count(tf_config_plugins(c)), 1);
	ck_assert_uint_eq(tf_config_nwarnings(c), 1);
	snprintf(text, sizeof(text), "%s/t.ini:4: plugin %s/bad/x.so skipped: ", tmp, tmp);
	ck_assert_msg(!strncmp(tf_config_warning(c, 0), text, strlen(text)), "%s", tf_config_warning(c, 0));
	tf_config_free(c);
	/* A filter no plugin provides: an error at its line. */
	ck_assert_int_eq(tf_config_load(write_config(tmp, "[tilefs]\nplugin_path = plugins\n[match *.x]\n"
						     "filters = zstd | hdf5:32001,2\n"), &c, &err), TF_E_INVAL);
	snprintf(text, sizeof(text), "%s/t.ini:4: filters: filter 2 'hdf5:32001': no HDF5 plugin provides "
		 "filter 32001 (plugin path '%s/plugins')", tmp, tmp);
	ck_assert_str_eq(err.msg, text);
	/* No plugin_path: the environment's, loaded when a rule names one. */
	setenv("TILEFS_PLUGIN_PATH", sample, 1);
	ck_assert(tf_config_default(&c, &err) == TF_OK);
	ck_assert_uint_eq(tf_plugins_count(tf_config_plugins(c)), 0);
	tf_config_free(c);
	ck_assert(tf_config_load(write_config(tmp, "[match *.x]\nfilters = 200\n"), &c, &err) == TF_OK);
	ck_assert_uint_eq(tf_plugins_count(tf_config_plugins(c)), 1);
	tf_config_free(c);
	unsetenv("TILEFS_PLUGIN_PATH");
	ck_assert_int_eq(tf_config_load(write_config(tmp, "[match *.x]\nfilters = 200\n"), &c, &err), TF_E_INVAL);
	unlink(write_config(tmp, ""));
	unlink(bad);
	*strrchr(bad, '/') = '\0';
	rmdir(bad);
	unlink(link);
	rmdir(tmp);
}
END_TEST

static Suite *plugins_suite(void)
{
	Suite *s = suite_create("plugins");
	TCase *own = tcase_create("own"), *views = tcase_create("views");
	const char *debian = getenv("TF_HDF5_PLUGINS");

	tcase_add_test(own, test_sample_plugin);
	tcase_add_test(own, test_refused_plugins);
	tcase_add_test(own, test_plugin_dir_trust);
	tcase_add_test(own, test_lazy_loading);
	tcase_add_test(own, test_callout_stop);
	tcase_add_test(own, test_native_output_bounds);
	tcase_add_test(own, test_duplicate_plugins);
	tcase_add_test(own, test_hdf5_buffers);
	tcase_add_test(own, test_netcdf_constants);
	tcase_add_test(own, test_config_plugin_path);
	suite_add_tcase(s, own);
	tcase_add_test(views, test_builtin_views);
	tcase_add_test(views, test_codecs_always_json);
	suite_add_tcase(s, views);
	if (debian && *debian) {
		TCase *deb = tcase_create("debian");
		tcase_add_test(deb, test_debian_plugins);
		suite_add_tcase(s, deb);
	} else if (getenv("TILEFS_CI") && !strcmp(getenv("TILEFS_CI"), "1")) {
		TCase *deb = tcase_create("debian");
		tcase_add_test(deb, test_debian_missing);
		suite_add_tcase(s, deb);
	} else {
		printf("Debian's hdf5-filter-plugin is not installed: skipping its tests\n");
	}
	return s;
}

TF_TEST_MAIN(plugins_suite)
