/*
 * s3_auth.c - the credential chain: where keys come from, fetching them
 * (STS, the container service, IMDS, a process), handing them out and
 * fetching them again before they expire.
 */
#include "config.h"

#include "sources/s3_auth.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sources/s3_creds.h"
#include "sources/s3_sign.h"
#include "sources/s3_xml.h"

extern char **environ;

#define SOFT_MARGIN_MAX 300		/* fetch again 5 min before expiry at most ... */
#define HARD_MARGIN_MAX 10		/* ... and stop using a key 10 s before */
#define RETRY_AFTER_NS ((int64_t)10 * 1000000000)
#define ANSWER_MAX ((size_t)64 << 10)
#define PROCESS_TIMEOUT_NS ((int64_t)60 * 1000000000)
#define METADATA_TIMEOUT_MS 2000	/* connect: 1 s (s3_http) */
#define STS_TIMEOUT_MS 10000
#define KEY_ID_MAX 256
#define SECRET_MAX 512
#define TOKEN_MAX 16384
#define ROLE_DEPTH_MAX 5
#define IMDS_TOKEN_TTL "21600"

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

/* ---- keys ------------------------------------------------------------------------------------- */

static void wipe_free(char *s)
{
	if (s) {
		OPENSSL_cleanse(s, strlen(s));
		free(s);
	}
}

void s3_key_put(s3_key *k)
{
	if (!k || atomic_fetch_sub(&k->refs, 1) != 1)
		return;
	wipe_free(k->access_key), wipe_free(k->secret), wipe_free(k->token);
	free(k);
}

static s3_key *key_get(s3_key *k)
{
	atomic_fetch_add(&k->refs, 1);
	return k;
}

/* Printable ASCII, no blank, 1 to max bytes: nothing that could end a header or a field. */
static bool token_ok(const char *s, size_t max)
{
	size_t n = 0;

	for (; s[n]; n++)
		if ((unsigned char)s[n] <= 0x20 || (unsigned char)s[n] >= 0x7f)
			return false;
	return n && n <= max;
}

/* A key holding copies of id, secret and token (checked); expires as given. */
static tf_status key_new(const char *id, const char *secret, const char *token, int64_t expires, s3_key **out,
			 tf_error *err)
{
	s3_key *k;

	*out = NULL;
	if (!id || !token_ok(id, KEY_ID_MAX) || strchr(id, '/') || strchr(id, ','))
		return tf_err(err, TF_E_ACCESS, "no usable access key id");
	if (!secret || !token_ok(secret, SECRET_MAX))
		return tf_err(err, TF_E_ACCESS, "no usable secret access key");
	if (token && *token && !token_ok(token, TOKEN_MAX))
		return tf_err(err, TF_E_ACCESS, "no usable session token");
	if (!(k = calloc(1, sizeof(*k))) || !(k->access_key = strdup(id)) || !(k->secret = strdup(secret)) ||
	    (token && *token && !(k->token = strdup(token)))) {
		if (k)
			atomic_init(&k->refs, 1), s3_key_put(k);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	atomic_init(&k->refs, 1);
	k->expires = expires;
	k->got = (int64_t)time(NULL);
	*out = k;
	return TF_OK;
}

/* ---- small parsers ---------------------------------------------------------------------------- */

bool s3_parse_expiration(const char *s, int64_t *out)
{
	int64_t ns;

	if (!s3_parse_time(s, &ns))
		return false;
	*out = ns / 1000000000;
	return true;
}

void s3_free_argv(char **argv)
{
	for (size_t i = 0; argv && argv[i]; i++)
		free(argv[i]);
	free(argv);
}

/* Words as POSIX sh quotes them (shlex.split): blanks separate; '...'
 * keeps all; "..." keeps all but \\ \" \$ \` \newline; a backslash
 * outside quotes keeps the next character. */
tf_status s3_split_command(const char *line, char ***argv, tf_error *err)
{
	size_t n = strlen(line), nw = 0;
	char **w = calloc(n / 2 + 2, sizeof(*w)), *cur = malloc(n + 1);
	const char *p = line;

	*argv = NULL;
	if (!w || !cur) {
		free(w), free(cur);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	while (*p) {
		size_t o = 0;
		bool word = false;
		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		for (; *p && *p != ' ' && *p != '\t' && *p != '\n'; word = true) {
			if (*p == '\'') {
				const char *e = strchr(p + 1, '\'');
				if (!e)
					goto unclosed;
				memcpy(cur + o, p + 1, (size_t)(e - p - 1));
				o += (size_t)(e - p - 1);
				p = e + 1;
			} else if (*p == '"') {
				for (p++; *p && *p != '"'; p++) {
					if (*p == '\\' && p[1] && strchr("\\\"$`\n", p[1]))
						p++;
					cur[o++] = *p;
				}
				if (*p++ != '"')
					goto unclosed;
			} else if (*p == '\\') {
				if (!*++p)
					break;
				cur[o++] = *p++;
			} else {
				cur[o++] = *p++;
			}
		}
		if (word && !(w[nw++] = strndup(cur, o))) {
			s3_free_argv(w), free(cur);
			return tf_err(err, TF_E_NOMEM, "out of memory");
		}
	}
	free(cur);
	if (!nw) {
		free(w);
		return tf_err(err, TF_E_INVAL, "credential_process is empty");
	}
	*argv = w;
	return TF_OK;
unclosed:
	s3_free_argv(w), free(cur);
	return tf_err(err, TF_E_INVAL, "credential_process has an unclosed quote");
}

static const char *json_str(json_t *o, const char *name)
{
	json_t *v = json_object_get(o, name);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

tf_status s3_parse_cred_json(const char *json, size_t len, s3_json_kind kind, s3_key **out, tf_error *err)
{
	json_error_t je;
	json_t *o = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je), *v;
	const char *exp, *code;
	int64_t expires = 0;
	tf_status rc = TF_OK;

	*out = NULL;
	if (!json_is_object(o)) {
		json_decref(o);
		return tf_err(err, TF_E_IO, "not a JSON object%s%.80s", o ? "" : ": ", o ? "" : je.text);
	}
	if (kind == S3_JSON_PROCESS && (!json_is_integer(v = json_object_get(o, "Version")) ||
					json_integer_value(v) != 1))
		rc = tf_err(err, TF_E_IO, "no \"Version\": 1");
	else if (kind == S3_JSON_IMDS && (code = json_str(o, "Code")) && strcmp(code, "Success"))
		rc = tf_err(err, TF_E_ACCESS, "Code is not Success");
	else if ((exp = json_str(o, "Expiration")) && !s3_parse_expiration(exp, &expires))
		rc = tf_err(err, TF_E_IO, "Expiration '%.40s' is no ISO 8601 time", exp);
	else if (json_object_get(o, "Expiration") && !exp && !json_is_null(json_object_get(o, "Expiration")))
		rc = tf_err(err, TF_E_IO, "Expiration is no string");
	else
		rc = key_new(json_str(o, "AccessKeyId"), json_str(o, "SecretAccessKey"),
			     json_str(o, kind == S3_JSON_PROCESS ? "SessionToken" : "Token"), expires, out, err);
	json_decref(o);
	return rc;
}

/* ---- HTTP for the credential services ------------------------------------------------------- */

static void add(struct curl_slist **l, bool *ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(struct curl_slist **l, bool *ok, const char *fmt, ...)
{
	char *line = NULL;
	struct curl_slist *n = NULL;
	va_list ap;
	int len;

	if (!*ok)
		return;
	va_start(ap, fmt);
	len = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (len < 0 || !(n = curl_slist_append(*l, line)))
		*ok = false;
	else
		*l = n;
	if (len >= 0) {
		OPENSSL_cleanse(line, (size_t)len);
		free(line);
	}
}

static void free_headers(struct curl_slist *l)
{
	for (struct curl_slist *h = l; h; h = h->next)
		OPENSSL_cleanse(h->data, strlen(h->data));
	curl_slist_free_all(l);
}

/* The answer's body wiped (it may hold credentials) and freed. */
static void xfer_wipe(s3_xfer *x)
{
	if (x->body)
		OPENSSL_cleanse(x->body, x->body_len);
	s3_xfer_done(x);
}

/* One request (no retries: the caller's next request tries again); a 2xx
 * answer's body in x->body.  what names it in messages. */
static tf_status call(s3_http *h, const s3_bound *b, s3_xfer *x, const char *what, tf_error *err)
{
	x->body_max = ANSWER_MAX;
	s3_http_perform(h, x, b);
	if (x->cc == CURLE_OK && x->status >= 200 && x->status < 300)
		return TF_OK;
	if (x->cc != CURLE_OK && !(x->status >= 300))
		return tf_err(err, TF_E_ACCESS, "%s: %s", what, x->overflow ? "an answer over 64 KiB"
			      : x->curl_msg[0] ? x->curl_msg : curl_easy_strerror(x->cc));
	return tf_err(err, TF_E_ACCESS, "%s: HTTP %ld", what, x->status);
}

/* "scheme://host[:port]" -> host[:port] (malloc'd). */
static char *host_of(const char *url)
{
	const char *h = strstr(url, "://");

	h = h ? h + 3 : url;
	return strndup(h, strcspn(h, "/?#"));
}

/* ---- STS ------------------------------------------------------------------------------------- */

static char *form_value(const char *v)
{
	return s3_uri_encode(v ? v : "", false);
}

/* The form body of an STS action (values encoded); NULL: out of memory. */
static char *sts_form(const provider *p, const char *action, const char *token)
{
	char *arn = form_value(p->role_arn), *sn = form_value(p->session_name), *tok = NULL, *ext = NULL;
	char *body = NULL;

	if (arn && sn && (!token || (tok = form_value(token))) && (!p->external_id || (ext = form_value(p->external_id))) &&
	    asprintf(&body, "Action=%s&Version=2011-06-15&RoleArn=%s&RoleSessionName=%s%s%s%s%s", action, arn, sn,
		     tok ? "&WebIdentityToken=" : "", tok ? tok : "", ext ? "&ExternalId=" : "", ext ? ext : "") < 0)
		body = NULL;
	free(arn), free(sn), free(ext);
	wipe_free(tok);
	return body;
}

/* POST form to STS, signed with src unless NULL; its Credentials into *out. */
static tf_status sts_call(s3_http *h, const s3_bound *b, const provider *p, const char *form, const s3_key *src,
			  s3_key **out, tf_error *err)
{
	s3_xfer x = { .method = "POST", .post = form, .post_len = strlen(form), .timeout_ms = STS_TIMEOUT_MS,
		      .url = p->sts_url };
	struct curl_slist *l = NULL;
	s3_sts_answer a;
	bool ok = true;
	char what[600];
	tf_status rc;
	int64_t expires;

	*out = NULL;
	snprintf(what, sizeof(what), "%s", strstr(form, "AssumeRoleWithWebIdentity") ? "AssumeRoleWithWebIdentity"
									    : "AssumeRole");
	add(&l, &ok, "Host: %s", p->sts_host);
	add(&l, &ok, "Content-Type: application/x-www-form-urlencoded; charset=utf-8");
	add(&l, &ok, "Accept:");
	if (src) {
		char date[17], hash[65], *auth = NULL;
		s3_kv hd[4] = { { "content-type", "application/x-www-form-urlencoded; charset=utf-8" },
				{ "host", p->sts_host }, { "x-amz-date", date }, { "x-amz-security-token", src->token } };
		s3_sign_req sr = { "POST", "/", NULL, 0, hd, src->token ? 4 : 3, hash, date, p->sts_region, "sts" };
		s3_amz_date((long long)time(NULL), date);
		s3_sha256_hex(form, strlen(form), hash);
		if ((rc = s3_sign_auth(&sr, src->access_key, src->secret, &auth, err)) != TF_OK) {
			free_headers(l);
			return rc;
		}
		add(&l, &ok, "X-Amz-Date: %s", date);
		if (src->token)
			add(&l, &ok, "X-Amz-Security-Token: %s", src->token);
		add(&l, &ok, "Authorization: %s", auth);
		wipe_free(auth);
	}
	if (!ok) {
		free_headers(l);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	x.headers = l;
	rc = call(h, b, &x, what, err);
	free_headers(l);
	if (rc != TF_OK && x.status >= 300 && x.body &&
	    s3_parse_sts(x.body, x.body_len, &a, &(tf_error){ 0 }) == TF_OK) {
		if (a.code)
			tf_err(err, TF_E_ACCESS, "%s: HTTP %ld (%s)", what, x.status, a.code);
		s3_sts_answer_free(&a);
	}
	if (rc == TF_OK && (rc = s3_parse_sts(x.body ? x.body : "", x.body_len, &a, err)) == TF_OK) {
		if (a.code || !s3_parse_expiration(a.expiration, &expires))
			rc = tf_err(err, TF_E_IO, "%s: %s", what, a.code ? a.code : "Expiration is no ISO 8601 time");
		else
			rc = key_new(a.access_key, a.secret, a.token, expires, out, err);
		s3_sts_answer_free(&a);
		if (rc != TF_OK)
			tf_err_prefix(err, "%s", what);
	} else if (rc == TF_OK) {
		tf_err_prefix(err, "%s", what);
	}
	xfer_wipe(&x);
	return rc;
}

/* A small file's contents (a token), trimmed; 16 KiB at most. */
static tf_status read_small(const char *path, const char *what, char **out, tf_error *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	char *buf = malloc(TOKEN_MAX + 2);
	ssize_t n = -1, r;

	*out = NULL;
	if (fd >= 0 && buf)
		for (n = 0; n <= TOKEN_MAX && (r = read(fd, buf + n, (size_t)(TOKEN_MAX + 1 - n))) > 0;)
			n += r;
	if (fd >= 0)
		close(fd);
	if (n < 0 || n > TOKEN_MAX) {
		if (buf)
			OPENSSL_cleanse(buf, TOKEN_MAX + 2);
		free(buf);
		return tf_err(err, TF_E_ACCESS, "%s %s: %s", what, path, n > TOKEN_MAX ? "over 16 KiB"
			      : fd < 0 ? strerror(errno) : "out of memory");
	}
	buf[n] = '\0';
	while (n && isspace((unsigned char)buf[n - 1]))
		buf[--n] = '\0';
	if (!token_ok(buf, TOKEN_MAX)) {
		wipe_free(buf);
		return tf_err(err, TF_E_ACCESS, "%s %s: empty, or not printable ASCII", what, path);
	}
	*out = buf;
	return TF_OK;
}

static tf_status fetch(s3_http *h, const s3_bound *b, provider *p, s3_key **out, tf_error *err);

static tf_status fetch_web_identity(s3_http *h, const s3_bound *b, provider *p, s3_key **out, tf_error *err)
{
	char *token = NULL, *form;
	tf_status rc = read_small(p->token_file, "web identity token file", &token, err);

	if (rc != TF_OK)
		return rc;
	form = sts_form(p, "AssumeRoleWithWebIdentity", token);
	wipe_free(token);
	if (!form)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	rc = sts_call(h, b, p, form, NULL, out, err);
	wipe_free(form);
	return rc;
}

static tf_status fetch_assume_role(s3_http *h, const s3_bound *b, provider *p, s3_key **out, tf_error *err)
{
	s3_key *src = NULL;
	char *form;
	tf_status rc = fetch(h, b, p->source, &src, err);

	if (rc != TF_OK)
		return tf_err_prefix(err, "the source profile's credentials (%s)", p->source->what), rc;
	if (!(form = sts_form(p, "AssumeRole", NULL)))
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	else
		rc = sts_call(h, b, p, form, src, out, err);
	free(form);
	s3_key_put(src);
	return rc;
}

/* ---- the container service and IMDS --------------------------------------------------------------- */

static tf_status fetch_container(s3_http *h, const s3_bound *b, provider *p, s3_key **out, tf_error *err)
{
	s3_xfer x = { .url = p->url, .timeout_ms = METADATA_TIMEOUT_MS * 2, .no_proxy = true };
	struct curl_slist *l = NULL;
	char *tok = NULL, what[600];
	bool ok = true;
	tf_status rc = TF_OK;

	*out = NULL;
	snprintf(what, sizeof(what), "GET");
	if (p->auth_file)
		rc = read_small(p->auth_file, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", &tok, err);
	if (rc != TF_OK)
		return rc;
	add(&l, &ok, "Accept: application/json");
	if (tok || p->auth_token)
		add(&l, &ok, "Authorization: %s", tok ? tok : p->auth_token);
	wipe_free(tok);
	if (!ok) {
		free_headers(l);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	x.headers = l;
	if ((rc = call(h, b, &x, what, err)) == TF_OK &&
	    (rc = s3_parse_cred_json(x.body ? x.body : "", x.body_len, S3_JSON_CONTAINER, out, err)) != TF_OK)
		tf_err_prefix(err, "%s", what);
	free_headers(l);
	xfer_wipe(&x);
	return rc;
}

/* One IMDS request with the session token (or, with ttl, for one). */
static tf_status imds_call(s3_http *h, const s3_bound *b, const provider *p, const char *path, const char *token,
			   s3_xfer *x, tf_error *err)
{
	struct curl_slist *l = NULL;
	char *url = NULL, what[600];
	bool ok = true;
	tf_status rc;

	*x = (s3_xfer){ .timeout_ms = METADATA_TIMEOUT_MS, .no_proxy = true, .method = token ? NULL : "PUT" };
	snprintf(what, sizeof(what), "%s %s", token ? "GET" : "PUT", path);
	if (asprintf(&url, "%s%s", p->url, path) < 0)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	add(&l, &ok, "Accept:");
	if (token)
		add(&l, &ok, "X-aws-ec2-metadata-token: %s", token);
	else
		add(&l, &ok, "X-aws-ec2-metadata-token-ttl-seconds: " IMDS_TOKEN_TTL), add(&l, &ok, "Content-Length: 0");
	x->url = url;
	x->headers = l;
	rc = ok ? call(h, b, x, what, err) : tf_err(err, TF_E_NOMEM, "out of memory");
	free_headers(l);
	free(url);
	x->url = NULL, x->headers = NULL;
	return rc;
}

/* The body of x as a string of printable ASCII (a token, a role's name). */
static char *body_line(const s3_xfer *x, size_t max)
{
	size_t n = x->body ? strcspn(x->body, "\r\n") : 0;
	char *s = n && n <= max ? strndup(x->body, n) : NULL;

	if (s && !token_ok(s, max)) {
		wipe_free(s);
		s = NULL;
	}
	return s;
}

static tf_status fetch_imds(s3_http *h, const s3_bound *b, provider *p, s3_key **out, tf_error *err)
{
	s3_xfer x;
	char *token = NULL, *role = NULL, *path = NULL;
	tf_status rc;

	*out = NULL;
	if ((rc = imds_call(h, b, p, "/latest/api/token", NULL, &x, err)) == TF_OK && !(token = body_line(&x, 4096)))
		rc = tf_err(err, TF_E_ACCESS, "PUT /latest/api/token: no session token in the answer");
	xfer_wipe(&x);
	if (rc == TF_OK &&
	    (rc = imds_call(h, b, p, "/latest/meta-data/iam/security-credentials/", token, &x, err)) == TF_OK &&
	    (!(role = body_line(&x, 128)) || strspn(role, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
							"0123456789+=,.@_-") != strlen(role)))
		rc = tf_err(err, TF_E_ACCESS, "no role's name in the answer (no IAM instance profile?)");
	xfer_wipe(&x);
	if (rc == TF_OK && asprintf(&path, "/latest/meta-data/iam/security-credentials/%s", role) < 0)
		path = NULL, rc = tf_err(err, TF_E_NOMEM, "out of memory");
	if (rc == TF_OK && (rc = imds_call(h, b, p, path, token, &x, err)) == TF_OK &&
	    (rc = s3_parse_cred_json(x.body ? x.body : "", x.body_len, S3_JSON_IMDS, out, err)) != TF_OK)
		tf_err_prefix(err, "GET %s", path);
	xfer_wipe(&x);
	wipe_free(token);
	free(role), free(path);
	return rc;
}

/* ---- credential_process ------------------------------------------------------------------------- */

/* Run argv, its stdout into *out (NUL-terminated, ANSWER_MAX at most) within until (monotonic ns). */
static tf_status run_process(char **argv, int64_t until, char **out, size_t *len, tf_error *err)
{
	posix_spawn_file_actions_t fa;
	int fds[2], st = 0, e;
	pid_t pid;
	char *buf = malloc(ANSWER_MAX + 1);
	size_t n = 0;
	const char *why = NULL;
	bool exited = false;

	*out = NULL;
	if (!buf || pipe2(fds, O_CLOEXEC) != 0) {
		free(buf);
		return tf_err(err, TF_E_NOMEM, "credential_process: %s", buf ? strerror(errno) : "out of memory");
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);	/* the mount's descriptors are not its */
#endif
	e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (e != 0) {
		close(fds[0]);
		free(buf);
		return tf_err(err, TF_E_ACCESS, "credential_process '%.200s': %s", argv[0], strerror(e));
	}
	for (;;) {
		int64_t left = (until - s3_now_ns()) / 1000000;
		struct pollfd pf = { .fd = fds[0], .events = POLLIN };
		ssize_t r;
		if (left <= 0) {
			why = "no answer in time";
			break;
		}
		if (poll(&pf, 1, left > 1000 ? 1000 : (int)left) <= 0)
			continue;
		if ((r = read(fds[0], buf + n, ANSWER_MAX + 1 - n)) == 0)
			break;
		if (r < 0 && errno != EINTR && errno != EAGAIN) {
			why = strerror(errno);
			break;
		}
		if (r > 0 && (n += (size_t)r) > ANSWER_MAX) {
			why = "an answer over 64 KiB";
			break;
		}
	}
	close(fds[0]);
	/* Its stdout closed: it has ended, or is given until the deadline to. */
	while (!why && !exited) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid || (w < 0 && errno == ECHILD)) {
			exited = w == pid;
			if (w < 0)
				st = 0, exited = true;	/* SIGCHLD ignored: no status to be had */
		} else if (s3_now_ns() >= until) {
			why = "no answer in time";
		} else {
			nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
		}
	}
	if (!exited) {
		kill(pid, SIGKILL);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
	}
	char status[40];
	if (!why && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
		snprintf(status, sizeof(status), WIFEXITED(st) ? "exited with status %d" : "killed by signal %d",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		why = status;
	}
	if (why) {
		OPENSSL_cleanse(buf, ANSWER_MAX + 1);
		free(buf);
		return tf_err(err, TF_E_ACCESS, "credential_process '%.200s': %s", argv[0], why);
	}
	buf[n] = '\0';
	*out = buf, *len = n;
	return TF_OK;
}

static tf_status fetch_process(const s3_bound *b, provider *p, s3_key **out, tf_error *err)
{
	char **argv = NULL, *text = NULL;
	size_t len = 0;
	int64_t until = s3_now_ns() + PROCESS_TIMEOUT_NS;
	tf_status rc = s3_split_command(p->command, &argv, err);

	*out = NULL;
	until = until < b->at_ns ? until : b->at_ns;
	if (rc == TF_OK && (rc = run_process(argv, until, &text, &len, err)) == TF_OK &&
	    (rc = s3_parse_cred_json(text, len, S3_JSON_PROCESS, out, err)) != TF_OK)
		tf_err_prefix(err, "credential_process '%.200s'", argv[0]);
	if (text) {
		OPENSSL_cleanse(text, len);
		free(text);
	}
	s3_free_argv(argv);
	return rc;
}

static tf_status fetch(s3_http *h, const s3_bound *b, provider *p, s3_key **out, tf_error *err)
{
	switch (p->kind) {
	case P_STATIC: *out = key_get(p->fixed); return TF_OK;
	case P_WEB_IDENTITY: return fetch_web_identity(h, b, p, out, err);
	case P_PROCESS: return fetch_process(b, p, out, err);
	case P_ASSUME_ROLE: return fetch_assume_role(h, b, p, out, err);
	case P_CONTAINER: return fetch_container(h, b, p, out, err);
	case P_IMDS: return fetch_imds(h, b, p, out, err);
	}
	return tf_err(err, TF_E_INVAL, "no such credential source");
}

/* ---- the chain -------------------------------------------------------------------------------- */

static void provider_free(provider *p)
{
	if (!p)
		return;
	provider_free(p->source);
	s3_key_put(p->fixed);
	wipe_free(p->auth_token);
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
	if (!p->sts_url || !(p->sts_host = host_of(p->sts_url)) || !(p->sts_region = strdup(region)))
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
				rc = key_new(pr.c.access_key, pr.c.secret, pr.c.token, 0, &src->fixed, err);
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
			rc = key_new(pr.c.access_key, pr.c.secret, pr.c.token, 0, &(*out)->fixed, err);
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
	char *h = host_of(url), *colon;
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
		return key_new(id, secret, env("AWS_SESSION_TOKEN"), 0, &(*out)->fixed, err);
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
	if ((rc = fetch(a->http, b, a->p, &a->cur, err)) != TF_OK) {
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
	int64_t until = s3_now_ns() + 100000000;
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
		if (st == K_FRESH || (st == K_SOFT && (a->refreshing || s3_now_ns() < a->retry_at))) {
			*out = key_get(a->cur);
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
		tf_status frc = fetch(a->http, b, a->p, &k, &fe);
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
		a->retry_at = s3_now_ns() + RETRY_AFTER_NS;
		if (st == K_SOFT) {
			snprintf(note, sizeof(note), "%s; the current ones are used until they expire, in %lld s",
				 a->last_err, (long long)(a->cur->expires - (int64_t)time(NULL)));
			tell = true;
			*out = key_get(a->cur);
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
