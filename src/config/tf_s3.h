/*
 * tf_s3.h - how an S3-compatible object store is reached: the [s3]
 * configuration section and its environment fallbacks.
 *
 * A setting left unset in [s3] falls back to the environment when the
 * source is opened (tf_s3_settings_resolve):
 *
 *   endpoint     AWS_ENDPOINT_URL, else https://s3.REGION.amazonaws.com
 *   region       AWS_REGION, AWS_DEFAULT_REGION, the profile's region in
 *                ~/.aws/config, else us-east-1
 *   path_style   yes for a custom endpoint; for AWS left auto: no, unless
 *                the bucket's name is no DNS label ('.', '_', capitals)
 *   profile      AWS_PROFILE, else "default"
 *
 * Credentials are never a setting: they come from the AWS SDKs' chain
 * (sources/s3_auth.h): AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
 * AWS_SESSION_TOKEN, a web identity, the profile in ~/.aws/credentials
 * (AWS_SHARED_CREDENTIALS_FILE) or ~/.aws/config (AWS_CONFIG_FILE) or the
 * `credentials = FILE` named here (keys, credential_process, or a role
 * assumed), the container's credentials, the instance's (IMDSv2).  A
 * credentials file readable by group or others is refused.  With
 * anonymous = yes nothing is signed (public buckets).
 *
 * Nothing in this struct is secret; it may be printed.
 */
#ifndef TF_S3_H
#define TF_S3_H

#include <stdbool.h>
#include <stdint.h>

#include "util/tf_status.h"

typedef enum { TF_S3_AUTO = -1, TF_S3_NO = 0, TF_S3_YES = 1 } tf_s3_tristate;

typedef struct tf_s3_settings {
	char *endpoint;			/* "http[s]://host[:port]", NULL: from the environment */
	char *region;			/* NULL: from the environment */
	tf_s3_tristate path_style;
	char *profile;			/* NULL: AWS_PROFILE or "default" */
	bool anonymous;			/* send unsigned requests */
	uint32_t list_ttl;		/* seconds listings and attributes are trusted */
	char *credentials;		/* a credentials file (profile format), or NULL */
	uint32_t timeout_ms;		/* one request, connect to last byte */
	uint32_t retries;		/* further attempts of a failed request */
	uint32_t max_requests;		/* requests in flight at once, per source */
	uint32_t deadline_ms;		/* everything done for one caller's request */
	uint32_t list_max_pages;	/* pages of one directory's listing */
	uint64_t list_max_bytes;	/* memory one directory's listing may hold */
	bool requester_pays;		/* send x-amz-request-payer: requester */
	char *expected_owner;		/* an account id sent as x-amz-expected-bucket-owner, or NULL */
	char *cache_dir;		/* objects' stored bytes kept on disk there (sources/disk_cache.h), or NULL */
	uint64_t cache_dir_size;	/* bound of the blocks kept there */
	uint64_t cache_dir_min_free;	/* free space on its filesystem never taken below this */
} tf_s3_settings;

#define TF_S3_DEFAULT_LIST_TTL 60
#define TF_S3_DEFAULT_TIMEOUT_MS 30000
#define TF_S3_DEFAULT_RETRIES 5
/* Small GETs (fragment metadata, a view's first tiles) are bound by the
 * round trip, not the rate: 100 of them at 50 ms took 7 rounds at 16 in
 * flight, 4 at 32 (contrib/bench-s3 --rtt 50, g-view 1.18 s -> 0.83 s after
 * the mount).  Stored bytes stay within their bound whatever this is. */
#define TF_S3_DEFAULT_MAX_REQUESTS 32
#define TF_S3_DEFAULT_DEADLINE_MS 60000
#define TF_S3_DEFAULT_LIST_MAX_PAGES 2000
#define TF_S3_DEFAULT_LIST_MAX_BYTES ((uint64_t)64 << 20)
#define TF_S3_DEFAULT_CACHE_DIR_SIZE ((uint64_t)1 << 30)
#define TF_S3_DEFAULT_CACHE_DIR_MIN_FREE ((uint64_t)1 << 30)

/* Defaults (nothing read from the environment yet). */
void tf_s3_settings_init(tf_s3_settings *s);
void tf_s3_settings_clear(tf_s3_settings *s);
/* A deep copy (dst is overwritten, not freed first). */
tf_status tf_s3_settings_copy(tf_s3_settings *dst, const tf_s3_settings *src, tf_error *err);

/*
 * One `name = value` of an [s3] section.  Returns TF_OK, or TF_E_INVAL
 * with a message (without file:line: the caller adds it) for an unknown
 * name or a bad value.  relative_to resolves a relative credentials or
 * cache_dir path (the configuration file's directory), may be NULL.
 */
tf_status tf_s3_settings_set(tf_s3_settings *s, const char *name, const char *value,
			     const char *relative_to, tf_error *err);

/* Fill what is unset from the environment (endpoint, region, path_style,
 * profile) as the header comment says.  path_style stays TF_S3_AUTO for
 * AWS: the client settles it by the bucket's name. */
tf_status tf_s3_settings_resolve(tf_s3_settings *s, tf_error *err);

#endif
