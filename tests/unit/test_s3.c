/*
 * test_s3.c - the object-store source's parts that need no store: the
 * SigV4 signer against AWS's published vectors (the generic test suite and
 * the S3 examples), URI and query encoding, ListObjectsV2 parsing including
 * hostile answers, credentials and profile files (and their refusal when
 * others can read them), the [s3] settings and their environment fallbacks;
 * and the client's requests against a one-thread HTTP server on 127.0.0.1
 * (also as an HTTPS proxy, to see which host an AWS request goes to).
 */
#include "tf_test.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sources/s3_auth.h"
#include "sources/s3_client.h"
#include "sources/s3_creds.h"
#include "sources/s3_sign.h"
#include "sources/s3_xml.h"
#include "config/tf_config.h"
#include "config/tf_s3.h"

/* ---- SigV4 ------------------------------------------------------------------------------ */

#define SUITE_SECRET "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define UNRESERVED "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/* One case of AWS's aws-sig-v4-test-suite: service "service", us-east-1,
 * 20150830T123600Z, headers host and x-amz-date. */
static void suite_case(const char *path, const s3_kv *q, size_t nq, const char *want_sig)
{
	s3_kv h[2] = { { "Host", "example.amazonaws.com" }, { "X-Amz-Date", "20150830T123600Z" } };
	s3_sign_req r = { "GET", path, q, nq, h, 2, S3_EMPTY_SHA256, "20150830T123600Z", "us-east-1", "service" };
	char *auth = NULL, want[400];
	tf_error err;

	ck_assert_int_eq(s3_sign_auth(&r, "AKIDEXAMPLE", SUITE_SECRET, &auth, &err), TF_OK);
	snprintf(want, sizeof(want), "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/"
		 "aws4_request, SignedHeaders=host;x-amz-date, Signature=%s", want_sig);
	ck_assert_str_eq(auth, want);
	ck_assert_ptr_null(strstr(auth, SUITE_SECRET));
	free(auth);
}

START_TEST(test_sigv4_suite)
{
	s3_kv order[2] = { { "Param2", "value2" }, { "Param1", "value1" } };
	s3_kv unres[1] = { { UNRESERVED, UNRESERVED } };
	s3_kv utf8[1] = { { "\xe1\x88\xb4", "bar" } };
	s3_kv enc[3] = { { "Param-3", "Value3" }, { "Param", "Value2" }, { "\xe1\x88\xb4", "Value1" } };
	s3_kv value[2] = { { "Param1", "value2" }, { "Param1", "value1" } };
	s3_kv one[1] = { { "Param1", "value1" } };

	suite_case("/", NULL, 0, "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
	suite_case("/", order, 2, "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
	suite_case("/", unres, 1, "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197");
	suite_case("/", utf8, 1, "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04");
	suite_case("/", enc, 3, "371d3713e185cc334048618a97f809c9ffe339c62934c032af5a0e595648fcac");
	suite_case("/", value, 2, "5772eed61e12b33fae39ee5e7012498b51d56abc0abb7c60486157bd471c4694");
	suite_case("/", one, 1, "a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb");
	suite_case("/" UNRESERVED, NULL, 0, "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f");
	suite_case("/\xe1\x88\xb4", NULL, 0, "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85");
	suite_case("/example space/", NULL, 0, "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741");
}
END_TEST

/* The S3 documentation's GET Object example: a range, x-amz-content-sha256 signed. */
START_TEST(test_sigv4_s3_get_object)
{
	s3_kv h[4] = { { "Host", "examplebucket.s3.amazonaws.com" }, { "Range", "bytes=0-9" },
		       { "x-amz-content-sha256", S3_EMPTY_SHA256 }, { "x-amz-date", "20130524T000000Z" } };
	s3_sign_req r = { "GET", "/test.txt", NULL, 0, h, 4, S3_EMPTY_SHA256, "20130524T000000Z", "us-east-1", "s3" };
	char *auth = NULL, *sh = NULL, *creq;
	tf_error err;

	ck_assert_int_eq(s3_sign_auth(&r, "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
				      &auth, &err), TF_OK);
	ck_assert_str_eq(auth, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
			 "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
			 "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
	creq = s3_canonical_request(&r, &sh);
	ck_assert_str_eq(creq, "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
			 "x-amz-content-sha256:" S3_EMPTY_SHA256 "\nx-amz-date:20130524T000000Z\n\n"
			 "host;range;x-amz-content-sha256;x-amz-date\n" S3_EMPTY_SHA256);
	ck_assert_str_eq(sh, "host;range;x-amz-content-sha256;x-amz-date");
	free(auth), free(sh), free(creq);
}
END_TEST

START_TEST(test_encoding)
{
	s3_kv q[5] = { { "prefix", "a b/c+d&e=f" }, { "list-type", "2" }, { "delimiter", "/" },
		       { "continuation-token", "1/ab==" }, { "empty", NULL } };
	char *s;

	s = s3_uri_encode("/b/k ey/\xc3\xa9+~*'()!$", true);
	ck_assert_str_eq(s, "/b/k%20ey/%C3%A9%2B~%2A%27%28%29%21%24");
	free(s);
	s = s3_uri_encode("a/b", false);
	ck_assert_str_eq(s, "a%2Fb");
	free(s);
	s = s3_canonical_query(q, 5);
	ck_assert_str_eq(s, "continuation-token=1%2Fab%3D%3D&delimiter=%2F&empty=&list-type=2&"
			 "prefix=a%20b%2Fc%2Bd%26e%3Df");
	free(s);
	s = s3_canonical_query(NULL, 0);
	ck_assert_str_eq(s, "");
	free(s);
}
END_TEST

/* ---- ListObjectsV2 -------------------------------------------------------------------------- */

#define LIST_HEAD "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" \
	"<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>b</Name>"

START_TEST(test_list_parse)
{
	const char *xml = LIST_HEAD "<Prefix>d/</Prefix><KeyCount>3</KeyCount><MaxKeys>1000</MaxKeys>"
		"<EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>"
		"<NextContinuationToken>tok/1=</NextContinuationToken>"
		"<Contents><Key>d/a%20b.tdb</Key><LastModified>2024-05-06T07:08:09.123Z</LastModified>"
		"<ETag>&quot;0123abcd&quot;</ETag><Size>65536</Size><StorageClass>STANDARD</StorageClass></Contents>"
		"<Contents><Key>d/z</Key><Size>0</Size><ETag>\"e-2\"</ETag></Contents>"
		"<CommonPrefixes><Prefix>d/__fragments/</Prefix></CommonPrefixes></ListBucketResult>";
	s3_list_page pg;
	tf_error err;

	ck_assert_int_eq(s3_parse_list(xml, strlen(xml), 100, &pg, &err), TF_OK);
	ck_assert_uint_eq(pg.nobjects, 2);
	ck_assert_str_eq(pg.objects[0].key, "d/a b.tdb");
	ck_assert_uint_eq(pg.objects[0].size, 65536);
	ck_assert_str_eq(pg.objects[0].etag, "0123abcd");
	ck_assert_int_eq(pg.objects[0].mtime_ns, 1714979289123000000LL);
	ck_assert_str_eq(pg.objects[1].etag, "e-2");
	ck_assert_uint_eq(pg.nprefixes, 1);
	ck_assert_str_eq(pg.prefixes[0], "d/__fragments/");
	ck_assert(pg.truncated);
	ck_assert_str_eq(pg.next_token, "tok/1=");
	s3_list_page_free(&pg);
}
END_TEST

static void list_refused(const char *xml, size_t max, const char *why)
{
	s3_list_page pg;
	tf_error err;

	ck_assert_int_eq(s3_parse_list(xml, strlen(xml), max, &pg, &err), TF_E_IO);
	ck_assert_msg(strstr(err.msg, why), "'%s' lacks '%s'", err.msg, why);
	ck_assert_ptr_null(pg.objects);
	ck_assert_ptr_null(pg.prefixes);
}

START_TEST(test_list_hostile)
{
	char *big, *many;
	size_t n = 0;

	/* Entity expansion: any DOCTYPE is refused before an entity is seen. */
	list_refused("<?xml version=\"1.0\"?><!DOCTYPE l [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;\">]>"
		     "<ListBucketResult><Contents><Key>&b;</Key><Size>1</Size></Contents></ListBucketResult>",
		     100, "DOCTYPE");
	list_refused("<?xml version=\"1.0\"?><!DOCTYPE l SYSTEM \"file:///etc/passwd\"><ListBucketResult/>", 100,
		     "DOCTYPE");
	list_refused(LIST_HEAD "<Contents><Size>1</Size></Contents></ListBucketResult>", 100, "without Key");
	list_refused(LIST_HEAD "<Contents><Key>a</Key></Contents></ListBucketResult>", 100, "without Key or Size");
	list_refused(LIST_HEAD "<Contents><Key>a</Key><Size>-1</Size></Contents></ListBucketResult>", 100, "Size");
	list_refused(LIST_HEAD "<Contents><Key>a</Key><Size>99999999999999999999</Size></Contents>"
		     "</ListBucketResult>", 100, "Size");
	list_refused(LIST_HEAD "<IsTruncated>true</IsTruncated></ListBucketResult>", 100, "continuation token");
	list_refused(LIST_HEAD "<Contents><Key>a", 100, "");
	list_refused("<Error><Code>NoSuchBucket</Code></Error>", 100, "not a ListBucketResult");
	/* A name past 4096 bytes, and more entries than a page may hold. */
	big = malloc(8192 + 200);
	n = (size_t)sprintf(big, LIST_HEAD "<Contents><Key>");
	memset(big + n, 'k', 5000);
	sprintf(big + n + 5000, "</Key><Size>1</Size></Contents></ListBucketResult>");
	list_refused(big, 100, "longer than 4096");
	free(big);
	many = malloc(64 * 200 + 300);
	n = (size_t)sprintf(many, LIST_HEAD);
	for (int i = 0; i < 200; i++)
		n += (size_t)sprintf(many + n, "<CommonPrefixes><Prefix>p%d/</Prefix></CommonPrefixes>", i);
	sprintf(many + n, "</ListBucketResult>");
	list_refused(many, 100, "more entries");
	free(many);
}
END_TEST

/* A name that does not decode (a NUL, a bad escape) is set aside as sent,
 * for the source to skip and report; the rest of the page stands. */
START_TEST(test_list_bad_names)
{
	const char *xml = LIST_HEAD "<EncodingType>url</EncodingType>"
		"<Contents><Key>a%00b</Key><Size>1</Size><ETag>\"e\"</ETag></Contents>"
		"<Contents><Key>good%2Bone</Key><Size>1</Size><ETag>\"e\"</ETag></Contents>"
		"<Contents><Key>esc%zz</Key><Size>1</Size><ETag>\"e\"</ETag></Contents>"
		"<Contents><Key>cut%4</Key><Size>1</Size><ETag>\"e\"</ETag></Contents>"
		"<CommonPrefixes><Prefix>p%00/</Prefix></CommonPrefixes>"
		"<CommonPrefixes><Prefix>q%2F/</Prefix></CommonPrefixes></ListBucketResult>";
	s3_list_page pg;
	tf_error err;

	ck_assert_msg(s3_parse_list(xml, strlen(xml), 100, &pg, &err) == TF_OK, "%s", err.msg);
	ck_assert_uint_eq(pg.nobjects, 1);
	ck_assert_str_eq(pg.objects[0].key, "good+one");
	ck_assert_uint_eq(pg.nprefixes, 1);
	ck_assert_str_eq(pg.prefixes[0], "q//");	/* decodes: the source judges the name */
	ck_assert_uint_eq(pg.nbad, 4);
	ck_assert_str_eq(pg.bad[0], "a%00b");
	ck_assert_str_eq(pg.bad[1], "esc%zz");
	ck_assert_str_eq(pg.bad[2], "cut%4");
	ck_assert_str_eq(pg.bad[3], "p%00/");
	s3_list_page_free(&pg);
}
END_TEST

/* An object without an ETag is listed with an empty one (the source
 * refuses to open it: no GET of it could prove its version); the rest of
 * the page stands. */
START_TEST(test_list_without_etag)
{
	const char *xml = LIST_HEAD "<Contents><Key>a</Key><Size>1</Size></Contents>"
		"<Contents><Key>b</Key><Size>2</Size><ETag>\"\"</ETag></Contents>"
		"<Contents><Key>c</Key><Size>3</Size><ETag>\"e3\"</ETag></Contents></ListBucketResult>";
	s3_list_page pg;
	tf_error err;

	ck_assert_msg(s3_parse_list(xml, strlen(xml), 100, &pg, &err) == TF_OK, "%s", err.msg);
	ck_assert_uint_eq(pg.nobjects, 3);
	ck_assert_str_eq(pg.objects[0].etag, "");
	ck_assert_str_eq(pg.objects[1].etag, "");
	ck_assert_str_eq(pg.objects[2].etag, "e3");
	s3_list_page_free(&pg);
}
END_TEST

/* Past 2262 nanoseconds since 1970 overflow int64: such a date is no date. */
START_TEST(test_time_range)
{
	const char *xml = LIST_HEAD "<Contents><Key>a</Key><Size>1</Size><ETag>e</ETag>"
		"<LastModified>2300-01-01T00:00:00.000Z</LastModified></Contents></ListBucketResult>";
	int64_t ns = 1;
	s3_list_page pg;
	tf_error err;

	ck_assert(s3_parse_time("2262-04-11T23:47:16.854775807Z", &ns));
	ck_assert_int_eq(ns, INT64_MAX);
	ck_assert(s3_parse_time("1970-01-01T00:00:01Z", &ns));
	ck_assert_int_eq(ns, 1000000000);
	ck_assert(!s3_parse_time("2262-04-11T23:47:16.854775808Z", &ns));
	ck_assert(!s3_parse_time("2300-01-01T00:00:00Z", &ns));
	ck_assert(!s3_parse_time("9999-12-31T23:59:59.999Z", &ns));
	ck_assert_int_eq(s3_parse_list(xml, strlen(xml), 100, &pg, &err), TF_OK);
	ck_assert_uint_eq(pg.nobjects, 1);
	ck_assert_int_eq(pg.objects[0].mtime_ns, 0);
	s3_list_page_free(&pg);
}
END_TEST

START_TEST(test_error_code)
{
	const char *xml = "<?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code>"
			  "<Message>The request signature we calculated does not match</Message></Error>";
	char code[64];

	s3_parse_error_code(xml, strlen(xml), code, sizeof(code));
	ck_assert_str_eq(code, "SignatureDoesNotMatch");
	s3_parse_error_code("<Error><Code>a b<c</Code>", 24, code, sizeof(code));
	s3_parse_error_code("<Error><Code>Slow Down!</Code></Error>", 38, code, sizeof(code));
	ck_assert_str_eq(code, "Slow_Down_");
	s3_parse_error_code("", 0, code, sizeof(code));
	ck_assert_str_eq(code, "");
}
END_TEST

/* ---- credentials --------------------------------------------------------------------------- */

static char dir[PATH_MAX];

static void creds_setup(void)
{
	snprintf(dir, sizeof(dir), "%s/tf_s3.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void creds_teardown(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static const char *write_file(const char *name, const char *text, mode_t mode)
{
	static char path[PATH_MAX + 64];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
	ck_assert_int_eq(chmod(path, mode), 0);
	return path;
}

static void quiet_env(void);

/* What the chain found for s: the key's id (or "" anonymous), where from, the region. */
typedef struct found {
	char id[300], origin[600], region[64];
} chain_out;

static tf_status chain(const tf_s3_settings *s, chain_out *f, tf_error *err)
{
	s3_bound b = { tf_now_ns() + 20000000000LL, NULL, NULL };
	s3_auth *a = NULL;
	s3_key *k = NULL;
	char *region = NULL;
	tf_status rc = s3_auth_new(s, &b, &a, &region, err);

	memset(f, 0, sizeof(*f));
	if (rc == TF_OK) {
		snprintf(f->region, sizeof(f->region), "%s", region);
		if (a && (rc = s3_auth_key(a, &b, &k, err)) == TF_OK) {
			snprintf(f->id, sizeof(f->id), "%s", k->access_key);
			snprintf(f->origin, sizeof(f->origin), "%s", s3_auth_origin(a));
			s3_key_put(k);
		}
	}
	s3_auth_free(a);
	free(region);
	return rc;
}

START_TEST(test_creds_file)
{
	char token[1601], text[2200];
	s3_creds c = { 0 };
	bool found;
	tf_error err;

	memset(token, 'T', 1600);
	token[1600] = '\0';
	snprintf(text, sizeof(text), "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = sd\n\n"
		 "[swift]\naws_access_key_id = acct:user\naws_secret_access_key = s3cr3t/with+chars\n"
		 "aws_session_token = %s\n", token);
	const char *p = write_file("credentials", text, 0600);
	ck_assert_int_eq(s3_creds_read_file(p, "swift", 0, &c, &found, &err), TF_OK);
	ck_assert(found);
	ck_assert_str_eq(c.access_key, "acct:user");
	ck_assert_str_eq(c.secret, "s3cr3t/with+chars");
	ck_assert_str_eq(c.token, token);	/* longer than inih's line, kept whole */
	s3_creds_free(&c);
	ck_assert_int_eq(s3_creds_read_file(p, "nope", 0, &c, &found, &err), TF_OK);
	ck_assert(!found);
	ck_assert_ptr_null(c.access_key);
	/* Readable by others: refused, secret not in the message. */
	p = write_file("credentials", text, 0644);
	ck_assert_int_eq(s3_creds_read_file(p, "swift", 0, &c, &found, &err), TF_E_INVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "readable by group or others"));
	ck_assert_ptr_null(strstr(err.msg, "s3cr3t"));
	s3_creds_free(&c);
}
END_TEST

START_TEST(test_creds_config_file)
{
	const char *p = write_file("config", "[default]\nregion = eu-west-3\n[profile dev]\nregion = ap-south-1\n"
				   "aws_access_key_id = K\naws_secret_access_key = S\n", 0644);
	s3_creds c = { 0 };
	bool found;
	tf_error err;

	/* A readable config is fine for the region... */
	ck_assert_int_eq(s3_creds_read_file(p, "default", S3_CF_CONFIG, &c, &found, &err), TF_OK);
	ck_assert_str_eq(c.region, "eu-west-3");
	s3_creds_free(&c);
	ck_assert_int_eq(s3_creds_read_file(p, "dev", S3_CF_CONFIG | S3_CF_NO_SECRETS, &c, &found, &err), TF_OK);
	ck_assert_str_eq(c.region, "ap-south-1");
	ck_assert_ptr_null(c.secret);
	s3_creds_free(&c);
	/* ... but not for a secret. */
	ck_assert_int_eq(s3_creds_read_file(p, "dev", S3_CF_CONFIG, &c, &found, &err), TF_E_INVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "chmod 600"));
	s3_creds_free(&c);
	ck_assert_int_eq(s3_creds_read_file("/nonexistent/x", "a", S3_CF_MUST_EXIST, &c, &found, &err), TF_E_INVAL);
}
END_TEST

START_TEST(test_creds_order)
{
	char cred[PATH_MAX + 64], conf[PATH_MAX + 64], extra[PATH_MAX + 64];
	tf_s3_settings s;
	chain_out c;
	tf_error err;

	quiet_env();
	snprintf(cred, sizeof(cred), "%s", write_file("credentials", "[p]\naws_access_key_id = FROMFILE\n"
						       "aws_secret_access_key = x\n", 0600));
	snprintf(conf, sizeof(conf), "%s", write_file("config", "[profile p]\nregion = r-1\n", 0600));
	snprintf(extra, sizeof(extra), "%s", write_file("extra", "[q]\naws_access_key_id = EXTRA\n"
							 "aws_secret_access_key = y\n", 0600));
	setenv("AWS_SHARED_CREDENTIALS_FILE", cred, 1);
	setenv("AWS_CONFIG_FILE", conf, 1);
	tf_s3_settings_init(&s);
	ck_assert_int_eq(tf_s3_settings_set(&s, "profile", "p", NULL, &err), TF_OK);
	ck_assert_msg(chain(&s, &c, &err) == TF_OK, "%s", err.msg);
	ck_assert_str_eq(c.id, "FROMFILE");
	ck_assert_str_eq(c.region, "r-1");
	setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	ck_assert_int_eq(chain(&s, &c, &err), TF_OK);
	ck_assert_str_eq(c.id, "ENVKEY");
	ck_assert_str_eq(c.origin, "the environment (AWS_ACCESS_KEY_ID)");
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	/* Profile q is only in the credentials = FILE. */
	ck_assert_int_eq(tf_s3_settings_set(&s, "profile", "q", NULL, &err), TF_OK);
	ck_assert_int_eq(chain(&s, &c, &err), TF_E_ACCESS);
	ck_assert_msg(strstr(err.msg, "no credentials") && strstr(err.msg, "profile 'q'"), "%s", err.msg);
	ck_assert_int_eq(tf_s3_settings_set(&s, "credentials", extra, NULL, &err), TF_OK);
	ck_assert_int_eq(chain(&s, &c, &err), TF_OK);
	ck_assert_str_eq(c.id, "EXTRA");
	/* Anonymous: nothing needed. */
	ck_assert_int_eq(tf_s3_settings_set(&s, "profile", "none", NULL, &err), TF_OK);
	ck_assert_int_eq(tf_s3_settings_set(&s, "anonymous", "yes", NULL, &err), TF_OK);
	ck_assert_int_eq(chain(&s, &c, &err), TF_OK);
	ck_assert_str_eq(c.id, "");
	tf_s3_settings_clear(&s);
	quiet_env();
}
END_TEST

/* No proxy, endpoint, region, profile or keys from the caller's environment. */
static void quiet_env(void)
{
	static const char *const vars[] = { "http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
					    "no_proxy", "NO_PROXY", "AWS_ENDPOINT_URL", "AWS_REGION",
					    "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID",
					    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE",
					    "AWS_SHARED_CREDENTIALS_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
					    "AWS_ROLE_SESSION_NAME", "AWS_ENDPOINT_URL_STS",
					    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
					    "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
					    "AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE" };

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);	/* no machine's own identity */
}

static const char *tmp_path(const char *name)
{
	static char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

/* Dotfile managers link ~/.aws/config: the link is followed, the target's
 * mode is what counts. */
START_TEST(test_creds_symlink)
{
	char real[PATH_MAX + 64], lnk[PATH_MAX + 64];
	tf_s3_settings s;
	chain_out c;
	tf_error err;

	quiet_env();
	tf_s3_settings_init(&s);
	snprintf(real, sizeof(real), "%s", write_file("real-config", "[default]\nregion = eu-central-1\n", 0644));
	snprintf(lnk, sizeof(lnk), "%s", tmp_path("linked-config"));
	ck_assert_int_eq(symlink(real, lnk), 0);
	setenv("AWS_CONFIG_FILE", lnk, 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", tmp_path("none"), 1);
	setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	ck_assert_msg(chain(&s, &c, &err) == TF_OK, "%s", err.msg);
	ck_assert_str_eq(c.region, "eu-central-1");
	/* A config that cannot be opened costs only its region when no key is wanted from it... */
	setenv("AWS_CONFIG_FILE", tmp_path("loop"), 1);
	ck_assert_int_eq(symlink("loop", tmp_path("loop")), 0);
	ck_assert_msg(chain(&s, &c, &err) == TF_OK, "%s", err.msg);
	ck_assert_str_eq(c.region, "us-east-1");	/* none from the profile */
	ck_assert_str_eq(c.id, "ENVKEY");
	/* ... but ends the search for keys when one is. */
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	ck_assert_int_eq(chain(&s, &c, &err), TF_E_INVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "loop"));
	/* A linked credentials file others can read is still refused. */
	snprintf(real, sizeof(real), "%s", write_file("real-creds", "[default]\naws_access_key_id = K\n"
						       "aws_secret_access_key = S\n", 0644));
	snprintf(lnk, sizeof(lnk), "%s", tmp_path("linked-credentials"));
	ck_assert_int_eq(symlink(real, lnk), 0);
	setenv("AWS_SHARED_CREDENTIALS_FILE", lnk, 1);
	ck_assert_int_eq(chain(&s, &c, &err), TF_E_INVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "readable by group or others"));
	ck_assert_int_eq(chmod(real, 0600), 0);
	ck_assert_msg(chain(&s, &c, &err) == TF_OK, "%s", err.msg);
	ck_assert_str_eq(c.id, "K");
	tf_s3_settings_clear(&s);
	quiet_env();
}
END_TEST


/* ---- the credential chain's parts ------------------------------------------------------------- */

START_TEST(test_expiration)
{
	int64_t t;

	ck_assert(s3_parse_expiration("2024-01-02T03:04:05Z", &t));
	ck_assert_int_eq(t, 1704164645);
	ck_assert(s3_parse_expiration("2024-01-02T03:04:05.123456Z", &t));
	ck_assert_int_eq(t, 1704164645);
	ck_assert(s3_parse_expiration("2024-01-02T05:04:05+02:00", &t));	/* credential_process may give an offset */
	ck_assert_int_eq(t, 1704164645);
	ck_assert(s3_parse_expiration("2024-01-01T22:04:05-05:00", &t));
	ck_assert_int_eq(t, 1704164645);
	ck_assert(!s3_parse_expiration("2024-01-02 03:04:05Z", &t));
	ck_assert(!s3_parse_expiration("2024-01-02T03:04:05", &t));
	ck_assert(!s3_parse_expiration("2024-01-02T03:04:05+2", &t));
	ck_assert(!s3_parse_expiration("2024-13-02T03:04:05Z", &t));
	ck_assert(!s3_parse_expiration("", &t));
}
END_TEST

static tf_status cred_json(const char *json, s3_json_kind kind, s3_key **k, tf_error *err)
{
	return s3_parse_cred_json(json, strlen(json), kind, k, err);
}

START_TEST(test_cred_json)
{
	s3_key *k;
	tf_error err;

	ck_assert_msg(cred_json("{\"Version\": 1, \"AccessKeyId\": \"AKID\", \"SecretAccessKey\": \"s/e+c\", "
				"\"SessionToken\": \"TOK\", \"Expiration\": \"2030-01-01T00:00:00Z\"}", S3_JSON_PROCESS, &k,
				&err) == TF_OK, "%s", err.msg);
	ck_assert_str_eq(k->access_key, "AKID");
	ck_assert_str_eq(k->secret, "s/e+c");
	ck_assert_str_eq(k->token, "TOK");
	ck_assert_int_eq(k->expires, 1893456000);
	s3_key_put(k);
	/* Long-term keys from a process: no token, no expiration, never fetched again. */
	ck_assert_int_eq(cred_json("{\"Version\": 1, \"AccessKeyId\": \"A\", \"SecretAccessKey\": \"S\"}",
				   S3_JSON_PROCESS, &k, &err), TF_OK);
	ck_assert_ptr_null(k->token);
	ck_assert_int_eq(k->expires, 0);
	s3_key_put(k);
	ck_assert_int_eq(cred_json("{\"AccessKeyId\": \"A\", \"SecretAccessKey\": \"S\"}", S3_JSON_PROCESS, &k, &err),
			 TF_E_IO);
	ck_assert_ptr_nonnull(strstr(err.msg, "Version"));
	ck_assert_int_eq(cred_json("{\"Version\": 2, \"AccessKeyId\": \"A\", \"SecretAccessKey\": \"S\"}",
				   S3_JSON_PROCESS, &k, &err), TF_E_IO);
	ck_assert_int_eq(cred_json("{\"Version\": 1, \"AccessKeyId\": \"A\"}", S3_JSON_PROCESS, &k, &err), TF_E_ACCESS);
	ck_assert_int_eq(cred_json("{\"Version\": 1, \"AccessKeyId\": \"A\", \"SecretAccessKey\": \"S\", "
				   "\"Expiration\": \"soon\"}", S3_JSON_PROCESS, &k, &err), TF_E_IO);
	ck_assert_int_eq(cred_json("not json", S3_JSON_PROCESS, &k, &err), TF_E_IO);
	ck_assert_int_eq(cred_json("[1]", S3_JSON_PROCESS, &k, &err), TF_E_IO);
	/* An answer that would forge a header, or run on for ever, is no key. */
	ck_assert_int_eq(cred_json("{\"Version\": 1, \"AccessKeyId\": \"A\", \"SecretAccessKey\": \"S\", "
				   "\"SessionToken\": \"T\\r\\nX-Evil: 1\"}", S3_JSON_PROCESS, &k, &err), TF_E_ACCESS);
	ck_assert_ptr_null(strstr(err.msg, "Evil"));
	ck_assert_int_eq(cred_json("{\"Version\": 1, \"AccessKeyId\": \"A/B\", \"SecretAccessKey\": \"S\"}",
				   S3_JSON_PROCESS, &k, &err), TF_E_ACCESS);
	ck_assert_int_eq(cred_json("{\"Version\": 1, \"AccessKeyId\": \"A B\", \"SecretAccessKey\": \"S\"}",
				   S3_JSON_PROCESS, &k, &err), TF_E_ACCESS);
	/* The container's and IMDS's: Token; IMDS's Code must say Success. */
	ck_assert_int_eq(cred_json("{\"AccessKeyId\": \"A\", \"SecretAccessKey\": \"S\", \"Token\": \"T\", "
				   "\"Expiration\": \"2030-01-01T00:00:00Z\"}", S3_JSON_CONTAINER, &k, &err), TF_OK);
	ck_assert_str_eq(k->token, "T");
	s3_key_put(k);
	ck_assert_int_eq(cred_json("{\"Code\": \"Success\", \"AccessKeyId\": \"A\", \"SecretAccessKey\": \"S\", "
				   "\"Token\": \"T\", \"Expiration\": \"2030-01-01T00:00:00Z\"}", S3_JSON_IMDS, &k, &err), TF_OK);
	s3_key_put(k);
	ck_assert_int_eq(cred_json("{\"Code\": \"Failure\", \"AccessKeyId\": \"A\", \"SecretAccessKey\": \"S\"}",
				   S3_JSON_IMDS, &k, &err), TF_E_ACCESS);
}
END_TEST

static void split_case(const char *line, const char *const *want)
{
	char **argv;
	tf_error err;
	size_t i = 0;

	ck_assert_msg(s3_split_command(line, &argv, &err) == TF_OK, "%s: %s", line, err.msg);
	for (; want[i]; i++) {
		ck_assert_ptr_nonnull(argv[i]);
		ck_assert_str_eq(argv[i], want[i]);
	}
	ck_assert_ptr_null(argv[i]);
	s3_free_argv(argv);
}

/* credential_process is split as the AWS CLI splits it (Python's shlex.split), not run by a shell. */
START_TEST(test_split_command)
{
	char **argv;
	tf_error err;

	split_case("/usr/bin/helper --profile x", (const char *[]){ "/usr/bin/helper", "--profile", "x", NULL });
	split_case("  a\t 'b c'  \"d \\\"e\\\" \\\\f\" g\\ h ", (const char *[]){ "a", "b c", "d \"e\" \\f", "g h", NULL });
	split_case("x'y'\"z\" ''", (const char *[]){ "xyz", "", NULL });
	split_case("a \"$HOME\" '$(id)' ;", (const char *[]){ "a", "$HOME", "$(id)", ";", NULL });
	split_case("\"a\\b\"", (const char *[]){ "a\\b", NULL });
	ck_assert_int_eq(s3_split_command("a 'b", &argv, &err), TF_E_INVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "unclosed quote"));
	ck_assert_int_eq(s3_split_command("a \"b", &argv, &err), TF_E_INVAL);
	ck_assert_int_eq(s3_split_command("   ", &argv, &err), TF_E_INVAL);
}
END_TEST

START_TEST(test_sts_parse)
{
	static const char ok[] = "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
				 "<AssumeRoleWithWebIdentityResult><SubjectFromWebIdentityToken>x</SubjectFromWebIdentityToken>"
				 "<Credentials><SessionToken>TOK/+=</SessionToken><SecretAccessKey>SEC</SecretAccessKey>"
				 "<Expiration>2030-01-01T00:00:00Z</Expiration><AccessKeyId>ASIA</AccessKeyId></Credentials>"
				 "</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>";
	static const char bad[] = "<ErrorResponse><Error><Type>Sender</Type><Code>InvalidIdentityToken</Code>"
				  "<Message>no</Message></Error></ErrorResponse>";
	s3_sts_answer a;
	tf_error err;
	char region[64], code[80];

	ck_assert_int_eq(s3_parse_sts(ok, strlen(ok), &a, &err), TF_OK);
	ck_assert_str_eq(a.access_key, "ASIA");
	ck_assert_str_eq(a.secret, "SEC");
	ck_assert_str_eq(a.token, "TOK/+=");
	ck_assert_str_eq(a.expiration, "2030-01-01T00:00:00Z");
	ck_assert_ptr_null(a.code);
	s3_sts_answer_free(&a);
	ck_assert_int_eq(s3_parse_sts(bad, strlen(bad), &a, &err), TF_OK);
	ck_assert_str_eq(a.code, "InvalidIdentityToken");
	s3_sts_answer_free(&a);
	ck_assert_int_eq(s3_parse_sts("<R><Credentials><AccessKeyId>A</AccessKeyId></Credentials></R>", 62, &a, &err),
			 TF_E_IO);
	static const char ent[] = "<!DOCTYPE r [<!ENTITY e \"x\">]><R>&e;</R>";
	ck_assert_int_eq(s3_parse_sts(ent, strlen(ent), &a, &err), TF_E_IO);
	ck_assert_ptr_nonnull(strstr(err.msg, "DOCTYPE"));
	static const char twice[] = "<R><Credentials><AccessKeyId>A</AccessKeyId><AccessKeyId>B</AccessKeyId>"
				    "</Credentials></R>";
	ck_assert_int_eq(s3_parse_sts(twice, strlen(twice), &a, &err), TF_E_IO);
	/* An S3 error naming the bucket's region. */
	static const char moved[] = "<Error><Code>AuthorizationHeaderMalformed</Code><Message>the region "
				    "'us-east-1' is wrong; expecting 'eu-west-1'</Message><Region>eu-west-1</Region></Error>";
	s3_parse_error(moved, strlen(moved), code, sizeof(code), region, sizeof(region));
	ck_assert_str_eq(code, "AuthorizationHeaderMalformed");
	ck_assert_str_eq(region, "eu-west-1");
	s3_parse_error("<Error><Region>a.b/c</Region></Error>", 37, code, sizeof(code), region, sizeof(region));
	ck_assert_str_eq(region, "a_b_c");
}
END_TEST

/* ---- requests, against a fake server ---------------------------------------------------------- */

/* One thread answering every connection on 127.0.0.1 with the same answer. */
typedef struct fake {
	int lfd;
	pthread_t th;
	atomic_bool stop;
	atomic_uint hits;
	const char *head;	/* status line and headers, without Content-Length */
	size_t body_len;	/* a body of so many 'x' (none for HEAD) */
	const char *text;	/* or this body */
	const char *then;	/* from the second request on, this head (and text2) */
	const char *text2;
	char req[16384];	/* the last request's head; read it after fake_stop */
	char first[16384];	/* the first one's */
	char url[64];		/* "http://127.0.0.1:PORT" */
} fake;

static void send_all(int fd, const char *p, size_t n)
{
	ssize_t w;

	for (; n && (w = send(fd, p, n, MSG_NOSIGNAL)) > 0; p += w, n -= (size_t)w)
		;
}

static void fake_serve(fake *f, int fd)
{
	char head[1024], body[16384];
	size_t n = 0, left = f->body_len;
	ssize_t r;

	while (n < sizeof(f->req) - 1 && (r = recv(fd, f->req + n, sizeof(f->req) - 1 - n, 0)) > 0) {
		f->req[n += (size_t)r] = '\0';
		if (strstr(f->req, "\r\n\r\n"))
			break;
	}
	f->req[n] = '\0';
	bool later = atomic_fetch_add(&f->hits, 1) > 0 && f->then;
	const char *text = later ? f->text2 : f->text;
	if (text)
		left = strlen(text);
	if (!later)
		memcpy(f->first, f->req, sizeof(f->first));
	snprintf(head, sizeof(head), "%sContent-Length: %zu\r\nConnection: close\r\n\r\n", later ? f->then : f->head,
		 left);
	send_all(fd, head, strlen(head));
	if (text) {
		if (strncmp(f->req, "HEAD ", 5))
			send_all(fd, text, left);
		return;
	}
	memset(body, 'x', sizeof(body));
	for (left = strncmp(f->req, "HEAD ", 5) ? left : 0; left; left -= left < sizeof(body) ? left : sizeof(body))
		send_all(fd, body, left < sizeof(body) ? left : sizeof(body));
}

static void *fake_run(void *arg)
{
	fake *f = arg;
	struct pollfd p = { .fd = f->lfd, .events = POLLIN };
	int fd;

	while (!atomic_load(&f->stop))
		if (poll(&p, 1, 20) > 0 && (fd = accept(f->lfd, NULL, NULL)) >= 0) {
			fake_serve(f, fd);
			close(fd);
		}
	return NULL;
}

/* A fake answering head + text to the first request, then + text2 to the
 * others (then NULL: head + text to all). */
static void fake_start_body(fake *f, const char *head, size_t body_len, const char *text, const char *then,
			    const char *text2)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);

	memset(f, 0, sizeof(*f));
	f->head = head, f->body_len = body_len, f->text = text, f->then = then, f->text2 = text2;
	ck_assert_int_ge(f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), 0);
	ck_assert_int_eq(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(f->lfd, 8), 0);
	ck_assert_int_eq(getsockname(f->lfd, (struct sockaddr *)&a, &alen), 0);
	snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
	ck_assert_int_eq(pthread_create(&f->th, NULL, fake_run, f), 0);
}

static void fake_start(fake *f, const char *head, size_t body_len)
{
	fake_start_body(f, head, body_len, NULL, NULL, NULL);
}

static void fake_start_seq(fake *f, const char *head, const char *text, const char *then, const char *text2)
{
	fake_start_body(f, head, 0, text, then, text2);
}

static void fake_stop(fake *f)
{
	atomic_store(&f->stop, true);
	pthread_join(f->th, NULL);
	close(f->lfd);
}

/* A bound no test reaches. */
static const s3_bound forever = { INT64_MAX, NULL, NULL };

/* A client of bucket at endpoint (NULL: AWS), eu-west-1, anonymous unless
 * AWS_ACCESS_KEY_ID is set; path_style NULL: auto. */
static s3_client *client_ok(const char *endpoint, const char *bucket, const char *path_style, const char *retries)
{
	tf_s3_settings s;
	s3_client *c = NULL;
	tf_error err;

	setenv("AWS_CONFIG_FILE", tmp_path("none"), 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", tmp_path("none"), 1);
	tf_s3_settings_init(&s);
	ck_assert_int_eq(tf_s3_settings_set(&s, "region", "eu-west-1", NULL, &err), TF_OK);
	ck_assert_int_eq(tf_s3_settings_set(&s, "retries", retries, NULL, &err), TF_OK);
	ck_assert_int_eq(tf_s3_settings_set(&s, "timeout", "10", NULL, &err), TF_OK);
	ck_assert_int_eq(tf_s3_settings_set(&s, "anonymous", getenv("AWS_ACCESS_KEY_ID") ? "no" : "yes", NULL, &err),
			 TF_OK);
	if (endpoint)
		ck_assert_int_eq(tf_s3_settings_set(&s, "endpoint", endpoint, NULL, &err), TF_OK);
	if (path_style)
		ck_assert_int_eq(tf_s3_settings_set(&s, "path_style", path_style, NULL, &err), TF_OK);
	ck_assert_int_eq(tf_s3_settings_resolve(&s, &err), TF_OK);
	ck_assert_msg(s3_client_new(&s, bucket, &c, &err) == TF_OK, "%s", err.msg);
	tf_s3_settings_clear(&s);
	return c;
}

/* STS session tokens run past 4 KB: the header carrying one is sent whole. */
START_TEST(test_client_long_token)
{
	char *token = malloc(6001), *want = malloc(6100);
	s3_client *c;
	s3_entry e;
	tf_error err;
	fake f;

	quiet_env();
	memset(token, 'T', 6000);
	token[6000] = '\0';
	snprintf(want, 6100, "\r\nx-amz-security-token: %s\r\n", token);
	setenv("AWS_ACCESS_KEY_ID", "AKIDTEST", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
	setenv("AWS_SESSION_TOKEN", token, 1);
	fake_start(&f, "HTTP/1.1 200 OK\r\nETag: \"e1\"\r\n", 10);
	c = client_ok(f.url, "b", NULL, "0");
	ck_assert_msg(s3_client_head(c, &forever, "k", &e, &err) == TF_OK, "%s", err.msg);
	fake_stop(&f);
	ck_assert_uint_eq(e.size, 10);
	ck_assert_str_eq(e.etag, "e1");
	ck_assert_ptr_nonnull(strstr(f.req, want));
	s3_client_free(c);
	free(token), free(want);
	quiet_env();
}
END_TEST

/* A refusal with an error page past the 64 KiB kept of it is judged by its status. */
static void error_case(const char *head, tf_status want, unsigned want_hits, const char *msg)
{
	uint8_t buf[10];
	s3_client *c;
	tf_error err;
	fake f;

	fake_start(&f, head, 200000);
	c = client_ok(f.url, "b", NULL, "2");
	s3_version v = { "e1", 100, NULL };

	ck_assert_int_eq(s3_client_get(c, &forever, "k", &v, 0, buf, sizeof(buf), &err), want);
	fake_stop(&f);
	ck_assert_uint_eq(atomic_load(&f.hits), want_hits);
	ck_assert_msg(strstr(err.msg, msg), "'%s' lacks '%s'", err.msg, msg);
	ck_assert_ptr_nonnull(strstr(f.req, "\r\nIf-Match: \"e1\"\r\n"));
	s3_client_free(c);
}

START_TEST(test_client_error_body)
{
	quiet_env();
	error_case("HTTP/1.1 412 Precondition Failed\r\nContent-Type: text/html\r\n", TF_E_STALE, 1, "HTTP 412");
	error_case("HTTP/1.1 404 Not Found\r\n", TF_E_NOTFOUND, 1, "HTTP 404");
	error_case("HTTP/1.1 403 Forbidden\r\n", TF_E_ACCESS, 1, "HTTP 403");
	error_case("HTTP/1.1 503 Slow Down\r\n", TF_E_IO, 3, "HTTP 503");
	quiet_env();
}
END_TEST

/* A store may ignore If-Match: an answer proves its version by its ETag,
 * size and Last-Modified (the first answer's, kept for the object), or
 * it is refused, never served; no ETag at all proves nothing. */
static void version_case(const char *head, int64_t seen, tf_status want, const char *msg)
{
	uint8_t buf[10];
	_Atomic int64_t mtime;
	s3_version v = { "e1", 100, &mtime };
	s3_client *c;
	tf_error err = { 0 };
	fake f;

	atomic_init(&mtime, seen);
	fake_start(&f, head, 10);
	c = client_ok(f.url, "b", NULL, "2");
	ck_assert_int_eq(s3_client_get(c, &forever, "k", &v, 0, buf, sizeof(buf), &err), want);
	fake_stop(&f);
	ck_assert_uint_eq(atomic_load(&f.hits), 1);	/* never retried */
	ck_assert_msg(strstr(err.msg, msg), "'%s' lacks '%s'", err.msg, msg);
	s3_client_free(c);
}

START_TEST(test_client_version)
{
	const char *range = "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/100\r\n";
	char head[300];

	quiet_env();
	version_case(range, 0, TF_E_IO, "no ETag in the answer");
	snprintf(head, sizeof(head), "%sETag: \"e2\"\r\n", range);
	version_case(head, 0, TF_E_STALE, "ETag changed");
	snprintf(head, sizeof(head), "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/101\r\nETag: \"e1\"\r\n");
	version_case(head, 0, TF_E_STALE, "size changed");
	snprintf(head, sizeof(head), "%sETag: \"e1\"\r\nLast-Modified: Mon, 12 Oct 2009 17:50:00 GMT\r\n", range);
	version_case(head, 1255369800000000000LL + 1000000000, TF_E_STALE, "Last-Modified changed");
	version_case(head, 0, TF_OK, "");
	version_case(head, 1255369800000000000LL, TF_OK, "");
	quiet_env();
}
END_TEST

static bool always_gone(void *arg)
{
	(void)arg;
	return true;
}

/* Nothing runs past a request's bound: not sent once it has passed, not
 * retried past it, and given up once the caller is gone. */
START_TEST(test_client_bound)
{
	uint8_t buf[10];
	s3_version v = { "e1", 100, NULL };
	s3_bound past = { tf_now_ns() - 1, NULL, NULL }, gone = { INT64_MAX, always_gone, NULL }, soon;
	s3_client *c;
	tf_error err;
	int64_t t0;
	fake f;

	quiet_env();
	fake_start(&f, "HTTP/1.1 503 Slow Down\r\n", 0);
	c = client_ok(f.url, "b", NULL, "20");
	ck_assert_int_eq(s3_client_get(c, &past, "k", &v, 0, buf, sizeof(buf), &err), TF_E_IO);
	ck_assert_msg(strstr(err.msg, "not sent: no time left"), "%s", err.msg);
	ck_assert_uint_eq(atomic_load(&f.hits), 0);
	ck_assert_int_eq(s3_client_get(c, &gone, "k", &v, 0, buf, sizeof(buf), &err), TF_E_IO);
	ck_assert_msg(strstr(err.msg, "the caller is gone"), "%s", err.msg);
	ck_assert_uint_eq(atomic_load(&f.hits), 0);
	/* 20 retries with backoff would take a minute: the bound ends them. */
	t0 = tf_now_ns();
	soon = (s3_bound){ t0 + 500000000, NULL, NULL };
	ck_assert_int_eq(s3_client_get(c, &soon, "k", &v, 0, buf, sizeof(buf), &err), TF_E_IO);
	ck_assert_msg(tf_now_ns() - t0 < 1500000000, "%lld ns", (long long)(tf_now_ns() - t0));
	ck_assert_msg(strstr(err.msg, "HTTP 503") && strstr(err.msg, "deadline"), "%s", err.msg);
	fake_stop(&f);
	ck_assert_uint_lt(atomic_load(&f.hits), 21);
	s3_client_free(c);
	quiet_env();
}
END_TEST

/* Last-Modified past 2262 does not fit int64 nanoseconds: no time, not a wrapped one. */
START_TEST(test_client_last_modified)
{
	static const char *const heads[] = {
		"HTTP/1.1 200 OK\r\nETag: \"e1\"\r\nLast-Modified: Mon, 12 Oct 2009 17:50:00 GMT\r\n",
		"HTTP/1.1 200 OK\r\nETag: \"e1\"\r\nLast-Modified: Mon, 01 Jan 2300 00:00:00 GMT\r\n",
		"HTTP/1.1 200 OK\r\nETag: \"e1\"\r\nLast-Modified: Mon, 31 Dec 9999 23:59:59 GMT\r\n",
	};
	static const int64_t want[] = { 1255369800000000000LL, 0, 0 };
	s3_client *c;
	s3_entry e;
	tf_error err;
	fake f;

	quiet_env();
	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		fake_start(&f, heads[i], 1);
		c = client_ok(f.url, "b", NULL, "0");
		ck_assert_msg(s3_client_head(c, &forever, "k", &e, &err) == TF_OK, "%s", err.msg);
		fake_stop(&f);
		ck_assert_int_eq(e.mtime_ns, want[i]);
		s3_client_free(c);
	}
	quiet_env();
}
END_TEST

/* Which host AWS is asked for bucket: the CONNECT an HTTPS proxy sees. */
static void aws_host(const char *bucket, const char *path_style, const char *want)
{
	char line[300];
	s3_client *c;
	s3_entry e;
	tf_error err;
	fake f;

	fake_start(&f, "HTTP/1.1 502 Bad Gateway\r\n", 0);
	setenv("https_proxy", f.url, 1);
	c = client_ok(NULL, bucket, path_style, "0");
	ck_assert_int_ne(s3_client_head(c, &forever, "k", &e, &err), TF_OK);
	fake_stop(&f);
	snprintf(line, sizeof(line), "CONNECT %s:443 ", want);
	ck_assert_msg(!strncmp(f.req, line, strlen(line)), "bucket '%s': '%.80s', not '%s'", bucket, f.req, line);
	s3_client_free(c);
	unsetenv("https_proxy");
}

/* A bucket name that is no DNS label would not match AWS's certificate as
 * a host name: on auto it goes in the path. */
START_TEST(test_client_path_style)
{
	quiet_env();
	aws_host("plain-bucket-1", NULL, "plain-bucket-1.s3.eu-west-1.amazonaws.com");
	aws_host("my.bucket", NULL, "s3.eu-west-1.amazonaws.com");
	aws_host("my_bucket", NULL, "s3.eu-west-1.amazonaws.com");
	aws_host("MyBucket", NULL, "s3.eu-west-1.amazonaws.com");
	aws_host("plain-bucket-1", "yes", "s3.eu-west-1.amazonaws.com");
	aws_host("my.bucket", "no", "my.bucket.s3.eu-west-1.amazonaws.com");
	quiet_env();
}
END_TEST


#define CREDS_JSON(tok) "{\"AccessKeyId\": \"ASIAKEY\", \"SecretAccessKey\": \"sec\", \"Token\": \"" tok "\", " \
			"\"Expiration\": \"2099-01-01T00:00:00Z\"}"

/* The order: the environment beats web identity beats the profile beats
 * the container beats IMDS (each tried alone below it). */
START_TEST(test_chain_order)
{
	char url[128], cfg[PATH_MAX + 64];
	tf_s3_settings s;
	chain_out c;
	tf_error err;
	fake sts, cont;
	static const char sts_answer[] = "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>"
					 "<AccessKeyId>FROMSTS</AccessKeyId><SecretAccessKey>S</SecretAccessKey>"
					 "<SessionToken>T</SessionToken><Expiration>2099-01-01T00:00:00Z</Expiration>"
					 "</Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>";

	quiet_env();
	fake_start_seq(&sts, "HTTP/1.1 200 OK\r\n", sts_answer, NULL, NULL);
	fake_start_seq(&cont, "HTTP/1.1 200 OK\r\n", CREDS_JSON("T"), NULL, NULL);
	tf_s3_settings_init(&s);
	setenv("AWS_SHARED_CREDENTIALS_FILE", tmp_path("none"), 1);
	snprintf(cfg, sizeof(cfg), "%s", write_file("config", "[default]\ncredential_process = sh -c 'echo "
						    "\"{\\\"Version\\\": 1, \\\"AccessKeyId\\\": \\\"FROMPROCESS\\\", "
						    "\\\"SecretAccessKey\\\": \\\"S\\\"}\"'\n", 0600));
	setenv("AWS_CONFIG_FILE", cfg, 1);
	setenv("AWS_ACCESS_KEY_ID", "FROMENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "S", 1);
	setenv("AWS_WEB_IDENTITY_TOKEN_FILE", write_file("webtok", "jwt\n", 0600), 1);
	setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/r", 1);
	setenv("AWS_ENDPOINT_URL_STS", sts.url, 1);
	snprintf(url, sizeof(url), "%s/creds", cont.url);
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", url, 1);
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "Bearer ctok", 1);
	setenv("AWS_EC2_METADATA_DISABLED", "false", 1);
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:1", 1);
	ck_assert_msg(chain(&s, &c, &err) == TF_OK, "%s", err.msg);
	ck_assert_str_eq(c.id, "FROMENV");
	unsetenv("AWS_ACCESS_KEY_ID");
	ck_assert_msg(chain(&s, &c, &err) == TF_OK, "%s", err.msg);
	ck_assert_str_eq(c.id, "FROMSTS");
	ck_assert_ptr_nonnull(strstr(c.origin, "web identity"));
	unsetenv("AWS_ROLE_ARN");
	ck_assert_msg(chain(&s, &c, &err) == TF_OK, "%s", err.msg);
	ck_assert_str_eq(c.id, "FROMPROCESS");
	ck_assert_ptr_nonnull(strstr(c.origin, "credential_process"));
	setenv("AWS_CONFIG_FILE", tmp_path("none"), 1);
	ck_assert_msg(chain(&s, &c, &err) == TF_OK, "%s", err.msg);
	ck_assert_str_eq(c.id, "ASIAKEY");
	ck_assert_ptr_nonnull(strstr(c.origin, "container credentials"));
	unsetenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	ck_assert_int_eq(chain(&s, &c, &err), TF_E_ACCESS);
	ck_assert_msg(strstr(err.msg, "instance metadata (IMDSv2) http://127.0.0.1:1"), "%s", err.msg);
	fake_stop(&sts);
	fake_stop(&cont);
	/* What each service was asked. */
	ck_assert_ptr_nonnull(strstr(sts.req, "POST / HTTP/1.1\r\n"));
	ck_assert_ptr_null(strstr(sts.req, "Authorization"));
	ck_assert_ptr_nonnull(strstr(cont.req, "GET /creds HTTP/1.1\r\n"));
	ck_assert_ptr_nonnull(strstr(cont.req, "\r\nAuthorization: Bearer ctok\r\n"));
	/* A container URL over plain http to another host is refused. */
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://192.0.2.1/creds", 1);
	ck_assert_int_eq(chain(&s, &c, &err), TF_E_INVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "must be https://"));
	tf_s3_settings_clear(&s);
	quiet_env();
}
END_TEST

/* A key the store calls expired is fetched afresh and the request signed
 * again with it, once: the read does not fail. */
START_TEST(test_client_expired_retry)
{
	static const char expired[] = "<Error><Code>ExpiredToken</Code><Message>x</Message></Error>";
	char url[128];
	uint8_t buf[10];
	s3_version v = { "e1", 10, NULL };
	s3_client *c;
	tf_error err;
	fake store, cont;

	quiet_env();
	fake_start_seq(&cont, "HTTP/1.1 200 OK\r\n", CREDS_JSON("FIRSTTOKEN"), "HTTP/1.1 200 OK\r\n",
		       CREDS_JSON("SECONDTOKEN"));
	fake_start_seq(&store, "HTTP/1.1 400 Bad Request\r\n", expired,
		       "HTTP/1.1 206 Partial Content\r\nETag: \"e1\"\r\nContent-Range: bytes 0-9/10\r\n", "0123456789");
	snprintf(url, sizeof(url), "%s/creds", cont.url);
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", url, 1);
	setenv("AWS_ACCESS_KEY_ID", "", 1);	/* signed: client_ok's anonymous test */
	c = client_ok(store.url, "b", NULL, "0");
	ck_assert_msg(s3_client_get(c, &forever, "k", &v, 0, buf, sizeof(buf), &err) == TF_OK, "%s", err.msg);
	ck_assert(!memcmp(buf, "0123456789", 10));
	fake_stop(&store);
	fake_stop(&cont);
	ck_assert_uint_eq(atomic_load(&store.hits), 2);		/* retries = 0: the re-signing is no retry */
	ck_assert_uint_eq(atomic_load(&cont.hits), 2);
	ck_assert_ptr_nonnull(strstr(store.first, "x-amz-security-token: FIRSTTOKEN\r\n"));
	ck_assert_ptr_nonnull(strstr(store.req, "x-amz-security-token: SECONDTOKEN\r\n"));
	s3_client_free(c);
	quiet_env();
}
END_TEST

/* A 301 naming the bucket's region is followed at once and kept: the
 * request signed again for that region; requester_pays and
 * expected_owner go with every request, signed. */
/* Issue 21: a PUT carries its body's length and SHA-256 (signed: a store
 * checks the bytes it got against it), no Expect (no wait for a 100), and
 * a store's refusal is its status; a whole GET over its bound is
 * TF_E_CORRUPT at once, not retried. */
START_TEST(test_client_put)
{
	static const char body[] = "an index entry's bytes";
	char sha[65], want[120], *got = NULL;
	size_t n = 0;
	s3_client *c;
	tf_error err;
	fake f;

	quiet_env();
	setenv("AWS_ACCESS_KEY_ID", "AKIDTEST", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
	fake_start(&f, "HTTP/1.1 200 OK\r\n", 0);
	c = client_ok(f.url, "b", NULL, "0");
	ck_assert_msg(s3_client_put(c, &forever, "d/.tilefs/index/x.idx", body, sizeof(body) - 1, &err) == TF_OK,
		      "%s", err.msg);
	fake_stop(&f);
	s3_sha256_hex(body, sizeof(body) - 1, sha);
	ck_assert_msg(!strncmp(f.req, "PUT /b/d/.tilefs/index/x.idx HTTP/1.1\r\n", 39), "%s", f.req);
	snprintf(want, sizeof(want), "\r\nx-amz-content-sha256: %s\r\n", sha);
	ck_assert_ptr_nonnull(strstr(f.req, want));
	snprintf(want, sizeof(want), "\r\nContent-Length: %zu\r\n", sizeof(body) - 1);
	ck_assert_ptr_nonnull(strstr(f.req, want));
	ck_assert_ptr_null(strstr(f.req, "Expect:"));
	ck_assert_ptr_nonnull(strstr(f.req, "SignedHeaders=host;x-amz-content-sha256;x-amz-date"));
	s3_client_free(c);

	fake_start(&f, "HTTP/1.1 403 Forbidden\r\n", 10);
	c = client_ok(f.url, "b", NULL, "2");
	ck_assert_int_eq(s3_client_put(c, &forever, "k", body, sizeof(body) - 1, &err), TF_E_ACCESS);
	fake_stop(&f);
	ck_assert_uint_eq(atomic_load(&f.hits), 1);
	ck_assert_msg(strstr(err.msg, "PUT key 'k'") && strstr(err.msg, "HTTP 403"), "%s", err.msg);
	s3_client_free(c);

	fake_start(&f, "HTTP/1.1 200 OK\r\n", 5000);
	c = client_ok(f.url, "b", NULL, "2");
	ck_assert_int_eq(s3_client_get_whole(c, &forever, "k", 4999, &got, &n, &err), TF_E_CORRUPT);
	ck_assert_uint_eq(atomic_load(&f.hits), 1);
	ck_assert_ptr_null(got);
	ck_assert_int_eq(s3_client_get_whole(c, &forever, "k", 5000, &got, &n, &err), TF_OK);
	fake_stop(&f);
	ck_assert_uint_eq(n, 5000);
	ck_assert_ptr_null(strstr(f.req, "Range:"));
	ck_assert_ptr_null(strstr(f.req, "If-Match:"));
	free(got);
	s3_client_free(c);
	quiet_env();
}
END_TEST

START_TEST(test_client_region)
{
	s3_client *c;
	s3_entry e;
	tf_error err;
	fake f;
	tf_s3_settings s;

	quiet_env();
	fake_start_seq(&f, "HTTP/1.1 301 Moved Permanently\r\nx-amz-bucket-region: eu-central-1\r\n", "",
		       "HTTP/1.1 200 OK\r\nETag: \"e1\"\r\n", "");
	setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "S", 1);
	setenv("AWS_CONFIG_FILE", tmp_path("none"), 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", tmp_path("none"), 1);
	tf_s3_settings_init(&s);
	ck_assert_int_eq(tf_s3_settings_set(&s, "region", "us-west-2", NULL, &err), TF_OK);
	ck_assert_int_eq(tf_s3_settings_set(&s, "retries", "0", NULL, &err), TF_OK);
	ck_assert_int_eq(tf_s3_settings_set(&s, "endpoint", f.url, NULL, &err), TF_OK);
	ck_assert_int_eq(tf_s3_settings_set(&s, "requester_pays", "yes", NULL, &err), TF_OK);
	ck_assert_int_eq(tf_s3_settings_set(&s, "expected_owner", "123456789012", NULL, &err), TF_OK);
	ck_assert_int_eq(tf_s3_settings_set(&s, "expected_owner", "12345", NULL, &err), TF_E_INVAL);
	ck_assert_int_eq(tf_s3_settings_resolve(&s, &err), TF_OK);
	ck_assert_msg(s3_client_new(&s, "b", &c, &err) == TF_OK, "%s", err.msg);
	tf_s3_settings_clear(&s);
	ck_assert_msg(s3_client_head(c, &forever, "k", &e, &err) == TF_OK, "%s", err.msg);
	ck_assert_msg(s3_client_head(c, &forever, "k", &e, &err) == TF_OK, "%s", err.msg);
	fake_stop(&f);
	ck_assert_uint_eq(atomic_load(&f.hits), 3);	/* one redirect, then straight */
	ck_assert_ptr_nonnull(strstr(f.first, "/us-west-2/s3/aws4_request"));
	ck_assert_ptr_nonnull(strstr(f.req, "/eu-central-1/s3/aws4_request"));
	ck_assert_ptr_nonnull(strstr(f.req, "\r\nx-amz-request-payer: requester\r\n"));
	ck_assert_ptr_nonnull(strstr(f.req, "\r\nx-amz-expected-bucket-owner: 123456789012\r\n"));
	ck_assert_ptr_nonnull(strstr(f.req, "SignedHeaders=host;x-amz-content-sha256;x-amz-date;"
					    "x-amz-expected-bucket-owner;x-amz-request-payer,"));
	s3_client_free(c);
	quiet_env();
}
END_TEST

/* ---- settings ------------------------------------------------------------------------------ */

START_TEST(test_settings)
{
	tf_s3_settings s;
	tf_error err;

	tf_s3_settings_init(&s);
	ck_assert_uint_eq(s.list_ttl, 60);
	ck_assert_int_eq(tf_s3_settings_set(&s, "endpoint", "http://127.0.0.1:9000", NULL, &err), TF_OK);
	ck_assert_int_eq(tf_s3_settings_set(&s, "timeout", "2.5", NULL, &err), TF_OK);
	ck_assert_uint_eq(s.timeout_ms, 2500);
	ck_assert_int_eq(tf_s3_settings_set(&s, "retries", "3", NULL, &err), TF_OK);
	ck_assert_int_eq(tf_s3_settings_set(&s, "max_requests", "8", NULL, &err), TF_OK);
	ck_assert_int_eq(tf_s3_settings_set(&s, "list_ttl", "0", NULL, &err), TF_OK);
	ck_assert_uint_eq(s.deadline_ms, 60000);
	ck_assert_int_eq(tf_s3_settings_set(&s, "request_deadline", "1.5", NULL, &err), TF_OK);
	ck_assert_uint_eq(s.deadline_ms, 1500);
	ck_assert_int_eq(tf_s3_settings_set(&s, "request_deadline", "0", NULL, &err), TF_E_INVAL);
	ck_assert_uint_eq(s.list_max_pages, 2000);
	ck_assert_uint_eq(s.list_max_bytes, 64 << 20);
	ck_assert_int_eq(tf_s3_settings_set(&s, "list_max_pages", "10", NULL, &err), TF_OK);
	ck_assert_uint_eq(s.list_max_pages, 10);
	ck_assert_int_eq(tf_s3_settings_set(&s, "list_max_bytes", "2G", NULL, &err), TF_OK);
	ck_assert_uint_eq(s.list_max_bytes, (uint64_t)2 << 30);
	ck_assert_int_eq(tf_s3_settings_set(&s, "list_max_bytes", "100000", NULL, &err), TF_OK);
	ck_assert_uint_eq(s.list_max_bytes, 100000);
	ck_assert_int_eq(tf_s3_settings_set(&s, "list_max_bytes", "1K", NULL, &err), TF_E_INVAL);
	ck_assert_int_eq(tf_s3_settings_set(&s, "list_max_bytes", "5G", NULL, &err), TF_E_INVAL);
	ck_assert_int_eq(tf_s3_settings_set(&s, "list_max_bytes", "1MB", NULL, &err), TF_E_INVAL);
	ck_assert_int_eq(tf_s3_settings_set(&s, "list_max_pages", "0", NULL, &err), TF_E_INVAL);
	ck_assert_int_eq(tf_s3_settings_set(&s, "credentials", "c.ini", "/etc/tilefs", &err), TF_OK);
	ck_assert_str_eq(s.credentials, "/etc/tilefs/c.ini");
	ck_assert_int_eq(tf_s3_settings_set(&s, "endpoint", "ftp://x", NULL, &err), TF_E_INVAL);
	ck_assert_int_eq(tf_s3_settings_set(&s, "endpoint", "http://u:p@x/", NULL, &err), TF_E_INVAL);
	ck_assert_int_eq(tf_s3_settings_set(&s, "endpoint", "https://x/path", NULL, &err), TF_E_INVAL);
	ck_assert_int_eq(tf_s3_settings_set(&s, "path_style", "maybe", NULL, &err), TF_E_INVAL);
	ck_assert_int_eq(tf_s3_settings_set(&s, "retries", "-1", NULL, &err), TF_E_INVAL);
	ck_assert_int_eq(tf_s3_settings_set(&s, "max_requests", "0", NULL, &err), TF_E_INVAL);
	ck_assert_int_eq(tf_s3_settings_set(&s, "secret", "x", NULL, &err), TF_E_INVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "unknown key 'secret' in [s3]"));
	/* Environment fallbacks. */
	setenv("AWS_REGION", "eu-north-1", 1);
	setenv("AWS_PROFILE", "envprof", 1);
	ck_assert_int_eq(tf_s3_settings_resolve(&s, &err), TF_OK);
	ck_assert_str_eq(s.region, "eu-north-1");
	ck_assert_str_eq(s.profile, "envprof");
	ck_assert_int_eq(s.path_style, TF_S3_YES);	/* a custom endpoint */
	tf_s3_settings_clear(&s);
	setenv("AWS_ENDPOINT_URL", "http://localhost:1234", 1);
	ck_assert_int_eq(tf_s3_settings_resolve(&s, &err), TF_OK);
	ck_assert_str_eq(s.endpoint, "http://localhost:1234");
	tf_s3_settings_clear(&s);
	unsetenv("AWS_ENDPOINT_URL");
	ck_assert_int_eq(tf_s3_settings_resolve(&s, &err), TF_OK);
	ck_assert_ptr_null(s.endpoint);
	ck_assert_int_eq(s.path_style, TF_S3_AUTO);	/* AWS: the bucket's name decides */
	tf_s3_settings_clear(&s);
	unsetenv("AWS_REGION");
	unsetenv("AWS_PROFILE");
}
END_TEST

START_TEST(test_config_section)
{
	const char *p = write_file("t.ini", "[s3]\nendpoint = http://127.0.0.1:18092\npath_style = no\n"
				   "list_ttl = 5\ncredentials = creds\n", 0644);
	const tf_s3_settings *s;
	tf_config *c;
	tf_error err;
	char want[PATH_MAX + 16];

	ck_assert_int_eq(tf_config_load(p, &c, &err), TF_OK);
	s = tf_config_s3(c);
	ck_assert_str_eq(s->endpoint, "http://127.0.0.1:18092");
	ck_assert_int_eq(s->path_style, TF_S3_NO);
	ck_assert_uint_eq(s->list_ttl, 5);
	snprintf(want, sizeof(want), "%s/creds", dir);
	ck_assert_str_eq(s->credentials, want);
	tf_config_free(c);
	p = write_file("t.ini", "[tilefs]\ncache_size = 64M\n[s3]\nregion = x\nbogus = 1\n", 0644);
	ck_assert_int_ne(tf_config_load(p, &c, &err), TF_OK);
	ck_assert_ptr_nonnull(strstr(err.msg, "t.ini:5: unknown key 'bogus' in [s3]"));
	p = write_file("t.ini", "[s3]\nregion = x\n[s3]\nregion = y\n", 0644);
	ck_assert_int_ne(tf_config_load(p, &c, &err), TF_OK);
	ck_assert_ptr_nonnull(strstr(err.msg, "t.ini:3: duplicate section [s3]"));
	p = write_file("t.ini", "[s3 x]\nregion = x\n", 0644);
	ck_assert_int_ne(tf_config_load(p, &c, &err), TF_OK);
	ck_assert_ptr_nonnull(strstr(err.msg, "t.ini:1: [s3] takes no name"));
}
END_TEST

START_TEST(test_bad_specs)
{
	static const char *const bad[] = { "s3://", "s3:///x", "s3://bu cket", "s3://b/../x", "s3://b/a//c",
					   "s3://b/./x", "s3://b/x/..", "s3://b?x" };
	tf_source *src;
	tf_error err;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(tf_source_open(bad[i], NULL, &src, &err), TF_E_INVAL);
		ck_assert_ptr_null(src);
	}
}
END_TEST

static Suite *s3_suite(void)
{
	Suite *s = suite_create("s3");
	TCase *sign = tcase_create("sign"), *xml = tcase_create("xml"), *creds = tcase_create("creds");

	tcase_add_test(sign, test_sigv4_suite);
	tcase_add_test(sign, test_sigv4_s3_get_object);
	tcase_add_test(sign, test_encoding);
	tcase_add_test(xml, test_list_parse);
	tcase_add_test(xml, test_list_hostile);
	tcase_add_test(xml, test_list_bad_names);
	tcase_add_test(xml, test_list_without_etag);
	tcase_add_test(xml, test_time_range);
	tcase_add_test(xml, test_error_code);
	tcase_add_test(xml, test_expiration);
	tcase_add_test(xml, test_cred_json);
	tcase_add_test(xml, test_split_command);
	tcase_add_test(xml, test_sts_parse);
	tcase_add_unchecked_fixture(creds, creds_setup, creds_teardown);
	tcase_add_test(creds, test_creds_file);
	tcase_add_test(creds, test_creds_config_file);
	tcase_add_test(creds, test_creds_order);
	tcase_add_test(creds, test_creds_symlink);
	tcase_add_test(creds, test_client_long_token);
	tcase_add_test(creds, test_client_error_body);
	tcase_add_test(creds, test_client_version);
	tcase_add_test(creds, test_client_bound);
	tcase_add_test(creds, test_client_last_modified);
	tcase_add_test(creds, test_client_path_style);
	tcase_add_test(creds, test_chain_order);
	tcase_add_test(creds, test_client_expired_retry);
	tcase_add_test(creds, test_client_region);
	tcase_add_test(creds, test_client_put);
	tcase_add_test(creds, test_settings);
	tcase_add_test(creds, test_config_section);
	tcase_add_test(creds, test_bad_specs);
	suite_add_tcase(s, sign);
	suite_add_tcase(s, xml);
	suite_add_tcase(s, creds);
	return s;
}

TF_TEST_MAIN(s3_suite)
