/*
 * s3_http.c - libcurl transfers: a bounded pool of easy handles, header
 * and body callbacks that trust nothing.
 */
#include "config.h"

#include "sources/s3_http.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define LOW_SPEED_BYTES 1024L		/* per second ... */
#define LOW_SPEED_MAX_S 15L		/* ... for min(timeout, this) */
#define WAIT_SLICE_NS 200000000		/* a wait for a free handle looks at gone this often */
#define GONE_EVERY_NS 50000000		/* a transfer asks whether its caller is gone at most this often */

struct s3_http {
	CURLSH *share;
	pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	CURL **idle;
	size_t nidle, total, max;
	uint32_t timeout_ms;
};

bool s3_bound_over(const s3_bound *b)
{
	return tf_now_ns() >= b->at_ns || (b->gone && b->gone(b->arg));
}

static void share_lock(CURL *c, curl_lock_data d, curl_lock_access a, void *user)
{
	(void)c, (void)a;
	pthread_mutex_lock(&((s3_http *)user)->share_locks[d < CURL_LOCK_DATA_LAST ? d : 0]);
}

static void share_unlock(CURL *c, curl_lock_data d, void *user)
{
	(void)c;
	pthread_mutex_unlock(&((s3_http *)user)->share_locks[d < CURL_LOCK_DATA_LAST ? d : 0]);
}

tf_status s3_http_new(uint32_t timeout_ms, uint32_t max_conns, s3_http **out, tf_error *err)
{
	s3_http *h = calloc(1, sizeof(*h));
	pthread_condattr_t ca;

	/* curl_global_init is idempotent and reference-counted. */
	if (!h || curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		free(h);
		return tf_err(err, TF_E_NOMEM, "cannot initialise libcurl");
	}
	h->max = max_conns ? max_conns : 1;
	h->timeout_ms = timeout_ms;
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&h->share_locks[i], NULL);
	pthread_mutex_init(&h->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);	/* waits end at a monotonic deadline */
	pthread_cond_init(&h->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (!(h->idle = calloc(h->max, sizeof(*h->idle))) || !(h->share = curl_share_init())) {
		s3_http_free(h);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	curl_share_setopt(h->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(h->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(h->share, CURLSHOPT_USERDATA, h);
	curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	*out = h;
	return TF_OK;
}

void s3_http_free(s3_http *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->nidle; i++)
		curl_easy_cleanup(h->idle[i]);
	if (h->share)
		curl_share_cleanup(h->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&h->share_locks[i]);
	pthread_mutex_destroy(&h->mu);
	pthread_cond_destroy(&h->cv);
	free(h->idle);
	free(h);
	curl_global_cleanup();
}

/* A handle from the pool, waiting while max are busy, but not past b;
 * NULL: no memory (*cc CURLE_OUT_OF_MEMORY) or no handle within b. */
static CURL *acquire(s3_http *h, const s3_bound *b, CURLcode *cc)
{
	CURL *c = NULL;
	int64_t until;
	struct timespec ts;

	pthread_mutex_lock(&h->mu);
	while (!h->nidle && h->total >= h->max && !s3_bound_over(b)) {
		until = tf_now_ns() + WAIT_SLICE_NS;
		until = until < b->at_ns ? until : b->at_ns;
		ts = (struct timespec){ (time_t)(until / 1000000000), (long)(until % 1000000000) };
		pthread_cond_timedwait(&h->cv, &h->mu, &ts);
	}
	if (h->nidle) {
		c = h->idle[--h->nidle];
	} else if (h->total < h->max && (c = curl_easy_init())) {
		h->total++;
	}
	*cc = c ? CURLE_OK : h->total < h->max ? CURLE_OUT_OF_MEMORY : CURLE_OPERATION_TIMEDOUT;
	pthread_mutex_unlock(&h->mu);
	if (c)
		curl_easy_reset(c);	/* options go; the live connection stays */
	return c;
}

static void release(s3_http *h, CURL *c)
{
	pthread_mutex_lock(&h->mu);
	h->idle[h->nidle++] = c;
	pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

static bool parse_u64(const char *s, const char **end, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;

	for (; isdigit((unsigned char)*p); p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*end = p;
	*out = v;
	return p != s;
}

/* "bytes FIRST-LAST/TOTAL" */
static void parse_content_range(s3_xfer *x, const char *v)
{
	const char *p;

	x->has_crange = !strncasecmp(v, "bytes ", 6) && parse_u64(v + 6, &p, &x->cr_first) && *p == '-' &&
			parse_u64(p + 1, &p, &x->cr_last) && *p == '/' && parse_u64(p + 1, &p, &x->cr_total) &&
			(*p == '\0' || isspace((unsigned char)*p)) && x->cr_first <= x->cr_last &&
			x->cr_last < x->cr_total;
}

static void set_header(s3_xfer *x, const char *name, char *v)
{
	size_t n = strlen(v);
	const char *end;

	while (n && isspace((unsigned char)v[n - 1]))
		v[--n] = '\0';
	if (!strcasecmp(name, "etag")) {
		if (n >= 2 && v[0] == '"' && v[n - 1] == '"')
			v[n - 1] = '\0', v++, n -= 2;
		if ((x->has_etag = n <= S3_MAX_ETAG))
			memcpy(x->etag, v, n + 1);
	} else if (!strcasecmp(name, "content-range")) {
		parse_content_range(x, v);
	} else if (!strcasecmp(name, "content-length")) {
		x->has_clen = parse_u64(v, &end, &x->clen) && *end == '\0';
	} else if (!strcasecmp(name, "last-modified")) {
		struct tm tm = { 0 };
		/* The server's date: past int64 nanoseconds (after 2262) it is none. */
		if (!strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm) ||
		    !s3_time_ns((int64_t)timegm(&tm), 0, &x->mtime_ns))
			x->mtime_ns = 0;
	} else if (!strcasecmp(name, "x-amz-bucket-region")) {
		snprintf(x->bucket_region, sizeof(x->bucket_region), "%.60s", v);
		for (char *c = x->bucket_region; *c; c++)
			if (!isalnum((unsigned char)*c) && *c != '-')
				*c = '_';
	}
}

static size_t on_header(char *buf, size_t size, size_t n, void *user)
{
	s3_xfer *x = user;
	char line[512], *colon, *v;
	size_t len = size * n;

	if (len >= 5 && !strncmp(buf, "HTTP/", 5)) {	/* a new response (after 100, a redirect) */
		x->has_etag = x->has_crange = x->has_clen = false;
		x->mtime_ns = 0;
		x->bucket_region[0] = '\0';
		return len;
	}
	if (len >= sizeof(line))	/* no header we read is that long */
		return len;
	memcpy(line, buf, len);
	line[len] = '\0';
	if (!(colon = strchr(line, ':')))
		return len;
	*colon = '\0';
	for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
		;
	set_header(x, line, v);
	return len;
}

static size_t on_body(char *buf, size_t size, size_t n, void *user)
{
	s3_xfer *x = ((void **)user)[0];
	CURL *c = ((void **)user)[1];
	size_t len = size * n, keep = len;
	long status = 0;
	bool ok_status;

	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	ok_status = status >= 200 && status < 300;
	if (x->dst && ok_status) {
		if (len > x->dst_len - x->got)
			return x->overflow = true, 0;
		memcpy(x->dst + x->got, buf, len);
		x->got += len;
		return len;
	}
	if (keep > x->body_max - x->body_len) {
		if (ok_status)
			return x->overflow = true, 0;	/* a listing past its bound */
		keep = x->body_max - x->body_len;	/* an error page: its status decides, its start explains */
	}
	if (!keep)
		return len;
	char *nb = realloc(x->body, x->body_len + keep + 1);
	if (!nb)
		return 0;
	memcpy(nb + x->body_len, buf, keep);
	x->body = nb;
	x->body_len += keep;
	nb[x->body_len] = '\0';
	return len;
}

/* A PUT's body, from the caller's memory. */
static size_t on_upload(char *buf, size_t size, size_t n, void *user)
{
	s3_xfer *x = user;
	size_t left = x->upload_len - x->upload_at, len = size * n < left ? size * n : left;

	memcpy(buf, x->upload + x->upload_at, len);
	x->upload_at += len;
	return len;
}

/* libcurl sends a body again (a reused connection found closed): from offset. */
static int on_seek(void *user, curl_off_t offset, int origin)
{
	s3_xfer *x = user;

	if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > x->upload_len)
		return CURL_SEEKFUNC_CANTSEEK;
	x->upload_at = (size_t)offset;
	return CURL_SEEKFUNC_OK;
}

/* Called by libcurl about once a second, and as data moves: asks whether
 * the caller is gone at most every GONE_EVERY_NS. */
static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	s3_xfer *x = ((void **)user)[0];
	const s3_bound *b = ((void **)user)[2];
	int64_t now;

	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	if (!b->gone || (now = tf_now_ns()) - x->gone_asked_ns < GONE_EVERY_NS)
		return 0;
	x->gone_asked_ns = now;
	return b->gone(b->arg) ? (x->gone = true, 1) : 0;
}

/* The transfer's timeout: the pool's (or the transfer's own), or what is left of b. */
static long timeout_ms(const s3_http *h, const s3_xfer *x, const s3_bound *b)
{
	int64_t left = (b->at_ns - tf_now_ns()) / 1000000, own = x->timeout_ms ? x->timeout_ms : h->timeout_ms;

	left = left < 1 ? 1 : left;
	return (long)(left < own ? left : own);
}

static void set_options(s3_http *h, CURL *c, s3_xfer *x, void **user, long timeout)
{
	long slow_s = (long)(h->timeout_ms / 1000);

	slow_s = slow_s < 1 ? 1 : slow_s > LOW_SPEED_MAX_S ? LOW_SPEED_MAX_S : slow_s;
	curl_easy_setopt(c, CURLOPT_URL, x->url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, x->headers);
	curl_easy_setopt(c, CURLOPT_NOBODY, x->head ? 1L : 0L);
	curl_easy_setopt(c, CURLOPT_SHARE, h->share);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);	/* the path is encoded and signed as is */
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout);
	if (x->timeout_ms)	/* a metadata service: a machine without one must not wait */
		curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout / 4 > 1 ? timeout / 4 : 1L);
	else
		curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout < 10000 ? timeout : 10000L);
	if (x->method)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, x->method);
	if (x->post) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, x->post);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)x->post_len);
	}
	if (x->upload) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)x->upload_len);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, on_upload);
		curl_easy_setopt(c, CURLOPT_READDATA, x);
		curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek);
		curl_easy_setopt(c, CURLOPT_SEEKDATA, x);
	}
	if (x->no_proxy)
		curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, LOW_SPEED_BYTES);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, slow_s);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, user);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, x->curl_msg);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, user);
}

void s3_http_perform(s3_http *h, s3_xfer *x, const s3_bound *b)
{
	CURL *c;
	void *user[3];
	long timeout;
	bool waited;

	s3_xfer_done(x);
	x->cc = CURLE_OK;
	x->curl_msg[0] = '\0';
	x->status = 0;
	x->has_etag = x->has_crange = x->has_clen = x->overflow = x->late = x->gone = false;
	x->mtime_ns = 0;
	x->bucket_region[0] = '\0';
	x->got = 0;
	x->upload_at = 0;
	x->gone_asked_ns = 0;
	waited = !s3_bound_over(b);
	if (!waited || !(c = acquire(h, b, &x->cc))) {
		x->gone = b->gone && b->gone(b->arg);
		x->late = !x->gone && x->cc != CURLE_OUT_OF_MEMORY;
		x->cc = x->cc == CURLE_OK ? CURLE_OPERATION_TIMEDOUT : x->cc;
		if (x->late)
			snprintf(x->curl_msg, sizeof(x->curl_msg), "%s",
				 waited ? "no connection free in time" : "not sent: no time left");
		return;
	}
	user[0] = x, user[1] = c, user[2] = (void *)(uintptr_t)b;
	timeout = timeout_ms(h, x, b);
	set_options(h, c, x, user, timeout);
	x->cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &x->status);
	/* Cut short by the deadline rather than by the pool's timeout. */
	x->late = x->cc == CURLE_OPERATION_TIMEDOUT && tf_now_ns() >= b->at_ns;
	release(h, c);
}

void s3_xfer_done(s3_xfer *x)
{
	free(x->body);
	x->body = NULL;
	x->body_len = 0;
}
