/* framing.c - parts header of the compression family (FORMAT.md §4.1),
 * and the encode output every metadata-consuming filter builds (framing.h). */
#include "framing.h"

typedef struct part {
	uint32_t orig, comp;
} part;

/* Decode `count` parts described at hdr (8 bytes each) from *src into out. */
static tf_status decode_parts(const tf_codec *c, const tf_filter_opts *o, const tf_stage *st,
			      const uint8_t *hdr, uint32_t count, tf_reader *src, tf_buf *out,
			      const char *what, tf_error *err)
{
	uint64_t total = 0;
	tf_status rc;

	for (uint32_t i = 0; i < count; i++)
		total += tf_le32(hdr + 8 * (size_t)i);
	if (total > SIZE_MAX)
		return tf_err(err, TF_E_CORRUPT, "%s: %s parts too large", c->name, what);
	rc = tf_stage_output(st, out, (size_t)total, err);
	if (rc != TF_OK)
		return tf_err_prefix(err, "%s: %s parts", c->name, what);
	for (uint32_t i = 0; i < count; i++) {
		part p = { tf_le32(hdr + 8 * (size_t)i), tf_le32(hdr + 8 * (size_t)i + 4) };
		tf_span in;

		rc = tf_get_span(src, p.comp, &in, "compressed part", err);
		if (rc == TF_OK)
			rc = c->decode_part(o, st, in, out->p + out->len, p.orig, err);
		if (rc != TF_OK)
			return tf_err_prefix(err, "%s: %s part %u", c->name, what, i);
		out->len += p.orig;
	}
	return TF_OK;
}

tf_status tf_framing_decode(const tf_codec *c, const tf_filter_opts *o, const tf_stage *st,
			    tf_stream *s, tf_error *err)
{
	tf_reader md = tf_reader_of(s->md), data = tf_reader_of(s->data);
	uint32_t n_md, n_data;
	tf_span hdr_md, hdr_data;
	tf_status rc;

	if ((rc = tf_get_u32(&md, &n_md, "metadata part count", err)) != TF_OK ||
	    (rc = tf_get_u32(&md, &n_data, "data part count", err)) != TF_OK ||
	    (rc = tf_get_span(&md, 8 * (uint64_t)n_md, &hdr_md, "metadata part sizes", err)) != TF_OK ||
	    (rc = tf_get_span(&md, 8 * (uint64_t)n_data, &hdr_data, "data part sizes", err)) != TF_OK)
		return tf_err_prefix(err, "%s header", c->name);
	if (md.n != 0)
		return tf_err(err, TF_E_CORRUPT, "%s: %zu unexpected bytes after its header",
			      c->name, md.n);
	rc = decode_parts(c, o, st, hdr_md.p, n_md, &data, s->md_out, "metadata", err);
	if (rc == TF_OK)
		rc = decode_parts(c, o, st, hdr_data.p, n_data, &data, s->data_out, "data", err);
	if (rc != TF_OK)
		return rc;
	if (data.n != 0)
		return tf_err(err, TF_E_CORRUPT, "%s: %zu bytes of data beyond its parts", c->name, data.n);
	s->md = tf_span_of(s->md_out->p, s->md_out->len);
	s->data = tf_span_of(s->data_out->p, s->data_out->len);
	return TF_OK;
}

/* Encode every part of `in`, appending streams to out and sizes to hdr. */
static tf_status encode_parts(const tf_codec *c, const tf_filter_opts *o, const tf_stage *st,
			      const tf_parts *in, tf_buf *hdr, tf_buf *out, tf_error *err)
{
	for (size_t i = 0; i < in->n; i++) {
		size_t before = out->len, comp;
		tf_status rc;

		if (in->v[i].len > UINT32_MAX)
			return tf_err(err, TF_E_INVAL, "%s: part of %zu bytes exceeds 4 GiB",
				      c->name, in->v[i].len);
		rc = c->encode_part(o, st, tf_span_of(in->v[i].p, in->v[i].len), out, err);
		if (rc != TF_OK)
			return rc;
		comp = out->len - before;
		if (comp > UINT32_MAX)
			return tf_err(err, TF_E_INVAL, "%s: compressed part exceeds 4 GiB", c->name);
		if ((rc = tf_buf_put_u32(hdr, (uint32_t)in->v[i].len, err)) != TF_OK ||
		    (rc = tf_buf_put_u32(hdr, (uint32_t)comp, err)) != TF_OK)
			return rc;
	}
	return TF_OK;
}

tf_status tf_framing_encode(const tf_codec *c, const tf_filter_opts *o, const tf_stage *st,
			    tf_parts *md, tf_parts *data, tf_error *err)
{
	tf_framing_out f;
	tf_status rc = tf_framing_begin(&f, md, data, err);

	if (rc == TF_OK && (rc = encode_parts(c, o, st, md, f.hdr, f.out, err)) == TF_OK)
		rc = encode_parts(c, o, st, data, f.hdr, f.out, err);
	return tf_framing_end(&f, md, data, rc);
}

/* ---- the encode output of every metadata-consuming filter ---------------------- */

tf_status tf_framing_begin(tf_framing_out *f, const tf_parts *md, const tf_parts *data,
			   tf_error *err)
{
	tf_status rc;

	tf_parts_init(&f->md);
	tf_parts_init(&f->data);
	if ((rc = tf_parts_add(&f->md, &f->hdr, err)) != TF_OK ||
	    (rc = tf_parts_add(&f->data, &f->out, err)) != TF_OK ||
	    (rc = tf_buf_put_u32(f->hdr, (uint32_t)md->n, err)) != TF_OK)
		return rc;
	return tf_buf_put_u32(f->hdr, (uint32_t)data->n, err);
}

tf_status tf_framing_end(tf_framing_out *f, tf_parts *md, tf_parts *data, tf_status rc)
{
	if (rc != TF_OK) {
		tf_parts_free(&f->md);
		tf_parts_free(&f->data);
		return rc;
	}
	tf_parts_free(md);
	tf_parts_free(data);
	*md = f->md;
	*data = f->data;
	return TF_OK;
}
