/*
 * checksum.h - the layout shared by CHECKSUM_MD5 and CHECKSUM_SHA256
 * (FORMAT.md §4.15, tiledb/sm/filter/checksum_md5_filter.cc and
 * checksum_sha256_filter.cc).  Only the digest differs.
 *
 * Header in md:  u32 n_md_parts, u32 n_data_parts,
 *                (u64 nbytes, u8 digest[D]) per md part, then per data part.
 * The md parts it covers are the bytes that follow the header in md (the
 * headers of earlier filters); the data parts are consecutive regions of
 * the data.  Both pass through unchanged: this filter only verifies.
 *
 * Private to checksum_md5.c and checksum_sha256.c; the functions are static
 * inline because the build lists no shared .c file for them.
 */
#ifndef TF_CHECKSUM_H
#define TF_CHECKSUM_H

#include <openssl/evp.h>

#include "filters/tf_filter.h"

typedef struct tf_digest_kind {
	const char *name;		/* for messages: "md5", "sha256" */
	const EVP_MD *(*md)(void);	/* EVP_md5, EVP_sha256 */
	unsigned size;			/* D: 16 or 32 bytes */
} tf_digest_kind;

static inline tf_status tf_digest(const tf_digest_kind *k, tf_span in, uint8_t *out,
				  tf_error *err)
{
	unsigned n = 0;

	/* Fails only when OpenSSL lacks the algorithm (MD5 under a FIPS-only
	 * provider) or memory. */
	if (!EVP_Digest(in.p, in.n, out, &n, k->md(), NULL) || n != k->size)
		return tf_err(err, TF_E_UNSUPPORTED, "OpenSSL cannot compute a %s digest", k->name);
	return TF_OK;
}

/*
 * Check `count` (nbytes, digest) entries read from `table` against the
 * consecutive regions of `region`.  A region that is not there is corrupt
 * data; one that is there but hashes differently is a checksum mismatch.
 */
static inline tf_status tf_checksum_verify(const tf_digest_kind *k, tf_reader *table,
					   uint32_t count, tf_reader *region, const char *what,
					   tf_error *err)
{
	uint8_t got[EVP_MAX_MD_SIZE];
	tf_status rc;

	for (uint32_t i = 0; i < count; i++) {
		uint64_t nbytes;
		tf_span want, bytes;

		if ((rc = tf_get_u64(table, &nbytes, "part size", err)) != TF_OK ||
		    (rc = tf_get_span(table, k->size, &want, "digest", err)) != TF_OK ||
		    (rc = tf_get_span(region, nbytes, &bytes, "checksummed bytes", err)) != TF_OK)
			return tf_err_prefix(err, "%s: %s part %u", k->name, what, i);
		if ((rc = tf_digest(k, bytes, got, err)) != TF_OK)
			return rc;
		if (memcmp(got, want.p, k->size) != 0)
			return tf_err(err, TF_E_CHECKSUM, "%s mismatch in %s part %u (%zu bytes)",
				      k->name, what, i, bytes.n);
	}
	return TF_OK;
}

static inline tf_status tf_checksum_decode(const tf_digest_kind *k, tf_stream *s, tf_error *err)
{
	tf_reader md = tf_reader_of(s->md), table, data = tf_reader_of(s->data);
	uint32_t n_md, n_data;
	tf_span entries;
	tf_status rc;

	if ((rc = tf_get_u32(&md, &n_md, "metadata part count", err)) != TF_OK ||
	    (rc = tf_get_u32(&md, &n_data, "data part count", err)) != TF_OK ||
	    (rc = tf_get_span(&md, ((uint64_t)n_md + n_data) * (8 + k->size), &entries,
			      "part digests", err)) != TF_OK)
		return tf_err_prefix(err, "%s header", k->name);
	table = tf_reader_of(entries);
	/* The md digests cover what follows the header: the headers of the
	 * filters before this one, which stay in md for them to read. */
	s->md = tf_span_of(md.p, md.n);
	if ((rc = tf_checksum_verify(k, &table, n_md, &md, "metadata", err)) != TF_OK ||
	    (rc = tf_checksum_verify(k, &table, n_data, &data, "data", err)) != TF_OK)
		return rc;
	/* The forward run digests every part it is given, so honest parts
	 * cover md and data exactly; a shortfall means the header lies. */
	if (md.n != 0 || data.n != 0)
		return tf_err(err, TF_E_CORRUPT, "%s: parts leave %zu metadata and %zu data bytes "
			      "unchecked", k->name, md.n, data.n);
	return TF_OK;
}

/* Append (nbytes, digest) for every part of p to hdr. */
static inline tf_status tf_checksum_parts(const tf_digest_kind *k, const tf_parts *p,
					  tf_buf *hdr, tf_error *err)
{
	uint8_t *at;
	tf_status rc;

	for (size_t i = 0; i < p->n; i++) {
		if ((rc = tf_buf_put_u64(hdr, p->v[i].len, err)) != TF_OK ||
		    (rc = tf_buf_grow(hdr, k->size, &at, err)) != TF_OK ||
		    (rc = tf_digest(k, tf_span_of(p->v[i].p, p->v[i].len), at, err)) != TF_OK)
			return rc;
		hdr->len += k->size;
	}
	return TF_OK;
}

/* Forward run: out md = [header] then the in-md parts; data unchanged. */
static inline tf_status tf_checksum_encode(const tf_digest_kind *k, tf_parts *md,
					   const tf_parts *data, tf_error *err)
{
	tf_buf hdr = TF_BUF_INIT(SIZE_MAX);
	tf_status rc;

	if (md->n > UINT32_MAX || data->n > UINT32_MAX)
		return tf_err(err, TF_E_INVAL, "%s: too many parts", k->name);
	if ((rc = tf_buf_put_u32(&hdr, (uint32_t)md->n, err)) != TF_OK ||
	    (rc = tf_buf_put_u32(&hdr, (uint32_t)data->n, err)) != TF_OK ||
	    (rc = tf_checksum_parts(k, md, &hdr, err)) != TF_OK ||
	    (rc = tf_checksum_parts(k, data, &hdr, err)) != TF_OK ||
	    (rc = tf_parts_prepend(md, &hdr, err)) != TF_OK)
		tf_buf_free(&hdr);
	return rc;
}

#endif
