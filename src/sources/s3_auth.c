/*
 * s3_auth.c - the credential chain: where keys come from (which source
 * applies), handing them out and fetching them again before they expire.
 * Fetching from one source (STS, the container service, IMDS, a process)
 * is s3_auth_fetch.c's.
 */
#include "config.h"

#include "sources/s3_auth_int.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "sources/s3_creds.h"

extern char **environ;

#define SOFT_MARGIN_MAX 300		/* fetch again 5 min before expiry at most ... */
#define HARD_MARGIN_MAX 10		/* ... and stop using a key 10 s before */
#define RETRY_AFTER_NS ((int64_t)10 * 1000000000)
#define ROLE_DEPTH_MAX 5

struct s3_auth {
	provider *p;
	s3_http *http;			/* for the credential services */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	s3_key *cur;
	bool refreshing, force;
	uint64_t gen;			/* fetches ended */
	int64_t retry_at;		/* monotonic: no fetch before (after one failed) */
	char last_err[TF_ERRMSG_MAX];
	void (*warn)(void *arg, const char *msg);
	void *warn_arg;
};

/* ---- the chain -------------------------------------------------------------------------------- */

static void provider_free(provider *p)
{
	if (!p)
		return;
	provider_free(p->source);
	s3_key_put(p->fixed);
	s3_wipe_free(p->auth_token);
	free(p->what), free(p->role_arn), free(p->session_name), free(p->external_id), free(p->token_file);
	free(p->sts_url), free(p->sts_host), free(p->sts_region), free(p->command), free(p->url), free(p->auth_file);
	free(p);
}

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

static provider *provider_new(pkind kind, tf_error *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static provider *provider_new(pkind kind, tf_error *err, const char *fmt, ...)
{
	provider *p = calloc(1, sizeof(*p));
	va_list ap;
	int n;

	if (!p)
		return tf_err(err, TF_E_NOMEM, "out of memory"), NULL;
	p->kind = kind;
	va_start(ap, fmt);
	n = vasprintf(&p->what, fmt, ap);
	va_end(ap);
	if (n < 0) {
		free(p);
		return tf_err(err, TF_E_NOMEM, "out of memory"), NULL;
	}
	return p;
}

static bool dup_to(char **dst, const char *src)
{
	return !src || (*dst = strdup(src));
}

/* STS's URL, host and region for p (the SDKs' endpoint variables). */
static tf_status sts_endpoint(provider *p, const char *region, tf_error *err)
{
	const char *ep = env("AWS_ENDPOINT_URL_STS");
	size_t n;

	ep = ep ? ep : env("AWS_ENDPOINT_URL");
	if (ep && strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8))
		return tf_err(err, TF_E_INVAL, "AWS_ENDPOINT_URL_STS must be http[s]://HOST[:PORT]");
	if (ep)
		p->sts_url = strdup(ep);
	else if (asprintf(&p->sts_url, "https://sts.%s.amazonaws.com/", region) < 0)
		p->sts_url = NULL;
	if (p->sts_url && (n = strlen(p->sts_url)) && p->sts_url[n - 1] != '/' && strchr(p->sts_url + 8, '/') == NULL) {
		char *u = NULL;
		if (asprintf(&u, "%s/", p->sts_url) < 0)
			u = NULL;
		free(p->sts_url);
		p->sts_url = u;
	}
	if (!p->sts_url || !(p->sts_host = s3_host_of(p->sts_url)) || !(p->sts_region = strdup(region)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	return TF_OK;
}

static tf_status role_provider(pkind kind, const char *arn, const char *session, const char *external,
			       const char *token_file, const char *region, const char *from, provider **out,
			       tf_error *err)
{
	char dflt[64];
	provider *p;

	snprintf(dflt, sizeof(dflt), "tilefs-%lld", (long long)time(NULL));
	*out = p = provider_new(kind, err, "%s: role '%s' through STS", from, arn);
	if (!p)
		return TF_E_NOMEM;
	if (!dup_to(&p->role_arn, arn) || !dup_to(&p->session_name, session ? session : dflt) ||
	    !dup_to(&p->external_id, external) || !dup_to(&p->token_file, token_file))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if (sts_endpoint(p, region, err) != TF_OK)
		return TF_E_INVAL;
	free(p->what);
	if (asprintf(&p->what, "%s: role '%s' through STS %s", from, arn, p->sts_url) < 0)
		p->what = NULL;
	return p->what ? TF_OK : tf_err(err, TF_E_NOMEM, "out of memory");
}

/* What one profile says, merged over the credentials file, the config
 * file and [s3] credentials = FILE (the first that says it wins; keys
 * come as a pair from one file). */
typedef struct profile {
	s3_creds c;
	char *keys_from, *process_from;	/* the files they come from */
	bool found;
} profile;

static void profile_free(profile *p)
{
	s3_creds_free(&p->c);
	free(p->keys_from), free(p->process_from);
}

static void take(char **dst, char **src)
{
	if (!*dst)
		*dst = *src, *src = NULL;
}

static tf_status profile_read(const tf_s3_settings *s, const char *name, bool region_only, profile *out,
			      tf_error *err)
{
	char *cred = s3_aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
	char *conf = s3_aws_file("AWS_CONFIG_FILE", "config");
	const char *paths[3] = { cred, conf, s->credentials };
	int flags[3] = { 0, S3_CF_CONFIG, S3_CF_MUST_EXIST };
	tf_status rc = TF_OK;

	memset(out, 0, sizeof(*out));
	for (int i = 0; i < 3 && rc == TF_OK; i++) {
		s3_creds c = { 0 };
		bool found = false;
		/* Only a region wanted: it lives in the config file. */
		if (!paths[i] || (region_only && i != 1) || (i == 2 && out->c.access_key))
			continue;
		rc = s3_creds_read_file(paths[i], name, flags[i] | (region_only || out->c.access_key ? S3_CF_NO_SECRETS : 0),
					&c, &found, err);
		out->found = out->found || found;
		if (rc == TF_OK && !out->c.access_key && c.access_key && c.secret) {
			out->c.access_key = c.access_key, out->c.secret = c.secret, out->c.token = c.token;
			c.access_key = c.secret = c.token = NULL;
			if (!(out->keys_from = strdup(paths[i])))
				rc = tf_err(err, TF_E_NOMEM, "out of memory");
		}
		if (rc == TF_OK && c.process && !out->c.process && !(out->process_from = strdup(paths[i])))
			rc = tf_err(err, TF_E_NOMEM, "out of memory");
		take(&out->c.region, &c.region), take(&out->c.process, &c.process);
		take(&out->c.role_arn, &c.role_arn), take(&out->c.source_profile, &c.source_profile);
		take(&out->c.session_name, &c.session_name), take(&out->c.external_id, &c.external_id);
		take(&out->c.web_token_file, &c.web_token_file), take(&out->c.credential_source, &c.credential_source);
		s3_creds_free(&c);
		if (rc == TF_OK && i == 2 && !out->c.access_key && !out->c.process && !out->c.role_arn)
			rc = tf_err(err, TF_E_INVAL, "%s: no aws_access_key_id and aws_secret_access_key for "
				    "profile '%s'", paths[i], name);
	}
	free(cred), free(conf);
	if (rc != TF_OK)
		profile_free(out);
	return rc;
}

/* The provider of profile name (*out NULL: the profile gives none). */
static tf_status from_profile(const tf_s3_settings *s, const char *name, const char *region, int depth,
			      provider **out, tf_error *err)
{
	profile pr;
	tf_status rc;
	provider *src = NULL;

	*out = NULL;
	if (depth > ROLE_DEPTH_MAX)
		return tf_err(err, TF_E_INVAL, "profile '%s': source_profile chains more than %d deep", name,
			      ROLE_DEPTH_MAX);
	if ((rc = profile_read(s, name, false, &pr, err)) != TF_OK)
		return rc;
	if (pr.c.role_arn) {
		char from[300];
		snprintf(from, sizeof(from), "profile '%.100s'", name);
		if (pr.c.source_profile && !strcmp(pr.c.source_profile, name)) {	/* itself: its own keys */
			if (!pr.c.access_key)
				rc = tf_err(err, TF_E_INVAL, "profile '%s' is its own source_profile but has no keys",
					    name);
			else if (!(src = provider_new(P_STATIC, err, "%s profile '%s'", pr.keys_from, name)))
				rc = TF_E_NOMEM;
			else
				rc = s3_key_new(pr.c.access_key, pr.c.secret, pr.c.token, 0, &src->fixed, err);
		} else if (pr.c.source_profile) {
			rc = from_profile(s, pr.c.source_profile, region, depth + 1, &src, err);
			if (rc == TF_OK && !src)
				rc = tf_err(err, TF_E_ACCESS, "profile '%s': its source_profile '%s' gives no "
					    "credentials", name, pr.c.source_profile);
		} else if (!pr.c.web_token_file) {
			rc = tf_err(err, TF_E_INVAL, "profile '%s': role_arn needs source_profile or "
				    "web_identity_token_file%s", name, pr.c.credential_source
				    ? " (credential_source is not supported)" : "");
		}
		if (rc == TF_OK)
			rc = role_provider(src ? P_ASSUME_ROLE : P_WEB_IDENTITY, pr.c.role_arn, pr.c.session_name,
					   pr.c.external_id, pr.c.web_token_file, region, from, out, err);
		if (*out)
			(*out)->source = src, src = NULL;
	} else if (pr.c.access_key) {
		if ((*out = provider_new(P_STATIC, err, "%s profile '%s'", pr.keys_from, name)))
			rc = s3_key_new(pr.c.access_key, pr.c.secret, pr.c.token, 0, &(*out)->fixed, err);
		else
			rc = TF_E_NOMEM;
	} else if (pr.c.process) {
		if ((*out = provider_new(P_PROCESS, err, "%s profile '%s': credential_process", pr.process_from, name)))
			rc = dup_to(&(*out)->command, pr.c.process) ? TF_OK : tf_err(err, TF_E_NOMEM, "out of memory");
		else
			rc = TF_E_NOMEM;
	}
	provider_free(src);
	profile_free(&pr);
	if (rc != TF_OK) {
		provider_free(*out);
		*out = NULL;
	}
	return rc;
}

/* Whether an http:// container URL's host is one the SDKs allow: loopback
 * or the ECS and EKS agents' addresses. */
static bool container_host_ok(const char *url)
{
	char *h = s3_host_of(url), *colon;
	bool ok;

	if (!h)
		return false;
	if (h[0] == '[') {
		colon = strchr(h, ']');
		if (colon)
			colon[1] = '\0';
	} else if ((colon = strchr(h, ':'))) {
		*colon = '\0';
	}
	ok = !strncmp(h, "127.", 4) || !strcmp(h, "localhost") || !strcmp(h, "[::1]") ||
	     !strcmp(h, "169.254.170.2") || !strcmp(h, "169.254.170.23") || !strcasecmp(h, "[fd00:ec2::23]");
	free(h);
	return ok;
}

static tf_status from_container(provider **out, tf_error *err)
{
	const char *rel = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"), *full = env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	provider *p;

	*out = NULL;
	if (!rel && !full)
		return TF_OK;
	if (!rel && strncmp(full, "https://", 8) && !(strncmp(full, "http://", 7) == 0 && container_host_ok(full)))
		return tf_err(err, TF_E_INVAL, "AWS_CONTAINER_CREDENTIALS_FULL_URI must be https://, or http:// to "
			      "a loopback address or 169.254.170.2 or 169.254.170.23");
	if (!(*out = p = provider_new(P_CONTAINER, err, "container credentials")))
		return TF_E_NOMEM;
	if ((rel ? asprintf(&p->url, "http://169.254.170.2%s%s", rel[0] == '/' ? "" : "/", rel)
		 : asprintf(&p->url, "%s", full)) < 0)
		p->url = NULL;
	if (!p->url || !dup_to(&p->auth_file, env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")) ||
	    (!p->auth_file && !dup_to(&p->auth_token, env("AWS_CONTAINER_AUTHORIZATION_TOKEN"))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	free(p->what);
	if (asprintf(&p->what, "container credentials %s", p->url) < 0)
		p->what = NULL;
	return p->what ? TF_OK : tf_err(err, TF_E_NOMEM, "out of memory");
}

static tf_status from_imds(provider **out, tf_error *err)
{
	const char *ep = env("AWS_EC2_METADATA_SERVICE_ENDPOINT"), *mode = env("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE");
	const char *off = env("AWS_EC2_METADATA_DISABLED");
	provider *p;
	size_t n;

	*out = NULL;
	if (off && !strcasecmp(off, "true"))
		return TF_OK;
	if (!ep)
		ep = mode && !strcasecmp(mode, "IPv6") ? "http://[fd00:ec2::254]" : "http://169.254.169.254";
	if (strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8))
		return tf_err(err, TF_E_INVAL, "AWS_EC2_METADATA_SERVICE_ENDPOINT must be http[s]://HOST[:PORT]");
	if (!(*out = p = provider_new(P_IMDS, err, "instance metadata (IMDSv2) %s", ep)) || !(p->url = strdup(ep)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	while ((n = strlen(p->url)) > 8 && p->url[n - 1] == '/')
		p->url[n - 1] = '\0';
	return TF_OK;
}

/* The chain's first source that applies, or *out NULL (none). */
static tf_status find_source(const tf_s3_settings *s, const char *region, provider **out, tf_error *err)
{
	const char *id = env("AWS_ACCESS_KEY_ID"), *secret = env("AWS_SECRET_ACCESS_KEY");
	const char *tf = env("AWS_WEB_IDENTITY_TOKEN_FILE"), *arn = env("AWS_ROLE_ARN");
	tf_status rc;

	*out = NULL;
	if (id && secret) {
		if (!(*out = provider_new(P_STATIC, err, "the environment (AWS_ACCESS_KEY_ID)")))
			return TF_E_NOMEM;
		return s3_key_new(id, secret, env("AWS_SESSION_TOKEN"), 0, &(*out)->fixed, err);
	}
	if (tf && arn)
		return role_provider(P_WEB_IDENTITY, arn, env("AWS_ROLE_SESSION_NAME"), NULL, tf, region,
				     "web identity (AWS_WEB_IDENTITY_TOKEN_FILE)", out, err);
	if ((rc = from_profile(s, s->profile ? s->profile : "default", region, 0, out, err)) != TF_OK || *out)
		return rc;
	if ((rc = from_container(out, err)) != TF_OK || *out)
		return rc;
	return from_imds(out, err);
}

tf_status s3_auth_new(const tf_s3_settings *s, const s3_bound *b, s3_auth **out, char **region, tf_error *err)
{
	const char *name = s->profile ? s->profile : "default";
	s3_auth *a = NULL;
	profile pr;
	tf_status rc;

	*out = NULL;
	*region = NULL;
	/* The profile's region, also when its keys are not wanted (only read, then). */
	if ((rc = profile_read(s, name, true, &pr, err)) != TF_OK)
		return rc;
	*region = strdup(s->region ? s->region : pr.c.region ? pr.c.region : "us-east-1");
	profile_free(&pr);
	if (!*region)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if (s->anonymous)
		return TF_OK;
	if (!(a = calloc(1, sizeof(*a)))) {
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
		goto fail;
	}
	pthread_mutex_init(&a->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->cv, &ca);
	pthread_condattr_destroy(&ca);
	if ((rc = find_source(s, *region, &a->p, err)) != TF_OK)
		goto fail;
	if (!a->p) {
		rc = tf_err(err, TF_E_ACCESS, "no credentials: none in the environment (AWS_ACCESS_KEY_ID), no web "
			    "identity (AWS_WEB_IDENTITY_TOKEN_FILE), no profile '%s' with keys, credential_process or "
			    "role_arn, no container credentials, instance metadata disabled; or set anonymous = yes",
			    name);
		goto fail;
	}
	if (a->p->kind != P_STATIC && (rc = s3_http_new(STS_TIMEOUT_MS, 2, &a->http, err)) != TF_OK)
		goto fail;
	if ((rc = s3_provider_fetch(a->http, b, a->p, &a->cur, err)) != TF_OK) {
		tf_err_prefix(err, "credentials from %s", a->p->what);
		if (a->p->kind == P_IMDS)	/* the last resort: say what else was looked for */
			tf_err_prefix(err, "no credentials in the environment, web identity, profile '%s' or container "
				      "credentials", name);
		goto fail;
	}
	*out = a;
	return TF_OK;
fail:
	s3_auth_free(a);
	free(*region);
	*region = NULL;
	return rc;
}

void s3_auth_free(s3_auth *a)
{
	if (!a)
		return;
	s3_key_put(a->cur);
	provider_free(a->p);
	s3_http_free(a->http);
	pthread_mutex_destroy(&a->mu);
	pthread_cond_destroy(&a->cv);
	OPENSSL_cleanse(a->last_err, sizeof(a->last_err));
	free(a);
}

const char *s3_auth_origin(const s3_auth *a)
{
	return a->p->what;
}

bool s3_auth_temporary(const s3_auth *a)
{
	return a->p->kind != P_STATIC;
}

void s3_auth_set_warn(s3_auth *a, void (*warn)(void *arg, const char *msg), void *arg)
{
	a->warn = warn, a->warn_arg = arg;
}

/* ---- handing keys out ------------------------------------------------------------------------- */

typedef enum { K_FRESH, K_SOFT, K_HARD } kstate;

static kstate key_state(const s3_auth *a, const s3_key *k)
{
	int64_t now = (int64_t)time(NULL), life, soft, hard;

	if (a->force)
		return K_HARD;
	if (!k->expires)
		return K_FRESH;
	life = k->expires - k->got;
	life = life > 0 ? life : 0;
	soft = life / 4 < SOFT_MARGIN_MAX ? life / 4 : SOFT_MARGIN_MAX;
	hard = life / 10 < HARD_MARGIN_MAX ? life / 10 : HARD_MARGIN_MAX;
	return now >= k->expires - hard ? K_HARD : now >= k->expires - soft ? K_SOFT : K_FRESH;
}

static bool wait_until(s3_auth *a, const s3_bound *b)
{
	int64_t until = tf_now_ns() + 100000000;
	struct timespec ts;

	until = until < b->at_ns ? until : b->at_ns;
	ts = (struct timespec){ (time_t)(until / 1000000000), (long)(until % 1000000000) };
	pthread_cond_timedwait(&a->cv, &a->mu, &ts);
	return !s3_bound_over(b);
}

tf_status s3_auth_key(s3_auth *a, const s3_bound *b, s3_key **out, tf_error *err)
{
	tf_status rc = TF_OK;
	char note[TF_ERRMSG_MAX + 200];
	bool tell = false;
	uint64_t waited_gen = 0;
	bool waited = false;

	note[0] = '\0';
	pthread_mutex_lock(&a->mu);
	for (;;) {
		kstate st = key_state(a, a->cur);
		if (st == K_FRESH || (st == K_SOFT && (a->refreshing || tf_now_ns() < a->retry_at))) {
			*out = s3_key_get(a->cur);
			break;
		}
		if (a->refreshing || (waited && a->gen != waited_gen)) {
			if (waited && a->gen != waited_gen && !a->refreshing) {	/* the fetch waited for failed */
				rc = tf_err(err, TF_E_ACCESS, "%s", a->last_err);
				break;
			}
			if (!waited)
				waited = true, waited_gen = a->gen;
			if (!wait_until(a, b)) {
				rc = tf_err(err, TF_E_IO, "credentials from %s: none fresh in time (a fetch is "
					    "under way)", a->p->what);
				break;
			}
			continue;
		}
		/* This request fetches; the others go on with the current key, or wait. */
		s3_key *k = NULL;
		tf_error fe;
		a->refreshing = true;
		pthread_mutex_unlock(&a->mu);
		tf_status frc = s3_provider_fetch(a->http, b, a->p, &k, &fe);
		pthread_mutex_lock(&a->mu);
		a->refreshing = false;
		a->gen++;
		pthread_cond_broadcast(&a->cv);
		if (frc == TF_OK) {
			s3_key_put(a->cur);
			a->cur = k;
			a->force = false;
			a->retry_at = 0;
			continue;
		}
		snprintf(a->last_err, sizeof(a->last_err), "credentials from %.150s: %.300s", a->p->what, fe.msg);
		a->retry_at = tf_now_ns() + RETRY_AFTER_NS;
		if (st == K_SOFT) {
			snprintf(note, sizeof(note), "%s; the current ones are used until they expire, in %lld s",
				 a->last_err, (long long)(a->cur->expires - (int64_t)time(NULL)));
			tell = true;
			*out = s3_key_get(a->cur);
			break;
		}
		rc = tf_err(err, frc == TF_E_NOMEM ? TF_E_NOMEM : TF_E_ACCESS, "%s", a->last_err);
		break;
	}
	pthread_mutex_unlock(&a->mu);
	if (tell && a->warn)
		a->warn(a->warn_arg, note);
	return rc;
}

void s3_auth_rejected(s3_auth *a, const s3_key *k)
{
	pthread_mutex_lock(&a->mu);
	if (a->cur == k && a->p->kind != P_STATIC)
		a->force = true;
	pthread_mutex_unlock(&a->mu);
}
