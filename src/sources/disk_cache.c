/*
 * disk_cache.c - blocks of objects in files of a local directory (see
 * disk_cache.h for the contract and the file format).
 *
 * What this process knows of the directory is a table of blocks (digest,
 * index, file size, last use), filled by its own puts and hits and by the
 * background walk; usage is its sum.  Eviction takes the least recently
 * used of EVICT_SAMPLES random entries (redis's approximated LRU): no list
 * to keep in order, and blocks learned from a walk carry their file's mtime
 * as last use.
 *
 * The data's checksum is zlib's crc32: 2.0-2.2 GB/s a core here against
 * 0.6 GB/s for libcrypto's SHA-256 (1 MiB buffers, 512 times), and it only
 * has to catch damage: the name and key are what keep objects apart.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <zlib.h>

#include "sources/disk_cache.h"
#include "util/tf_bytes.h"

#define MAGIC "tfdcblk\n"
#define FORMAT_VERSION 1
#define HDR 36			/* magic 8, version 4, key length 4, index 8, length 4, data crc 4, header crc 4 */
#define NONE UINT32_MAX
#define EVICT_SAMPLES 8
#define TOUCH_AFTER_S 60	/* a hit re-stamps a block's mtime at most this often */
#define TMP_STALE_S 3600	/* a temporary this old is a killed writer's */
#define RESCAN_S 600
#define NAME_MAX_LEN 96		/* "HH/" 64 hex "." 20 digits */

typedef struct dc_entry {
	uint8_t d[32];
	uint64_t idx;
	int64_t used;		/* ns, CLOCK_REALTIME (comparable with mtimes) */
	uint32_t size;		/* of the file */
	uint32_t hnext;
} dc_entry;

struct tf_disk_cache {
	int dir;			/* DIR/v1 */
	uint64_t max_bytes, min_free;
	uint64_t tmp_tag;		/* random: temporaries of two processes never share a name */
	atomic_uint_fast64_t tmp_seq;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	dc_entry *ent;			/* mu: the table */
	uint32_t n, cap;
	uint32_t *heads, nheads;
	uint64_t rng;
	tf_disk_cache_stats st;		/* mu */
	bool started, stop;		/* mu */
	atomic_int started_in;		/* the process whose thread th is, 0 before */
	pthread_t th;
};

/* ---- names and headers --------------------------------------------------------------------- */

static void digest_of(const char *key, uint8_t d[32])
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	unsigned n = 0;

	/* The format's version is hashed in: another version's files are
	 * other names (mountpoint-s3 hashes its CACHE_VERSION in too). */
	if (!c || !EVP_DigestInit_ex(c, EVP_sha256(), NULL) || !EVP_DigestUpdate(c, "tilefs-dc-1\n", 12) ||
	    !EVP_DigestUpdate(c, key, strlen(key)) || !EVP_DigestFinal_ex(c, d, &n))
		memset(d, 0, 32);	/* a zero name: still checked by the key in the header */
	EVP_MD_CTX_free(c);
}

static void name_of(const uint8_t d[32], uint64_t idx, char *buf)
{
	static const char hex[] = "0123456789abcdef";
	char *p = buf;

	*p++ = hex[d[0] >> 4], *p++ = hex[d[0] & 15], *p++ = '/';
	for (int i = 0; i < 32; i++)
		*p++ = hex[d[i] >> 4], *p++ = hex[d[i] & 15];
	snprintf(p, 24, ".%" PRIu64, idx);
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* "<64 hex>.<index>" -> digest and index; false for anything else. */
static bool parse_name(const char *s, uint8_t d[32], uint64_t *idx)
{
	char *end;

	for (int i = 0; i < 32; i++) {
		int hi = hexval(s[2 * i]), lo = hi < 0 ? -1 : hexval(s[2 * i + 1]);
		if (lo < 0)
			return false;
		d[i] = (uint8_t)(hi << 4 | lo);
	}
	if (s[64] != '.' || !(s[65] >= '0' && s[65] <= '9'))
		return false;
	errno = 0;
	*idx = strtoull(s + 65, &end, 10);
	return !errno && !*end;
}

static uint32_t crc_of(const void *p, size_t n)
{
	return (uint32_t)crc32_z(crc32_z(0, Z_NULL, 0), p, n);
}

/* The header and key of a block (h holds HDR + klen bytes). */
static void make_header(uint8_t *h, const char *key, size_t klen, uint64_t idx, const void *data, size_t len)
{
	memcpy(h, MAGIC, 8);
	tf_put_le32(h + 8, FORMAT_VERSION);
	tf_put_le32(h + 12, (uint32_t)klen);
	tf_put_le64(h + 16, idx);
	tf_put_le32(h + 24, (uint32_t)len);
	tf_put_le32(h + 28, crc_of(data, len));
	memcpy(h + HDR, key, klen);
	tf_put_le32(h + 32, (uint32_t)crc32_z(crc_of(h, 32), h + HDR, klen));
}

/* Whether h (HDR + klen bytes read) is block idx of key, len bytes. */
static bool header_ok(const uint8_t *h, const char *key, size_t klen, uint64_t idx, size_t len)
{
	return !memcmp(h, MAGIC, 8) && tf_le32(h + 8) == FORMAT_VERSION && tf_le32(h + 12) == klen && tf_le64(h + 16) == idx &&
	       tf_le32(h + 24) == len && !memcmp(h + HDR, key, klen) &&
	       tf_le32(h + 32) == (uint32_t)crc32_z(crc_of(h, 32), h + HDR, klen);
}

static int64_t now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- the table (mu held) ------------------------------------------------------------------- */

static uint32_t bucket_of(const tf_disk_cache *dc, const uint8_t d[32], uint64_t idx)
{
	uint64_t h;

	memcpy(&h, d, 8);
	return (uint32_t)((h ^ (idx * 0x9e3779b97f4a7c15u)) % dc->nheads);
}

static uint32_t find(const tf_disk_cache *dc, const uint8_t d[32], uint64_t idx)
{
	if (!dc->nheads)
		return NONE;
	for (uint32_t i = dc->heads[bucket_of(dc, d, idx)]; i != NONE; i = dc->ent[i].hnext)
		if (dc->ent[i].idx == idx && !memcmp(dc->ent[i].d, d, 32))
			return i;
	return NONE;
}

static bool rehash(tf_disk_cache *dc, uint32_t nheads)
{
	uint32_t *h = malloc(nheads * sizeof(*h));

	if (!h)
		return false;
	free(dc->heads);
	dc->heads = h, dc->nheads = nheads;
	for (uint32_t i = 0; i < nheads; i++)
		h[i] = NONE;
	for (uint32_t i = 0; i < dc->n; i++) {
		uint32_t b = bucket_of(dc, dc->ent[i].d, dc->ent[i].idx);
		dc->ent[i].hnext = h[b], h[b] = i;
	}
	return true;
}

/* Record a block file of size bytes used at `used` (a known one is updated:
 * an older stamp never moves it back). */
static void note(tf_disk_cache *dc, const uint8_t d[32], uint64_t idx, uint32_t size, int64_t used)
{
	uint32_t i = find(dc, d, idx), b;

	if (i != NONE) {
		dc->st.usage = dc->st.usage - dc->ent[i].size + size;
		dc->ent[i].size = size;
		if (used > dc->ent[i].used)
			dc->ent[i].used = used;
		return;
	}
	if (dc->n == dc->cap) {
		uint32_t cap = dc->cap ? dc->cap * 2 : 256;
		dc_entry *e = cap > dc->cap ? realloc(dc->ent, cap * sizeof(*e)) : NULL;
		if (!e)
			return;	/* not known: it will be learned again by a walk */
		dc->ent = e, dc->cap = cap;
	}
	if (dc->n >= dc->nheads && !rehash(dc, dc->nheads ? dc->nheads * 2 : 256))
		return;
	i = dc->n++;
	memcpy(dc->ent[i].d, d, 32);
	dc->ent[i].idx = idx, dc->ent[i].size = size, dc->ent[i].used = used;
	b = bucket_of(dc, d, idx);
	dc->ent[i].hnext = dc->heads[b], dc->heads[b] = i;
	dc->st.usage += size;
	dc->st.blocks = dc->n;
}

static void unchain(tf_disk_cache *dc, uint32_t i)
{
	uint32_t *p = &dc->heads[bucket_of(dc, dc->ent[i].d, dc->ent[i].idx)];

	while (*p != i)
		p = &dc->ent[*p].hnext;
	*p = dc->ent[i].hnext;
}

/* Forget entry i: the last entry moves into its place. */
static void forget_at(tf_disk_cache *dc, uint32_t i)
{
	uint32_t last = dc->n - 1;

	unchain(dc, i);
	dc->st.usage -= dc->ent[i].size;
	if (i != last) {
		unchain(dc, last);
		dc->ent[i] = dc->ent[last];
		uint32_t b = bucket_of(dc, dc->ent[i].d, dc->ent[i].idx);
		dc->ent[i].hnext = dc->heads[b], dc->heads[b] = i;
	}
	dc->n--;
	dc->st.blocks = dc->n;
}

static void forget(tf_disk_cache *dc, const uint8_t d[32], uint64_t idx)
{
	uint32_t i = find(dc, d, idx);

	if (i != NONE)
		forget_at(dc, i);
}

static uint64_t next_rand(tf_disk_cache *dc)
{
	/* xorshift64*: sampling, not security */
	dc->rng ^= dc->rng >> 12, dc->rng ^= dc->rng << 25, dc->rng ^= dc->rng >> 27;
	return dc->rng * 0x2545f4914f6cdd1dULL;
}

/* The least recently used of a few random entries (all if few), or NONE. */
static uint32_t victim(tf_disk_cache *dc)
{
	uint32_t best = NONE;

	for (uint32_t k = 0; k < EVICT_SAMPLES && k < dc->n; k++) {
		uint32_t i = dc->n <= EVICT_SAMPLES ? k : (uint32_t)(next_rand(dc) % dc->n);
		if (best == NONE || dc->ent[i].used < dc->ent[best].used)
			best = i;
	}
	return best;
}

/* ---- bounds -------------------------------------------------------------------------------- */

static uint64_t free_bytes(const tf_disk_cache *dc)
{
	struct statvfs v;

	return fstatvfs(dc->dir, &v) == 0 ? (uint64_t)v.f_bavail * v.f_frsize : UINT64_MAX;
}

/* Evict until usage is within max_bytes and free space above min_free (and
 * extra bytes more for a put about to be made), or nothing known is left. */
static void enforce(tf_disk_cache *dc, uint64_t extra)
{
	for (;;) {
		char name[NAME_MAX_LEN];
		uint32_t i;
		bool over;

		pthread_mutex_lock(&dc->mu);
		over = dc->st.usage + extra > dc->max_bytes;
		pthread_mutex_unlock(&dc->mu);
		if (!over && free_bytes(dc) >= dc->min_free + extra)
			return;
		pthread_mutex_lock(&dc->mu);
		if ((i = victim(dc)) == NONE) {
			pthread_mutex_unlock(&dc->mu);
			return;
		}
		name_of(dc->ent[i].d, dc->ent[i].idx, name);
		forget_at(dc, i);
		dc->st.evictions++;
		pthread_mutex_unlock(&dc->mu);
		/* Gone already (another mount evicted it) is as good. */
		if (unlinkat(dc->dir, name, 0) != 0 && errno != ENOENT) {
			pthread_mutex_lock(&dc->mu);
			dc->st.errors++;
			pthread_mutex_unlock(&dc->mu);
		}
	}
}

/* ---- the background walk ------------------------------------------------------------------- */

static bool stopping(tf_disk_cache *dc)
{
	bool s;

	pthread_mutex_lock(&dc->mu);
	s = dc->stop;
	pthread_mutex_unlock(&dc->mu);
	return s;
}

/* One fan-out directory: learn its blocks, reclaim stale temporaries. */
static void walk_dir(tf_disk_cache *dc, unsigned hh)
{
	char sub[3];
	int fd;
	DIR *d;
	struct dirent *e;
	int64_t now = now_s();

	snprintf(sub, sizeof(sub), "%02x", hh);
	if ((fd = openat(dc->dir, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return;
	}
	while ((e = readdir(d))) {
		struct stat st;
		uint8_t dg[32];
		uint64_t idx;

		if (e->d_name[0] == '.' && strncmp(e->d_name, ".tmp.", 5))
			continue;
		if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
			continue;
		if (!strncmp(e->d_name, ".tmp.", 5)) {
			if (now - st.st_mtime > TMP_STALE_S)
				unlinkat(fd, e->d_name, 0);
			continue;
		}
		if (!parse_name(e->d_name, dg, &idx) || dg[0] != hh || st.st_size > (off_t)UINT32_MAX)
			continue;
		pthread_mutex_lock(&dc->mu);
		if (find(dc, dg, idx) == NONE)
			note(dc, dg, idx, (uint32_t)st.st_size, (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec);
		pthread_mutex_unlock(&dc->mu);
	}
	closedir(d);
}

static void *walker_main(void *arg)
{
	tf_disk_cache *dc = arg;

	for (;;) {
		struct timespec until;

		for (unsigned hh = 0; hh < 256 && !stopping(dc); hh++) {
			walk_dir(dc, hh);
			enforce(dc, 0);
		}
		pthread_mutex_lock(&dc->mu);
		dc->st.scanned = true;
		pthread_cond_broadcast(&dc->cv);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += RESCAN_S;
		while (!dc->stop && pthread_cond_timedwait(&dc->cv, &dc->mu, &until) != ETIMEDOUT)
			;
		if (dc->stop) {
			pthread_mutex_unlock(&dc->mu);
			return NULL;
		}
		pthread_mutex_unlock(&dc->mu);
	}
}

/* Whether this process is a child forked after the cache was first used:
 * then the cache is off here (every get a miss, every put dropped), as its
 * lock and condition may be held by threads the fork did not copy. */
static bool forked(tf_disk_cache *dc)
{
	int p = atomic_load(&dc->started_in);

	return p && p != (int)getpid();
}

/* The walker starts with the first use: a daemon forks after opening its
 * source, and fork keeps no threads. */
static void ensure_started(tf_disk_cache *dc)
{
	pthread_mutex_lock(&dc->mu);
	if (!dc->started && !dc->stop) {
		dc->started = true;
		atomic_store(&dc->started_in, (int)getpid());
		if (pthread_create(&dc->th, NULL, walker_main, dc) != 0) {
			dc->st.errors++;
			dc->st.scanned = true;	/* no walk will come */
			dc->started = false, dc->stop = true;
		}
	}
	pthread_mutex_unlock(&dc->mu);
}

/* ---- open and free ------------------------------------------------------------------------- */

static tf_status check_dir(int fd, const char *dir, tf_error *err)
{
	struct stat st;

	if (fstat(fd, &st) != 0)
		return tf_err(err, TF_E_IO, "cache_dir %s: %s", dir, strerror(errno));
	if (st.st_uid != geteuid())
		return tf_err(err, TF_E_ACCESS, "cache_dir %s: owned by uid %u, not by the mounting user (uid %u)",
			      dir, (unsigned)st.st_uid, (unsigned)geteuid());
	if (st.st_mode & 077)
		return tf_err(err, TF_E_ACCESS, "cache_dir %s: mode %04o lets group or others in; it must be 0700 "
			      "(chmod 700 %s)", dir, (unsigned)(st.st_mode & 07777), dir);
	return TF_OK;
}

static tf_status open_dirs(const char *dir, int *out, tf_error *err)
{
	int top, v1 = -1;
	tf_status rc;

	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return tf_err(err, TF_E_IO, "cache_dir %s: cannot create it: %s", dir, strerror(errno));
	if ((top = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return tf_err(err, TF_E_IO, "cache_dir %s: %s", dir, strerror(errno));
	rc = check_dir(top, dir, err);
	if (rc == TF_OK && mkdirat(top, "v1", 0700) != 0 && errno != EEXIST)
		rc = tf_err(err, TF_E_IO, "cache_dir %s: cannot create v1: %s", dir, strerror(errno));
	if (rc == TF_OK && (v1 = openat(top, "v1", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		rc = tf_err(err, TF_E_IO, "cache_dir %s/v1: %s", dir, strerror(errno));
	if (rc == TF_OK)
		rc = check_dir(v1, dir, err);
	close(top);
	if (rc != TF_OK && v1 >= 0)
		close(v1);
	*out = rc == TF_OK ? v1 : -1;
	return rc;
}

tf_status tf_disk_cache_open(const char *dir, uint64_t max_bytes, uint64_t min_free, tf_disk_cache **out,
			     tf_error *err)
{
	tf_disk_cache *dc;
	tf_status rc;

	*out = NULL;
	if (!(dc = calloc(1, sizeof(*dc))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if ((rc = open_dirs(dir, &dc->dir, err)) != TF_OK) {
		free(dc);
		return rc;
	}
	if (getrandom(&dc->tmp_tag, sizeof(dc->tmp_tag), 0) != sizeof(dc->tmp_tag))
		dc->tmp_tag = (uint64_t)now_s() ^ (uint64_t)(uintptr_t)dc;
	dc->rng = dc->tmp_tag | 1;
	atomic_init(&dc->tmp_seq, 0);
	atomic_init(&dc->started_in, 0);
	dc->max_bytes = max_bytes, dc->min_free = min_free;
	dc->st.max_bytes = max_bytes, dc->st.min_free = min_free;
	pthread_mutex_init(&dc->mu, NULL);
	pthread_cond_init(&dc->cv, NULL);
	*out = dc;
	return TF_OK;
}

void tf_disk_cache_free(tf_disk_cache *dc)
{
	bool join;

	if (!dc)
		return;
	if (forked(dc)) {	/* nothing here to stop or destroy */
		close(dc->dir);
		free(dc->ent), free(dc->heads);
		free(dc);
		return;
	}
	pthread_mutex_lock(&dc->mu);
	dc->stop = true;
	join = dc->started;
	pthread_cond_broadcast(&dc->cv);
	pthread_mutex_unlock(&dc->mu);
	if (join)
		pthread_join(dc->th, NULL);
	close(dc->dir);
	pthread_mutex_destroy(&dc->mu);
	pthread_cond_destroy(&dc->cv);
	free(dc->ent), free(dc->heads);
	free(dc);
}

/* ---- get and put --------------------------------------------------------------------------- */

static bool read_all(int fd, void *dst, size_t len, off_t at)
{
	while (len) {
		ssize_t n = pread(fd, dst, len, at);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		dst = (uint8_t *)dst + n, len -= (size_t)n, at += n;
	}
	return true;
}

static bool write_all(int fd, const void *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p = (const uint8_t *)p + n, len -= (size_t)n;
	}
	return true;
}

static void count(tf_disk_cache *dc, uint64_t *field, uint64_t n)
{
	pthread_mutex_lock(&dc->mu);
	*field += n;
	pthread_mutex_unlock(&dc->mu);
}

bool tf_disk_cache_get(tf_disk_cache *dc, const char *key, uint64_t idx, void *dst, size_t len)
{
	size_t klen = strlen(key);
	uint8_t d[32], h[HDR + TF_DISK_CACHE_KEY_MAX];
	char name[NAME_MAX_LEN];
	struct stat st;
	bool ok;
	int fd;

	if (!len || len > TF_DISK_CACHE_BLOCK || klen > TF_DISK_CACHE_KEY_MAX || forked(dc))
		return false;
	ensure_started(dc);
	digest_of(key, d);
	name_of(d, idx, name);
	if ((fd = openat(dc->dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0) {
		pthread_mutex_lock(&dc->mu);
		dc->st.misses++;
		forget(dc, d, idx);	/* evicted by another mount, if known */
		pthread_mutex_unlock(&dc->mu);
		return false;
	}
	ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == HDR + klen + len &&
	     read_all(fd, h, HDR + klen, 0) && header_ok(h, key, klen, idx, len) &&
	     read_all(fd, dst, len, (off_t)(HDR + klen)) && crc_of(dst, len) == tf_le32(h + 28);
	/* Recency for later mounts' walks, at most once a minute a block. */
	if (ok && now_s() - st.st_mtime > TOUCH_AFTER_S)
		futimens(fd, NULL);
	close(fd);
	pthread_mutex_lock(&dc->mu);
	if (ok) {
		dc->st.hits++, dc->st.read_bytes += len;
		note(dc, d, idx, (uint32_t)st.st_size, now_ns());
	} else {
		dc->st.misses++, dc->st.bad++;
		forget(dc, d, idx);
	}
	pthread_mutex_unlock(&dc->mu);
	/* A file that fails a check is never trusted again.  (Were it replaced
	 * by a good one since we opened it, that one goes too: one more miss.) */
	if (!ok)
		unlinkat(dc->dir, name, 0);
	return ok;
}

/* A new temporary file beside name (its fan-out directory made if missing). */
static int open_tmp(tf_disk_cache *dc, const char *name, char *tmp, size_t n)
{
	int fd;

	snprintf(tmp, n, "%.2s/.tmp.%d.%016" PRIx64 ".%" PRIu64, name, (int)getpid(), dc->tmp_tag,
		 (uint64_t)atomic_fetch_add(&dc->tmp_seq, 1));
	fd = openat(dc->dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == ENOENT) {
		char sub[3] = { name[0], name[1], 0 };
		if (mkdirat(dc->dir, sub, 0700) == 0 || errno == EEXIST)
			fd = openat(dc->dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	}
	return fd;
}

void tf_disk_cache_put(tf_disk_cache *dc, const char *key, uint64_t idx, const void *data, size_t len)
{
	size_t klen = strlen(key), size = HDR + klen + len;
	uint8_t d[32], h[HDR + TF_DISK_CACHE_KEY_MAX];
	char name[NAME_MAX_LEN], tmp[NAME_MAX_LEN + 64];
	bool ok;
	int fd;

	if (!len || len > TF_DISK_CACHE_BLOCK || klen > TF_DISK_CACHE_KEY_MAX || forked(dc))
		return;
	ensure_started(dc);
	/* Room first: what is over the bounds goes, and below the free-space
	 * floor nothing is written. */
	enforce(dc, size);
	if (free_bytes(dc) < dc->min_free + size || size > dc->max_bytes) {
		count(dc, &dc->st.skipped, 1);
		return;
	}
	digest_of(key, d);
	name_of(d, idx, name);
	make_header(h, key, klen, idx, data, len);
	if ((fd = open_tmp(dc, name, tmp, sizeof(tmp))) < 0) {
		count(dc, &dc->st.errors, 1);
		return;
	}
	ok = write_all(fd, h, HDR + klen) && write_all(fd, data, len);
	ok = close(fd) == 0 && ok;
	if (!ok || renameat(dc->dir, tmp, dc->dir, name) != 0) {
		unlinkat(dc->dir, tmp, 0);
		count(dc, &dc->st.errors, 1);
		return;
	}
	pthread_mutex_lock(&dc->mu);
	dc->st.written_bytes += len;
	note(dc, d, idx, (uint32_t)size, now_ns());
	pthread_mutex_unlock(&dc->mu);
}

void tf_disk_cache_get_stats(tf_disk_cache *dc, tf_disk_cache_stats *out)
{
	if (forked(dc)) {
		*out = (tf_disk_cache_stats){ .max_bytes = dc->max_bytes, .min_free = dc->min_free, .scanned = true };
		return;
	}
	pthread_mutex_lock(&dc->mu);
	*out = dc->st;
	pthread_mutex_unlock(&dc->mu);
}

void tf_disk_cache_settle(tf_disk_cache *dc)
{
	if (forked(dc))
		return;
	ensure_started(dc);
	pthread_mutex_lock(&dc->mu);
	while (!dc->st.scanned)
		pthread_cond_wait(&dc->cv, &dc->mu);
	pthread_mutex_unlock(&dc->mu);
}
