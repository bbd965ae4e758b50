/*
 * test_crypto.c - checksums (MD5, SHA-256), AES-256-GCM, WebP and keys.
 *
 * Known answers come from the corpus written by TileDB 2.29.2; encrypted
 * cases use the corpus key, the 32 ASCII bytes of ORACLE_KEY.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include "tf_test.h"

#include <ctype.h>
#include <glob.h>
#include <libgen.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/tf_keys.h"

static const char ORACLE_KEY[] = "TileDB-oracle-key-0123456789ABCD";
static const char ORACLE_KEY_HEX[] =
	"54696c6544422d6f7261636c652d6b65792d3031323334353637383941424344";

static tf_key *make_key(const char *text)
{
	tf_key *k = NULL;
	tf_error err;

	ck_assert_msg(tf_key_from_bytes(text, strlen(text), &k, &err) == TF_OK, "%s", err.msg);
	return k;
}

static tf_pipeline *parse(const char *spec)
{
	tf_pipeline *p;
	tf_error err;

	ck_assert_msg(tf_pipeline_parse(spec, &p, &err) == TF_OK, "%s: %s", spec, err.msg);
	return p;
}

/* Encode `in` as one stored chunk (header included) into *chunk. */
static void encode_chunk(const char *spec, const tf_chunk_env *env, const uint8_t *in, size_t n,
			 tf_buf *chunk)
{
	tf_pipeline *p = parse(spec);
	tf_workspace *ws = tf_workspace_new();
	tf_error err;

	tf_buf_init(chunk, SIZE_MAX);
	ck_assert_msg(tf_pipeline_encode(p, env, ws, tf_span_of(in, n), NULL, 0, chunk, &err) == TF_OK,
		      "%s: %s", spec, err.msg);
	tf_workspace_free(ws);
	tf_pipeline_free(p);
}

/* Decode one stored chunk into dst[cap]; returns the status, message in *err. */
static tf_status decode_chunk(const char *spec, const tf_chunk_env *env, const uint8_t *chunk,
			      size_t n, uint8_t *dst, tf_error *err)
{
	tf_pipeline *p = parse(spec);
	tf_workspace *ws = tf_workspace_new();
	tf_status rc = tf_chunk_decode(p, env, ws, tf_span_of(chunk, n), dst, NULL, err);

	tf_workspace_free(ws);
	tf_pipeline_free(p);
	return rc;
}

/* ck_assert that no 8-byte run of the key, raw or in hex, is in msg. */
static void assert_no_key(const char *msg, const uint8_t *key, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	char h[2 * 64], run[17] = "";

	ck_assert(n <= 64);
	for (size_t i = 0; i < n; i++) {
		h[2 * i] = hex[key[i] >> 4];
		h[2 * i + 1] = hex[key[i] & 15];
	}
	for (size_t i = 0; i + 8 <= n; i++)
		ck_assert_msg(!memmem(msg, strlen(msg), key + i, 8), "key bytes in '%s'", msg);
	for (size_t i = 0; i + 16 <= 2 * n; i++) {
		memcpy(run, h + i, 16);
		ck_assert_msg(!strcasestr(msg, run), "key hex in '%s'", msg);
	}
}

/* ==== keys (tf_keys.c) ========================================================== */

static tf_status key_of(const void *text, size_t len, uint8_t out[TF_KEY_BYTES], tf_error *err)
{
	tf_key *k = NULL;
	tf_status rc = tf_key_from_bytes(text, len, &k, err);

	if (rc == TF_OK) {
		memcpy(out, tf_key_bytes(k), TF_KEY_BYTES);
		tf_key_free(k);
	}
	return rc;
}

START_TEST(test_key_forms)
{
	static const char *const hex_forms[] = { "", "\n", "\r\n" };
	uint8_t got[TF_KEY_BYTES], upper[65];
	char text[80];
	tf_error err;

	ck_assert_int_eq(key_of(ORACLE_KEY, 32, got, &err), TF_OK);
	ck_assert_mem_eq(got, ORACLE_KEY, 32);
	for (size_t i = 0; i < 3; i++) {
		snprintf(text, sizeof(text), "%s%s", ORACLE_KEY_HEX, hex_forms[i]);
		memset(got, 0, sizeof(got));
		ck_assert_msg(key_of(text, strlen(text), got, &err) == TF_OK, "%s", err.msg);
		ck_assert_mem_eq(got, ORACLE_KEY, 32);
	}
	for (size_t i = 0; i < 64; i++)
		upper[i] = (uint8_t)toupper((unsigned char)ORACLE_KEY_HEX[i]);
	ck_assert_int_eq(key_of(upper, 64, got, &err), TF_OK);
	ck_assert_mem_eq(got, ORACLE_KEY, 32);
	/* 32 raw bytes with a trailing newline, as `echo` writes a key file */
	snprintf(text, sizeof(text), "%s\n", ORACLE_KEY);
	ck_assert_int_eq(key_of(text, 33, got, &err), TF_OK);
	ck_assert_mem_eq(got, ORACLE_KEY, 32);
}
END_TEST

START_TEST(test_key_rejects)
{
	static const size_t bad_lengths[] = { 0, 1, 16, 31, 34, 48, 63, 65, 66, 67, 100 };
	uint8_t text[128], got[TF_KEY_BYTES];
	tf_error err;

	memset(text, 'a', sizeof(text));
	for (size_t i = 0; i < sizeof(bad_lengths) / sizeof(bad_lengths[0]); i++) {
		err.msg[0] = '\0';
		ck_assert_int_eq(key_of(text, bad_lengths[i], got, &err), TF_E_INVAL);
		ck_assert_msg(strstr(err.msg, "32 raw bytes or 64 hex digits"), "%s", err.msg);
	}
	/* 33 bytes not ending in a newline, 65 ending in something else */
	ck_assert_int_eq(key_of(ORACLE_KEY_HEX, 33, got, &err), TF_E_INVAL);
	memcpy(text, ORACLE_KEY_HEX, 64);
	text[64] = '\r';
	ck_assert_int_eq(key_of(text, 65, got, &err), TF_E_INVAL);
	/* 64 characters that are not all hex: the text must not be echoed */
	memcpy(text, ORACLE_KEY_HEX, 64);
	text[40] = 'g';
	ck_assert_int_eq(key_of(text, 64, got, &err), TF_E_INVAL);
	ck_assert_msg(strstr(err.msg, "hexadecimal"), "%s", err.msg);
	assert_no_key(err.msg, text, 64);
}
END_TEST

/* Write a key file with the given mode; returns its malloc'd path. */
static char *key_file(const void *content, size_t n, mode_t mode)
{
	char *path = strdup("/tmp/tf_test_key_XXXXXX");
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, content, n), (ssize_t)n);
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
	return path;
}

START_TEST(test_key_files)
{
	char hexline[80];
	tf_key *k = NULL;
	tf_error err;
	char *path;

	snprintf(hexline, sizeof(hexline), "%s\n", ORACLE_KEY_HEX);
	path = key_file(hexline, strlen(hexline), 0644);
	ck_assert_int_eq(tf_key_load_file(path, &k, &err), TF_E_INVAL);
	ck_assert_msg(strstr(err.msg, "readable by group or others"), "%s", err.msg);
	assert_no_key(err.msg, (const uint8_t *)ORACLE_KEY, 32);
	assert_no_key(err.msg, (const uint8_t *)ORACLE_KEY_HEX, 64);
	ck_assert_int_eq(chmod(path, 0600), 0);
	ck_assert_msg(tf_key_load_file(path, &k, &err) == TF_OK, "%s", err.msg);
	ck_assert_mem_eq(tf_key_bytes(k), ORACLE_KEY, 32);
	tf_key_free(k);
	unlink(path);
	free(path);

	path = key_file(ORACLE_KEY, 32, 0600);	/* raw bytes */
	ck_assert_msg(tf_key_load_file(path, &k, &err) == TF_OK, "%s", err.msg);
	ck_assert_mem_eq(tf_key_bytes(k), ORACLE_KEY, 32);
	tf_key_free(k);
	unlink(path);
	free(path);

	path = key_file(ORACLE_KEY, 20, 0600);	/* too short: refused, not shown */
	ck_assert_int_eq(tf_key_load_file(path, &k, &err), TF_E_INVAL);
	ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "32 raw bytes"), "%s", err.msg);
	assert_no_key(err.msg, (const uint8_t *)ORACLE_KEY, 20);
	unlink(path);
	ck_assert_int_eq(tf_key_load_file(path, &k, &err), TF_E_IO);
	free(path);
}
END_TEST

/* ==== checksums ================================================================= */

/* FIPS 180-2 / RFC 1321 test vectors for "abc". */
static const uint8_t SHA256_ABC[32] = {
	0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
	0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad,
};
static const uint8_t MD5_ABC[16] = {
	0x90, 0x01, 0x50, 0x98, 0x3c, 0xd2, 0x4f, 0xb0, 0xd6, 0x96, 0x3f, 0x7d, 0x28, 0xe1, 0x7f, 0x72,
};

/* The chunk of "abc" under one checksum filter: §3.5's layout exactly. */
static void check_abc_layout(const char *spec, const uint8_t *digest, size_t d)
{
	tf_chunk_env env = { .type = TF_DT_UINT8, .cell_size = 1, .version = 22 };
	tf_buf c;
	const uint8_t *md;

	encode_chunk(spec, &env, (const uint8_t *)"abc", 3, &c);
	ck_assert_uint_eq(c.len, 12 + 16 + d + 3);
	ck_assert_uint_eq(tf_le32(c.p), 3);
	ck_assert_uint_eq(tf_le32(c.p + 4), 3);
	ck_assert_uint_eq(tf_le32(c.p + 8), 16 + d);
	md = c.p + 12;
	ck_assert_uint_eq(tf_le32(md), 0);
	ck_assert_uint_eq(tf_le32(md + 4), 1);
	ck_assert_uint_eq(tf_le64(md + 8), 3);
	ck_assert_mem_eq(md + 16, digest, d);
	ck_assert_mem_eq(md + 16 + d, "abc", 3);
	tf_buf_free(&c);
}

START_TEST(test_checksum_layout)
{
	check_abc_layout("checksum_sha256", SHA256_ABC, 32);
	check_abc_layout("checksum_md5", MD5_ABC, 16);
}
END_TEST

/* A checksum over another's header: the md part it covers is that header. */
START_TEST(test_checksum_md_parts)
{
	tf_chunk_env env = { .type = TF_DT_UINT8, .cell_size = 1, .version = 22 };
	uint8_t digest[16], back[3];
	tf_error err;
	tf_buf c;
	const uint8_t *md;

	encode_chunk("checksum_sha256 | checksum_md5", &env, (const uint8_t *)"abc", 3, &c);
	ck_assert_uint_eq(tf_le32(c.p + 8), 8 + 2 * 24 + 48);
	md = c.p + 12;
	ck_assert_uint_eq(tf_le32(md), 1);		/* the sha256 header */
	ck_assert_uint_eq(tf_le32(md + 4), 1);
	ck_assert_uint_eq(tf_le64(md + 8), 48);
	ck_assert(EVP_Digest(md + 56, 48, digest, NULL, EVP_md5(), NULL));
	ck_assert_mem_eq(md + 16, digest, 16);
	ck_assert_uint_eq(tf_le64(md + 32), 3);
	ck_assert_mem_eq(md + 40, MD5_ABC, 16);
	ck_assert_mem_eq(md + 56 + 16, SHA256_ABC, 32);
	/* Damage the covered sha256 header: the md5 filter names the part. */
	c.p[12 + 56 + 20] ^= 1;
	ck_assert_int_eq(decode_chunk("checksum_sha256 | checksum_md5", &env, c.p, c.len, back, &err),
			 TF_E_CHECKSUM);
	ck_assert_msg(strstr(err.msg, "filter 1 (checksum_md5): md5 mismatch in metadata part 0"),
		      "%s", err.msg);
	tf_buf_free(&c);
}
END_TEST

static const char *const checksum_specs[] = {
	"checksum_md5",
	"checksum_sha256",
	"checksum_sha256 | checksum_md5 | checksum_sha256",	/* 2 md parts */
	"checksum_md5 | zstd",
	"zstd | checksum_sha256",
	"checksum_md5 | checksum_sha256 | zstd(level=3) | checksum_md5",
};

START_TEST(test_checksum_roundtrip)
{
	static const struct { tf_datatype t; unsigned es; tf_gen g; } types[] = {
		{ TF_DT_UINT8, 1, TF_GEN_RANDOM }, { TF_DT_INT32, 4, TF_GEN_WALK },
		{ TF_DT_FLOAT64, 8, TF_GEN_FLOATS }, { TF_DT_INT16, 2, TF_GEN_RUNS },
	};
	static const size_t sizes[] = { 0, 1, 7, 13, 4096 + 5, 65536 + 13 };
	const char *spec = checksum_specs[_i];

	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			size_t n = sizes[s] / types[t].es * types[t].es;
			uint8_t *in = tf_test_data(n, types[t].g, types[t].es, 7 * t + s);

			tf_test_roundtrip(spec, types[t].t, types[t].es, in, n);
			free(in);
		}
}
END_TEST

/* Chains through other helpers' filters (xor, byteshuffle, bitshuffle,
 * lz4, gzip): a stub there fails here with "not implemented yet". */
static const char *const checksum_chain_specs[] = {
	"byteshuffle | checksum_md5 | zstd",
	"xor | checksum_sha256 | lz4",
	"bitshuffle | byteshuffle | checksum_md5 | gzip",
	"delta | checksum_sha256",
};

START_TEST(test_checksum_chains)
{
	static const size_t sizes[] = { 0, 8, 13 * 8 + 4, 65536 + 16 };

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint8_t *in = tf_test_data(sizes[s], TF_GEN_WALK, 4, s);

		tf_test_roundtrip(checksum_chain_specs[_i], TF_DT_INT32, 4, in, sizes[s]);
		free(in);
	}
}
END_TEST

START_TEST(test_checksum_errors)
{
	tf_chunk_env env = { .type = TF_DT_INT32, .cell_size = 4, .version = 22 };
	uint8_t *in = tf_test_data(4000, TF_GEN_WALK, 4, 1), *back = malloc(4000);
	const char *spec = checksum_specs[_i % 2];
	size_t d = _i % 2 ? 32 : 16;
	uint8_t saved[32];
	tf_error err;
	tf_buf c;

	encode_chunk(spec, &env, in, 4000, &c);
	/* a data bit */
	c.p[c.len - 100] ^= 0x10;
	ck_assert_int_eq(decode_chunk(spec, &env, c.p, c.len, back, &err), TF_E_CHECKSUM);
	ck_assert_msg(strstr(err.msg, "mismatch in data part 0 (4000 bytes)"), "%s", err.msg);
	c.p[c.len - 100] ^= 0x10;
	/* a digest bit */
	c.p[12 + 16 + d - 1] ^= 0x80;
	ck_assert_int_eq(decode_chunk(spec, &env, c.p, c.len, back, &err), TF_E_CHECKSUM);
	c.p[12 + 16 + d - 1] ^= 0x80;
	/* a part that claims more bytes than there are */
	tf_put_le64(c.p + 12 + 8, 4001);
	ck_assert_int_eq(decode_chunk(spec, &env, c.p, c.len, back, &err), TF_E_CORRUPT);
	/* ... or fewer, with their true digest: bytes left unchecked are an error too */
	memcpy(saved, c.p + 12 + 16, d);
	tf_put_le64(c.p + 12 + 8, 3999);
	ck_assert(EVP_Digest(in, 3999, c.p + 12 + 16, NULL, d == 16 ? EVP_md5() : EVP_sha256(), NULL));
	ck_assert_int_eq(decode_chunk(spec, &env, c.p, c.len, back, &err), TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "parts leave 0 metadata and 1 data bytes unchecked"), "%s",
		      err.msg);
	tf_put_le64(c.p + 12 + 8, 4000);
	memcpy(c.p + 12 + 16, saved, d);
	ck_assert_int_eq(decode_chunk(spec, &env, c.p, c.len, back, &err), TF_OK);
	ck_assert_mem_eq(back, in, 4000);
	tf_buf_free(&c);
	free(in);
	free(back);
}
END_TEST

/* ==== AES-256-GCM ================================================================ */

/* Decrypt one part with OpenSSL directly: an independent check of the layout. */
static void openssl_decrypt(const uint8_t *rec, const uint8_t *ct, uint8_t *pt)
{
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	uint32_t n = tf_le32(rec);
	uint8_t tag[16];
	int len = 0;

	memcpy(tag, rec + 20, 16);
	ck_assert_uint_eq(tf_le32(rec + 4), n);
	ck_assert(EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, (const uint8_t *)ORACLE_KEY,
				     rec + 8));
	ck_assert(EVP_DecryptUpdate(ctx, pt, &len, ct, (int)n));
	ck_assert(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, tag));
	ck_assert_int_gt(EVP_DecryptFinal_ex(ctx, pt + len, &len), 0);
	EVP_CIPHER_CTX_free(ctx);
}

START_TEST(test_aes_layout)
{
	tf_key *key = make_key(ORACLE_KEY);
	tf_chunk_env env = { .type = TF_DT_INT32, .cell_size = 4, .version = 22, .key = key };
	uint8_t *in = tf_test_data(1000, TF_GEN_RAMP, 4, 0), *pt = malloc(1000);
	tf_buf c, c2;

	encode_chunk("aes_256_gcm", &env, in, 1000, &c);
	ck_assert_uint_eq(tf_le32(c.p + 4), 1000);
	ck_assert_uint_eq(tf_le32(c.p + 8), 44);	/* §3.5: no other filter */
	ck_assert_uint_eq(tf_le32(c.p + 12), 0);
	ck_assert_uint_eq(tf_le32(c.p + 16), 1);
	openssl_decrypt(c.p + 20, c.p + 12 + 44, pt);
	ck_assert_mem_eq(pt, in, 1000);
	/* A fresh IV each time: the same input never encrypts the same. */
	encode_chunk("aes_256_gcm", &env, in, 1000, &c2);
	ck_assert_mem_ne(c.p + 28, c2.p + 28, 12);
	ck_assert_mem_ne(c.p + 56, c2.p + 56, 1000);
	tf_buf_free(&c2);
	/* With a compressor: its 16-byte header is an encrypted md part. */
	encode_chunk("zstd | aes_256_gcm", &env, in, 1000, &c2);
	ck_assert_uint_eq(tf_le32(c2.p + 8), 80);
	ck_assert_uint_eq(tf_le32(c2.p + 12), 1);
	ck_assert_uint_eq(tf_le32(c2.p + 20), 16);
	openssl_decrypt(c2.p + 20, c2.p + 12 + 80, pt);
	ck_assert_uint_eq(tf_le32(pt), 0);		/* zstd: 0 md parts, 1 data part */
	ck_assert_uint_eq(tf_le32(pt + 4), 1);
	ck_assert_uint_eq(tf_le32(pt + 8), 1000);
	tf_buf_free(&c2);
	tf_buf_free(&c);
	tf_key_free(key);
	free(in);
	free(pt);
}
END_TEST

static const char *const aes_specs[] = {
	"aes_256_gcm",
	"zstd | aes_256_gcm",
	"checksum_md5 | aes_256_gcm",
	"checksum_sha256 | checksum_md5 | checksum_sha256 | aes_256_gcm",	/* 3 md parts */
	"aes_256_gcm | checksum_md5",
	"zstd | checksum_sha256 | aes_256_gcm",
};

START_TEST(test_aes_roundtrip)
{
	static const size_t sizes[] = { 0, 1, 15, 16, 17, 1000, 65536 + 13 };
	tf_key *key = make_key(ORACLE_KEY_HEX);
	tf_chunk_env env = { .type = TF_DT_FLOAT64, .cell_size = 8, .version = 22, .key = key };
	tf_pipeline *p = parse(aes_specs[_i]);

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s];
		uint8_t *in = tf_test_data(n, s % 2 ? TF_GEN_RANDOM : TF_GEN_FLOATS, 8, s);
		size_t stored = tf_test_roundtrip_env(p, &env, in, n);

		ck_assert_uint_ge(stored, 12 + 44);
		free(in);
	}
	tf_pipeline_free(p);
	tf_key_free(key);
}
END_TEST

START_TEST(test_aes_errors)
{
	tf_key *key = make_key(ORACLE_KEY), *wrong = make_key("TileDB-oracle-key-0123456789ABCE");
	tf_chunk_env env = { .type = TF_DT_UINT8, .cell_size = 1, .version = 22, .key = key };
	uint8_t *in = tf_test_data(3000, TF_GEN_RANDOM, 1, 5), *back = malloc(3000);
	const char *spec = "zstd | aes_256_gcm";
	tf_pipeline *p = parse(spec);
	tf_workspace *ws = tf_workspace_new();
	tf_buf c = TF_BUF_INIT(SIZE_MAX);
	tf_error err;

	env.key = NULL;
	ck_assert_int_eq(tf_pipeline_encode(p, &env, ws, tf_span_of(in, 3000), NULL, 0, &c, &err),
			 TF_E_NOKEY);
	env.key = key;
	encode_chunk(spec, &env, in, 3000, &c);
	env.key = NULL;
	ck_assert_int_eq(decode_chunk(spec, &env, c.p, c.len, back, &err), TF_E_NOKEY);
	ck_assert_msg(strstr(err.msg, "encrypted data and no key"), "%s", err.msg);
	env.key = wrong;
	ck_assert_int_eq(decode_chunk(spec, &env, c.p, c.len, back, &err), TF_E_AUTH);
	ck_assert_msg(strstr(err.msg, "filter 1 (aes_256_gcm): metadata part 0 fails "
			     "authentication: wrong key or corrupt data"), "%s", err.msg);
	assert_no_key(err.msg, (const uint8_t *)ORACLE_KEY, 32);
	assert_no_key(err.msg, tf_key_bytes(wrong), 32);
	env.key = key;
	c.p[c.len - 1] ^= 4;		/* last ciphertext byte */
	ck_assert_int_eq(decode_chunk(spec, &env, c.p, c.len, back, &err), TF_E_AUTH);
	ck_assert_msg(strstr(err.msg, "data part 0 fails authentication"), "%s", err.msg);
	c.p[c.len - 1] ^= 4;
	/* data part: plaintext_len != ciphertext_len */
	tf_put_le32(c.p + 12 + 8 + 36, tf_le32(c.p + 12 + 8 + 36 + 4) + 1);
	ck_assert_int_eq(decode_chunk(spec, &env, c.p, c.len, back, &err), TF_E_CORRUPT);
	tf_buf_free(&c);
	tf_workspace_free(ws);
	tf_pipeline_free(p);
	tf_key_free(key);
	tf_key_free(wrong);
	free(in);
	free(back);
}
END_TEST

/* ==== corruption: truncations and seeded bit flips ============================== */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#define FLIPS 2000
#define FUZZ_CAP ((size_t)1 << 22)

/*
 * Every truncation must fail; every flip must give an error or bytes, never
 * a crash or sanitizer report.  With `authenticated` (the last filter is a
 * checksum or AES), every flip must also be detected.
 */
static void fuzz_chunk(const char *spec, const tf_chunk_env *env, const uint8_t *chunk, size_t n,
		       bool authenticated, uint64_t seed)
{
	tf_pipeline *p = parse(spec);
	tf_workspace *ws = tf_workspace_new();
	uint8_t *copy = malloc(n), *dst = malloc(FUZZ_CAP);
	tf_error err;

	for (size_t len = 0; len < n; len++)
		ck_assert_msg(tf_chunk_decode(p, env, ws, tf_span_of(chunk, len), dst, NULL, &err) != TF_OK,
			      "%s: truncation to %zu bytes decoded", spec, len);
	for (int i = 0; i < FLIPS; i++) {
		size_t bit = splitmix(&seed) % (8 * n);
		tf_status rc;

		memcpy(copy, chunk, n);
		copy[bit / 8] ^= (uint8_t)(1u << bit % 8);
		if (tf_le32(copy) > FUZZ_CAP)	/* a flipped orig_len */
			continue;
		rc = tf_chunk_decode(p, env, ws, tf_span_of(copy, n), dst, NULL, &err);
		ck_assert_msg(!authenticated || rc != TF_OK, "%s: flip of bit %zu went unnoticed",
			      spec, bit);
	}
	free(copy);
	free(dst);
	tf_workspace_free(ws);
	tf_pipeline_free(p);
}

static const char *const fuzz_specs[] = {
	"checksum_md5", "checksum_sha256", "zstd | checksum_sha256",
	"checksum_md5 | zstd", "aes_256_gcm", "checksum_sha256 | zstd | aes_256_gcm",
};

START_TEST(test_fuzz)
{
	tf_key *key = make_key(ORACLE_KEY);
	tf_chunk_env env = { .type = TF_DT_INT32, .cell_size = 4, .version = 22, .key = key };
	const char *spec = fuzz_specs[_i];
	bool authenticated = strcmp(spec, "checksum_md5 | zstd") != 0;
	uint8_t *in = tf_test_data(3000, TF_GEN_WALK, 4, _i);
	tf_buf c;

	encode_chunk(spec, &env, in, 3000, &c);
	fuzz_chunk(spec, &env, c.p, c.len, authenticated, 1000 + _i);
	tf_buf_free(&c);
	free(in);
	tf_key_free(key);
}
END_TEST

/* ==== WebP ======================================================================= */

#ifdef HAVE_WEBP
/*
 * Lossless images in the four formats round-trip exactly, as long as no
 * pixel is fully transparent: TileDB calls libwebp's simple lossless API,
 * which may rewrite the colour under alpha 0 (WebPConfig.exact = 0), so
 * opaque-enough alpha is what "lossless" can promise.
 */
static uint8_t *image(unsigned rows, unsigned cols, unsigned depth, tf_gen gen, uint64_t seed)
{
	size_t n = (size_t)rows * cols;
	uint8_t *px = tf_test_data(n, gen, 1, seed);

	for (size_t i = 3; depth == 4 && i < n; i += 4)
		px[i] |= 1;
	return px;
}

START_TEST(test_webp_lossless)
{
	static const struct { unsigned format, depth; } fmts[] = { { 1, 3 }, { 2, 3 }, { 3, 4 }, { 4, 4 } };
	static const unsigned shapes[][2] = { { 1, 1 }, { 16, 16 }, { 37, 51 }, { 128, 200 } };
	char spec[128];

	for (size_t f = 0; f < 4; f++)
		for (size_t s = 0; s < 4; s++) {
			unsigned rows = shapes[s][0], cols = shapes[s][1] * fmts[f].depth;
			size_t n = (size_t)rows * cols;
			uint8_t *in = image(rows, cols, fmts[f].depth,
					    s % 2 ? TF_GEN_RANDOM : TF_GEN_RAMP, s);

			snprintf(spec, sizeof(spec), "webp(format=%u, lossless=1, y_extent=%u, x_extent=%u)",
				 fmts[f].format, rows, cols);
			tf_test_roundtrip(spec, TF_DT_UINT8, 1, in, n);
			snprintf(spec + strlen(spec), sizeof(spec) - strlen(spec), " | zstd");
			tf_test_roundtrip(spec, TF_DT_UINT8, 1, in, n);
			free(in);
		}
}
END_TEST

START_TEST(test_webp_lossy_and_errors)
{
	tf_chunk_env env = { .type = TF_DT_UINT8, .cell_size = 1, .version = 22 };
	const char *lossy = "webp(quality=75, format=1, y_extent=32, x_extent=96)";
	uint8_t *in = tf_test_data(32 * 96, TF_GEN_RAMP, 1, 3), *back = malloc(32 * 96);
	tf_error err;
	tf_buf c;

	encode_chunk(lossy, &env, in, 32 * 96, &c);
	ck_assert_uint_eq(tf_le32(c.p + 8), 8);		/* u32 n_parts = 1, u32 enc_len */
	ck_assert_uint_eq(tf_le32(c.p + 12), 1);
	ck_assert_uint_eq(tf_le32(c.p + 16), tf_le32(c.p + 4));
	ck_assert_mem_eq(c.p + 20, "RIFF", 4);
	ck_assert_mem_eq(c.p + 28, "WEBP", 4);
	ck_assert_int_eq(decode_chunk(lossy, &env, c.p, c.len, back, &err), TF_OK);
	/* the options must describe the stored image */
	ck_assert_int_eq(decode_chunk("webp(format=1, y_extent=32, x_extent=93)", &env, c.p, c.len,
				      back, &err), TF_E_CORRUPT);
	ck_assert_msg(strstr(err.msg, "image is 32x32 pixels, the options say 31x32"), "%s", err.msg);
	ck_assert_int_eq(decode_chunk("webp(format=0, y_extent=32, x_extent=96)", &env, c.p, c.len,
				      back, &err), TF_E_INVAL);
	fuzz_chunk(lossy, &env, c.p, c.len, false, 77);
	tf_buf_free(&c);
	/* a part that is not one whole image is refused, not over-read */
	c = (tf_buf)TF_BUF_INIT(SIZE_MAX);
	{
		tf_pipeline *p = parse(lossy);
		tf_workspace *ws = tf_workspace_new();

		ck_assert_int_eq(tf_pipeline_encode(p, &env, ws, tf_span_of(in, 100), NULL, 0, &c, &err),
				 TF_E_INVAL);
		ck_assert_msg(strstr(err.msg, "part of 100 bytes, an image is 3072"), "%s", err.msg);
		env.type = TF_DT_INT32;
		ck_assert_int_eq(tf_pipeline_encode(p, &env, ws, tf_span_of(in, 3072), NULL, 0, &c, &err),
				 TF_E_INVAL);
		tf_workspace_free(ws);
		tf_pipeline_free(p);
	}
	tf_buf_free(&c);
	free(in);
	free(back);
}
END_TEST
#else
START_TEST(test_webp_absent)
{
	tf_chunk_env env = { .type = TF_DT_UINT8, .cell_size = 1, .version = 22 };
	uint8_t chunk[12 + 8] = { 1, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 1 }, out[1];
	tf_error err;

	ck_assert_int_eq(decode_chunk("webp(format=1, y_extent=1, x_extent=3)", &env, chunk,
				      sizeof(chunk), out, &err), TF_E_UNSUPPORTED);
	ck_assert_msg(strstr(err.msg, "not built with webp"), "%s", err.msg);
}
END_TEST
#endif

/* ==== the corpus ================================================================= */

typedef struct kat {
	const char *kase;
	unsigned frag;
	const char *file;
	const char *spec;
	tf_datatype type;
	uint32_t cell_size;
	bool encrypted, var_string;
} kat;

#define ENC_META "extra/enc_consolidated_meta"
#define ENC_META_FRAG(f)                                                                    \
	{ ENC_META, f, "a0.tdb", "zstd | aes_256_gcm", TF_DT_INT32, 4, true, false },        \
	{ ENC_META, f, "a1.tdb", "byteshuffle | zstd | aes_256_gcm", TF_DT_FLOAT64, 8, true, false }, \
	{ ENC_META, f, "a2.tdb", "zstd | aes_256_gcm", TF_DT_UINT64, 8, true, false },       \
	{ ENC_META, f, "a2_var.tdb", "gzip | aes_256_gcm", TF_DT_STRING_ASCII, 1, true, false }

static const kat kats[] = {
	{ "checksum_md5", 0, "a0.tdb", "checksum_md5", TF_DT_INT32, 4, false, false },
	{ "checksum_md5", 0, "a1.tdb", "checksum_md5", TF_DT_FLOAT64, 8, false, false },
	{ "checksum_md5", 0, "a2.tdb", "checksum_md5", TF_DT_UINT8, 1, false, false },
	{ "checksum_sha256", 0, "a0.tdb", "checksum_sha256", TF_DT_INT32, 4, false, false },
	{ "checksum_sha256", 0, "a1.tdb", "checksum_sha256", TF_DT_FLOAT64, 8, false, false },
	{ "checksum_sha256", 0, "a2.tdb", "checksum_sha256", TF_DT_UINT8, 1, false, false },
	{ "chain_zstd_sha256", 0, "a0.tdb", "zstd | checksum_sha256", TF_DT_INT32, 4, false, false },
	{ "chain_zstd_sha256", 0, "a1.tdb", "zstd | checksum_sha256", TF_DT_FLOAT64, 8, false, false },
	{ "enc_dense_nofilter", 0, "a0.tdb", "aes_256_gcm", TF_DT_INT32, 4, true, false },
	/* These also need other helpers' filters: gzip, byteshuffle, rle. */
	{ "chain_md5_gzip", 0, "a0.tdb", "checksum_md5 | gzip", TF_DT_INT32, 4, false, false },
	{ "enc_dense_zstd", 0, "a0.tdb", "byteshuffle | zstd | aes_256_gcm", TF_DT_FLOAT64, 8, true, false },
	{ "enc_dense_zstd", 0, "a1.tdb", "gzip | aes_256_gcm", TF_DT_INT32, 4, true, false },
	{ "enc_str_rle", 0, "a0_var.tdb", "rle | aes_256_gcm", TF_DT_STRING_ASCII, 1, true, true },
	ENC_META_FRAG(0), ENC_META_FRAG(1), ENC_META_FRAG(2), ENC_META_FRAG(3), ENC_META_FRAG(4),
};

START_TEST(test_corpus_kat)
{
	const kat *k = &kats[_i];
	tf_key *key = k->encrypted ? make_key(ORACLE_KEY) : NULL;
	tf_chunk_env env = { .type = k->type, .cell_size = k->cell_size, .version = 22,
			     .var_string = k->var_string, .key = key };

	ck_assert(tf_test_corpus_check(k->kase, k->frag, k->file, k->spec, &env));
	tf_key_free(key);
}
END_TEST

static uint8_t *corpus_file(const char *kase, const char *pattern, size_t *n, char **path)
{
	char full[4096];
	glob_t g;
	uint8_t *p;

	snprintf(full, sizeof(full), "%s/%s/%s", tf_test_corpus(), kase, pattern);
	ck_assert_msg(glob(full, 0, NULL, &g) == 0, "no %s", full);
	p = tf_test_read_file(g.gl_pathv[0], n);
	if (path)
		*path = strdup(g.gl_pathv[0]);
	globfree(&g);
	return p;
}

/*
 * Checksums are deterministic, so encoding each decoded chunk must give
 * TileDB's stored chunk byte for byte.
 */
static void reencode_file(const char *kase, const char *file, const char *spec, tf_datatype t,
			  uint32_t cell)
{
	tf_chunk_env env = { .type = t, .cell_size = cell, .version = 22 };
	char pattern[256];
	size_t n, pos = 0, chunks = 0;
	uint8_t *data;

	snprintf(pattern, sizeof(pattern), "array/__fragments/*/%s", file);
	data = corpus_file(kase, pattern, &n, NULL);
	while (pos < n) {
		uint64_t nchunks = tf_le64(data + pos);

		for (pos += 8; nchunks-- > 0; chunks++) {
			tf_chunk_header h;
			uint8_t *plain;
			tf_error err;
			tf_buf c;

			tf_chunk_header_read(data + pos, &h);
			plain = malloc(h.orig_len);
			ck_assert_int_eq(decode_chunk(spec, &env, data + pos, tf_chunk_stored_size(&h),
						      plain, &err), TF_OK);
			encode_chunk(spec, &env, plain, h.orig_len, &c);
			ck_assert_uint_eq(c.len, tf_chunk_stored_size(&h));
			ck_assert_msg(memcmp(c.p, data + pos, c.len) == 0, "%s/%s chunk %zu differs",
				      kase, file, chunks);
			pos += c.len;
			tf_buf_free(&c);
			free(plain);
		}
	}
	ck_assert_uint_eq(pos, n);
	ck_assert_uint_gt(chunks, 0);
	free(data);
}

START_TEST(test_corpus_checksum_reencode)
{
	reencode_file("checksum_md5", "a0.tdb", "checksum_md5", TF_DT_INT32, 4);
	reencode_file("checksum_md5", "a2.tdb", "checksum_md5", TF_DT_UINT8, 1);
	reencode_file("checksum_sha256", "a1.tdb", "checksum_sha256", TF_DT_FLOAT64, 8);
}
END_TEST

/* First chunk of a corpus tile file (after the u64 chunk count), copied. */
static uint8_t *first_chunk(const char *kase, const char *file, size_t *n, uint32_t *orig)
{
	char pattern[256];
	size_t fn;
	uint8_t *data, *chunk;
	tf_chunk_header h;

	snprintf(pattern, sizeof(pattern), "array/__fragments/*/%s", file);
	data = corpus_file(kase, pattern, &fn, NULL);
	ck_assert_uint_ge(fn, 8 + TF_CHUNK_HEADER_SIZE);
	tf_chunk_header_read(data + 8, &h);
	*n = tf_chunk_stored_size(&h);
	*orig = h.orig_len;
	ck_assert_uint_le(8 + *n, fn);
	chunk = malloc(*n);
	memcpy(chunk, data + 8, *n);
	free(data);
	return chunk;
}

START_TEST(test_corpus_tamper)
{
	static const struct { const char *kase, *spec; tf_status want; const char *msg; } cases[] = {
		{ "checksum_md5", "checksum_md5", TF_E_CHECKSUM, "md5 mismatch in data part 0" },
		{ "checksum_sha256", "checksum_sha256", TF_E_CHECKSUM, "sha256 mismatch in data part 0" },
		{ "enc_dense_nofilter", "aes_256_gcm", TF_E_AUTH,
		  "data part 0 fails authentication: wrong key or corrupt data" },
	};
	tf_key *key = make_key(ORACLE_KEY);
	tf_chunk_env env = { .type = TF_DT_INT32, .cell_size = 4, .version = 22, .key = key };
	uint32_t orig;
	size_t n;
	uint8_t *chunk = first_chunk(cases[_i].kase, "a0.tdb", &n, &orig), *dst = malloc(orig);
	tf_error err;

	ck_assert_int_eq(decode_chunk(cases[_i].spec, &env, chunk, n, dst, &err), TF_OK);
	chunk[n - orig / 2] ^= 0x01;	/* one bit in the middle of the data */
	ck_assert_int_eq(decode_chunk(cases[_i].spec, &env, chunk, n, dst, &err), cases[_i].want);
	ck_assert_msg(strstr(err.msg, cases[_i].msg), "%s", err.msg);
	assert_no_key(err.msg, (const uint8_t *)ORACLE_KEY, 32);
	chunk[n - orig / 2] ^= 0x01;
	fuzz_chunk(cases[_i].spec, &env, chunk, n, true, 4242 + _i);
	free(chunk);
	free(dst);
	tf_key_free(key);
}
END_TEST

START_TEST(test_corpus_wrong_or_no_key)
{
	tf_key *wrong = make_key("TileDB-oracle-key-0123456789ABCE");
	tf_chunk_env env = { .type = TF_DT_INT32, .cell_size = 4, .version = 22, .key = wrong };
	uint8_t *data;
	size_t n;
	tf_buf out;
	tf_error err;

	data = corpus_file("enc_dense_nofilter", "array/__fragments/*/a0.tdb", &n, NULL);
	ck_assert_int_eq(tf_test_decode_tiles("aes_256_gcm", &env, data, n, &out, &err), TF_E_AUTH);
	ck_assert_msg(strstr(err.msg, "wrong key or corrupt data"), "%s", err.msg);
	assert_no_key(err.msg, (const uint8_t *)ORACLE_KEY, 32);
	assert_no_key(err.msg, tf_key_bytes(wrong), 32);
	tf_buf_free(&out);
	env.key = NULL;
	ck_assert_int_eq(tf_test_decode_tiles("aes_256_gcm", &env, data, n, &out, &err), TF_E_NOKEY);
	ck_assert_msg(strstr(err.msg, "encrypted data and no key"), "%s", err.msg);
	tf_buf_free(&out);
	free(data);
	tf_key_free(wrong);
}
END_TEST

/* Our encoder's chunk has TileDB's sizes for the same plaintext (§3.5). */
START_TEST(test_corpus_aes_sizes)
{
	tf_key *key = make_key(ORACLE_KEY);
	tf_chunk_env env = { .type = TF_DT_INT32, .cell_size = 4, .version = 22, .key = key };
	uint32_t orig;
	size_t n;
	uint8_t *chunk = first_chunk("enc_dense_nofilter", "a0.tdb", &n, &orig), *plain = malloc(orig);
	tf_error err;
	tf_buf c;

	ck_assert_int_eq(decode_chunk("aes_256_gcm", &env, chunk, n, plain, &err), TF_OK);
	encode_chunk("aes_256_gcm", &env, plain, orig, &c);
	ck_assert_uint_eq(c.len, n);
	ck_assert_mem_eq(c.p, chunk, 12);		/* orig, filtered, md lengths */
	ck_assert_mem_eq(c.p + 12, chunk + 12, 16);	/* counts, plaintext/ciphertext lengths */
	tf_buf_free(&c);
	free(chunk);
	free(plain);
	tf_key_free(key);
}
END_TEST

/* Decode the generic tile at path (key may be NULL); *n receives its payload size. */
static tf_status generic_file(const char *path, const tf_key *key, tf_buf *out, tf_error *err)
{
	size_t n;
	uint8_t *data = tf_test_read_file(path, &n);
	tf_workspace *ws = tf_workspace_new();
	uint64_t used = 0;
	tf_status rc;

	tf_buf_init(out, SIZE_MAX);
	rc = tf_generic_decode(tf_span_of(data, n), key, ws, out, &used, err);
	if (rc == TF_OK)
		ck_assert_uint_eq(used, n);
	tf_workspace_free(ws);
	free(data);
	return rc;
}

/* Each generic tile in array/<dir>/ decodes to expected/<exp>/<name>.bin. */
static void check_generic_dir(const char *dir, const char *exp, const tf_key *key)
{
	char pattern[4096], want_path[4096];
	unsigned checked = 0;
	glob_t g;

	snprintf(pattern, sizeof(pattern), "%s/" ENC_META "/array/%s/__*", tf_test_corpus(), dir);
	ck_assert_int_eq(glob(pattern, 0, NULL, &g), 0);
	for (size_t i = 0; i < g.gl_pathc; i++) {
		struct stat sb;
		size_t wn;
		uint8_t *want;
		tf_buf out;
		tf_error err;

		if (stat(g.gl_pathv[i], &sb) != 0 || !S_ISREG(sb.st_mode))
			continue;	/* __schema/__enumerations */
		snprintf(want_path, sizeof(want_path), "%s/" ENC_META "/expected/%s/%s.bin",
			 tf_test_corpus(), exp, basename(g.gl_pathv[i]));
		want = tf_test_read_file(want_path, &wn);
		ck_assert_msg(generic_file(g.gl_pathv[i], key, &out, &err) == TF_OK, "%s: %s",
			      g.gl_pathv[i], err.msg);
		ck_assert_msg(out.len == wn && memcmp(out.p, want, wn) == 0, "%s differs", want_path);
		tf_buf_free(&out);
		ck_assert_int_eq(generic_file(g.gl_pathv[i], NULL, &out, &err), TF_E_NOKEY);
		tf_buf_free(&out);
		free(want);
		checked++;
	}
	ck_assert_uint_gt(checked, 0);
	globfree(&g);
}

/* Schema, array metadata and consolidated fragment metadata: TileDB's payloads. */
START_TEST(test_corpus_generic_payloads)
{
	tf_key *key = make_key(ORACLE_KEY);

	check_generic_dir("__schema", "schema", key);
	check_generic_dir("__meta", "meta", key);
	check_generic_dir("__fragment_meta", "fragment_meta", key);
	tf_key_free(key);
}
END_TEST

/*
 * The main corpus has no decoded schemas: check what is known of them
 * (format version 22, capacity 10000 at offset 8, §7.2) and that a wrong
 * key is caught.
 */
START_TEST(test_corpus_generic_schemas)
{
	static const char *const cases[] = { "enc_dense_nofilter", "enc_dense_zstd", "enc_str_rle" };
	tf_key *key = make_key(ORACLE_KEY), *wrong = make_key("TileDB-oracle-key-0123456789ABCE");
	char *path;
	size_t n;
	tf_buf out;
	tf_error err;

	free(corpus_file(cases[_i], "array/__schema/__*_*", &n, &path));
	ck_assert_msg(generic_file(path, key, &out, &err) == TF_OK, "%s: %s", path, err.msg);
	ck_assert_uint_ge(out.len, 16);
	ck_assert_uint_eq(tf_le32(out.p), 22);
	ck_assert_uint_eq(tf_le64(out.p + 8), 10000);
	tf_buf_free(&out);
	ck_assert_int_eq(generic_file(path, wrong, &out, &err), TF_E_AUTH);
	assert_no_key(err.msg, (const uint8_t *)ORACLE_KEY, 32);
	tf_buf_free(&out);
	free(path);
	tf_key_free(key);
	tf_key_free(wrong);
}
END_TEST

/*
 * Every generic tile of an encrypted __fragment_metadata.tdb decodes, and
 * they tile the file exactly up to its plaintext footer (§8.4-8.5: the
 * file ends with the footer and a u64 footer length).
 */
START_TEST(test_corpus_fragment_metadata)
{
	tf_key *key = make_key(ORACLE_KEY);
	tf_workspace *ws = tf_workspace_new();
	size_t n, pos = 0, tiles = 0, end;
	uint8_t *data = corpus_file(ENC_META, "array/__fragments/*/__fragment_metadata.tdb", &n, NULL);

	ck_assert_uint_ge(n, 8);
	end = n - 8 - tf_le64(data + n - 8);
	ck_assert_uint_lt(end, n);
	for (; pos < end; tiles++) {
		tf_buf out = TF_BUF_INIT(SIZE_MAX);
		uint64_t used = 0;
		tf_error err;

		ck_assert_msg(tf_generic_decode(tf_span_of(data + pos, end - pos), key, ws, &out, &used,
						&err) == TF_OK, "tile at %zu: %s", pos, err.msg);
		pos += used;
		tf_buf_free(&out);
	}
	ck_assert_uint_eq(pos, end);
	ck_assert_uint_gt(tiles, 10);
	free(data);
	tf_workspace_free(ws);
	tf_key_free(key);
}
END_TEST

/* enc_str_rle: the offsets TileDB did not store are rebuilt from the var tiles. */
START_TEST(test_corpus_enc_str_offsets)
{
	tf_key *key = make_key(ORACLE_KEY);
	tf_chunk_env env = { .type = TF_DT_STRING_ASCII, .cell_size = 1, .version = 22,
			     .var_string = true, .key = key };
	tf_pipeline *p = parse("rle | aes_256_gcm");
	tf_workspace *ws = tf_workspace_new();
	tf_buf out = TF_BUF_INIT(SIZE_MAX), offs = TF_BUF_INIT(SIZE_MAX);
	size_t n, wn, pos = 0;
	uint8_t *data = corpus_file("enc_str_rle", "array/__fragments/*/a0_var.tdb", &n, NULL);
	uint8_t *want = corpus_file("enc_str_rle", "expected/unfiltered/f0/a0.tdb.bin", &wn, NULL);

	while (pos < n) {
		uint64_t used;
		tf_error err;

		ck_assert_msg(tf_tile_decode(p, &env, ws, tf_span_of(data + pos, n - pos), &out, &offs,
					     &used, &err) == TF_OK, "%s", err.msg);
		pos += used;
	}
	ck_assert_uint_eq(offs.len, wn);
	ck_assert_mem_eq(offs.p, want, wn);
	tf_buf_free(&out);
	tf_buf_free(&offs);
	free(data);
	free(want);
	tf_workspace_free(ws);
	tf_pipeline_free(p);
	tf_key_free(key);
}
END_TEST

/* ==== suite ======================================================================= */

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static TCase *tcase(Suite *s, const char *name)
{
	TCase *tc = tcase_create(name);

	tcase_set_timeout(tc, 300);	/* fuzzing under sanitizers */
	suite_add_tcase(s, tc);
	return tc;
}

static void add_corpus_tests(Suite *s)
{
	TCase *tc;

	if (!tf_test_corpus()) {
		printf("corpus absent: skipping known-answer tests\n");
		return;
	}
	tc = tcase(s, "corpus");
	tcase_add_loop_test(tc, test_corpus_kat, 0, COUNT(kats));
	tcase_add_test(tc, test_corpus_checksum_reencode);
	tcase_add_loop_test(tc, test_corpus_tamper, 0, 3);
	tcase_add_test(tc, test_corpus_wrong_or_no_key);
	tcase_add_test(tc, test_corpus_aes_sizes);
	tcase_add_test(tc, test_corpus_generic_payloads);
	tcase_add_loop_test(tc, test_corpus_generic_schemas, 0, 3);
	tcase_add_test(tc, test_corpus_fragment_metadata);
	tcase_add_test(tc, test_corpus_enc_str_offsets);
}

static Suite *suite(void)
{
	Suite *s = suite_create("crypto");
	TCase *tc;

	tc = tcase(s, "keys");
	tcase_add_test(tc, test_key_forms);
	tcase_add_test(tc, test_key_rejects);
	tcase_add_test(tc, test_key_files);

	tc = tcase(s, "checksum");
	tcase_add_test(tc, test_checksum_layout);
	tcase_add_test(tc, test_checksum_md_parts);
	tcase_add_loop_test(tc, test_checksum_roundtrip, 0, COUNT(checksum_specs));
	tcase_add_loop_test(tc, test_checksum_chains, 0, COUNT(checksum_chain_specs));
	tcase_add_loop_test(tc, test_checksum_errors, 0, 2);

	tc = tcase(s, "aes");
	tcase_add_test(tc, test_aes_layout);
	tcase_add_loop_test(tc, test_aes_roundtrip, 0, COUNT(aes_specs));
	tcase_add_test(tc, test_aes_errors);

	tc = tcase(s, "corruption");
	tcase_add_loop_test(tc, test_fuzz, 0, COUNT(fuzz_specs));

	tc = tcase(s, "webp");
#ifdef HAVE_WEBP
	tcase_add_test(tc, test_webp_lossless);
	tcase_add_test(tc, test_webp_lossy_and_errors);
#else
	tcase_add_test(tc, test_webp_absent);
#endif
	add_corpus_tests(s);
	return s;
}

TF_TEST_MAIN(suite)
