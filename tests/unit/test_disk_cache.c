/*
 * test_disk_cache.c - sources/disk_cache: blocks round trip; a flipped
 * byte, a truncated file, another key's block under this key's name and a
 * temporary are misses, never wrong bytes; eviction keeps usage within its
 * bound, least recently used first; the free-space floor stops writes; a
 * later cache learns the blocks an earlier one left, without a scan at
 * open; directories others may enter or own are refused; two caches on one
 * directory, from several threads at once, serve only right bytes.
 */
#include "tf_test.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sources/disk_cache.h"
#include "config/tf_s3.h"

#define TP 256	/* test paths: short, in /tmp */

#define B TF_DISK_CACHE_BLOCK
#define HDR 36
#define FILE_SIZE(key, len) (HDR + strlen(key) + (len))

static char dir[64];

static void setup(void)
{
	strcpy(dir, "/tmp/tf_dc.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[TP + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* A block's bytes: a function of key, index and position. */
static void fill(uint8_t *p, size_t n, const char *key, uint64_t idx)
{
	uint32_t h = 2166136261u;

	for (const char *k = key; *k; k++)
		h = (h ^ (uint8_t)*k) * 16777619u;
	h ^= (uint32_t)idx * 0x9e3779b9u;
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((h >> (i % 4 * 8)) + i * 7 + i / 4096);
}

static tf_disk_cache *open_ok(uint64_t max, uint64_t min_free)
{
	tf_disk_cache *dc;
	tf_error err;

	ck_assert_int_eq(tf_disk_cache_open(dir, max, min_free, &dc, &err), TF_OK);
	return dc;
}

/* Where block idx of key lives: found by the only file of its fan-out
 * directories whose name ends in ".idx" after a put into an empty cache. */
static void block_path(const char *key, uint64_t idx, char *out)
{
	/* The name is public knowledge: sha256("tilefs-dc-1\n" key), hex. */
	char cmd[TP + 256];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "printf 'tilefs-dc-1\\n%%s' '%s' | sha256sum", key);
	ck_assert_ptr_nonnull(f = popen(cmd, "r"));
	char hex[65] = { 0 };
	ck_assert_int_eq(fscanf(f, "%64s", hex), 1);
	pclose(f);
	snprintf(out, TP, "%s/v1/%.2s/%s.%llu", dir, hex, hex, (unsigned long long)idx);
}

static bool get_checked(tf_disk_cache *dc, const char *key, uint64_t idx, size_t len)
{
	uint8_t *got = malloc(len), *want = malloc(len);
	bool hit = tf_disk_cache_get(dc, key, idx, got, len);

	fill(want, len, key, idx);
	if (hit)
		ck_assert(!memcmp(got, want, len));
	free(got), free(want);
	return hit;
}

static void put_filled(tf_disk_cache *dc, const char *key, uint64_t idx, size_t len)
{
	uint8_t *p = malloc(len);

	fill(p, len, key, idx);
	tf_disk_cache_put(dc, key, idx, p, len);
	free(p);
}

START_TEST(test_roundtrip)
{
	tf_disk_cache *dc = open_ok((uint64_t)1 << 30, 0);
	tf_disk_cache_stats s;
	char path[TP];
	struct stat st;

	put_filled(dc, "s3://h/b/k\n\"e1\"\n2500000", 0, B);
	put_filled(dc, "s3://h/b/k\n\"e1\"\n2500000", 1, B);
	put_filled(dc, "s3://h/b/k\n\"e1\"\n2500000", 2, 2500000 - 2 * B);
	ck_assert(get_checked(dc, "s3://h/b/k\n\"e1\"\n2500000", 0, B));
	ck_assert(get_checked(dc, "s3://h/b/k\n\"e1\"\n2500000", 2, 2500000 - 2 * B));
	ck_assert(get_checked(dc, "s3://h/b/k\n\"e1\"\n2500000", 1, B));
	/* another ETag, another block, a wrong length: misses */
	ck_assert(!get_checked(dc, "s3://h/b/k\n\"e2\"\n2500000", 0, B));
	ck_assert(!get_checked(dc, "s3://h/b/k\n\"e1\"\n2500000", 3, B));
	ck_assert(!get_checked(dc, "s3://h/b/k\n\"e1\"\n2500000", 0, B - 1));	/* deleted as bad */
	ck_assert(!get_checked(dc, "s3://h/b/k\n\"e1\"\n2500000", 0, B));
	tf_disk_cache_get_stats(dc, &s);
	ck_assert_uint_eq(s.hits, 3);
	ck_assert_uint_eq(s.misses, 4);
	ck_assert_uint_eq(s.read_bytes, 2500000);
	ck_assert_uint_eq(s.written_bytes, 2500000);
	ck_assert_uint_eq(s.blocks, 2);
	/* files and directories are the user's alone */
	block_path("s3://h/b/k\n\"e1\"\n2500000", 1, path);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	ck_assert_uint_eq(st.st_size, FILE_SIZE("s3://h/b/k\n\"e1\"\n2500000", B));
	*strrchr(path, '/') = 0;
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0700);
	tf_disk_cache_free(dc);
}
END_TEST

static void flip_at(const char *path, off_t at)
{
	int fd = open(path, O_RDWR);
	uint8_t c;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &c, 1, at), 1);
	c ^= 0x10;
	ck_assert_int_eq(pwrite(fd, &c, 1, at), 1);
	close(fd);
}

/* Each damage is a miss that deletes the file; the block put again reads. */
START_TEST(test_damage_is_a_miss)
{
	const char *key = "s3://h/b/damaged\n\"e\"\n3145728";
	tf_disk_cache *dc = open_ok((uint64_t)1 << 30, 0);
	off_t data = (off_t)(HDR + strlen(key));
	off_t where[] = { data + 12345, data + B - 1, 20 /* the index */, 9 /* the version */,
			  HDR + 3 /* the key */, 33 /* the header's crc */, 29 /* the data's crc */ };
	char path[TP];

	block_path(key, 1, path);
	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		put_filled(dc, key, 1, B);
		ck_assert(get_checked(dc, key, 1, B));
		flip_at(path, where[i]);
		ck_assert(!get_checked(dc, key, 1, B));
		ck_assert_int_eq(access(path, F_OK), -1);	/* deleted */
	}
	/* truncated: a data byte short, or within the header */
	for (off_t len = data + B - 1; len > 0; len = len > 40 ? 20 : 0) {
		put_filled(dc, key, 1, B);
		ck_assert_int_eq(truncate(path, len), 0);
		ck_assert(!get_checked(dc, key, 1, B));
		ck_assert_int_eq(access(path, F_OK), -1);
	}
	/* one byte too many */
	put_filled(dc, key, 1, B);
	int fd = open(path, O_WRONLY | O_APPEND);
	ck_assert_int_eq(write(fd, "x", 1), 1);
	close(fd);
	ck_assert(!get_checked(dc, key, 1, B));
	tf_disk_cache_stats s;
	tf_disk_cache_get_stats(dc, &s);
	ck_assert_uint_eq(s.bad, 10);
	ck_assert_uint_eq(s.hits, 7);
	tf_disk_cache_free(dc);
}
END_TEST

/* Another object's block under this key's name (a hash collision, or a
 * file moved): the key in its header differs, so a miss. */
START_TEST(test_wrong_key)
{
	const char *a = "s3://h/b/a\n\"e\"\n1048576", *b = "s3://h/b/b\n\"e\"\n1048576";
	const char *c = "s3://h/b/c\n\"e\"\n1048576";	/* as long as a */
	tf_disk_cache *dc = open_ok((uint64_t)1 << 30, 0);
	char pa[TP], pb[TP], pc[TP], cmd[8 * TP];

	block_path(a, 0, pa), block_path(b, 0, pb), block_path(c, 0, pc);
	put_filled(dc, a, 0, B);
	snprintf(cmd, sizeof(cmd), "mkdir -p $(dirname %s) $(dirname %s) && cp %s %s && cp %s %s", pb, pc, pa, pb,
		 pa, pc);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert(!get_checked(dc, b, 0, B));
	ck_assert(!get_checked(dc, c, 0, B));
	ck_assert(get_checked(dc, a, 0, B));
	/* a's block under index 1's name: the index differs */
	block_path(a, 1, pb);
	snprintf(cmd, sizeof(cmd), "cp %s %s", pa, pb);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert(!get_checked(dc, a, 1, B));
	tf_disk_cache_free(dc);
}
END_TEST

/* A temporary (a writer killed before its rename) is never read; the walk
 * reclaims one older than an hour and leaves a young one (being written). */
START_TEST(test_temporaries)
{
	const char *key = "s3://h/b/t\n\"e\"\n1048576";
	tf_disk_cache *dc = open_ok((uint64_t)1 << 30, 0);
	char path[TP], old[TP + 16], young[TP + 16], cmd[3 * TP];
	struct timespec t[2] = { { .tv_sec = 1000 }, { .tv_sec = 1000 } };
	tf_disk_cache_stats s;

	block_path(key, 0, path);
	put_filled(dc, key, 0, B);
	strcpy(old, path), strcpy(strrchr(old, '/'), "/.tmp.1.old");
	strcpy(young, path), strcpy(strrchr(young, '/'), "/.tmp.1.young");
	snprintf(cmd, sizeof(cmd), "mv %s %s && cp %s %s", path, old, old, young);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(utimensat(AT_FDCWD, old, t, 0), 0);
	tf_disk_cache_free(dc);
	dc = open_ok((uint64_t)1 << 30, 0);
	ck_assert(!get_checked(dc, key, 0, B));
	tf_disk_cache_settle(dc);
	ck_assert_int_eq(access(old, F_OK), -1);
	ck_assert_int_eq(access(young, F_OK), 0);
	tf_disk_cache_get_stats(dc, &s);
	ck_assert_uint_eq(s.blocks, 0);
	ck_assert_uint_eq(s.usage, 0);
	tf_disk_cache_free(dc);
}
END_TEST

static char *key_n(char *buf, unsigned i)
{
	sprintf(buf, "s3://h/b/obj%u\n\"e\"\n%u", i, (unsigned)B);
	return buf;
}

START_TEST(test_eviction_bound)
{
	uint64_t file = FILE_SIZE("s3://h/b/obj10\n\"e\"\n1048576", B);
	tf_disk_cache *dc = open_ok(4 * file + 100, 0);
	tf_disk_cache_stats s;
	char k[64];

	for (unsigned i = 10; i < 14; i++)
		put_filled(dc, key_n(k, i), 0, B);
	ck_assert(get_checked(dc, key_n(k, 10), 0, B));	/* 11 is now the least recently used */
	put_filled(dc, key_n(k, 14), 0, B);
	ck_assert(!get_checked(dc, key_n(k, 11), 0, B));
	ck_assert(get_checked(dc, key_n(k, 10), 0, B));
	ck_assert(get_checked(dc, key_n(k, 14), 0, B));
	for (unsigned i = 15; i < 60; i++) {
		put_filled(dc, key_n(k, i), 0, B);
		tf_disk_cache_get_stats(dc, &s);
		ck_assert_uint_le(s.usage, 4 * file + 100);
	}
	ck_assert(get_checked(dc, key_n(k, 59), 0, B));
	tf_disk_cache_get_stats(dc, &s);
	ck_assert_uint_eq(s.blocks, 4);
	ck_assert_uint_eq(s.evictions, 60 - 10 - 4);
	/* the disk agrees: four block files */
	char cmd[TP + 64];
	snprintf(cmd, sizeof(cmd), "test $(find %s/v1 -type f | wc -l) -eq 4", dir);
	ck_assert_int_eq(system(cmd), 0);
	tf_disk_cache_free(dc);
}
END_TEST

/* A later cache learns what an earlier one left (no scan at open: the
 * walk runs in the background) and evicts it down to its own bound. */
START_TEST(test_learned_later)
{
	uint64_t file = FILE_SIZE("s3://h/b/obj10\n\"e\"\n1048576", B);
	tf_disk_cache *dc = open_ok((uint64_t)1 << 30, 0);
	tf_disk_cache_stats s;
	char k[64];

	for (unsigned i = 10; i < 16; i++)
		put_filled(dc, key_n(k, i), 0, B);
	tf_disk_cache_free(dc);
	dc = open_ok((uint64_t)1 << 30, 0);
	tf_disk_cache_get_stats(dc, &s);
	ck_assert_uint_eq(s.blocks, 0);		/* nothing read at open */
	tf_disk_cache_settle(dc);
	tf_disk_cache_get_stats(dc, &s);
	ck_assert_uint_eq(s.blocks, 6);
	ck_assert_uint_eq(s.usage, 6 * file);
	tf_disk_cache_free(dc);
	dc = open_ok(2 * file, 0);
	tf_disk_cache_settle(dc);
	tf_disk_cache_get_stats(dc, &s);
	ck_assert_uint_eq(s.blocks, 2);
	ck_assert_uint_eq(s.evictions, 4);
	tf_disk_cache_free(dc);
}
END_TEST

START_TEST(test_free_floor)
{
	tf_disk_cache *dc = open_ok((uint64_t)1 << 30, (uint64_t)1 << 62);
	tf_disk_cache_stats s;
	char k[64];

	put_filled(dc, key_n(k, 1), 0, B);
	ck_assert(!get_checked(dc, key_n(k, 1), 0, B));
	tf_disk_cache_get_stats(dc, &s);
	ck_assert_uint_eq(s.skipped, 1);
	ck_assert_uint_eq(s.written_bytes, 0);
	tf_disk_cache_free(dc);
	/* a floor reached with blocks kept: they are evicted */
	dc = open_ok((uint64_t)1 << 30, 0);
	put_filled(dc, key_n(k, 1), 0, B);
	tf_disk_cache_free(dc);
	dc = open_ok((uint64_t)1 << 30, (uint64_t)1 << 62);
	tf_disk_cache_settle(dc);
	tf_disk_cache_get_stats(dc, &s);
	ck_assert_uint_eq(s.blocks, 0);
	ck_assert_uint_eq(s.evictions, 1);
	tf_disk_cache_free(dc);
}
END_TEST

START_TEST(test_refused_dirs)
{
	tf_disk_cache *dc;
	tf_error err;
	char sub[TP + 8];
	struct stat st;

	/* made 0700 when missing */
	snprintf(sub, sizeof(sub), "%s/new", dir);
	ck_assert_int_eq(tf_disk_cache_open(sub, B * 4, 0, &dc, &err), TF_OK);
	tf_disk_cache_free(dc);
	ck_assert_int_eq(stat(sub, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0700);
	/* group or others let in */
	ck_assert_int_eq(chmod(sub, 0750), 0);
	ck_assert_int_eq(tf_disk_cache_open(sub, B * 4, 0, &dc, &err), TF_E_ACCESS);
	ck_assert_ptr_null(dc);
	ck_assert_ptr_nonnull(strstr(err.msg, "0750"));
	ck_assert_ptr_nonnull(strstr(err.msg, sub));
	ck_assert_int_eq(chmod(sub, 0701), 0);
	ck_assert_int_eq(tf_disk_cache_open(sub, B * 4, 0, &dc, &err), TF_E_ACCESS);
	/* another owner */
	ck_assert_int_eq(chmod(sub, 0700), 0);
	if (geteuid() == 0) {
		ck_assert_int_eq(chown(sub, 65534, 65534), 0);
		ck_assert_int_eq(tf_disk_cache_open(sub, B * 4, 0, &dc, &err), TF_E_ACCESS);
		ck_assert_ptr_nonnull(strstr(err.msg, "owned by uid 65534"));
		ck_assert_int_eq(chown(sub, 0, 0), 0);
	} else {
		ck_assert_int_eq(tf_disk_cache_open("/", B * 4, 0, &dc, &err), TF_E_ACCESS);
		ck_assert_ptr_nonnull(strstr(err.msg, "owned by uid 0"));
	}
	/* v1 inside, opened to others: refused too */
	snprintf(sub, sizeof(sub), "%s/new/v1", dir);
	ck_assert_int_eq(chmod(sub, 0777), 0);
	snprintf(sub, sizeof(sub), "%s/new", dir);
	ck_assert_int_eq(tf_disk_cache_open(sub, B * 4, 0, &dc, &err), TF_E_ACCESS);
	/* no parent, a file */
	snprintf(sub, sizeof(sub), "%s/no/such", dir);
	ck_assert_int_eq(tf_disk_cache_open(sub, B * 4, 0, &dc, &err), TF_E_IO);
	snprintf(sub, sizeof(sub), "%s/file", dir);
	tf_test_write_file(sub, "x", 1);
	ck_assert_int_eq(tf_disk_cache_open(sub, B * 4, 0, &dc, &err), TF_E_IO);
}
END_TEST

/* A cache used before a fork: off in the child (its lock and condition
 * may be held by threads the fork did not copy), which frees it without
 * joining the parent's thread; the parent's goes on. */
START_TEST(test_after_fork)
{
	tf_disk_cache *dc = open_ok((uint64_t)1 << 30, 0);
	uint8_t *got = malloc(B), *want = malloc(B);
	int status;
	char k[64];
	pid_t p;

	int fds[2];
	char said = 0;

	put_filled(dc, key_n(k, 1), 0, B);	/* the walker starts here */
	tf_disk_cache_settle(dc);
	ck_assert_int_eq(pipe(fds), 0);
	if ((p = fork()) == 0) {
		tf_disk_cache_stats s;
		put_filled(dc, key_n(k, 2), 0, B);
		tf_disk_cache_settle(dc);
		tf_disk_cache_get_stats(dc, &s);
		bool ok = !tf_disk_cache_get(dc, key_n(k, 1), 0, got, B) && s.written_bytes == 0;
		tf_disk_cache_free(dc);
		ck_assert_int_eq(write(fds[1], ok ? "y" : "n", 1), 1);
		/* Gone without exit's checks: the parent's walker's stack, which
		 * the fork copied, is not the child's leak (valgrind). */
		raise(SIGKILL);
	}
	close(fds[1]);
	ck_assert_int_eq(waitpid(p, &status, 0), p);
	ck_assert_int_eq(read(fds[0], &said, 1), 1);
	close(fds[0]);
	ck_assert_int_eq(said, 'y');
	ck_assert(get_checked(dc, key_n(k, 1), 0, B));
	ck_assert(!get_checked(dc, key_n(k, 2), 0, B));
	put_filled(dc, key_n(k, 2), 0, B);
	ck_assert(get_checked(dc, key_n(k, 2), 0, B));
	free(got), free(want);
	tf_disk_cache_free(dc);
}
END_TEST

/* ---- two caches, one directory, threads ------------------------------------------------------------ */

typedef struct worker {
	tf_disk_cache *dc;
	unsigned seed;
	unsigned hits, puts;
	pthread_t th;
} worker;

static void *worker_main(void *arg)
{
	worker *w = arg;
	size_t len = B / 8;
	uint8_t *got = malloc(len), *want = malloc(len);
	char k[64];

	for (int n = 0; n < 400; n++) {
		unsigned i = (unsigned)rand_r(&w->seed) % 6, idx = (unsigned)rand_r(&w->seed) % 4;
		sprintf(k, "s3://h/b/shared%u\n\"e\"\n%zu", i, 4 * len);
		fill(want, len, k, idx);
		if (tf_disk_cache_get(w->dc, k, idx, got, len)) {
			ck_assert(!memcmp(got, want, len));
			w->hits++;
		} else {
			tf_disk_cache_put(w->dc, k, idx, want, len);
			w->puts++;
		}
	}
	free(got), free(want);
	return NULL;
}

START_TEST(test_two_caches_threads)
{
	/* room for 8 of the 24 blocks: evictions race with reads */
	uint64_t bound = 8 * FILE_SIZE("s3://h/b/shared0\n\"e\"\n524288", B / 8);
	tf_disk_cache *a = open_ok(bound, 0), *b = open_ok(bound, 0);
	worker w[4];
	unsigned hits = 0;

	for (unsigned i = 0; i < 4; i++) {
		w[i] = (worker){ .dc = i % 2 ? b : a, .seed = 7 + i };
		ck_assert_int_eq(pthread_create(&w[i].th, NULL, worker_main, &w[i]), 0);
	}
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(w[i].th, NULL);
		hits += w[i].hits;
	}
	ck_assert_uint_gt(hits, 0);
	tf_disk_cache_stats sa, sb;
	tf_disk_cache_get_stats(a, &sa);
	tf_disk_cache_get_stats(b, &sb);
	ck_assert_uint_eq(sa.bad + sb.bad, 0);
	ck_assert_uint_eq(sa.errors + sb.errors, 0);
	tf_disk_cache_free(a);
	tf_disk_cache_free(b);
}
END_TEST

/* The [s3] settings: cache_dir relative to the configuration's directory,
 * sizes with suffixes, bounds refused with the key's name. */
START_TEST(test_settings)
{
	tf_s3_settings s, c;
	tf_error err;

	tf_s3_settings_init(&s);
	ck_assert_ptr_null(s.cache_dir);
	ck_assert_uint_eq(s.cache_dir_size, (uint64_t)1 << 30);
	ck_assert_uint_eq(s.cache_dir_min_free, (uint64_t)1 << 30);
	ck_assert_int_eq(tf_s3_settings_set(&s, "cache_dir", "dc", "/etc/tilefs", &err), TF_OK);
	ck_assert_str_eq(s.cache_dir, "/etc/tilefs/dc");
	ck_assert_int_eq(tf_s3_settings_set(&s, "cache_dir", "/var/cache/x", "/etc/tilefs", &err), TF_OK);
	ck_assert_str_eq(s.cache_dir, "/var/cache/x");
	ck_assert_int_eq(tf_s3_settings_set(&s, "cache_dir", "", NULL, &err), TF_E_INVAL);
	ck_assert_int_eq(tf_s3_settings_set(&s, "cache_dir_size", "20G", NULL, &err), TF_OK);
	ck_assert_uint_eq(s.cache_dir_size, (uint64_t)20 << 30);
	ck_assert_int_eq(tf_s3_settings_set(&s, "cache_dir_size", "2T", NULL, &err), TF_OK);
	ck_assert_uint_eq(s.cache_dir_size, (uint64_t)2 << 40);
	ck_assert_int_eq(tf_s3_settings_set(&s, "cache_dir_size", "1M", NULL, &err), TF_E_INVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "cache_dir_size"));
	ck_assert_int_eq(tf_s3_settings_set(&s, "cache_dir_size", "-1", NULL, &err), TF_E_INVAL);
	ck_assert_int_eq(tf_s3_settings_set(&s, "cache_dir_min_free", "0", NULL, &err), TF_OK);
	ck_assert_uint_eq(s.cache_dir_min_free, 0);
	ck_assert_int_eq(tf_s3_settings_set(&s, "cache_dir_min_free", "5X", NULL, &err), TF_E_INVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "cache_dir_min_free"));
	ck_assert_int_eq(tf_s3_settings_copy(&c, &s, &err), TF_OK);
	ck_assert_str_eq(c.cache_dir, "/var/cache/x");
	ck_assert_ptr_ne(c.cache_dir, s.cache_dir);
	tf_s3_settings_clear(&c);
	tf_s3_settings_clear(&s);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("disk_cache");
	TCase *t = tcase_create("disk_cache");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_roundtrip);
	tcase_add_test(t, test_damage_is_a_miss);
	tcase_add_test(t, test_wrong_key);
	tcase_add_test(t, test_temporaries);
	tcase_add_test(t, test_eviction_bound);
	tcase_add_test(t, test_learned_later);
	tcase_add_test(t, test_free_floor);
	tcase_add_test(t, test_refused_dirs);
	tcase_add_test(t, test_after_fork);
	tcase_add_test(t, test_settings);
	tcase_add_test(t, test_two_caches_threads);
	suite_add_tcase(s, t);
	return s;
}

TF_TEST_MAIN(suite)
