/*
 * s3_auth.h - the credential chain and the keys it hands out (private to
 * the S3 source).
 *
 * The chain, in the AWS SDKs' order; the first source that applies is
 * the one used, for the life of the source (a source that applies but
 * fails fails the open, naming it: the chain does not fall through):
 *
 *   1. environment   AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN)
 *   2. web identity  AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (+ AWS_ROLE_SESSION_NAME):
 *                    STS AssumeRoleWithWebIdentity, an unsigned POST
 *   3. profile       (AWS_PROFILE, [s3] profile, else "default") in ~/.aws/credentials,
 *                    ~/.aws/config, then [s3] credentials = FILE; in a profile:
 *                    role_arn + source_profile (or + web_identity_token_file): STS
 *                    AssumeRole, signed with the source profile's credentials
 *                    (which may be keys, a process or a role in turn, 5 deep at
 *                    most); else aws_access_key_id + aws_secret_access_key; else
 *                    credential_process
 *   4. container     AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (http://169.254.170.2 + it)
 *                    or _FULL_URI (https, or http to loopback or the ECS/EKS agents'
 *                    addresses), Authorization from AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE
 *                    (read at each fetch) or AWS_CONTAINER_AUTHORIZATION_TOKEN
 *   5. IMDSv2        AWS_EC2_METADATA_SERVICE_ENDPOINT, else http://169.254.169.254
 *                    ([fd00:ec2::254] with _ENDPOINT_MODE=IPv6): a token (PUT), the
 *                    role's name, its credentials; skipped when
 *                    AWS_EC2_METADATA_DISABLED=true.  Each request 2 s at most, 1 s
 *                    to connect: a machine with no metadata service waits 1 s.
 *
 * STS is AWS_ENDPOINT_URL_STS, else AWS_ENDPOINT_URL, else
 * https://sts.REGION.amazonaws.com.  credential_process runs without a
 * shell, as the AWS CLI does: the line is split into words by the POSIX
 * shell's quoting rules (Python's shlex.split), the first is looked up in
 * PATH; stdin is /dev/null, stderr ours, no other descriptor passed; its
 * stdout (64 KiB at most, within 60 s and the request's bound) must be
 * JSON Version 1.  Answers are untrusted: a key, secret or token must be
 * printable ASCII of bounded length (no header can be forged with one).
 *
 * Keys.  Temporary credentials (with an Expiration) are fetched again on
 * the request path once a quarter of their life, 5 minutes at most, is
 * left: one request fetches while the others go on with the current ones;
 * only when those are within a tenth of their life (10 s at most) of
 * expiring do the others wait, bounded by their own deadline.  A fetch
 * that fails while the current credentials hold is logged and tried again
 * 10 s later.  A key the store calls expired (s3_auth_rejected) is fetched
 * again at once.  Keys are reference-counted, immutable, and wiped when
 * the last holder lets go; no message carries a secret or a token.
 */
#ifndef S3_AUTH_H
#define S3_AUTH_H

#include <stdatomic.h>
#include <stdint.h>

#include "sources/s3_http.h"
#include "config/tf_s3.h"
#include "util/tf_status.h"

typedef struct s3_key {
	atomic_uint refs;
	char *access_key, *secret, *token;	/* token may be NULL */
	int64_t expires;			/* Unix seconds; 0: never */
	int64_t got;				/* when fetched (Unix seconds) */
} s3_key;

typedef struct s3_auth s3_auth;

/*
 * The chain for s: finds its source, fetches the first credentials within
 * b.  *region gets the region to use (s->region, else the profile's, else
 * us-east-1), also when anonymous; *out is NULL then (nothing signed).
 */
tf_status s3_auth_new(const tf_s3_settings *s, const s3_bound *b, s3_auth **out, char **region, tf_error *err);
void s3_auth_free(s3_auth *a);

/* Where the keys come from, for the log ("web identity: role 'arn:...'
 * through STS https://..."); never a secret. */
const char *s3_auth_origin(const s3_auth *a);
/* Whether the keys expire (and are fetched again). */
bool s3_auth_temporary(const s3_auth *a);

/* A line for the log (a fetch that failed while the current keys hold). */
void s3_auth_set_warn(s3_auth *a, void (*warn)(void *arg, const char *msg), void *arg);

/* The current key (a reference: give it back with s3_key_put), fetched
 * again first if due, as the header says. */
tf_status s3_auth_key(s3_auth *a, const s3_bound *b, s3_key **out, tf_error *err);
/* The store refused k as expired: the next s3_auth_key fetches afresh
 * (unless k was already replaced). */
void s3_auth_rejected(s3_auth *a, const s3_key *k);
void s3_key_put(s3_key *k);

/* ---- the parts, exposed for the unit tests ---- */

/*
 * Credentials JSON: credential_process's (Version 1, SessionToken), the
 * container service's and IMDS's (Token; IMDS's Code, when present, must
 * be "Success").  Expiration, when present, an ISO 8601 time.
 */
typedef enum { S3_JSON_PROCESS, S3_JSON_CONTAINER, S3_JSON_IMDS } s3_json_kind;
tf_status s3_parse_cred_json(const char *json, size_t len, s3_json_kind kind, s3_key **out, tf_error *err);
/* A credential_process line into words (NULL-terminated, malloc'd). */
tf_status s3_split_command(const char *line, char ***argv, tf_error *err);
void s3_free_argv(char **argv);
/* "2024-01-01T00:00:00Z" (fraction, offset allowed) -> Unix seconds. */
bool s3_parse_expiration(const char *s, int64_t *out);

#endif
