/*
 * s3read - reads objects through the S3 source as the library does, for
 * tests/s3/s3.sh (settings from the AWS_* environment).
 *
 *   s3read cat SPEC REL                  the object, in 64 KiB reads, to stdout
 *   s3read random SPEC REL LOCAL N [S]   N random ranges by 4 threads (and more,
 *                                        until S seconds have passed: then each
 *                                        read is a GET of its own, no read-ahead),
 *                                        compared with the local copy; prints
 *                                        "ok N" or fails
 *   s3read head SPEC REL N               the first N bytes in 64 KiB reads (fetching
 *                                        ahead), then, once a fetch ahead is in
 *                                        flight, the object closed: prints
 *                                        "aborted=A in_flight=F" once a fetch in
 *                                        flight was cut short, or none is left in
 *                                        flight (10 s at most)
 *   s3read replace SPEC REL              open, read, say "open", wait for a line on
 *                                        stdin, read again: prints "stale" when the
 *                                        object was replaced meanwhile, then the
 *                                        size a new open sees
 *
 * The source's warnings (where its credentials come from) go to stderr.
 * Exit status 0 as described, 1 on any failure (message on stderr).
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sources/tf_source.h"
#include "sources/tf_source_open.h"
#include "util/tf_status.h"

typedef struct job {
	tf_object *o;
	const uint8_t *want;
	uint64_t size;
	unsigned n, seed, bad, done;
	time_t until;
} job;

static void *rand_reads(void *arg)
{
	job *j = arg;
	uint8_t *buf = malloc(1 << 20);

	for (unsigned i = 0; buf && (i < j->n || time(NULL) < j->until); i++, j->done++) {
		uint64_t off = (uint64_t)rand_r(&j->seed) % j->size;
		size_t len = 1 + (size_t)rand_r(&j->seed) % (i % 7 == 0 ? (1 << 20) : 70000);
		tf_error err = { 0 };
		len = len < j->size - off ? len : (size_t)(j->size - off);
		if (tf_object_read(j->o, off, buf, len, &err) != TF_OK || memcmp(buf, j->want + off, len)) {
			fprintf(stderr, "s3read: range %llu+%zu wrong%s%s\n", (unsigned long long)off, len,
				err.msg[0] ? ": " : "", err.msg);
			err.msg[0] = '\0';
			j->bad++;
		}
	}
	free(buf);
	return NULL;
}

static int cmd_random(tf_object *o, const char *local, unsigned n, unsigned seconds)
{
	FILE *f = fopen(local, "rb");
	uint64_t size = tf_object_stat(o)->v.size;
	uint8_t *want = malloc(size ? size : 1);
	pthread_t th[4];
	job jobs[4];
	unsigned bad = 0, done = 0;

	if (!f || !want || fread(want, 1, size, f) != size)
		return fprintf(stderr, "s3read: %s: cannot read\n", local), 1;
	fclose(f);
	for (unsigned i = 0; i < 4; i++) {
		jobs[i] = (job){ o, want, size, n / 4, 7 + i, 0, 0, time(NULL) + (time_t)seconds };
		pthread_create(&th[i], NULL, rand_reads, &jobs[i]);
	}
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		bad += jobs[i].bad;
		done += jobs[i].done;
	}
	free(want);
	printf(bad ? "bad %u\n" : "ok %u\n", bad ? bad : done);
	return bad != 0;
}

static int cmd_cat(tf_object *o)
{
	static uint8_t buf[65536];
	uint64_t size = tf_object_stat(o)->v.size;
	tf_error err;

	for (uint64_t off = 0; off < size; off += sizeof(buf)) {
		size_t n = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf);
		if (tf_object_read(o, off, buf, n, &err) != TF_OK)
			return fprintf(stderr, "s3read: %s\n", err.msg), 1;
		fwrite(buf, 1, n, stdout);
	}
	return 0;
}

static int cmd_head(tf_source *s, tf_object *o, uint64_t n)
{
	static uint8_t buf[65536];
	struct timespec tick = { 0, 10000000 };
	tf_source_stored st;
	tf_error err;

	for (uint64_t off = 0; off < n; off += sizeof(buf))
		if (tf_object_read(o, off, buf, n - off < sizeof(buf) ? (size_t)(n - off) : sizeof(buf), &err) != TF_OK) {
			tf_object_close(o);
			return fprintf(stderr, "s3read: %s\n", err.msg), 1;
		}
	for (unsigned i = 0; i < 1000; i++) {	/* a fetch ahead under way (10 s at most) */
		tf_source_stored_stats(s, &st);
		if (st.in_flight)
			break;
		nanosleep(&tick, NULL);
	}
	tf_object_close(o);
	for (unsigned i = 0; i < 1000; i++) {	/* cut short, or all done (10 s at most) */
		tf_source_stored_stats(s, &st);
		if (st.aborted || !st.in_flight)
			break;
		nanosleep(&tick, NULL);
	}
	printf("aborted=%llu in_flight=%u\n", (unsigned long long)st.aborted, st.in_flight);
	return 0;
}

static int cmd_replace(tf_source *s, tf_object *o, const char *rel)
{
	uint8_t b;
	char line[16];
	tf_error err;
	tf_object *o2;
	tf_status rc;

	if (tf_object_read(o, 0, &b, 1, &err) != TF_OK)
		return fprintf(stderr, "s3read: %s\n", err.msg), 1;
	printf("open\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	rc = tf_object_read(o, tf_object_stat(o)->v.size - 1, &b, 1, &err);
	printf("%s\n", rc == TF_E_STALE ? "stale" : rc == TF_OK ? "same" : "error");
	if (tf_object_open(s, rel, NULL, &o2, &err) != TF_OK)
		return fprintf(stderr, "s3read: reopen: %s\n", err.msg), 1;
	printf("%llu\n", (unsigned long long)tf_object_stat(o2)->v.size);
	tf_object_close(o2);
	return 0;
}

static void warn(void *ctx, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "s3read: warning: %s\n", msg);
}

int main(int argc, char **argv)
{
	tf_source *s;
	tf_object *o;
	tf_error err;
	int rc;

	if (argc < 4)
		return fprintf(stderr, "usage: s3read cat|random|head|replace SPEC REL [LOCAL] [N]\n"), 2;
	if (tf_source_open(argv[2], NULL, &s, &err) != TF_OK)
		return fprintf(stderr, "s3read: %s\n", err.msg), 1;
	tf_source_set_hooks(s, &(tf_source_hooks){ .warn = warn });
	if (tf_object_open(s, argv[3], NULL, &o, &err) != TF_OK) {
		fprintf(stderr, "s3read: %s\n", err.msg);
		tf_source_free(s);
		return 1;
	}
	if (!strcmp(argv[1], "cat"))
		rc = cmd_cat(o);
	else if (!strcmp(argv[1], "random") && argc == 7 && !tf_object_advise(o, TF_ACCESS_PLANNED))
		rc = 1;
	else if (!strcmp(argv[1], "random") && (argc == 6 || argc == 7))
		rc = cmd_random(o, argv[4], (unsigned)atoi(argv[5]), argc == 7 ? (unsigned)atoi(argv[6]) : 0);
	else if (!strcmp(argv[1], "head") && argc == 5) {
		rc = cmd_head(s, o, strtoull(argv[4], NULL, 10));
		o = NULL;	/* closed */
	} else if (!strcmp(argv[1], "replace"))
		rc = cmd_replace(s, o, argv[3]);
	else
		rc = 2;
	tf_object_close(o);
	tf_source_free(s);
	return rc;
}
