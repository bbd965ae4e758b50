/*
 * tf_index.c - the persisted index store (tf_index.h): one file per entry.
 *
 * An entry (all integers little-endian):
 *
 *   0   8  magic "TFIDX\0\r\n" (\r\n: a text-mode copy shows as corrupt)
 *   8   4  format version (TF_INDEX_FORMAT)
 *   12  4  CRC-32 (zlib) of every byte from offset 16 to the end
 *   16  8  payload length P
 *   24  2  identity length L, then L bytes of identity
 *   ..  40 dev, ino, size, mtime_ns, ctime_ns (u64, u64, u64, i64, i64)
 *   ..  72 etag, NUL-padded
 *   ..  P  payload
 *
 * and its file size is exactly the sum: anything shorter or longer is
 * truncated or corrupt.  Why one file per entry and not SQLite: measured
 * with 100 entries of 90 KB, a cold read of each costs the same (24 ms for
 * all); writes cost 0.4 ms against 3 ms per committed row; a rename is
 * atomic for any number of writing processes; one damaged entry costs one
 * rebuild, never the store; and no dependency.
 */
#include "config.h"

#include "cache/tf_index.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "util/tf_hash.h"

#define TF_INDEX_FORMAT 2u	/* 2: object stores keyed by endpoint (1's are ignored) */
#define MAGIC "TFIDX\0\r\n"
#define FIXED 26u			/* magic .. identity length */
#define VERSION_BYTES 112u		/* 5 x 8 + 72 */
#define NAME_HEX 32			/* 128 bits of SHA-256 */
#define TOUCH_AFTER_NS 60000000000LL	/* refresh an entry's mtime at most once a minute */
#define TEMP_STALE_S 3600		/* a temporary file this old was left by a crash */
#define RESCAN_PUTS 1024		/* writes between scans (other processes write too) */
#define PUBLISHED_DIR "index/"		/* under the source's reserved prefix */
#define PUBLISHED_SLACK 65536u		/* a published entry's payload: at most the object's size and this */
#define SKIP_SLOTS 1024			/* published entries ignored, remembered (a ring) */

struct tf_index {
	char *dir;			/* "none" without one */
	EVP_MD *sha256;			/* fetched once: an implicit fetch per name costs more */
	int dirfd;			/* -1: nothing persisted */
	atomic_bool writable;
	uint64_t max_size;
	tf_index_warn_fn warn;
	void *warn_ctx;
	pthread_mutex_t lock;		/* the accounting below */
	bool scanned;
	uint64_t total, nentries;	/* bytes and entries, as last scanned plus our writes */
	unsigned puts;			/* since the last scan */
	atomic_bool write_warned;
	_Atomic uint64_t hits, misses, stale, corrupt, writes, write_errors, evictions, walks, walk_bytes;
	/* Published entries: whether to use them, and the keys (hashes of
	 * identity and version) whose published entry was ignored, never
	 * fetched again (lock). */
	atomic_bool use_published, fetch_warned;
	uint64_t skip[SKIP_SLOTS];
	size_t skip_next;
	_Atomic uint64_t published, published_misses, published_ignored;
};

/* ---- keys and names ------------------------------------------------------------------ */

bool tf_index_key_make(tf_index_key *k, const tf_source *src, const char *rel, const tf_version *v)
{
	int n;

	memset(k, 0, sizeof(*k));
	k->v = *v;
	/* An object store has no inode: its files are known by where they are,
	 * endpoint included (an ETag proves the bytes at one endpoint only:
	 * another may serve anything under any ETag). */
	if (strcmp(tf_source_kind(src), "local"))
		return tf_source_object_id(src, rel, k->id, sizeof(k->id));
	n = snprintf(k->id, sizeof(k->id), "local:%llu:%llu", (unsigned long long)v->dev,
		     (unsigned long long)v->ino);
	return n > 0 && (size_t)n < sizeof(k->id);
}

/* The entry's file name: 32 hex digits of SHA-256(identity) and ".idx". */
static bool entry_name(const tf_index *s, const tf_index_key *k, char name[NAME_HEX + 5])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;

	if (!s->sha256 || !EVP_Digest(k->id, strlen(k->id), md, &len, s->sha256, NULL) || len < NAME_HEX / 2)
		return false;
	for (int i = 0; i < NAME_HEX / 2; i++)
		snprintf(name + 2 * i, 3, "%02x", md[i]);
	memcpy(name + NAME_HEX, ".idx", 5);
	return true;
}

static bool is_entry_name(const char *s)
{
	if (strlen(s) != NAME_HEX + 4 || strcmp(s + NAME_HEX, ".idx"))
		return false;
	for (int i = 0; i < NAME_HEX; i++)
		if (!strchr("0123456789abcdef", s[i]))
			return false;
	return true;
}

/* Whether sb is a file of ours that no one else can write: the only kind
 * of file the store reads, replaces or removes. */
static bool ours(const struct stat *sb)
{
	return S_ISREG(sb->st_mode) && sb->st_uid == geteuid() && !(sb->st_mode & (S_IWGRP | S_IWOTH));
}

/* ---- opening ------------------------------------------------------------------------- */

static void warnf(tf_index *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warnf(tf_index *s, const char *fmt, ...)
{
	char msg[TF_ERRMSG_MAX];
	va_list ap;

	if (!s->warn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	s->warn(s->warn_ctx, msg);
}

bool tf_index_default_dir(char *buf, size_t n)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME"), *env = getenv("TILEFS_INDEX_DIR");
	struct passwd *pw;
	int len;

	if (env && env[0])
		len = snprintf(buf, n, "%s", env);
	else if (geteuid() == 0)
		len = snprintf(buf, n, "/var/cache/tilefs");
	else if (xdg && xdg[0] == '/')
		len = snprintf(buf, n, "%s/tilefs", xdg);
	else if ((home && home[0] == '/') || ((pw = getpwuid(geteuid())) && (home = pw->pw_dir)))
		len = snprintf(buf, n, "%s/.cache/tilefs", home);
	else
		return false;
	return len > 0 && (size_t)len < n;
}

/* Component c of a path, under directory fd: opened without following a
 * symlink (O_PATH: traversing needs no read permission), made mode 0700
 * if missing.  TF_E_ACCESS: a symlink; TF_E_IO: anything else. */
static tf_status open_component(int fd, const char *c, int *out, tf_error *err)
{
	const int how = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	struct stat sb;
	int e;

	if ((*out = openat(fd, c, how)) >= 0)
		return TF_OK;
	e = errno;
	if (e == ENOENT && (mkdirat(fd, c, 0700) == 0 || errno == EEXIST) && (*out = openat(fd, c, how)) >= 0)
		return TF_OK;
	if (e != ENOENT)
		errno = e;
	if (fstatat(fd, c, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode))
		return tf_err(err, TF_E_ACCESS, "'%s' is a symbolic link (never followed)", c);
	return tf_err(err, TF_E_IO, "'%s': %s", c, strerror(errno));
}

/*
 * Open directory dir: each component from / (or the working directory)
 * without following a symlink, the missing ones made mode 0700; nothing
 * that exists is changed.  TF_E_ACCESS: it must not be used, because a
 * symlink is on the way (it could lead anywhere) or it is not ours alone
 * (another user's, or writable by others: its entries could be anyone's).
 * TF_E_IO: it cannot be opened or made.
 */
static tf_status open_dir(const char *dir, int *out, tf_error *err)
{
	char path[4096], *save = NULL;
	struct stat sb;
	tf_status rc = TF_OK;
	int fd, next;

	if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path))
		return tf_err(err, TF_E_IO, "path too long");
	if ((fd = open(dir[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return tf_err(err, TF_E_IO, "%s", strerror(errno));
	for (char *c = strtok_r(path, "/", &save); c && rc == TF_OK; c = strtok_r(NULL, "/", &save)) {
		if ((rc = open_component(fd, c, &next, err)) == TF_OK) {
			close(fd);
			fd = next;
		}
	}
	/* Reopened to be read (its entries are listed). */
	next = rc == TF_OK ? openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	if (rc == TF_OK && next < 0)
		rc = tf_err(err, TF_E_IO, "%s", strerror(errno));
	close(fd);
	if (rc != TF_OK)
		return rc;
	if (fstat(next, &sb) != 0) {
		rc = tf_err(err, TF_E_IO, "%s", strerror(errno));
	} else if (sb.st_uid != geteuid()) {
		rc = tf_err(err, TF_E_ACCESS, "owned by uid %u, not by this user (uid %u)", (unsigned)sb.st_uid,
			    (unsigned)geteuid());
	} else if (sb.st_mode & (S_IWGRP | S_IWOTH)) {
		rc = tf_err(err, TF_E_ACCESS, "writable by %s (mode %04o)",
			    sb.st_mode & S_IWOTH ? "every user" : "its group", (unsigned)(sb.st_mode & 07777));
	}
	if (rc != TF_OK) {
		close(next);
		return rc;
	}
	*out = next;
	return TF_OK;
}

tf_status tf_index_open(const char *dir, uint64_t max_size, tf_index_warn_fn warn, void *warn_ctx,
			tf_index **out, tf_error *err)
{
	tf_index *s = calloc(1, sizeof(*s));
	tf_error why;
	tf_status rc;

	*out = NULL;
	if (!s || !(s->dir = strdup(dir ? dir : "none"))) {
		free(s);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	s->dirfd = -1;
	if (dir && (rc = open_dir(dir, &s->dirfd, &why)) != TF_OK) {
		if (rc == TF_E_ACCESS) {
			free(s->dir);
			free(s);
			return tf_err(err, rc, "index_dir %s: %s: refused (it must be a directory of this user's "
				      "that no other user can write, reached without a symlink)", dir, why.msg);
		}
		s->warn = warn, s->warn_ctx = warn_ctx;
		warnf(s, "index_dir %s: %s: indexes are not persisted", dir, why.msg);
	}
	s->warn = warn;
	s->warn_ctx = warn_ctx;
	s->max_size = max_size ? max_size : TF_INDEX_DEFAULT_MAX_SIZE;
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
	s->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
#else
	s->sha256 = (EVP_MD *)EVP_sha256();
#endif
	pthread_mutex_init(&s->lock, NULL);
	atomic_init(&s->use_published, true);
	atomic_init(&s->writable, s->dirfd >= 0 && faccessat(s->dirfd, ".", W_OK, AT_EACCESS) == 0);
	if (s->dirfd >= 0 && !atomic_load(&s->writable))
		warnf(s, "index_dir %s: not writable (%s): indexes are read but not persisted", dir,
		      strerror(errno));
	*out = s;
	return TF_OK;
}

void tf_index_free(tf_index *s)
{
	if (!s)
		return;
	if (s->dirfd >= 0)
		close(s->dirfd);
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
	EVP_MD_free(s->sha256);
#endif
	pthread_mutex_destroy(&s->lock);
	free(s->dir);
	free(s);
}

const char *tf_index_dir(const tf_index *s)
{
	return s->dir;
}

/* ---- reading an entry ------------------------------------------------------------------ */

static tf_status read_all(int fd, uint8_t *p, size_t n, tf_error *err)
{
	for (size_t at = 0; at < n;) {
		ssize_t got = pread(fd, p + at, n - at, (off_t)at);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return tf_err(err, TF_E_CORRUPT, "read: %s", got ? strerror(errno) : "truncated");
		at += (size_t)got;
	}
	return TF_OK;
}

static void put_version(uint8_t *p, const tf_version *v)
{
	tf_put_le64(p, v->dev);
	tf_put_le64(p + 8, v->ino);
	tf_put_le64(p + 16, v->size);
	tf_put_le64(p + 24, (uint64_t)v->mtime_ns);
	tf_put_le64(p + 32, (uint64_t)v->ctime_ns);
	memset(p + 40, 0, 72);
	memcpy(p + 40, v->etag, strnlen(v->etag, 71));
}

static void get_version(const uint8_t *p, tf_version *v)
{
	memset(v, 0, sizeof(*v));
	v->dev = tf_le64(p);
	v->ino = tf_le64(p + 8);
	v->size = tf_le64(p + 16);
	v->mtime_ns = (int64_t)tf_le64(p + 24);
	v->ctime_ns = (int64_t)tf_le64(p + 32);
	memcpy(v->etag, p + 40, 71);
}

/* Check entry bytes e[n] against k; the payload is at *off, *plen long. */
static tf_status check_entry(const uint8_t *e, size_t n, const tf_index_key *k, size_t *off, size_t *plen,
			     tf_error *err)
{
	uint64_t p;
	size_t idlen;
	tf_version v;

	if (n < FIXED || memcmp(e, MAGIC, 8))
		return tf_err(err, TF_E_CORRUPT, "not an index entry");
	if (tf_le32(e + 8) != TF_INDEX_FORMAT)
		return tf_err(err, TF_E_STALE, "format %u, not %u", tf_le32(e + 8), TF_INDEX_FORMAT);
	p = tf_le64(e + 16);
	idlen = tf_le16(e + 24);
	if (idlen >= sizeof(k->id) || p > n || n - p != (size_t)FIXED + idlen + VERSION_BYTES)
		return tf_err(err, TF_E_CORRUPT, "truncated or overlong (%zu bytes)", n);
	if ((uint32_t)crc32_z(0, e + 16, n - 16) != tf_le32(e + 12))
		return tf_err(err, TF_E_CORRUPT, "checksum mismatch");
	if (idlen != strlen(k->id) || memcmp(e + FIXED, k->id, idlen))
		return tf_err(err, TF_E_CORRUPT, "another file's entry (%.*s)", (int)(idlen > 80 ? 80 : idlen),
			      (const char *)e + FIXED);
	get_version(e + FIXED + idlen, &v);
	if (!tf_version_equal(&v, &k->v))
		return tf_err(err, TF_E_STALE, "an older version's entry");
	*off = FIXED + idlen + VERSION_BYTES;
	*plen = (size_t)p;
	return TF_OK;
}

/* Mark an entry used: its mtime orders the LRU (not more than once a minute). */
static void touch(tf_index *s, int fd, const struct stat *sb)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	if (atomic_load(&s->writable) &&
	    (now.tv_sec - sb->st_mtim.tv_sec) * 1000000000LL + (now.tv_nsec - sb->st_mtim.tv_nsec) > TOUCH_AFTER_NS)
		futimens(fd, NULL);
}

static tf_status load(tf_index *s, int fd, const tf_index_key *k, tf_buf *payload, tf_error *err)
{
	struct stat sb;
	size_t off = 0, plen = 0;
	tf_status rc;

	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
		return tf_err(err, TF_E_CORRUPT, "not a regular file");
	if (!ours(&sb))
		return tf_err(err, TF_E_ACCESS, "owned by uid %u, mode %04o: not this user's alone, never trusted",
			      (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 07777));
	if ((uint64_t)sb.st_size > TF_INDEX_MAX_ENTRY || (uint64_t)sb.st_size > SIZE_MAX)
		return tf_err(err, TF_E_CORRUPT, "%lld bytes: too large", (long long)sb.st_size);
	if ((rc = tf_buf_reserve(payload, (size_t)sb.st_size, err)) != TF_OK ||
	    (rc = read_all(fd, payload->p, (size_t)sb.st_size, err)) != TF_OK ||
	    (rc = check_entry(payload->p, (size_t)sb.st_size, k, &off, &plen, err)) != TF_OK)
		return rc;
	memmove(payload->p, payload->p + off, plen);
	payload->len = plen;
	touch(s, fd, &sb);
	return TF_OK;
}

tf_status tf_index_get(tf_index *s, const tf_index_key *k, tf_buf *payload, tf_error *err)
{
	char name[NAME_HEX + 5];
	tf_error why;
	tf_status rc;
	int fd;

	payload->len = 0;
	if (s->dirfd < 0 || !entry_name(s, k, name)) {
		atomic_fetch_add(&s->misses, 1);
		return tf_err(err, TF_E_NOTFOUND, "no index store");
	}
	if ((fd = openat(s->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0) {
		atomic_fetch_add(&s->misses, 1);
		return tf_err(err, TF_E_NOTFOUND, "no entry");
	}
	rc = load(s, fd, k, payload, &why);
	close(fd);
	payload->len = rc == TF_OK ? payload->len : 0;
	if (rc == TF_OK) {
		atomic_fetch_add(&s->hits, 1);
		return TF_OK;
	}
	if (rc == TF_E_STALE) {
		atomic_fetch_add(&s->stale, 1);
	} else if (rc != TF_E_NOMEM) {
		atomic_fetch_add(&s->corrupt, 1);
		warnf(s, "index entry %s/%s (%s): %s: ignored%s", s->dir, name, k->id, why.msg,
		      rc == TF_E_ACCESS ? "" : ", rebuilt");
		rc = TF_E_CORRUPT;
	}
	return tf_err(err, rc, "%s", why.msg);
}

void tf_index_prefetch(tf_index *s, const tf_index_key *k)
{
	char name[NAME_HEX + 5];
	int fd;

	if (s->dirfd < 0 || !entry_name(s, k, name) ||
	    (fd = openat(s->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0)
		return;
	posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
	close(fd);
}

/* ---- the directory's size ------------------------------------------------------------------ */

typedef struct ent_info {
	char name[NAME_HEX + 5];
	int64_t mtime_ns;
	uint64_t bytes;
} ent_info;

/* Bytes an entry of n bytes is counted for: whole 4 KiB blocks. */
static uint64_t disk_bytes(uint64_t n)
{
	return (n + 4095) & ~(uint64_t)4095;
}

static int by_mtime(const void *a, const void *b)
{
	const ent_info *x = a, *y = b;

	return x->mtime_ns < y->mtime_ns ? -1 : x->mtime_ns > y->mtime_ns;
}

/* Whether name is one of our temporary names: ".NAME.RANDOM.tmp", NAME an
 * entry's and RANDOM 16 hex digits (write_entry). */
static bool is_temp_name(const char *name)
{
	char entry[NAME_HEX + 5];
	size_t n = strlen(name);

	if (n != 1 + NAME_HEX + 4 + 1 + 16 + 4 || name[0] != '.' || name[NAME_HEX + 5] != '.' ||
	    strcmp(name + n - 4, ".tmp") || strspn(name + NAME_HEX + 6, "0123456789abcdef") != 16)
		return false;
	memcpy(entry, name + 1, NAME_HEX + 4);
	entry[NAME_HEX + 4] = '\0';
	return is_entry_name(entry);
}

/* A temporary file a crash of ours left (old, ours, our name) goes;
 * nothing else is ever removed. */
static void reap_temp(tf_index *s, const char *name, const struct stat *sb)
{
	if (is_temp_name(name) && ours(sb) && time(NULL) - sb->st_mtime > TEMP_STALE_S)
		unlinkat(s->dirfd, name, 0);
}

/* Every entry of the directory (lock held); *v malloc'd. */
static size_t list_entries(tf_index *s, ent_info **v)
{
	int fd = dup(s->dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;

	*v = NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		struct stat sb;
		if (fstatat(s->dirfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
			continue;	/* gone: another process trimmed it */
		if (!is_entry_name(de->d_name)) {
			reap_temp(s, de->d_name, &sb);
			continue;
		}
		if (!ours(&sb))
			continue;	/* neither counted nor ever removed */
		if (n == cap) {
			ent_info *nv = realloc(*v, (cap = cap ? 2 * cap : 256) * sizeof(**v));
			if (!nv)
				break;
			*v = nv;
		}
		memcpy((*v)[n].name, de->d_name, sizeof((*v)[n].name));
		(*v)[n].mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
		(*v)[n++].bytes = disk_bytes((uint64_t)sb.st_size);
	}
	closedir(d);
	return n;
}

/* Count the directory; beyond the bound, remove the least recently used
 * entries down to 90% of it (lock held). */
static void scan(tf_index *s, bool trim)
{
	ent_info *v;
	size_t n = list_entries(s, &v);

	s->total = s->nentries = 0;
	for (size_t i = 0; i < n; i++)
		s->total += v[i].bytes;
	s->nentries = n;
	s->scanned = true;
	s->puts = 0;
	if (trim && s->total > s->max_size) {
		qsort(v, n, sizeof(*v), by_mtime);
		for (size_t i = 0; i < n && s->total > s->max_size / 10 * 9; i++) {
			if (unlinkat(s->dirfd, v[i].name, 0) != 0 && errno != ENOENT)
				continue;
			s->total -= v[i].bytes;
			s->nentries--;
			atomic_fetch_add(&s->evictions, 1);
		}
	}
	free(v);
}

/* ---- writing an entry -------------------------------------------------------------------- */

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t put = write(fd, p, n);
		if (put < 0 && errno == EINTR)
			continue;
		if (put <= 0)
			return -1;
		p += put;
		n -= (size_t)put;
	}
	return 0;
}

/* The entry's bytes (malloc'd, *n long). */
static uint8_t *build_entry(const tf_index_key *k, const void *payload, size_t plen, size_t *n)
{
	size_t idlen = strlen(k->id), total = FIXED + idlen + VERSION_BYTES + plen;
	uint8_t *e = malloc(total);

	if (!e)
		return NULL;
	memcpy(e, MAGIC, 8);
	tf_put_le32(e + 8, TF_INDEX_FORMAT);
	tf_put_le64(e + 16, plen);
	tf_put_le16(e + 24, (uint16_t)idlen);
	memcpy(e + FIXED, k->id, idlen);
	put_version(e + FIXED + idlen, &k->v);
	memcpy(e + FIXED + idlen + VERSION_BYTES, payload, plen);
	tf_put_le32(e + 12, (uint32_t)crc32_z(0, e + 16, total - 16));
	*n = total;
	return e;
}

/* Write e[n] to a fresh temporary name and rename it over `name`; *old
 * receives the bytes of the entry replaced (0: none).  0, or -1 with
 * errno, or 1: `name` is not ours to replace. */
static int write_entry(tf_index *s, const char *name, const uint8_t *e, size_t n, uint64_t *old)
{
	struct stat sb;
	char tmp[NAME_HEX + 40];
	uint64_t r = 0;
	int fd = -1, e2;

	for (int tries = 0; fd < 0 && tries < 8; tries++) {
		if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
			r ^= (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull + (uint64_t)getpid() + (uint64_t)tries;
		snprintf(tmp, sizeof(tmp), ".%s.%016llx.tmp", name, (unsigned long long)r);
		fd = openat(s->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST)
			return -1;
	}
	if (fd < 0)
		return -1;
	*old = 0;
	if (fstatat(s->dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
		*old = disk_bytes((uint64_t)sb.st_size);
		if (!ours(&sb)) {	/* only root could have put it in our directory: left be */
			close(fd);
			unlinkat(s->dirfd, tmp, 0);
			return 1;
		}
	}
	if (write_all(fd, e, n) != 0 || close(fd) != 0 || renameat(s->dirfd, tmp, s->dirfd, name) != 0) {
		e2 = errno;
		unlinkat(s->dirfd, tmp, 0);
		errno = e2;
		return -1;
	}
	return 0;
}

static void write_failed(tf_index *s, int e)
{
	atomic_fetch_add(&s->write_errors, 1);
	/* A directory made read-only, or taken from us, stays so. */
	if (e == EROFS || e == EACCES || e == EPERM)
		atomic_store(&s->writable, false);
	if (!atomic_exchange(&s->write_warned, true))
		warnf(s, "index_dir %s: cannot write entries: %s: indexes are not persisted%s", s->dir,
		      strerror(e), atomic_load(&s->writable) ? " (tried again later)" : "");
}

void tf_index_put(tf_index *s, const tf_index_key *k, const void *payload, size_t plen)
{
	char name[NAME_HEX + 5];
	uint64_t old = 0;
	uint8_t *e;
	size_t n;
	int rc;

	if (s->dirfd < 0 || !atomic_load(&s->writable) || !entry_name(s, k, name))
		return;
	if (strlen(k->id) > 65535 || !(e = build_entry(k, payload, plen, &n))) {
		write_failed(s, ENOMEM);
		return;
	}
	if (n > TF_INDEX_MAX_ENTRY || n > s->max_size) {
		free(e);	/* larger than the whole store: not kept */
		return;
	}
	if ((rc = write_entry(s, name, e, n, &old)) != 0) {
		if (rc > 0) {
			atomic_fetch_add(&s->write_errors, 1);
			warnf(s, "index entry %s/%s (%s): not this user's alone: left as it is, not replaced",
			      s->dir, name, k->id);
		} else {
			write_failed(s, errno);
		}
		free(e);
		return;
	}
	free(e);
	atomic_fetch_add(&s->writes, 1);
	pthread_mutex_lock(&s->lock);
	if (!s->scanned || ++s->puts >= RESCAN_PUTS)
		scan(s, false);
	else if (old)	/* replaced (a racing writer's replacement: the next scan corrects) */
		s->total = s->total - (old < s->total ? old : s->total) + disk_bytes(n);
	else
		s->total += disk_bytes(n), s->nentries++;
	if (s->total > s->max_size)
		scan(s, true);
	pthread_mutex_unlock(&s->lock);
}

void tf_index_reject(tf_index *s, const tf_index_key *k, const char *why)
{
	char name[NAME_HEX + 5];
	struct stat sb;

	atomic_fetch_add(&s->corrupt, 1);
	atomic_fetch_sub(&s->hits, 1);	/* it was counted a hit by tf_index_get */
	if (s->dirfd < 0 || !entry_name(s, k, name))
		return;
	warnf(s, "index entry %s/%s (%s): %s: removed (the file is walked when next indexed)", s->dir, name,
	      k->id, why);
	if (atomic_load(&s->writable) && fstatat(s->dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && ours(&sb))
		unlinkat(s->dirfd, name, 0);
}

void tf_index_count_walk(tf_index *s, uint64_t bytes)
{
	atomic_fetch_add(&s->walks, 1);
	atomic_fetch_add(&s->walk_bytes, bytes);
}

void tf_index_rescan(tf_index *s)
{
	if (s->dirfd < 0)
		return;
	pthread_mutex_lock(&s->lock);
	scan(s, true);
	pthread_mutex_unlock(&s->lock);
}

void tf_index_get_stats(tf_index *s, tf_index_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->persist = s->dirfd >= 0;
	out->writable = out->persist && atomic_load(&s->writable);
	out->max_size = s->max_size;
	if (s->dirfd >= 0) {
		pthread_mutex_lock(&s->lock);
		if (!s->scanned)
			scan(s, false);
		out->entries = s->nentries;
		out->bytes = s->total;
		pthread_mutex_unlock(&s->lock);
	}
	out->hits = atomic_load(&s->hits);
	out->misses = atomic_load(&s->misses);
	out->stale = atomic_load(&s->stale);
	out->corrupt = atomic_load(&s->corrupt);
	out->writes = atomic_load(&s->writes);
	out->write_errors = atomic_load(&s->write_errors);
	out->evictions = atomic_load(&s->evictions);
	out->walks = atomic_load(&s->walks);
	out->walk_bytes = atomic_load(&s->walk_bytes);
	out->published = atomic_load(&s->published);
	out->published_misses = atomic_load(&s->published_misses);
	out->published_ignored = atomic_load(&s->published_ignored);
}

/* ---- published entries ------------------------------------------------------------------- */

bool tf_index_published_key(tf_index_key *k, const tf_source *src, const char *rel, const tf_version *v)
{
	char where[sizeof(k->id) - 8];

	memset(k, 0, sizeof(*k));
	if (!v->etag[0] || !tf_source_bucket_key(src, rel, where, sizeof(where)))
		return false;	/* no object store, or nothing that pins a version */
	snprintf(k->id, sizeof(k->id), "bucket:%s", where);
	k->v.size = v->size;
	memcpy(k->v.etag, v->etag, sizeof(k->v.etag));
	k->v.etag[sizeof(k->v.etag) - 1] = '\0';
	return true;
}

bool tf_index_published_name(tf_index *s, const tf_index_key *k, char *buf, size_t n)
{
	char name[NAME_HEX + 5];
	int len;

	if (!entry_name(s, k, name))
		return false;
	len = snprintf(buf, n, PUBLISHED_DIR "%s", name);
	return len > 0 && (size_t)len < n;
}

tf_status tf_index_entry_bytes(const tf_index_key *k, const void *payload, size_t n, uint8_t **out, size_t *len,
			       tf_error *err)
{
	if (strlen(k->id) > 65535 || n > TF_INDEX_MAX_ENTRY)
		return tf_err(err, TF_E_INVAL, "an entry too large");
	if (!(*out = build_entry(k, payload, n, len)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	return TF_OK;
}

void tf_index_use_published(tf_index *s, bool use)
{
	atomic_store(&s->use_published, use);
}

/* A key (identity and version) as the ring remembers it. */
static uint64_t skip_hash(const tf_index_key *k)
{
	uint8_t v[VERSION_BYTES];

	put_version(v, &k->v);
	return tf_hash_bytes(tf_hash_str(k->id), v, sizeof(v)) | 1;
}

static bool skipped(tf_index *s, const tf_index_key *k)
{
	uint64_t h = skip_hash(k);
	bool found = false;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < SKIP_SLOTS && !found; i++)
		found = s->skip[i] == h;
	pthread_mutex_unlock(&s->lock);
	return found;
}

/* The published entry pk (name) of local key k is ignored for good:
 * counted, warned (once, since it is never fetched again), remembered. */
static void ignore_published(tf_index *s, const tf_index_key *k, const tf_index_key *pk, const char *name,
			     const char *why, const char *then)
{
	uint64_t h = skip_hash(k);

	atomic_fetch_add(&s->published_ignored, 1);
	pthread_mutex_lock(&s->lock);
	s->skip[s->skip_next++ % SKIP_SLOTS] = h;
	pthread_mutex_unlock(&s->lock);
	warnf(s, "published index entry .tilefs/%s (%s): %s: ignored (%s)", name, pk->id, why, then);
}

tf_status tf_index_get_published(tf_index *s, tf_source *src, const char *rel, const tf_index_key *k,
				 tf_buf *payload, tf_error *err)
{
	tf_index_key pk;
	char name[64], *body = NULL;
	size_t n = 0, off = 0, plen = 0, max;
	tf_error why;
	tf_status rc;

	payload->len = 0;
	if (!atomic_load(&s->use_published) || !tf_index_published_key(&pk, src, rel, &k->v) ||
	    !tf_index_published_name(s, &pk, name, sizeof(name)) || skipped(s, k))
		return tf_err(err, TF_E_NOTFOUND, "no published entry");
	/* What an entry of this object can need (a longer one is no entry of it). */
	max = FIXED + strlen(pk.id) + VERSION_BYTES + PUBLISHED_SLACK;
	max += k->v.size < TF_INDEX_MAX_ENTRY - max ? (size_t)k->v.size : TF_INDEX_MAX_ENTRY - max;
	rc = tf_source_get_reserved(src, name, max, &body, &n, &why);
	if (rc == TF_OK && (rc = check_entry((const uint8_t *)body, n, &pk, &off, &plen, &why)) == TF_OK)
		rc = tf_buf_append(payload, body + off, plen, &why);
	free(body);
	if (rc == TF_OK) {
		atomic_fetch_add(&s->published, 1);
		return TF_OK;
	}
	if (rc == TF_E_NOTFOUND) {
		atomic_fetch_add(&s->published_misses, 1);
	} else if (rc == TF_E_CORRUPT || rc == TF_E_STALE) {
		ignore_published(s, k, &pk, name, why.msg, "the file is walked");
	} else {	/* the store failing (or refusing us): a miss this time, said once */
		atomic_fetch_add(&s->published_misses, 1);
		if (!atomic_exchange(&s->fetch_warned, true))
			warnf(s, "published index entries cannot be read (%s): files are walked", why.msg);
	}
	payload->len = 0;
	return tf_err(err, TF_E_NOTFOUND, "no published entry");
}

void tf_index_reject_published(tf_index *s, const tf_source *src, const char *rel, const tf_index_key *k,
				const char *why)
{
	tf_index_key pk = { .id = "?" };
	char name[64] = "?";

	atomic_fetch_sub(&s->published, 1);	/* counted as used by tf_index_get_published */
	if (tf_index_published_key(&pk, src, rel, &k->v))
		tf_index_published_name(s, &pk, name, sizeof(name));
	ignore_published(s, k, &pk, name, why, "found wrong: the file is walked when next indexed");
}
