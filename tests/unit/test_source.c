/*
 * test_source.c - the local source's descriptor pool (issue 19, item 4):
 * objects beyond the pool's bound give their descriptors up and open their
 * files again when read; one whose file changed meanwhile fails TF_E_STALE,
 * never reading other bytes; many threads at once (run under TSan too).
 * And tf_walk: a source's tree, each file and directory once, no symlink
 * followed, errors stopping it or passed over.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tf_test.h"
#include "cache/tf_walk.h"

#define NFILES 12
#define FSIZE 20000

/* Descriptors this process has open now. */
static unsigned open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned n = 0;

	ck_assert_ptr_nonnull(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static char dir[PATH_MAX];
static uint8_t content[NFILES][FSIZE];

/* NFILES files f0..f11 of distinct bytes in the test's directory, and a
 * source of that directory. */
static tf_source *make_files(void)
{
	char path[PATH_MAX], name[16];
	tf_source *s;
	tf_error err;

	tf_test_tmp_path(dir, "");
	for (int i = 0; i < NFILES; i++) {
		tf_test_fill(content[i], FSIZE, TF_GEN_RANDOM, 1, (uint64_t)i + 1);
		snprintf(name, sizeof(name), "f%d", i);
		tf_test_tmp_path(path, name);
		tf_test_write_file(path, content[i], FSIZE);
		/* An hour ago: a rewrite in the same clock tick moves no time. */
		ck_assert_int_eq(utimensat(AT_FDCWD, path, (struct timespec[]){ { time(NULL) - 3600, 0 },
			{ time(NULL) - 3600, 0 } }, 0), 0);
	}
	ck_assert_msg(tf_source_local(dir, &s, &err) == TF_OK, "%s", err.msg);
	return s;
}

static tf_object *open_ok(tf_source *s, int i)
{
	char name[16];
	tf_object *o;
	tf_error err;

	snprintf(name, sizeof(name), "f%d", i);
	ck_assert_msg(tf_object_open(s, name, NULL, &o, &err) == TF_OK, "%s", err.msg);
	return o;
}

/* Read [off, off+len) of object o (file i) and compare with its bytes. */
static void read_ok(tf_object *o, int i, uint64_t off, size_t len)
{
	uint8_t buf[FSIZE];
	tf_error err;

	ck_assert_msg(tf_object_read(o, off, buf, len, &err) == TF_OK, "f%d: %s", i, err.msg);
	ck_assert_msg(!memcmp(buf, content[i] + off, len), "f%d: other bytes at %llu", i,
		      (unsigned long long)off);
}

static tf_source_fds fd_stats(tf_source *s)
{
	tf_source_fds st;

	tf_source_fd_stats(s, &st);
	return st;
}

/* Twelve objects under a bound of four: never more than four descriptors,
 * every byte right, the evicted ones reopened; closing gives all back. */
START_TEST(test_pool_bounds_descriptors)
{
	unsigned before = open_fds();
	tf_source *s = make_files();
	tf_object *o[NFILES];

	tf_source_set_max_fds(s, 4);
	ck_assert_uint_eq(fd_stats(s).max, 4);
	for (int i = 0; i < NFILES; i++) {
		o[i] = open_ok(s, i);
		ck_assert_uint_le(fd_stats(s).held, 4);
		ck_assert_uint_le(open_fds(), before + 1 + 4);	/* the root's, and four */
	}
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < NFILES; i++) {
			read_ok(o[i], i, (uint64_t)(i * 997 + round * 31) % (FSIZE / 2), FSIZE / 2);
			ck_assert_uint_le(fd_stats(s).held, 4);
			ck_assert_uint_le(open_fds(), before + 1 + 4);
		}
	/* Round-robin over twelve with room for four: every read a reopen. */
	ck_assert_uint_ge(fd_stats(s).reopens, 3 * NFILES);
	ck_assert_uint_ge(fd_stats(s).evictions, 3 * NFILES);
	/* The most recently read stay open: reading them again reopens nothing. */
	{
		uint64_t reopens = fd_stats(s).reopens;
		for (int i = NFILES - 4; i < NFILES; i++)
			read_ok(o[i], i, 0, FSIZE);
		ck_assert_uint_eq(fd_stats(s).reopens, reopens);
	}
	/* A lower bound closes idle descriptors at once. */
	tf_source_set_max_fds(s, 1);
	ck_assert_uint_eq(fd_stats(s).held, 1);
	ck_assert_uint_eq(open_fds(), before + 1 + 1);
	for (int i = 0; i < NFILES; i++)
		tf_object_close(o[i]);
	ck_assert_uint_eq(fd_stats(s).held, 0);
	tf_source_free(s);
	ck_assert_uint_eq(open_fds(), before);
}
END_TEST

/*
 * What a file can become while its object's descriptor is lent to others:
 * each case must make the next read of the object fail TF_E_STALE (never
 * bytes of whatever holds the name now), and must not hang (a FIFO).
 */
enum { CH_NONE, CH_REWRITE, CH_RENAME_OVER, CH_REMOVED, CH_SYMLINK, CH_FIFO, N_CHANGES };

static void change_file(int how, const char *path)
{
	char tmp[PATH_MAX], other[PATH_MAX];
	uint8_t same[FSIZE];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	tf_test_tmp_path(other, "f1");
	memcpy(same, content[0], FSIZE);
	same[FSIZE / 2] ^= 1;
	switch (how) {
	case CH_REWRITE:	/* in place, same size (make_files dated it an hour ago) */
		ck_assert_ptr_nonnull(f = fopen(path, "r+b"));
		ck_assert_uint_eq(fwrite(same, 1, FSIZE, f), FSIZE);
		ck_assert_int_eq(fclose(f), 0);
		break;
	case CH_RENAME_OVER:	/* another inode, the very same bytes */
		tf_test_write_file(tmp, content[0], FSIZE);
		ck_assert_int_eq(rename(tmp, path), 0);
		break;
	case CH_REMOVED:
		ck_assert_int_eq(unlink(path), 0);
		break;
	case CH_SYMLINK:	/* to a file of the source: not followed */
		ck_assert_int_eq(symlink(other, tmp), 0);
		ck_assert_int_eq(rename(tmp, path), 0);
		break;
	case CH_FIFO:
		ck_assert_int_eq(unlink(path), 0);
		ck_assert_int_eq(mkfifo(path, 0644), 0);
		break;
	}
}

START_TEST(test_pool_version_after_eviction)
{
	tf_source *s = make_files();
	tf_object *a, *b;
	char path[PATH_MAX];
	uint8_t buf[FSIZE];
	tf_error err;
	tf_status rc;

	tf_source_set_max_fds(s, 1);
	a = open_ok(s, 0);
	read_ok(a, 0, 0, FSIZE);
	b = open_ok(s, 1);	/* a's descriptor goes */
	ck_assert_uint_eq(fd_stats(s).held, 1);
	tf_test_tmp_path(path, "f0");
	change_file(_i, path);
	memset(buf, 0, sizeof(buf));
	rc = tf_object_read(a, 0, buf, FSIZE, &err);
	if (_i == CH_NONE) {
		ck_assert_msg(rc == TF_OK, "%s", err.msg);
		ck_assert(!memcmp(buf, content[0], FSIZE));
		ck_assert_uint_eq(fd_stats(s).reopens, 1);
	} else {
		ck_assert_int_eq(rc, TF_E_STALE);
		ck_assert_msg(strstr(err.msg, "f0") && strstr(err.msg, "changed on disk"), "%s", err.msg);
		for (size_t i = 0; i < FSIZE; i++)
			ck_assert_uint_eq(buf[i], 0);	/* nothing copied out */
		ck_assert_int_eq(tf_object_check(a, NULL), TF_E_STALE);
		ck_assert_uint_eq(fd_stats(s).reopens, 0);
		ck_assert_uint_eq(fd_stats(s).held, 1);	/* b's; no descriptor leaked */
	}
	read_ok(b, 1, 0, FSIZE);
	tf_object_close(a);
	tf_object_close(b);
	if (_i == CH_FIFO || _i == CH_SYMLINK)
		unlink(path);
	tf_source_free(s);
}
END_TEST

/* While an object holds its descriptor, a file renamed over it goes on
 * reading the old inode, as before the pool. */
START_TEST(test_pool_held_reads_old_inode)
{
	tf_source *s = make_files();
	char path[PATH_MAX];
	tf_object *a;

	a = open_ok(s, 0);
	tf_test_tmp_path(path, "f0");
	change_file(CH_RENAME_OVER, path);
	read_ok(a, 0, 0, FSIZE);
	ck_assert_uint_eq(fd_stats(s).reopens, 0);
	tf_object_close(a);
	tf_source_free(s);
}
END_TEST

/* Objects keep their source's descriptors alive: freed first, the source
 * still serves its objects' reopens. */
START_TEST(test_pool_object_outlives_source)
{
	unsigned before = open_fds();
	tf_source *s = make_files();
	tf_object *a, *b;

	tf_source_set_max_fds(s, 1);
	a = open_ok(s, 0);
	b = open_ok(s, 1);
	tf_source_free(s);
	read_ok(a, 0, 0, FSIZE);	/* reopened beneath the root */
	read_ok(b, 1, 100, 1000);
	tf_object_close(a);
	ck_assert_uint_gt(open_fds(), before);
	tf_object_close(b);
	ck_assert_uint_eq(open_fds(), before);
}
END_TEST

/* The default bound: half of RLIMIT_NOFILE's soft limit less 64, and at
 * least 8; tf_source_set_max_fds(s, 0) follows the limit as it is now. */
START_TEST(test_pool_default_share)
{
	static const struct { rlim_t soft; unsigned max; } cases[] = {
		{ 1024, 448 }, { 256, 64 }, { 100, 8 }, { 4096, 1984 },
	};
	tf_source *s = make_files();
	struct rlimit was, r;

	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &was), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (cases[i].soft > was.rlim_max)
			continue;
		r = (struct rlimit){ cases[i].soft, was.rlim_max };
		ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &r), 0);
		tf_source_set_max_fds(s, 0);
		ck_assert_uint_eq(fd_stats(s).max, cases[i].max);
	}
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &was), 0);
	tf_source_free(s);
}
END_TEST

/* ---- many threads ----------------------------------------------------------------------- */

#define NTHREADS 8
#define READS 3000

typedef struct reader_arg {
	tf_object **o;
	unsigned seed;
	int bad;
} reader_arg;

static void *reader(void *p)
{
	reader_arg *a = p;
	uint8_t buf[4096];

	for (int k = 0; k < READS; k++) {
		int i = (int)(rand_r(&a->seed) % NFILES);
		size_t len = 1 + rand_r(&a->seed) % sizeof(buf);
		uint64_t off = rand_r(&a->seed) % (FSIZE - len);
		if (tf_object_read(a->o[i], off, buf, len, NULL) != TF_OK || memcmp(buf, content[i] + off, len))
			a->bad++;
		if (k % 100 == 0) {	/* a short-lived object of its own, too */
			tf_object *mine = tf_object_ref(a->o[i]);
			tf_object_close(mine);
		}
	}
	return NULL;
}

typedef struct resizer_arg {
	tf_source *s;
	atomic_bool stop;
} resizer_arg;

static void *resizer(void *p)
{
	resizer_arg *a = p;

	for (unsigned k = 0; !atomic_load(&a->stop); k++) {
		tf_source_set_max_fds(a->s, 1 + k % 5);
		sched_yield();
	}
	return NULL;
}

START_TEST(test_pool_threads)
{
	unsigned before = open_fds();
	tf_source *s = make_files();
	tf_object *o[NFILES];
	pthread_t th[NTHREADS], rs;
	reader_arg args[NTHREADS];
	resizer_arg ra = { .s = s };

	atomic_init(&ra.stop, false);
	tf_source_set_max_fds(s, 3);
	for (int i = 0; i < NFILES; i++)
		o[i] = open_ok(s, i);
	ck_assert_int_eq(pthread_create(&rs, NULL, resizer, &ra), 0);
	for (int t = 0; t < NTHREADS; t++) {
		args[t] = (reader_arg){ o, (unsigned)t * 7919 + 1, 0 };
		ck_assert_int_eq(pthread_create(&th[t], NULL, reader, &args[t]), 0);
	}
	for (int t = 0; t < NTHREADS; t++) {
		pthread_join(th[t], NULL);
		ck_assert_int_eq(args[t].bad, 0);
	}
	atomic_store(&ra.stop, true);
	pthread_join(rs, NULL);
	tf_source_set_max_fds(s, 3);
	ck_assert_uint_le(fd_stats(s).held, 3);	/* none being read now */
	ck_assert_uint_gt(fd_stats(s).reopens, 0);
	for (int i = 0; i < NFILES; i++)
		tf_object_close(o[i]);
	ck_assert_uint_eq(fd_stats(s).held, 0);
	tf_source_free(s);
	ck_assert_uint_eq(open_fds(), before);
}
END_TEST

/* ---- tf_walk ------------------------------------------------------------------------------ */

typedef struct seen {
	char rel[64][PATH_MAX];
	tf_ent_kind kind[64];
	size_t n, stop_after;
	const char *rename_when;	/* the directory to move away when given */
} seen;

static int visit(void *ctx, const char *rel, const tf_stat *st)
{
	seen *w = ctx;
	char from[PATH_MAX], to[PATH_MAX];

	ck_assert_uint_lt(w->n, 64);
	snprintf(w->rel[w->n], PATH_MAX, "%s", rel);
	w->kind[w->n++] = st->kind;
	if (w->rename_when && !strcmp(rel, w->rename_when)) {	/* gone before it is listed */
		tf_test_tmp_path(from, rel);
		tf_test_tmp_path(to, "moved");
		ck_assert_int_eq(rename(from, to), 0);
	}
	return w->stop_after && w->n == w->stop_after;
}

static ssize_t seen_at(const seen *w, const char *rel)
{
	for (size_t i = 0; i < w->n; i++)
		if (!strcmp(w->rel[i], rel))
			return (ssize_t)i;
	return -1;
}

static void mkdir_in(const char *name)
{
	char path[PATH_MAX];

	tf_test_tmp_path(path, name);
	ck_assert_int_eq(mkdir(path, 0755), 0);
}

static void file_in(const char *name)
{
	char path[PATH_MAX];

	tf_test_tmp_path(path, name);
	tf_test_write_file(path, name, strlen(name));
}

/* Remove what is beneath directory fd dfd (any depth: by descriptors,
 * never by a path that could pass PATH_MAX), then close it. */
static void remove_beneath(int dfd)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		int sub;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if ((sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK)) >= 0) {
			remove_beneath(sub);
			ck_assert_int_eq(unlinkat(dfd, e->d_name, AT_REMOVEDIR), 0);
		} else {
			ck_assert_int_eq(unlinkat(dfd, e->d_name, 0), 0);
		}
		rewinddir(d);
	}
	closedir(d);
}

/* The tree a, a/x, a/b, a/b/y, a/link (symlink to x), a/fifo, empty, z. */
static tf_source *make_tree(void)
{
	char path[PATH_MAX];
	tf_source *s;
	tf_error err;

	tf_test_tmp_path(dir, "");
	mkdir_in("a");
	mkdir_in("a/b");
	mkdir_in("empty");
	file_in("a/x");
	file_in("a/b/y");
	file_in("z");
	tf_test_tmp_path(path, "a/link");
	ck_assert_int_eq(symlink("x", path), 0);
	tf_test_tmp_path(path, "a/fifo");
	ck_assert_int_eq(mkfifo(path, 0644), 0);
	ck_assert_msg(tf_source_local(dir, &s, &err) == TF_OK, "%s", err.msg);
	return s;
}

/* The fixture's teardown, which removes files only. */
static void walk_teardown(void)
{
	tf_test_tmp_path(dir, "");
	remove_beneath(open(dir, O_RDONLY | O_DIRECTORY));
	tf_test_tmp_teardown();
}

START_TEST(test_walk_tree)
{
	static const char *const dirs[] = { "a", "a/b", "empty" }, *const files[] = { "a/x", "a/b/y", "z" };
	tf_source *s = make_tree();
	seen *w = calloc(1, sizeof(*w));
	tf_error err;

	ck_assert_msg(tf_walk(s, ".", 0, visit, w, &err) == TF_OK, "%s", err.msg);
	ck_assert_uint_eq(w->n, 6);	/* neither the symlink nor the FIFO */
	for (int i = 0; i < 3; i++) {
		ck_assert_int_ge(seen_at(w, dirs[i]), 0);
		ck_assert_int_eq(w->kind[seen_at(w, dirs[i])], TF_ENT_DIR);
		ck_assert_int_ge(seen_at(w, files[i]), 0);
		ck_assert_int_eq(w->kind[seen_at(w, files[i])], TF_ENT_REG);
	}
	/* a directory comes before what it holds */
	ck_assert_int_lt(seen_at(w, "a"), seen_at(w, "a/b"));
	ck_assert_int_lt(seen_at(w, "a/b"), seen_at(w, "a/b/y"));
	ck_assert_int_lt(seen_at(w, "a"), seen_at(w, "a/x"));
	/* beneath a directory only */
	memset(w, 0, sizeof(*w));
	ck_assert_msg(tf_walk(s, "a/b", 0, visit, w, &err) == TF_OK, "%s", err.msg);
	ck_assert_uint_eq(w->n, 1);
	ck_assert_str_eq(w->rel[0], "a/b/y");
	/* fn stops it: no error */
	memset(w, 0, sizeof(*w));
	w->stop_after = 2;
	ck_assert_int_eq(tf_walk(s, ".", 0, visit, w, &err), TF_OK);
	ck_assert_uint_eq(w->n, 2);
	free(w);
	tf_source_free(s);
}
END_TEST

/* A directory gone between its parent's listing and its own stops a walk
 * (naming it), or is passed over with TF_WALK_KEEP_GOING. */
START_TEST(test_walk_list_error)
{
	tf_source *s = make_tree();
	seen *w = calloc(1, sizeof(*w));
	char from[PATH_MAX], to[PATH_MAX];
	tf_error err;

	w->rename_when = "a";
	ck_assert_int_eq(tf_walk(s, ".", 0, visit, w, &err), TF_E_NOTFOUND);
	ck_assert_msg(strstr(err.msg, "a") != NULL, "%s", err.msg);
	ck_assert_int_lt(seen_at(w, "a/x"), 0);
	tf_test_tmp_path(from, "moved");
	tf_test_tmp_path(to, "a");
	ck_assert_int_eq(rename(from, to), 0);
	memset(w, 0, sizeof(*w));
	w->rename_when = "a";
	ck_assert_int_eq(tf_walk(s, ".", TF_WALK_KEEP_GOING, visit, w, &err), TF_OK);
	ck_assert_int_ge(seen_at(w, "z"), 0);
	ck_assert_int_ge(seen_at(w, "empty"), 0);
	ck_assert_int_lt(seen_at(w, "moved"), 0);	/* "." was listed whole before */
	ck_assert_int_lt(seen_at(w, "a/x"), 0);
	free(w);
	tf_source_free(s);
}
END_TEST

/* Paths past PATH_MAX: an error naming the directory, or passed over. */
START_TEST(test_walk_too_deep)
{
	char name[201], path[PATH_MAX];
	tf_source *s = make_tree();
	seen *w = calloc(1, sizeof(*w));
	tf_error err;
	int fd;

	memset(name, 'd', 200);
	name[200] = '\0';
	tf_test_tmp_path(path, "");
	fd = open(path, O_RDONLY | O_DIRECTORY);
	for (int i = 0; i < 24; i++) {	/* 24 x 201 bytes > PATH_MAX */
		int sub;

		ck_assert_int_eq(mkdirat(fd, name, 0755), 0);
		ck_assert_int_ge(sub = openat(fd, name, O_RDONLY | O_DIRECTORY), 0);
		close(fd);
		fd = sub;
	}
	close(fd);
	ck_assert_int_eq(tf_walk(s, ".", 0, visit, w, &err), TF_E_INVAL);
	ck_assert_msg(strstr(err.msg, "path too long") != NULL, "%s", err.msg);
	memset(w, 0, sizeof(*w));
	err.code = TF_OK;
	ck_assert_int_eq(tf_walk(s, ".", TF_WALK_KEEP_GOING, visit, w, &err), TF_OK);
	ck_assert_uint_eq(w->n, 6 + 20);	/* the tree, and the levels that fit */
	free(w);
	tf_source_free(s);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("source");
	TCase *pool = tcase_create("pool"), *threads = tcase_create("threads"), *walk = tcase_create("walk");

	tcase_add_test(pool, test_pool_bounds_descriptors);
	tcase_add_loop_test(pool, test_pool_version_after_eviction, 0, N_CHANGES);
	tcase_add_test(pool, test_pool_held_reads_old_inode);
	tcase_add_test(pool, test_pool_object_outlives_source);
	tcase_add_test(pool, test_pool_default_share);
	tcase_add_test(threads, test_pool_threads);
	tcase_add_checked_fixture(pool, tf_test_tmp_setup, tf_test_tmp_teardown);
	tcase_add_checked_fixture(threads, tf_test_tmp_setup, tf_test_tmp_teardown);
	tcase_add_test(walk, test_walk_tree);
	tcase_add_test(walk, test_walk_list_error);
	tcase_add_test(walk, test_walk_too_deep);
	tcase_add_checked_fixture(walk, tf_test_tmp_setup, walk_teardown);
	suite_add_tcase(s, walk);
	tcase_set_timeout(threads, 600);	/* slow under valgrind and TSan, never stuck */
	suite_add_tcase(s, pool);
	suite_add_tcase(s, threads);
	return s;
}

TF_TEST_MAIN(suite)
