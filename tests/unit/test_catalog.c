/*
 * test_catalog.c - tf_catalog without FUSE: what a path is (a [match]
 * rule's loose tile file, a TileDB array's files, directories, unmatched
 * names raw or hidden), decoded sizes and bytes against the bytes TileDB
 * wrote (tests/data/corpus), a source changing under it (TF_E_STALE for
 * the old version, the new bytes for the new one), reloads (arrays in use
 * live on for their holders), the bound on arrays kept, views, and many
 * threads looking up, opening and reloading at once; and its entries and
 * readers (tf_entry.h), one interface for every kind, as a driver uses
 * them.
 *
 * Each test copies the corpus arrays it uses into a fresh directory, the
 * source, which it may then change.
 */
#include "tf_test.h"

#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/tf_cache.h"
#include "tf_catalog.h"
#include "tf_entry.h"
#include "config/tf_config.h"
#include "cache/tf_index.h"
#include "sources/tf_perm.h"
#include "views/tf_view.h"

#ifndef TF_TEST_DATA
#error "TF_TEST_DATA: tests/data/corpus (Makefile.am)"
#endif

/* AES-256 key of the corpus's encrypted arrays (tests/mount/lib.sh). */
#define CORPUS_KEY "54696c6544422d6f7261636c652d6b65792d3031323334353637383941424344"

#define MAX_CONFIGS 16

static char base[PATH_MAX], root[PATH_MAX];	/* base/src is the source */
static tf_source *src;
static tf_cache *cache;
static tf_catalog *cat;
static tf_entries *ents;	/* what cat's paths show (tf_entry.h) */
static tf_config *configs[MAX_CONFIGS];		/* every one loaded: they outlive the catalog */
static size_t nconfigs;

/* snprintf into an array, failing the test if it does not fit. */
#define FMT(buf, ...) ck_assert_uint_lt((size_t)snprintf(buf, sizeof(buf), __VA_ARGS__), sizeof(buf))

/* ---- the fixture -------------------------------------------------------------------------- */

/* A configuration of text (with [tilefs] first), kept to the end. */
static tf_config *config_of(const char *text)
{
	char path[PATH_MAX];
	tf_config *c;
	tf_error err;
	FILE *f;

	ck_assert_uint_lt(nconfigs, MAX_CONFIGS);
	FMT(path, "%s/conf%zu.ini", base, nconfigs);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(chmod(path, 0600), 0);	/* it may hold a key */
	ck_assert_msg(tf_config_load(path, &c, &err) == TF_OK, "%s: %s", text, err.msg);
	configs[nconfigs++] = c;
	return c;
}

#define RULES                                                                                      \
	"[match loose/*.tdb]\nfilters = gzip(level=1)\ndatatype = int32\n"                          \
	"[key oracle]\nhex = " CORPUS_KEY "\n"                                                      \
	"[array enc]\nkey = oracle\n"                                                               \
	"[match secret/*.tdb]\nfilters = zstd\ndatatype = int32\nkey = oracle\n"

static void setup(void)
{
	tf_error err;

	snprintf(base, sizeof(base), "%s/tf_catalog.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(base));
	FMT(root, "%s/src", base);
	/* arr: dense int32, gzip; str: string RLE with folded offsets; enc:
	 * AES-256-GCM; loose/a.tdb: arr's data file alone, for a rule. */
	tf_test_sh("mkdir -p '%s/loose' '%s/sub/deeper' && cp -R '%s/gzip_level1/array' '%s/arr' && "
	   "cp -R '%s/str_rle/array' '%s/str' && cp -R '%s/enc_dense_zstd/array' '%s/enc' && "
	   "cp '%s'/arr/__fragments/*/a0.tdb '%s/loose/a.tdb' && echo hello > '%s/plain.txt' && "
	   "echo x > '%s/sub/deeper/raw.bin'",
	   root, root, TF_TEST_DATA, root, TF_TEST_DATA, root, TF_TEST_DATA, root, root, root, root, root);
	ck_assert_msg(tf_source_local(root, &src, &err) == TF_OK, "%s", err.msg);
	ck_assert_msg(tf_cache_new(16u << 20, 1, &cache, &err) == TF_OK, "%s", err.msg);
	ck_assert_msg(tf_catalog_new(src, config_of("[tilefs]\n" RULES), &cat, &err) == TF_OK, "%s", err.msg);
	ck_assert_ptr_nonnull(ents = tf_entries_new(cat, src));
	tf_entries_set_cache(ents, cache, 64u << 20);	/* entries read through it */
}

static void teardown(void)
{
	tf_catalog_drop_views(cat);	/* they charge the cache */
	tf_entries_free(ents);
	tf_cache_free(cache);
	tf_catalog_free(cat);
	tf_source_free(src);
	for (size_t i = 0; i < nconfigs; i++)
		tf_config_free(configs[i]);
	nconfigs = 0;
	tf_test_sh("rm -rf '%s'", base);
}

/* rel of file `name` in the one fragment of array `arr` (static). */
static const char *frag_file(const char *arr, const char *name)
{
	static char rel[PATH_MAX];
	char pattern[PATH_MAX];
	glob_t g;

	FMT(pattern, "%s/%s/__fragments/*/%s", root, arr, name);
	ck_assert_int_eq(glob(pattern, 0, NULL, &g), 0);
	ck_assert_uint_eq(g.gl_pathc, 1);
	snprintf(rel, sizeof(rel), "%s", g.gl_pathv[0] + strlen(root) + 1);
	globfree(&g);
	return rel;
}

/* The bytes TileDB wrote for a case's file (malloc'd). */
static uint8_t *expected(const char *case_name, const char *what, size_t *n)
{
	char path[PATH_MAX];

	FMT(path, "%s/%s/expected/%s", TF_TEST_DATA, case_name, what);
	return tf_test_read_file(path, n);
}

static tf_stat stat_of(const char *rel)
{
	tf_stat st;
	tf_error err;

	ck_assert_msg(tf_source_stat(src, rel, &st, &err) == TF_OK, "%s", err.msg);
	return st;
}

/* The whole decoded file through a handle (malloc'd); TF_OK or the error. */
static tf_status read_all(tf_file *f, uint8_t **out, size_t *n, tf_error *err)
{
	uint64_t size = tf_file_size(f);
	uint8_t *p = malloc(size ? size : 1);
	tf_workspace *ws = tf_workspace_new();
	tf_handle *h;
	tf_status rc;

	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(ws);
	if ((rc = tf_handle_open(f, &h, err)) == TF_OK) {
		rc = tf_handle_read(h, cache, ws, 0, size, p, n, err);
		tf_handle_close(h);
	}
	tf_workspace_free(ws);
	if (rc != TF_OK) {
		free(p);
		p = NULL;
	}
	*out = p;
	return rc;
}

/* Open rel (as it is now) and check its bytes are want[0..n). */
static void check_decodes(const char *rel, unsigned flags, const uint8_t *want, size_t n)
{
	tf_stat st = stat_of(rel);
	tf_file *f;
	tf_error err;
	uint8_t *got;
	size_t gn;

	ck_assert_msg(tf_catalog_open_for(cat, rel, &st.v, flags, &f, NULL, &err) == TF_OK, "%s: %s", rel,
		      err.msg);
	ck_assert_uint_eq(tf_file_size(f), n);
	ck_assert_msg(read_all(f, &got, &gn, &err) == TF_OK, "%s: %s", rel, err.msg);
	ck_assert_uint_eq(gn, n);
	ck_assert_msg(!memcmp(got, want, n), "%s: decoded bytes differ from TileDB's", rel);
	free(got);
	tf_file_unref(f);
}

/* ---- what a path is --------------------------------------------------------------------- */

START_TEST(test_show)
{
	/* A rule's file, an array's data, offsets and metadata files. */
	ck_assert_int_eq(tf_catalog_show(cat, "loose/a.tdb"), TF_SHOW_DECODED);
	ck_assert_int_eq(tf_catalog_show(cat, frag_file("arr", "a0.tdb")), TF_SHOW_DECODED);
	ck_assert_int_eq(tf_catalog_show(cat, frag_file("str", "a0_var.tdb")), TF_SHOW_DECODED);
	ck_assert_int_eq(tf_catalog_show(cat, frag_file("arr", "__fragment_metadata.tdb")), TF_SHOW_DECODED);
	/* Unmatched: shown as stored (unmatched = raw by default). */
	ck_assert_int_eq(tf_catalog_show(cat, "plain.txt"), TF_SHOW_RAW);
	ck_assert_int_eq(tf_catalog_show(cat, "sub/deeper/raw.bin"), TF_SHOW_RAW);
	ck_assert_int_eq(tf_catalog_show(cat, "loose/a.txt"), TF_SHOW_RAW);	/* no rule's glob */
	ck_assert_int_eq(tf_catalog_show(cat, "nowhere/x.bin"), TF_SHOW_RAW);	/* from the path alone */
	/* Array roots, and directories that are not. */
	ck_assert(tf_catalog_is_array(cat, "arr"));
	ck_assert(tf_catalog_is_array(cat, "str"));
	ck_assert(!tf_catalog_is_array(cat, "sub"));
	ck_assert(!tf_catalog_is_array(cat, "."));
	ck_assert(!tf_catalog_is_array(cat, "arr/__fragments"));
	ck_assert(!tf_catalog_is_array(cat, "missing"));
	/* Arrays found so far: arr, str (enc not yet asked about). */
	ck_assert_uint_eq(tf_catalog_arrays(cat), 2);
}
END_TEST

START_TEST(test_show_hidden)
{
	tf_catalog_set_config(cat, config_of("[tilefs]\nunmatched = hide\n" RULES));
	ck_assert_int_eq(tf_catalog_show(cat, "plain.txt"), TF_SHOW_HIDDEN);
	ck_assert_int_eq(tf_catalog_show(cat, "sub/deeper/raw.bin"), TF_SHOW_HIDDEN);
	/* What decodes is shown whatever unmatched says. */
	ck_assert_int_eq(tf_catalog_show(cat, "loose/a.tdb"), TF_SHOW_DECODED);
	ck_assert_int_eq(tf_catalog_show(cat, frag_file("arr", "a0.tdb")), TF_SHOW_DECODED);
	/* A rule for the hidden name: decoded from now on. */
	tf_catalog_set_config(cat, config_of("[tilefs]\nunmatched = hide\n[match *.txt]\nfilters = \n" RULES));
	ck_assert_int_eq(tf_catalog_show(cat, "plain.txt"), TF_SHOW_DECODED);
	ck_assert_int_eq(tf_catalog_show(cat, "sub/deeper/raw.bin"), TF_SHOW_HIDDEN);
	/* And back to the defaults: shown raw. */
	tf_catalog_set_config(cat, config_of("[tilefs]\n"));
	ck_assert_int_eq(tf_catalog_show(cat, "plain.txt"), TF_SHOW_RAW);
	ck_assert_int_eq(tf_catalog_show(cat, "loose/a.tdb"), TF_SHOW_RAW);
	/* Arrays need no rule. */
	ck_assert_int_eq(tf_catalog_show(cat, frag_file("arr", "a0.tdb")), TF_SHOW_DECODED);
}
END_TEST

/* ---- decoded sizes and bytes -------------------------------------------------------------- */

START_TEST(test_open_loose_rule)
{
	size_t n;
	uint8_t *want = expected("gzip_level1", "unfiltered/f0/a0.tdb.bin", &n);
	tf_stat st = stat_of("loose/a.tdb");
	tf_facts fx = { 0 };
	tf_file *f;
	tf_error err;

	ck_assert_uint_eq(n, 4096);
	check_decodes("loose/a.tdb", 0, want, n);
	check_decodes("loose/a.tdb", TF_OPEN_METADATA, want, n);
	/* A rule's file has no array facts, and is not plaintext. */
	ck_assert_int_eq(tf_catalog_open(cat, "loose/a.tdb", &st.v, &f, &fx, &err), TF_OK);
	ck_assert_ptr_null(fx.field);
	ck_assert_ptr_null(fx.fragment);
	ck_assert(!fx.keyed);
	ck_assert(!tf_catalog_keyed(cat, "loose/a.tdb"));
	tf_facts_clear(&fx);
	tf_file_unref(f);
	free(want);

	/* Folded offsets under rules: var_data names the data file, whose
	 * own rule decodes it; the offsets are rebuilt as TileDB stored them. */
	tf_test_sh("mkdir '%s/vs' && cp '%s'/str/__fragments/*/a0.tdb '%s'/str/__fragments/*/a0_var.tdb '%s/vs/' && "
	   "cp '%s/vs/a0.tdb' '%s/vs/orphan.tdb'", root, root, root, root, root, root);
	tf_catalog_set_config(cat, config_of("[tilefs]\n[match vs/a0.tdb]\nfilters = zstd\ndatatype = uint64\n"
					     "var_data = a0_var.tdb\n[match vs/orphan.tdb]\nfilters = zstd\n"
					     "datatype = uint64\nvar_data = nothing.tdb\n"
					     "[match vs/a0_var.tdb]\nfilters = rle\ndatatype = string_ascii\ncell_val_num = var\n"));
	want = expected("str_rle", "unfiltered/f0/a0.tdb.bin", &n);
	check_decodes("vs/a0.tdb", 0, want, n);
	free(want);
	want = expected("str_rle", "unfiltered/f0/a0_var.tdb.bin", &n);
	check_decodes("vs/a0_var.tdb", 0, want, n);
	free(want);
	/* A var_data no rule decodes: refused, saying which. */
	ck_assert_int_eq(tf_catalog_open(cat, "vs/orphan.tdb", NULL, &f, NULL, &err), TF_E_INVAL);
	ck_assert_msg(strstr(err.msg, "nothing.tdb") && strstr(err.msg, "orphan.tdb"), "%s", err.msg);
}
END_TEST

START_TEST(test_open_array_files)
{
	const char *rel = frag_file("arr", "a0.tdb");
	char frag[PATH_MAX];
	size_t n;
	uint8_t *want = expected("gzip_level1", "unfiltered/f0/a0.tdb.bin", &n);
	tf_stat st = stat_of(rel);
	tf_facts fx;
	tf_file *f;
	tf_error err;

	check_decodes(rel, 0, want, n);
	ck_assert_int_eq(tf_catalog_open(cat, rel, NULL, &f, &fx, &err), TF_OK);	/* as it is now */
	ck_assert_uint_eq(tf_file_size(f), n);
	tf_file_unref(f);
	tf_facts_clear(&fx);
	/* Facts: the field, its role, the fragment and the format version. */
	ck_assert_int_eq(tf_catalog_open(cat, rel, &st.v, &f, &fx, &err), TF_OK);
	ck_assert_str_eq(fx.field, "i32");
	ck_assert_ptr_nonnull(fx.role);
	snprintf(frag, sizeof(frag), "%s", strchr(rel, '/') + strlen("/__fragments/"));
	*strchr(frag, '/') = '\0';
	ck_assert_str_eq(fx.fragment, frag);
	ck_assert_uint_eq(fx.format_version, 22);
	ck_assert(!fx.keyed);
	tf_facts_clear(&fx);
	ck_assert_ptr_null(fx.field);
	tf_file_unref(f);
	free(want);

	/* String RLE: the data, and the offsets TileDB folded into it,
	 * rebuilt as it would have stored them. */
	want = expected("str_rle", "unfiltered/f0/a0_var.tdb.bin", &n);
	check_decodes(frag_file("str", "a0_var.tdb"), 0, want, n);
	free(want);
	want = expected("str_rle", "unfiltered/f0/a0.tdb.bin", &n);
	check_decodes(frag_file("str", "a0.tdb"), 0, want, n);
	free(want);
}
END_TEST

/* The innermost array root holding a path wins (dimension-label arrays
 * nest in their array). */
START_TEST(test_nested_array)
{
	char rel[PATH_MAX];
	size_t n;
	uint8_t *want = expected("str_rle", "unfiltered/f0/a0_var.tdb.bin", &n);
	tf_facts fx;
	tf_file *f;
	tf_error err;

	tf_test_sh("cp -R '%s/str' '%s/arr/inner'", root, root);
	ck_assert(tf_catalog_is_array(cat, "arr"));
	ck_assert(tf_catalog_is_array(cat, "arr/inner"));
	FMT(rel, "arr/inner/%s", strchr(frag_file("str", "a0_var.tdb"), '/') + 1);
	ck_assert_int_eq(tf_catalog_show(cat, rel), TF_SHOW_DECODED);
	check_decodes(rel, 0, want, n);
	ck_assert_int_eq(tf_catalog_open(cat, rel, NULL, &f, &fx, &err), TF_OK);
	ck_assert_str_eq(fx.field, "s");	/* str's attribute, not arr's */
	tf_facts_clear(&fx);
	tf_file_unref(f);
	/* arr's own files are still arr's. */
	free(want);
	want = expected("gzip_level1", "unfiltered/f0/a0.tdb.bin", &n);
	check_decodes(frag_file("arr", "a0.tdb"), 0, want, n);
	free(want);
}
END_TEST

/* Plaintext: an array with a key whose newest schema is encrypted, or
 * cannot be read now; not an array with a key whose schema is plain. */
START_TEST(test_keyed)
{
	char rel[PATH_MAX];

	tf_catalog_set_config(cat, config_of("[tilefs]\n" RULES "[array arr]\nkey = oracle\n"));
	FMT(rel, "%s", frag_file("arr", "a0.tdb"));
	ck_assert(!tf_catalog_keyed(cat, rel));
	FMT(rel, "%s", frag_file("enc", "a0.tdb"));
	ck_assert(tf_catalog_keyed(cat, rel));
	/* Its schema gone (a reload forgets what was learnt): still keyed. */
	tf_test_sh("mkdir '%s/enc2' && cp -R '%s/enc/__fragments' '%s/enc/__commits' '%s/enc2/' && mkdir '%s/enc2/__schema'",
	   root, root, root, root, root);
	tf_catalog_set_config(cat, config_of("[tilefs]\n" RULES "[array enc2]\nkey = oracle\n"));
	ck_assert(tf_catalog_is_array(cat, "enc2"));
	FMT(rel, "%s", frag_file("enc2", "a0.tdb"));
	ck_assert(tf_catalog_keyed(cat, rel));
}
END_TEST

START_TEST(test_open_encrypted)
{
	const char *rel;
	size_t n;
	uint8_t *want;
	tf_facts fx;
	tf_file *f;
	tf_error err;

	rel = frag_file("enc", "a1.tdb");
	want = expected("enc_dense_zstd", "unfiltered/f0/a1.tdb.bin", &n);
	check_decodes(rel, 0, want, n);
	free(want);
	/* Plaintext: decided before any index, and said again by the facts. */
	ck_assert(tf_catalog_keyed(cat, rel));
	ck_assert(tf_catalog_keyed(cat, "secret/x.tdb"));	/* a rule with a key */
	ck_assert(!tf_catalog_keyed(cat, frag_file("arr", "a0.tdb")));
	ck_assert(!tf_catalog_keyed(cat, "plain.txt"));
	rel = frag_file("enc", "a0.tdb");
	ck_assert_int_eq(tf_catalog_open(cat, rel, NULL, &f, &fx, &err), TF_OK);
	ck_assert(fx.keyed);
	tf_facts_clear(&fx);
	tf_file_unref(f);

	/* With no key configured nothing is plaintext, and the ciphertext
	 * does not decode (the error names the file). */
	tf_catalog_set_config(cat, config_of("[tilefs]\n"));
	ck_assert(!tf_catalog_keyed(cat, rel));
	ck_assert_int_ne(tf_catalog_open(cat, rel, NULL, &f, NULL, &err), TF_OK);
	ck_assert_ptr_nonnull(strstr(err.msg, "a0.tdb"));
}
END_TEST

START_TEST(test_open_errors)
{
	tf_stat st = stat_of("plain.txt");
	tf_file *f;
	tf_facts fx = { (char *)"junk", NULL, NULL, 9, true };
	tf_error err;

	/* Neither a rule nor an array: TF_E_INVAL naming the file. */
	ck_assert_int_eq(tf_catalog_open(cat, "plain.txt", &st.v, &f, &fx, &err), TF_E_INVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "plain.txt"));
	ck_assert_ptr_null(fx.field);	/* cleared first */
	ck_assert(!fx.keyed);
	/* A rule's file that is not what the rule says. */
	ck_assert_int_ne(tf_catalog_open(cat, "loose/missing.tdb", NULL, &f, NULL, &err), TF_OK);
	tf_test_sh("echo 'not a tile file at all' > '%s/loose/bad.tdb'", root);
	st = stat_of("loose/bad.tdb");
	ck_assert_int_ne(tf_catalog_open(cat, "loose/bad.tdb", &st.v, &f, NULL, &err), TF_OK);
	ck_assert_ptr_nonnull(strstr(err.msg, "bad.tdb"));
	/* A name in an array its schema does not decode. */
	tf_test_sh("echo x > '%s/arr/__fragments/stray.tdb'", root);
	ck_assert_int_ne(tf_catalog_open(cat, "arr/__fragments/stray.tdb", NULL, &f, NULL, &err), TF_OK);
	/* A path longer than any directory the catalog looks at. */
	{
		char longp[5000];

		memset(longp, 'a', sizeof(longp) - 1);
		longp[sizeof(longp) - 1] = '\0';
		ck_assert_int_eq(tf_catalog_show(cat, longp), TF_SHOW_RAW);
		ck_assert(!tf_catalog_keyed(cat, longp));
		ck_assert_int_eq(tf_catalog_open(cat, longp, NULL, &f, NULL, &err), TF_E_INVAL);
	}
}
END_TEST

/* ---- a source that changes ---------------------------------------------------------------- */

START_TEST(test_changed_loose_file)
{
	tf_stat old = stat_of("loose/a.tdb"), now;
	size_t n;
	uint8_t *want = expected("gzip_level1", "unfiltered/f0/a0.tdb.bin", &n), *got;
	tf_file *f, *held;
	tf_error err;
	size_t gn;

	ck_assert_int_eq(tf_catalog_open(cat, "loose/a.tdb", &old.v, &held, NULL, &err), TF_OK);
	/* Replaced by its first tile alone (328 stored bytes: 1,024 decoded). */
	tf_test_sh("head -c 328 '%s/loose/a.tdb' > '%s/loose/new' && mv '%s/loose/new' '%s/loose/a.tdb'", root, root, root,
	   root);
	now = stat_of("loose/a.tdb");
	ck_assert(!tf_version_equal(&old.v, &now.v));
	/* The version the caller stat'ed before: stale. */
	ck_assert_int_eq(tf_catalog_open(cat, "loose/a.tdb", &old.v, &f, NULL, &err), TF_E_STALE);
	/* The new one: its bytes. */
	check_decodes("loose/a.tdb", 0, want, 1024);
	/* An index of the old version reads the old bytes or fails: never a mix. */
	ck_assert(!tf_file_is_current(held, &now.v));
	ck_assert_int_eq(read_all(held, &got, &gn, &err), TF_E_STALE);
	tf_file_unref(held);
	free(want);
}
END_TEST

START_TEST(test_changed_array_file)
{
	char rel[PATH_MAX];
	tf_stat old, now;
	size_t n;
	uint8_t *want = expected("gzip_level1", "unfiltered/f0/a0.tdb.bin", &n), *got;
	tf_file *f;
	tf_error err;
	size_t gn;

	snprintf(rel, sizeof(rel), "%s", frag_file("arr", "a0.tdb"));
	old = stat_of(rel);
	check_decodes(rel, 0, want, n);
	/* The same bytes written again: another version (a new inode). */
	tf_test_sh("cp '%s/%s' '%s/tmpcopy' && mv '%s/tmpcopy' '%s/%s'", root, rel, root, root, root, rel);
	now = stat_of(rel);
	ck_assert(!tf_version_equal(&old.v, &now.v));
	/* Its tiles are known from the fragment metadata, so an index of the
	 * old version reads nothing (tf_file_open): the reads say stale. */
	ck_assert_int_eq(tf_catalog_open(cat, rel, &old.v, &f, NULL, &err), TF_OK);
	ck_assert(!tf_file_is_current(f, &now.v));
	ck_assert_int_eq(read_all(f, &got, &gn, &err), TF_E_STALE);
	ck_assert_ptr_null(got);
	tf_file_unref(f);
	check_decodes(rel, 0, want, n);
	free(want);
}
END_TEST

/* ---- reloads and the arrays kept ------------------------------------------------------------ */

/* The bytes of views entry vrel of v (malloc'd, *n). */
static uint8_t *view_bytes(tf_views *v, const char *vrel, size_t *n)
{
	tf_view_stat vst;
	tf_workspace *ws = tf_workspace_new();
	tf_view *w;
	tf_error err;
	uint8_t *p;

	ck_assert_msg(tf_views_stat(v, vrel, &vst, &err) == TF_OK, "%s: %s", vrel, err.msg);
	ck_assert(vst.size_known && !vst.dir);
	ck_assert_ptr_nonnull(p = malloc(vst.size + 1));
	ck_assert_msg(tf_view_open(v, vrel, &w, &err) == TF_OK, "%s", err.msg);
	ck_assert_msg(tf_view_read(w, ws, 0, vst.size + 1, p, n, &err) == TF_OK, "%s", err.msg);
	ck_assert_uint_eq(*n, vst.size);
	tf_view_close(w);
	tf_workspace_free(ws);
	return p;
}

START_TEST(test_views)
{
	size_t n, gn;
	uint8_t *want = expected("gzip_level1", "w0/i32.bin", &n), *got;
	tf_views *v, *v2;
	tf_catalog_hold *hold, *hold2;
	tf_view_stat vst;
	tf_perm p = TF_PERM_INIT;
	tf_error err;

	ck_assert_msg(tf_catalog_views(cat, "arr", cache, &v, &hold, &err) == TF_OK, "%s", err.msg);
	ck_assert_ptr_nonnull(hold);
	ck_assert_int_eq(tf_views_stat(v, "", &vst, &err), TF_OK);
	ck_assert(vst.dir);
	got = view_bytes(v, "i32.raw", &gn);
	ck_assert_uint_eq(gn, n);
	ck_assert(!memcmp(got, want, n));
	free(got);
	/* Asked again at once: the state the catalog keeps. */
	ck_assert_int_eq(tf_catalog_views(cat, "arr", cache, &v2, &hold2, &err), TF_OK);
	ck_assert_ptr_eq(v2, v);
	ck_assert_ptr_eq(hold2, hold);
	tf_catalog_views_put(cat, v2, hold2);
	/* Who may read it: the array's files, with modes (a local source). */
	ck_assert_int_eq(tf_catalog_views_perm(cat, hold, v, "i32.raw", &p, &err), TF_OK);
	ck_assert_uint_gt(p.n, 0);
	ck_assert(!p.closed);
	ck_assert_int_eq(tf_catalog_views_perm(cat, hold, v, "cells.csv", &p, &err), TF_OK);
	ck_assert_uint_gt(p.n, 0);
	ck_assert_int_eq(tf_catalog_views_perm(cat, hold, v, "nothing.raw", &p, &err), TF_E_INVAL);
	ck_assert(!tf_catalog_keyed(cat, "arr/@views/i32.raw"));
	tf_perm_clear(&p);
	tf_catalog_views_put(cat, v, hold);
	/* Not an array. */
	ck_assert_int_eq(tf_catalog_views(cat, "sub", cache, &v, &hold, &err), TF_E_INVAL);
	ck_assert_ptr_null(v);
	ck_assert_ptr_null(hold);
	ck_assert_ptr_nonnull(strstr(err.msg, "sub"));
	free(want);
}
END_TEST

START_TEST(test_reload_keeps_held_arrays)
{
	size_t n, gn;
	uint8_t *want = expected("gzip_level1", "w0/i32.bin", &n), *got;
	tf_views *v, *v2;
	tf_catalog_hold *hold, *hold2;
	tf_error err;

	ck_assert_int_eq(tf_catalog_views(cat, "arr", cache, &v, &hold, &err), TF_OK);
	ck_assert(tf_catalog_is_array(cat, "str"));
	ck_assert_uint_eq(tf_catalog_arrays(cat), 2);
	/* A reload: every array leaves the table... */
	tf_catalog_set_config(cat, config_of("[tilefs]\n" RULES));
	ck_assert_uint_eq(tf_catalog_arrays(cat), 0);
	/* ...and the one in use reads on, to the byte. */
	got = view_bytes(v, "i32.raw", &gn);
	ck_assert_uint_eq(gn, n);
	ck_assert(!memcmp(got, want, n));
	free(got);
	/* Asked again: a new slot and state for the new configuration. */
	ck_assert_int_eq(tf_catalog_views(cat, "arr", cache, &v2, &hold2, &err), TF_OK);
	ck_assert_ptr_ne(hold2, hold);
	ck_assert_ptr_ne(v2, v);
	ck_assert_uint_eq(tf_catalog_arrays(cat), 1);
	/* Two reloads while held; the retired slot is freed by its last
	 * holder (valgrind: nothing leaks, nothing is freed twice). */
	tf_catalog_set_config(cat, config_of("[tilefs]\n"));
	tf_catalog_views_put(cat, v, hold);
	got = view_bytes(v2, "i32.raw", &gn);
	ck_assert(!memcmp(got, want, n));
	free(got);
	tf_catalog_views_put(cat, v2, hold2);
	ck_assert_uint_eq(tf_catalog_arrays(cat), 0);
	/* The catalog lets every array's views go: a holder's stay its own. */
	ck_assert_int_eq(tf_catalog_views(cat, "arr", cache, &v, &hold, &err), TF_OK);
	tf_catalog_drop_views(cat);
	got = view_bytes(v, "i32.raw", &gn);
	ck_assert(gn == n && !memcmp(got, want, n));
	free(got);
	ck_assert_int_eq(tf_catalog_views(cat, "arr", cache, &v2, &hold2, &err), TF_OK);
	ck_assert_ptr_eq(hold2, hold);
	tf_catalog_views_put(cat, v2, hold2);
	tf_catalog_views_put(cat, v, hold);
	free(want);
}
END_TEST

START_TEST(test_arrays_bounded)
{
	enum { N = TF_CATALOG_ARRAYS + 8 };
	char dir[64];
	size_t n, gn;
	uint8_t *want = expected("gzip_level1", "w0/i32.bin", &n), *got;
	tf_views *v;
	tf_catalog_hold *hold;
	tf_error err;

	tf_test_sh("mkdir '%s/many' && for i in $(seq 0 %d); do cp -R '%s/arr' '%s/many/a'$i; done", root, N - 1, root,
	   root);
	/* The first array held (its views), then every other found. */
	ck_assert_int_eq(tf_catalog_views(cat, "many/a0", cache, &v, &hold, &err), TF_OK);
	for (int i = 1; i < N; i++) {
		snprintf(dir, sizeof(dir), "many/a%d", i);
		ck_assert(tf_catalog_is_array(cat, dir));
		ck_assert_uint_le(tf_catalog_arrays(cat), TF_CATALOG_ARRAYS);
	}
	ck_assert_uint_eq(tf_catalog_arrays(cat), TF_CATALOG_ARRAYS);
	/* The held one, least recently used, stayed for its holder. */
	got = view_bytes(v, "i32.raw", &gn);
	ck_assert(gn == n && !memcmp(got, want, n));
	free(got);
	tf_catalog_views_put(cat, v, hold);
	/* Views of more arrays than are kept warm: those beyond the most
	 * recently used shrink, and read as before when used again. */
	for (int i = N - 8; i < N; i++) {
		snprintf(dir, sizeof(dir), "many/a%d", i);
		ck_assert_int_eq(tf_catalog_views(cat, dir, cache, &v, &hold, &err), TF_OK);
		got = view_bytes(v, "i32.raw", &gn);
		ck_assert(gn == n && !memcmp(got, want, n));
		free(got);
		tf_catalog_views_put(cat, v, hold);
	}
	ck_assert_int_eq(tf_catalog_views(cat, "many/a64", cache, &v, &hold, &err), TF_OK);
	got = view_bytes(v, "i32.raw", &gn);
	ck_assert(gn == n && !memcmp(got, want, n));
	free(got);
	tf_catalog_views_put(cat, v, hold);
	/* Files of arrays long trimmed still decode (found again). */
	want = (free(want), expected("gzip_level1", "unfiltered/f0/a0.tdb.bin", &n));
	for (int i = 0; i < N; i += 9) {
		char rel[PATH_MAX];

		snprintf(dir, sizeof(dir), "many/a%d", i);
		snprintf(rel, sizeof(rel), "%s", frag_file(dir, "a0.tdb"));
		check_decodes(rel, 0, want, n);
	}
	ck_assert_uint_le(tf_catalog_arrays(cat), TF_CATALOG_ARRAYS);
	free(want);
}
END_TEST

/* Rename base/from to root/to. */
static void move_in(const char *from, const char *to)
{
	char a[PATH_MAX], b[PATH_MAX];

	FMT(a, "%s/%s", base, from);
	FMT(b, "%s/%s", root, to);
	ck_assert_msg(rename(a, b) == 0, "%s -> %s", a, b);
}

/* A directory found not to be an array is asked again after a second
 * (tf_catalog.h), so an array created under a live mount is seen; and an
 * array's views are asked whether they are current at most once a
 * second: a new fragment then gives a new state, while the old one reads
 * on for its holders. */
START_TEST(test_changes_seen_after_a_second)
{
	static const char frag2[] = "__1795312349999_1795312349999_6a6ad23b6959570eaad37e4e9154f4c8_22";
	struct timespec t = { 1, 100000000 };
	size_t n, gn;
	uint8_t *want = expected("gzip_level1", "w0/i32.bin", &n), *got;
	char frag[PATH_MAX];
	tf_views *v, *v2, *v3;
	tf_catalog_hold *hold, *hold2, *hold3;
	tf_error err;

	/* Made beside the source first, moved in by rename (a copy may take
	 * longer than the second this test is about on a busy machine): an
	 * array, and a second fragment of arr, a copy of the first written
	 * later. */
	FMT(frag, "%s", frag_file("arr", "a0.tdb"));
	*strrchr(frag, '/') = '\0';
	tf_test_sh("cp -R '%s/arr' '%s/later' && cp -R '%s/%s' '%s/frag2' && touch '%s/commit2'", root, base, root, frag, base,
	   base);
	ck_assert(!tf_catalog_is_array(cat, "later"));
	ck_assert_int_eq(tf_catalog_views(cat, "str", cache, &v3, &hold3, &err), TF_OK);
	tf_catalog_views_put(cat, v3, hold3);
	ck_assert_int_eq(tf_catalog_views(cat, "arr", cache, &v, &hold, &err), TF_OK);
	move_in("later", "later");
	FMT(frag, "arr/__fragments/%s", frag2);
	move_in("frag2", frag);
	FMT(frag, "arr/__commits/%s.wrt", frag2);
	move_in("commit2", frag);
	ck_assert(!tf_catalog_is_array(cat, "later"));	/* remembered */
	ck_assert_int_eq(tf_catalog_views(cat, "arr", cache, &v2, &hold2, &err), TF_OK);
	ck_assert_ptr_eq(v2, v);	/* not asked yet */
	tf_catalog_views_put(cat, v2, hold2);
	nanosleep(&t, NULL);	/* the catalog's documented time to live */
	ck_assert(tf_catalog_is_array(cat, "later"));
	ck_assert_int_eq(tf_catalog_views(cat, "arr", cache, &v2, &hold2, &err), TF_OK);
	ck_assert_ptr_ne(v2, v);
	ck_assert_ptr_eq(hold2, hold);	/* the same array */
	ck_assert_uint_eq(tf_views_nvisible(v2), 2);
	ck_assert_uint_eq(tf_views_nvisible(v), 1);
	/* Both states read the same cells (the newer fragment holds the same). */
	got = view_bytes(v2, "i32.raw", &gn);
	ck_assert(gn == n && !memcmp(got, want, n));
	free(got);
	got = view_bytes(v, "i32.raw", &gn);
	ck_assert(gn == n && !memcmp(got, want, n));
	free(got);
	/* Asked again at once: the new state. */
	ck_assert_int_eq(tf_catalog_views(cat, "arr", cache, &v3, &hold3, &err), TF_OK);
	ck_assert_ptr_eq(v3, v2);
	tf_catalog_views_put(cat, v3, hold3);
	/* An array unchanged for over a second: asked, and its state kept. */
	{
		tf_views *s1, *s2;
		tf_catalog_hold *h1, *h2;

		ck_assert_int_eq(tf_catalog_views(cat, "str", cache, &s1, &h1, &err), TF_OK);
		ck_assert_int_eq(tf_catalog_views(cat, "str", cache, &s2, &h2, &err), TF_OK);
		ck_assert_ptr_eq(s1, s2);
		tf_catalog_views_put(cat, s1, h1);
		tf_catalog_views_put(cat, s2, h2);
	}
	tf_catalog_views_put(cat, v2, hold2);
	tf_catalog_views_put(cat, v, hold);
	free(want);
}
END_TEST

/* The persisted index store: a walked file is stored once and found by
 * the next catalog (a remount) without a walk; views remember their
 * sizes there. */
START_TEST(test_index_store)
{
	char dir[PATH_MAX];
	size_t n;
	uint8_t *want = expected("gzip_level1", "unfiltered/f0/a0.tdb.bin", &n);
	tf_stat st = stat_of("loose/a.tdb");
	tf_index *store;
	tf_index_stats s;
	tf_catalog *first = cat;
	tf_views *v;
	tf_catalog_hold *hold;
	tf_error err;

	FMT(dir, "%s/index", base);
	ck_assert_msg(tf_index_open(dir, 0, NULL, NULL, &store, &err) == TF_OK, "%s", err.msg);
	tf_catalog_set_index(cat, store);
	tf_catalog_prefetch(cat, "loose/a.tdb", &st.v);
	check_decodes("loose/a.tdb", TF_OPEN_METADATA, want, n);
	check_decodes(frag_file("arr", "a0.tdb"), 0, want, n);	/* from fragment metadata: no walk */
	tf_index_get_stats(store, &s);
	ck_assert_uint_eq(s.walks, 1);
	ck_assert_uint_eq(s.writes, 1);
	ck_assert_int_eq(tf_catalog_views(cat, "arr", cache, &v, &hold, &err), TF_OK);
	tf_catalog_views_put(cat, v, hold);
	/* Another catalog over the same store: found, not walked. */
	ck_assert_int_eq(tf_catalog_new(src, configs[0], &cat, &err), TF_OK);
	tf_catalog_set_index(cat, store);
	tf_catalog_prefetch(cat, "loose/a.tdb", &st.v);
	check_decodes("loose/a.tdb", 0, want, n);
	tf_index_get_stats(store, &s);
	ck_assert_uint_eq(s.walks, 1);
	ck_assert_uint_ge(s.hits, 1);
	tf_catalog_drop_views(cat);
	tf_catalog_free(cat);
	cat = first;
	tf_catalog_drop_views(cat);
	tf_catalog_set_index(cat, NULL);
	tf_index_free(store);
	free(want);
}
END_TEST

/* ---- many threads -------------------------------------------------------------------------- */

typedef struct worker {
	int id;
	const uint8_t *data, *raw;	/* expected decoded file, expected i32.raw */
	size_t ndata, nraw;
	char rel[PATH_MAX];
	bool ok;
	char why[256];
} worker;

static tf_config *alt[2];

static void say(worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(worker *w, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->why, sizeof(w->why), fmt, ap);
	va_end(ap);
}

static void *work(void *arg)
{
	worker *w = arg;
	tf_workspace *ws = tf_workspace_new();

	w->ok = true;
	for (int i = 0; i < 40 && w->ok; i++) {
		const char *rel = (i + w->id) % 2 ? w->rel : "loose/a.tdb";
		tf_file *f;
		tf_error err;
		uint8_t *got;
		size_t gn;

		if (w->id == 0 && i % 8 == 0)
			tf_catalog_set_config(cat, alt[i / 8 % 2]);	/* reloads meanwhile */
		if (tf_catalog_show(cat, rel) != TF_SHOW_DECODED || !tf_catalog_is_array(cat, "arr") ||
		    tf_catalog_is_array(cat, "sub") || tf_catalog_keyed(cat, rel)) {
			say(w, "%s: wrong answer", rel);
			w->ok = false;
			break;
		}
		if (tf_catalog_open_for(cat, rel, NULL, i % 3 ? 0 : TF_OPEN_METADATA, &f, NULL, &err) != TF_OK) {
			say(w, "%s", err.msg);
			w->ok = false;
			break;
		}
		if (read_all(f, &got, &gn, &err) != TF_OK || gn != w->ndata || memcmp(got, w->data, gn)) {
			say(w, "%s: bytes differ", rel);
			w->ok = false;
		}
		free(got);
		tf_file_unref(f);
		if (w->ok && i % 4 == w->id % 4) {
			tf_views *v;
			tf_catalog_hold *hold;
			tf_view *vw;
			uint8_t buf[4100];

			if (tf_catalog_views(cat, "arr", cache, &v, &hold, &err) != TF_OK) {
				say(w, "views: %s", err.msg);
				w->ok = false;
				break;
			}
			if (tf_view_open(v, "i32.raw", &vw, &err) != TF_OK ||
			    tf_view_read(vw, ws, 0, sizeof(buf), buf, &gn, &err) != TF_OK || gn != w->nraw ||
			    memcmp(buf, w->raw, gn)) {
				say(w, "i32.raw: bytes differ");
				w->ok = false;
			} else {
				tf_view_close(vw);
			}
			tf_catalog_views_put(cat, v, hold);
		}
	}
	tf_workspace_free(ws);
	return NULL;
}

START_TEST(test_threads)
{
	enum { T = 8 };
	pthread_t th[T];
	worker w[T];
	size_t n, nraw;
	uint8_t *want = expected("gzip_level1", "unfiltered/f0/a0.tdb.bin", &n);
	uint8_t *raw = expected("gzip_level1", "w0/i32.bin", &nraw);

	alt[0] = config_of("[tilefs]\n" RULES);
	alt[1] = config_of("[tilefs]\nunmatched = hide\n" RULES);
	for (int i = 0; i < T; i++) {
		w[i] = (worker){ .id = i, .data = want, .ndata = n, .raw = raw, .nraw = nraw };
		snprintf(w[i].rel, sizeof(w[i].rel), "%s", frag_file("arr", "a0.tdb"));
		ck_assert_int_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < T; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < T; i++)
		ck_assert_msg(w[i].ok, "thread %d: %s", i, w[i].why);
	ck_assert_uint_le(tf_catalog_arrays(cat), 1);
	free(want);
	free(raw);
}
END_TEST

/* An array's files stay its files while reloads come and go: a reload
 * makes the catalog ask again, never answer "no array" for one. */
typedef struct reloader {
	atomic_bool stop;
	unsigned reloads;
} reloader;

static void *reload_loop(void *arg)
{
	reloader *r = arg;

	while (!atomic_load(&r->stop)) {
		tf_catalog_set_config(cat, alt[r->reloads++ % 2]);
		sched_yield();
	}
	return NULL;
}

START_TEST(test_reload_race)
{
	char rel[PATH_MAX];
	reloader r = { 0 };
	pthread_t th;
	unsigned wrong = 0, calls = 0;
	struct timespec t0, t;

	FMT(rel, "%s", frag_file("arr", "a0.tdb"));
	alt[0] = config_of("[tilefs]\nunmatched = hide\n" RULES);
	alt[1] = config_of("[tilefs]\nunmatched = hide\n");
	ck_assert_int_eq(pthread_create(&th, NULL, reload_loop, &r), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 100; i++, calls++)
			wrong += tf_catalog_show(cat, rel) != TF_SHOW_DECODED;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (!wrong && (t.tv_sec - t0.tv_sec) * 1000000000LL + (t.tv_nsec - t0.tv_nsec) < 1000000000LL);
	atomic_store(&r.stop, true);
	pthread_join(th, NULL);
	ck_assert_msg(!wrong, "%u of %u shown as hidden (%u reloads)", wrong, calls, r.reloads);
}
END_TEST

/* ---- entries and readers (tf_entry.h) ------------------------------------------------------- */

/* The entry of path rel, looked up from the root name by name (referenced). */
static tf_entry *entry_at(const char *rel)
{
	char buf[PATH_MAX], *save, *part;
	tf_entry *e, *next;
	tf_error err;

	ck_assert_int_eq(tf_entry_root(ents, &e, &err), TF_OK);
	FMT(buf, "%s", rel);
	for (part = strtok_r(buf, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
		ck_assert_msg(tf_entry_lookup(e, part, NULL, &next, &err) == TF_OK, "%s: %s", part, err.msg);
		ck_assert_msg(err.code == TF_OK, "%s: %s", part, err.msg);
		tf_entry_unref(e);
		e = next;
	}
	return e;
}

/* Entry e's bytes through a reader, read in pieces of `step` (malloc'd). */
static uint8_t *entry_bytes(tf_entry *e, size_t step, size_t *n)
{
	tf_pin_scratch *sc = tf_pin_scratch_new();
	size_t cap = 1 << 16, got = 0;
	uint8_t *p = malloc(cap);
	tf_entry_reader *r;
	tf_open_how how;
	tf_error err;

	ck_assert_ptr_nonnull(sc);
	ck_assert_msg(tf_entry_open(e, sc, NULL, 0, &r, &how, &err) == TF_OK, "%s", err.msg);
	for (;;) {
		const tf_slices *s;
		size_t before = got;

		ck_assert_msg(tf_reader_pin(r, sc, got, step, NULL, &s, &err) == TF_OK, "%s", err.msg);
		for (size_t i = 0; i < s->n; i++) {
			while (got + s->v[i].n > cap)
				ck_assert_ptr_nonnull(p = realloc(p, cap *= 2));
			memcpy(p + got, s->v[i].p, s->v[i].n);
			got += s->v[i].n;
		}
		ck_assert_uint_eq(got - before, s->bytes);
		tf_reader_unpin(sc, true);
		if (got == before)
			break;
	}
	tf_reader_close(r);
	tf_pin_scratch_free(sc);
	*n = got;
	return p;
}

typedef struct names {
	char list[1024];
	size_t len;
	bool full;
} names;

static int add_name(void *ctx, const char *name, const tf_stat *st, bool full)
{
	names *l = ctx;

	(void)st;
	l->len += (size_t)snprintf(l->list + l->len, sizeof(l->list) - l->len, "%s ", name);
	l->full = full;
	return 0;
}

/* Every kind of file behind one interface: what it shows, its listing,
 * its attributes, its bytes through a reader (against TileDB's). */
START_TEST(test_entry_kinds)
{
	size_t n, gn;
	uint8_t *want = expected("gzip_level1", "unfiltered/f0/a0.tdb.bin", &n), *got;
	tf_entry *top, *e, *e2, *x;
	tf_shown a;
	tf_error err;
	names l = { 0 };
	char buf[64], *v;

	ck_assert_int_eq(tf_entry_root(ents, &top, &err), TF_OK);
	ck_assert_str_eq(tf_entry_rel(top), ".");
	ck_assert_str_eq(tf_entry_what(top), "directory");
	tf_entry_attr(top, &a);
	ck_assert_int_eq(a.st.kind, TF_ENT_DIR);
	ck_assert_uint_eq(a.st.mode & 0222, 0);	/* read-only */
	ck_assert_int_eq(tf_entry_list(top, true, add_name, &l, &err), TF_OK);
	ck_assert_ptr_nonnull(strstr(l.list, "plain.txt "));
	ck_assert_ptr_nonnull(strstr(l.list, "loose "));
	ck_assert(l.full);
	/* A rule's file: decoded, sized and read as TileDB's bytes, whatever
	 * the pieces a reader asks for. */
	e = entry_at("loose/a.tdb");
	ck_assert_str_eq(tf_entry_what(e), "decoded");
	tf_entry_attr(e, &a);
	ck_assert_uint_eq(a.st.v.size, n);
	ck_assert(!a.unsized);
	got = entry_bytes(e, 1000, &gn);
	ck_assert_uint_eq(gn, n);
	ck_assert(!memcmp(got, want, n));
	free(got);
	ck_assert_ptr_nonnull(v = tf_entry_getxattr(e, "user.tilefs.datatype"));
	ck_assert_str_eq(v, "int32");
	free(v);
	ck_assert_ptr_null(tf_entry_getxattr(e, "user.tilefs.nothing"));
	ck_assert_uint_gt(tf_entry_listxattr(e, buf, sizeof(buf)), 0);
	ck_assert(!tf_entry_allows(e, &(tf_caller){ 4242, 4242, NULL, NULL }) ==
		  !(a.st.mode & 0004));
	/* The same name showing the same thing: the same entry. */
	e2 = entry_at("loose/a.tdb");
	ck_assert_ptr_eq(e2, e);
	tf_entry_unref(e2);
	/* An array's file: decoded too. */
	x = entry_at(frag_file("arr", "a0.tdb"));
	ck_assert_str_eq(tf_entry_what(x), "decoded");
	got = entry_bytes(x, 1 << 20, &gn);
	ck_assert_uint_eq(gn, n);
	ck_assert(!memcmp(got, want, n));
	free(got);
	tf_entry_unref(x);
	/* As stored. */
	x = entry_at("plain.txt");
	ck_assert_str_eq(tf_entry_what(x), "stored");
	got = entry_bytes(x, 2, &gn);
	ck_assert_uint_eq(gn, 6);
	ck_assert(!memcmp(got, "hello\n", 6));
	free(got);
	ck_assert_ptr_null(tf_entry_getxattr(x, "user.tilefs.pipeline"));
	ck_assert_uint_eq(tf_entry_listxattr(x, buf, sizeof(buf)), 0);
	ck_assert_int_eq(tf_entry_readlink(x, buf, sizeof(buf), &err), TF_E_INVAL);
	ck_assert_int_eq(tf_entry_lookup(x, "y", NULL, &e2, &err), TF_E_NOTFOUND);	/* not a directory */
	tf_entry_unref(x);
	/* A symlink, shown as what it is. */
	tf_test_sh("ln -s plain.txt '%s/link'", root);
	x = entry_at("link");
	tf_entry_attr(x, &a);
	ck_assert_int_eq(a.st.kind, TF_ENT_LNK);
	ck_assert_int_eq(tf_entry_readlink(x, buf, sizeof(buf), &err), TF_OK);
	ck_assert_str_eq(buf, "plain.txt");
	tf_entry_unref(x);
	/* No such name; a directory is no file. */
	ck_assert_int_eq(tf_entry_lookup(top, "missing", NULL, &x, &err), TF_E_NOTFOUND);
	ck_assert_ptr_null(x);
	{
		tf_entry_reader *r;
		tf_open_how how;

		ck_assert_int_eq(tf_entry_open(top, NULL, NULL, 0, &r, &how, &err), TF_E_INVAL);
	}
	tf_entry_unref(e);
	tf_entry_unref(top);
	free(want);
}
END_TEST

/* A reader keeps the version its entry shows: the source rewritten, the
 * next lookup is a new entry with the new bytes, the old entry's next
 * open is TF_E_STALE, and a reader opened before reads the old bytes or
 * fails, never a mix.  Plaintext is the mounter's alone. */
START_TEST(test_entry_versions)
{
	size_t n, gn;
	uint8_t *want = expected("gzip_level1", "unfiltered/f0/a0.tdb.bin", &n), *got;
	tf_pin_scratch *sc = tf_pin_scratch_new();
	tf_entry *e, *e2, *k;
	tf_entry_reader *r, *r2;
	tf_open_how how;
	tf_error err;
	tf_shown a;

	e = entry_at("loose/a.tdb");
	ck_assert_int_eq(tf_entry_open(e, sc, NULL, 0, &r, &how, &err), TF_OK);
	ck_assert(!how.direct);
	ck_assert_int_eq(tf_entry_open(e, sc, NULL, TF_OPEN_DIRECT, &r2, &how, &err), TF_OK);
	ck_assert(how.direct);
	tf_reader_close(r2);
	/* Replaced by its first tile alone: 1,024 decoded bytes. */
	tf_test_sh("head -c 328 '%s/loose/a.tdb' > '%s/loose/new' && mv '%s/loose/new' '%s/loose/a.tdb'", root, root, root,
	   root);
	e2 = entry_at("loose/a.tdb");
	ck_assert_ptr_ne(e2, e);
	tf_entry_attr(e2, &a);
	ck_assert_uint_eq(a.st.v.size, 1024);
	got = entry_bytes(e2, 4096, &gn);
	ck_assert_uint_eq(gn, 1024);
	ck_assert(!memcmp(got, want, 1024));
	free(got);
	ck_assert_int_eq(tf_entry_open(e, sc, NULL, 0, &r2, &how, &err), TF_E_STALE);
	{
		const tf_slices *s;
		tf_status rc = tf_reader_pin(r, sc, 2048, 1024, NULL, &s, &err);

		/* The old file is gone: an error, or its bytes (a descriptor
		 * kept), never the new file's. */
		ck_assert(rc != TF_OK || (s->bytes == 1024 && !memcmp(s->v[0].p, want + 2048, s->v[0].n)));
		tf_reader_unpin(sc, false);
	}
	tf_reader_close(r);
	tf_entry_unref(e);
	tf_entry_unref(e2);
	/* Plaintext of an encrypted array: shown 0400, the mounter's; a user
	 * who is neither the mounter nor root is refused, root is not. */
	k = entry_at(frag_file("enc", "a1.tdb"));
	tf_entry_attr(k, &a);
	ck_assert_uint_eq(a.st.mode, 0400);
	ck_assert_uint_eq(a.st.uid, geteuid());
	ck_assert(!tf_entry_allows(k, &(tf_caller){ geteuid() + 1, 4242, NULL, NULL }));
	ck_assert(tf_entry_allows(k, &(tf_caller){ 0, 0, NULL, NULL }));
	ck_assert(tf_entry_allows(k, &(tf_caller){ geteuid(), getegid(), NULL, NULL }));
	tf_entry_unref(k);
	/* One thread's scratch serves every kind in turn: bytes copied (a
	 * file as stored), then bytes pinned in the cache (a decoded file). */
	{
		const char *rels[] = { "plain.txt", "loose/a.tdb", "plain.txt", "loose/a.tdb" };
		const tf_slices *s;

		for (size_t i = 0; i < 4; i++) {
			k = entry_at(rels[i]);
			ck_assert_int_eq(tf_entry_open(k, sc, NULL, 0, &r, &how, &err), TF_OK);
			ck_assert_int_eq(tf_reader_pin(r, sc, 0, 1 << 20, NULL, &s, &err), TF_OK);
			ck_assert_uint_eq(s->bytes, i % 2 ? 1024 : 6);
			ck_assert_uint_eq(s->v[0].p[0], i % 2 ? want[0] : 'h');
			tf_reader_unpin(sc, true);
			tf_reader_close(r);
			tf_entry_unref(k);
		}
	}
	tf_pin_scratch_free(sc);
	free(want);
}
END_TEST

/* Views as entries: the folder (views = yes), its listing, a view's bytes
 * through a reader, a CSV sized by its first open. */
START_TEST(test_entry_views)
{
	size_t n, gn;
	uint8_t *want = expected("gzip_level1", "w0/i32.bin", &n), *got;
	tf_pin_scratch *sc = tf_pin_scratch_new();
	tf_entry *arr, *vd, *x;
	tf_entry_reader *r;
	tf_open_how how;
	tf_error err;
	tf_shown a;
	names l = { 0 };
	char *v;

	arr = entry_at("arr");
	ck_assert_int_eq(tf_entry_lookup(arr, TF_VIEWS_DIR, NULL, &x, &err), TF_E_NOTFOUND);	/* views off */
	tf_catalog_set_config(cat, config_of("[tilefs]\nviews = yes\n" RULES));
	ck_assert_int_eq(tf_entry_list(arr, false, add_name, &l, &err), TF_OK);
	ck_assert_ptr_nonnull(strstr(l.list, TF_VIEWS_DIR " "));
	ck_assert_int_eq(tf_entry_lookup(arr, TF_VIEWS_DIR, NULL, &vd, &err), TF_OK);
	ck_assert_str_eq(tf_entry_what(vd), "view");
	tf_entry_attr(vd, &a);
	ck_assert_int_eq(a.st.kind, TF_ENT_DIR);
	l = (names){ 0 };
	ck_assert_int_eq(tf_entry_list(vd, true, add_name, &l, &err), TF_OK);
	ck_assert_ptr_nonnull(strstr(l.list, "i32.raw "));
	ck_assert(!l.full);	/* nothing decoded to list views: kinds alone */
	ck_assert_int_eq(tf_entry_lookup(vd, "i32.raw", NULL, &x, &err), TF_OK);
	got = entry_bytes(x, 1000, &gn);
	ck_assert_uint_eq(gn, n);
	ck_assert(!memcmp(got, want, n));
	free(got);
	ck_assert_ptr_nonnull(v = tf_entry_getxattr(x, "user.tilefs.dtype"));
	free(v);
	tf_entry_unref(x);
	ck_assert_int_eq(tf_entry_lookup(vd, "cells.csv", NULL, &x, &err), TF_OK);
	tf_entry_attr(x, &a);
	ck_assert(a.unsized);
	ck_assert_int_eq(tf_entry_open(x, sc, NULL, 0, &r, &how, &err), TF_OK);
	ck_assert(how.resized);
	ck_assert(!how.direct);
	tf_reader_close(r);
	tf_entry_attr(x, &a);
	ck_assert(!a.unsized);
	ck_assert_uint_gt(a.st.v.size, 0);
	got = entry_bytes(x, 333, &gn);
	ck_assert_uint_eq(gn, a.st.v.size);
	free(got);
	tf_entry_unref(x);
	ck_assert_int_eq(tf_entry_lookup(vd, "nothing.raw", NULL, &x, &err), TF_E_NOTFOUND);
	tf_entry_unref(vd);
	tf_entry_unref(arr);
	tf_pin_scratch_free(sc);
	free(want);
}
END_TEST

static Suite *catalog_suite(void)
{
	Suite *s = suite_create("catalog");
	TCase *tc = tcase_create("catalog");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);	/* valgrind */
	tcase_add_test(tc, test_show);
	tcase_add_test(tc, test_show_hidden);
	tcase_add_test(tc, test_open_loose_rule);
	tcase_add_test(tc, test_open_array_files);
	tcase_add_test(tc, test_nested_array);
	tcase_add_test(tc, test_keyed);
	tcase_add_test(tc, test_open_encrypted);
	tcase_add_test(tc, test_open_errors);
	tcase_add_test(tc, test_changed_loose_file);
	tcase_add_test(tc, test_changed_array_file);
	tcase_add_test(tc, test_views);
	tcase_add_test(tc, test_reload_keeps_held_arrays);
	tcase_add_test(tc, test_arrays_bounded);
	tcase_add_test(tc, test_changes_seen_after_a_second);
	tcase_add_test(tc, test_index_store);
	tcase_add_test(tc, test_threads);
	tcase_add_test(tc, test_reload_race);
	tcase_add_test(tc, test_entry_kinds);
	tcase_add_test(tc, test_entry_versions);
	tcase_add_test(tc, test_entry_views);
	suite_add_tcase(s, tc);
	return s;
}

TF_TEST_MAIN(catalog_suite)
