/*
 * s3_auth_fetch.c - keys, and fetching them from one source of the chain
 * (s3_auth.h): a fixed key, STS (AssumeRole, AssumeRoleWithWebIdentity),
 * the container service, IMDSv2 or a credential_process, with the small
 * parsers of their answers.  Which source applies, and when to fetch again,
 * is s3_auth.c's.
 */
#include "config.h"

#include "sources/s3_auth_int.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sources/s3_sign.h"
#include "sources/s3_xml.h"

extern char **environ;

#define ANSWER_MAX ((size_t)64 << 10)
#define PROCESS_TIMEOUT_NS ((int64_t)60 * 1000000000)
#define METADATA_TIMEOUT_MS 2000	/* connect: 1 s (s3_http) */
#define KEY_ID_MAX 256
#define SECRET_MAX 512
#define TOKEN_MAX 16384
#define IMDS_TOKEN_TTL "21600"

/* ---- keys ------------------------------------------------------------------------------------- */

void s3_wipe_free(char *s)
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
	s3_wipe_free(k->access_key), s3_wipe_free(k->secret), s3_wipe_free(k->token);
	free(k);
}

s3_key *s3_key_get(s3_key *k)
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
tf_status s3_key_new(const char *id, const char *secret, const char *token, int64_t expires, s3_key **out,
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
		rc = s3_key_new(json_str(o, "AccessKeyId"), json_str(o, "SecretAccessKey"),
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
char *s3_host_of(const char *url)
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
	s3_wipe_free(tok);
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
		s3_wipe_free(auth);
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
			rc = s3_key_new(a.access_key, a.secret, a.token, expires, out, err);
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
		s3_wipe_free(buf);
		return tf_err(err, TF_E_ACCESS, "%s %s: empty, or not printable ASCII", what, path);
	}
	*out = buf;
	return TF_OK;
}

static tf_status fetch_web_identity(s3_http *h, const s3_bound *b, provider *p, s3_key **out, tf_error *err)
{
	char *token = NULL, *form;
	tf_status rc = read_small(p->token_file, "web identity token file", &token, err);

	if (rc != TF_OK)
		return rc;
	form = sts_form(p, "AssumeRoleWithWebIdentity", token);
	s3_wipe_free(token);
	if (!form)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	rc = sts_call(h, b, p, form, NULL, out, err);
	s3_wipe_free(form);
	return rc;
}

static tf_status fetch_assume_role(s3_http *h, const s3_bound *b, provider *p, s3_key **out, tf_error *err)
{
	s3_key *src = NULL;
	char *form;
	tf_status rc = s3_provider_fetch(h, b, p->source, &src, err);

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
	s3_wipe_free(tok);
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
		s3_wipe_free(s);
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
	s3_wipe_free(token);
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
		int64_t left = (until - tf_now_ns()) / 1000000;
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
		} else if (tf_now_ns() >= until) {
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
	int64_t until = tf_now_ns() + PROCESS_TIMEOUT_NS;
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

tf_status s3_provider_fetch(s3_http *h, const s3_bound *b, provider *p, s3_key **out, tf_error *err)
{
	switch (p->kind) {
	case P_STATIC: *out = s3_key_get(p->fixed); return TF_OK;
	case P_WEB_IDENTITY: return fetch_web_identity(h, b, p, out, err);
	case P_PROCESS: return fetch_process(b, p, out, err);
	case P_ASSUME_ROLE: return fetch_assume_role(h, b, p, out, err);
	case P_CONTAINER: return fetch_container(h, b, p, out, err);
	case P_IMDS: return fetch_imds(h, b, p, out, err);
	}
	return tf_err(err, TF_E_INVAL, "no such credential source");
}

