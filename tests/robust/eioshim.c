/*
 * eioshim.c - LD_PRELOAD'ed into tilefs by tests/robust/faults.sh: pread()
 * of a chosen stored file fails with EIO over a chosen byte range, as a
 * failing disk would, while a chosen "arm" file exists (so a test can let
 * the index be built first, then fail the data reads).
 *
 *   TILEFS_EIO_NAME  a substring of the file's path (/proc/self/fd link)
 *   TILEFS_EIO_FROM, TILEFS_EIO_TO   the failing range [FROM, TO)
 *   TILEFS_EIO_ARM   faults only while this path exists (unset: always)
 *
 * The library reads every stored byte with pread (src/sources/
 * source_local.c); with _FILE_OFFSET_BITS=64 that is pread64.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);

static int faulty(int fd, size_t len, off_t off)
{
	const char *name = getenv("TILEFS_EIO_NAME"), *arm = getenv("TILEFS_EIO_ARM");
	const char *from = getenv("TILEFS_EIO_FROM"), *to = getenv("TILEFS_EIO_TO");
	char link[64], path[4096];
	ssize_t n;

	if (!name || !from || !to || (arm && access(arm, F_OK) != 0))
		return 0;
	if ((unsigned long long)off >= strtoull(to, NULL, 10) ||
	    (unsigned long long)off + len <= strtoull(from, NULL, 10))
		return 0;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	if ((n = readlink(link, path, sizeof(path) - 1)) < 0)
		return 0;
	path[n] = '\0';
	return strstr(path, name) != NULL;
}

static ssize_t call(const char *sym, int fd, void *buf, size_t len, off_t off)
{
	pread_fn real = (pread_fn)(uintptr_t)dlsym(RTLD_NEXT, sym);

	if (faulty(fd, len, off)) {
		errno = EIO;
		return -1;
	}
	return real ? real(fd, buf, len, off) : (errno = ENOSYS, -1);
}

ssize_t pread64(int fd, void *buf, size_t len, off_t off);
ssize_t pread64(int fd, void *buf, size_t len, off_t off)
{
	return call("pread64", fd, buf, len, off);
}

ssize_t pread(int fd, void *buf, size_t len, off_t off);
ssize_t pread(int fd, void *buf, size_t len, off_t off)
{
	return call("pread", fd, buf, len, off);
}
