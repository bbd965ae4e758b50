/*
 * s3_xml.h - the XML answers of an S3 store, parsed with expat (private to
 * the S3 source).
 *
 * A ListObjectsV2 page (ListBucketResult): Contents (Key, Size,
 * LastModified, ETag: "" when it has none, which the source refuses to
 * open), CommonPrefixes/Prefix, IsTruncated, NextContinuationToken; with
 * EncodingType "url" the names are percent-decoded, and a name that
 * cannot be (a bad escape, or a NUL) is set aside as sent, for the caller
 * to report: one such key is no reason to fail its whole directory.  The
 * answer is untrusted: a DOCTYPE (and so any entity declaration) is
 * refused, names longer than S3_MAX_NAME, more than max_entries entries,
 * an object without Key or Size, a size that is not a decimal below 2^63,
 * or a page that is truncated without a token fail the parse.
 */
#ifndef S3_XML_H
#define S3_XML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/tf_status.h"

#define S3_MAX_NAME 4096	/* S3 keys are at most 1024 bytes */
#define S3_MAX_ETAG 71

typedef struct s3_entry {
	char *key;
	uint64_t size;
	int64_t mtime_ns;
	char etag[S3_MAX_ETAG + 1];	/* quotes stripped */
} s3_entry;

typedef struct s3_list_page {
	s3_entry *objects;
	size_t nobjects;
	char **prefixes;
	size_t nprefixes;
	char **bad;			/* names that do not decode, as sent */
	size_t nbad;
	bool truncated;
	char *next_token;		/* when truncated */
} s3_list_page;

tf_status s3_parse_list(const char *xml, size_t len, size_t max_entries, s3_list_page *out,
			tf_error *err);
void s3_list_page_free(s3_list_page *p);

/* The <Code> of an S3 <Error> body into code ("" when there is none). */
void s3_parse_error_code(const char *xml, size_t len, char *code, size_t size);
/* The same, and its <Region> (a 301 or 400 naming the bucket's region)
 * into region ("" when none; region may be NULL).  Both are made
 * printable: letters and digits (and '-' in a region), '_' for the rest. */
void s3_parse_error(const char *xml, size_t len, char *code, size_t code_size, char *region, size_t region_size);

/*
 * An STS answer (AssumeRole, AssumeRoleWithWebIdentity): the
 * Credentials' AccessKeyId, SecretAccessKey, SessionToken and Expiration,
 * all four required; or an ErrorResponse's <Code>.  Values are at most
 * 16 KiB; secrets are wiped when freed (and every copy the parse made).
 */
typedef struct s3_sts_answer {
	char *access_key, *secret, *token, *expiration;
	char *code;			/* an error's Code (printable), else NULL */
} s3_sts_answer;

tf_status s3_parse_sts(const char *xml, size_t len, s3_sts_answer *out, tf_error *err);
void s3_sts_answer_free(s3_sts_answer *a);

/* "2009-10-12T17:50:30.000Z" (or with an offset, "+02:00") -> ns since the epoch; false if malformed or
 * past what int64 nanoseconds hold (before 1677, after 2262). */
bool s3_parse_time(const char *s, int64_t *ns);
/* sec s + frac_ns ns since the epoch -> ns; false past int64 (as above). */
bool s3_time_ns(int64_t sec, uint32_t frac_ns, int64_t *ns);

#endif
