/*
 * test_s3.c - the object-store source's parts that need no store: the
 * SigV4 signer against AWS's published vectors (the generic test suite and
 * the S3 examples), URI and query encoding, ListObjectsV2 parsing including
 * hostile answers, credentials and profile files (and their refusal when
 * others can read them), the [s3] settings and their environment fallbacks.
 */
#include "tf_test.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sources/s3_creds.h"
#include "sources/s3_sign.h"
#include "sources/s3_xml.h"
#include "tf_config.h"
#include "tf_s3.h"

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
	list_refused(LIST_HEAD "<EncodingType>url</EncodingType><Contents><Key>a%00b</Key><Size>1</Size>"
		     "</Contents></ListBucketResult>", 100, "percent");
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
	s3_creds c;
	tf_error err;

	snprintf(cred, sizeof(cred), "%s", write_file("credentials", "[p]\naws_access_key_id = FROMFILE\n"
						       "aws_secret_access_key = x\n", 0600));
	snprintf(conf, sizeof(conf), "%s", write_file("config", "[profile p]\nregion = r-1\n", 0600));
	snprintf(extra, sizeof(extra), "%s", write_file("extra", "[q]\naws_access_key_id = EXTRA\n"
							 "aws_secret_access_key = y\n", 0600));
	setenv("AWS_SHARED_CREDENTIALS_FILE", cred, 1);
	setenv("AWS_CONFIG_FILE", conf, 1);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_SESSION_TOKEN");
	tf_s3_settings_init(&s);
	ck_assert_int_eq(tf_s3_settings_set(&s, "profile", "p", NULL, &err), TF_OK);
	ck_assert_int_eq(s3_creds_load(&s, &c, &err), TF_OK);
	ck_assert_str_eq(c.access_key, "FROMFILE");
	ck_assert_str_eq(c.region, "r-1");
	s3_creds_free(&c);
	setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	ck_assert_int_eq(s3_creds_load(&s, &c, &err), TF_OK);
	ck_assert_str_eq(c.access_key, "ENVKEY");
	ck_assert_str_eq(c.origin, "environment");
	s3_creds_free(&c);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	/* Profile q is only in the credentials = FILE. */
	ck_assert_int_eq(tf_s3_settings_set(&s, "profile", "q", NULL, &err), TF_OK);
	ck_assert_int_eq(s3_creds_load(&s, &c, &err), TF_E_ACCESS);
	ck_assert_ptr_nonnull(strstr(err.msg, "no credentials for profile 'q'"));
	ck_assert_int_eq(tf_s3_settings_set(&s, "credentials", extra, NULL, &err), TF_OK);
	ck_assert_int_eq(s3_creds_load(&s, &c, &err), TF_OK);
	ck_assert_str_eq(c.access_key, "EXTRA");
	s3_creds_free(&c);
	/* Anonymous: nothing needed. */
	ck_assert_int_eq(tf_s3_settings_set(&s, "profile", "none", NULL, &err), TF_OK);
	ck_assert_int_eq(tf_s3_settings_set(&s, "anonymous", "yes", NULL, &err), TF_OK);
	ck_assert_int_eq(s3_creds_load(&s, &c, &err), TF_OK);
	ck_assert_ptr_null(c.access_key);
	s3_creds_free(&c);
	tf_s3_settings_clear(&s);
	unsetenv("AWS_SHARED_CREDENTIALS_FILE");
	unsetenv("AWS_CONFIG_FILE");
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
	ck_assert_int_eq(s.path_style, TF_S3_NO);	/* AWS: virtual-hosted */
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
	tcase_add_test(xml, test_error_code);
	tcase_add_unchecked_fixture(creds, creds_setup, creds_teardown);
	tcase_add_test(creds, test_creds_file);
	tcase_add_test(creds, test_creds_config_file);
	tcase_add_test(creds, test_creds_order);
	tcase_add_test(creds, test_settings);
	tcase_add_test(creds, test_config_section);
	tcase_add_test(creds, test_bad_specs);
	suite_add_tcase(s, sign);
	suite_add_tcase(s, xml);
	suite_add_tcase(s, creds);
	return s;
}

TF_TEST_MAIN(s3_suite)
