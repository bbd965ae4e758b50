/*
 * aes_256_gcm.c - AES-256-GCM (internal filter type 11), FORMAT.md §4.19
 * and §9; tiledb/sm/filter/encryption_aes256gcm_filter.cc, crypto_openssl.cc.
 *
 * Header in md:  u32 n_md_parts, u32 n_data_parts, then one AESPart per md
 *                part and per data part:
 *                u32 plaintext_len, u32 ciphertext_len, u8 iv[12], u8 tag[16].
 * Data:          the ciphertexts back to back, md parts first.
 * Each part is encrypted on its own with a fresh random IV and no AAD.  Like
 * a compressor, the decrypted md parts become the new metadata and the data
 * parts the new data.  Key bytes never appear in any message.
 */
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "util/tf_keys.h"
#include "framing.h"

#define IV_BYTES 12
#define TAG_BYTES 16
#define AES_PART_BYTES (8 + IV_BYTES + TAG_BYTES)
/* OpenSSL counts in int: feed it at most this much at a time. */
#define UPDATE_MAX ((size_t)1 << 30)

static void *ctx_new(void) { return EVP_CIPHER_CTX_new(); }
static void ctx_free(void *p) { EVP_CIPHER_CTX_free(p); }

/*
 * This thread's cipher context, keyed for one direction (enc = 1 encrypts).
 * The caller resets it when done: the expanded key must not linger in
 * ordinary heap memory between chunks (tf_keys.h keeps the key locked).
 */
static tf_status cipher_begin(const tf_stage *st, int enc, EVP_CIPHER_CTX **out, tf_error *err)
{
	EVP_CIPHER_CTX *ctx;

	if (!st->key)
		return tf_err(err, TF_E_NOKEY, enc ? "cannot encrypt without a key"
						   : "encrypted data and no key");
	ctx = tf_scratch_get(st->scratch, TF_SLOT_CIPHER, ctx_new, ctx_free);
	if (!ctx)
		return tf_err(err, TF_E_NOMEM, "cannot create a cipher context");
	/* The default GCM IV length is the 12 bytes TileDB uses. */
	if (!EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), NULL, tf_key_bytes(st->key), NULL, enc)) {
		EVP_CIPHER_CTX_reset(ctx);
		return tf_err(err, TF_E_INVAL, "OpenSSL cannot set up AES-256-GCM");
	}
	*out = ctx;
	return TF_OK;
}

static bool cipher_update(EVP_CIPHER_CTX *ctx, uint8_t *dst, const uint8_t *src, size_t n)
{
	while (n > 0) {
		int step = (int)(n < UPDATE_MAX ? n : UPDATE_MAX), got = 0;

		/* GCM is a stream mode: every byte in gives one byte out. */
		if (!EVP_CipherUpdate(ctx, dst, &got, src, step) || got != step)
			return false;
		dst += step;
		src += step;
		n -= (size_t)step;
	}
	return true;
}

/* ---- decode ----------------------------------------------------------------------- */

/* Decrypt the part described by the AESPart at rec, appending to out (room
 * already reserved).  Plaintext that fails its tag is wiped, never passed on. */
static tf_status decrypt_part(EVP_CIPHER_CTX *ctx, const uint8_t *rec, tf_reader *data,
			      tf_buf *out, const char *what, uint32_t i, tf_error *err)
{
	uint32_t plain_len = tf_le32(rec), cipher_len = tf_le32(rec + 4);
	uint8_t tag[TAG_BYTES], tail[16];
	uint8_t *dst;
	tf_span in;
	int fin = 0;
	bool ok;

	if (plain_len != cipher_len)	/* GCM adds no padding */
		return tf_err(err, TF_E_CORRUPT, "%s part %u: %u ciphertext bytes for %u plaintext "
			      "bytes", what, i, cipher_len, plain_len);
	if (tf_get_span(data, cipher_len, &in, "ciphertext", err) != TF_OK)
		return tf_err_prefix(err, "%s part %u", what, i);
	memcpy(tag, rec + 8 + IV_BYTES, TAG_BYTES);
	dst = in.n ? out->p + out->len : tail;
	ok = EVP_CipherInit_ex(ctx, NULL, NULL, NULL, rec + 8, 0) &&
	     cipher_update(ctx, dst, in.p, in.n) &&
	     EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_BYTES, tag);
	if (!ok) {
		memset(dst, 0, in.n);
		return tf_err(err, TF_E_CORRUPT, "%s part %u: OpenSSL cannot decrypt it", what, i);
	}
	/* Only the final step checks the tag. */
	if (EVP_CipherFinal_ex(ctx, tail, &fin) <= 0) {
		memset(dst, 0, in.n);
		return tf_err(err, TF_E_AUTH, "%s part %u fails authentication: wrong key or "
			      "corrupt data", what, i);
	}
	out->len += in.n;
	return TF_OK;
}

/* Decrypt `count` parts whose AESParts start at recs into out. */
static tf_status decrypt_parts(EVP_CIPHER_CTX *ctx, const tf_stage *st, const uint8_t *recs,
			       uint32_t count, tf_reader *data, tf_buf *out, const char *what,
			       tf_error *err)
{
	uint64_t total = 0;
	tf_status rc;

	for (uint32_t i = 0; i < count; i++)
		total += tf_le32(recs + (size_t)i * AES_PART_BYTES);
	if (total > SIZE_MAX)
		return tf_err(err, TF_E_CORRUPT, "%s parts too large", what);
	if ((rc = tf_stage_output(st, out, (size_t)total, err)) != TF_OK)
		return tf_err_prefix(err, "%s parts", what);
	for (uint32_t i = 0; i < count; i++)
		if ((rc = decrypt_part(ctx, recs + (size_t)i * AES_PART_BYTES, data, out, what, i,
				       err)) != TF_OK)
			return rc;
	return TF_OK;
}

static tf_status read_header(tf_span md, uint32_t *n_md, uint32_t *n_data, tf_span *recs,
			     tf_error *err)
{
	tf_reader r = tf_reader_of(md);
	tf_status rc;

	if ((rc = tf_get_u32(&r, n_md, "metadata part count", err)) != TF_OK ||
	    (rc = tf_get_u32(&r, n_data, "data part count", err)) != TF_OK ||
	    (rc = tf_get_span(&r, ((uint64_t)*n_md + *n_data) * AES_PART_BYTES, recs,
			      "part records", err)) != TF_OK)
		return tf_err_prefix(err, "aes header");
	/* AES is the last filter and consumes md: nothing else can be there. */
	if (r.n != 0)
		return tf_err(err, TF_E_CORRUPT, "%zu unexpected bytes after the aes header", r.n);
	return TF_OK;
}

static tf_status decode(const tf_filter_opts *o, const tf_stage *st, tf_stream *s, tf_error *err)
{
	tf_reader data = tf_reader_of(s->data);
	EVP_CIPHER_CTX *ctx;
	uint32_t n_md, n_data;
	tf_span recs;
	tf_status rc;

	(void)o;
	if ((rc = cipher_begin(st, 0, &ctx, err)) != TF_OK)
		return rc;
	rc = read_header(s->md, &n_md, &n_data, &recs, err);
	if (rc == TF_OK)
		rc = decrypt_parts(ctx, st, recs.p, n_md, &data, s->md_out, "metadata", err);
	if (rc == TF_OK)
		rc = decrypt_parts(ctx, st, recs.p + (size_t)n_md * AES_PART_BYTES, n_data, &data,
				   s->data_out, "data", err);
	EVP_CIPHER_CTX_reset(ctx);
	if (rc != TF_OK)
		return rc;
	if (data.n != 0)
		return tf_err(err, TF_E_CORRUPT, "%zu bytes of data beyond its parts", data.n);
	s->md = tf_span_of(s->md_out->p, s->md_out->len);
	s->data = tf_span_of(s->data_out->p, s->data_out->len);
	return TF_OK;
}

/* ---- encode ----------------------------------------------------------------------- */

/* Encrypt every part of `in`: ciphertexts to out, AESParts to hdr. */
static tf_status encrypt_parts(EVP_CIPHER_CTX *ctx, const tf_parts *in, tf_buf *hdr,
			       tf_buf *out, tf_error *err)
{
	for (size_t i = 0; i < in->n; i++) {
		const tf_buf *part = &in->v[i];
		uint8_t rec[AES_PART_BYTES], tail[16], *dst = tail;
		int fin = 0;
		tf_status rc;

		if (part->len > UINT32_MAX)
			return tf_err(err, TF_E_INVAL, "part of %zu bytes exceeds 4 GiB", part->len);
		/* A fresh random IV per part, as TileDB's encrypt_part does. */
		if (RAND_bytes(rec + 8, IV_BYTES) != 1)
			return tf_err(err, TF_E_IO, "cannot get random bytes for an IV");
		if (part->len && (rc = tf_buf_grow(out, part->len, &dst, err)) != TF_OK)
			return rc;
		if (!EVP_CipherInit_ex(ctx, NULL, NULL, NULL, rec + 8, 1) ||
		    !cipher_update(ctx, dst, part->p, part->len) ||
		    EVP_CipherFinal_ex(ctx, tail, &fin) <= 0 ||
		    !EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_BYTES, rec + 8 + IV_BYTES))
			return tf_err(err, TF_E_INVAL, "OpenSSL cannot encrypt part %zu", i);
		out->len += part->len;
		tf_put_le32(rec, (uint32_t)part->len);
		tf_put_le32(rec + 4, (uint32_t)part->len);
		if ((rc = tf_buf_append(hdr, rec, sizeof(rec), err)) != TF_OK)
			return rc;
	}
	return TF_OK;
}

static tf_status encode(const tf_filter_opts *o, const tf_stage *st, tf_parts *md,
			tf_parts *data, tf_error *err)
{
	EVP_CIPHER_CTX *ctx;
	tf_framing_out f;
	tf_status rc;

	(void)o;
	if ((rc = cipher_begin(st, 1, &ctx, err)) != TF_OK)
		return rc;
	rc = tf_framing_begin(&f, md, data, err);
	if (rc == TF_OK && (rc = encrypt_parts(ctx, md, f.hdr, f.out, err)) == TF_OK)
		rc = encrypt_parts(ctx, data, f.hdr, f.out, err);
	EVP_CIPHER_CTX_reset(ctx);
	return tf_framing_end(&f, md, data, rc);
}

/* Ciphertext has no element structure (FORMAT.md §2.4). */
static tf_datatype out_type(const tf_filter_opts *o, tf_datatype t)
{
	(void)o; (void)t;
	return TF_DT_BLOB;
}

const tf_filter_class tf_filter_aes_256_gcm = {
	.id = TF_F_AES_256_GCM,
	.name = "aes_256_gcm",
	.alias = "aes",
	.layout = TF_OPTS_NONE,
	.consumes_md = true,
	.out_type = out_type,
	.decode = decode,
	.encode = encode,
};
