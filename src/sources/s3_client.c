/*
 * s3_client.c - S3 requests: URLs, SigV4 headers, retries, exact answers.
 */
#include "config.h"

#include "sources/s3_client.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pthread.h>

#include "sources/s3_auth.h"
#include "sources/s3_http.h"
#include "sources/s3_sign.h"

#define LIST_BODY_MAX ((size_t)16 << 20)
#define ERROR_BODY_MAX ((size_t)64 << 10)
#define BACKOFF_BASE_MS 100
#define BACKOFF_MAX_MS 5000
#define BACKOFF_SLICE_NS 100000000

#define REGION_MAX 64
#define HOST_MAX 512

struct s3_client {
	s3_http *http;
	char *scheme;		/* "http" or "https" */
	char *bucket;
	bool path_style, aws;	/* aws: the endpoint is AWS's regional default */
	s3_auth *auth;		/* NULL: anonymous */
	char *owner;		/* expected_owner, or NULL */
	bool requester_pays;
	pthread_mutex_t mu;	/* region and host: a redirect may change them */
	char region[REGION_MAX];
	char host[HOST_MAX];	/* host[:port] requests go to */
	void (*warn)(void *arg, const char *msg);
	void *warn_arg;
	uint32_t retries;
	_Atomic uint64_t seed;	/* jitter */
	char where[320];
};

/* What one request wants and how its answer is judged. */
typedef struct s3_req {
	bool head;
	const char *key;	/* NULL: the bucket (a listing) */
	const s3_kv *query;
	size_t nquery;
	const char *if_match;
	_Atomic int64_t *mtime_ns;	/* Last-Modified every answer carries (0: none yet) */
	uint64_t off, size;	/* a ranged GET of len bytes at off of size */
	size_t len;
	void *dst;
	const uint8_t *put;	/* a PUT of put_len bytes (NULL: none) */
	size_t put_len;
	size_t whole_max;	/* a GET of a whole object of at most so many bytes (0: none) */
} s3_req;

typedef enum { V_OK, V_RETRY, V_FAIL } verdict;

const char *s3_client_where(const s3_client *c) { return c->where; }
const char *s3_client_bucket(const s3_client *c) { return c->bucket; }

/* The region and host now (a redirect may have changed them). */
static void addr_of(s3_client *c, char region[REGION_MAX], char host[HOST_MAX])
{
	pthread_mutex_lock(&c->mu);
	memcpy(region, c->region, REGION_MAX);
	memcpy(host, c->host, HOST_MAX);
	pthread_mutex_unlock(&c->mu);
}

bool s3_client_id(const s3_client *c, char *buf, size_t n)
{
	char region[REGION_MAX], host[HOST_MAX];
	const char *at;
	int len;

	addr_of((s3_client *)c, region, host);
	at = strrchr(host, '@');
	len = snprintf(buf, n, "%s://%s/%s", c->scheme, at ? at + 1 : host, c->bucket);
	return len > 0 && (size_t)len < n;
}

void s3_client_set_warn(s3_client *c, void (*warn)(void *arg, const char *msg), void *arg)
{
	c->warn = warn, c->warn_arg = arg;
	if (c->auth)
		s3_auth_set_warn(c->auth, warn, arg);
}

const char *s3_client_auth_origin(const s3_client *c)
{
	return c->auth ? s3_auth_origin(c->auth) : NULL;
}

/* ---- set-up --------------------------------------------------------------------------- */

/* Whether bucket may lead the host name: one DNS label of lower-case
 * letters, digits and inner '-'.  A '.' would make two labels, which AWS's
 * wildcard certificate does not cover; '_' and capitals are no host name. */
static bool dns_label(const char *bucket)
{
	size_t n = strlen(bucket);

	return n && n <= 63 && strspn(bucket, "abcdefghijklmnopqrstuvwxyz0123456789-") == n && bucket[0] != '-' &&
	       bucket[n - 1] != '-';
}

/* host (AWS's regional default for region, or the endpoint's) into c->host. */
static bool set_host(s3_client *c, const char *ep_host, size_t n)
{
	int len = c->path_style ? snprintf(c->host, sizeof(c->host), "%.*s", (int)n, ep_host)
				: snprintf(c->host, sizeof(c->host), "%s.%.*s", c->bucket, (int)n, ep_host);

	return len > 0 && (size_t)len < sizeof(c->host);
}

static tf_status split_endpoint(s3_client *c, const tf_s3_settings *s, tf_error *err)
{
	char *def = NULL;
	const char *ep = s->endpoint, *host;
	size_t n;

	if (!ep && asprintf(&def, "https://s3.%s.amazonaws.com", c->region) < 0)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	ep = ep ? ep : def;
	c->aws = !s->endpoint;
	host = strstr(ep, "://");
	if (!host) {
		free(def);
		return tf_err(err, TF_E_INVAL, "endpoint '%s': not a URL", ep);
	}
	n = strcspn(host + 3, "/");
	c->scheme = strndup(ep, (size_t)(host - ep));
	if (!set_host(c, host + 3, n)) {
		free(def);
		return tf_err(err, TF_E_INVAL, "endpoint '%s': a host name too long", ep);
	}
	snprintf(c->where, sizeof(c->where), "s3 %.*s bucket '%.100s'", (int)(host + 3 + n - ep), ep, c->bucket);
	free(def);
	return c->scheme ? TF_OK : tf_err(err, TF_E_NOMEM, "out of memory");
}

tf_status s3_client_new(const tf_s3_settings *s, const char *bucket, s3_client **out, tf_error *err)
{
	s3_client *c = calloc(1, sizeof(*c));
	s3_bound b = { tf_now_ns() + (int64_t)s->deadline_ms * 1000000, NULL, NULL };
	char *region = NULL;
	tf_status rc;

	*out = NULL;
	if (!c || !(c->bucket = strdup(bucket)) || (s->expected_owner && !(c->owner = strdup(s->expected_owner)))) {
		if (c)
			free(c->bucket);
		free(c);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	pthread_mutex_init(&c->mu, NULL);
	c->path_style = s->path_style == TF_S3_YES ||
			(s->path_style == TF_S3_AUTO && (s->endpoint || !dns_label(bucket)));
	c->requester_pays = s->requester_pays;
	c->retries = s->retries;
	atomic_init(&c->seed, (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)c);
	rc = s3_auth_new(s, &b, &c->auth, &region, err);
	if (rc == TF_OK && snprintf(c->region, sizeof(c->region), "%s", region) >= (int)sizeof(c->region))
		rc = tf_err(err, TF_E_INVAL, "region '%.100s': too long", region);
	free(region);
	if (rc == TF_OK)
		rc = split_endpoint(c, s, err);
	if (rc == TF_OK)
		rc = s3_http_new(s->timeout_ms, s->max_requests, &c->http, err);
	if (rc != TF_OK) {
		s3_client_free(c);
		return rc;
	}
	*out = c;
	return TF_OK;
}

void s3_client_free(s3_client *c)
{
	if (!c)
		return;
	s3_http_free(c->http);
	s3_auth_free(c->auth);
	pthread_mutex_destroy(&c->mu);
	free(c->scheme), free(c->bucket), free(c->owner);
	free(c);
}

/* ---- one attempt ---------------------------------------------------------------------- */

/* One "Name: value" line, on the heap: an STS session token alone can run
 * past 4 KB. */
static struct curl_slist *add_header(struct curl_slist *l, bool *ok, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static struct curl_slist *add_header(struct curl_slist *l, bool *ok, const char *fmt, ...)
{
	char *line = NULL;
	struct curl_slist *n = NULL;
	va_list ap;
	int len;

	if (!*ok)
		return l;
	va_start(ap, fmt);
	len = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (len < 0 || !(n = curl_slist_append(l, line)))
		*ok = false;
	free(len < 0 ? NULL : line);
	return n ? n : l;
}

/* The signed headers of r (and Authorization) for path, appended to *l,
 * signed with k for region and host. */
static tf_status sign_headers(s3_client *c, const s3_req *r, const char *path, const s3_key *k,
			      const char *region, const char *host, struct curl_slist **l, tf_error *err)
{
	char date[17], *auth = NULL, sha[65] = S3_EMPTY_SHA256;
	s3_kv h[6] = { { "host", host }, { "x-amz-content-sha256", sha }, { "x-amz-date", date } };
	size_t n = 3;
	s3_sign_req sr = { r->put ? "PUT" : r->head ? "HEAD" : "GET", path, r->query, r->nquery, h, 0, sha, date,
			   region, "s3" };
	bool ok = true;
	tf_status rc;

	if (c->owner)
		h[n++] = (s3_kv){ "x-amz-expected-bucket-owner", c->owner };
	if (c->requester_pays)
		h[n++] = (s3_kv){ "x-amz-request-payer", "requester" };
	if (k->token)
		h[n++] = (s3_kv){ "x-amz-security-token", k->token };
	sr.nheaders = n;
	/* A body is signed by its hash: a store checks the bytes it got against it. */
	if (r->put)
		s3_sha256_hex(r->put, r->put_len, sha);
	s3_amz_date((long long)time(NULL), date);
	if ((rc = s3_sign_auth(&sr, k->access_key, k->secret, &auth, err)) != TF_OK)
		return rc;
	*l = add_header(*l, &ok, "x-amz-content-sha256: %s", sha);
	*l = add_header(*l, &ok, "x-amz-date: %s", date);
	if (k->token)
		*l = add_header(*l, &ok, "x-amz-security-token: %s", k->token);
	*l = add_header(*l, &ok, "Authorization: %s", auth);
	free(auth);
	return ok ? TF_OK : tf_err(err, TF_E_NOMEM, "out of memory");
}

/* URL and headers of r into x (x->url and x->headers are the caller's to
 * free), signed with the key *k (the caller's to put), fetched within b. */
static tf_status build(s3_client *c, const s3_req *r, const s3_bound *b, s3_xfer *x, s3_key **k, tf_error *err)
{
	char *path = NULL, *epath = NULL, *query = s3_canonical_query(r->query, r->nquery), *url = NULL;
	char region[REGION_MAX], host[HOST_MAX];
	struct curl_slist *l = NULL;
	bool ok = true;
	tf_status rc = TF_OK;

	*k = NULL;
	addr_of(c, region, host);
	if (c->path_style ? asprintf(&path, "/%s%s%s", c->bucket, r->key ? "/" : "", r->key ? r->key : "") < 0
			  : asprintf(&path, "/%s", r->key ? r->key : "") < 0)
		path = NULL;
	if (!query || !path || !(epath = s3_uri_encode(path, true)) ||
	    asprintf(&url, "%s://%s%s%s%s", c->scheme, host, epath, *query ? "?" : "", query) < 0) {
		url = NULL;
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	}
	l = add_header(l, &ok, "Host: %s", host);
	l = add_header(l, &ok, "Accept:");	/* curl's "*" + "/" + "*" default is not wanted */
	if (r->dst && r->len)
		l = add_header(l, &ok, "Range: bytes=%" PRIu64 "-%" PRIu64, r->off, r->off + r->len - 1);
	if (r->if_match && *r->if_match)
		l = add_header(l, &ok, "If-Match: \"%s\"", r->if_match);
	if (r->put) {
		l = add_header(l, &ok, "Content-Type: application/octet-stream");
		l = add_header(l, &ok, "Expect:");	/* no wait for a 100 Continue */
	}
	if (c->owner)
		l = add_header(l, &ok, "x-amz-expected-bucket-owner: %s", c->owner);
	if (c->requester_pays)
		l = add_header(l, &ok, "x-amz-request-payer: requester");
	if (!ok && rc == TF_OK)
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	if (rc == TF_OK && c->auth && (rc = s3_auth_key(c->auth, b, k, err)) == TF_OK)
		rc = sign_headers(c, r, path, *k, region, host, &l, err);
	free(path), free(epath), free(query);
	x->url = url;
	x->headers = l;
	return rc;
}

/* ---- judging an answer ------------------------------------------------------------------- */

static bool retryable_curl(CURLcode cc)
{
	switch (cc) {
	case CURLE_UNSUPPORTED_PROTOCOL: case CURLE_URL_MALFORMAT: case CURLE_OUT_OF_MEMORY:
	case CURLE_PEER_FAILED_VERIFICATION: case CURLE_SSL_CERTPROBLEM: case CURLE_SSL_CACERT_BADFILE:
	case CURLE_BAD_FUNCTION_ARGUMENT: case CURLE_NOT_BUILT_IN:
		return false;
	default:
		return true;
	}
}

/* Whether the answer's Last-Modified is the one every answer of r's
 * version carried so far (the first answer's is kept). */
static bool same_mtime(const s3_req *r, const s3_xfer *x)
{
	int64_t seen = 0;

	if (!r->mtime_ns || !x->mtime_ns)
		return true;
	return atomic_compare_exchange_strong(r->mtime_ns, &seen, x->mtime_ns) || seen == x->mtime_ns;
}

/*
 * Whether a 2xx answer is exactly what r asked for, of the version r
 * pins; why not into why, the status into code.  A store may ignore
 * If-Match: so an answer must carry the ETag pinned (one carrying none
 * proves nothing), the size pinned and the Last-Modified of the answers
 * before it, or it is another version's.
 */
static verdict check_body(const s3_req *r, const s3_xfer *x, tf_status *code, const char **why)
{
	*code = TF_E_STALE;
	if (r->if_match && *r->if_match && !x->has_etag) {
		*code = TF_E_IO;
		*why = "no ETag in the answer (so no proof it is the version opened)";
		return V_FAIL;
	}
	if (r->if_match && *r->if_match && strcmp(x->etag, r->if_match)) {
		*why = "the object was replaced (ETag changed)";
		return V_FAIL;
	}
	if (!same_mtime(r, x)) {
		*why = "the object was replaced (Last-Modified changed)";
		return V_FAIL;
	}
	*code = TF_E_IO;
	if (!r->dst)
		return V_OK;
	if (x->status == 200 && r->off == 0 && r->len == r->size && x->got == r->len)
		return V_OK;	/* a store that answers the whole object */
	if (x->status != 206 || !x->has_crange) {
		*why = "the answer is not the range asked for";
		return V_RETRY;
	}
	if (x->cr_total != r->size) {
		*code = TF_E_STALE;
		*why = "the object's size changed";
		return V_FAIL;
	}
	if (x->cr_first != r->off || x->cr_last != r->off + r->len - 1 || x->got != r->len) {
		*why = "a short or misplaced body";
		return V_RETRY;
	}
	return V_OK;
}

static tf_status status_code(long status)
{
	return status == 404 ? TF_E_NOTFOUND : status == 403 || status == 401 ? TF_E_ACCESS
	     : status == 412 || status == 416 ? TF_E_STALE : TF_E_IO;
}

/* A final status other than 2xx: it decides, however the (capped) body ended. */
static bool refused(const s3_xfer *x)
{
	return x->status && (x->status < 200 || x->status >= 300);
}

static verdict judge(const s3_req *r, const s3_xfer *x, tf_status *code, const char **why)
{
	*code = TF_E_IO;
	*why = NULL;
	if (refused(x)) {
		*code = status_code(x->status);
		return x->status == 408 || x->status == 429 || x->status >= 500 ? V_RETRY : V_FAIL;
	}
	if (x->gone) {
		*why = "the caller is gone";
		return V_FAIL;
	}
	if (x->cc != CURLE_OK && x->overflow && r->whole_max) {
		*code = TF_E_CORRUPT;	/* the same object again would be as long */
		*why = "larger than allowed";
		return V_FAIL;
	}
	if (x->cc != CURLE_OK) {
		*why = x->overflow ? "a body longer than asked for" : NULL;
		return retryable_curl(x->cc) || x->overflow ? V_RETRY : V_FAIL;
	}
	return check_body(r, x, code, why);
}

/* "HTTP 503 (SlowDown)", "curl: Timeout was reached", ... */
static void describe(s3_client *c, const s3_xfer *x, const char *why, char *out, size_t n)
{
	char code[80], region[REGION_MAX], host[HOST_MAX];

	addr_of(c, region, host);
	if (refused(x)) {
		s3_parse_error_code(x->body, x->body_len, code, sizeof(code));
		snprintf(out, n, "HTTP %ld%s%s%s%s%s", x->status, code[0] ? " (" : "", code, code[0] ? ")" : "",
			 x->bucket_region[0] && strcmp(x->bucket_region, region) ? "; the bucket is in region "
										  : "", x->bucket_region);
	} else if (why && x->cc == CURLE_OK) {
		snprintf(out, n, "HTTP %ld: %s", x->status, why);
	} else if (why) {
		snprintf(out, n, "%s", why);
	} else {
		snprintf(out, n, "%s", x->curl_msg[0] ? x->curl_msg : curl_easy_strerror(x->cc));
	}
}

/* Full jitter: a random wait in [0, min(5 s, 100 ms * 2^attempt)], cut
 * short by b (waking every SLICE to ask whether the caller is gone).
 * Whether b leaves time for another attempt. */
static bool backoff(s3_client *c, unsigned attempt, const s3_bound *b)
{
	uint64_t cap = attempt < 6 ? (uint64_t)BACKOFF_BASE_MS << attempt : BACKOFF_MAX_MS;
	uint64_t s = atomic_fetch_add(&c->seed, 0x9E3779B97F4A7C15ull);
	int64_t until;

	cap = cap < BACKOFF_MAX_MS ? cap : BACKOFF_MAX_MS;
	s ^= s >> 31, s *= 0xBF58476D1CE4E5B9ull, s ^= s >> 29;
	s %= cap + 1;
	until = tf_now_ns() + (int64_t)s * 1000000;
	until = until < b->at_ns ? until : b->at_ns;
	while (!s3_bound_over(b)) {
		int64_t left = until - tf_now_ns();
		struct timespec ts;
		if (left <= 0)
			break;
		left = left < BACKOFF_SLICE_NS ? left : BACKOFF_SLICE_NS;
		ts = (struct timespec){ (time_t)(left / 1000000000), (long)(left % 1000000000) };
		nanosleep(&ts, NULL);
	}
	return !s3_bound_over(b);
}

/* A refusal naming the bucket's region (a 301 PermanentRedirect, a 400
 * AuthorizationHeaderMalformed): c goes there from now on (AWS's own
 * endpoint: its regional host too).  Whether it changed. */
static bool follow_region(s3_client *c, const s3_xfer *x)
{
	char region[REGION_MAX], code[80], old[REGION_MAX], msg[600];
	bool moved = false;
	size_t n;

	if (x->status != 301 && x->status != 307 && x->status != 400)
		return false;
	s3_parse_error(x->body, x->body_len, code, sizeof(code), region, sizeof(region));
	if (x->bucket_region[0])
		snprintf(region, sizeof(region), "%s", x->bucket_region);
	n = strlen(region);
	if (!n || strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") != n)
		return false;
	pthread_mutex_lock(&c->mu);
	if (strcmp(region, c->region)) {
		char ep[REGION_MAX + 40];
		snprintf(old, sizeof(old), "%s", c->region);
		snprintf(ep, sizeof(ep), "s3.%s.amazonaws.com", region);
		if (!c->aws || set_host(c, ep, strlen(ep))) {
			snprintf(c->region, sizeof(c->region), "%s", region);
			moved = true;
		}
	}
	pthread_mutex_unlock(&c->mu);
	if (moved && c->warn) {
		snprintf(msg, sizeof(msg), "%s: the bucket is in region '%s', not '%s' (HTTP %ld): requests go there "
			 "now", c->where, region, old, x->status);
		c->warn(c->warn_arg, msg);
	}
	return moved;
}

/* Whether the store refused the key as expired (signed with temporary
 * credentials that have just been replaced, or outlived). */
static bool key_expired(const s3_client *c, const s3_xfer *x)
{
	char code[80];

	if (!c->auth || !s3_auth_temporary(c->auth) || (x->status != 400 && x->status != 403))
		return false;
	s3_parse_error_code(x->body, x->body_len, code, sizeof(code));
	return !strcmp(code, "ExpiredToken") || !strcmp(code, "TokenRefreshRequired") ||
	       !strcmp(code, "ExpiredTokenException") || (!code[0] && x->head && x->status == 400);
}

/* Run r with retries within b; x keeps the last answer (its body the
 * caller's to free).  A refusal naming the bucket's region, or calling
 * the key expired, is followed by one more attempt at once (each once). */
static tf_status run(s3_client *c, const s3_bound *b, const s3_req *r, s3_xfer *x, const char *what,
		     tf_error *err)
{
	char desc[CURL_ERROR_SIZE + 128];
	const char *why = NULL, *end = " (gave up after every retry)";
	tf_status code = TF_E_IO;
	verdict v = V_FAIL;
	bool redirected = false, renewed = false, again = false;
	unsigned a;

	for (a = 0; a <= c->retries; a++) {
		tf_status rc;
		s3_key *k = NULL;
		if (a && !again && !backoff(c, a - 1, b))
			break;
		again = false;
		x->dst = r->dst, x->dst_len = r->len, x->head = r->head;
		x->upload = r->put, x->upload_len = r->put_len;
		x->body_max = r->dst ? ERROR_BODY_MAX : r->whole_max ? r->whole_max : LIST_BODY_MAX;
		if ((rc = build(c, r, b, x, &k, err)) == TF_OK)
			s3_http_perform(c->http, x, b);
		free((char *)x->url);
		curl_slist_free_all(x->headers);
		x->url = NULL, x->headers = NULL;
		if (rc != TF_OK) {
			s3_key_put(k);
			return tf_err_prefix(err, "%s %s", c->where, what);
		}
		v = judge(r, x, &code, &why);
		if (v == V_FAIL && refused(x) && !redirected && follow_region(c, x))
			redirected = again = true;
		else if (v == V_FAIL && refused(x) && !renewed && key_expired(c, x))
			s3_auth_rejected(c->auth, k), renewed = again = true;
		s3_key_put(k);
		if (again)
			a--;	/* not a retry: the same request, rightly addressed or signed */
		else if (v != V_RETRY)
			break;
	}
	if (v == V_OK)
		return TF_OK;
	if (x->gone || (b->gone && b->gone(b->arg))) {
		x->gone = true;
		why = "the caller is gone";
		end = "";
	} else if (v == V_RETRY && (x->late || tf_now_ns() >= b->at_ns)) {
		end = x->late ? " (at the request's deadline)" : " (the request's deadline passed while retrying)";
	}
	describe(c, x, why, desc, sizeof(desc));
	return tf_err(err, x->gone ? TF_E_IO : code, "%s %s: %s%s", c->where, what, desc,
		      v == V_RETRY || x->gone ? end : "");
}

/* ---- requests ---------------------------------------------------------------------------- */

tf_status s3_client_get(s3_client *c, const s3_bound *b, const char *key, const s3_version *v, uint64_t off,
			void *dst, size_t len, tf_error *err)
{
	s3_req r = { .key = key, .if_match = v->etag, .mtime_ns = v->mtime_ns, .off = off, .size = v->size,
		     .len = len, .dst = dst };
	s3_xfer x = { 0 };
	char what[1200];
	tf_status rc;

	if (!len)
		return TF_OK;
	snprintf(what, sizeof(what), "key '%.1024s' bytes %" PRIu64 "-%" PRIu64, key, off, off + len - 1);
	rc = run(c, b, &r, &x, what, err);
	s3_xfer_done(&x);
	return rc;
}

tf_status s3_client_head(s3_client *c, const s3_bound *b, const char *key, s3_entry *out, tf_error *err)
{
	s3_req r = { .head = true, .key = key };
	s3_xfer x = { 0 };
	char what[1100];
	tf_status rc;

	snprintf(what, sizeof(what), "HEAD key '%.1024s'", key);
	rc = run(c, b, &r, &x, what, err);
	if (rc == TF_OK && (!x.has_clen || !x.has_etag))
		rc = tf_err(err, TF_E_IO, "%s %s: no Content-Length or ETag in the answer", c->where, what);
	if (rc == TF_OK) {
		out->key = NULL;
		out->size = x.clen;
		out->mtime_ns = x.mtime_ns;
		memcpy(out->etag, x.etag, sizeof(out->etag));
	}
	s3_xfer_done(&x);
	return rc;
}

tf_status s3_client_list(s3_client *c, const s3_bound *b, const char *prefix, const char *token,
			 unsigned max_keys, bool flat, s3_list_page *out, tf_error *err)
{
	char mk[16];
	s3_kv q[6] = { { "delimiter", "/" }, { "list-type", "2" }, { "encoding-type", "url" },
		       { "max-keys", mk }, { "prefix", prefix }, { "continuation-token", token } };
	s3_req r = { .query = flat ? q + 1 : q, .nquery = (token ? 6u : 5u) - flat };
	s3_xfer x = { 0 };
	char what[1100];
	tf_status rc;

	snprintf(mk, sizeof(mk), "%u", max_keys);
	snprintf(what, sizeof(what), "list '%.1024s'", prefix);
	rc = run(c, b, &r, &x, what, err);
	if (rc == TF_OK && (rc = s3_parse_list(x.body ? x.body : "", x.body_len, (size_t)max_keys * 2 + 16,
					       out, err)) != TF_OK)
		tf_err_prefix(err, "%s %s", c->where, what);
	s3_xfer_done(&x);
	return rc;
}

tf_status s3_client_get_whole(s3_client *c, const s3_bound *b, const char *key, size_t max, char **body,
			      size_t *len, tf_error *err)
{
	s3_req r = { .key = key, .whole_max = max ? max : 1 };
	s3_xfer x = { 0 };
	char what[1100];
	tf_status rc;

	*body = NULL;
	*len = 0;
	snprintf(what, sizeof(what), "key '%.1024s' (at most %zu bytes)", key, max);
	if ((rc = run(c, b, &r, &x, what, err)) == TF_OK) {
		*body = x.body ? x.body : strdup("");
		*len = x.body_len;
		x.body = NULL;
		if (!*body)
			rc = tf_err(err, TF_E_NOMEM, "out of memory");
	}
	s3_xfer_done(&x);
	return rc;
}

tf_status s3_client_put(s3_client *c, const s3_bound *b, const char *key, const void *body, size_t len,
			tf_error *err)
{
	static const uint8_t none[1];
	s3_req r = { .key = key, .put = len ? body : none, .put_len = len };
	s3_xfer x = { 0 };
	char what[1100];
	tf_status rc;

	snprintf(what, sizeof(what), "PUT key '%.1024s' (%zu bytes)", key, len);
	rc = run(c, b, &r, &x, what, err);
	s3_xfer_done(&x);
	return rc;
}
