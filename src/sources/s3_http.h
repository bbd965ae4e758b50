/*
 * s3_http.h - HTTP transfers with libcurl (private to the S3 source).
 *
 * A pool of easy handles, at most max_conns of them, each keeping its
 * connection alive between requests (connection reuse without sharing one
 * connection cache between threads, which libcurl does not support
 * reliably); DNS and TLS sessions are shared through a share handle.  A
 * thread wanting a handle when all are busy waits: the pool is also the
 * bound on requests in flight.
 *
 * A transfer's 2xx body goes into the caller's buffer and nowhere else: a
 * body longer than the buffer aborts the transfer (x->overflow).  Any other
 * body is collected up to body_max bytes: a longer 2xx body (a listing)
 * aborts the transfer (x->overflow), the rest of a longer error body is
 * dropped.  A PUT's body (x->upload) is sent from the caller's memory with
 * its length announced and without "Expect: 100-continue" (no wait for a
 * store that does not answer it); libcurl rewinds it when it must send it
 * again.
 */
#ifndef S3_HTTP_H
#define S3_HTTP_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>

#include "sources/s3_xml.h"
#include "util/tf_clock.h"
#include "util/tf_status.h"

typedef struct s3_http s3_http;

/*
 * What bounds a transfer: nothing is sent, waited for or received past
 * at_ns (CLOCK_MONOTONIC), and a transfer stops within about a second of
 * gone(arg) turning true (the caller gave up).  A transfer's own timeout
 * is the pool's timeout or what is left before at_ns, whichever is less;
 * and one that receives under 1 KiB/s for min(timeout, 15 s) is a timeout
 * too, so that a body trickling in is retried (or given up) early.
 */
typedef struct s3_bound {
	int64_t at_ns;
	bool (*gone)(void *arg);	/* NULL: never */
	void *arg;
} s3_bound;

/* Whether b leaves no time (past its deadline) or its caller is gone. */
bool s3_bound_over(const s3_bound *b);

typedef struct s3_xfer {
	/* request */
	bool head;			/* HEAD rather than GET */
	const char *method;		/* NULL: GET (or HEAD); else "PUT", "POST" */
	const char *post;		/* a POST's body (post_len bytes), or NULL */
	size_t post_len;
	const uint8_t *upload;		/* a PUT's body (upload_len bytes), or NULL */
	size_t upload_len;
	uint32_t timeout_ms;		/* 0: the pool's; else this (connecting: a quarter of it) */
	bool no_proxy;			/* a link-local or loopback service: never through a proxy */
	const char *url;
	struct curl_slist *headers;
	uint8_t *dst;			/* 2xx body sink, dst_len bytes at most */
	size_t dst_len;
	size_t body_max;		/* other bodies: collected up to this */
	/* response */
	CURLcode cc;
	char curl_msg[CURL_ERROR_SIZE];
	long status;
	bool has_etag, has_crange, has_clen;
	char etag[S3_MAX_ETAG + 1];	/* quotes stripped */
	uint64_t cr_first, cr_last, cr_total;
	uint64_t clen;
	int64_t mtime_ns;		/* Last-Modified, 0 if none */
	char bucket_region[64];		/* x-amz-bucket-region */
	size_t got;			/* bytes put into dst */
	bool overflow;			/* a body longer than allowed */
	bool late;			/* stopped (or never started) at the deadline */
	bool gone;			/* stopped because the caller is gone */
	int64_t gone_asked_ns;		/* when the transfer last asked */
	char *body;			/* collected body (malloc'd) */
	size_t body_len;
	size_t upload_at;		/* bytes of upload sent */
} s3_xfer;

tf_status s3_http_new(uint32_t timeout_ms, uint32_t max_conns, s3_http **out, tf_error *err);
void s3_http_free(s3_http *h);

/* Run one transfer within b (response fields reset first).  Never fails
 * by itself: x->cc and x->status say how it went (x->late, x->gone why it
 * stopped early). */
void s3_http_perform(s3_http *h, s3_xfer *x, const s3_bound *b);
/* Free what a transfer collected (x->body). */
void s3_xfer_done(s3_xfer *x);

#endif
