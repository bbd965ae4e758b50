/*
 * tf_s3.c - the [s3] settings: defaults, parsing of one key, environment
 * fallbacks.
 */
#include "config.h"

#include "config/tf_s3.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void tf_s3_settings_init(tf_s3_settings *s)
{
	*s = (tf_s3_settings){
		.path_style = TF_S3_AUTO, .list_ttl = TF_S3_DEFAULT_LIST_TTL,
		.timeout_ms = TF_S3_DEFAULT_TIMEOUT_MS, .retries = TF_S3_DEFAULT_RETRIES,
		.max_requests = TF_S3_DEFAULT_MAX_REQUESTS, .deadline_ms = TF_S3_DEFAULT_DEADLINE_MS,
		.list_max_pages = TF_S3_DEFAULT_LIST_MAX_PAGES, .list_max_bytes = TF_S3_DEFAULT_LIST_MAX_BYTES,
		.cache_dir_size = TF_S3_DEFAULT_CACHE_DIR_SIZE, .cache_dir_min_free = TF_S3_DEFAULT_CACHE_DIR_MIN_FREE,
	};
}

void tf_s3_settings_clear(tf_s3_settings *s)
{
	free(s->endpoint), free(s->region), free(s->profile), free(s->credentials), free(s->expected_owner);
	free(s->cache_dir);
	tf_s3_settings_init(s);
}

static bool dup_or_null(char **dst, const char *src)
{
	*dst = src ? strdup(src) : NULL;
	return !src || *dst;
}

tf_status tf_s3_settings_copy(tf_s3_settings *dst, const tf_s3_settings *src, tf_error *err)
{
	*dst = *src;
	dst->endpoint = dst->region = dst->profile = dst->credentials = dst->expected_owner = NULL;
	dst->cache_dir = NULL;
	if (dup_or_null(&dst->endpoint, src->endpoint) && dup_or_null(&dst->region, src->region) &&
	    dup_or_null(&dst->profile, src->profile) && dup_or_null(&dst->credentials, src->credentials) &&
	    dup_or_null(&dst->expected_owner, src->expected_owner) && dup_or_null(&dst->cache_dir, src->cache_dir))
		return TF_OK;
	tf_s3_settings_clear(dst);
	return tf_err(err, TF_E_NOMEM, "out of memory");
}

static bool parse_yesno(const char *v, bool *out)
{
	if (!strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcmp(v, "1") || !strcasecmp(v, "on"))
		return *out = true, true;
	if (!strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcmp(v, "0") || !strcasecmp(v, "off"))
		return *out = false, true;
	return false;
}

/* A decimal number in [lo, hi], with an optional fraction when scale > 1
 * ("2.5" seconds -> 2500 ms). */
static bool parse_num(const char *v, double scale, double lo, double hi, uint32_t *out)
{
	char *end;
	double d;

	if (!(v[0] >= '0' && v[0] <= '9'))
		return false;
	errno = 0;
	d = strtod(v, &end) * scale;
	if (errno || *end || d < lo || d > hi)
		return false;
	*out = (uint32_t)(d + 0.5);
	return true;
}

/* A byte count with an optional K, M or G (powers of 1024) in [lo, hi]. */
static bool parse_bytes(const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	unsigned long long n;
	unsigned shift = 0;

	if (!(v[0] >= '0' && v[0] <= '9'))
		return false;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (*end && !end[1])
		shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20
		      : *end == 'G' || *end == 'g' ? 30 : *end == 'T' || *end == 't' ? 40 : 64;
	else if (*end)
		shift = 64;
	if (errno || shift == 64 || n > (hi >> shift) || (n << shift) < lo)
		return false;
	*out = (uint64_t)n << shift;
	return true;
}

/* Whether url is "http://HOST[:PORT][/]" or https; no path, query or user. */
static bool endpoint_ok(const char *url)
{
	const char *host = !strncmp(url, "http://", 7) ? url + 7 : !strncmp(url, "https://", 8) ? url + 8 : NULL;
	size_t n;

	if (!host || !*host)
		return false;
	n = strcspn(host, "/?#@ ");
	return host[n] == '\0' || (host[n] == '/' && host[n + 1] == '\0');
}

static tf_status set_string(char **dst, const char *value, tf_error *err)
{
	char *v = strdup(value);

	if (!v)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	free(*dst);
	*dst = v;
	return TF_OK;
}

tf_status tf_s3_settings_set(tf_s3_settings *s, const char *name, const char *value,
			     const char *relative_to, tf_error *err)
{
	bool b;

	if (!strcmp(name, "endpoint")) {
		if (!endpoint_ok(value))
			return tf_err(err, TF_E_INVAL, "endpoint must be http://HOST[:PORT] or https://HOST[:PORT], "
				      "not '%s'", value);
		return set_string(&s->endpoint, value, err);
	}
	if (!strcmp(name, "region"))
		return *value ? set_string(&s->region, value, err) : tf_err(err, TF_E_INVAL, "empty region");
	if (!strcmp(name, "profile"))
		return *value ? set_string(&s->profile, value, err) : tf_err(err, TF_E_INVAL, "empty profile");
	if (!strcmp(name, "path_style") || !strcmp(name, "anonymous") || !strcmp(name, "requester_pays")) {
		if (!parse_yesno(value, &b))
			return tf_err(err, TF_E_INVAL, "%s must be yes or no, not '%s'", name, value);
		if (name[0] == 'p')
			s->path_style = b ? TF_S3_YES : TF_S3_NO;
		else if (name[0] == 'a')
			s->anonymous = b;
		else
			s->requester_pays = b;
		return TF_OK;
	}
	if (!strcmp(name, "expected_owner"))
		return strlen(value) == 12 && strspn(value, "0123456789") == 12 ? set_string(&s->expected_owner, value, err)
		       : tf_err(err, TF_E_INVAL, "expected_owner must be an account id of 12 digits, not '%.40s'", value);
	if (!strcmp(name, "credentials") || !strcmp(name, "cache_dir")) {
		char *p = NULL;
		if (!*value)
			return tf_err(err, TF_E_INVAL, "empty %s", name);
		if (value[0] != '/' && relative_to && asprintf(&p, "%s/%s", relative_to, value) < 0)
			return tf_err(err, TF_E_NOMEM, "out of memory");
		tf_status rc = set_string(name[1] == 'r' ? &s->credentials : &s->cache_dir, p ? p : value, err);
		free(p);
		return rc;
	}
	if (!strcmp(name, "list_ttl"))
		return parse_num(value, 1, 0, 86400 * 365, &s->list_ttl) ? TF_OK
		       : tf_err(err, TF_E_INVAL, "list_ttl must be 0 to 31536000 seconds, not '%s'", value);
	if (!strcmp(name, "timeout"))
		return parse_num(value, 1000, 100, 3600000, &s->timeout_ms) ? TF_OK
		       : tf_err(err, TF_E_INVAL, "timeout must be 0.1 to 3600 seconds, not '%s'", value);
	if (!strcmp(name, "retries"))
		return parse_num(value, 1, 0, 20, &s->retries) ? TF_OK
		       : tf_err(err, TF_E_INVAL, "retries must be 0 to 20, not '%s'", value);
	if (!strcmp(name, "request_deadline"))
		return parse_num(value, 1000, 100, 86400000, &s->deadline_ms) ? TF_OK
		       : tf_err(err, TF_E_INVAL, "request_deadline must be 0.1 to 86400 seconds, not '%s'", value);
	if (!strcmp(name, "list_max_pages"))
		return parse_num(value, 1, 1, 1000000, &s->list_max_pages) ? TF_OK
		       : tf_err(err, TF_E_INVAL, "list_max_pages must be 1 to 1000000, not '%s'", value);
	if (!strcmp(name, "list_max_bytes"))
		return parse_bytes(value, (uint64_t)64 << 10, (uint64_t)4 << 30, &s->list_max_bytes) ? TF_OK
		       : tf_err(err, TF_E_INVAL, "list_max_bytes must be 64K to 4G (a number with K, M or G), "
				"not '%s'", value);
	if (!strcmp(name, "cache_dir_size") || !strcmp(name, "cache_dir_min_free"))
		return parse_bytes(value, name[10] == 's' ? (uint64_t)4 << 20 : 0, (uint64_t)1 << 50,
				   name[10] == 's' ? &s->cache_dir_size : &s->cache_dir_min_free) ? TF_OK
		       : tf_err(err, TF_E_INVAL, "%s must be %s to 1024T (a number with K, M, G or T), not '%s'",
				name, name[10] == 's' ? "4M" : "0", value);
	if (!strcmp(name, "max_requests"))
		return parse_num(value, 1, 1, 256, &s->max_requests) ? TF_OK
		       : tf_err(err, TF_E_INVAL, "max_requests must be 1 to 256, not '%s'", value);
	return tf_err(err, TF_E_INVAL, "unknown key '%s' in [s3]", name);
}

static const char *env_nonempty(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

tf_status tf_s3_settings_resolve(tf_s3_settings *s, tf_error *err)
{
	const char *v;
	tf_status rc = TF_OK;

	if (!s->endpoint && (v = env_nonempty("AWS_ENDPOINT_URL"))) {
		if (!endpoint_ok(v))
			return tf_err(err, TF_E_INVAL, "AWS_ENDPOINT_URL must be http[s]://HOST[:PORT]");
		rc = set_string(&s->endpoint, v, err);
	}
	if (rc == TF_OK && !s->region &&
	    ((v = env_nonempty("AWS_REGION")) || (v = env_nonempty("AWS_DEFAULT_REGION"))))
		rc = set_string(&s->region, v, err);
	if (rc == TF_OK && !s->profile)
		rc = set_string(&s->profile, (v = env_nonempty("AWS_PROFILE")) ? v : "default", err);
	/* For AWS, auto stays: the bucket's name decides (s3_client_new). */
	if (s->path_style == TF_S3_AUTO && s->endpoint)
		s->path_style = TF_S3_YES;
	return rc;
}
