/*
 * s3_xml.c - ListObjectsV2 and error bodies, parsed with expat.
 */
#include "config.h"

#include "sources/s3_xml.h"

#include <ctype.h>
#include <expat.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum { F_NONE, F_KEY, F_SIZE, F_MTIME, F_ETAG, F_PREFIX, F_TRUNC, F_TOKEN, F_ENC, F_CODE, F_REGION } field;

typedef struct lparser {
	XML_Parser xp;
	s3_list_page *page;
	size_t max_entries;
	int depth;
	bool in_contents, in_prefixes, in_error, is_list;
	field cur;
	char text[S3_MAX_NAME + 1];
	size_t tlen;
	s3_entry ent;			/* the Contents being read */
	bool have_key, have_size;
	bool url_encoded;
	const char *fail;		/* the first problem */
	char *code;			/* s3_parse_error's output */
	size_t code_size;
	char *region;
	size_t region_size;
} lparser;

static void stop(lparser *p, const char *why)
{
	if (!p->fail)
		p->fail = why;
	XML_StopParser(p->xp, XML_FALSE);
}

static field field_of(const lparser *p, const char *name)
{
	if (p->in_contents && p->depth == 3) {
		return !strcmp(name, "Key") ? F_KEY : !strcmp(name, "Size") ? F_SIZE
		     : !strcmp(name, "LastModified") ? F_MTIME : !strcmp(name, "ETag") ? F_ETAG : F_NONE;
	}
	if (p->in_prefixes && p->depth == 3)
		return !strcmp(name, "Prefix") ? F_PREFIX : F_NONE;
	if (p->depth == 2 && p->is_list)
		return !strcmp(name, "IsTruncated") ? F_TRUNC : !strcmp(name, "NextContinuationToken") ? F_TOKEN
		     : !strcmp(name, "EncodingType") ? F_ENC : F_NONE;
	if (p->depth == 2 && p->in_error)
		return !strcmp(name, "Code") ? F_CODE : !strcmp(name, "Region") ? F_REGION : F_NONE;
	return F_NONE;
}

static void on_start(void *user, const XML_Char *name, const XML_Char **attrs)
{
	lparser *p = user;

	(void)attrs;
	p->depth++;
	if (p->depth == 1) {
		p->is_list = !strcmp(name, "ListBucketResult");
		p->in_error = !strcmp(name, "Error");
	} else if (p->depth == 2 && p->is_list) {
		p->in_contents = !strcmp(name, "Contents");
		p->in_prefixes = !strcmp(name, "CommonPrefixes");
		if (p->in_contents) {
			memset(&p->ent, 0, sizeof(p->ent));
			p->have_key = p->have_size = false;
		}
	}
	if (p->depth > 16)
		stop(p, "nested too deeply");
	p->cur = field_of(p, name);
	p->tlen = 0;
}

static void on_text(void *user, const XML_Char *s, int len)
{
	lparser *p = user;

	if (p->cur == F_NONE || len <= 0)
		return;
	if ((size_t)len > S3_MAX_NAME - p->tlen)
		return stop(p, "a name or value longer than 4096 bytes");
	memcpy(p->text + p->tlen, s, (size_t)len);
	p->tlen += (size_t)len;
}

static bool parse_u63(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s || strlen(s) > 18)	/* below 10^18 < 2^63 */
		return false;
	for (; *s; s++) {
		if (!isdigit((unsigned char)*s))
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return true;
}

#define NS_PER_S 1000000000

bool s3_time_ns(int64_t sec, uint32_t frac_ns, int64_t *ns)
{
	if (frac_ns >= NS_PER_S || sec < INT64_MIN / NS_PER_S || sec > (INT64_MAX - (int64_t)frac_ns) / NS_PER_S)
		return false;
	*ns = sec * NS_PER_S + (int64_t)frac_ns;
	return true;
}

bool s3_parse_time(const char *s, int64_t *ns)
{
	struct tm tm = { 0 };
	int frac_len = 0, n = 0;
	unsigned long frac = 0;
	char tail[4] = "";

	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
		   &tm.tm_min, &tm.tm_sec, &n) != 6)
		return false;
	s += n;
	if (*s == '.') {
		const char *d = ++s;
		while (isdigit((unsigned char)*s) && frac_len < 9)
			frac = frac * 10 + (unsigned long)(*s++ - '0'), frac_len++;
		while (isdigit((unsigned char)*s))
			s++;
		if (s == d)
			return false;
	}
	int64_t off = 0;
	if ((*s == '+' || *s == '-') && isdigit((unsigned char)s[1]) && isdigit((unsigned char)s[2]) &&
	    s[3] == ':' && isdigit((unsigned char)s[4]) && isdigit((unsigned char)s[5]) && !s[6]) {
		off = ((s[1] - '0') * 10 + (s[2] - '0')) * 3600 + ((s[4] - '0') * 10 + (s[5] - '0')) * 60;
		off = *s == '-' ? -off : off;
		s = "Z";
	}
	snprintf(tail, sizeof(tail), "%s", s);
	if (strcmp(tail, "Z") || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31)
		return false;
	for (; frac_len < 9; frac_len++)
		frac *= 10;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return s3_time_ns((int64_t)timegm(&tm) - off, (uint32_t)frac, ns);
}

/* A finished Contents or CommonPrefixes element joins the page. */
static void push_entry(lparser *p, bool prefix)
{
	s3_list_page *pg = p->page;
	size_t n = pg->nobjects + pg->nprefixes;

	if (n >= p->max_entries)
		return stop(p, "more entries than a page may hold");
	if (prefix) {
		char **np = realloc(pg->prefixes, (pg->nprefixes + 1) * sizeof(*np));
		if (!np || !(np[pg->nprefixes] = strndup(p->text, p->tlen)))
			return pg->prefixes = np ? np : pg->prefixes, stop(p, "out of memory");
		pg->prefixes = np;
		pg->nprefixes++;
		return;
	}
	if (!p->have_key || !p->have_size)
		return free(p->ent.key), p->ent.key = NULL, stop(p, "an object without Key or Size");
	s3_entry *ne = realloc(pg->objects, (pg->nobjects + 1) * sizeof(*ne));
	if (!ne)
		return free(p->ent.key), p->ent.key = NULL, stop(p, "out of memory");
	pg->objects = ne;
	ne[pg->nobjects++] = p->ent;
	p->ent.key = NULL;
}

static void end_field(lparser *p)
{
	char *t = p->text;

	t[p->tlen] = '\0';
	switch (p->cur) {
	case F_KEY:
		free(p->ent.key);
		if (!(p->ent.key = strdup(t)))
			return stop(p, "out of memory");
		p->have_key = true;
		break;
	case F_SIZE:
		if (!(p->have_size = parse_u63(t, &p->ent.size)))
			stop(p, "a Size that is not a number below 10^18");
		break;
	case F_MTIME:
		if (!s3_parse_time(t, &p->ent.mtime_ns))
			p->ent.mtime_ns = 0;	/* a bad date is no reason to hide the file */
		break;
	case F_ETAG: {
		size_t n = p->tlen;
		if (n >= 2 && t[0] == '"' && t[n - 1] == '"')
			t++, n -= 2;
		if (n > S3_MAX_ETAG)
			return stop(p, "an ETag longer than 71 bytes");
		memcpy(p->ent.etag, t, n);
		p->ent.etag[n] = '\0';
		break;
	}
	case F_PREFIX: push_entry(p, true); break;
	case F_TRUNC: p->page->truncated = !strcmp(t, "true"); break;
	case F_TOKEN:
		free(p->page->next_token);
		if (!(p->page->next_token = strdup(t)))
			stop(p, "out of memory");
		break;
	case F_ENC: p->url_encoded = !strcmp(t, "url"); break;
	case F_CODE:
		if (p->code)
			snprintf(p->code, p->code_size, "%.*s", 64, t);
		break;
	case F_REGION:
		if (p->region)
			snprintf(p->region, p->region_size, "%.*s", 60, t);
		break;
	case F_NONE: break;
	}
}

static void on_end(void *user, const XML_Char *name)
{
	lparser *p = user;

	if (p->cur != F_NONE)
		end_field(p);
	p->cur = F_NONE;
	if (p->depth == 2 && p->in_contents && !strcmp(name, "Contents"))
		push_entry(p, false);
	if (p->depth == 2)
		p->in_contents = p->in_prefixes = false;
	p->depth--;
}

static void on_doctype(void *user, const XML_Char *name, const XML_Char *sys, const XML_Char *pub,
		       int internal)
{
	(void)name, (void)sys, (void)pub, (void)internal;
	stop(user, "a DOCTYPE (entities are refused)");
}

static void on_entity(void *user, const XML_Char *name, int pe, const XML_Char *value, int vlen,
		      const XML_Char *base, const XML_Char *sys, const XML_Char *pub, const XML_Char *notation)
{
	(void)name, (void)pe, (void)value, (void)vlen, (void)base, (void)sys, (void)pub, (void)notation;
	stop(user, "an entity declaration");
}

/* Parse xml with p's handlers; NULL or the first problem. */
static const char *run(lparser *p, const char *xml, size_t len)
{
	if (len > (size_t)1 << 30)
		return "an answer over 1 GiB";
	if (!(p->xp = XML_ParserCreate("UTF-8")))
		return "out of memory";
	XML_SetUserData(p->xp, p);
	XML_SetElementHandler(p->xp, on_start, on_end);
	XML_SetCharacterDataHandler(p->xp, on_text);
	XML_SetStartDoctypeDeclHandler(p->xp, on_doctype);
	XML_SetEntityDeclHandler(p->xp, on_entity);
	if (XML_Parse(p->xp, xml, (int)len, XML_TRUE) != XML_STATUS_OK && !p->fail)
		p->fail = XML_ErrorString(XML_GetErrorCode(p->xp));
	XML_ParserFree(p->xp);
	free(p->ent.key);
	p->ent.key = NULL;
	return p->fail;
}

/* Percent-decode s in place; false on a bad escape or an embedded NUL
 * (s is then as it was). */
static bool url_decode(char *s)
{
	char *o = s;

	for (const char *c = s; *c; c++) {
		if (*c == '%' && (!isxdigit((unsigned char)c[1]) || !isxdigit((unsigned char)c[2]) ||
				  (c[1] == '0' && c[2] == '0')))
			return false;
	}
	for (; *s; s++) {
		if (*s == '+') {
			*o++ = ' ';
		} else if (*s == '%') {
			unsigned v;
			sscanf(s + 1, "%2x", &v);
			*o++ = (char)v;
			s += 2;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
	return true;
}

/* Move name to the page's undecodable names. */
static bool set_aside(s3_list_page *pg, char *name)
{
	char **nb = realloc(pg->bad, (pg->nbad + 1) * sizeof(*nb));

	if (!nb)
		return false;
	pg->bad = nb;
	pg->bad[pg->nbad++] = name;
	return true;
}

/* Decode every name; those that cannot be are set aside, as sent. */
static bool decode_page(s3_list_page *pg)
{
	size_t o = 0;

	for (size_t i = 0; i < pg->nobjects; i++) {
		if (url_decode(pg->objects[i].key))
			pg->objects[o++] = pg->objects[i];
		else if (!set_aside(pg, pg->objects[i].key))
			return free(pg->objects[i].key), pg->nobjects = o, false;
	}
	pg->nobjects = o;
	o = 0;
	for (size_t i = 0; i < pg->nprefixes; i++) {
		if (url_decode(pg->prefixes[i]))
			pg->prefixes[o++] = pg->prefixes[i];
		else if (!set_aside(pg, pg->prefixes[i]))
			return free(pg->prefixes[i]), pg->nprefixes = o, false;
	}
	pg->nprefixes = o;
	return true;
}

tf_status s3_parse_list(const char *xml, size_t len, size_t max_entries, s3_list_page *out,
			tf_error *err)
{
	lparser p = { .page = out, .max_entries = max_entries };
	const char *why;

	memset(out, 0, sizeof(*out));
	why = run(&p, xml, len);
	if (!why && !p.is_list)
		why = "not a ListBucketResult";
	if (!why && out->truncated && (!out->next_token || !*out->next_token))
		why = "truncated without a continuation token";
	if (!why && p.url_encoded && !decode_page(out))
		why = "out of memory";
	if (!why)
		return TF_OK;
	s3_list_page_free(out);
	return tf_err(err, TF_E_IO, "bad listing: %s", why);
}

void s3_list_page_free(s3_list_page *p)
{
	for (size_t i = 0; i < p->nobjects; i++)
		free(p->objects[i].key);
	for (size_t i = 0; i < p->nprefixes; i++)
		free(p->prefixes[i]);
	for (size_t i = 0; i < p->nbad; i++)
		free(p->bad[i]);
	free(p->objects), free(p->prefixes), free(p->bad), free(p->next_token);
	memset(p, 0, sizeof(*p));
}

/* Shown in messages and, for a region, put in host names: letters, digits and '-' only. */
static void printable(char *s, bool dash)
{
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !(dash && *s == '-'))
			*s = '_';
}

void s3_parse_error(const char *xml, size_t len, char *code, size_t code_size, char *region, size_t region_size)
{
	s3_list_page page = { 0 };
	lparser p = { .page = &page, .max_entries = 0, .code = code, .code_size = code_size,
		      .region = region, .region_size = region_size };

	code[0] = '\0';
	if (region)
		region[0] = '\0';
	if (len)
		run(&p, xml, len);
	s3_list_page_free(&page);
	printable(code, false);
	if (region)
		printable(region, true);
}

void s3_parse_error_code(const char *xml, size_t len, char *code, size_t size)
{
	s3_parse_error(xml, len, code, size, NULL, 0);
}

/* ---- STS answers -------------------------------------------------------------------------------- */

#define STS_VALUE_MAX 16384	/* a session token runs to a few KB */

typedef struct sparser {
	XML_Parser xp;
	int depth;
	int in_creds;		/* the depth of <Credentials>, 0 outside */
	char **cur;		/* the field being read, or NULL */
	char *text;		/* its text so far (wiped when dropped) */
	size_t tlen;
	bool in_error;
	const char *fail;
	s3_sts_answer *out;
} sparser;

static void wipe_text(sparser *p)
{
	if (p->text) {
		OPENSSL_cleanse(p->text, p->tlen);
		free(p->text);
	}
	p->text = NULL, p->tlen = 0;
}

static void sts_stop(sparser *p, const char *why)
{
	if (!p->fail)
		p->fail = why;
	XML_StopParser(p->xp, XML_FALSE);
}

static void sts_start(void *user, const XML_Char *name, const XML_Char **attrs)
{
	sparser *p = user;
	s3_sts_answer *o = p->out;

	(void)attrs;
	if (++p->depth > 16)
		return sts_stop(p, "nested too deeply");
	p->cur = NULL;
	if (!strcmp(name, "Credentials"))
		p->in_creds = p->depth;
	else if (!strcmp(name, "Error"))
		p->in_error = true;
	else if (p->in_creds && p->depth == p->in_creds + 1)
		p->cur = !strcmp(name, "AccessKeyId") ? &o->access_key : !strcmp(name, "SecretAccessKey") ? &o->secret
		       : !strcmp(name, "SessionToken") ? &o->token : !strcmp(name, "Expiration") ? &o->expiration : NULL;
	else if (p->in_error && !strcmp(name, "Code"))
		p->cur = &o->code;
	if (p->cur && *p->cur)
		return sts_stop(p, "a credential given twice");
	wipe_text(p);
}

static void sts_text(void *user, const XML_Char *s, int len)
{
	sparser *p = user;
	char *nb;

	if (!p->cur || len <= 0)
		return;
	if ((size_t)len > STS_VALUE_MAX - p->tlen)
		return sts_stop(p, "a value longer than 16 KiB");
	if (!(nb = malloc(p->tlen + (size_t)len + 1)))
		return sts_stop(p, "out of memory");
	if (p->text)
		memcpy(nb, p->text, p->tlen);
	memcpy(nb + p->tlen, s, (size_t)len);
	len += (int)p->tlen;
	wipe_text(p);
	p->text = nb, p->tlen = (size_t)len;
	nb[len] = '\0';
}

static void sts_end(void *user, const XML_Char *name)
{
	sparser *p = user;

	(void)name;
	if (p->cur) {
		*p->cur = p->text ? p->text : strdup("");
		p->text = NULL, p->tlen = 0;
		if (!*p->cur)
			sts_stop(p, "out of memory");
	}
	p->cur = NULL;
	if (p->depth == p->in_creds)
		p->in_creds = 0;
	p->depth--;
}

static void sts_doctype(void *user, const XML_Char *name, const XML_Char *sys, const XML_Char *pub, int internal)
{
	(void)name, (void)sys, (void)pub, (void)internal;
	sts_stop(user, "a DOCTYPE (entities are refused)");
}

static void sts_entity(void *user, const XML_Char *name, int pe, const XML_Char *value, int vlen,
		       const XML_Char *base, const XML_Char *sys, const XML_Char *pub, const XML_Char *notation)
{
	(void)name, (void)pe, (void)value, (void)vlen, (void)base, (void)sys, (void)pub, (void)notation;
	sts_stop(user, "an entity declaration");
}

tf_status s3_parse_sts(const char *xml, size_t len, s3_sts_answer *out, tf_error *err)
{
	sparser p = { .out = out };

	memset(out, 0, sizeof(*out));
	if (len > (size_t)1 << 20)
		return tf_err(err, TF_E_IO, "an STS answer over 1 MiB");
	if (!(p.xp = XML_ParserCreate("UTF-8")))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	XML_SetUserData(p.xp, &p);
	XML_SetElementHandler(p.xp, sts_start, sts_end);
	XML_SetCharacterDataHandler(p.xp, sts_text);
	XML_SetStartDoctypeDeclHandler(p.xp, sts_doctype);
	XML_SetEntityDeclHandler(p.xp, sts_entity);
	if (XML_Parse(p.xp, xml, (int)len, XML_TRUE) != XML_STATUS_OK && !p.fail)
		p.fail = XML_ErrorString(XML_GetErrorCode(p.xp));
	XML_ParserFree(p.xp);
	wipe_text(&p);
	if (out->code)
		printable(out->code, false);
	if (!p.fail && !out->code && (!out->access_key || !out->secret || !out->token || !out->expiration))
		p.fail = "no AccessKeyId, SecretAccessKey, SessionToken and Expiration in Credentials";
	if (!p.fail)
		return TF_OK;
	s3_sts_answer_free(out);
	return tf_err(err, TF_E_IO, "a bad STS answer: %s", p.fail);
}

static void wipe_str(char *s)
{
	if (s) {
		OPENSSL_cleanse(s, strlen(s));
		free(s);
	}
}

void s3_sts_answer_free(s3_sts_answer *a)
{
	wipe_str(a->access_key), wipe_str(a->secret), wipe_str(a->token);
	free(a->expiration), free(a->code);
	memset(a, 0, sizeof(*a));
}
