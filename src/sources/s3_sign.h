/*
 * s3_sign.h - AWS Signature Version 4 (private to the S3 source).
 *
 * The canonical request is built here rather than by libcurl's
 * CURLOPT_AWS_SIGV4: Debian 12's curl 7.88 neither sorts nor encodes the
 * query, nor encodes the path, nor adds x-amz-content-sha256.
 *
 *   CanonicalRequest = METHOD \n URI \n QUERY \n HEADERS \n SIGNED \n PAYLOADHASH
 *   URI     the path, each byte outside A-Za-z0-9-._~ (and '/') as %XX,
 *           once (S3 does not double-encode nor normalise paths)
 *   QUERY   name=value pairs, both encoded ('/' too), sorted by name then value
 *   HEADERS lowercase name ':' value trimmed, inner blanks folded, sorted
 *   StringToSign = "AWS4-HMAC-SHA256" \n DATE \n SCOPE \n hex(sha256(CanonicalRequest))
 *   key = HMAC(HMAC(HMAC(HMAC("AWS4" secret, YYYYMMDD), region), service), "aws4_request")
 *
 * The secret is used only inside s3_sign_auth and wiped from its stack.
 */
#ifndef S3_SIGN_H
#define S3_SIGN_H

#include <stdbool.h>
#include <stddef.h>

#include "util/tf_status.h"

typedef struct s3_kv {
	const char *name, *value;
} s3_kv;

typedef struct s3_sign_req {
	const char *method;
	const char *path;		/* raw (not encoded), starts with '/' */
	const s3_kv *query;		/* raw names and values */
	size_t nquery;
	const s3_kv *headers;		/* every header to sign, host included */
	size_t nheaders;
	const char *payload_hash;	/* hex SHA-256 of the body, or UNSIGNED-PAYLOAD */
	const char *amz_date;		/* YYYYMMDDTHHMMSSZ */
	const char *region, *service;
} s3_sign_req;

/* hex SHA-256 of the empty body. */
#define S3_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* Percent-encode s per RFC 3986 (unreserved kept; '/' kept if keep_slash).
 * malloc'd, NULL when out of memory. */
char *s3_uri_encode(const char *s, bool keep_slash);

/* The canonical query string (malloc'd, "" for none; NULL: out of memory). */
char *s3_canonical_query(const s3_kv *q, size_t n);

/* The canonical request and the signed-header list ("host;x-amz-date"). */
char *s3_canonical_request(const s3_sign_req *r, char **signed_headers);

/* The Authorization header's value for r. */
tf_status s3_sign_auth(const s3_sign_req *r, const char *access_key, const char *secret,
		       char **auth, tf_error *err);

/* The hex SHA-256 of p[0..n) into hex[65] (a POST body's payload hash). */
void s3_sha256_hex(const void *p, size_t n, char hex[65]);

/* YYYYMMDDTHHMMSSZ of t (UTC) into out[17]. */
void s3_amz_date(long long t, char out[17]);

#endif
