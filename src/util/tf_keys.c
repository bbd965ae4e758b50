/* tf_keys.c - key parsing and locked, wiped storage. */
#include "util/tf_keys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct tf_key {
	uint8_t bytes[TF_KEY_BYTES];
	int locked;
};

static int hexval(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static tf_key *key_alloc(void)
{
	void *mem = NULL;
	tf_key *k;

	/* A page of its own, so that locking it locks nothing else. */
	if (posix_memalign(&mem, (size_t)sysconf(_SC_PAGESIZE), sizeof(tf_key)) != 0)
		return NULL;
	k = mem;
	memset(k, 0, sizeof(*k));
	k->locked = mlock(k, sizeof(*k)) == 0;
#ifdef MADV_DONTDUMP
	madvise(k, (size_t)sysconf(_SC_PAGESIZE), MADV_DONTDUMP);
#endif
	return k;
}

tf_status tf_key_from_bytes(const void *text, size_t len, tf_key **out, tf_error *err)
{
	const uint8_t *s = text;
	tf_key *k;

	/* A trailing newline is allowed, but 32 raw bytes may themselves end in
	 * one: strip it only when that leaves a valid length. */
	if (len == 2 * TF_KEY_BYTES + 1 && s[len - 1] == '\n')
		len--;
	else if (len == 2 * TF_KEY_BYTES + 2 && s[len - 2] == '\r' && s[len - 1] == '\n')
		len -= 2;
	else if (len == TF_KEY_BYTES + 1 && s[len - 1] == '\n')
		len--;
	if (len != TF_KEY_BYTES && len != 2 * TF_KEY_BYTES)
		return tf_err(err, TF_E_INVAL, "a key must be 32 raw bytes or 64 hex digits (got %zu bytes)", len);
	if (!(k = key_alloc()))
		return tf_err(err, TF_E_NOMEM, "cannot allocate key storage");
	if (len == TF_KEY_BYTES) {
		memcpy(k->bytes, s, TF_KEY_BYTES);
	} else {
		for (size_t i = 0; i < TF_KEY_BYTES; i++) {
			int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
			if (hi < 0 || lo < 0) {
				tf_key_free(k);
				return tf_err(err, TF_E_INVAL, "a 64-character key must be hexadecimal");
			}
			k->bytes[i] = (uint8_t)(hi << 4 | lo);
		}
	}
	*out = k;
	return TF_OK;
}

tf_status tf_key_load_file(const char *path, tf_key **out, tf_error *err)
{
	uint8_t buf[2 * TF_KEY_BYTES + 3];
	struct stat sb;
	ssize_t n;
	tf_status rc;
	/* O_NONBLOCK until fstat says it is a regular file: a FIFO would
	 * block the mount's start-up forever. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

	if (fd < 0)
		return tf_err(err, TF_E_IO, "%s: %s", path, strerror(errno));
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || fcntl(fd, F_SETFL, 0) != 0) {
		close(fd);
		return tf_err(err, TF_E_INVAL, "%s: not a regular file", path);
	}
	if (sb.st_mode & (S_IRGRP | S_IROTH)) {
		close(fd);
		return tf_err(err, TF_E_INVAL, "%s: key file is readable by group or others "
			      "(mode %03o); chmod 600 it", path, (unsigned)(sb.st_mode & 0777));
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0)
		return tf_err(err, TF_E_IO, "%s: %s", path, strerror(errno));
	if ((size_t)n == sizeof(buf))	/* longer than any valid key */
		rc = tf_err(err, TF_E_INVAL, "a key must be 32 raw bytes or 64 hex digits");
	else
		rc = tf_key_from_bytes(buf, (size_t)n, out, err);
	explicit_bzero(buf, sizeof(buf));
	return rc == TF_OK ? rc : tf_err_prefix(err, "%s", path);
}

void tf_key_lock(tf_key *k)
{
	k->locked = mlock(k, sizeof(*k)) == 0;
}

const uint8_t *tf_key_bytes(const tf_key *k)
{
	return k->bytes;
}

void tf_key_free(tf_key *k)
{
	if (!k)
		return;
	explicit_bzero(k->bytes, sizeof(k->bytes));
	if (k->locked)
		munlock(k, sizeof(*k));
	free(k);
}
