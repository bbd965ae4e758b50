/*
 * s3_client.h - S3 requests: addressing, signing, retries, checks
 * (private to the S3 source).
 *
 * Every request is signed afresh for each attempt (SigV4, unless
 * anonymous).  Failures that another attempt may cure (no connection, a
 * timeout, a reset, a short or overlong body, HTTP 408, 429, 5xx such as
 * 503 SlowDown) are retried up to `retries` more times, after an
 * exponential backoff with full jitter (100 ms doubling, at most 5 s);
 * then the request fails TF_E_IO.  An answer that is not 2xx is judged by
 * its status alone (404, 403, 412 stay TF_E_NOTFOUND, TF_E_ACCESS,
 * TF_E_STALE however long the error page).  Each attempt is bounded by
 * `timeout`, and all of them (and the waits between) by the caller's
 * s3_bound: at its deadline, or once its caller is gone, the request
 * fails TF_E_IO at once, saying so.  Two refusals are followed by one
 * more attempt at once: one naming the bucket's region (301
 * PermanentRedirect or 400 AuthorizationHeaderMalformed, with
 * x-amz-bucket-region or <Region>), after which the client signs for
 * that region (and, on AWS's own endpoint, goes to its regional host)
 * for good; and a temporary key refused as expired (400 or 403
 * ExpiredToken), re-signed with fresh credentials (s3_auth.h).  With
 * requester_pays every request carries x-amz-request-payer: requester,
 * with expected_owner x-amz-expected-bucket-owner (both signed).
 * Messages name the endpoint, bucket, key, range and HTTP status and S3
 * error code, never a credential or a signature.
 */
#ifndef S3_CLIENT_H
#define S3_CLIENT_H

#include <stdatomic.h>
#include <stdint.h>

#include "sources/s3_http.h"
#include "sources/s3_xml.h"
#include "config/tf_s3.h"
#include "util/tf_status.h"

typedef struct s3_client s3_client;

/* A client of bucket with settings s (already resolved). */
tf_status s3_client_new(const tf_s3_settings *s, const char *bucket, s3_client **out, tf_error *err);
void s3_client_free(s3_client *c);
/* Where lines for the log go (a region followed, a credential fetch
 * that failed while the current keys hold). */
void s3_client_set_warn(s3_client *c, void (*warn)(void *arg, const char *msg), void *arg);
/* Where the credentials come from (s3_auth_origin), NULL when anonymous. */
const char *s3_client_auth_origin(const s3_client *c);
const char *s3_client_bucket(const s3_client *c);
/* "http://host:port bucket 'b'" for messages. */
const char *s3_client_where(const s3_client *c);
/* "SCHEME://HOST[:PORT]/BUCKET": the host requests go to (no user
 * information) and the bucket, into buf[n]; false if it does not fit. */
bool s3_client_id(const s3_client *c, char *buf, size_t n);

/* The version a GET must read. */
typedef struct s3_version {
	const char *etag;		/* sent as If-Match; every answer must carry it */
	uint64_t size;			/* every answer's Content-Range total */
	_Atomic int64_t *mtime_ns;	/* NULL, or the Last-Modified the first answer
					 * carried (0 before it), kept for the next */
} s3_version;

/*
 * Exactly len bytes of key at off into dst, of version v: TF_E_STALE when
 * the answer is another version's (If-Match refused, or an answer with
 * another ETag, size or Last-Modified: a store may ignore If-Match),
 * TF_E_IO for one with no ETag at all (nothing proves its version).
 */
tf_status s3_client_get(s3_client *c, const s3_bound *b, const char *key, const s3_version *v, uint64_t off,
			void *dst, size_t len, tf_error *err);

/* HEAD key: size, ETag, mtime (entry->key is not set). */
tf_status s3_client_head(s3_client *c, const s3_bound *b, const char *key, s3_entry *out, tf_error *err);

/*
 * The whole of object key (no version pinned: the caller checks what it
 * gets) into *body (malloc'd, NUL-terminated past *len): TF_E_NOTFOUND
 * for a 404, TF_E_CORRUPT for one over max bytes (collected as it
 * arrives, never allocated from a length the store announces).
 */
tf_status s3_client_get_whole(s3_client *c, const s3_bound *b, const char *key, size_t max, char **body,
			      size_t *len, tf_error *err);

/* PUT len bytes of body as object key, signed with their SHA-256
 * (x-amz-content-sha256), so a store checks it got those very bytes.
 * Retried as any request: a PUT is idempotent. */
tf_status s3_client_put(s3_client *c, const s3_bound *b, const char *key, const void *body, size_t len,
			tf_error *err);

/* One ListObjectsV2 page of prefix (delimiter '/'; flat: none, every key
 * beneath it), after token (NULL: the first); max_keys per page. */
tf_status s3_client_list(s3_client *c, const s3_bound *b, const char *prefix, const char *token,
			 unsigned max_keys, bool flat, s3_list_page *out, tf_error *err);

#endif
