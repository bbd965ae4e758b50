/*
 * s3_sign.c - AWS Signature Version 4 with OpenSSL's SHA-256 and HMAC.
 */
#include "config.h"

#include "sources/s3_sign.h"

#include <ctype.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool unreserved(unsigned char c)
{
	return isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

char *s3_uri_encode(const char *s, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = n < ((size_t)-1) / 3 ? malloc(3 * n + 1) : NULL, *o = out;

	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (unreserved(*p) || (keep_slash && *p == '/')) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	return out;
}

typedef struct enc_kv {
	char *name, *value;
} enc_kv;

static int cmp_kv(const void *a, const void *b)
{
	const enc_kv *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->value, y->value);
}

char *s3_canonical_query(const s3_kv *q, size_t n)
{
	enc_kv *e = calloc(n ? n : 1, sizeof(*e));
	char *out = NULL;
	size_t len = 0;
	FILE *f;
	bool ok = e != NULL;

	for (size_t i = 0; ok && i < n; i++)
		ok = (e[i].name = s3_uri_encode(q[i].name, false)) &&
		     (e[i].value = s3_uri_encode(q[i].value ? q[i].value : "", false));
	if (ok) {
		/* Sorted by the encoded bytes, as the signer on the other side does. */
		qsort(e, n, sizeof(*e), cmp_kv);
		if ((f = open_memstream(&out, &len))) {
			for (size_t i = 0; i < n; i++)
				fprintf(f, "%s%s=%s", i ? "&" : "", e[i].name, e[i].value);
			if (fclose(f) != 0) {
				free(out);
				out = NULL;
			}
		}
	}
	for (size_t i = 0; e && i < n; i++)
		free(e[i].name), free(e[i].value);
	free(e);
	return out;
}

typedef struct canon_hdr {
	char *name;
	const char *value;
} canon_hdr;

static int cmp_hdr(const void *a, const void *b)
{
	return strcmp(((const canon_hdr *)a)->name, ((const canon_hdr *)b)->name);
}

/* name:value with the value trimmed and inner runs of blanks folded. */
static void put_header(FILE *f, const canon_hdr *h)
{
	const char *v = h->value;
	bool blank = false;

	fprintf(f, "%s:", h->name);
	while (*v == ' ' || *v == '\t')
		v++;
	for (; *v; v++) {
		if (*v == ' ' || *v == '\t') {
			blank = true;
			continue;
		}
		if (blank)
			fputc(' ', f);
		blank = false;
		fputc(*v, f);
	}
	fputc('\n', f);
}

/* The sorted, lowercased header names; NULL when out of memory. */
static canon_hdr *sorted_headers(const s3_sign_req *r)
{
	canon_hdr *h = calloc(r->nheaders ? r->nheaders : 1, sizeof(*h));

	for (size_t i = 0; h && i < r->nheaders; i++) {
		if (!(h[i].name = strdup(r->headers[i].name))) {
			for (size_t j = 0; j < i; j++)
				free(h[j].name);
			free(h);
			return NULL;
		}
		for (char *c = h[i].name; *c; c++)
			*c = (char)tolower((unsigned char)*c);
		h[i].value = r->headers[i].value;
	}
	if (h)
		qsort(h, r->nheaders, sizeof(*h), cmp_hdr);
	return h;
}

char *s3_canonical_request(const s3_sign_req *r, char **signed_headers)
{
	char *uri = s3_uri_encode(r->path, true), *query = s3_canonical_query(r->query, r->nquery);
	canon_hdr *h = sorted_headers(r);
	char *out = NULL, *sh = NULL;
	size_t len = 0, shlen = 0;
	FILE *f = uri && query && h ? open_memstream(&out, &len) : NULL;
	FILE *g = f ? open_memstream(&sh, &shlen) : NULL;

	if (g) {
		fprintf(f, "%s\n%s\n%s\n", r->method, uri, query);
		for (size_t i = 0; i < r->nheaders; i++) {
			put_header(f, &h[i]);
			fprintf(g, "%s%s", i ? ";" : "", h[i].name);
		}
		fflush(g);
		fprintf(f, "\n%s\n%s", sh ? sh : "", r->payload_hash);
	}
	if (f && fclose(f) != 0)
		free(out), out = NULL;
	if (g && fclose(g) != 0)
		free(sh), sh = NULL;
	if (!out || !sh || !g)
		free(out), free(sh), out = sh = NULL;
	for (size_t i = 0; h && i < r->nheaders; i++)
		free(h[i].name);
	free(h), free(uri), free(query);
	*signed_headers = sh;
	return out;
}

void s3_sha256_hex(const void *p, size_t n, char hex[65])
{
	unsigned char md[32];
	unsigned int mdlen = 0;

	EVP_Digest(p, n, md, &mdlen, EVP_sha256(), NULL);
	for (unsigned i = 0; i < 32; i++)
		sprintf(hex + 2 * i, "%02x", md[i]);
	hex[64] = '\0';
}

static void hmac(const void *key, size_t klen, const char *msg, unsigned char out[32])
{
	unsigned int len = 32;

	HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, strlen(msg), out, &len);
}

/* The signature of sts under the key derived from secret (hex into sig). */
static void signature(const char *secret, const s3_sign_req *r, const char *sts, char sig[65])
{
	unsigned char k[32], k2[32];
	char date[9], *kinit;
	size_t n = strlen(secret) + 4;

	snprintf(date, sizeof(date), "%.8s", r->amz_date);
	if (!(kinit = malloc(n + 1))) {
		sig[0] = '\0';
		return;
	}
	snprintf(kinit, n + 1, "AWS4%s", secret);
	hmac(kinit, n, date, k);
	OPENSSL_cleanse(kinit, n);
	free(kinit);
	hmac(k, 32, r->region, k2);
	hmac(k2, 32, r->service, k);
	hmac(k, 32, "aws4_request", k2);
	hmac(k2, 32, sts, k);
	for (unsigned i = 0; i < 32; i++)
		sprintf(sig + 2 * i, "%02x", k[i]);
	sig[64] = '\0';
	OPENSSL_cleanse(k, sizeof(k));
	OPENSSL_cleanse(k2, sizeof(k2));
}

tf_status s3_sign_auth(const s3_sign_req *r, const char *access_key, const char *secret,
		       char **auth, tf_error *err)
{
	char *sh = NULL, *creq = s3_canonical_request(r, &sh), *sts = NULL, hash[65], sig[65];
	tf_status rc = TF_OK;

	*auth = NULL;
	if (!creq)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	s3_sha256_hex(creq, strlen(creq), hash);
	if (asprintf(&sts, "AWS4-HMAC-SHA256\n%s\n%.8s/%s/%s/aws4_request\n%s", r->amz_date, r->amz_date,
		     r->region, r->service, hash) < 0)
		sts = NULL;
	if (sts)
		signature(secret, r, sts, sig);
	if (!sts || !sig[0] ||
	    asprintf(auth, "AWS4-HMAC-SHA256 Credential=%s/%.8s/%s/%s/aws4_request, SignedHeaders=%s, "
		     "Signature=%s", access_key, r->amz_date, r->region, r->service, sh, sig) < 0) {
		*auth = NULL;
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	}
	OPENSSL_cleanse(sig, sizeof(sig));
	free(creq), free(sh), free(sts);
	return rc;
}

void s3_amz_date(long long t, char out[17])
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}
