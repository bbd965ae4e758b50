/*
 * test_mount.c - tf_mount without FUSE: opening a mount from options and
 * a configuration file (good; bad ones failing with FILE:LINE and the
 * right failure for the exit status), the index store, the statistics
 * texts (their fields, in the order tilefs(1) and the mount tests read
 * them), statfs, index_at_mount's walk, the mountpoint check, and reloads
 * accepted, refused (the configuration in force kept) and changing
 * nothing, with what only a mount sets kept.
 *
 * Each test works in a fresh directory: base/src is SOURCE (two loose
 * tile files TileDB wrote, tests/data/corpus), base/idx the index store.
 */
#include "tf_test.h"

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tf_mount.h"

#ifndef TF_TEST_DATA
#error "TF_TEST_DATA: tests/data/corpus (Makefile.am)"
#endif

#define FMT(buf, ...) ck_assert_uint_lt((size_t)snprintf(buf, sizeof(buf), __VA_ARGS__), sizeof(buf))

#define RULES "[match loose/*.tdb]\nfilters = gzip(level=1)\ndatatype = int32\n"

static char base[PATH_MAX], root[PATH_MAX], conf[PATH_MAX], idx[PATH_MAX];
static tf_mount *m;
static char logged[8192];	/* what the mount said (log_line) */

/* ---- the fixture -------------------------------------------------------------------------- */

static void log_line(void *ctx, tf_log_level level, const char *msg)
{
	size_t len = strlen(logged);

	(void)ctx;
	snprintf(logged + len, sizeof(logged) - len, "%d %s\n", (int)level, msg);
}

/* The configuration file's text (mode 0600: it may name keys). */
static void write_conf(const char *text)
{
	FILE *f = fopen(conf, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(chmod(conf, 0600), 0);
}

static void setup(void)
{
	FMT(base, "%s/tf_mount.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(base));
	FMT(root, "%s/src", base);
	FMT(conf, "%s/tilefs.ini", base);
	FMT(idx, "%s/idx", base);
	tf_test_sh("mkdir -p '%s/loose' '%s/sub' && cp '%s'/gzip_level1/array/__fragments/*/a0.tdb '%s/loose/a.tdb' && "
	   "cp '%s/loose/a.tdb' '%s/loose/b.tdb' && printf hello > '%s/plain.txt' && chmod -R u+w,go-w '%s'",
	   root, root, TF_TEST_DATA, root, root, root, root, root);
	logged[0] = '\0';
	m = NULL;
}

static void teardown(void)
{
	tf_mount_stop_plugins(m);
	tf_mount_close(m);
	m = NULL;
	tf_test_sh("rm -rf '%s'", base);
}

static tf_mount_options options(void)
{
	return (tf_mount_options){ .source = root, .config = conf, .index_dir = idx, .log = log_line };
}

/* A mount of o, opened, its store opened and started (failing the test otherwise). */
static tf_mount *mount_ok(const tf_mount_options *o)
{
	tf_mount_failure why;
	tf_mount *mt;
	unsigned workers;
	tf_error err;

	ck_assert_msg(tf_mount_open(o, &mt, &why, &err) == TF_OK, "%s", err.msg);
	ck_assert_msg(tf_mount_open_store(mt, &why, &err) == TF_OK, "%s", err.msg);
	ck_assert_msg(tf_mount_start(mt, NULL, &workers, &err) == TF_OK, "%s", err.msg);
	ck_assert_uint_ge(workers, 1);
	return mt;
}

/* tf_mount_open of o must fail with why and a message starting with want. */
static void open_fails(const tf_mount_options *o, tf_mount_failure why, const char *want)
{
	tf_mount_failure got = 0;
	tf_mount *mt = (tf_mount *)1;
	tf_error err;

	ck_assert_int_ne(tf_mount_open(o, &mt, &got, &err), TF_OK);
	ck_assert_ptr_null(mt);
	ck_assert_int_eq(got, why);
	ck_assert_msg(!strncmp(err.msg, want, strlen(want)), "'%s' does not start with '%s'", err.msg, want);
}

/* The names of a statistics text's fields, in order ("a=1 b=2" -> "a b"). */
static void field_names(const char *text, char *out, size_t n)
{
	size_t len = 0;

	out[0] = '\0';
	for (const char *p = text; *p;) {
		size_t k = strcspn(p, "=");
		ck_assert_uint_lt(len + k + 2, n);
		len += (size_t)snprintf(out + len, n - len, "%s%.*s", len ? " " : "", (int)k, p);
		p += k;
		p += strcspn(p, " ");
		p += *p == ' ';
	}
}

/* The value of field name in text ("" when absent), static. */
static const char *field(const char *text, const char *name)
{
	static char v[256];
	char key[64];
	const char *p;

	FMT(key, " %s=", name);
	v[0] = '\0';
	if (!strncmp(text, key + 1, strlen(key + 1)))
		p = text + strlen(key + 1);
	else if ((p = strstr(text, key)))
		p += strlen(key);
	else
		return v;
	snprintf(v, sizeof(v), "%.*s", (int)strcspn(p, " "), p);
	return v;
}

/* ---- opening -------------------------------------------------------------------------------- */

START_TEST(test_mount_open_good)
{
	tf_mount_options o = options();
	char real[PATH_MAX];

	write_conf("[tilefs]\ncache_size = 32M\nlog_level = debug\n" RULES);
	o.cache_size = "48M";	/* the option wins over the file */
	o.views = true;
	m = mount_ok(&o);
	ck_assert_ptr_nonnull(realpath(root, real));
	ck_assert_str_eq(tf_mount_name(m), real);
	ck_assert_uint_eq(tf_mount_settings(m)->cache_size, 48u << 20);
	ck_assert(tf_mount_settings(m)->views);
	ck_assert_int_eq(tf_mount_settings(m)->log_level, TF_LOG_DEBUG);
	ck_assert_str_eq(tf_mount_settings(m)->index_dir, idx);
	ck_assert_ptr_nonnull(tf_mount_source(m));
	ck_assert_ptr_nonnull(tf_mount_cache(m));
	ck_assert_ptr_nonnull(tf_mount_catalog(m));
	ck_assert_int_eq(tf_catalog_show(tf_mount_catalog(m), "loose/a.tdb"), TF_SHOW_DECODED);
	ck_assert_int_eq(tf_catalog_show(tf_mount_catalog(m), "plain.txt"), TF_SHOW_RAW);
	ck_assert_str_eq(logged, "");	/* nothing to say */
}
END_TEST

START_TEST(test_mount_open_defaults)
{
	tf_mount_options o = options();

	o.config = NULL;	/* no file: the defaults */
	m = mount_ok(&o);
	ck_assert_uint_eq(tf_mount_settings(m)->cache_size, 256u << 20);
	ck_assert(!tf_mount_settings(m)->views);
	ck_assert_int_eq(tf_catalog_show(tf_mount_catalog(m), "loose/a.tdb"), TF_SHOW_RAW);
}
END_TEST

/* Every way an open fails: what failed (the exit status) and a message
 * naming the file and line, the option or SOURCE. */
START_TEST(test_mount_open_bad)
{
	tf_mount_options o = options();
	char want[PATH_MAX + 16];

	write_conf("[tilefs]\ncache_size = 32M\n\n[match *.tdb]\nfilters = nosuch\n");
	FMT(want, "%s:5: filters: ", conf);
	open_fails(&o, TF_MOUNT_E_CONFIG, want);

	write_conf("[tilefs]\nno_such_key = 1\n");
	FMT(want, "%s:2: ", conf);
	open_fails(&o, TF_MOUNT_E_CONFIG, want);

	write_conf("[key k]\nfile = /nonexistent/tf_mount.key\n");
	FMT(want, "%s:2: ", conf);
	open_fails(&o, TF_MOUNT_E_KEY, want);

	write_conf(RULES);
	o.cache_size = "lots";
	open_fails(&o, TF_MOUNT_E_OPTION, "-o cache_size: ");
	o.cache_size = NULL;

	o.source = "/nonexistent/tf_mount";
	open_fails(&o, TF_MOUNT_E_SOURCE, "/nonexistent/tf_mount: No such file or directory");

	o.config = "/nonexistent/tf_mount.ini";
	o.source = root;
	open_fails(&o, TF_MOUNT_E_CONFIG, "/nonexistent/tf_mount.ini");
}
END_TEST

/* A configured index_dir that must not be used fails the mount, naming
 * the option or the line that set it; the default one only warns. */
START_TEST(test_mount_store_refused)
{
	tf_mount_options o = options();
	tf_mount_failure why;
	tf_error err;
	char want[PATH_MAX + 16], open_dir[PATH_MAX];

	FMT(open_dir, "%s/open", base);
	tf_test_sh("mkdir -m 0777 '%s' && chmod 0777 '%s'", open_dir, open_dir);	/* anyone could forge entries */
	write_conf(RULES);
	o.index_dir = open_dir;
	ck_assert_msg(tf_mount_open(&o, &m, &why, &err) == TF_OK, "%s", err.msg);
	ck_assert_int_ne(tf_mount_open_store(m, &why, &err), TF_OK);
	ck_assert_int_eq(why, TF_MOUNT_E_CONFIG);
	ck_assert_msg(strstr(err.msg, open_dir) && strstr(err.msg, "(-o index_dir)"), "%s", err.msg);
	tf_mount_close(m);

	FMT(want, "[tilefs]\nindex_dir = %s\n" RULES, open_dir);
	write_conf(want);
	o.index_dir = NULL;
	ck_assert_msg(tf_mount_open(&o, &m, &why, &err) == TF_OK, "%s", err.msg);
	ck_assert_int_ne(tf_mount_open_store(m, &why, &err), TF_OK);
	ck_assert_int_eq(why, TF_MOUNT_E_CONFIG);
	FMT(want, "%s:2: ", conf);
	ck_assert_msg(!strncmp(err.msg, want, strlen(want)), "%s", err.msg);
	tf_mount_close(m);
	m = NULL;

	/* The default place (TILEFS_INDEX_DIR here) refused: no store, a warning. */
	write_conf(RULES);
	setenv("TILEFS_INDEX_DIR", open_dir, 1);
	m = mount_ok(&o);
	unsetenv("TILEFS_INDEX_DIR");
	ck_assert_msg(strstr(logged, "indexes are not persisted"), "%s", logged);
	char *t = tf_mount_stat_text(m, "index", &(tf_mount_counts){ 0 });
	ck_assert_ptr_nonnull(t);
	ck_assert_str_eq(field(t, "persist"), "no");
	free(t);
}
END_TEST

/* ---- what the mount says -------------------------------------------------------------------- */

START_TEST(test_mount_stat_texts)
{
	tf_mount_options o = options();
	tf_mount_counts c = { .nodes = 7, .indexes = 3, .index_bytes = 4096, .handles = 2, .users = 1, .refused = 5,
			      .max_user_opens = 9 };
	tf_mount_failure why;
	char names[2048], *t;
	tf_error err;

	write_conf("[tilefs]\ncache_size = 32M\n" RULES);
	ck_assert_msg(tf_mount_open(&o, &m, &why, &err) == TF_OK, "%s", err.msg);
	ck_assert_ptr_null(tf_mount_stat_text(m, "cache", &c));	/* no cache before start */
	tf_mount_close(m);
	m = mount_ok(&o);

	ck_assert_ptr_nonnull(t = tf_mount_stat_text(m, "cache", &c));
	field_names(t, names, sizeof(names));
	ck_assert_str_eq(names, "budget used entries hits misses evictions prefetches recycled nodes indexes "
		"index_bytes index_budget handles arrays heap_used heap_free heap_mmap charged stored stored_bound "
		"stored_parts in_flight queued fetched stored_served stored_evicted cancelled aborted");
	ck_assert_str_eq(field(t, "budget"), "33554432");
	ck_assert_str_eq(field(t, "nodes"), "7");
	ck_assert_str_eq(field(t, "indexes"), "3");
	ck_assert_str_eq(field(t, "index_bytes"), "4096");
	ck_assert_str_eq(field(t, "handles"), "2");
	ck_assert_str_eq(field(t, "arrays"), "0");
	free(t);

	ck_assert_ptr_nonnull(t = tf_mount_stat_text(m, "opens", &c));
	field_names(t, names, sizeof(names));
	ck_assert_str_eq(names, "fds fd_max reopens fd_evictions users refused max_user_opens");
	ck_assert_str_eq(field(t, "users"), "1");
	ck_assert_str_eq(field(t, "refused"), "5");
	ck_assert_str_eq(field(t, "max_user_opens"), "9");
	free(t);

	ck_assert_ptr_nonnull(t = tf_mount_stat_text(m, "index", &c));
	field_names(t, names, sizeof(names));
	ck_assert_str_eq(names, "dir persist entries bytes max_size hits misses stale corrupt writes write_errors "
		"evictions walks walk_bytes background files_seen files_indexed files_failed published "
		"published_misses published_ignored");
	ck_assert_str_eq(field(t, "dir"), idx);
	ck_assert_str_eq(field(t, "persist"), "yes");
	ck_assert_str_eq(field(t, "background"), "off");
	free(t);

	ck_assert_ptr_null(tf_mount_stat_text(m, "disk_cache", &c));	/* a local source has none */
	ck_assert_ptr_null(tf_mount_stat_text(m, "nosuch", &c));
}
END_TEST

START_TEST(test_mount_statfs)
{
	tf_mount_options o = options();
	struct statvfs sv;
	tf_error err;

	write_conf(RULES);
	m = mount_ok(&o);
	ck_assert_msg(tf_mount_statfs(m, &sv, &err) == TF_OK, "%s", err.msg);
	ck_assert(sv.f_flag & ST_RDONLY);
	ck_assert_uint_gt(sv.f_bsize, 0);
	ck_assert_uint_gt(sv.f_namemax, 0);
}
END_TEST

/* A mountpoint inside SOURCE would contain the mount. */
START_TEST(test_mount_contains)
{
	tf_mount_options o = options();
	char path[PATH_MAX];
	int fd;

	write_conf(RULES);
	m = mount_ok(&o);
	FMT(path, "%s/sub", root);
	ck_assert_int_ge(fd = open(path, O_RDONLY | O_DIRECTORY), 0);
	ck_assert(tf_mount_contains(m, fd));
	ck_assert_int_ge(fcntl(fd, F_GETFD), 0);	/* still open: the caller's */
	close(fd);
	ck_assert_int_ge(fd = open(root, O_RDONLY | O_DIRECTORY), 0);
	ck_assert(tf_mount_contains(m, fd));
	close(fd);
	ck_assert_int_ge(fd = open(base, O_RDONLY | O_DIRECTORY), 0);
	ck_assert(!tf_mount_contains(m, fd));
	close(fd);
}
END_TEST

/* ---- index_at_mount ------------------------------------------------------------------------- */

static bool never(void *ctx)
{
	(void)ctx;
	return false;
}

static bool always(void *ctx)
{
	(void)ctx;
	return true;
}

START_TEST(test_mount_index_ahead)
{
	tf_mount_options o = options();
	tf_mount_counts c = { .indexing_ahead = true };
	char *t;

	write_conf(RULES);
	o.index_at_mount = true;
	m = mount_ok(&o);
	ck_assert(tf_mount_settings(m)->index_at_mount);
	ck_assert_ptr_nonnull(t = tf_mount_stat_text(m, "index", &c));
	ck_assert_str_eq(field(t, "background"), "running");	/* started, not done */
	free(t);
	ck_assert_int_eq(tf_mount_index_ahead(m, never, NULL), TF_OK);
	ck_assert_ptr_nonnull(t = tf_mount_stat_text(m, "index", &c));
	ck_assert_str_eq(field(t, "background"), "done");
	ck_assert_str_eq(field(t, "files_seen"), "2");	/* loose/a.tdb, loose/b.tdb; not plain.txt */
	ck_assert_str_eq(field(t, "files_indexed"), "2");
	ck_assert_str_eq(field(t, "files_failed"), "0");
	ck_assert_str_eq(field(t, "walks"), "2");
	ck_assert_str_eq(field(t, "entries"), "2");	/* stored */
	free(t);
	ck_assert_msg(strstr(logged, "index_at_mount: 2 of 2 files indexed\n"), "%s", logged);
	tf_mount_stop_plugins(m);
	tf_mount_close(m);

	/* A second mount finds them stored; one stopped at once walks nothing. */
	logged[0] = '\0';
	m = mount_ok(&o);
	ck_assert_int_eq(tf_mount_index_ahead(m, always, NULL), TF_OK);
	ck_assert_msg(strstr(logged, "index_at_mount: 0 of 0 files indexed (stopped)"), "%s", logged);
	ck_assert_int_eq(tf_mount_index_ahead(m, never, NULL), TF_OK);
	ck_assert_ptr_nonnull(t = tf_mount_stat_text(m, "index", &c));
	ck_assert_str_eq(field(t, "walks"), "0");
	ck_assert_str_eq(field(t, "hits"), "2");
	free(t);
}
END_TEST

/* ---- reload --------------------------------------------------------------------------------- */

START_TEST(test_mount_reload)
{
	tf_mount_options o = options();
	const tf_settings *before;
	char changes[1024], want[PATH_MAX + 16];
	tf_catalog *cat;
	bool changed;
	tf_error err;

	write_conf("[tilefs]\ncache_size = 32M\nlog_level = info\n" RULES);
	m = mount_ok(&o);
	cat = tf_mount_catalog(m);
	before = tf_mount_settings(m);

	/* Nothing changed: the configuration in force stays. */
	ck_assert_msg(tf_mount_reload(m, &changed, changes, sizeof(changes), &err) == TF_OK, "%s", err.msg);
	ck_assert(!changed);
	ck_assert_ptr_eq(tf_mount_settings(m), before);

	/* A bad file is refused with its line; the one in force stays. */
	write_conf("[tilefs]\ncache_size = 32M\n[match loose/*.tdb]\nfilters = nosuch\n");
	ck_assert_int_ne(tf_mount_reload(m, &changed, changes, sizeof(changes), &err), TF_OK);
	ck_assert(!changed);
	FMT(want, "%s:4: filters: ", conf);
	ck_assert_msg(!strncmp(err.msg, want, strlen(want)), "%s", err.msg);
	ck_assert_ptr_eq(tf_mount_settings(m), before);
	ck_assert_int_eq(tf_catalog_show(cat, "loose/a.tdb"), TF_SHOW_DECODED);

	/* Accepted: the rules change at once, what only a mount sets stays,
	 * and the old settings remain readable (retired, not freed). */
	write_conf("[tilefs]\ncache_size = 64M\nlog_level = debug\nunmatched = hide\n");
	ck_assert_msg(tf_mount_reload(m, &changed, changes, sizeof(changes), &err) == TF_OK, "%s", err.msg);
	ck_assert(changed);
	ck_assert_msg(strstr(changes, "[match loose/*.tdb] removed") && strstr(changes, "cache_size") &&
		      strstr(changes, "next mount"), "%s", changes);
	ck_assert_ptr_ne(tf_mount_settings(m), before);
	ck_assert_uint_eq(tf_mount_settings(m)->cache_size, 32u << 20);	/* kept */
	ck_assert_int_eq(tf_mount_settings(m)->log_level, TF_LOG_DEBUG);
	ck_assert(tf_mount_settings(m)->hide_unmatched);
	ck_assert_int_eq(before->log_level, TF_LOG_INFO);
	ck_assert_int_eq(tf_catalog_show(cat, "loose/a.tdb"), TF_SHOW_HIDDEN);
	ck_assert_ptr_eq(tf_mount_catalog(m), cat);

	/* And back: the overrides given at open apply again. */
	write_conf(RULES);
	o.views = true;	/* too late: the options are the mount's, copied at open */
	ck_assert_msg(tf_mount_reload(m, &changed, changes, sizeof(changes), &err) == TF_OK, "%s", err.msg);
	ck_assert(changed);
	ck_assert(!tf_mount_settings(m)->views);
	ck_assert_int_eq(tf_catalog_show(cat, "loose/a.tdb"), TF_SHOW_DECODED);
}
END_TEST

static Suite *mount_suite(void)
{
	Suite *s = suite_create("mount");
	TCase *tc = tcase_create("mount");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_mount_open_good);
	tcase_add_test(tc, test_mount_open_defaults);
	tcase_add_test(tc, test_mount_open_bad);
	tcase_add_test(tc, test_mount_store_refused);
	tcase_add_test(tc, test_mount_stat_texts);
	tcase_add_test(tc, test_mount_statfs);
	tcase_add_test(tc, test_mount_contains);
	tcase_add_test(tc, test_mount_index_ahead);
	tcase_add_test(tc, test_mount_reload);
	suite_add_tcase(s, tc);
	return s;
}

TF_TEST_MAIN(mount_suite)
