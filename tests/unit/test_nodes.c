/*
 * test_nodes.c - the driver's node table (fs/nodes.c) without a mount:
 * fs_node_* called directly on a tilefs state built here (a local source
 * over a copy of corpus arrays, a catalog, a cache; no FUSE session).
 * Lookups (the same node for the same name and version, a new one when
 * the source or the configuration changed, the errors they give), the
 * kernel's lookup counts and requests' pins freeing a node exactly when
 * both are gone, attributes, and, through each node's entry and its
 * reader (tf_entry.h) as ll.c uses them: the index budget, failed indexes
 * retried after their delay, view nodes, and many threads at once.
 */
#include "tf_test.h"

#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "tilefs.h"
#include "entries/entry_int.h"	/* tf_entry_set_error */
#include "views/tf_view.h"

#ifndef TF_TEST_DATA
#error "TF_TEST_DATA: tests/data/corpus (Makefile.am)"
#endif

/* fs/nodes.c's errors as it returns them (the driver's convention: a
 * positive errno): the one place to change if that convention changes. */
#define NODE_ERR(e) (e)

#define FMT(buf, ...) ck_assert_uint_lt((size_t)snprintf(buf, sizeof(buf), __VA_ARGS__), sizeof(buf))

#define CORPUS_KEY "54696c6544422d6f7261636c652d6b65792d3031323334353637383941424344"
#define RULES                                                                                      \
	"[match loose/*.tdb]\nfilters = gzip(level=1)\ndatatype = int32\n"                          \
	"[key oracle]\nhex = " CORPUS_KEY "\n"                                                      \
	"[array enc]\nkey = oracle\n"
#define MAX_CONFIGS 16

static char base[PATH_MAX], root[PATH_MAX];
static tilefs fs;
static tf_source *src;	/* what a mount holds (tf_mount): here the test's */
static tf_cache *cache;
static tf_catalog *cat;
static tf_config *configs[MAX_CONFIGS];
static size_t nconfigs;
static fs_node *top;	/* the root's node */
static tf_pin_scratch *scratch;	/* the test thread's */
static tf_settings settings;	/* fs.settings, with the index budget set */

/* ---- the fixture -------------------------------------------------------------------------- */

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
	ck_assert_int_eq(chmod(path, 0600), 0);
	ck_assert_msg(tf_config_load(path, &c, &err) == TF_OK, "%s", err.msg);
	configs[nconfigs++] = c;
	return c;
}

/* Put cfg in force as a reload does (fs/lifecycle.c fs_reload): the
 * catalog's, the driver's, then the nodes' generation. */
static void reload(tf_config *cfg)
{
	atomic_store(&fs.settings, tf_config_settings(cfg));
	tf_catalog_set_config(cat, cfg);
	fs_nodes_reloaded(&fs);
}

static fs_node *lookup(fs_node *dir, const char *name, struct stat *st);

static void setup_with(const char *conf, size_t index_budget)
{
	tf_config *cfg;
	tf_error err;
	struct stat st;

	FMT(base, "%s/tf_nodes.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(base));
	FMT(root, "%s/src", base);
	tf_test_sh("mkdir -p '%s/loose' '%s/sub/deeper' && cp -R '%s/gzip_level1/array' '%s/arr' && "
	   "cp -R '%s/str_rle/array' '%s/str' && cp -R '%s/enc_dense_zstd/array' '%s/enc' && "
	   "cp '%s'/arr/__fragments/*/a0.tdb '%s/loose/a.tdb' && cp '%s/loose/a.tdb' '%s/loose/b.tdb' && "
	   "printf hello > '%s/plain.txt' && chmod -R u+w,go-w '%s'",
	   root, root, TF_TEST_DATA, root, TF_TEST_DATA, root, TF_TEST_DATA, root, root, root, root, root, root,
	   root);
	memset(&fs, 0, sizeof(fs));
	fs_log_init(true, TF_LOG_ERROR);
	cfg = config_of(conf);
	atomic_store(&fs.settings, tf_config_settings(cfg));
	ck_assert_msg(tf_source_local(root, &src, &err) == TF_OK, "%s", err.msg);
	ck_assert_msg(tf_cache_new(16u << 20, 1, &cache, &err) == TF_OK, "%s", err.msg);
	ck_assert_msg(tf_catalog_new(src, cfg, &cat, &err) == TF_OK, "%s", err.msg);
	ck_assert_ptr_nonnull(fs.entries = tf_entries_new(cat, src));
	tf_entries_set_cache(fs.entries, cache, index_budget);
	settings = *tf_config_settings(cfg);
	settings.index_budget = index_budget;
	atomic_store(&fs.settings, &settings);
	ck_assert_int_eq(fs_nodes_init(&fs), 0);
	ck_assert_ptr_nonnull(scratch = tf_pin_scratch_new());
	top = lookup(NULL, ".", &st);
	ck_assert_uint_eq(fs_node_ino(top), FUSE_ROOT_ID);
	ck_assert(S_ISDIR(st.st_mode));
}

static void setup(void)
{
	setup_with("[tilefs]\n" RULES, 64u << 20);
}

static void setup_views(void)
{
	setup_with("[tilefs]\nviews = yes\n" RULES, 64u << 20);
}

static void teardown(void)
{
	tf_pin_scratch_free(scratch);
	fs_nodes_destroy(&fs.nodes);
	tf_catalog_drop_views(cat);
	tf_entries_free(fs.entries);
	tf_cache_free(cache);
	tf_catalog_free(cat);
	tf_source_free(src);
	for (size_t i = 0; i < nconfigs; i++)
		tf_config_free(configs[i]);
	nconfigs = 0;
	tf_test_sh("rm -rf '%s'", base);
}

/* ---- helpers -------------------------------------------------------------------------------- */

static int lookup_rc(fs_node *dir, const char *name, fs_node **out, struct stat *st)
{
	*out = NULL;
	return fs_node_lookup(&fs, dir, name, NULL, out, st);
}

static fs_node *lookup(fs_node *dir, const char *name, struct stat *st)
{
	fs_node *n;
	int rc = lookup_rc(dir, name, &n, st);

	ck_assert_msg(rc == 0, "lookup %s: %d", name, rc);
	ck_assert_ptr_nonnull(n);
	ck_assert_uint_eq(st->st_ino, fs_node_ino(n));
	return n;
}

/* The node of a path from the root (each directory looked up once). */
static fs_node *walk(const char *path, struct stat *st)
{
	char buf[PATH_MAX], *save, *part;
	fs_node *n = top;

	FMT(buf, "%s", path);
	for (part = strtok_r(buf, "/", &save); part; part = strtok_r(NULL, "/", &save))
		n = lookup(n, part, st);
	return n;
}

/* Whether inode ino is still in the table (a get and put). */
static bool alive(fuse_ino_t ino)
{
	fs_node *n = fs_node_get(&fs, ino);

	if (n)
		fs_node_put(&fs, n);
	return n != NULL;
}

static size_t count_nodes(size_t *indexes, size_t *index_bytes)
{
	size_t nodes, ix, bytes, handles;

	fs_nodes_stats(&fs, &nodes, &ix, &bytes, &handles);
	if (indexes)
		*indexes = ix;
	if (index_bytes)
		*index_bytes = bytes;
	return nodes;
}

static const char *frag_file(const char *arr, const char *name)
{
	static char rel[PATH_MAX];
	char pattern[PATH_MAX];
	glob_t g;

	FMT(pattern, "%s/%s/__fragments/*/%s", root, arr, name);
	ck_assert_int_eq(glob(pattern, 0, NULL, &g), 0);
	ck_assert_uint_eq(g.gl_pathc, 1);
	FMT(rel, "%s", g.gl_pathv[0] + strlen(root) + 1);
	globfree(&g);
	return rel;
}

static uint8_t *expected(const char *case_name, const char *what, size_t *n)
{
	char path[PATH_MAX];

	FMT(path, "%s/%s/expected/%s", TF_TEST_DATA, case_name, what);
	return tf_test_read_file(path, n);
}

static tf_entry *E(fs_node *n)
{
	return fs_node_entry(n);
}

static bool is_decoded(fs_node *n)
{
	return !strcmp(tf_entry_what(E(n)), "decoded");
}

static bool is_view(fs_node *n)
{
	return !strcmp(tf_entry_what(E(n)), "view");
}

/* Open n's entry as ll_open does: 0 or the errno ll_open answers. */
static int open_rc(fs_node *n, tf_entry_reader **r, tf_open_how *how)
{
	tf_open_how h;
	tf_error err;

	return fs_errno(tf_entry_open(E(n), scratch, NULL, 0, r, how ? how : &h, &err));
}

/* Bytes [off, off+len) of reader r into dst (as ll_read pins them); how many. */
static size_t read_at(tf_entry_reader *r, tf_pin_scratch *sc, uint64_t off, size_t len, uint8_t *dst)
{
	const tf_slices *s;
	tf_error err;
	size_t got = 0;

	ck_assert_msg(tf_reader_pin(r, sc, off, len, NULL, &s, &err) == TF_OK, "%s", err.msg);
	for (size_t i = 0; i < s->n; i++) {
		memcpy(dst + got, s->v[i].p, s->v[i].n);
		got += s->v[i].n;
	}
	ck_assert_uint_eq(got, s->bytes);
	tf_reader_unpin(sc, true);
	return got;
}

/* Open n as ll_open does, read it whole as ll_read does, compare with want[0..len). */
static void check_bytes(fs_node *n, const uint8_t *want, size_t len)
{
	uint8_t *got = malloc(len + 1);
	tf_entry_reader *r;
	int rc;

	ck_assert_ptr_nonnull(got);
	rc = open_rc(n, &r, NULL);
	ck_assert_msg(rc == 0, "%s: %d", fs_node_rel(n), rc);
	ck_assert_uint_eq(read_at(r, scratch, 0, len + 1, got), len);
	ck_assert_msg(!memcmp(got, want, len), "%s: bytes differ", fs_node_rel(n));
	tf_reader_close(r);
	free(got);
}

/* Whether a user who is neither root, the mounter nor any file's owner
 * (nor in their groups) may open n. */
static bool stranger_may(fs_node *n)
{
	tf_caller who = { 4242, 4242, NULL, NULL };

	return tf_entry_allows(E(n), &who);
}

static char *xattr(fs_node *n, const char *name)
{
	char full[64];

	FMT(full, "user.tilefs.%s", name);
	return tf_entry_getxattr(E(n), full);
}

/* The index budget from now on (taken at the next let-go). */
static void budget(size_t bytes)
{
	tf_entries_set_cache(fs.entries, cache, bytes);
}

/* ---- lookups ---------------------------------------------------------------------------------- */

START_TEST(test_lookup_same_node)
{
	struct stat st, st2;
	size_t n;
	uint8_t *want = expected("gzip_level1", "unfiltered/f0/a0.tdb.bin", &n);
	fs_node *loose = lookup(top, "loose", &st), *a, *a2, *p;

	ck_assert(fs_node_is_dir(loose));
	ck_assert_str_eq(fs_node_rel(loose), "loose");
	ck_assert_uint_ne(fs_node_ino(loose), FUSE_ROOT_ID);
	a = lookup(loose, "a.tdb", &st);
	ck_assert_str_eq(fs_node_rel(a), "loose/a.tdb");
	ck_assert(is_decoded(a));
	ck_assert(!fs_node_is_dir(a));
	ck_assert(!is_view(a));
	ck_assert_int_eq(st.st_size, 4096);	/* decoded, not stored */
	/* The same name, the same version: the same node. */
	a2 = lookup(loose, "a.tdb", &st2);
	ck_assert_ptr_eq(a2, a);
	ck_assert_uint_eq(st2.st_ino, st.st_ino);
	ck_assert(lookup(top, "loose", &st2) == loose);
	/* Shown as stored. */
	p = lookup(top, "plain.txt", &st);
	ck_assert(!is_decoded(p));
	ck_assert_int_eq(st.st_size, 5);
	ck_assert_uint_ne(fs_node_ino(p), fs_node_ino(a));
	/* An array's file, through its directories. */
	p = walk(frag_file("arr", "a0.tdb"), &st);
	ck_assert(is_decoded(p));
	ck_assert_int_eq(st.st_size, (off_t)n);
	check_bytes(p, want, n);
	check_bytes(a, want, n);
	/* Known attributes (a listing's) spare the stat. */
	{
		tf_stat known;
		fs_node *k;

		ck_assert_int_eq(tf_source_stat(src, "loose/a.tdb", &known, NULL), TF_OK);
		ck_assert_int_eq(fs_node_lookup(&fs, loose, "a.tdb", &known, &k, &st), 0);
		ck_assert_ptr_eq(k, a);
		tf_version v;

		tf_entry_version(E(k), &v);
		ck_assert(tf_version_equal(&v, &known.v));
	}
	free(want);
}
END_TEST

START_TEST(test_lookup_errors)
{
	char name[PATH_MAX + 16];
	struct stat st;
	fs_node *n, *sub = lookup(top, "sub", &st);

	ck_assert_int_eq(lookup_rc(top, "missing", &n, &st), NODE_ERR(ENOENT));
	ck_assert_ptr_null(n);
	ck_assert_int_eq(lookup_rc(sub, "missing", &n, &st), NODE_ERR(ENOENT));
	/* A path past PATH_MAX. */
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	ck_assert_int_eq(lookup_rc(sub, name, &n, &st), NODE_ERR(ENAMETOOLONG));
	/* A name past NAME_MAX (the kernel refuses those before asking): the
	 * source's stat fails with ENAMETOOLONG, which the node table's errno
	 * map (fs_errno, after the entries' stat_name) does not know: EIO, logged as
	 * a source failure. */
	name[NAME_MAX + 1] = '\0';
	ck_assert_int_eq(lookup_rc(sub, name, &n, &st), NODE_ERR(EIO));
	/* A file where a directory is expected. */
	n = lookup(top, "plain.txt", &st);
	ck_assert_int_eq(lookup_rc(n, "x", &n, &st), NODE_ERR(ENOENT));
	/* @views without views = yes is a name like any other. */
	n = lookup(top, "arr", &st);
	ck_assert_int_eq(lookup_rc(n, TF_VIEWS_DIR, &n, &st), NODE_ERR(ENOENT));
	/* Hidden names are not there. */
	reload(config_of("[tilefs]\nunmatched = hide\n" RULES));
	ck_assert_int_eq(lookup_rc(top, "plain.txt", &n, &st), NODE_ERR(ENOENT));
	n = lookup(top, "loose", &st);
	n = lookup(n, "a.tdb", &st);	/* decoded: shown */
	/* Device nodes are not shown; FIFOs are, as what they are. */
	ck_assert_int_eq(mkfifo(strcat(strcpy(name, root), "/fifo"), 0644), 0);
	reload(config_of("[tilefs]\n" RULES));
	n = lookup(top, "fifo", &st);
	ck_assert(S_ISFIFO(st.st_mode));
	ck_assert(!is_decoded(n));
	if (geteuid() == 0) {
		ck_assert_int_eq(mknod(strcat(strcpy(name, root), "/null"), S_IFCHR | 0666, makedev(1, 3)), 0);
		ck_assert_int_eq(lookup_rc(top, "null", &n, &st), NODE_ERR(ENOENT));
	}
}
END_TEST

/* The kernel's lookup count and requests' pins: a node is freed exactly
 * when both are gone (never the root). */
START_TEST(test_forget_and_pins)
{
	struct stat st;
	fs_node *loose = lookup(top, "loose", &st), *a, *g;
	fuse_ino_t ino;
	size_t base_count;

	a = lookup(loose, "a.tdb", &st);
	ino = fs_node_ino(a);
	ck_assert_ptr_eq(lookup(loose, "a.tdb", &st), a);	/* nlookup 2 */
	base_count = count_nodes(NULL, NULL);
	fs_node_forget(&fs, ino, 1);
	ck_assert(alive(ino));
	fs_node_forget(&fs, ino, 1);
	ck_assert(!alive(ino));
	ck_assert_uint_eq(count_nodes(NULL, NULL), base_count - 1);
	/* Looked up again: a new inode number (numbers are never reused). */
	a = lookup(loose, "a.tdb", &st);
	ck_assert_uint_ne(fs_node_ino(a), ino);
	ino = fs_node_ino(a);
	/* A request's pin outlives the kernel's forget. */
	g = fs_node_get(&fs, ino);
	ck_assert_ptr_eq(g, a);
	fs_node_forget(&fs, ino, 5);	/* more than it holds: down to 0 */
	ck_assert_ptr_eq(fs_node_get(&fs, ino), a);	/* a second pin */
	fs_node_put(&fs, a);
	ck_assert(alive(ino));
	fs_node_put(&fs, g);
	ck_assert(!alive(ino));
	/* An open handle too (ll_open: the request's pin passes to it, with
	 * the entry's reader). */
	a = lookup(loose, "a.tdb", &st);
	ino = fs_node_ino(a);
	{
		tf_entry_reader *r;

		ck_assert_ptr_eq(fs_node_get(&fs, ino), a);
		ck_assert_int_eq(open_rc(a, &r, NULL), 0);
		fs_node_forget(&fs, ino, 1);
		ck_assert(alive(ino));
		tf_reader_close(r);
		fs_node_put(&fs, a);
	}
	ck_assert(!alive(ino));
	/* The root stays, however often it is forgotten; unknown numbers are
	 * ignored. */
	fs_node_forget(&fs, FUSE_ROOT_ID, 1000);
	ck_assert(alive(FUSE_ROOT_ID));
	fs_node_forget(&fs, 999999, 1);
	ck_assert_ptr_null(fs_node_get(&fs, 999999));
	/* Directories are freed the same way. */
	ino = fs_node_ino(loose);
	fs_node_forget(&fs, ino, 1);
	ck_assert(!alive(ino));
	ck_assert_uint_eq(count_nodes(NULL, NULL), 1);
}
END_TEST

/* A regular file's node is one version: a changed source gets a new node,
 * the old one stays for who holds it and says stale. */
START_TEST(test_changed_source)
{
	struct stat st;
	size_t n;
	uint8_t *want = expected("gzip_level1", "unfiltered/f0/a0.tdb.bin", &n);
	fs_node *loose = lookup(top, "loose", &st), *a1, *a2;
	fuse_ino_t ino1;
	tf_entry_reader *r;

	a1 = lookup(loose, "a.tdb", &st);
	check_bytes(a1, want, n);
	/* Replaced by its first tile alone: 1,024 decoded bytes. */
	tf_test_sh("head -c 328 '%s/loose/a.tdb' > '%s/loose/new' && mv '%s/loose/new' '%s/loose/a.tdb'", root, root, root,
	   root);
	a2 = lookup(loose, "a.tdb", &st);
	ck_assert_ptr_ne(a2, a1);
	ck_assert_uint_ne(fs_node_ino(a2), fs_node_ino(a1));
	ck_assert_int_eq(st.st_size, 1024);
	check_bytes(a2, want, 1024);
	ck_assert_ptr_eq(lookup(loose, "a.tdb", &st), a2);	/* the current one now */
	/* The old node: its index kept, the stored file no longer its version. */
	ck_assert(alive(fs_node_ino(a1)));
	ck_assert_int_eq(open_rc(a1, &r, NULL), NODE_ERR(ESTALE));
	ino1 = fs_node_ino(a1);
	fs_node_forget(&fs, ino1, 1);
	ck_assert(!alive(ino1));
	ck_assert(alive(fs_node_ino(a2)));
	free(want);
}
END_TEST

/* Attributes a listing gave (known) that are no longer true: the index
 * of that version is stale, and the lookup looks at the source again. */
START_TEST(test_known_stale)
{
	struct stat st;
	fs_node *loose = lookup(top, "loose", &st), *a;
	tf_stat known;

	ck_assert_int_eq(tf_source_stat(src, "loose/b.tdb", &known, NULL), TF_OK);
	tf_test_sh("head -c 328 '%s/loose/b.tdb' > '%s/loose/new' && mv '%s/loose/new' '%s/loose/b.tdb'", root, root, root,
	   root);
	ck_assert_int_eq(fs_node_lookup(&fs, loose, "b.tdb", &known, &a, &st), 0);
	{
		tf_version v;

		tf_entry_version(E(a), &v);
		ck_assert(!tf_version_equal(&v, &known.v));
	}
	ck_assert_int_eq(st.st_size, 1024);
	ck_assert_ptr_eq(lookup(loose, "b.tdb", &st), a);
	/* The root looked up again is the root. */
	ck_assert_ptr_eq(lookup(NULL, ".", &st), top);
}
END_TEST

/* Without the index kept, opening a node whose source changed is ESTALE. */
START_TEST(test_changed_source_unindexed)
{
	struct stat st;
	fs_node *loose = lookup(top, "loose", &st), *a;
	tf_entry_reader *r;

	budget(0);	/* every idle index goes */
	a = lookup(loose, "a.tdb", &st);
	tf_test_sh("cp '%s/loose/a.tdb' '%s/loose/new' && mv '%s/loose/new' '%s/loose/a.tdb'", root, root, root, root);
	ck_assert_int_eq(open_rc(a, &r, NULL), NODE_ERR(ESTALE));
	/* Remembered for the retry delay: not even stat'ed again. */
	ck_assert_int_eq(open_rc(a, &r, NULL), NODE_ERR(ESTALE));
	ck_assert_ptr_ne(lookup(loose, "a.tdb", &st), a);
}
END_TEST

/* Directories keep their node while their path holds the same inode;
 * a symlink is a version like a file; a name changing kind is a new node. */
START_TEST(test_dirs_links_kinds)
{
	struct stat st;
	fs_node *sub = lookup(top, "sub", &st), *l, *x;

	tf_test_sh("touch '%s/sub/newfile'", root);	/* the directory's times move */
	ck_assert_ptr_eq(lookup(top, "sub", &st), sub);
	tf_test_sh("mv '%s/sub' '%s/sub.old' && mkdir '%s/sub'", root, root, root);
	ck_assert_ptr_ne(lookup(top, "sub", &st), sub);
	ck_assert(alive(fs_node_ino(sub)));	/* for the kernel, which knows it */
	ck_assert_int_eq(symlink("plain.txt", strcat(strcpy((char[PATH_MAX]){ 0 }, root), "/link")), 0);
	l = lookup(top, "link", &st);
	ck_assert(S_ISLNK(st.st_mode));
	ck_assert_int_eq(st.st_size, 9);
	ck_assert(!is_decoded(l));
	ck_assert_ptr_eq(lookup(top, "link", &st), l);
	tf_test_sh("rm '%s/link' && ln -s loose '%s/link'", root, root);
	ck_assert_ptr_ne(lookup(top, "link", &st), l);
	/* A file where a directory was. */
	x = lookup(top, "sub.old", &st);
	tf_test_sh("rm -rf '%s/sub.old' && printf abc > '%s/sub.old'", root, root);
	ck_assert_ptr_ne(x = lookup(top, "sub.old", &st), NULL);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert(!fs_node_is_dir(x));
	ck_assert_int_eq(st.st_size, 3);
}
END_TEST

/* Thousands of nodes: the tables grow, every node is found by number and
 * by name, and all go when forgotten. */
START_TEST(test_many_nodes)
{
	enum { N = 2100 };	/* past twice the 1,024 first buckets: a grow */
	static fs_node *nodes[N];
	struct stat st;
	fs_node *many;
	char name[32];

	char first[PATH_MAX], path[PATH_MAX];

	/* Names of one inode (links: a new inode costs ~1 ms on a busy ext4). */
	tf_test_sh("mkdir '%s/many' && printf x > '%s/many/f0'", root, root);
	FMT(first, "%s/many/f0", root);
	for (int i = 1; i < N; i++) {
		FMT(path, "%s/many/f%d", root, i);
		ck_assert_int_eq(link(first, path), 0);
	}
	many = lookup(top, "many", &st);
	for (int i = 0; i < N; i++) {
		FMT(name, "f%d", i);
		nodes[i] = lookup(many, name, &st);
	}
	ck_assert_uint_eq(count_nodes(NULL, NULL), N + 2);
	for (int i = 0; i < N; i++) {
		fs_node *g = fs_node_get(&fs, fs_node_ino(nodes[i]));

		FMT(name, "f%d", i);
		ck_assert_ptr_eq(g, nodes[i]);
		ck_assert_str_eq(fs_node_rel(g) + strlen("many/"), name);
		fs_node_put(&fs, g);
		if (i % 97 == 0)
			ck_assert_ptr_eq(lookup(many, name, &st), nodes[i]);
	}
	for (int i = 0; i < N; i++)
		fs_node_forget(&fs, fs_node_ino(nodes[i]), i % 97 == 0 ? 2 : 1);
	fs_node_forget(&fs, fs_node_ino(many), 1);
	ck_assert_uint_eq(count_nodes(NULL, NULL), 1);
}
END_TEST

/* ---- attributes ----------------------------------------------------------------------------- */

START_TEST(test_attr)
{
	struct stat st, sb;
	char path[PATH_MAX];
	fs_node *loose, *a, *p, *e;

	tf_test_sh("chmod 0750 '%s/loose' && chmod 0640 '%s/loose/a.tdb' && chmod 0604 '%s/plain.txt'", root, root, root);
	loose = lookup(top, "loose", &st);
	ck_assert_uint_eq(st.st_mode, S_IFDIR | 0550);	/* no write bits, ever */
	a = lookup(loose, "a.tdb", &st);
	FMT(path, "%s/loose/a.tdb", root);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_uint_eq(st.st_mode, S_IFREG | 0440);
	ck_assert_uint_eq(st.st_uid, sb.st_uid);
	ck_assert_uint_eq(st.st_gid, sb.st_gid);
	ck_assert_uint_eq(st.st_nlink, 1);
	ck_assert_int_eq(st.st_size, 4096);
	ck_assert_int_eq(st.st_blocks, 8);
	ck_assert_int_eq(st.st_blksize, 1 << 20);
	ck_assert_int_eq(st.st_mtim.tv_sec, sb.st_mtim.tv_sec);
	ck_assert_int_eq(st.st_mtim.tv_nsec, sb.st_mtim.tv_nsec);
	ck_assert_int_eq(st.st_ctim.tv_sec, sb.st_ctim.tv_sec);
	p = lookup(top, "plain.txt", &st);
	ck_assert_uint_eq(st.st_mode, S_IFREG | 0404);
	ck_assert_int_eq(st.st_size, 5);
	ck_assert_int_eq(st.st_blocks, 1);
	/* fs_node_attr again: a file shows its version; a directory its
	 * present modes. */
	tf_test_sh("chmod 0755 '%s/loose' && chmod 0644 '%s/plain.txt'", root, root);
	ck_assert_int_eq(fs_node_attr(&fs, loose, &st), 0);
	ck_assert_uint_eq(st.st_mode, S_IFDIR | 0555);
	ck_assert_int_eq(fs_node_attr(&fs, p, &st), 0);
	ck_assert_uint_eq(st.st_mode, S_IFREG | 0404);
	ck_assert_int_eq(fs_node_attr(&fs, a, &st), 0);
	ck_assert_int_eq(st.st_size, 4096);
	ck_assert_double_eq(fs_node_attr_timeout(&fs, a, 1.0), 1.0);
	/* Plaintext of an encrypted array: the mounter's alone. */
	tf_test_sh("chmod -R a+rX '%s/enc'", root);
	e = walk(frag_file("enc", "a1.tdb"), &st);
	ck_assert_uint_eq(st.st_mode, S_IFREG | 0400);
	ck_assert_uint_eq(st.st_uid, geteuid());
	ck_assert_uint_eq(st.st_gid, getegid());
	{
		char *v;

		/* Asked again at open: the mounter's alone, whatever the modes
		 * (others may read the ciphertext). */
		ck_assert(!stranger_may(e));
		ck_assert_ptr_nonnull(v = xattr(e, "field"));
		ck_assert_msg(!strncmp(v, "i32 (", 5), "%s", v);	/* a1.tdb */
		free(v);
		/* A file as readable as its modes say: nothing to ask again. */
		tf_test_sh("chmod 0644 '%s/loose/a.tdb'", root);
		ck_assert(stranger_may(a));
	}
	/* The type bits of each kind. */
	ck_assert_uint_eq(fs_mode_type(TF_ENT_REG), S_IFREG);
	ck_assert_uint_eq(fs_mode_type(TF_ENT_DIR), S_IFDIR);
	ck_assert_uint_eq(fs_mode_type(TF_ENT_LNK), S_IFLNK);
	ck_assert_uint_eq(fs_mode_type(TF_ENT_FIFO), S_IFIFO);
	ck_assert_uint_eq(fs_mode_type(TF_ENT_SOCK), S_IFSOCK);
}
END_TEST

/* Folded offsets decode from the data file too: a node shows one version
 * of both, and is as readable as both. */
START_TEST(test_dep)
{
	char off_rel[PATH_MAX], var_rel[PATH_MAX];
	struct stat st;
	size_t n;
	uint8_t *want = expected("str_rle", "unfiltered/f0/a0.tdb.bin", &n);
	fs_node *o1, *o2;
	FMT(off_rel, "%s", frag_file("str", "a0.tdb"));
	FMT(var_rel, "%s", frag_file("str", "a0_var.tdb"));
	tf_test_sh("chmod 0644 '%s/%s' && chmod 0640 '%s/%s'", root, off_rel, root, var_rel);
	o1 = walk(off_rel, &st);
	ck_assert_int_eq(st.st_size, (off_t)n);
	check_bytes(o1, want, n);
	/* Others may not read the data file: nor the offsets made from it. */
	ck_assert_int_eq(fs_node_attr(&fs, o1, &st), 0);
	ck_assert_uint_eq(st.st_mode, S_IFREG | 0440);
	/* Asked again at open: both files' modes (others may read the
	 * offsets' own file, not the data). */
	ck_assert(!stranger_may(o1));
	/* The data file rewritten (the same bytes, a new version): the
	 * offsets' own file unchanged, its next lookup is a new node. */
	tf_test_sh("cp -p '%s/%s' '%s/tmpcopy' && mv '%s/tmpcopy' '%s/%s'", root, var_rel, root, root, root, var_rel);
	o2 = walk(off_rel, &st);
	ck_assert_ptr_ne(o2, o1);
	check_bytes(o2, want, n);
	ck_assert_ptr_eq(walk(off_rel, &st), o2);
	/* Its index dropped, then the data file rewritten again: rebuilding
	 * it would decode another version of the data file, which is another
	 * node's: ESTALE. */
	budget(0);
	check_bytes(o2, want, n);
	tf_test_sh("cp -p '%s/%s' '%s/tmpcopy' && mv '%s/tmpcopy' '%s/%s'", root, var_rel, root, root, root, var_rel);
	{
		tf_entry_reader *r;

		ck_assert_int_eq(open_rc(o2, &r, NULL), NODE_ERR(ESTALE));
	}
	/* Owners that differ (root may give the data file away): what is
	 * shown lets in nobody either file refuses. */
	if (geteuid() == 0) {
		tf_test_sh("chown 12345:12345 '%s/%s' && chmod 0644 '%s/%s'", root, var_rel, root, var_rel);
		o1 = walk(off_rel, &st);
		ck_assert_uint_eq(st.st_mode & 0004, 0004);	/* both let others read */
		ck_assert_msg(st.st_uid == 0 || st.st_uid == 12345 || st.st_uid == geteuid(), "uid %u",
			      (unsigned)st.st_uid);
		check_bytes(o1, want, n);
		tf_test_sh("chmod 0640 '%s/%s'", root, var_rel);
		o2 = walk(off_rel, &st);
		ck_assert_ptr_ne(o2, o1);
		ck_assert_uint_eq(st.st_mode & 0007, 0);	/* others may not read the data */
		ck_assert_uint_eq(st.st_mode & 0222, 0);
	}
	free(want);
}
END_TEST

/* ---- indexes ---------------------------------------------------------------------------------- */

START_TEST(test_index_budget)
{
	struct stat st;
	size_t n, ix, bytes, one;
	uint8_t *want = expected("gzip_level1", "unfiltered/f0/a0.tdb.bin", &n);
	fs_node *loose = lookup(top, "loose", &st), *a, *b;
	tf_entry_reader *r;
	char *v;

	a = lookup(loose, "a.tdb", &st);
	count_nodes(&ix, &one);
	ck_assert_uint_eq(ix, 1);
	ck_assert_uint_gt(one, 0);
	b = lookup(loose, "b.tdb", &st);
	count_nodes(&ix, &bytes);
	ck_assert_uint_eq(ix, 2);
	ck_assert_uint_eq(bytes, 2 * one);
	/* Room for one: when a request lets go, the least recently used
	 * idle index goes (a, built first). */
	budget(one);
	ck_assert_ptr_eq(lookup(loose, "a.tdb", &st), a);
	count_nodes(&ix, &bytes);
	ck_assert_uint_eq(ix, 1);
	ck_assert_uint_eq(bytes, one);
	check_bytes(b, want, n);	/* b's own, kept */
	count_nodes(&ix, &bytes);
	ck_assert_uint_eq(ix, 1);
	/* a's size stays without its index; opened, it is rebuilt (the same
	 * bytes), and b goes once a is closed. */
	ck_assert_int_eq(fs_node_attr(&fs, a, &st), 0);
	ck_assert_int_eq(st.st_size, 4096);
	check_bytes(a, want, n);
	count_nodes(&ix, &bytes);
	ck_assert_uint_eq(ix, 1);
	ck_assert_uint_eq(bytes, one);
	{
		/* b's index is the one that went: opening it builds it
		 * again, and a's (idle) goes at once. */
		ck_assert_int_eq(open_rc(b, &r, NULL), 0);
		count_nodes(&ix, &bytes);
		ck_assert_uint_eq(ix, 1);
		ck_assert_uint_eq(bytes, one);
		tf_reader_close(r);
		count_nodes(&ix, &bytes);
		ck_assert_uint_eq(ix, 1);
	}
	/* Nothing kept: indexes live while open, whatever the budget. */
	budget(0);
	ck_assert_int_eq(open_rc(b, &r, NULL), 0);
	count_nodes(&ix, &bytes);
	ck_assert_uint_eq(ix, 1);
	ck_assert_uint_eq(bytes, one);
	tf_reader_close(r);
	count_nodes(&ix, &bytes);
	ck_assert_uint_eq(ix, 0);
	ck_assert_uint_eq(bytes, 0);
	/* A request that uses an index (an attribute of a file open) has it
	 * until it lets go; then it goes. */
	ck_assert_int_eq(open_rc(a, &r, NULL), 0);
	ck_assert_ptr_nonnull(v = xattr(a, "tiles"));
	free(v);
	count_nodes(&ix, NULL);
	ck_assert_uint_eq(ix, 1);
	tf_reader_close(r);
	count_nodes(&ix, NULL);
	ck_assert_uint_eq(ix, 0);
	ck_assert_ptr_nonnull(v = xattr(a, "tiles"));	/* rebuilt for it, and gone after */
	free(v);
	count_nodes(&ix, NULL);
	ck_assert_uint_eq(ix, 0);
	free(want);
}
END_TEST

/* A fragment seen mid-commit (its metadata not written yet): the file is
 * listed empty, opening it is EIO, and that answer is kept for the retry
 * delay, then asked again (INDEX_RETRY_NS, a second). */
START_TEST(test_index_error_retried)
{
	char rel[PATH_MAX], meta[PATH_MAX], late[PATH_MAX];
	struct timespec t = { 1, 100000000 };
	fs_node *l;
	struct stat st;
	size_t n;
	uint8_t *want = expected("gzip_level1", "unfiltered/f0/a0.tdb.bin", &n);
	fs_node *a;
	tf_entry_reader *r;
	tf_open_how how;
	char *msg;

	FMT(rel, "%s", frag_file("arr", "a0.tdb"));
	FMT(meta, "%s", frag_file("arr", "__fragment_metadata.tdb"));
	/* An array copied in, its schema not yet (cp -R copies in directory
	 * order): its files are no array's, shown as stored, for now. */
	tf_test_sh("mkdir '%s/late' && cp -R '%s/arr/__fragments' '%s/arr/__commits' '%s/late/'", root, root, root, root);
	FMT(late, "late/%s", strchr(rel, '/') + 1);
	l = walk(late, &st);
	ck_assert(!is_decoded(l));
	ck_assert_int_eq(st.st_size, 1393);
	tf_test_sh("cp -R '%s/arr/__schema' '%s/late/'", root, root);
	tf_test_sh("mv '%s/%s' '%s/meta.saved'", root, meta, base);
	a = walk(rel, &st);
	ck_assert(is_decoded(a));
	ck_assert_int_eq(st.st_size, 0);
	ck_assert_int_eq(open_rc(a, &r, NULL), NODE_ERR(EIO));
	ck_assert_ptr_nonnull(msg = xattr(a, "error"));
	ck_assert_msg(strstr(msg, "a0.tdb") != NULL, "%s", msg);
	free(msg);
	/* The commit completes; within the delay the failure is the answer. */
	{
		/* By rename, at once: the retry delay is a second from the failure. */
		char from[PATH_MAX], to[PATH_MAX];

		FMT(from, "%s/meta.saved", base);
		FMT(to, "%s/%s", root, meta);
		ck_assert_int_eq(rename(from, to), 0);
	}
	ck_assert_int_eq(open_rc(a, &r, NULL), NODE_ERR(EIO));
	nanosleep(&t, NULL);	/* the node table's documented retry delay */
	check_bytes(a, want, n);
	/* The catalog asks again after a second whether late is an array
	 * (tf_catalog.h): now it is, and its file is decoded. */
	l = walk(late, &st);
	ck_assert(is_decoded(l));
	ck_assert_int_eq(st.st_size, (off_t)n);
	check_bytes(l, want, n);
	ck_assert_ptr_eq(walk(rel, &st), a);
	ck_assert_int_eq(st.st_size, (off_t)n);
	/* A read error recorded on the entry: later opens are direct. */
	ck_assert_int_eq(open_rc(a, &r, &how), 0);
	ck_assert(!how.direct);
	tf_reader_close(r);
	tf_entry_set_error(E(a), "tile 2: bad chunk", true);
	ck_assert_int_eq(open_rc(a, &r, &how), 0);
	ck_assert(how.direct);
	tf_reader_close(r);
	ck_assert_str_eq(msg = xattr(a, "error"), "tile 2: bad chunk");
	free(msg);
	ck_assert_ptr_nonnull(msg = xattr(a, "field"));
	ck_assert_msg(!strncmp(msg, "i32 (", 5), "%s", msg);
	free(msg);
	ck_assert_str_eq(msg = xattr(a, "format_version"), "22");
	free(msg);
	free(want);
}
END_TEST

/* ---- reloads ---------------------------------------------------------------------------------- */

START_TEST(test_reload_generation)
{
	struct stat st;
	size_t n;
	uint8_t *want = expected("gzip_level1", "unfiltered/f0/a0.tdb.bin", &n);
	fs_node *loose = lookup(top, "loose", &st), *a1, *a2, *p1, *arr1;
	tf_entry_reader *r;
	uint8_t buf[64];

	a1 = lookup(loose, "a.tdb", &st);
	p1 = lookup(top, "plain.txt", &st);
	arr1 = walk(frag_file("arr", "a0.tdb"), &st);
	ck_assert_int_eq(open_rc(a1, &r, NULL), 0);	/* held open across the reload */
	reload(config_of("[tilefs]\n" RULES));
	/* Files: new nodes; directories stay. */
	ck_assert_ptr_eq(lookup(top, "loose", &st), loose);
	a2 = lookup(loose, "a.tdb", &st);
	ck_assert_ptr_ne(a2, a1);
	ck_assert_ptr_ne(lookup(top, "plain.txt", &st), p1);
	ck_assert_ptr_ne(walk(frag_file("arr", "a0.tdb"), &st), arr1);
	ck_assert_ptr_eq(lookup(loose, "a.tdb", &st), a2);	/* once */
	check_bytes(a2, want, n);
	/* The old node reads on for its open handle. */
	ck_assert(alive(fs_node_ino(a1)));
	ck_assert_uint_eq(read_at(r, scratch, n - sizeof(buf), sizeof(buf), buf), sizeof(buf));
	ck_assert(!memcmp(buf, want + n - sizeof(buf), sizeof(buf)));
	tf_reader_close(r);
	/* A reload that drops the rule: the name is now shown as stored. */
	reload(config_of("[tilefs]\n"));
	a1 = lookup(loose, "a.tdb", &st);
	ck_assert(!is_decoded(a1));
	ck_assert_int_eq(st.st_size, 1393);
	free(want);
}
END_TEST

/* ---- views ------------------------------------------------------------------------------------ */

START_TEST(test_view_nodes)
{
	struct stat st;
	fs_node *arr = lookup(top, "arr", &st), *vd, *raw, *csv, *n;
	tf_entry_reader *r;
	tf_open_how how;
	off_t size;

	vd = lookup(arr, TF_VIEWS_DIR, &st);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert(is_view(vd));
	ck_assert_str_eq(tf_entry_rel(E(vd)), "arr/@views");
	raw = lookup(vd, "i32.raw", &st);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_int_eq(st.st_size, 4096);
	ck_assert_uint_eq(st.st_mode & 0222, 0);
	ck_assert_str_eq(tf_entry_rel(E(raw)), "arr/@views/i32.raw");
	ck_assert(is_view(raw));
	ck_assert(!is_decoded(raw));
	ck_assert_ptr_eq(lookup(vd, "i32.raw", &st), raw);	/* the same state */
	/* Asked again at open, by what it is made of (readable by others). */
	ck_assert(stranger_may(raw) == !!(st.st_mode & 0004));
	/* A CSV's size is not known until formatted: attributes for no time. */
	csv = lookup(vd, "cells.csv", &st);
	ck_assert_int_eq(st.st_size, 0);
	ck_assert_double_eq(fs_node_attr_timeout(&fs, csv, 1.0), 0.0);
	/* Its open sizes it, and says the size shown was not the true one;
	 * the next open does not. */
	ck_assert_int_eq(open_rc(csv, &r, &how), 0);
	ck_assert(how.resized);
	ck_assert(!how.direct);
	tf_reader_close(r);
	ck_assert_int_eq(open_rc(csv, &r, &how), 0);
	ck_assert(!how.resized);
	tf_reader_close(r);
	ck_assert_int_eq(fs_node_attr(&fs, csv, &st), 0);
	ck_assert_double_eq(fs_node_attr_timeout(&fs, csv, 1.0), 1.0);
	size = st.st_size;
	ck_assert_int_gt(size, 0);
	{
		uint8_t *want = malloc((size_t)size), *got = malloc((size_t)size + 1);
		tf_views *views;
		tf_catalog_hold *hold;
		tf_workspace *ws = tf_workspace_new();
		tf_view *w;
		size_t wn;

		ck_assert_int_eq(tf_catalog_views(cat, "arr", cache, &views, &hold, NULL), TF_OK);
		ck_assert_int_eq(tf_view_open(views, "cells.csv", &w, NULL), TF_OK);
		ck_assert_int_eq(tf_view_read(w, ws, 0, (size_t)size, want, &wn, NULL), TF_OK);
		ck_assert_uint_eq(wn, (size_t)size);
		tf_view_close(w);
		tf_workspace_free(ws);
		tf_catalog_views_put(cat, views, hold);
		ck_assert_int_eq(open_rc(csv, &r, NULL), 0);
		ck_assert_uint_eq(read_at(r, scratch, 0, (size_t)size + 1, got), (size_t)size);
		ck_assert(!memcmp(got, want, (size_t)size));
		tf_reader_close(r);
		free(want);
		free(got);
	}
	ck_assert_int_eq(lookup_rc(vd, "nothing.raw", &n, &st), NODE_ERR(ENOENT));
	/* An array whose schema is gone: its state cannot be read, EIO (and
	 * a log line saying why). */
	tf_test_sh("cp -R '%s/arr' '%s/broken' && rm -f '%s'/broken/__schema/*", root, root, root);
	n = lookup(top, "broken", &st);
	ck_assert_int_eq(lookup_rc(n, TF_VIEWS_DIR, &n, &st), NODE_ERR(EIO));
	/* Not an array: no views folder. */
	n = lookup(top, "sub", &st);
	ck_assert_int_eq(lookup_rc(n, TF_VIEWS_DIR, &n, &st), NODE_ERR(ENOENT));
	/* Forgotten, the view nodes give their states back (valgrind). */
	{
		fuse_ino_t raw_ino = fs_node_ino(raw), csv_ino = fs_node_ino(csv);

		fs_node_forget(&fs, raw_ino, 2);
		fs_node_forget(&fs, csv_ino, 1);
		ck_assert(!alive(raw_ino));
		ck_assert(!alive(csv_ino));
		ck_assert(alive(fs_node_ino(vd)));
	}
}
END_TEST

/* ---- threads ---------------------------------------------------------------------------------- */

typedef struct worker {
	int id;
	const uint8_t *want;
	size_t n;
	char arr_rel[PATH_MAX];
	bool ok;
	char why[512];
} worker;

static void say(worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(worker *w, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->why, sizeof(w->why), fmt, ap);
	va_end(ap);
	w->ok = false;
}

static tf_config *alt[2];

/* Each iteration: look up a directory and a file in it, check the size,
 * open and read some, pin and put, forget both, as the kernel would. */
static void *work(void *arg)
{
	worker *w = arg;
	tf_pin_scratch *sc = tf_pin_scratch_new();

	w->ok = true;
	for (int i = 0; i < 60 && w->ok; i++) {
		const char *dir = i % 2 ? "loose" : "sub", *name = i % 2 ? (i % 4 == 1 ? "a.tdb" : "b.tdb") : "deeper";
		fs_node *d, *n, *g;
		struct stat st;
		tf_entry_reader *r;
		tf_open_how how;
		int rc;

		if (w->id == 0 && i % 10 == 5)
			reload(alt[i / 10 % 2]);
		if ((rc = fs_node_lookup(&fs, top, dir, NULL, &d, &st)) != 0) {
			say(w, "%s: %d", dir, rc);
			break;
		}
		if ((rc = fs_node_lookup(&fs, d, name, NULL, &n, &st)) != 0) {
			say(w, "%s/%s: %d", dir, name, rc);
		} else if (is_decoded(n)) {
			if (st.st_size != (off_t)w->n) {
				say(w, "%s/%s: size %lld", dir, name, (long long)st.st_size);
			} else if ((rc = fs_errno(tf_entry_open(E(n), sc, NULL, 0, &r, &how, NULL))) != 0) {
				say(w, "%s/%s: open %d", dir, name, rc);
			} else {
				const tf_slices *s;
				uint8_t buf[512];
				size_t got = 0;

				if (tf_reader_pin(r, sc, 1024, sizeof(buf), NULL, &s, NULL) == TF_OK)
					for (size_t k = 0; k < s->n; k++) {
						memcpy(buf + got, s->v[k].p, s->v[k].n);
						got += s->v[k].n;
					}
				tf_reader_unpin(sc, true);
				if (got != sizeof(buf) || memcmp(buf, w->want + 1024, got))
					say(w, "%s/%s: bytes differ", dir, name);
				tf_reader_close(r);
			}
		}
		if (!w->ok)
			break;
		if ((g = fs_node_get(&fs, fs_node_ino(n))) != n) {
			say(w, "get %s/%s", dir, name);
			break;
		}
		fs_node_forget(&fs, fs_node_ino(n), 1);
		fs_node_put(&fs, g);
		fs_node_forget(&fs, fs_node_ino(d), 1);
	}
	tf_pin_scratch_free(sc);
	return NULL;
}

START_TEST(test_threads)
{
	enum { T = 8 };
	pthread_t th[T];
	worker w[T];
	size_t n;
	uint8_t *want = expected("gzip_level1", "unfiltered/f0/a0.tdb.bin", &n);

	alt[0] = config_of("[tilefs]\n" RULES);
	alt[1] = config_of("[tilefs]\nunmatched = hide\n" RULES);
	budget(1);	/* indexes dropped and rebuilt all along */
	for (int i = 0; i < T; i++) {
		w[i] = (worker){ .id = i, .want = want, .n = n };
		ck_assert_int_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < T; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < T; i++)
		ck_assert_msg(w[i].ok, "thread %d: %s", i, w[i].why);
	/* Every lookup forgotten, nothing open: the root alone is left. */
	{
		size_t ix, bytes;

		ck_assert_uint_eq(count_nodes(&ix, &bytes), 1);
		ck_assert_uint_eq(ix, 0);
		ck_assert_uint_eq(bytes, 0);
	}
	free(want);
}
END_TEST

static Suite *nodes_suite(void)
{
	Suite *s = suite_create("nodes");
	TCase *tc = tcase_create("nodes"), *views = tcase_create("views");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);	/* valgrind */
	tcase_add_test(tc, test_lookup_same_node);
	tcase_add_test(tc, test_lookup_errors);
	tcase_add_test(tc, test_forget_and_pins);
	tcase_add_test(tc, test_changed_source);
	tcase_add_test(tc, test_changed_source_unindexed);
	tcase_add_test(tc, test_known_stale);
	tcase_add_test(tc, test_dirs_links_kinds);
	tcase_add_test(tc, test_many_nodes);
	tcase_add_test(tc, test_attr);
	tcase_add_test(tc, test_dep);
	tcase_add_test(tc, test_index_budget);
	tcase_add_test(tc, test_index_error_retried);
	tcase_add_test(tc, test_reload_generation);
	tcase_add_test(tc, test_threads);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(views, setup_views, teardown);
	tcase_set_timeout(views, 120);
	tcase_add_test(views, test_view_nodes);
	suite_add_tcase(s, views);
	return s;
}

TF_TEST_MAIN(nodes_suite)
