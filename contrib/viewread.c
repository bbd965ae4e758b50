/*
 * viewread - read an array view through the library the way a FUSE driver
 * would, and time it: a whole pass in pieces of PIECE bytes, or N random
 * reads of SIZE bytes (each checked against the whole pass when --check).
 *
 *   viewread [-k KEYFILE] [--cache SIZE] [--piece BYTES] ARRAY VIEW
 *   viewread [...] --random N SIZE [--seed S] [--check] ARRAY VIEW
 *   viewread [...] --at OFF [--random N SIZE] ARRAY VIEW   (one read at OFF first)
 *   viewread [...] --files ARRAY FILE...   decoded files of the array read whole through
 *                                          the cache, as the mount serves them: the baseline
 *
 * ARRAY may be s3://BUCKET/PREFIX (AWS_* environment).  VIEW is a path inside the views folder: cells.csv, a.raw, a.npy,
 * fragments/F/cells.csv.  Prints bytes, seconds, MB/s (or reads/s and the
 * median and 99th percentile latency) and the peak RSS.
 */
#include "config.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "format/tf_array.h"
#include "cache/tf_cache.h"
#include "cache/tf_handle.h"
#include "config/tf_config.h"
#include "sources/tf_source_open.h"
#include "views/tf_view.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kb(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Files of the array (relative paths) read whole through the cache in
 * pieces, as the driver reads decoded files: what a view is compared with. */
static int read_files(tf_array *a, tf_cache *cache, tf_workspace *ws, size_t piece, int n, char **rel)
{
	uint8_t *buf = malloc(piece);
	uint64_t total = 0;
	double t = now();
	tf_error err;

	for (int i = 0; i < n; i++) {
		tf_file *f;
		tf_handle *h;
		size_t got;

		if (tf_array_open_file(a, rel[i], &f, &err) != TF_OK || tf_handle_open(f, &h, &err) != TF_OK) {
			fprintf(stderr, "viewread: %s\n", err.msg);
			return 1;
		}
		tf_file_unref(f);
		for (uint64_t off = 0;; off += got) {
			if (tf_handle_read(h, cache, ws, off, piece, buf, &got, &err) != TF_OK) {
				fprintf(stderr, "viewread: %s\n", err.msg);
				return 1;
			}
			if (!got)
				break;
			total += got;
		}
		tf_handle_close(h);
	}
	t = now() - t;
	printf("%d decoded files: %" PRIu64 " bytes in %.3f s, %.1f MB/s (pieces of %zu)\n", n, total, t,
	       total / t / 1e6, piece);
	free(buf);
	return 0;
}

/* The whole view (into *all if wanted); returns its size. */
static uint64_t whole(tf_view *w, tf_workspace *ws, size_t piece, uint8_t **all)
{
	uint8_t *buf = malloc(piece), *keep = NULL;
	uint64_t off = 0;
	size_t got;
	tf_error err;

	for (;;) {
		if (tf_view_read(w, ws, off, piece, buf, &got, &err) != TF_OK) {
			fprintf(stderr, "viewread: %s\n", err.msg);
			exit(1);
		}
		if (!got)
			break;
		if (all) {
			keep = realloc(keep, off + got);
			memcpy(keep + off, buf, got);
		}
		off += got;
	}
	free(buf);
	if (all)
		*all = keep;
	return off;
}

static void random_reads(tf_view *w, tf_workspace *ws, unsigned n, size_t size, unsigned seed,
			 const uint8_t *all, uint64_t total)
{
	double *lat = calloc(n ? n : 1, sizeof(double)), t0 = now();
	uint8_t *buf = malloc(size);
	uint64_t end = 0;
	unsigned bad = 0;
	tf_error err;

	srand(seed);
	if (!tf_view_size(w, &end))
		end = total;
	for (unsigned i = 0; i < n; i++) {
		uint64_t off = end > size ? (((uint64_t)rand() << 31 | (uint64_t)rand()) % (end - size)) : 0;
		size_t got;
		double t = now();

		if (tf_view_read(w, ws, off, size, buf, &got, &err) != TF_OK) {
			fprintf(stderr, "viewread: %s\n", err.msg);
			exit(1);
		}
		lat[i] = now() - t;
		if (all && (off + got > total || memcmp(buf, all + off, got)))
			bad++;
	}
	t0 = now() - t0;
	qsort(lat, n, sizeof(double), cmp_double);
	printf("%u random reads of %zu bytes: %.3f s, %.0f reads/s, median %.1f us, p99 %.1f us%s\n", n, size,
	       t0, n / t0, n ? lat[n / 2] * 1e6 : 0, n ? lat[n * 99 / 100] * 1e6 : 0,
	       all ? (bad ? ", MISMATCHES" : ", all equal to the whole") : "");
	free(lat);
	free(buf);
	if (bad)
		exit(1);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cache", required_argument, NULL, 'c' }, { "piece", required_argument, NULL, 'p' },
		{ "random", required_argument, NULL, 'r' }, { "seed", required_argument, NULL, 's' },
		{ "check", no_argument, NULL, 'C' }, { "key", required_argument, NULL, 'k' },
		{ "at", required_argument, NULL, 'a' }, { "files", no_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t cache_size = (uint64_t)256 << 20, piece = (uint64_t)1 << 20;
	unsigned n = 0, seed = 1;
	long long at = -1;
	bool files = false;
	size_t size = 4096;
	bool check = false;
	tf_key *key = NULL;
	tf_source *src = NULL;
	char *rel = NULL;
	tf_array *a;
	tf_cache *cache;
	tf_views *v;
	tf_view *w;
	tf_workspace *ws = tf_workspace_new();
	tf_error err;
	uint8_t *all = NULL;
	uint64_t total;
	double t;
	int c;

	while ((c = getopt_long(argc, argv, "k:", opts, NULL)) != -1) {
		switch (c) {
		case 'c': tf_parse_size(optarg, &cache_size); break;
		case 'p': tf_parse_size(optarg, &piece); break;
		case 'r':
			n = (unsigned)strtoul(optarg, NULL, 10);
			if (optind < argc)
				size = strtoull(argv[optind++], NULL, 10);
			break;
		case 's': seed = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'C': check = true; break;
		case 'a': at = strtoll(optarg, NULL, 10); break;
		case 'f': files = true; break;
		case 'k':
			if (tf_key_load_file(optarg, &key, &err) != TF_OK) {
				fprintf(stderr, "viewread: %s\n", err.msg);
				return 1;
			}
			break;
		default: return 2;
		}
	}
	if (argc - optind >= 1 && tf_source_locate(argv[optind], NULL, &src, &rel, &err) != TF_OK) {
		fprintf(stderr, "viewread: %s\n", err.msg);
		return 1;
	}
	if (files && argc - optind >= 2) {
		int rc = 1;
		if (tf_array_open(src, rel, key, &a, &err) == TF_OK &&
		    tf_cache_new((size_t)cache_size, 0, &cache, &err) == TF_OK) {
			rc = read_files(a, cache, ws, (size_t)piece, argc - optind - 1, argv + optind + 1);
			tf_cache_free(cache);
			tf_array_free(a);
		}
		printf("peak RSS %ld KiB\n", rss_kb());
		tf_workspace_free(ws);
		tf_key_free(key);
		free(rel);
		tf_source_free(src);
		return rc;
	}
	if (argc - optind != 2 || !piece || !size) {
		fprintf(stderr, "usage: viewread [--cache SIZE] [--piece B] [--random N SIZE [--seed S] [--check]] ARRAY VIEW\n");
		return 2;
	}
	if (tf_array_open(src, rel, key, &a, &err) != TF_OK ||
	    tf_cache_new((size_t)cache_size, 0, &cache, &err) != TF_OK || tf_views_open(a, cache, &v, &err) != TF_OK ||
	    tf_view_open(v, argv[optind + 1], &w, &err) != TF_OK) {
		fprintf(stderr, "viewread: %s\n", err.msg);
		return 1;
	}
	if (at >= 0) {	/* one read there first: a CSV indexes up to it */
		uint8_t *buf = malloc((size_t)size);
		size_t got = 0;
		t = now();
		if (!buf || tf_view_read(w, ws, (uint64_t)at, (size_t)size, buf, &got, &err) != TF_OK) {
			fprintf(stderr, "viewread: %s\n", buf ? err.msg : "out of memory");
			return 1;
		}
		printf("one read of %zu bytes at %lld: %.3f s (%zu bytes)\n", size, at, now() - t, got);
		free(buf);
	}
	t = now();
	total = n && !check ? 0 : whole(w, ws, (size_t)piece, check ? &all : NULL);
	t = now() - t;
	if (!n || check)
		printf("%s: %" PRIu64 " bytes in %.3f s, %.1f MB/s (pieces of %" PRIu64 ")\n", argv[optind + 1], total,
		       t, total / t / 1e6, piece);
	if (n)
		random_reads(w, ws, n, size, seed, all, total);
	{
		tf_cache_stats cs;
		tf_cache_get_stats(cache, &cs);
		printf("peak RSS %ld KiB; cache: %" PRIu64 " hits, %" PRIu64 " misses (decodes), %" PRIu64
		       " evictions\n", rss_kb(), cs.hits, cs.misses, cs.evictions);
	}
	free(all);
	tf_view_close(w);
	tf_views_unref(v);
	tf_cache_free(cache);
	tf_array_free(a);
	tf_key_free(key);
	tf_workspace_free(ws);
	free(rel);
	tf_source_free(src);
	return 0;
}
