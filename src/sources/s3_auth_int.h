/*
 * s3_auth_int.h - what the credential chain (s3_auth.c) and the fetching
 * of keys from one source of it (s3_auth_fetch.c) share.  Nothing else
 * includes this file.
 */
#ifndef S3_AUTH_INT_H
#define S3_AUTH_INT_H

#include "sources/s3_auth.h"
#include "sources/s3_http.h"

#define STS_TIMEOUT_MS 10000

typedef enum { P_STATIC, P_WEB_IDENTITY, P_PROCESS, P_ASSUME_ROLE, P_CONTAINER, P_IMDS } pkind;

typedef struct provider {
	pkind kind;
	char *what;			/* for messages */
	s3_key *fixed;			/* P_STATIC */
	char *role_arn, *session_name, *external_id, *token_file;	/* STS */
	char *sts_url, *sts_host, *sts_region;
	char *command;			/* P_PROCESS */
	char *url, *auth_token, *auth_file;	/* P_CONTAINER (url: also P_IMDS's base) */
	struct provider *source;	/* P_ASSUME_ROLE: whose keys sign the request */
} provider;

/* One source's keys, fetched now (a fixed key: another reference to it). */
tf_status s3_provider_fetch(s3_http *h, const s3_bound *b, provider *p, s3_key **out, tf_error *err);
/* A key holding copies of id, secret and token (checked); expires as given. */
tf_status s3_key_new(const char *id, const char *secret, const char *token, int64_t expires, s3_key **out,
		     tf_error *err);
s3_key *s3_key_get(s3_key *k);
/* Free a string that held a secret, wiped first. */
void s3_wipe_free(char *s);
/* "scheme://host[:port]" -> host[:port] (malloc'd). */
char *s3_host_of(const char *url);

#endif
