/*
 * index.c - tiletool index [-j N] [-c CONFIG] [--index-dir DIR] [--publish] SOURCE
 *
 * Build the persisted index store (tf_index.h) for every file under SOURCE
 * that a [match] rule of CONFIG decodes, as a mount of SOURCE would on its
 * first lookup of each (chunk headers alone where that is cheap), so that
 * the mount walks nothing.  Files of TileDB arrays need no index: their
 * fragment metadata says where every tile is.  The store is the one the
 * daemon uses: --index-dir, else the configuration's index_dir, else the
 * default (tf_index_default_dir).
 *
 * With --publish (SOURCE an object store), each file's entry is also put
 * in the bucket, under SOURCE's reserved prefix (PREFIX/.tilefs/index/,
 * tf_index.h), for every mount of SOURCE to use: what the walk found, or
 * what the local store held (walked or proved on this machine), never an
 * entry read from the bucket.
 *
 * N threads index files at once (default: one per CPU).  On a terminal a
 * progress line shows files, bytes, rate and ETA; otherwise one summary
 * line is printed.  Exit status: 0, 1 if a file failed, 2 usage error.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tf_catalog.h"
#include "config/tf_config.h"
#include "cache/tf_index.h"
#include "sources/tf_source_open.h"
#include "cache/tf_walk.h"
#include "tools/index.h"

#define MAX_JOBS 256
#define REFRESH_NS 200000000L

typedef struct job {
	char *rel;
	tf_version v;
} job;

typedef struct run {
	tf_source *src;
	tf_config *cfg;
	tf_catalog *cat;
	tf_index *store;
	job *v;
	size_t n, cap;
	uint64_t total_bytes;
	atomic_size_t next;
	_Atomic uint64_t done, done_bytes, walked, restored, failed, published;
	bool publish;
	bool find_failed;		/* finding the files ran out of memory */
	pthread_mutex_t lock;		/* output, and `finished` */
	pthread_cond_t cond;
	unsigned finished;		/* worker threads done */
	bool tty;
	int progress_len;		/* characters of the progress line shown */
} run;

static const char *prog = "tiletool index";

static void usage(FILE *f)
{
	fprintf(f, "Usage: tiletool index [-j N] [-c CONFIG] [--index-dir DIR] [--index-max-size SIZE]\n"
		   "                      [--publish] SOURCE\n\n"
		   "Index every file under SOURCE that a [match] rule of CONFIG decodes, into the\n"
		   "store a mount of SOURCE uses (tilefs -o index_dir), so that the mount walks\n"
		   "nothing.  Files of TileDB arrays need no index.\n\n"
		   "  -j, --jobs N           files indexed at once (default: one per CPU)\n"
		   "  -c, --config CONFIG    tilefs.ini(5) with the [match] rules (and index_dir)\n"
		   "      --index-dir DIR    the store (default: index_dir of CONFIG, else\n"
		   "                         $XDG_CACHE_HOME/tilefs, /var/cache/tilefs for root)\n"
		   "      --index-max-size S its bound (default: index_max_size, else 1G)\n"
		   "      --publish          SOURCE being s3://BUCKET[/PREFIX]: also put each entry\n"
		   "                         in the bucket, under PREFIX/.tilefs/index/, where every\n"
		   "                         mount of SOURCE finds it (needs write access)\n\n"
		   "On a terminal a progress line shows files, bytes, rate and ETA; otherwise one\n"
		   "summary line is printed.  Exit status: 0 ok, 1 a file failed, 2 usage error.\n");
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* "1.2 GiB" into buf. */
static const char *human(uint64_t n, char *buf, size_t size)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 5)
		v /= 1024, u++;
	snprintf(buf, size, u ? "%.1f %s" : "%.0f %s", v, units[u]);
	return buf;
}

/* ---- finding the files ------------------------------------------------------------------ */

static bool add_job(run *r, const char *rel, const tf_version *v)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 256;
		job *nv = realloc(r->v, cap * sizeof(*nv));
		if (!nv)
			return false;
		r->v = nv;
		r->cap = cap;
	}
	if (!(r->v[r->n].rel = strdup(rel)))
		return false;
	r->v[r->n++].v = *v;
	r->total_bytes += v->size;
	return true;
}

/* A job for rel if a rule decodes it and the store can keep it; stops the
 * walk (said) when out of memory. */
static int find_one(void *ctx, const char *rel, const tf_stat *st)
{
	run *r = ctx;
	const tf_rule *rule;

	if (st->kind != TF_ENT_REG || !(rule = tf_config_match(r->cfg, rel)) || rule->generic ||
	    rule->var_data || add_job(r, rel, &st->v))
		return 0;
	fprintf(stderr, "%s: out of memory\n", prog);
	r->find_failed = true;
	return 1;
}

/* Every file under SOURCE that a rule decodes and the store can keep;
 * the first directory that cannot be listed fails it. */
static int find_files(run *r)
{
	tf_error err;

	if (tf_walk(r->src, ".", 0, find_one, r, &err) != TF_OK) {
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		return 1;
	}
	return r->find_failed ? 1 : 0;
}

/* ---- indexing ----------------------------------------------------------------------------- */

static void clear_progress(run *r)
{
	if (r->tty && r->progress_len)
		fprintf(stderr, "\r%*s\r", r->progress_len, "");
	r->progress_len = 0;
}

/* Put f's entry in the bucket; false (said) if that failed. */
static bool publish(run *r, const job *j, const tf_file *f, tf_error *err)
{
	tf_buf payload = TF_BUF_INIT(TF_INDEX_MAX_ENTRY);
	tf_index_key k;
	char name[64];
	uint8_t *e = NULL;
	size_t n = 0;
	tf_status rc;

	if (!tf_index_published_key(&k, r->src, j->rel, tf_file_version(f)) ||
	    !tf_index_published_name(r->store, &k, name, sizeof(name)))
		rc = tf_err(err, TF_E_INVAL, "no ETag, or a key too long");
	else if ((rc = tf_file_export_index(f, &payload, err)) == TF_OK &&
		 (rc = tf_index_entry_bytes(&k, payload.p, payload.len, &e, &n, err)) == TF_OK)
		rc = tf_source_put_reserved(r->src, name, e, n, err);
	free(e);
	tf_buf_free(&payload);
	if (rc != TF_OK)
		tf_err_prefix(err, "%s: not published", j->rel);
	return rc == TF_OK;
}

static void index_job(run *r, const job *j)
{
	tf_file_info info;
	tf_file *f;
	tf_error err;
	bool ok;

	ok = tf_catalog_open_for(r->cat, j->rel, &j->v, TF_OPEN_METADATA, &f, NULL, &err) == TF_OK;
	if (ok && r->publish && !publish(r, j, f, &err)) {
		tf_file_unref(f);
		ok = false;
	} else if (ok && r->publish) {
		atomic_fetch_add(&r->published, 1);
	}
	if (!ok) {
		atomic_fetch_add(&r->failed, 1);
		pthread_mutex_lock(&r->lock);
		clear_progress(r);
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		pthread_mutex_unlock(&r->lock);
	} else {
		tf_file_get_info(f, &info);
		atomic_fetch_add(info.from_store ? &r->restored : &r->walked, 1);
		tf_file_unref(f);
	}
	atomic_fetch_add(&r->done_bytes, j->v.size);
	atomic_fetch_add(&r->done, 1);
}

static void *worker(void *arg)
{
	run *r = arg;

	for (size_t i; (i = atomic_fetch_add(&r->next, 1)) < r->n;)
		index_job(r, &r->v[i]);
	pthread_mutex_lock(&r->lock);
	r->finished++;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* "  1234/10000 files  1.2 GiB/5.0 GiB  312.0 MiB/s  ETA 0:12" (lock held). */
static void show_progress(run *r, double t0)
{
	uint64_t done = atomic_load(&r->done), bytes = atomic_load(&r->done_bytes);
	double dt = now_s() - t0, rate = dt > 0 ? (double)bytes / dt : 0;
	double eta = rate > 0 ? (double)(r->total_bytes - bytes) / rate : 0;
	char a[32], b[32], c[32];
	int len;

	len = fprintf(stderr, "\r%6.1f%%  %" PRIu64 "/%zu files  %s/%s  %s/s  ETA %d:%02d  ",
		      r->total_bytes ? 100.0 * (double)bytes / (double)r->total_bytes : 100.0 * (double)done / (double)r->n,
		      done, r->n, human(bytes, a, sizeof(a)), human(r->total_bytes, b, sizeof(b)),
		      human((uint64_t)rate, c, sizeof(c)), (int)eta / 60, (int)eta % 60);
	r->progress_len = len > 1 ? len - 1 : 0;
	fflush(stderr);
}

/* Run the jobs on n threads, showing progress on a terminal. */
static void index_all(run *r, unsigned n, double t0)
{
	pthread_t th[MAX_JOBS];
	unsigned started = 0;

	for (; started < n; started++)
		if (pthread_create(&th[started], NULL, worker, r) != 0)
			break;
	if (!started)
		worker(r);	/* no thread: do it here */
	pthread_mutex_lock(&r->lock);
	while (r->finished < started) {
		struct timespec until;
		if (r->tty)
			show_progress(r, t0);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += REFRESH_NS;
		if (until.tv_nsec >= 1000000000L)
			until.tv_sec++, until.tv_nsec -= 1000000000L;
		pthread_cond_timedwait(&r->cond, &r->lock, &until);	/* a display refresh */
	}
	if (r->tty)
		show_progress(r, t0);
	clear_progress(r);
	pthread_mutex_unlock(&r->lock);
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
}

/* ---- the command ---------------------------------------------------------------------------- */

typedef struct index_opts {
	const char *config, *dir, *max_size;
	unsigned jobs;
	bool publish;
} index_opts;

static int parse(int argc, char **argv, index_opts *o)
{
	static const struct option longs[] = {
		{ "jobs", required_argument, NULL, 'j' }, { "config", required_argument, NULL, 'c' },
		{ "index-dir", required_argument, NULL, 'd' }, { "index-max-size", required_argument, NULL, 'm' },
		{ "publish", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	char *end;
	int c;

	o->jobs = ncpu > 0 ? (unsigned)ncpu : 1;
	while ((c = getopt_long(argc, argv, "j:c:h", longs, NULL)) != -1) {
		switch (c) {
		case 'j':
			errno = 0;
			o->jobs = (unsigned)strtoul(optarg, &end, 10);
			if (errno || *end || !o->jobs || o->jobs > MAX_JOBS) {
				fprintf(stderr, "%s: -j: 1 to %d, not '%s'\n", prog, MAX_JOBS, optarg);
				return 2;
			}
			break;
		case 'c': o->config = optarg; break;
		case 'd': o->dir = optarg; break;
		case 'm': o->max_size = optarg; break;
		case 'p': o->publish = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	if (o->publish && strncmp(argv[optind], "s3://", 5)) {
		fprintf(stderr, "%s: --publish: %s is no object store (s3://BUCKET[/PREFIX])\n", prog, argv[optind]);
		return 2;
	}
	return -1;
}

static void warn(void *ctx, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "%s: warning: %s\n", prog, msg);
}

/* Configuration, store, source and catalog; an exit status on failure. */
static int setup(run *r, const index_opts *o, const char *source)
{
	uint64_t max = 0;
	char def[PATH_MAX], real[PATH_MAX];
	const char *dir;
	tf_error err;

	if ((o->config ? tf_config_load(o->config, &r->cfg, &err) : tf_config_default(&r->cfg, &err)) != TF_OK) {
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		return 2;
	}
	for (size_t i = 0; i < tf_config_nwarnings(r->cfg); i++)
		warn(NULL, tf_config_warning(r->cfg, i));
	if (o->max_size && (!tf_parse_size(o->max_size, &max) || max < 65536)) {
		fprintf(stderr, "%s: --index-max-size: bad size '%s' (e.g. 1G)\n", prog, o->max_size);
		return 2;
	}
	dir = o->dir ? o->dir : tf_config_settings(r->cfg)->index_dir;
	if (!dir && !(dir = tf_index_default_dir(def, sizeof(def)) ? def : NULL))
		dir = "none";
	if (!strcmp(dir, "none") && !o->publish) {
		fprintf(stderr, "%s: no index directory (index_dir = none): nothing to do\n", prog);
		return 2;
	}
	/* Rules match paths relative to SOURCE, as in the mount. */
	if (strncmp(source, "s3://", 5) && !realpath(source, real)) {
		fprintf(stderr, "%s: %s: %s\n", prog, source, strerror(errno));
		return 1;
	}
	if (tf_index_open(strcmp(dir, "none") ? dir : NULL, max ? max : tf_config_settings(r->cfg)->index_max_size,
			  warn, NULL, &r->store, &err) != TF_OK ||
	    tf_source_open(strncmp(source, "s3://", 5) ? real : source, tf_config_s3(r->cfg), &r->src, &err) != TF_OK ||
	    tf_catalog_new(r->src, r->cfg, &r->cat, &err) != TF_OK) {
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		return 1;
	}
	tf_source_set_hooks(r->src, &(tf_source_hooks){ .warn = warn });	/* keys it skips */
	tf_index_use_published(r->store, false);	/* what it stores and publishes, it walked or holds */
	tf_catalog_set_index(r->cat, r->store);
	r->publish = o->publish;
	return -1;
}

static void teardown(run *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->v[i].rel);
	free(r->v);
	tf_catalog_free(r->cat);
	tf_source_free(r->src);
	tf_index_free(r->store);
	tf_config_free(r->cfg);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
}

static void summary(run *r, double secs)
{
	tf_index_stats s;
	char a[32], b[32], c[32];

	tf_index_rescan(r->store);
	tf_index_get_stats(r->store, &s);
	printf("tiletool index: %zu files (%s) in %.1f s: %" PRIu64 " walked (%s read), %" PRIu64
	       " already indexed, %" PRIu64 " failed; %s: %" PRIu64 " entries, %s",
	       r->n, human(r->total_bytes, a, sizeof(a)), secs, atomic_load(&r->walked),
	       human(s.walk_bytes, b, sizeof(b)), atomic_load(&r->restored), atomic_load(&r->failed),
	       tf_index_dir(r->store), s.entries, human(s.bytes, c, sizeof(c)));
	if (r->publish)
		printf("; %" PRIu64 " published in %s/.tilefs/index/", atomic_load(&r->published),
		       tf_source_name(r->src));
	printf("\n");
}

int tiletool_index(int argc, char **argv)
{
	index_opts o = { 0 };
	run r = { .tty = isatty(2) };
	double t0 = now_s();
	int rc = parse(argc, argv, &o);

	if (rc >= 0)
		return rc;
	pthread_mutex_init(&r.lock, NULL);
	pthread_cond_init(&r.cond, NULL);
	atomic_init(&r.next, 0);
	if ((rc = setup(&r, &o, argv[argc - 1])) < 0) {
		if (r.tty)
			fprintf(stderr, "finding files under %s...", argv[argc - 1]);
		rc = find_files(&r);
		if (r.tty)
			fprintf(stderr, "\r%*s\r", (int)strlen(argv[argc - 1]) + 24, "");
		if (!rc && !r.n)
			fprintf(stderr, "%s: no file under %s that a [match] rule decodes: nothing to index "
				"(files of TileDB arrays need none)\n", prog, argv[argc - 1]);
		if (!rc) {
			index_all(&r, o.jobs < r.n ? o.jobs : (unsigned)(r.n ? r.n : 1), t0);
			summary(&r, now_s() - t0);
			rc = atomic_load(&r.failed) ? 1 : 0;
		}
	}
	teardown(&r);
	return rc;
}
