/*
 * test_index.c - the persisted index store (tf_index) and the persisted
 * form of a walked file's index (tf_file_open_how with a store).
 *
 *   - the store: a round trip; a miss; an entry of another version (ctime
 *     alone differing) is stale; a garbage, bit-flipped or truncated entry,
 *     another file's entry copied over, and another format version are
 *     ignored (warned where corrupt); the bound holds and the least
 *     recently used entries go first; two processes writing the same
 *     entries at once leave only whole entries; a directory that cannot be
 *     made persists nothing without failing; the directory is made 0700
 *     when made and never changed otherwise; one writable by others (1777,
 *     a group's), another user's, or reached through a symlink (in any
 *     component) is refused and left as it was, files and all; entries
 *     not ours alone are never trusted, replaced or removed, and only our
 *     own old temporary files are reaped; an object's entry names its
 *     endpoint, bucket and key: another endpoint's object of the same name,
 *     ETag and size finds none;
 *   - files: a walk is stored and the next open restores it (no walk,
 *     counted), reading the same bytes; a header walk and a window walk
 *     store the same index; a file rewritten in place with its mtime put
 *     back is walked again (ctime); entries damaged in every field of the
 *     payload, with a valid checksum, are rejected (at the open, or by the
 *     first read of what they concern or follow: EIO from there) and
 *     rebuilt by the next open; issue 20's forgery (tile 0 and its last
 *     unit 4 bytes longer, which every check of the entry passes) never
 *     serves tile 1 or 2 shifted, read first or not; a read far ahead
 *     proves what it skipped by headers, not decodes, and finds a lie
 *     there; random mutations of entries (100; 1000 in the long mode)
 *     never give a wrong byte.
 */
#include "config.h"

#include "tf_test.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache/tf_cache.h"
#include "format/tf_file.h"
#include "cache/tf_handle.h"
#include "cache/tf_index.h"
#include "config/tf_s3.h"

/* ---- a temporary directory per test ---------------------------------------------------- */

static char tmpdir[64];

static void __attribute__((format(printf, 2, 3))) path_printf(char *out, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, PATH_MAX, fmt, ap);
	va_end(ap);
	ck_assert_msg(n >= 0 && n < PATH_MAX, "path too long");
}

static void rm_tree(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[PATH_MAX];
	struct stat sb;

	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		path_printf(path, "%s/%s", dir, e->d_name);
		if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
			rm_tree(path);
		else
			unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

static void tmp_setup(void)
{
	strcpy(tmpdir, "/tmp/tf_test_index.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void tmp_teardown(void)
{
	rm_tree(tmpdir);
}

static void store_dir(char *out)
{
	path_printf(out, "%s/store", tmpdir);
}

/* Warnings heard, for assertions. */
typedef struct heard {
	unsigned n;
	char last[TF_ERRMSG_MAX];
} heard;

static void hear(void *ctx, const char *msg)
{
	heard *h = ctx;

	if (!h)
		return;
	h->n++;
	snprintf(h->last, sizeof(h->last), "%s", msg);
}

static tf_index *open_store(uint64_t max, heard *h)
{
	char dir[PATH_MAX];
	tf_index *s;

	store_dir(dir);
	ck_assert(tf_index_open(dir, max, hear, h, &s, NULL) == TF_OK);
	return s;
}

static tf_index_key key_of(unsigned i, int64_t ctime_ns)
{
	tf_index_key k;

	memset(&k, 0, sizeof(k));
	snprintf(k.id, sizeof(k.id), "local:42:%u", i);
	k.v = (tf_version){ .dev = 42, .ino = i, .size = 1000 + i, .mtime_ns = 5, .ctime_ns = ctime_ns };
	return k;
}

/* The entry file of key k: the one holding its identity. */
static void entry_path(const tf_index_key *k, char *out)
{
	char dir[PATH_MAX];
	DIR *d;
	struct dirent *e;
	bool found = false;

	store_dir(dir);
	ck_assert_ptr_nonnull(d = opendir(dir));
	while (!found && (e = readdir(d))) {
		uint8_t *b;
		size_t n;
		if (e->d_name[0] == '.')
			continue;
		path_printf(out, "%s/%s", dir, e->d_name);
		b = tf_test_read_file(out, &n);
		found = n > 26 && memmem(b, n, k->id, strlen(k->id)) && b[24] == strlen(k->id);
		free(b);
	}
	closedir(d);
	ck_assert_msg(found, "no entry for %s", k->id);
}

static void put_pattern(tf_index *s, const tf_index_key *k, size_t n, uint8_t seed)
{
	uint8_t *p = malloc(n ? n : 1);

	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
	tf_index_put(s, k, p, n);
	free(p);
}

static bool is_pattern(const tf_buf *b, size_t n, uint8_t seed)
{
	if (b->len != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (b->p[i] != (uint8_t)(seed + i * 7))
			return false;
	return true;
}

/* ---- the store ------------------------------------------------------------------------------ */

START_TEST(test_roundtrip)
{
	heard h = { 0 };
	tf_index *s = open_store(0, &h);
	tf_index_key k = key_of(1, 100), other = key_of(2, 100);
	tf_buf p = TF_BUF_INIT(1 << 20);
	tf_index_stats st;
	char dir[PATH_MAX];
	struct stat sb;

	ck_assert(tf_index_get(s, &k, &p, NULL) == TF_E_NOTFOUND);
	put_pattern(s, &k, 5000, 3);
	ck_assert(tf_index_get(s, &k, &p, NULL) == TF_OK);
	ck_assert(is_pattern(&p, 5000, 3));
	ck_assert(tf_index_get(s, &other, &p, NULL) == TF_E_NOTFOUND);
	put_pattern(s, &k, 0, 0);	/* replaced, by an empty payload */
	ck_assert(tf_index_get(s, &k, &p, NULL) == TF_OK);
	ck_assert_uint_eq(p.len, 0);
	tf_index_get_stats(s, &st);
	ck_assert(st.persist && st.writable);
	ck_assert_uint_eq(st.hits, 2);
	ck_assert_uint_eq(st.misses, 2);
	ck_assert_uint_eq(st.writes, 2);
	ck_assert_uint_eq(st.entries, 1);
	ck_assert_uint_eq(h.n, 0);
	store_dir(dir);
	ck_assert_int_eq(stat(dir, &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 07777, 0700);
	tf_buf_free(&p);
	tf_index_free(s);
}
END_TEST

START_TEST(test_stale)
{
	heard h = { 0 };
	tf_index *s = open_store(0, &h);
	tf_index_key k = key_of(1, 100), newer = key_of(1, 101);
	tf_buf p = TF_BUF_INIT(1 << 20);
	tf_index_stats st;

	put_pattern(s, &k, 100, 1);
	/* The same file (device, inode, size, mtime): only ctime moved. */
	ck_assert(tf_index_get(s, &newer, &p, NULL) == TF_E_STALE);
	ck_assert_uint_eq(p.len, 0);
	newer.v.ctime_ns = 100;
	newer.v.mtime_ns = 6;
	ck_assert(tf_index_get(s, &newer, &p, NULL) == TF_E_STALE);
	put_pattern(s, &newer, 100, 2);	/* rebuilt */
	ck_assert(tf_index_get(s, &newer, &p, NULL) == TF_OK);
	ck_assert(is_pattern(&p, 100, 2));
	tf_index_get_stats(s, &st);
	ck_assert_uint_eq(st.stale, 2);
	ck_assert_uint_eq(st.corrupt, 0);
	ck_assert_uint_eq(h.n, 0);	/* a stale entry is no news */
	tf_buf_free(&p);
	tf_index_free(s);
}
END_TEST

static void write_bytes(const char *path, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, p, n), (ssize_t)n);
	ck_assert_int_eq(close(fd), 0);
}

/* Damage k's entry with fn, then expect get to say `want` (and warn if corrupt). */
static void damaged(void (*fn)(const char *path, uint8_t *b, size_t n), tf_status want, const char *msg)
{
	heard h = { 0 };
	tf_index *s = open_store(0, &h);
	tf_index_key k = key_of(7, 100);
	tf_buf p = TF_BUF_INIT(1 << 20);
	tf_index_stats st;
	char path[PATH_MAX];
	uint8_t *b;
	size_t n;

	put_pattern(s, &k, 3000, 9);
	entry_path(&k, path);
	b = tf_test_read_file(path, &n);
	fn(path, b, n);
	free(b);
	ck_assert_int_eq(tf_index_get(s, &k, &p, NULL), want);
	ck_assert_uint_eq(p.len, 0);
	tf_index_get_stats(s, &st);
	ck_assert_uint_eq(st.corrupt, want == TF_E_CORRUPT);
	ck_assert_uint_eq(h.n, want == TF_E_CORRUPT);
	if (msg)
		ck_assert_msg(strstr(h.last, msg), "warning '%s' lacks '%s'", h.last, msg);
	put_pattern(s, &k, 3000, 9);	/* rebuilt */
	ck_assert(tf_index_get(s, &k, &p, NULL) == TF_OK);
	ck_assert(is_pattern(&p, 3000, 9));
	tf_buf_free(&p);
	tf_index_free(s);
}

static void garbage(const char *path, uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 13 + 1);
	write_bytes(path, b, n);
}

static void flip_payload(const char *path, uint8_t *b, size_t n)
{
	b[n - 100] ^= 0x10;
	write_bytes(path, b, n);
}

static void flip_version(const char *path, uint8_t *b, size_t n)
{
	b[26 + b[24] + 32] ^= 1;	/* ctime, under the checksum */
	write_bytes(path, b, n);
}

static void truncate_entry(const char *path, uint8_t *b, size_t n)
{
	write_bytes(path, b, n - 1);
}

static void truncate_short(const char *path, uint8_t *b, size_t n)
{
	(void)n;
	write_bytes(path, b, 10);
}

static void empty_entry(const char *path, uint8_t *b, size_t n)
{
	(void)n;
	write_bytes(path, b, 0);
}

static void extended(const char *path, uint8_t *b, size_t n)
{
	uint8_t *c = calloc(1, n + 1);

	memcpy(c, b, n);
	write_bytes(path, c, n + 1);
	free(c);
}

static void other_format(const char *path, uint8_t *b, size_t n)
{
	b[8] = 1;	/* format version 1: objects not keyed by endpoint */
	write_bytes(path, b, n);
}

START_TEST(test_corrupt)
{
	damaged(garbage, TF_E_CORRUPT, "not an index entry");
	damaged(flip_payload, TF_E_CORRUPT, "checksum");
	damaged(flip_version, TF_E_CORRUPT, "checksum");
	damaged(empty_entry, TF_E_CORRUPT, NULL);
}
END_TEST

START_TEST(test_truncated)
{
	damaged(truncate_entry, TF_E_CORRUPT, "truncated");
	damaged(truncate_short, TF_E_CORRUPT, NULL);
	damaged(extended, TF_E_CORRUPT, "truncated or overlong");
}
END_TEST

START_TEST(test_format_version)
{
	damaged(other_format, TF_E_STALE, NULL);	/* an older tilefs's: rebuilt quietly */
}
END_TEST

START_TEST(test_foreign)
{
	heard h = { 0 };
	tf_index *s = open_store(0, &h);
	tf_index_key a = key_of(1, 100), b = key_of(2, 100);
	tf_buf p = TF_BUF_INIT(1 << 20);
	char pa[PATH_MAX], pb[PATH_MAX];
	uint8_t *e;
	size_t n;

	put_pattern(s, &a, 300, 1);
	put_pattern(s, &b, 300, 2);
	entry_path(&a, pa);
	entry_path(&b, pb);
	ck_assert_str_ne(pa, pb);
	e = tf_test_read_file(pa, &n);
	write_bytes(pb, e, n);	/* a's entry, whole and with its checksum, under b's name */
	free(e);
	ck_assert(tf_index_get(s, &b, &p, NULL) == TF_E_CORRUPT);
	ck_assert_msg(strstr(h.last, "another file's entry"), "%s", h.last);
	ck_assert(tf_index_get(s, &a, &p, NULL) == TF_OK);
	ck_assert(is_pattern(&p, 300, 1));
	tf_buf_free(&p);
	tf_index_free(s);
}
END_TEST

/* Set the mtime of every entry to `ago` seconds before now, plus i ns for
 * the i-th in key order (the LRU's order). */
static void age_entries(unsigned nkeys, time_t ago)
{
	for (unsigned i = 0; i < nkeys; i++) {
		tf_index_key k = key_of(i, 1);
		char path[PATH_MAX];
		struct timespec ts[2];

		entry_path(&k, path);
		clock_gettime(CLOCK_REALTIME, &ts[0]);
		ts[0].tv_sec -= ago;
		ts[0].tv_nsec = (long)i * 1000;
		ts[1] = ts[0];
		ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
	}
}

START_TEST(test_lru_bound)
{
	heard h = { 0 };
	tf_index *s = open_store(80 * 1024, &h);	/* twenty 4 KiB entries */
	tf_buf p = TF_BUF_INIT(1 << 20);
	tf_index_stats st;

	for (unsigned i = 0; i < 10; i++) {
		tf_index_key k = key_of(i, 1);
		put_pattern(s, &k, 3000, (uint8_t)i);
	}
	age_entries(10, 3600);
	{
		tf_index_key k0 = key_of(0, 1);	/* used now: it goes last */
		ck_assert(tf_index_get(s, &k0, &p, NULL) == TF_OK);
	}
	/* 22 entries of 4 KiB: the 21st went beyond the bound, trimmed to 90%
	 * (18 entries): the three least recently used went. */
	for (unsigned i = 10; i < 22; i++) {
		tf_index_key k = key_of(i, 1);
		put_pattern(s, &k, 3000, (uint8_t)i);
		tf_index_get_stats(s, &st);
		ck_assert_uint_le(st.bytes, 80 * 1024);
	}
	{
		tf_index_key k0 = key_of(0, 1), k1 = key_of(1, 1), k3 = key_of(3, 1), k4 = key_of(4, 1),
			     k21 = key_of(21, 1);
		ck_assert(tf_index_get(s, &k0, &p, NULL) == TF_OK);	/* used: not the oldest */
		ck_assert(is_pattern(&p, 3000, 0));
		ck_assert(tf_index_get(s, &k1, &p, NULL) == TF_E_NOTFOUND);	/* the oldest */
		ck_assert(tf_index_get(s, &k3, &p, NULL) == TF_E_NOTFOUND);
		ck_assert(tf_index_get(s, &k4, &p, NULL) == TF_OK);
		ck_assert(tf_index_get(s, &k21, &p, NULL) == TF_OK);	/* the newest */
	}
	for (unsigned i = 22; i < 60; i++) {
		tf_index_key k = key_of(i, 1);
		put_pattern(s, &k, 3000, (uint8_t)i);
		tf_index_get_stats(s, &st);
		ck_assert_uint_le(st.bytes, 80 * 1024);
	}
	tf_index_rescan(s);
	tf_index_get_stats(s, &st);
	ck_assert_uint_le(st.bytes, 80 * 1024);
	ck_assert_uint_ge(st.evictions, 40);
	/* An entry larger than the whole store is not kept. */
	{
		tf_index_key big = key_of(100, 1);
		put_pattern(s, &big, 100 * 1024, 1);
		ck_assert(tf_index_get(s, &big, &p, NULL) == TF_E_NOTFOUND);
	}
	ck_assert_uint_eq(h.n, 0);
	tf_buf_free(&p);
	tf_index_free(s);
}
END_TEST

#define WRITERS 2
#define ROUNDS 300
#define KEYS 16

/* Writer w puts every key, round after round, with payloads of its own
 * (lengths differ, so a torn or mixed entry cannot pass). */
static void writer(unsigned w)
{
	tf_index *s = open_store(0, NULL);

	for (unsigned r = 0; r < ROUNDS; r++)
		for (unsigned i = 0; i < KEYS; i++) {
			tf_index_key k = key_of(i, 1);
			put_pattern(s, &k, 1000 + 2000 * w + i * 37, (uint8_t)(w * 100 + i));
		}
	tf_index_free(s);
}

START_TEST(test_concurrent_writers)
{
	pid_t pids[WRITERS];
	heard h = { 0 };
	tf_index *s;
	tf_buf p = TF_BUF_INIT(1 << 20);
	unsigned good = 0, reads = 0;
	int status;

	for (unsigned w = 0; w < WRITERS; w++) {
		ck_assert_int_ge(pids[w] = fork(), 0);
		if (!pids[w]) {
			writer(w);
			_exit(0);
		}
	}
	s = open_store(0, &h);
	/* Read while they write: every entry is one writer's, whole. */
	for (bool running = true; running;) {
		running = false;
		for (unsigned w = 0; w < WRITERS; w++)
			running |= waitpid(pids[w], &status, WNOHANG) == 0;
		for (unsigned i = 0; i < KEYS; i++) {
			tf_index_key k = key_of(i, 1);
			tf_status rc = tf_index_get(s, &k, &p, NULL);
			reads++;
			ck_assert_msg(rc == TF_OK || rc == TF_E_NOTFOUND, "key %u: status %d", i, rc);
			if (rc == TF_OK) {
				bool one = false;
				for (unsigned w = 0; w < WRITERS; w++)
					one |= is_pattern(&p, 1000 + 2000 * w + i * 37, (uint8_t)(w * 100 + i));
				ck_assert_msg(one, "key %u: a mixed entry", i);
				good++;
			}
		}
	}
	for (unsigned w = 0; w < WRITERS; w++) {
		waitpid(pids[w], &status, 0);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	for (unsigned i = 0; i < KEYS; i++) {
		tf_index_key k = key_of(i, 1);
		ck_assert(tf_index_get(s, &k, &p, NULL) == TF_OK);
	}
	ck_assert_uint_eq(h.n, 0);
	ck_assert_uint_gt(good, 0);
	{	/* no temporary file left behind */
		char dir[PATH_MAX];
		DIR *d;
		struct dirent *e;
		unsigned n = 0;
		store_dir(dir);
		ck_assert_ptr_nonnull(d = opendir(dir));
		while ((e = readdir(d)))
			n += e->d_name[0] != '.';
		closedir(d);
		ck_assert_uint_eq(n, KEYS);
	}
	tf_buf_free(&p);
	tf_index_free(s);
}
END_TEST

START_TEST(test_unusable_dir)
{
	heard h = { 0 };
	tf_index *s;
	tf_index_key k = key_of(1, 1);
	tf_buf p = TF_BUF_INIT(1 << 20);
	tf_index_stats st;
	char path[PATH_MAX];

	/* A directory that cannot be made: a regular file is in the way. */
	path_printf(path, "%s/file", tmpdir);
	write_bytes(path, "x", 1);
	path_printf(path, "%s/file/store", tmpdir);
	ck_assert(tf_index_open(path, 0, hear, &h, &s, NULL) == TF_OK);
	ck_assert_uint_eq(h.n, 1);
	ck_assert_msg(strstr(h.last, "not persisted"), "%s", h.last);
	put_pattern(s, &k, 10, 1);
	ck_assert(tf_index_get(s, &k, &p, NULL) == TF_E_NOTFOUND);
	tf_index_count_walk(s, 123);
	tf_index_get_stats(s, &st);
	ck_assert(!st.persist && !st.writable);
	ck_assert_uint_eq(st.walks, 1);
	ck_assert_uint_eq(st.walk_bytes, 123);
	tf_index_free(s);
	/* No directory at all: counting only, silently. */
	h.n = 0;
	ck_assert(tf_index_open(NULL, 0, hear, &h, &s, NULL) == TF_OK);
	ck_assert_str_eq(tf_index_dir(s), "none");
	put_pattern(s, &k, 10, 1);
	ck_assert(tf_index_get(s, &k, &p, NULL) == TF_E_NOTFOUND);
	ck_assert_uint_eq(h.n, 0);
	tf_index_free(s);
	tf_buf_free(&p);
}
END_TEST

/* mode and owner of path (lstat), and what a file holds, to see nothing changed. */
typedef struct snap {
	struct stat sb;
	uint8_t *bytes;
	size_t n;
} snap;

static snap take_snap(const char *path)
{
	snap s = { 0 };

	ck_assert_int_eq(lstat(path, &s.sb), 0);
	if (S_ISREG(s.sb.st_mode))
		s.bytes = tf_test_read_file(path, &s.n);
	return s;
}

static void same_snap(const char *path, snap *was)
{
	snap now = take_snap(path);

	ck_assert_msg(now.sb.st_mode == was->sb.st_mode, "%s: mode %o, was %o", path, now.sb.st_mode,
		      was->sb.st_mode);
	ck_assert_uint_eq(now.sb.st_uid, was->sb.st_uid);
	ck_assert_uint_eq(now.sb.st_gid, was->sb.st_gid);
	ck_assert_uint_eq(now.sb.st_ino, was->sb.st_ino);
	ck_assert_uint_eq(now.n, was->n);
	ck_assert(!now.n || !memcmp(now.bytes, was->bytes, now.n));
	free(now.bytes);
	free(was->bytes);
}

static void make_old(const char *path, uid_t uid)
{
	struct timespec ts[2] = { { .tv_sec = 1000000000 }, { .tv_sec = 1000000000 } };

	write_bytes(path, "someone's", 9);
	ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW), 0);
	if (uid != geteuid())
		ck_assert_int_eq(chown(path, uid, uid), 0);
}

/* A directory the store must refuse: tf_index_open fails TF_E_ACCESS with
 * `why` in its message, and dir and the files in it are left as they were
 * (an old temporary-looking file of someone's included). */
static void refused(const char *dir, const char *victim, const char *why)
{
	char tmp[PATH_MAX], entry[PATH_MAX];
	tf_error err;
	tf_index *s = (tf_index *)1;
	snap d, t, e;

	path_printf(tmp, "%s/.session.tmp", victim);
	path_printf(entry, "%s/%032d.idx", victim, 0);
	make_old(tmp, geteuid() == 0 ? 65534 : geteuid());
	make_old(entry, geteuid());
	d = take_snap(victim), t = take_snap(tmp), e = take_snap(entry);
	ck_assert_int_eq(tf_index_open(dir, 0, hear, NULL, &s, &err), TF_E_ACCESS);
	ck_assert_ptr_null(s);
	ck_assert_msg(strstr(err.msg, why) && strstr(err.msg, "refused") && strstr(err.msg, dir), "%s", err.msg);
	same_snap(victim, &d);
	same_snap(tmp, &t);
	same_snap(entry, &e);
}

/* Issue 20, item 4: a directory writable by others (/tmp's 1777, or a
 * group's), another user's, or reached through a symlink (in any
 * component) is refused, never chmod'ed, cleaned or written into; ours is
 * used as it is (0755 stays 0755), and made 0700 only when made. */
START_TEST(test_dir_ownership)
{
	heard h = { 0 };
	tf_index *s;
	tf_index_stats st;
	char dir[PATH_MAX], path[PATH_MAX], victim[PATH_MAX];
	struct stat sb;

	store_dir(dir);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	s = open_store(0, &h);	/* ours, not writable by others: used, left as it is */
	tf_index_get_stats(s, &st);
	ck_assert(st.persist && st.writable);
	ck_assert_int_eq(stat(dir, &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 07777, 0755);
	tf_index_free(s);

	ck_assert_int_eq(chmod(dir, 01777), 0);	/* /tmp's mode */
	refused(dir, dir, "writable by every user (mode 1777)");
	ck_assert_int_eq(chmod(dir, 0770), 0);
	refused(dir, dir, "writable by its group (mode 0770)");
	if (geteuid() == 0) {
		ck_assert_int_eq(chmod(dir, 0700), 0);
		ck_assert_int_eq(chown(dir, 65534, 65534), 0);
		refused(dir, dir, "owned by uid 65534");
	}
	/* A symlink in the middle (/tmp/link -> victim, index_dir = /tmp/link/data)
	 * and at the end: nothing is made or changed through it. */
	path_printf(victim, "%s/victim", tmpdir);
	ck_assert_int_eq(mkdir(victim, 0755), 0);
	path_printf(path, "%s/victim/data", tmpdir);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	path_printf(path, "%s/link", tmpdir);
	ck_assert_int_eq(symlink(victim, path), 0);
	path_printf(path, "%s/link/data", tmpdir);
	path_printf(dir, "%s/victim/data", tmpdir);
	refused(path, dir, "'link' is a symbolic link");
	path_printf(path, "%s/link/new/deeper", tmpdir);
	refused(path, victim, "'link' is a symbolic link");
	path_printf(path, "%s/victim/new", tmpdir);
	ck_assert_int_eq(access(path, F_OK), -1);
	path_printf(path, "%s/link", tmpdir);
	refused(path, victim, "'link' is a symbolic link");
}
END_TEST

/* Our store keeps its hands off files that are not ours alone: another
 * user's entry (or one others can write) is never trusted, replaced or
 * removed, and only our own temporary files (our names, old) are reaped. */
START_TEST(test_foreign_files)
{
	heard h = { 0 };
	tf_index *s = open_store(0, &h);
	tf_index_key k = key_of(1, 100);
	tf_buf p = TF_BUF_INIT(1 << 20);
	char dir[PATH_MAX], entry[PATH_MAX], mine[PATH_MAX], other[PATH_MAX], theirs[PATH_MAX];
	tf_index_stats st;
	snap e, o, t;

	put_pattern(s, &k, 100, 1);
	entry_path(&k, entry);
	store_dir(dir);
	/* Ours, old, our temporary name: a crash's, reaped.  Others: kept. */
	path_printf(mine, "%s/.%032d.idx.0123456789abcdef.tmp", dir, 5);
	path_printf(other, "%s/.session.tmp", dir);
	path_printf(theirs, "%s/.%032d.idx.0123456789abcdef.tmp", dir, 6);
	make_old(mine, geteuid());
	make_old(other, geteuid());
	make_old(theirs, geteuid() == 0 ? 65534 : geteuid());
	o = take_snap(other);
	if (geteuid() == 0)
		t = take_snap(theirs);
	tf_index_rescan(s);
	ck_assert_int_eq(access(mine, F_OK), -1);
	same_snap(other, &o);
	if (geteuid() == 0)
		same_snap(theirs, &t);

	/* Our entry made writable by others: not trusted. */
	ck_assert_int_eq(chmod(entry, 0666), 0);
	ck_assert_int_eq(tf_index_get(s, &k, &p, NULL), TF_E_CORRUPT);
	ck_assert_msg(strstr(h.last, "not this user's alone"), "%s", h.last);
	ck_assert_int_eq(chmod(entry, 0600), 0);
	ck_assert_int_eq(tf_index_get(s, &k, &p, NULL), TF_OK);
	if (geteuid() == 0) {
		/* Another user's: not trusted, not replaced, not removed. */
		ck_assert_int_eq(chown(entry, 65534, 65534), 0);
		e = take_snap(entry);
		ck_assert_int_eq(tf_index_get(s, &k, &p, NULL), TF_E_CORRUPT);
		put_pattern(s, &k, 200, 2);
		tf_index_reject(s, &k, "test");
		tf_index_rescan(s);
		same_snap(entry, &e);
		tf_index_get_stats(s, &st);
		ck_assert_uint_eq(st.write_errors, 1);
		ck_assert_uint_eq(st.entries, 0);	/* not counted as ours either */
	}
	tf_buf_free(&p);
	tf_index_free(s);
}
END_TEST

/* ---- object stores: keyed by endpoint ---------------------------------------------------------- */

/* A one-thread S3 endpoint on 127.0.0.1 answering every request with a
 * listing of one object (what opening a source asks). */
typedef struct fake_s3 {
	int lfd;
	pthread_t th;
	atomic_bool stop;
	char url[64];
	/* A GET under .tilefs/index/ is answered with entry (NULL: 404). */
	const uint8_t *_Atomic entry;
	_Atomic size_t entry_len;
	atomic_uint entry_gets;
} fake_s3;

static void *fake_s3_run(void *arg)
{
	static const char body[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult><Name>b</Name>"
		"<IsTruncated>false</IsTruncated><Contents><Key>f.tdb</Key><Size>5</Size><ETag>\"e1\"</ETag>"
		"<LastModified>2020-01-01T00:00:00.000Z</LastModified></Contents></ListBucketResult>";
	fake_s3 *f = arg;
	struct pollfd p = { .fd = f->lfd, .events = POLLIN };
	char req[8192], head[256];
	int fd;

	while (!atomic_load(&f->stop)) {
		if (poll(&p, 1, 20) <= 0 || (fd = accept(f->lfd, NULL, NULL)) < 0)
			continue;
		for (size_t n = 0; n < sizeof(req) - 1;) {
			ssize_t r = recv(fd, req + n, sizeof(req) - 1 - n, 0);
			if (r <= 0)
				break;
			req[n += (size_t)r] = '\0';
			if (strstr(req, "\r\n\r\n"))
				break;
		}
		if (!strncmp(req, "GET ", 4) && strstr(req, "/.tilefs/index/") < strstr(req, " HTTP/") &&
		    strstr(req, "/.tilefs/index/")) {
			const uint8_t *e = atomic_load(&f->entry);
			size_t n = e ? atomic_load(&f->entry_len) : 0;
			atomic_fetch_add(&f->entry_gets, 1);
			snprintf(head, sizeof(head), "HTTP/1.1 %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
				 e ? "200 OK" : "404 Not Found", n);
			if (send(fd, head, strlen(head), MSG_NOSIGNAL) > 0 && n)
				send(fd, e, n, MSG_NOSIGNAL);
			close(fd);
			continue;
		}
		snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n", sizeof(body) - 1);
		if (send(fd, head, strlen(head), MSG_NOSIGNAL) > 0)
			send(fd, body, sizeof(body) - 1, MSG_NOSIGNAL);
		close(fd);
	}
	return NULL;
}

static void fake_s3_start(fake_s3 *f)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);

	memset(f, 0, sizeof(*f));
	ck_assert_int_ge(f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), 0);
	ck_assert_int_eq(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(f->lfd, 8), 0);
	ck_assert_int_eq(getsockname(f->lfd, (struct sockaddr *)&a, &alen), 0);
	snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
	ck_assert_int_eq(pthread_create(&f->th, NULL, fake_s3_run, f), 0);
}

static void fake_s3_stop(fake_s3 *f)
{
	atomic_store(&f->stop, true);
	pthread_join(f->th, NULL);
	close(f->lfd);
}

static tf_source *s3_source_at(const char *spec, const char *endpoint)
{
	tf_s3_settings set;
	tf_source *src = NULL;
	tf_error err;

	tf_s3_settings_init(&set);
	ck_assert_int_eq(tf_s3_settings_set(&set, "endpoint", endpoint, NULL, &err), TF_OK);
	ck_assert_int_eq(tf_s3_settings_set(&set, "anonymous", "yes", NULL, &err), TF_OK);
	ck_assert_int_eq(tf_s3_settings_set(&set, "retries", "0", NULL, &err), TF_OK);
	ck_assert_msg(tf_source_open(spec, &set, &src, &err) == TF_OK, "%s", err.msg);
	tf_s3_settings_clear(&set);
	return src;
}

/* Issue 20, item 3: an object's entry names its endpoint (scheme, host,
 * port), bucket and key: the same bucket, key, ETag and size at another
 * endpoint (which may serve anything under any ETag) finds no entry. */
START_TEST(test_s3_keyed_by_endpoint)
{
	fake_s3 a, b;
	tf_source *sa, *sb, *sp;
	tf_version v = { .size = 5, .etag = "e1" };
	tf_index_key ka, kb, kp;
	tf_buf p = TF_BUF_INIT(1 << 20);
	tf_index *s = open_store(0, NULL);
	char want[128];

	setenv("AWS_CONFIG_FILE", "/nonexistent", 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent", 1);
	fake_s3_start(&a);
	fake_s3_start(&b);
	sa = s3_source_at("s3://b", a.url);
	sb = s3_source_at("s3://b", b.url);
	sp = s3_source_at("s3://b/d", a.url);
	ck_assert(tf_index_key_make(&ka, sa, "f.tdb", &v));
	ck_assert(tf_index_key_make(&kb, sb, "f.tdb", &v));
	ck_assert(tf_index_key_make(&kp, sp, "f.tdb", &v));
	snprintf(want, sizeof(want), "s3:%s/b/f.tdb", a.url);
	ck_assert_str_eq(ka.id, want);
	snprintf(want, sizeof(want), "s3:%s/b/d/f.tdb", a.url);
	ck_assert_str_eq(kp.id, want);	/* the key, prefix included */
	ck_assert_str_ne(ka.id, kb.id);
	put_pattern(s, &ka, 50, 1);
	ck_assert_int_eq(tf_index_get(s, &kb, &p, NULL), TF_E_NOTFOUND);
	ck_assert_int_eq(tf_index_get(s, &ka, &p, NULL), TF_OK);
	tf_source_free(sa);
	tf_source_free(sb);
	tf_source_free(sp);
	fake_s3_stop(&a);
	fake_s3_stop(&b);
	tf_index_free(s);
	tf_buf_free(&p);
}
END_TEST

/* Issue 21: published entries are keyed by bucket and key whatever the
 * endpoint, versioned by ETag and size alone; none for a local source or
 * an object without an ETag. */
START_TEST(test_published_key)
{
	fake_s3 a, b;
	tf_source *sa, *sb, *sp;
	tf_version v = { .size = 5, .mtime_ns = 7000000000, .etag = "e1" }, v2 = v, none = { .size = 5 };
	tf_index_key ka, kb, kp, k2;
	tf_index *s = open_store(0, NULL);
	char na[64], nb[64], np[64];

	setenv("AWS_CONFIG_FILE", "/nonexistent", 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent", 1);
	fake_s3_start(&a);
	fake_s3_start(&b);
	sa = s3_source_at("s3://b", a.url);
	sb = s3_source_at("s3://b", b.url);
	sp = s3_source_at("s3://b/d", a.url);
	v2.mtime_ns = 9000000000;	/* another listing's mtime: the same version */
	ck_assert(tf_index_published_key(&ka, sa, "f.tdb", &v));
	ck_assert(tf_index_published_key(&kb, sb, "f.tdb", &v2));
	ck_assert(tf_index_published_key(&kp, sp, "f.tdb", &v));
	ck_assert_str_eq(ka.id, "bucket:b/f.tdb");
	ck_assert_str_eq(kb.id, "bucket:b/f.tdb");
	ck_assert_str_eq(kp.id, "bucket:b/d/f.tdb");
	ck_assert(tf_version_equal(&ka.v, &kb.v));
	ck_assert_uint_eq(ka.v.size, 5);
	ck_assert_str_eq(ka.v.etag, "e1");
	ck_assert(tf_index_published_name(s, &ka, na, sizeof(na)));
	ck_assert(tf_index_published_name(s, &kb, nb, sizeof(nb)));
	ck_assert(tf_index_published_name(s, &kp, np, sizeof(np)));
	ck_assert_str_eq(na, nb);
	ck_assert_str_ne(na, np);
	ck_assert_uint_eq(strlen(na), 6 + 32 + 4);
	ck_assert(!strncmp(na, "index/", 6) && !strcmp(na + 38, ".idx"));
	ck_assert(!tf_index_published_key(&k2, sa, "f.tdb", &none));
	ck_assert(!tf_index_published_key(&k2, tf_test_root(), "tmp", &v));
	tf_source_free(sa);
	tf_source_free(sb);
	tf_source_free(sp);
	fake_s3_stop(&a);
	fake_s3_stop(&b);
	tf_index_free(s);
}
END_TEST

/* The bytes of the entry published for key `of` (with payload pay[n]). */
static uint8_t *published_entry(const tf_source *src, const char *rel, const tf_version *v, const void *pay,
				size_t n, size_t *len)
{
	tf_index_key k;
	uint8_t *e;

	ck_assert(tf_index_published_key(&k, src, rel, v));
	ck_assert(tf_index_entry_bytes(&k, pay, n, &e, len, NULL) == TF_OK);
	return e;
}

/* Issue 21: a published entry is fetched once and checked as a local one:
 * a miss (404) is remembered; a good one is used; a stale, foreign,
 * truncated, corrupt or oversized one is ignored, warned once and never
 * fetched again; one its reader rejects, the same. */
START_TEST(test_published_fetch)
{
	static const char pay[] = "payload bytes";
	fake_s3 a;
	heard h = { 0 };
	tf_index *s = open_store(0, &h);
	tf_source *src;
	tf_version v = { .size = 5, .mtime_ns = 7000000000, .etag = "e1" }, old = v;
	tf_index_key k;
	tf_index_stats st;
	tf_buf p = TF_BUF_INIT(1 << 20);
	uint8_t *good, *stale, *foreign, *big, *bad;
	size_t ngood, nstale, nforeign, nbig, nbad;
	unsigned gets;

	setenv("AWS_CONFIG_FILE", "/nonexistent", 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent", 1);
	fake_s3_start(&a);
	src = s3_source_at("s3://b", a.url);
	snprintf(old.etag, sizeof(old.etag), "e0");
	good = published_entry(src, "f.tdb", &v, pay, sizeof(pay), &ngood);
	stale = published_entry(src, "f.tdb", &old, pay, sizeof(pay), &nstale);
	foreign = published_entry(src, "g.tdb", &v, pay, sizeof(pay), &nforeign);
	big = malloc(nbig = 65536 * 2);
	memset(big, 'x', nbig);
	bad = malloc(nbad = ngood);
	memcpy(bad, good, ngood);
	bad[ngood - 1] ^= 1;	/* the CRC no longer holds */

	/* None: a miss, remembered (no second GET within list_ttl). */
	ck_assert(tf_index_key_make(&k, src, "f.tdb", &v));
	ck_assert_int_eq(tf_index_get_published(s, src, "f.tdb", &k, &p, NULL), TF_E_NOTFOUND);
	ck_assert_int_eq(tf_index_get_published(s, src, "f.tdb", &k, &p, NULL), TF_E_NOTFOUND);
	ck_assert_uint_eq(atomic_load(&a.entry_gets), 1);
	tf_index_get_stats(s, &st);
	ck_assert_uint_eq(st.published_misses, 2);
	ck_assert_uint_eq(h.n, 0);
	tf_source_free(src);

	/* Good: its payload; ignored ones, each warned once and not asked again. */
	struct { const uint8_t *e; size_t n; tf_status want; const char *why; } cases[] = {
		{ good, ngood, TF_OK, NULL },
		{ stale, nstale, TF_E_NOTFOUND, "an older version's entry" },
		{ foreign, nforeign, TF_E_NOTFOUND, "another file's entry (bucket:b/g.tdb)" },
		{ good, ngood - 1, TF_E_NOTFOUND, "truncated" },
		{ bad, nbad, TF_E_NOTFOUND, "checksum mismatch" },
		{ big, nbig, TF_E_NOTFOUND, "larger than allowed" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tf_index *si = open_store(0, &h);
		h.n = 0;
		src = s3_source_at("s3://b", a.url);
		atomic_store(&a.entry_len, cases[i].n);
		atomic_store(&a.entry, cases[i].e);
		gets = atomic_load(&a.entry_gets);
		ck_assert_int_eq(tf_index_get_published(si, src, "f.tdb", &k, &p, NULL), cases[i].want);
		ck_assert_uint_eq(atomic_load(&a.entry_gets), gets + 1);	/* one GET, never retried */
		tf_index_get_stats(si, &st);
		if (cases[i].want == TF_OK) {
			ck_assert_uint_eq(p.len, sizeof(pay));
			ck_assert(!memcmp(p.p, pay, sizeof(pay)));
			ck_assert_uint_eq(st.published, 1);
			ck_assert_uint_eq(h.n, 0);
			/* Its reader finds it wrong: ignored from then on. */
			tf_index_reject_published(si, src, "f.tdb", &k, "test");
			ck_assert_ptr_nonnull(strstr(h.last, "found wrong"));
		} else {
			ck_assert_uint_eq(p.len, 0);
			ck_assert_uint_eq(st.published_ignored, 1);
			ck_assert_msg(strstr(h.last, cases[i].why) && strstr(h.last, "bucket:b/f.tdb"), "%s", h.last);
		}
		ck_assert_uint_eq(h.n, 1);
		ck_assert_int_eq(tf_index_get_published(si, src, "f.tdb", &k, &p, NULL), TF_E_NOTFOUND);
		ck_assert_uint_eq(atomic_load(&a.entry_gets), gets + 1);
		ck_assert_uint_eq(h.n, 1);
		tf_source_free(src);
		tf_index_free(si);
	}
	/* Not used at all when told so (tiletool). */
	src = s3_source_at("s3://b", a.url);
	atomic_store(&a.entry, good);
	atomic_store(&a.entry_len, ngood);
	gets = atomic_load(&a.entry_gets);
	tf_index_use_published(s, false);
	ck_assert_int_eq(tf_index_get_published(s, src, "f.tdb", &k, &p, NULL), TF_E_NOTFOUND);
	ck_assert_uint_eq(atomic_load(&a.entry_gets), gets);
	tf_source_free(src);
	fake_s3_stop(&a);
	tf_index_free(s);
	tf_buf_free(&p);
	free(good), free(stale), free(foreign), free(big), free(bad);
}
END_TEST

/* ---- files through the store ------------------------------------------------------------------ */

static tf_file_spec zstd_spec(tf_pipeline **p)
{
	ck_assert(tf_pipeline_parse("zstd", p, NULL) == TF_OK);
	return (tf_file_spec){ .pipeline = *p, .type = TF_DT_INT32, .cell_val_num = 1 };
}

typedef struct made {
	char path[PATH_MAX];
	uint8_t *plain;
	size_t size;
} made;

/* A zstd int32 tile file: tiles of the given byte sizes (an empty one has no chunk). */
static void make_file(const char *name, const size_t *tiles, size_t ntiles, uint64_t seed, made *m)
{
	tf_chunk_env env = { .type = TF_DT_INT32, .cell_size = 4, .version = 22 };
	tf_workspace *ws = tf_workspace_new();
	tf_buf out = TF_BUF_INIT(SIZE_MAX);
	tf_pipeline *p;
	size_t at = 0;

	ck_assert(tf_pipeline_parse("zstd", &p, NULL) == TF_OK);
	m->size = 0;
	for (size_t t = 0; t < ntiles; t++)
		m->size += tiles[t];
	m->plain = tf_test_data(m->size, TF_GEN_WALK, 4, seed);
	for (size_t t = 0; t < ntiles; at += tiles[t++])
		ck_assert(tf_tile_encode(p, &env, ws, tf_span_of(m->plain + at, tiles[t]), NULL, 0, &out, NULL) ==
			  TF_OK);
	path_printf(m->path, "%s/%s", tmpdir, name);
	write_bytes(m->path, out.p, out.len);
	tf_buf_free(&out);
	tf_pipeline_free(p);
	tf_workspace_free(ws);
}

static const size_t tiles3[] = { 300000, 0, 65536 * 3 + 4 };

static tf_file *open_how(const made *m, tf_index *store, bool metadata, tf_status *rc)
{
	tf_pipeline *p;
	tf_file_spec spec = zstd_spec(&p);
	tf_file_how how = { store, metadata };
	tf_file *f = NULL;
	tf_error err;

	*rc = tf_file_open_how(tf_test_root(), m->path + 1, NULL, NULL, &spec, &how, &f, &err);
	tf_pipeline_free(p);	/* the file has its own copy */
	return f;
}

static tf_file *open_ok(const made *m, tf_index *store, bool metadata)
{
	tf_status rc;
	tf_file *f = open_how(m, store, metadata, &rc);

	ck_assert_int_eq(rc, TF_OK);
	return f;
}

/* Read all of f through a cache: rc of the read, bytes compared if ok. */
static tf_status read_all(tf_file *f, const made *m)
{
	tf_cache *c;
	tf_handle *h;
	tf_workspace *ws = tf_workspace_new();
	uint8_t *dst = malloc(m->size + 1);
	size_t got = 0;
	tf_error err;
	tf_status rc;

	ck_assert(tf_cache_new(1 << 20, 0, &c, NULL) == TF_OK);
	ck_assert(tf_handle_open(f, &h, NULL) == TF_OK);
	rc = tf_handle_read(h, c, ws, 0, m->size + 1, dst, &got, &err);
	if (rc == TF_OK) {
		ck_assert_uint_eq(got, m->size);
		ck_assert(!memcmp(dst, m->plain, m->size));
	}
	tf_handle_close(h);
	tf_cache_free(c);
	tf_workspace_free(ws);
	free(dst);
	return rc;
}

static tf_index_key file_key(const made *m)
{
	tf_index_key k;
	tf_stat st;

	ck_assert(tf_source_stat(tf_test_root(), m->path + 1, &st, NULL) == TF_OK);
	ck_assert(tf_index_key_make(&k, tf_test_root(), m->path + 1, &st.v));
	return k;
}

START_TEST(test_file_restored)
{
	heard h = { 0 };
	tf_index *s = open_store(0, &h);
	tf_file_info a, b;
	tf_index_stats st;
	tf_file *f;
	made m;

	make_file("a.tdb", tiles3, 3, 1, &m);
	f = open_ok(&m, s, false);
	tf_file_get_info(f, &a);
	ck_assert(!a.from_store && a.walked_bytes > 0);
	ck_assert_int_eq(read_all(f, &m), TF_OK);
	tf_file_unref(f);
	f = open_ok(&m, s, false);
	tf_file_get_info(f, &b);
	ck_assert(b.from_store && b.walked_bytes == 0);
	ck_assert_uint_eq(b.tiles, a.tiles);
	ck_assert_uint_eq(b.chunks, a.chunks);
	ck_assert_uint_eq(b.decoded_bytes, m.size);
	ck_assert_uint_eq(tf_file_size(f), m.size);
	for (size_t t = 0; t < tf_file_ntiles(f); t++) {
		uint64_t off, size;
		tf_file_tile_range(f, t, &off, &size);
		ck_assert_uint_eq(size, tiles3[t]);
	}
	ck_assert_int_eq(read_all(f, &m), TF_OK);
	tf_file_unref(f);
	tf_index_get_stats(s, &st);
	ck_assert_uint_eq(st.walks, 1);
	ck_assert_uint_eq(st.hits, 1);
	ck_assert_uint_eq(st.writes, 1);
	ck_assert_uint_eq(h.n, 0);
	free(m.plain);
	tf_index_free(s);
}
END_TEST

/* The payload stored for m after an open with `metadata`, from a fresh store. */
static void stored_payload(const made *m, bool metadata, tf_buf *out)
{
	char dir[PATH_MAX];
	tf_index_key k = file_key(m);
	tf_index *s;
	tf_file *f;

	store_dir(dir);
	rm_tree(dir);
	s = open_store(0, NULL);
	f = open_ok(m, s, metadata);
	tf_file_unref(f);
	ck_assert(tf_index_get(s, &k, out, NULL) == TF_OK);
	tf_index_free(s);
}

START_TEST(test_header_walk_same)
{
	tf_buf a = TF_BUF_INIT(1 << 24), b = TF_BUF_INIT(1 << 24);
	static const size_t many[] = { 65536 * 40 + 12, 4, 0, 1 << 20 };
	made m;

	make_file("h.tdb", many, 4, 2, &m);
	stored_payload(&m, false, &a);
	stored_payload(&m, true, &b);
	ck_assert_uint_eq(a.len, b.len);
	ck_assert(!memcmp(a.p, b.p, a.len));
	tf_buf_free(&a);
	tf_buf_free(&b);
	free(m.plain);
}
END_TEST

START_TEST(test_file_rewritten_in_place)
{
	heard h = { 0 };
	tf_index *s = open_store(0, &h);
	static const size_t one[] = { 200000 };
	tf_index_stats st;
	struct stat sb;
	struct timespec ts[2];
	tf_file *f;
	made m, m2;
	uint8_t *b;
	size_t n;

	make_file("r.tdb", one, 1, 3, &m);
	f = open_ok(&m, s, true);
	tf_file_unref(f);
	/* Same size, other bytes and layout: the first 12 stored bytes of a
	 * chunk become a header of a different split, keeping the size. */
	ck_assert_int_eq(stat(m.path, &sb), 0);
	b = tf_test_read_file(m.path, &n);
	{
		/* One tile of one raw chunk of n - 20 bytes, no filters: decoded
		 * the same size as stored, with zstd's spec failing to decode it
		 * but indexing fine - what matters is the layout changed. */
		memset(b, 0, n);
		b[0] = 1;
		tf_put_le32(b + 8, (uint32_t)(n - 20));
		tf_put_le32(b + 12, (uint32_t)(n - 20));
	}
	write_bytes(m.path, b, n);	/* the same inode, rewritten */
	free(b);
	ts[0] = sb.st_atim;
	ts[1] = sb.st_mtim;
	ck_assert_int_eq(utimensat(AT_FDCWD, m.path, ts, 0), 0);	/* mtime put back */
	f = open_ok(&m, s, true);
	ck_assert_uint_eq(tf_file_size(f), n - 20);	/* the new layout, walked */
	tf_file_unref(f);
	tf_index_get_stats(s, &st);
	ck_assert_uint_eq(st.walks, 2);
	ck_assert_uint_eq(st.stale, 1);
	ck_assert_uint_eq(st.hits, 0);
	(void)m2;
	free(m.plain);
	tf_index_free(s);
}
END_TEST

/* ---- damaged payloads with valid checksums --------------------------------------------------- */

#define P_TILES 16
#define P_UNITS 256

typedef struct p_unit {
	uint64_t src_len, size, nchunks;
} p_unit;

typedef struct p_tile {
	uint64_t stored, size, nchunks, nunits;	/* nunits as written */
	int64_t ulen_delta;			/* added to the unit list's length */
	p_unit u[P_UNITS];
	uint64_t nu;				/* units in u */
} p_tile;

typedef struct payload {
	uint64_t kind, ntiles;	/* ntiles as written */
	p_tile t[P_TILES];
	uint64_t n;		/* tiles in t */
	size_t extra;		/* trailing bytes to add */
} payload;

/* The varint at *p (before end) into *v; false if cut short or too long. */
static bool vget(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
		uint8_t c = *(*p)++;
		*v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return true;
	}
	return false;
}

static void vput(tf_buf *b, uint64_t v)
{
	do {
		uint8_t c = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		ck_assert(tf_buf_append(b, &c, 1, NULL) == TF_OK);
		v >>= 7;
	} while (v);
}

/* The payload format of tf_file_index.c, spelled out again: false if b is
 * no such payload (of at most P_TILES tiles of P_UNITS units) any more. */
static bool parse_payload(const tf_buf *b, payload *pl)
{
	const uint8_t *p = b->p, *end = b->p + b->len;

	memset(pl, 0, sizeof(*pl));
	if (!vget(&p, end, &pl->kind) || !vget(&p, end, &pl->ntiles) || pl->ntiles > P_TILES)
		return false;
	pl->n = pl->ntiles;
	for (uint64_t t = 0; t < pl->n; t++) {
		p_tile *te = &pl->t[t];
		p_unit prev = { 0, 65536, 1 };
		uint64_t ulen;
		const uint8_t *units;

		if (!vget(&p, end, &te->stored) || !vget(&p, end, &te->size) || !vget(&p, end, &te->nchunks) ||
		    !vget(&p, end, &te->nunits) || !vget(&p, end, &ulen) || te->nunits > P_UNITS ||
		    ulen > (uint64_t)(end - p))
			return false;
		te->nu = te->nunits;
		units = p;
		for (uint64_t u = 0; u < te->nu; u++) {
			uint64_t v;
			if (!vget(&p, end, &v))
				return false;
			te->u[u] = prev;
			te->u[u].src_len = v >> 1;
			if ((v & 1) && (!vget(&p, end, &te->u[u].size) || !vget(&p, end, &te->u[u].nchunks)))
				return false;
			prev = te->u[u];
		}
		if (p != units + ulen)
			return false;
	}
	return p == end;
}

static void decode_payload(const tf_buf *b, payload *pl)
{
	ck_assert(parse_payload(b, pl));
}

/* Units always written irregular (size and count explicit): also valid. */
static void encode_payload(const payload *pl, tf_buf *b)
{
	tf_buf units = TF_BUF_INIT(1 << 24);

	b->len = 0;
	vput(b, pl->kind);
	vput(b, pl->ntiles);
	for (uint64_t t = 0; t < pl->ntiles && t < pl->n; t++) {
		const p_tile *te = &pl->t[t];
		units.len = 0;
		for (uint64_t u = 0; u < te->nunits && u < te->nu; u++) {
			vput(&units, te->u[u].src_len << 1 | 1);
			vput(&units, te->u[u].size);
			vput(&units, te->u[u].nchunks);
		}
		vput(b, te->stored);
		vput(b, te->size);
		vput(b, te->nchunks);
		vput(b, te->nunits);
		vput(b, (uint64_t)((int64_t)units.len + te->ulen_delta));
		ck_assert(tf_buf_append(b, units.p, units.len, NULL) == TF_OK);
	}
	tf_buf_free(&units);
	for (size_t i = 0; i < pl->extra; i++)
		vput(b, 0);
}

/* Read [off, off+len) of f (clipped to its size) through cache c (a file
 * is read through one cache): TF_OK with every byte the truth's, or an
 * error.  Wrong bytes fail the test. */
static tf_status read_range(tf_file *f, tf_cache *c, const made *m, uint64_t off, size_t len)
{
	tf_handle *h;
	tf_workspace *ws = tf_workspace_new();
	uint8_t *dst = malloc(len ? len : 1);
	size_t got = 0;
	tf_error err;
	tf_status rc;

	ck_assert(tf_handle_open(f, &h, NULL) == TF_OK);
	rc = tf_handle_read(h, c, ws, off, len, dst, &got, &err);
	if (rc == TF_OK) {
		ck_assert_msg(off + got <= m->size, "%zu bytes read at %llu of a file of %zu", got,
			      (unsigned long long)off, m->size);
		ck_assert_msg(!memcmp(dst, m->plain + off, got), "wrong bytes at %llu+%zu",
			      (unsigned long long)off, got);
		ck_assert_msg(got == len || off + got == m->size, "%zu bytes of %zu read at %llu: the file is "
			      "%zu bytes", got, len, (unsigned long long)off, m->size);
	}
	tf_handle_close(h);
	tf_workspace_free(ws);
	free(dst);
	return rc;
}

/* After an entry was found wrong at a read: it is gone, the next open
 * walks and stores a good one, the one after restores it and reads right. */
static void rebuilt(const made *m, tf_index *s)
{
	tf_buf p = TF_BUF_INIT(1 << 20);
	tf_index_key k = file_key(m);
	tf_file_info info;
	tf_file *f;

	ck_assert_int_eq(tf_index_get(s, &k, &p, NULL), TF_E_NOTFOUND);
	f = open_ok(m, s, false);
	tf_file_get_info(f, &info);
	ck_assert(!info.from_store);
	tf_file_unref(f);
	f = open_ok(m, s, false);
	tf_file_get_info(f, &info);
	ck_assert(info.from_store);
	ck_assert_uint_eq(tf_file_size(f), m->size);
	ck_assert_int_eq(read_all(f, m), TF_OK);
	tf_file_unref(f);
	tf_buf_free(&p);
}

/* The first decoded byte of tile t of a file of tiles of the given sizes. */
static uint64_t tile_off(const size_t *tiles, size_t t)
{
	uint64_t off = 0;

	for (size_t i = 0; i < t; i++)
		off += tiles[i];
	return off;
}

/* Issue 20, item 3: tile 0 and its last unit claimed 4 bytes longer, which
 * every check of the entry passes.  Every later tile's own headers agree
 * with it, so only the order of proof catches it: a read of tile 1 or 2
 * before tile 0 was ever read fails, as does tile 0; no read gets bytes
 * shifted by 4; the entry is removed (warned, naming tile 0) and the next
 * open walks, stores and reads right. */
START_TEST(test_forged_size)
{
	static const size_t tiles[] = { 65536 * 3, 65536 + 1000, 5000 };
	/* Read first: in tile 1, in tile 2 (as claimed: 4 bytes on), in tile
	 * 0's last unit. */
	static const uint64_t first[] = { 65536 * 3 + 4 + 100, 65536 * 4 + 1000 + 4, 65536 * 2 + 100 };
	tf_buf good = TF_BUF_INIT(1 << 20), bad = TF_BUF_INIT(1 << 20);
	made m;

	make_file("f.tdb", tiles, 3, 9, &m);
	stored_payload(&m, false, &good);
	for (size_t i = 0; i < sizeof(first) / sizeof(first[0]); i++) {
		heard h = { 0 };
		tf_index *s = open_store(0, &h);
		tf_index_key k = file_key(&m);
		tf_index_stats st;
		tf_file_info info;
		payload pl;
		tf_file *f;
		tf_cache *c;

		decode_payload(&good, &pl);
		pl.t[0].size += 4;
		pl.t[0].u[pl.t[0].nu - 1].size += 4;
		encode_payload(&pl, &bad);
		tf_index_put(s, &k, bad.p, bad.len);
		f = open_ok(&m, s, false);
		ck_assert(tf_cache_new(1 << 20, 0, &c, NULL) == TF_OK);
		tf_file_get_info(f, &info);
		ck_assert(info.from_store);
		ck_assert_uint_eq(tf_file_size(f), m.size + 4);	/* the claim, until proved */
		ck_assert_int_eq(read_range(f, c, &m, 0, 4096), TF_OK);	/* before the lie */
		ck_assert_int_eq(read_range(f, c, &m, first[i], 4096), TF_E_CORRUPT);
		ck_assert_int_eq(read_range(f, c, &m, tile_off(tiles, 2) + 4, 100), TF_E_CORRUPT);
		ck_assert_int_eq(read_range(f, c, &m, 0, m.size + 4), TF_E_CORRUPT);
		tf_file_unref(f);
		tf_cache_free(c);
		tf_index_get_stats(s, &st);
		ck_assert_uint_eq(st.corrupt, 1);
		ck_assert_uint_eq(h.n, 1);
		ck_assert_msg(strstr(h.last, "tile 0: ") && strstr(h.last, "differ") && strstr(h.last, "removed"),
			      "%s", h.last);
		rebuilt(&m, s);
		tf_index_free(s);
	}
	tf_buf_free(&good);
	tf_buf_free(&bad);
	free(m.plain);
}
END_TEST

/* Damages; each must be rejected at the open or by the first read of what
 * it concerns (or of anything after it). */
enum { D_NONE, D_KIND, D_NTILES_HUGE, D_NTILES_LESS, D_STORED_PLUS, D_STORED_MINUS, D_STORED_HUGE,
       D_NCHUNKS_PLUS, D_NCHUNKS_HUGE, D_NUNITS_HUGE, D_UNIT_SRC_PLUS, D_UNIT_SRC_ZERO, D_UNIT_CHUNKS_ZERO,
       D_UNIT_CHUNKS_PLUS, D_UNIT_SIZE_HUGE, D_EXTRA_BYTES, D_TRUNCATED, D_SHUFFLE, D_TILE_SIZE_PLUS,
       D_TILE_SIZE_HUGE, D_ULEN_PLUS, D_ULEN_MINUS, D_FORGED, D_STORED_SHIFT, D_SIZE_SHIFT_TILES,
       D_LAST_TILE, D_COUNT };

static void damage(payload *pl, int d, tf_buf *b)
{
	p_tile *t0 = &pl->t[0], *t1 = &pl->t[1], *tl = &pl->t[pl->n - 1];

	switch (d) {
	case D_KIND: pl->kind = 2; break;
	case D_NTILES_HUGE: pl->ntiles = UINT64_MAX / 2; break;
	case D_NTILES_LESS: pl->ntiles--; break;
	case D_STORED_PLUS: t0->stored++; break;
	case D_STORED_MINUS: t0->stored--; break;
	case D_STORED_HUGE: t0->stored = UINT64_MAX; break;
	case D_NCHUNKS_PLUS: t0->nchunks++; break;
	case D_NCHUNKS_HUGE: t0->nchunks = 1ull << 40; break;
	case D_NUNITS_HUGE: t0->nunits = 1ull << 40; break;
	case D_UNIT_SRC_PLUS: t0->u[0].src_len++; break;
	case D_UNIT_SRC_ZERO: t0->u[0].src_len = 0; break;
	case D_UNIT_CHUNKS_ZERO: t0->u[0].nchunks = 0; break;
	case D_UNIT_CHUNKS_PLUS: t0->u[0].nchunks++, t0->nchunks++; break;
	case D_UNIT_SIZE_HUGE: t0->u[0].size = 1ull << 33; break;
	case D_EXTRA_BYTES: pl->extra = 1; break;
	case D_SHUFFLE: t0->u[0].size += 4, t0->u[1].size -= 4; break;	/* sums kept */
	case D_TILE_SIZE_PLUS: t0->size++; break;
	case D_TILE_SIZE_HUGE: t0->size = UINT64_MAX - 5; break;
	case D_ULEN_PLUS: t0->ulen_delta = 1; break;
	case D_ULEN_MINUS: t0->ulen_delta = -1; break;
	case D_FORGED: t0->size += 4, t0->u[t0->nu - 1].size += 4; break;	/* issue 20 */
	case D_STORED_SHIFT:	/* 12 stored bytes moved from tile 1 to tile 0, units too */
		t0->stored += 12, t0->u[t0->nu - 1].src_len += 12, t1->stored -= 12, t1->u[0].src_len -= 12;
		break;
	case D_SIZE_SHIFT_TILES:	/* tile 0 +4, tile 1 -4: the file's size kept */
		t0->size += 4, t0->u[t0->nu - 1].size += 4, t1->size -= 4, t1->u[0].size -= 4;
		break;
	case D_LAST_TILE: tl->size += 4, tl->u[tl->nu - 1].size += 4; break;
	default: break;
	}
	encode_payload(pl, b);
	if (d == D_TRUNCATED)
		b->len--;
}

/* Whether a damage is seen at the open (the entry not used: walked). */
static bool seen_at_open(int d)
{
	switch (d) {
	case D_NONE: case D_NCHUNKS_PLUS: case D_UNIT_SRC_PLUS: case D_UNIT_SRC_ZERO: case D_UNIT_CHUNKS_ZERO:
	case D_UNIT_SIZE_HUGE: case D_TILE_SIZE_PLUS: case D_SHUFFLE: case D_UNIT_CHUNKS_PLUS: case D_FORGED:
	case D_STORED_SHIFT: case D_SIZE_SHIFT_TILES: case D_LAST_TILE:
	case D_ULEN_PLUS: case D_ULEN_MINUS:	/* either: the rest of the payload is read shifted */
		return false;
	default:
		return true;
	}
}

START_TEST(test_damaged_payloads)
{
	made m;
	tf_buf good = TF_BUF_INIT(1 << 24), bad = TF_BUF_INIT(1 << 24);
	static const size_t tiles[] = { 65536 * 4, 65536 + 100, 4, 3000 };

	make_file("d.tdb", tiles, 4, 4, &m);
	stored_payload(&m, false, &good);
	for (int d = D_NONE; d < D_COUNT; d++) {
		heard h = { 0 };
		tf_index *s = open_store(0, &h);
		tf_index_key k = file_key(&m);
		tf_index_stats st;
		tf_file_info info;
		tf_status rc;
		payload pl;
		tf_file *f;
		tf_cache *c;
		bool at_open;

		decode_payload(&good, &pl);
		damage(&pl, d, &bad);
		tf_index_put(s, &k, bad.p, bad.len);
		f = open_ok(&m, s, false);
		ck_assert(tf_cache_new(1 << 20, 0, &c, NULL) == TF_OK);
		tf_file_get_info(f, &info);
		at_open = !info.from_store;
		ck_assert_msg(at_open == seen_at_open(d) || d == D_ULEN_PLUS || d == D_ULEN_MINUS,
			      "damage %d: from_store %d", d, info.from_store);
		/* The last tile first, then all: right bytes, or an error. */
		read_range(f, c, &m, tile_off(tiles, 3), 3000);
		rc = read_range(f, c, &m, 0, m.size + 1);
		tf_file_unref(f);
		tf_cache_free(c);
		tf_index_get_stats(s, &st);
		ck_assert_msg(st.walks == at_open, "damage %d: %llu walks", d, (unsigned long long)st.walks);
		ck_assert_msg(st.corrupt == (d != D_NONE), "damage %d: corrupt %llu", d,
			      (unsigned long long)st.corrupt);
		ck_assert_uint_eq(h.n, st.corrupt);
		ck_assert_msg(rc == (at_open || d == D_NONE ? TF_OK : TF_E_CORRUPT), "damage %d: read %d", d, rc);
		if (st.corrupt && !at_open)
			rebuilt(&m, s);
		tf_index_free(s);
	}
	tf_buf_free(&good);
	tf_buf_free(&bad);
	free(m.plain);
}
END_TEST

/* A read far into a restored file proves what precedes it by more than
 * 4 MiB by reading headers, without decoding (the rest through the cache):
 * a good entry reads right; 4 bytes moved between tile 0's first two units
 * (sums kept) are found by the headers, and the reader gets EIO. */
START_TEST(test_far_proof)
{
	static const size_t tiles[] = { 65536 * 70 + 4, 65536 * 10, 65536 * 4 };
	tf_buf good = TF_BUF_INIT(1 << 20), bad = TF_BUF_INIT(1 << 20);
	made m;

	make_file("far.tdb", tiles, 3, 11, &m);
	stored_payload(&m, false, &good);
	for (int forged = 0; forged < 2; forged++) {
		heard h = { 0 };
		tf_index *s = open_store(0, &h);
		tf_index_key k = file_key(&m);
		tf_cache_stats cs;
		tf_index_stats st;
		payload pl;
		tf_file *f;
		tf_cache *c;

		decode_payload(&good, &pl);
		if (forged)
			pl.t[0].u[0].size += 4, pl.t[0].u[1].size -= 4;
		encode_payload(&pl, &bad);
		tf_index_put(s, &k, bad.p, bad.len);
		f = open_ok(&m, s, false);
		ck_assert(tf_cache_new(4 << 20, 0, &c, NULL) == TF_OK);
		ck_assert_int_eq(read_range(f, c, &m, tile_off(tiles, 2) + forged * 4 + 1000, 5000),
				 forged ? TF_E_CORRUPT : TF_OK);
		tf_cache_get_stats(c, &cs);
		/* The first 16 of the 81 units before it proved by their headers. */
		ck_assert_msg(cs.misses <= 1 + 81 - 16, "%llu units decoded", (unsigned long long)cs.misses);
		tf_index_get_stats(s, &st);
		ck_assert_uint_eq(st.corrupt, forged);
		ck_assert_int_eq(read_range(f, c, &m, 0, m.size + 1), forged ? TF_E_CORRUPT : TF_OK);
		tf_file_unref(f);
		tf_cache_free(c);
		if (forged)
			rebuilt(&m, s);
		tf_index_free(s);
	}
	tf_buf_free(&good);
	tf_buf_free(&bad);
	free(m.plain);
}
END_TEST

/* Readers of one restored file at once, through one cache with workers
 * (decode-ahead on): 4 threads at random places, 2 of them also from the
 * start in 128 KiB steps.  With the true entry every read is right; with
 * tile 0 forged every read is right or EIO, and the entry is rejected
 * once.  (Under TSan: the proof, its flags and the cache waits race-free.) */
typedef struct reader_arg {
	tf_file *f;
	tf_cache *c;
	const made *m;
	uint64_t seed;
	_Atomic unsigned *wrong, *failed;
} reader_arg;

static void *reader(void *p)
{
	reader_arg *a = p;
	tf_workspace *ws = tf_workspace_new();
	uint8_t *dst = malloc(1 << 17);
	uint64_t x = a->seed;
	tf_handle *h;

	if (tf_handle_open(a->f, &h, NULL) != TF_OK) {
		atomic_fetch_add(a->wrong, 1);
		return NULL;
	}
	for (unsigned i = 0; i < 150; i++) {
		uint64_t off, size = a->m->size;
		size_t len, got = 0;
		tf_error err;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		off = a->seed % 2 && i < 50 ? (uint64_t)i << 17 : x % size;
		len = 1 + (size_t)((x >> 20) % (1 << 17));
		if (off >= size)
			continue;
		if (tf_handle_read(h, a->c, ws, off, len, dst, &got, &err) != TF_OK)
			atomic_fetch_add(a->failed, 1);
		else if (memcmp(dst, a->m->plain + off, got) || (got != len && off + got != size))
			atomic_fetch_add(a->wrong, 1);
	}
	tf_handle_close(h);
	tf_workspace_free(ws);
	free(dst);
	return NULL;
}

START_TEST(test_concurrent_proof)
{
	static const size_t tiles[] = { 65536 * 24 + 8, 65536 * 16, 65536 * 8 + 5 };
	tf_buf good = TF_BUF_INIT(1 << 20), bad = TF_BUF_INIT(1 << 20);
	made m;

	make_file("c.tdb", tiles, 3, 12, &m);
	stored_payload(&m, false, &good);
	for (int forged = 0; forged < 2; forged++) {
		heard h = { 0 };
		tf_index *s = open_store(0, &h);
		tf_index_key k = file_key(&m);
		_Atomic unsigned wrong = 0, failed = 0;
		unsigned nwrong, nfailed;
		pthread_t th[4];
		reader_arg ra[4];
		tf_index_stats st;
		payload pl;
		tf_file *f;
		tf_cache *c;

		decode_payload(&good, &pl);
		if (forged)
			pl.t[0].size += 4, pl.t[0].u[pl.t[0].nu - 1].size += 4;
		encode_payload(&pl, &bad);
		tf_index_put(s, &k, bad.p, bad.len);
		f = open_ok(&m, s, false);
		ck_assert(tf_cache_new(8 << 20, 2, &c, NULL) == TF_OK);
		for (int i = 0; i < 4; i++) {
			ra[i] = (reader_arg){ f, c, &m, 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1), &wrong, &failed };
			ck_assert_int_eq(pthread_create(&th[i], NULL, reader, &ra[i]), 0);
		}
		for (int i = 0; i < 4; i++)
			pthread_join(th[i], NULL);
		tf_cache_free(c);
		tf_file_unref(f);
		tf_index_get_stats(s, &st);
		nwrong = atomic_load(&wrong), nfailed = atomic_load(&failed);
		ck_assert_msg(nwrong == 0, "%u reads got wrong bytes", nwrong);
		ck_assert_uint_eq(st.corrupt, forged);
		ck_assert_uint_eq(h.n, forged);
		ck_assert_msg(forged ? nfailed > 0 : nfailed == 0, "%u reads failed", nfailed);
		tf_index_free(s);
	}
	tf_buf_free(&good);
	tf_buf_free(&bad);
	free(m.plain);
}
END_TEST

/* ---- random mutations ------------------------------------------------------------------------- */

static uint64_t rnd_state;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static uint64_t *tile_field(p_tile *t, unsigned f)
{
	return f == 0 ? &t->stored : f == 1 ? &t->size : f == 2 ? &t->nchunks : &t->nunits;
}

static uint64_t *unit_field(p_unit *u, unsigned f)
{
	return f == 0 ? &u->src_len : f == 1 ? &u->size : &u->nchunks;
}

/* Bytes of b flipped, set, inserted or removed. */
static void mutate_bytes(tf_buf *b)
{
	size_t at = b->len ? (size_t)(rnd() % b->len) : 0;
	uint8_t c = (uint8_t)rnd();

	switch (rnd() % 4) {
	case 0: if (b->len) b->p[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
	case 1: if (b->len) b->p[at] = c; break;
	case 2: ck_assert(tf_buf_append(b, &c, 1, NULL) == TF_OK);
		memmove(b->p + at + 1, b->p + at, b->len - 1 - at);
		b->p[at] = c;
		break;
	default: if (b->len) memmove(b->p + at, b->p + at + 1, b->len - at - 1), b->len--; break;
	}
}

/* One random change to payload b: a field of a tile or a unit moved a
 * little or a lot, or set at random; two moved in opposite directions
 * (sums kept); a tile's decoded size moved with one of its units' (what
 * the entry's own checks cannot see); units or tiles swapped; counts
 * moved; or bytes changed. */
static void mutate(tf_buf *b)
{
	static const int64_t deltas[] = { 1, -1, 4, -4, 12, -12, 4096, -4096, 65536, -65536 };
	static payload pl;
	int64_t d = deltas[rnd() % 10];
	p_tile *t1, *t2;
	p_unit *u1, *u2;
	unsigned f = (unsigned)(rnd() % 3);

	if (rnd() % 5 == 0 || !parse_payload(b, &pl) || !pl.n) {
		mutate_bytes(b);
		return;
	}
	t1 = &pl.t[rnd() % pl.n], t2 = &pl.t[rnd() % pl.n];
	u1 = t1->nu ? &t1->u[rnd() % t1->nu] : NULL, u2 = t2->nu ? &t2->u[rnd() % t2->nu] : NULL;
	switch (rnd() % 8) {
	case 0: *tile_field(t1, (unsigned)(rnd() % 4)) += (uint64_t)d; break;
	case 1: if (u1) *unit_field(u1, f) += (uint64_t)d; break;
	case 2: if (u1 && u2) *unit_field(u1, f) += (uint64_t)d, *unit_field(u2, f) -= (uint64_t)d; break;
	case 3: if (u1) *tile_field(t1, f) += (uint64_t)d, *unit_field(u1, f) += (uint64_t)d; break;
	case 4: if (u1 && u2) { p_unit u = *u1; *u1 = *u2, *u2 = u; } break;
	case 5: { p_tile t = *t1; *t1 = *t2, *t2 = t; } break;
	case 6: if (u1 && rnd() % 2) *unit_field(u1, f) = rnd() >> (rnd() % 64);
		else *tile_field(t1, f) = rnd() >> (rnd() % 64);
		break;
	default: pl.ntiles += d > 0 ? 1 : (uint64_t)-1; break;
	}
	encode_payload(&pl, b);
}

typedef struct campaign {
	unsigned mutants, at_open, at_read, same, reads, failed_reads;
} campaign;

/* n mutants of m's entry, each read at random places (half of them in the
 * last MiB), then whole. */
static void mutate_file(const made *m, unsigned n, campaign *cp)
{
	tf_buf good = TF_BUF_INIT(1 << 20), bad = TF_BUF_INIT(1 << 20);
	static payload a, g;

	stored_payload(m, false, &good);
	for (unsigned i = 0; i < n; i++, cp->mutants++) {
		tf_index *s = open_store(0, NULL);
		tf_index_key k = file_key(m);
		tf_index_stats st;
		tf_file_info info;
		tf_file *f;
		tf_cache *c;

		bad.len = 0;
		ck_assert(tf_buf_append(&bad, good.p, good.len, NULL) == TF_OK);
		for (unsigned j = 1 + (unsigned)(rnd() % 2); j; j--)
			mutate(&bad);
		tf_index_put(s, &k, bad.p, bad.len);
		f = open_ok(m, s, false);
		ck_assert(tf_cache_new(1 << 20, 0, &c, NULL) == TF_OK);
		tf_file_get_info(f, &info);
		for (unsigned r = 0; r < 4; r++) {
			uint64_t size = tf_file_size(f), off = size ? rnd() % size : 0;
			if (r % 2 && size > (1 << 20))
				off = size - 1 - rnd() % (1 << 20);
			cp->failed_reads += read_range(f, c, m, off, 1 + (size_t)(rnd() % 100000)) != TF_OK;
			cp->reads++;
		}
		cp->failed_reads += read_range(f, c, m, 0, m->size + 1) != TF_OK;
		cp->reads++;
		tf_file_unref(f);
		tf_cache_free(c);
		tf_index_get_stats(s, &st);
		if (!info.from_store) {
			cp->at_open++;
			ck_assert_uint_eq(st.walks, 1);
		} else if (st.corrupt) {
			cp->at_read++;
			rebuilt(m, s);
		} else {
			/* Never found wrong: the same claims (a unit swapped with
			 * itself, a move undone by the next, a longer varint). */
			cp->same++;
			ck_assert(parse_payload(&bad, &a));
			decode_payload(&good, &g);
			ck_assert_uint_eq(a.kind, g.kind);
			ck_assert_uint_eq(a.ntiles, g.ntiles);
			for (uint64_t t = 0; t < a.n; t++) {
				ck_assert_msg(a.t[t].stored == g.t[t].stored && a.t[t].size == g.t[t].size &&
					      a.t[t].nchunks == g.t[t].nchunks && a.t[t].nunits == g.t[t].nunits,
					      "mutant %u: other claims for tile %llu accepted", i, (unsigned long long)t);
				ck_assert_msg(!memcmp(a.t[t].u, g.t[t].u, a.t[t].nu * sizeof(p_unit)),
					      "mutant %u: other units in tile %llu accepted", i, (unsigned long long)t);
			}
		}
		tf_index_free(s);
	}
	tf_buf_free(&good);
	tf_buf_free(&bad);
}

/* Issue 20, item 3: random mutations of valid entries, stored with valid
 * checksums: of a small file of 7 tiles (proved through the cache), and,
 * one in 20, of one of 5.3 MiB (reads of its end prove the start of tile 0
 * by headers).  Every read gives the true bytes or an error, never a wrong
 * byte (read_range); a mutant found wrong is gone from the store and the
 * next open walks and reads right; one never found wrong makes the same
 * claims as the true entry.  TF_INDEX_MUTATIONS (default 100; the long
 * mode, tests/robust/README: 1000) and TF_INDEX_SEED. */
START_TEST(test_mutated_entries)
{
	static const size_t small[] = { 65536 * 3 + 100, 0, 5000, 65536 * 2, 12, 65536 + 7, 1 };
	static const size_t big[] = { 65536 * 80 + 100, 0, 5000, 65536 * 4, 12, 65536 + 7, 1 };
	const char *env = getenv("TF_INDEX_MUTATIONS"), *seed = getenv("TF_INDEX_SEED");
	unsigned n = env ? (unsigned)strtoul(env, NULL, 10) : 100;
	campaign cp = { 0 };
	made m;

	rnd_state = seed ? strtoull(seed, NULL, 10) : 20;
	rnd_state = rnd_state ? rnd_state : 1;
	make_file("m.tdb", small, sizeof(small) / sizeof(small[0]), 5, &m);
	mutate_file(&m, n - n / 20, &cp);
	free(m.plain);
	make_file("big.tdb", big, sizeof(big) / sizeof(big[0]), 6, &m);
	mutate_file(&m, n / 20, &cp);
	free(m.plain);
	printf("index mutations: %u (seed %s): %u rejected at open, %u at a read, %u the same claims; "
	       "%u reads, %u failed, 0 wrong bytes\n", cp.mutants, seed ? seed : "20", cp.at_open, cp.at_read,
	       cp.same, cp.reads, cp.failed_reads);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("index");
	TCase *tc = tcase_create("store");

	tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_stale);
	tcase_add_test(tc, test_corrupt);
	tcase_add_test(tc, test_truncated);
	tcase_add_test(tc, test_format_version);
	tcase_add_test(tc, test_foreign);
	tcase_add_test(tc, test_lru_bound);
	tcase_add_test(tc, test_concurrent_writers);
	tcase_add_test(tc, test_unusable_dir);
	tcase_add_test(tc, test_dir_ownership);
	tcase_add_test(tc, test_foreign_files);
	tcase_add_test(tc, test_s3_keyed_by_endpoint);
	tcase_add_test(tc, test_published_key);
	tcase_add_test(tc, test_published_fetch);
	suite_add_tcase(s, tc);
	tc = tcase_create("files");
	tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_file_restored);
	tcase_add_test(tc, test_header_walk_same);
	tcase_add_test(tc, test_file_rewritten_in_place);
	tcase_add_test(tc, test_damaged_payloads);
	tcase_add_test(tc, test_forged_size);
	tcase_add_test(tc, test_far_proof);
	tcase_add_test(tc, test_concurrent_proof);
	tcase_add_test(tc, test_mutated_entries);
	suite_add_tcase(s, tc);
	return s;
}

TF_TEST_MAIN(suite)
