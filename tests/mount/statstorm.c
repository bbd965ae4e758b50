/*
 * statstorm ROUNDS PATH... - lookups and getattrs of the same nodes at once.
 *
 * Two threads list every directory given (readdirplus from offset 0, so the
 * daemon looks up every entry), two stat every path with
 * AT_STATX_FORCE_SYNC (a getattr the kernel never answers from its cache),
 * and two look up names that do not exist in every directory (a lookup
 * each), ROUNDS times.  Exit 0 when every listing and stat succeeded and
 * every missing name was ENOENT.  For the driver's locking, run under
 * ThreadSanitizer (tests/mount/races.sh).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>

static int rounds, npaths;
static char **paths;
static atomic_int failures;

static void failed(const char *what, const char *path)
{
	fprintf(stderr, "statstorm: %s %s: errno %d\n", what, path, errno);
	atomic_fetch_add(&failures, 1);
}

static void *lister(void *arg)
{
	(void)arg;
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < npaths; i++) {
			DIR *d = opendir(paths[i]);
			if (!d) {
				if (errno != ENOTDIR)
					failed("opendir", paths[i]);
				continue;
			}
			errno = 0;
			while (readdir(d))
				;
			if (errno)
				failed("readdir", paths[i]);
			closedir(d);
		}
	return NULL;
}

static void *statter(void *arg)
{
	struct statx sx;

	(void)arg;
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < npaths; i++)
			if (statx(AT_FDCWD, paths[i], AT_STATX_FORCE_SYNC, STATX_BASIC_STATS, &sx) != 0)
				failed("statx", paths[i]);
	return NULL;
}

static void *missing(void *arg)
{
	char name[4096];
	struct stat st;

	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < npaths; i++) {
			snprintf(name, sizeof(name), "%s/.statstorm-%ld-%d", paths[i], (long)(intptr_t)arg, r);
			if (stat(name, &st) == 0 || (errno != ENOENT && errno != ENOTDIR))
				failed("lookup of a missing name in", paths[i]);
		}
	return NULL;
}

int main(int argc, char **argv)
{
	void *(*const roles[])(void *) = { lister, lister, statter, statter, missing, missing };
	enum { N = sizeof(roles) / sizeof(roles[0]) };
	pthread_t t[N];

	if (argc < 3 || (rounds = atoi(argv[1])) <= 0) {
		fprintf(stderr, "usage: statstorm ROUNDS PATH...\n");
		return 2;
	}
	paths = argv + 2;
	npaths = argc - 2;
	for (int i = 0; i < N; i++)
		if (pthread_create(&t[i], NULL, roles[i], (void *)(intptr_t)i) != 0) {
			perror("pthread_create");
			return 2;
		}
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	return atomic_load(&failures) ? 1 : 0;
}
