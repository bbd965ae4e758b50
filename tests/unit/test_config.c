/*
 * test_config.c - the INI configuration (tf_config.c): every section and
 * key, defaults, overrides, continuation lines, long section names, every
 * error with its "FILE:LINE: message", and the glob and size parsers.
 *
 * The tests write their files into a temporary directory, so relative key
 * paths and file modes are under their control.  It is an unchecked fixture
 * (made and removed by the runner itself), so a failing test, which ends
 * its process early, leaves nothing behind.
 */
#include "tf_test.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/tf_config.h"

/* Key bytes 'A'..'`': printable, so a leak into a message is detectable
 * both as hex and as raw text. */
#define KEY_HEX "4142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f60"
#define KEY_RAW "ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`"
#define KEY2_HEX "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
#define KEY2_RAW "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f" \
		 "\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f"

/* snprintf into an array that must not truncate. */
#define FORMAT(buf, ...) \
	ck_assert_uint_lt((size_t)snprintf((buf), sizeof(buf), __VA_ARGS__), sizeof(buf))

static char dir[PATH_MAX];
static char conf_path[PATH_MAX];

static void setup(void)
{
	FORMAT(dir, "%s/tf_config.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* The directory is flat: the tests only write files into it. */
static void teardown(void)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[PATH_MAX];

	while (d && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) < sizeof(path))
				remove(path);
		}
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* Write text to name in the test directory with exactly this mode (the
 * umask must not decide whether a key file is private). */
static void write_file(const char *name, const char *text, mode_t mode, char *path, size_t n)
{
	FILE *f;

	ck_assert_uint_lt((size_t)snprintf(path, n, "%s/%s", dir, name), n);
	unlink(path);	/* an earlier test may have left it read-only */
	f = fopen(path, "w");
	ck_assert_msg(f != NULL, "cannot create %s", path);
	ck_assert(fputs(text, f) >= 0);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(chmod(path, mode), 0);
}

static tf_status load_text(const char *text, mode_t mode, tf_config **c, tf_error *err)
{
	write_file("tilefs.ini", text, mode, conf_path, sizeof(conf_path));
	*c = NULL;
	memset(err, 0, sizeof(*err));
	return tf_config_load(conf_path, c, err);
}

static tf_config *load_ok(const char *text)
{
	tf_config *c;
	tf_error err;
	tf_status rc = load_text(text, 0600, &c, &err);

	ck_assert_msg(rc == TF_OK, "load failed (%d): %s", rc, err.msg);
	ck_assert_ptr_nonnull(c);
	return c;
}

/* Loading text (a file of the given mode) must fail with code want and the
 * message "CONF:line: ..." containing needle, and never any part of a key. */
static void expect_error_mode(const char *text, mode_t mode, tf_status want, int line,
			      const char *needle)
{
	char prefix[PATH_MAX + 16];
	tf_config *c;
	tf_error err;
	tf_status rc = load_text(text, mode, &c, &err);

	ck_assert_msg(rc == want, "expected status %d, got %d ('%s') for:\n%s", want, rc, err.msg, text);
	ck_assert_ptr_null(c);
	ck_assert_msg(strstr(err.msg, needle), "message '%s' lacks '%s'", err.msg, needle);
	snprintf(prefix, sizeof(prefix), "%s:%d: ", conf_path, line);
	ck_assert_msg(!strncmp(err.msg, prefix, strlen(prefix)), "message '%s' should start with '%s'",
		      err.msg, prefix);
	ck_assert_msg(!strstr(err.msg, "ABCDEFGH") && !strstr(err.msg, "4142434445464748") &&
		      !strstr(err.msg, "0001020304050607"), "key material in '%s'", err.msg);
	ck_assert_msg(err.code == want, "status %d returned but %d recorded in the tf_error", want, err.code);
}

static void expect_error(const char *text, int line, const char *needle)
{
	expect_error_mode(text, 0600, TF_E_INVAL, line, needle);
}

static void expect_pipeline(const tf_pipeline *p, const char *want)
{
	char *text = tf_pipeline_text(p);

	ck_assert_ptr_nonnull(text);
	ck_assert_str_eq(text, want);
	free(text);
}

static void expect_key(const tf_key *k, const char *raw)
{
	ck_assert_ptr_nonnull(k);
	ck_assert_mem_eq(tf_key_bytes(k), raw, TF_KEY_BYTES);
}

static const tf_rule *must_match(const tf_config *c, const char *path)
{
	const tf_rule *r = tf_config_match(c, path);

	ck_assert_msg(r != NULL, "no rule matches %s", path);
	return r;
}

/* ---- what loads --------------------------------------------------------------------------- */

static void expect_default_settings(const tf_config *c)
{
	const tf_settings *s = tf_config_settings(c);

	ck_assert_uint_eq(s->cache_size, (uint64_t)256 << 20);
	ck_assert_uint_eq(s->index_budget, (uint64_t)64 << 20);
	ck_assert(!s->hide_unmatched);
	ck_assert_int_eq(s->log_level, TF_LOG_INFO);
	ck_assert_uint_eq(s->workers, 0);
	ck_assert_ptr_null(s->default_key);
	ck_assert(!s->views);	/* off by default: the mirror stays exact */
	ck_assert_ptr_null(tf_config_match(c, "a.tdb"));
	ck_assert_ptr_null(tf_config_array_key(c, "arr"));
}

START_TEST(test_defaults)
{
	tf_config *c;
	tf_error err;

	ck_assert_int_eq(tf_config_default(&c, &err), TF_OK);
	expect_default_settings(c);
	ck_assert_int_eq(tf_config_set_cache_size(c, "3M", &err), TF_OK);
	ck_assert_uint_eq(tf_config_settings(c)->cache_size, 3 << 20);
	tf_config_free(c);

	c = load_ok("");
	expect_default_settings(c);
	tf_config_free(c);

	c = load_ok("; only comments\n# and more comments\n\n   \n[tilefs]\n");
	expect_default_settings(c);
	tf_config_free(c);
}
END_TEST

START_TEST(test_tilefs_section)
{
	tf_config *c = load_ok("[key main]\n"
			       "hex = " KEY_HEX "\n"
			       "[tilefs]\n"
			       "cache_size  = 1G\n"
			       "index_cache = 512K\n"
			       "unmatched   = hide\n"
			       "log_level   = debug\n"
			       "workers     = 4\n"
			       "views       = yes\n"
			       "default_key = main\n");
	const tf_settings *s = tf_config_settings(c);

	ck_assert_uint_eq(s->cache_size, (uint64_t)1 << 30);
	ck_assert_uint_eq(s->index_budget, 512 << 10);
	ck_assert(s->hide_unmatched);
	ck_assert_int_eq(s->log_level, TF_LOG_DEBUG);
	ck_assert_uint_eq(s->workers, 4);
	ck_assert(s->views);
	expect_key(s->default_key, KEY_RAW);
	tf_config_lock_keys(c);
	expect_key(s->default_key, KEY_RAW);
	tf_config_free(c);
}
END_TEST

START_TEST(test_tilefs_enums)
{
	static const struct { const char *text; tf_log_level level; bool hide; uint64_t cache; } cases[] = {
		{ "log_level = error\nunmatched = raw\ncache_size = 1M\n", TF_LOG_ERROR, false, 1 << 20 },
		{ "log_level = warn\nunmatched = hide\ncache_size = 1100000\n", TF_LOG_WARN, true, 1100000 },
		{ "log_level = info\ncache_size = 3MiB\n", TF_LOG_INFO, false, 3 << 20 },
		{ "log_level = debug\ncache_size = 20MB\n", TF_LOG_DEBUG, false, 20 << 20 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char text[256];
		tf_config *c;

		FORMAT(text, "[tilefs]\n%s", cases[i].text);
		c = load_ok(text);
		ck_assert_int_eq(tf_config_settings(c)->log_level, cases[i].level);
		ck_assert_int_eq(tf_config_settings(c)->hide_unmatched, cases[i].hide);
		ck_assert_uint_eq(tf_config_settings(c)->cache_size, cases[i].cache);
		tf_config_free(c);
	}
}
END_TEST

/* make check names conf/sample.ini in SAMPLE_INI; run by hand, the test
 * finds it from where this source file is. */
static const char *sample_ini(char *path, size_t n)
{
	const char *slash = strrchr(__FILE__, '/');

	if (getenv("SAMPLE_INI"))
		return getenv("SAMPLE_INI");
	snprintf(path, n, "%.*s/../../conf/sample.ini", slash ? (int)(slash - __FILE__) : 1,
		 slash ? __FILE__ : ".");
	return path;
}

/* conf/sample.ini, as the demo mounts it, loads and says what it means. */
START_TEST(test_sample_ini)
{
	char path[PATH_MAX];
	const char *sample = sample_ini(path, sizeof(path));
	tf_config *c;
	tf_error err;
	const tf_rule *r;

	ck_assert_msg(tf_config_load(sample, &c, &err) == TF_OK, "%s", err.msg);
	ck_assert_uint_eq(tf_config_settings(c)->cache_size, 64 << 20);
	ck_assert(!tf_config_settings(c)->hide_unmatched);
	r = must_match(c, "weather/temps.tdb");
	expect_pipeline(r->pipeline, "delta | bitshuffle | zstd(level=3)");
	ck_assert_int_eq(r->type, TF_DT_INT32);
	r = must_match(c, "weather/ids.tdb");
	expect_pipeline(r->pipeline, "double_delta | lz4(level=-1)");
	ck_assert_int_eq(r->type, TF_DT_UINT64);
	ck_assert_int_eq(must_match(c, "weather/readings.tdb")->type, TF_DT_CHAR);
	ck_assert_ptr_null(tf_config_match(c, "README.txt"));
	tf_config_free(c);
}
END_TEST

START_TEST(test_named_pipeline)
{
	tf_config *c = load_ok("[pipeline ints]\n"
			       "filters        = delta(reinterpret=int64) | bitshuffle | zstd(level=7)\n"
			       "datatype       = int64\n"
			       "cell_val_num   = 2\n"
			       "format_version = 11\n"
			       "\n"
			       "[match data/*.tdb]\n"
			       "pipeline = ints\n");
	const tf_rule *r = must_match(c, "data/a0.tdb");

	ck_assert_str_eq(r->pattern, "data/*.tdb");
	expect_pipeline(r->pipeline, "delta(reinterpret=int64) | bitshuffle | zstd(level=7)");
	ck_assert_int_eq(r->type, TF_DT_INT64);
	ck_assert_uint_eq(r->cell_val_num, 2);
	ck_assert_uint_eq(r->version, 11);
	ck_assert_ptr_null(r->key);
	ck_assert(!r->generic);
	ck_assert_ptr_null(r->var_data);
	ck_assert_ptr_null(tf_config_match(c, "data/sub/a0.tdb"));
	ck_assert_ptr_null(tf_config_match(c, "other/a0.tdb"));
	tf_config_free(c);
}
END_TEST

/* Inline keys of a [match] override the named pipeline's, one by one. */
START_TEST(test_inline_overrides)
{
	tf_config *c = load_ok("[pipeline base]\n"
			       "filters = gzip(level=9)\n"
			       "datatype = int32\n"
			       "cell_val_num = 3\n"
			       "format_version = 15\n"
			       "[match type.tdb]\n"
			       "pipeline = base\n"
			       "datatype = float64\n"
			       "[match filters.tdb]\n"
			       "pipeline = base\n"
			       "filters = lz4\n"
			       "cell_val_num = var\n"
			       "format_version = 22\n");
	const tf_rule *r = must_match(c, "type.tdb");

	expect_pipeline(r->pipeline, "gzip(level=9)");
	ck_assert_int_eq(r->type, TF_DT_FLOAT64);
	ck_assert_uint_eq(r->cell_val_num, 3);
	ck_assert_uint_eq(r->version, 15);

	r = must_match(c, "filters.tdb");
	expect_pipeline(r->pipeline, "lz4(level=-1)");
	ck_assert_int_eq(r->type, TF_DT_INT32);
	ck_assert_uint_eq(r->cell_val_num, TF_CELL_VAR);
	ck_assert_uint_eq(r->version, 22);
	tf_config_free(c);
}
END_TEST

/* A rule that says nothing decodes with an empty pipeline as uint8 cells of
 * the newest format; every inline key lands in the rule. */
START_TEST(test_match_keys)
{
	tf_config *c = load_ok("[key k]\n"
			       "hex = " KEY_HEX "\n"
			       "[match plain.tdb]\n"
			       "generic = no\n"
			       "[match offsets.tdb]\n"
			       "filters = rle\n"
			       "datatype = uint64\n"
			       "key = k\n"
			       "generic = yes\n"
			       "var_data = strings.tdb\n");
	const tf_rule *r = must_match(c, "plain.tdb");

	ck_assert_ptr_nonnull(r->pipeline);
	expect_pipeline(r->pipeline, "");
	ck_assert_int_eq(r->type, TF_DT_UINT8);
	ck_assert_uint_eq(r->cell_val_num, 1);
	ck_assert_uint_eq(r->version, 22);
	ck_assert(!r->generic);
	ck_assert_ptr_null(r->key);

	r = must_match(c, "x/offsets.tdb");
	expect_pipeline(r->pipeline, "rle(level=-1)");
	ck_assert_int_eq(r->type, TF_DT_UINT64);
	expect_key(r->key, KEY_RAW);
	ck_assert(r->generic);
	ck_assert_str_eq(r->var_data, "strings.tdb");
	tf_config_free(c);
}
END_TEST

START_TEST(test_bool_spellings)
{
	static const char *const yes[] = { "yes", "true", "1", "on", "YES", "True" };
	static const char *const no[] = { "no", "false", "0", "off", "No", "FALSE" };

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		char text[128];
		tf_config *c;

		FORMAT(text, "[match a]\ngeneric = %s\n[match b]\ngeneric = %s\n", yes[i], no[i]);
		c = load_ok(text);
		ck_assert(must_match(c, "a")->generic);
		ck_assert(!must_match(c, "b")->generic);
		tf_config_free(c);
	}
}
END_TEST

/* tf_rule.line says where the rule was written (its [match] line). */
START_TEST(test_rule_line)
{
	tf_config *c = load_ok("; rules\n"
			       "[match a.tdb]\n"
			       "datatype = int8\n"
			       "\n"
			       "[match b.tdb]\n"
			       "datatype = int16\n");

	ck_assert_int_eq(must_match(c, "a.tdb")->line, 2);
	ck_assert_int_eq(must_match(c, "b.tdb")->line, 5);
	tf_config_free(c);
}
END_TEST

/* What a reload changes, said by name; key material never in the text. */
static void expect_changes(const char *a, const char *b, size_t want, const char *const *says)
{
	char text[2048];
	tf_config *x = load_ok(a), *y = load_ok(b);
	size_t n = tf_config_changes(x, y, text, sizeof(text));

	ck_assert_msg(n == want, "%zu changes, want %zu: '%s'", n, want, text);
	for (; *says; says++)
		ck_assert_msg(strstr(text, *says), "'%s' lacks '%s'", text, *says);
	ck_assert_msg(!strstr(text, KEY_HEX) && !strstr(text, KEY2_HEX) && !strstr(text, "ABCDEFGH"),
		      "key material in '%s'", text);
	tf_config_keep_mount_settings(y, x);
	ck_assert_uint_eq(tf_config_settings(y)->cache_size, tf_config_settings(x)->cache_size);
	ck_assert_int_eq(tf_config_settings(y)->views, tf_config_settings(x)->views);
	tf_config_free(y);
	tf_config_free(x);
}

START_TEST(test_reload_changes)
{
	static const char base[] = "[tilefs]\ncache_size = 64M\n[key k]\nhex = " KEY_HEX "\n"
				   "[match *.a]\nfilters = zstd\nkey = k\n[match *.b]\nfilters = lz4\n";

	expect_changes(base, base, 0, (const char *const[]){ NULL });
	expect_changes(base, "[tilefs]\ncache_size = 64M\n[key k]\nhex = " KEY2_HEX "\n"
		       "[match *.a]\nfilters = zstd\nkey = k\n[match *.b]\nfilters = lz4\n", 2,
		       (const char *const[]){ "[key k] changed", "[match *.a] changed", NULL });
	expect_changes(base, "[tilefs]\ncache_size = 64M\n[key k]\nhex = " KEY_HEX "\n"
		       "[match *.b]\nfilters = lz4\n[match *.a]\nfilters = zstd\nkey = k\n", 1,
		       (const char *const[]){ "reordered", NULL });
	expect_changes(base, "[tilefs]\ncache_size = 128M\nunmatched = hide\nviews = yes\n"
		       "[match *.c]\nfilters = lz4\n", 7,
		       (const char *const[]){ "[key k] removed", "[match *.c] added", "[match *.a] removed",
					       "[match *.b] removed", "unmatched = hide",
					       "cache_size changed: applies at the next mount",
					       "views changed: applies at the next mount", NULL });
}
END_TEST

START_TEST(test_key_sources)
{
	char keyfile[PATH_MAX], text[1024];
	tf_config *c;

	write_file("rel.key", KEY_HEX "\n", 0600, keyfile, sizeof(keyfile));
	write_file("abs.key", KEY2_HEX, 0400, keyfile, sizeof(keyfile));
	ck_assert_int_eq(setenv("TF_TEST_CONFIG_KEY", KEY2_HEX, 1), 0);
	FORMAT(text, "[key relative]\nfile = rel.key\n"
	       "[key absolute]\nfile = %s\n"
	       "[key fromenv]\nenv = TF_TEST_CONFIG_KEY\n"
	       "[key inline]\nhex = " KEY_HEX "\n"
	       "[match r]\nkey = relative\n"
	       "[match a]\nkey = absolute\n"
	       "[match e]\nkey = fromenv\n"
	       "[match i]\nkey = inline\n", keyfile);
	c = load_ok(text);
	expect_key(must_match(c, "r")->key, KEY_RAW);
	expect_key(must_match(c, "a")->key, KEY2_RAW);
	expect_key(must_match(c, "e")->key, KEY2_RAW);
	expect_key(must_match(c, "i")->key, KEY_RAW);
	tf_config_free(c);
}
END_TEST

START_TEST(test_array_keys)
{
	tf_config *c = load_ok("[key one]\nhex = " KEY_HEX "\n"
			       "[key two]\nhex = " KEY2_HEX "\n"
			       "[tilefs]\ndefault_key = two\n"
			       "[array vault/secret]\nkey = one\n"
			       "[array archive/**]\nkey = one\n");
	const tf_key *two = tf_config_array_key(c, "elsewhere");

	expect_key(tf_config_array_key(c, "vault/secret"), KEY_RAW);
	expect_key(tf_config_array_key(c, "archive/2020/arr"), KEY_RAW);
	ck_assert_ptr_nonnull(two);
	ck_assert_ptr_eq(two, tf_config_settings(c)->default_key);
	ck_assert_ptr_eq(tf_config_array_key(c, "vault/public"), two);
	ck_assert_ptr_eq(tf_config_array_key(c, "vault/secret/sub"), two);
	tf_config_free(c);

	/* No default key: arrays without an [array] rule get none. */
	c = load_ok("[key one]\nhex = " KEY_HEX "\n[array vault/secret]\nkey = one\n");
	expect_key(tf_config_array_key(c, "vault/secret"), KEY_RAW);
	ck_assert_ptr_null(tf_config_array_key(c, "vault/other"));
	tf_config_free(c);
}
END_TEST

START_TEST(test_first_match_wins)
{
	tf_config *c = load_ok("[match weather/temps.tdb]\ndatatype = int32\n"
			       "[match weather/*.tdb]\ndatatype = int64\n"
			       "[match *.tdb]\ndatatype = float64\n"
			       "[match weather/ids.tdb]\ndatatype = uint16\n");

	ck_assert_int_eq(must_match(c, "weather/temps.tdb")->type, TF_DT_INT32);
	ck_assert_int_eq(must_match(c, "weather/ids.tdb")->type, TF_DT_INT64);
	ck_assert_int_eq(must_match(c, "other/ids.tdb")->type, TF_DT_FLOAT64);
	ck_assert_int_eq(must_match(c, "ids.tdb")->type, TF_DT_FLOAT64);
	ck_assert_ptr_null(tf_config_match(c, "weather/README"));
	tf_config_free(c);
}
END_TEST

/* A [match] with no keys is still a rule (raw, empty pipeline) and, being
 * first, keeps later rules from taking its files. */
START_TEST(test_keyless_match_is_a_rule)
{
	tf_config *c = load_ok("[match raw/*.tdb]\n"
			       "[match *.tdb]\n"
			       "datatype = int32\n");
	const tf_rule *r = must_match(c, "raw/a.tdb");

	ck_assert_str_eq(r->pattern, "raw/*.tdb");
	ck_assert_int_eq(r->type, TF_DT_UINT8);
	expect_pipeline(r->pipeline, "");
	ck_assert_int_eq(must_match(c, "b.tdb")->type, TF_DT_INT32);
	tf_config_free(c);
}
END_TEST

START_TEST(test_filters_continuation)
{
	tf_config *c = load_ok("[pipeline long]\n"
			       "filters = delta(reinterpret=int64) |\n"
			       "    bitshuffle |\n"
			       "; a comment between continuation lines\n"
			       "\tzstd(level=7)\n"
			       "datatype = int64\n"
			       "[match a.tdb]\n"
			       "pipeline = long\n"
			       "[match b.tdb]\n"
			       "filters = checksum_md5 |\n"
			       "  lz4\n");

	expect_pipeline(must_match(c, "a.tdb")->pipeline, "delta(reinterpret=int64) | bitshuffle | zstd(level=7)");
	ck_assert_int_eq(must_match(c, "a.tdb")->type, TF_DT_INT64);
	expect_pipeline(must_match(c, "b.tdb")->pipeline, "checksum_md5 | lz4(level=-1)");
	tf_config_free(c);
}
END_TEST

/* " ;" starts a comment on a continuation line as on any other line. */
START_TEST(test_continuation_inline_comment)
{
	tf_config *c = load_ok("[match a.tdb]\n"
			       "filters = delta |        ; the transform\n"
			       "          zstd(level=3)  ; and the codec\n");

	expect_pipeline(must_match(c, "a.tdb")->pipeline, "delta | zstd(level=3)");
	tf_config_free(c);
}
END_TEST

START_TEST(test_comments)
{
	tf_config *c = load_ok("; leading comment\n"
			       "# hash comment\n"
			       "[tilefs]            ; comment after a header\n"
			       "workers = 3         ; comment after a value\n"
			       "  ; indented comment\n"
			       "[match a.tdb]\n"
			       "var_data = odd;name.tdb\n"
			       "datatype = int16 ;int32\n");
	const tf_rule *r = must_match(c, "a.tdb");

	ck_assert_uint_eq(tf_config_settings(c)->workers, 3);
	ck_assert_str_eq(r->var_data, "odd;name.tdb");	/* ';' without a blank is data */
	ck_assert_int_eq(r->type, TF_DT_INT16);
	tf_config_free(c);
}
END_TEST

/* Some editors start UTF-8 files with a byte order mark and end lines with
 * CR LF; inih skips the mark, and so must the module's section tracking. */
START_TEST(test_byte_order_mark)
{
	tf_config *c = load_ok("\xEF\xBB\xBF[tilefs]\r\nworkers = 2\r\n[match a.tdb]\r\ndatatype = int8\r\n");

	ck_assert_uint_eq(tf_config_settings(c)->workers, 2);
	ck_assert_int_eq(must_match(c, "a.tdb")->type, TF_DT_INT8);
	tf_config_free(c);
}
END_TEST

/* A directory path of exactly len characters, "dir00/dir01/.../xxx". */
static void long_dir(char *out, size_t len)
{
	size_t n = 0;

	while (n + 6 < len)
		n += (size_t)sprintf(out + n, "dir%02zu/", n / 6);
	while (n < len)
		out[n++] = 'x';
	out[n] = '\0';
}

/* inih keeps 50 bytes of a section name; the module must see it whole.
 * Three rules share their first 130 characters. */
START_TEST(test_long_section_name)
{
	char d[160], a[160], b[160], glob[160], tx[160], text[1024];
	tf_config *c;

	long_dir(d, 130);
	FORMAT(a, "%s/temps.tdb", d);
	FORMAT(b, "%s/other.tdb", d);
	FORMAT(glob, "%s/t*.tdb", d);
	FORMAT(tx, "%s/tx.tdb", d);
	ck_assert_uint_eq(strlen(a), 140);
	FORMAT(text, "[match %s]\ndatatype = int32\n[match %s]\ndatatype = int64\n"
	       "[match %s]\ndatatype = uint16\n", a, b, glob);
	c = load_ok(text);
	ck_assert_str_eq(must_match(c, a)->pattern, a);
	ck_assert_int_eq(must_match(c, a)->type, TF_DT_INT32);
	ck_assert_int_eq(must_match(c, b)->type, TF_DT_INT64);
	ck_assert_int_eq(must_match(c, tx)->type, TF_DT_UINT16);
	ck_assert_ptr_null(tf_config_match(c, "dir00/temps.tdb"));
	tf_config_free(c);
}
END_TEST

/* The longest allowed line is 199 characters. */
START_TEST(test_longest_line)
{
	char text[512];
	tf_config *c;

	FORMAT(text, "[tilefs]\n;%0198d\nworkers = 2\n", 0);
	ck_assert_uint_eq(strlen(strchr(text, ';')), 199 + strlen("\nworkers = 2\n"));
	c = load_ok(text);
	ck_assert_uint_eq(tf_config_settings(c)->workers, 2);
	tf_config_free(c);
}
END_TEST

/* ---- what fails, and where ------------------------------------------------------------------ */

START_TEST(test_err_unknown_keys)
{
	expect_error("x = 1\n", 1, "'x' outside any section");
	expect_error("[tilefs]\ncolour = red\n", 2, "unknown key 'colour' in [tilefs]");
	expect_error("[pipeline p]\nfilters = zstd\nlevel = 3\n", 3, "unknown key 'level' in [pipeline p]");
	expect_error("[key k]\npath = k.key\n", 2, "unknown key 'path' in [key k]");
	expect_error("[match *.tdb]\ndatatype = int8\npipe = p\n", 3, "unknown key 'pipe' in [match *.tdb]");
	expect_error("[array arr]\nfile = x\n", 2, "unknown key 'file' in [array arr]");
}
END_TEST

START_TEST(test_err_values)
{
	static const struct { const char *text; const char *needle; } cases[] = {
		{ "[tilefs]\ncache_size = 12X\n", "cache_size: bad size '12X'" },
		{ "[tilefs]\ncache_size = 1K\n", "cache_size: 1K is less than the least it works with, 1M" },
		/* One 64 KiB chunk did not fit a 64K budget: every read failed. */
		{ "[tilefs]\ncache_size = 64K\n", "cache_size: 64K is less than the least it works with, 1M" },
		{ "[tilefs]\ncache_size = 1048575\n", "less than the least it works with, 1M" },
		{ "[tilefs]\ncache_size = -1\n", "bad size '-1'" },
		{ "[tilefs]\ncache_size =\n", "bad size ''" },
		{ "[tilefs]\ncache_size = 18446744073709551615\n",
		  "cache_size: 18446744073709551615 is more than this machine's memory, " },
		{ "[tilefs]\ncache_size = 16383T\n", "is more than this machine's memory" },
		{ "[tilefs]\nindex_cache = 65535\n", "index_cache: 65535 is less than the least it works with, 64K" },
		{ "[tilefs]\nindex_cache = 18446744073709551615\n", "index_cache: 18446744073709551615 is more than" },
		{ "[tilefs]\nunmatched = show\n", "unmatched must be 'raw' or 'hide', not 'show'" },
		{ "[tilefs]\nlog_level = verbose\n", "not 'verbose'" },
		{ "[tilefs]\nworkers = 257\n", "workers must be 0" },
		{ "[tilefs]\nworkers = -1\n", "not '-1'" },
		{ "[tilefs]\nworkers = four\n", "not 'four'" },
		{ "[match a]\ndatatype = int33\n", "unknown datatype 'int33'" },
		{ "[pipeline p]\ndatatype = float16\n", "unknown datatype 'float16'" },
		{ "[match a]\ncell_val_num = 0\n", "cell_val_num must be a positive number or 'var', not '0'" },
		{ "[match a]\ncell_val_num = -2\n", "not '-2'" },
		{ "[match a]\ncell_val_num = 4294967295\n", "not '4294967295'" },
		{ "[pipeline p]\ncell_val_num = many\n", "not 'many'" },
		{ "[match a]\nformat_version = 0\n", "bad format_version '0'" },
		{ "[pipeline p]\nformat_version = v22\n", "bad format_version 'v22'" },
		{ "[match a]\ngeneric = maybe\n", "generic must be yes or no, not 'maybe'" },
		{ "[tilefs]\nviews = sometimes\n", "views must be yes or no, not 'sometimes'" },
		{ "[tilefs]\nmetadata_walk = pages\n", "metadata_walk must be window or headers, not 'pages'" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		expect_error(cases[i].text, 2, cases[i].needle);
}
END_TEST

/* A bad pipeline is reported at its `filters =` line, also when the bad
 * part is on a continuation line. */
START_TEST(test_err_filters)
{
	expect_error("[match a]\nfilters = zstdd\n", 2, "filters: filter 1 'zstdd': unknown filter");
	expect_error("[pipeline p]\ndatatype = int32\nfilters = lz4 | zstd(lvl=3)\n", 3,
		     "unknown option 'lvl'");
	expect_error("[match a]\ndatatype = int32\nfilters = delta |\n    bitshuffle |\n    nope\n", 3,
		     "unknown filter 'nope'");
	expect_error("[match a]\ndatatype = int32\n  int64\n", 3, "only filters may span lines");
}
END_TEST

START_TEST(test_err_references)
{
	expect_error("[match a]\ndatatype = int8\npipeline = nope\n", 3, "no [pipeline nope] section");
	expect_error("[pipeline p]\nfilters = lz4\n[match a]\nkey = nope\npipeline = p\n", 4,
		     "no [key nope] section");
	expect_error("[array arr]\nkey = nope\n", 2, "no [key nope] section");
	expect_error("[tilefs]\nworkers = 2\ndefault_key = nope\n", 3, "no [key nope] section");
}
END_TEST

/* Errors about a section itself are reported at its [header] line (a
 * comment line separates it from its first key). */
START_TEST(test_err_sections)
{
	expect_error("[bogus]\n; c\nx = 1\n", 1, "unknown section [bogus]");
	expect_error("[tilefs]\nworkers = 1\n[tilefs extra]\n; c\nworkers = 2\n", 3, "[tilefs] takes no name");
	expect_error("[match]\n; c\ndatatype = int8\n", 1, "[match] needs a name");
	expect_error("[pipeline p]\nfilters = lz4\n[pipeline p]\n; c\nfilters = zstd\n", 3,
		     "duplicate section [pipeline p]");
	expect_error("[key k]\nhex = " KEY_HEX "\n[key k]\n; c\nhex = " KEY_HEX "\n", 3,
		     "duplicate section [key k]");
	expect_error("[match a]\ngeneric = yes\n[match a]\n; c\ngeneric = no\n", 3, "duplicate section [match a]");
	expect_error("[array a]\nkey = k\n[array a]\n; c\nkey = k\n", 3, "duplicate section [array a]");
	expect_error("[match a//b]\n; c\ndatatype = int8\n", 1, "bad glob 'a//b'");
	expect_error("[match /abs/*.tdb]\n; c\ndatatype = int8\n", 1, "bad glob '/abs/*.tdb'");
	expect_error("[match x/[ab/c]\n; c\ndatatype = int8\n", 1, "bad glob");
}
END_TEST

/* A section with no keys is still checked. */
START_TEST(test_err_keyless_section)
{
	expect_error("[bogus]\n[tilefs]\nworkers = 1\n", 1, "unknown section [bogus]");
	expect_error("[tilefs]\nworkers = 1\n[nonsense]\n", 3, "unknown section [nonsense]");
}
END_TEST

START_TEST(test_err_syntax)
{
	expect_error("[tilefs]\nworkers = 1\njust some words\n", 3, "syntax error");
	expect_error("[match a.tdb\ndatatype = int8\n", 1, "syntax error");
}
END_TEST

/* The first error in the file is the one reported, whatever its kind. */
START_TEST(test_err_first_wins)
{
	expect_error("[tilefs]\nno equals sign here\n[tilefs]\ncolour = red\n", 2, "syntax error");
	expect_error("[tilefs]\nworkers = 1\nwords\n[bogus]\nx = 1\n", 3, "syntax error");
}
END_TEST

START_TEST(test_err_long_line)
{
	char text[512];

	FORMAT(text, "[tilefs]\nworkers = 2\n;%0199d\nworkers = 3\n", 0);
	expect_error(text, 3, "line longer than 199 characters");
	FORMAT(text, "[match a]\nvar_data = %0250d\n", 0);
	expect_error(text, 2, "line longer than 199 characters");
}
END_TEST

/* ---- keys and their secrecy ------------------------------------------------------------------ */

START_TEST(test_err_key_file_mode)
{
	char keyfile[PATH_MAX];

	write_file("shared.key", KEY_HEX "\n", 0644, keyfile, sizeof(keyfile));
	expect_error_mode("[key k]\nfile = shared.key\n", 0600, TF_E_NOKEY, 2, keyfile);
	expect_error_mode("[key k]\nfile = shared.key\n", 0600, TF_E_NOKEY, 2, "chmod 600");
	ck_assert_int_eq(chmod(keyfile, 0640), 0);
	expect_error_mode("[tilefs]\n[key k]\n; c\nfile = shared.key\n", 0600, TF_E_NOKEY, 4, keyfile);
}
END_TEST

/* Issue 14: a key file or a configuration that is a FIFO hung start-up
 * in open(); both must be refused at once (Check's timeout catches a hang). */
START_TEST(test_err_fifo_files)
{
	char fifo[PATH_MAX];
	tf_config *c = NULL;
	tf_error err;

	ck_assert_uint_lt((size_t)snprintf(fifo, sizeof(fifo), "%s/fifo.key", dir), sizeof(fifo));
	unlink(fifo);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	expect_error_mode("[key k]\nfile = fifo.key\n", 0600, TF_E_NOKEY, 2, "not a regular file");
	ck_assert_int_ne(tf_config_load(fifo, &c, &err), TF_OK);
	ck_assert_ptr_null(c);
	ck_assert_msg(strstr(err.msg, "not a regular file"), "FIFO config: '%s'", err.msg);
	unlink(fifo);
}
END_TEST

START_TEST(test_err_key_missing)
{
	char keyfile[PATH_MAX];

	FORMAT(keyfile, "%s/absent.key", dir);
	expect_error_mode("[key k]\nfile = absent.key\n", 0600, TF_E_NOKEY, 2, keyfile);
	ck_assert_int_eq(unsetenv("TF_TEST_NO_SUCH_KEY"), 0);
	expect_error_mode("[key k]\nenv = TF_TEST_NO_SUCH_KEY\n", 0600, TF_E_NOKEY, 2,
			 "environment variable TF_TEST_NO_SUCH_KEY is not set");
	ck_assert_int_eq(setenv("TF_TEST_SHORT_KEY", "0011", 1), 0);
	expect_error_mode("[key k]\nenv = TF_TEST_SHORT_KEY\n", 0600, TF_E_NOKEY, 2, "32 raw bytes or 64 hex");
}
END_TEST

START_TEST(test_err_key_hex)
{
	tf_config *c;

	expect_error_mode("[key k]\nhex = " KEY_HEX "\n", 0644, TF_E_INVAL, 2, "chmod 600");
	expect_error_mode("[key k]\nhex = " KEY_HEX "\n", 0640, TF_E_INVAL, 2, "group or others");
	expect_error_mode("[key k]\nhex = " KEY_HEX "\n", 0604, TF_E_INVAL, 2, "group or others");
	expect_error_mode("[key k]\nhex = 4142434445464748494a4b4c4d4e4f50515253545556575859zz5b5c5d5e5f60\n",
			 0600, TF_E_NOKEY, 2, "hexadecimal");
	expect_error_mode("[key k]\nhex = " KEY_HEX "\nhex = " KEY2_HEX "\n", 0600, TF_E_INVAL, 3,
			 "[key k] has more than one of file, env, hex");
	c = load_ok("[key k]\nhex = " KEY_HEX "\n");	/* 0600: fine */
	tf_config_free(c);
}
END_TEST

/* A key pasted where a key *name* belongs is not repeated in the error. */
START_TEST(test_err_key_value_not_echoed)
{
	expect_error("[match a]\nkey = " KEY_HEX "\n", 2, "[key");
	expect_error("[tilefs]\ndefault_key = " KEY_HEX "\n", 2, "[key");
}
END_TEST

START_TEST(test_err_no_file)
{
	tf_config *c = NULL;
	tf_error err = { 0 };

	FORMAT(conf_path, "%s/absent.ini", dir);
	ck_assert_int_eq(tf_config_load(conf_path, &c, &err), TF_E_INVAL);
	ck_assert_ptr_null(c);
	ck_assert_ptr_nonnull(strstr(err.msg, conf_path));
	ck_assert_ptr_nonnull(strstr(err.msg, "No such file"));
}
END_TEST

/* A directory is not an empty configuration. */
START_TEST(test_err_directory)
{
	tf_config *c = NULL;
	tf_error err = { 0 };

	ck_assert_int_ne(tf_config_load(dir, &c, &err), TF_OK);
	ck_assert_ptr_null(c);
	ck_assert_ptr_nonnull(strstr(err.msg, dir));
}
END_TEST

/* ---- globs and sizes ------------------------------------------------------------------------ */

START_TEST(test_glob_match)
{
	static const struct { const char *pat, *path; bool match; } cases[] = {
		{ "*.tdb", "a.tdb", true }, { "*.tdb", "x/y/a.tdb", true }, { "*.tdb", "a.tdbx", false },
		{ "*", "a/b/c", true }, { "**", "a/b/c", true },
		{ "a?.tdb", "ab.tdb", true }, { "a?.tdb", "a.tdb", false }, { "a?.tdb", "abc.tdb", false },
		{ "[a-c].tdb", "b.tdb", true }, { "[a-c].tdb", "d.tdb", false }, { "[!a-c].tdb", "d.tdb", true },
		{ "*.[ch]", "src/x.c", true }, { "*.[ch]", "src/x.o", false },
		{ "weather/*.tdb", "weather/t.tdb", true }, { "weather/*.tdb", "weather/x/t.tdb", false },
		{ "weather/*.tdb", "t.tdb", false }, { "weather/*.tdb", "other/weather/t.tdb", false },
		{ "weather/t?mps.tdb", "weather/temps.tdb", true },
		{ "*/t.tdb", "a/t.tdb", true }, { "*/t.tdb", "a/b/t.tdb", false }, { "*/t.tdb", "t.tdb", false },
		{ "a*/b", "abc/b", true }, { "a*/b", "a/x/b", false }, { "a*b/c", "a/xb/c", false },
		{ "a/*", "a/b", true }, { "a/*", "a/b/c", false },
		{ "**/t.tdb", "t.tdb", true }, { "**/t.tdb", "a/t.tdb", true }, { "**/t.tdb", "a/b/c/t.tdb", true },
		{ "**/t.tdb", "a/u.tdb", false }, { "**/*.tdb", "x.tdb", true }, { "**/*.tdb", "a/b/x.tdb", true },
		{ "a/**/t.tdb", "a/t.tdb", true }, { "a/**/t.tdb", "a/b/t.tdb", true },
		{ "a/**/t.tdb", "a/b/c/t.tdb", true }, { "a/**/t.tdb", "b/t.tdb", false },
		{ "a/**/t.tdb", "a/b/u.tdb", false }, { "a/**/t.tdb", "x/a/b/t.tdb", false },
		{ "a/**", "a/b", true }, { "a/**", "a/b/c", true }, { "a/**", "b/c", false },
		{ "**/a/**/b", "x/a/y/z/b", true }, { "**/a/**/b", "a/b", true }, { "**/a/**/b", "a/c", false },
		{ "x/**/y/**/z", "x/1/y/2/3/z", true }, { "x/**/y/**/z", "x/1/2/z", false },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ck_assert_msg(tf_glob_match(cases[i].pat, cases[i].path) == cases[i].match,
			      "glob '%s' on '%s' should %smatch", cases[i].pat, cases[i].path,
			      cases[i].match ? "" : "not ");
}
END_TEST

/* Issue 14: "**" repeated against a path 200 levels deep was exponential
 * (spun forever); it must be decided at once, either way. */
START_TEST(test_glob_deep_path)
{
	const char *pat = "**/**/**/**/**/**/**/**/**/**/*a";
	char path[1024] = "";
	struct timespec t0, t1;

	for (int i = 0; i < 200; i++)
		strcat(path, "d/");
	strcat(path, "b");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert(!tf_glob_match(pat, path));
	path[strlen(path) - 1] = 'a';
	ck_assert(tf_glob_match(pat, path));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_msg(t1.tv_sec - t0.tv_sec < 1, "deep glob took %lld s", (long long)(t1.tv_sec - t0.tv_sec));
}
END_TEST

START_TEST(test_glob_valid)
{
	static const struct { const char *pat; bool valid; } cases[] = {
		{ "*.tdb", true }, { "a/b", true }, { "**/x", true }, { "a/**", true }, { "[a-c]x", true },
		{ "[!a]x", true }, { "[^a]x", true }, { "[]a]x", true }, { "a\\*", true }, { "x y/z", true },
		{ "", false }, { "/abs", false }, { "a//b", false }, { "[abc", false }, { "[]", false },
		{ "a/[b/c]", false }, { "x\\", false },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ck_assert_msg(tf_glob_valid(cases[i].pat) == cases[i].valid, "glob '%s' should be %s",
			      cases[i].pat, cases[i].valid ? "valid" : "invalid");
}
END_TEST

/* "no empty segment": a trailing '/' leaves an empty last segment. */
START_TEST(test_glob_trailing_slash)
{
	ck_assert(!tf_glob_valid("weather/"));
	ck_assert(!tf_glob_valid("a/**/"));
}
END_TEST

START_TEST(test_parse_size)
{
	static const struct { const char *s; bool ok; uint64_t v; } cases[] = {
		{ "0", true, 0 }, { "4096", true, 4096 }, { "64K", true, 65536 }, { "64k", true, 65536 },
		{ "256M", true, 256 << 20 }, { "1G", true, 1 << 30 }, { "2T", true, (uint64_t)2 << 40 },
		{ "256MiB", true, 256 << 20 }, { "256MB", true, 256 << 20 }, { "1KiB", true, 1024 },
		{ "100B", true, 100 }, { "16777215T", true, 0xFFFFFF0000000000ull },
		{ "18446744073709551615", true, UINT64_MAX },
		{ "18446744073709551616", false, 0 }, { "16777216T", false, 0 }, { "", false, 0 },
		{ "M", false, 0 }, { "-1", false, 0 }, { "12X", false, 0 }, { "1.5G", false, 0 },
		{ "1 G", false, 0 }, { "1GG", false, 0 }, { "1MiBx", false, 0 }, { "1Bi", false, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 0xdead;
		bool ok = tf_parse_size(cases[i].s, &v);

		ck_assert_msg(ok == cases[i].ok, "'%s' should %sparse", cases[i].s, cases[i].ok ? "" : "not ");
		ck_assert_msg(!ok || v == cases[i].v, "'%s' gave %llu", cases[i].s, (unsigned long long)v);
	}
}
END_TEST

/* A memory budget is at least its minimum and at most this machine's
 * memory, exactly; a refusal names the option and the limit, and leaves
 * the budget as it was. */
START_TEST(test_parse_budget)
{
	uint64_t mem = tf_memory_bytes(), v = 7;
	char text[32];
	tf_error err;

	ck_assert_uint_gt(mem, TF_CACHE_SIZE_MIN);
	ck_assert_int_eq(tf_parse_budget("cache_size", "1M", TF_CACHE_SIZE_MIN, &v, &err), TF_OK);
	ck_assert_uint_eq(v, 1 << 20);
	FORMAT(text, "%llu", (unsigned long long)mem);
	ck_assert_int_eq(tf_parse_budget("index_cache", text, TF_INDEX_CACHE_MIN, &v, &err), TF_OK);
	ck_assert_uint_eq(v, mem);
	v = 7;
	FORMAT(text, "%llu", (unsigned long long)mem + 1);
	ck_assert_int_eq(tf_parse_budget("index_cache", text, TF_INDEX_CACHE_MIN, &v, &err), TF_E_INVAL);
	ck_assert_msg(strstr(err.msg, "index_cache: ") == err.msg && strstr(err.msg, "more than this machine's memory"),
		      "%s", err.msg);
	ck_assert_int_eq(tf_parse_budget("cache_size", "1023K", TF_CACHE_SIZE_MIN, &v, &err), TF_E_INVAL);
	ck_assert_str_eq(err.msg, "cache_size: 1023K is less than the least it works with, 1M");
	ck_assert_int_eq(tf_parse_budget("cache_size", "lots", TF_CACHE_SIZE_MIN, &v, &err), TF_E_INVAL);
	ck_assert_uint_eq(v, 7);
}
END_TEST

/* Signs and unit letters out of place are not sizes. */
START_TEST(test_parse_size_strict)
{
	static const char *const bad[] = { " -1", "\t-5", "5iB" };
	uint64_t v;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!tf_parse_size(bad[i], &v), "'%s' parsed as %llu", bad[i], (unsigned long long)v);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("config");
	TCase *load = tcase_create("load"), *errors = tcase_create("errors");
	TCase *parsers = tcase_create("parsers");

	tcase_add_unchecked_fixture(load, setup, teardown);
	tcase_add_unchecked_fixture(errors, setup, teardown);
	tcase_add_test(load, test_defaults);
	tcase_add_test(load, test_tilefs_section);
	tcase_add_test(load, test_tilefs_enums);
	tcase_add_test(load, test_sample_ini);
	tcase_add_test(load, test_named_pipeline);
	tcase_add_test(load, test_inline_overrides);
	tcase_add_test(load, test_match_keys);
	tcase_add_test(load, test_bool_spellings);
	tcase_add_test(load, test_rule_line);
	tcase_add_test(load, test_key_sources);
	tcase_add_test(load, test_reload_changes);
	tcase_add_test(load, test_array_keys);
	tcase_add_test(load, test_first_match_wins);
	tcase_add_test(load, test_keyless_match_is_a_rule);
	tcase_add_test(load, test_filters_continuation);
	tcase_add_test(load, test_continuation_inline_comment);
	tcase_add_test(load, test_comments);
	tcase_add_test(load, test_byte_order_mark);
	tcase_add_test(load, test_long_section_name);
	tcase_add_test(load, test_longest_line);
	tcase_add_test(errors, test_err_unknown_keys);
	tcase_add_test(errors, test_err_values);
	tcase_add_test(errors, test_err_filters);
	tcase_add_test(errors, test_err_references);
	tcase_add_test(errors, test_err_sections);
	tcase_add_test(errors, test_err_keyless_section);
	tcase_add_test(errors, test_err_syntax);
	tcase_add_test(errors, test_err_first_wins);
	tcase_add_test(errors, test_err_long_line);
	tcase_add_test(errors, test_err_key_file_mode);
	tcase_add_test(errors, test_err_fifo_files);
	tcase_add_test(errors, test_err_key_missing);
	tcase_add_test(errors, test_err_key_hex);
	tcase_add_test(errors, test_err_key_value_not_echoed);
	tcase_add_test(errors, test_err_no_file);
	tcase_add_test(errors, test_err_directory);
	tcase_add_test(parsers, test_glob_match);
	tcase_add_test(parsers, test_glob_deep_path);
	tcase_add_test(parsers, test_glob_valid);
	tcase_add_test(parsers, test_glob_trailing_slash);
	tcase_add_test(parsers, test_parse_size);
	tcase_add_test(parsers, test_parse_size_strict);
	tcase_add_test(parsers, test_parse_budget);
	suite_add_tcase(s, load);
	suite_add_tcase(s, errors);
	suite_add_tcase(s, parsers);
	return s;
}

TF_TEST_MAIN(suite)
