/*
 * tf_pipeline.c - pipeline objects, their serialized form, and running a
 * pipeline over one chunk (FORMAT.md §2, §3.4).
 */
#include "format/tf_pipeline_int.h"

#include <stdlib.h>

tf_pipeline *tf_pipeline_new(void)
{
	tf_pipeline *p = calloc(1, sizeof(*p));

	if (p)
		p->max_chunk_size = TF_DEFAULT_MAX_CHUNK;
	return p;
}

tf_pipeline *tf_pipeline_dup(const tf_pipeline *p)
{
	tf_pipeline *q = malloc(sizeof(*q));

	if (q)
		*q = *p;
	return q;
}

void tf_pipeline_free(tf_pipeline *p)
{
	free(p);
}

tf_status tf_pipeline_push(tf_pipeline *p, const tf_filter_class *c, const tf_filter_opts *o,
			   tf_error *err)
{
	tf_status rc;

	if (p->n == TF_MAX_FILTERS)
		return tf_err(err, TF_E_INVAL, "more than %d filters", TF_MAX_FILTERS);
	if (c->check && (rc = c->check(o, err)) != TF_OK)
		return tf_err_prefix(err, "%s", c->name);
	p->f[p->n].cls = c;
	p->f[p->n].o = *o;
	p->n++;
	return TF_OK;
}

tf_status tf_pipeline_append(tf_pipeline *p, unsigned id, tf_error *err)
{
	const tf_filter_class *c = tf_filter_by_id(id);
	tf_filter_opts o;

	if (!c)
		return tf_err(err, TF_E_INVAL, "unknown filter type %u", id);
	tf_filter_opts_default(c, &o);
	return tf_pipeline_push(p, c, &o, err);
}

size_t tf_pipeline_count(const tf_pipeline *p) { return p->n; }
uint32_t tf_pipeline_max_chunk_size(const tf_pipeline *p) { return p->max_chunk_size; }
void tf_pipeline_set_max_chunk_size(tf_pipeline *p, uint32_t v) { p->max_chunk_size = v; }

const tf_filter_class *tf_pipeline_class(const tf_pipeline *p, size_t i)
{
	return i < p->n ? p->f[i].cls : NULL;
}

bool tf_pipeline_has(const tf_pipeline *p, unsigned id)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->f[i].cls->id == id)
			return true;
	return false;
}

tf_datatype tf_pipeline_type_at(const tf_pipeline *p, size_t i, tf_datatype t)
{
	for (size_t j = 0; j < i && j < p->n; j++)
		if (p->f[j].cls->out_type)
			t = p->f[j].cls->out_type(&p->f[j].o, t);
	return t;
}

/* ---- serialized form (§2.1-2.3) ---------------------------------------------- */

/* Compression-family options: the compressor byte, not the type byte, says
 * which codec TileDB builds (§1.2, filter_create.cc), so follow it. */
static const uint8_t compressor_to_type[] = {
	TF_F_NONE, TF_F_GZIP, TF_F_ZSTD, TF_F_LZ4, TF_F_RLE, TF_F_BZIP2,
	TF_F_DOUBLE_DELTA, TF_F_DICTIONARY, TF_F_DELTA,
};

static tf_status read_compressor(tf_reader *o, const tf_filter_class **c, tf_filter_opts *fo,
				 tf_error *err)
{
	uint8_t comp;
	tf_status rc;

	if ((rc = tf_get_u8(o, &comp, "compressor", err)) != TF_OK)
		return rc;
	if (comp >= sizeof(compressor_to_type))
		return tf_err(err, TF_E_CORRUPT, "unknown compressor %u", comp);
	if (tf_filter_by_id((*c)->id) == *c)	/* a plugin's byte is its own */
		*c = tf_filter_by_id(compressor_to_type[comp]);
	if ((rc = tf_get_i32(o, &fo->level, "compression level", err)) != TF_OK)
		return rc;
	/* DELTA/DOUBLE_DELTA carry a reinterpret byte from format 19/20 on
	 * (§2.3); the option length tells whether this one does. */
	if ((*c)->layout == TF_OPTS_REINTERPRET && o->n == 1) {
		uint8_t t;
		rc = tf_get_u8(o, &t, "reinterpret datatype", err);
		if (rc == TF_OK && !tf_datatype_valid(t))
			return tf_err(err, TF_E_CORRUPT, "bad reinterpret datatype %u", t);
		fo->reinterpret = (tf_datatype)t;
	}
	return rc;
}

static tf_status read_options(tf_reader *o, const tf_filter_class **c, tf_filter_opts *fo,
			      tf_error *err)
{
	tf_status rc = TF_OK;

	switch ((*c)->layout) {
	case TF_OPTS_NONE:
		if ((*c)->id == TF_F_NONE)	/* a "no compression" filter: skip */
			o->n = 0;
		break;
	case TF_OPTS_COMPRESSOR:
	case TF_OPTS_REINTERPRET:
		rc = read_compressor(o, c, fo, err);
		break;
	case TF_OPTS_WINDOW:
		rc = tf_get_u32(o, &fo->window, "window", err);
		break;
	case TF_OPTS_SCALE_FLOAT:
		if ((rc = tf_get_f64(o, &fo->scale, "scale", err)) == TF_OK &&
		    (rc = tf_get_f64(o, &fo->offset, "offset", err)) == TF_OK)
			rc = tf_get_u64(o, &fo->byte_width, "byte width", err);
		break;
	case TF_OPTS_WEBP: {
		tf_span b;	/* memcpy of struct {f32, u8, u8, u16, u16, 2 pad bytes} */
		if ((rc = tf_get_f32(o, &fo->quality, "webp quality", err)) != TF_OK ||
		    (rc = tf_get_span(o, 8, &b, "webp options", err)) != TF_OK)
			break;
		fo->webp_format = b.p[0];
		fo->lossless = b.p[1];
		fo->y_extent = tf_le16(b.p + 2);
		fo->x_extent = tf_le16(b.p + 4);
		break;
	}
	case TF_OPTS_CD_VALUES:	/* u32 each */
		if (o->n % 4 || o->n / 4 > TF_MAX_CD_VALUES)
			return tf_err(err, TF_E_CORRUPT, "%zu parameter bytes", o->n);
		for (fo->ncd = 0; rc == TF_OK && o->n; fo->ncd++)
			rc = tf_get_u32(o, &fo->cd[fo->ncd], "parameter", err);
		break;
	}
	if (rc == TF_OK && o->n != 0)
		rc = tf_err(err, TF_E_CORRUPT, "%zu unexpected option bytes", o->n);
	return rc;
}

static tf_status read_filter(tf_reader *r, tf_pipeline *p, tf_error *err)
{
	const tf_filter_class *c;
	tf_filter_opts fo;
	uint8_t type;
	uint32_t len;
	tf_span opts;
	tf_reader o;
	tf_status rc;

	if ((rc = tf_get_u8(r, &type, "filter type", err)) != TF_OK ||
	    (rc = tf_get_u32(r, &len, "filter options length", err)) != TF_OK ||
	    (rc = tf_get_span(r, len, &opts, "filter options", err)) != TF_OK)
		return rc;
	c = tf_filter_by_id(type);
	if (!c && type == 17)
		return tf_err(err, TF_E_UNSUPPORTED, "filter type 17 (BITSORT, TileDB 2.13-2.14) cannot be read");
	if (!c)
		return tf_err(err, TF_E_CORRUPT, "unknown filter type %u", type);
	tf_filter_opts_default(c, &fo);
	o = tf_reader_of(opts);
	if ((rc = read_options(&o, &c, &fo, err)) != TF_OK)
		return tf_err_prefix(err, "%s options", c->name);
	if (p->n == TF_MAX_FILTERS)
		return tf_err(err, TF_E_CORRUPT, "more than %d filters", TF_MAX_FILTERS);
	/* No option check here: TileDB stores e.g. gzip level 10 in a schema
	 * without complaint, and decoding never uses the level. */
	p->f[p->n].cls = c;
	p->f[p->n++].o = fo;
	return TF_OK;
}

tf_status tf_pipeline_deserialize(tf_reader *r, tf_pipeline **out, tf_error *err)
{
	tf_pipeline *p = tf_pipeline_new();
	uint32_t count;
	tf_status rc;

	if (!p)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if ((rc = tf_get_u32(r, &p->max_chunk_size, "pipeline max chunk size", err)) != TF_OK ||
	    (rc = tf_get_u32(r, &count, "pipeline filter count", err)) != TF_OK)
		goto fail;
	if (count > TF_MAX_FILTERS) {
		rc = tf_err(err, TF_E_CORRUPT, "pipeline claims %u filters", count);
		goto fail;
	}
	for (uint32_t i = 0; i < count; i++)
		if ((rc = read_filter(r, p, err)) != TF_OK) {
			tf_err_prefix(err, "pipeline filter %u", i);
			goto fail;
		}
	*out = p;
	return TF_OK;
fail:
	tf_pipeline_free(p);
	return rc;
}

static tf_status write_options(const tf_filter *f, tf_buf *b, tf_error *err)
{
	const tf_filter_opts *o = &f->o;
	uint8_t w[4 * TF_MAX_CD_VALUES];
	size_t n = 0;

	switch (f->cls->layout) {
	case TF_OPTS_NONE:
		break;
	case TF_OPTS_COMPRESSOR:
	case TF_OPTS_REINTERPRET:
		w[0] = f->cls->compressor;
		tf_put_le32(w + 1, (uint32_t)o->level);
		n = 5;
		if (f->cls->layout == TF_OPTS_REINTERPRET)
			w[n++] = (uint8_t)o->reinterpret;	/* writers always emit it */
		break;
	case TF_OPTS_WINDOW:
		tf_put_le32(w, o->window);
		n = 4;
		break;
	case TF_OPTS_SCALE_FLOAT:
		memcpy(w, &o->scale, 8);
		memcpy(w + 8, &o->offset, 8);
		tf_put_le64(w + 16, o->byte_width);
		n = 24;
		break;
	case TF_OPTS_WEBP:
		memcpy(w, &o->quality, 4);
		w[4] = o->webp_format;
		w[5] = o->lossless;
		tf_put_le16(w + 6, o->y_extent);
		tf_put_le16(w + 8, o->x_extent);
		w[10] = w[11] = 0;
		n = 12;
		break;
	case TF_OPTS_CD_VALUES:
		for (; n < 4 * (size_t)o->ncd; n += 4)
			tf_put_le32(w + n, o->cd[n / 4]);
		break;
	}
	tf_status rc = tf_buf_put_u32(b, (uint32_t)n, err);
	return rc != TF_OK ? rc : tf_buf_append(b, w, n, err);
}

tf_status tf_pipeline_serialize(const tf_pipeline *p, tf_buf *out, tf_error *err)
{
	tf_status rc;

	if ((rc = tf_buf_put_u32(out, p->max_chunk_size, err)) != TF_OK ||
	    (rc = tf_buf_put_u32(out, (uint32_t)p->n, err)) != TF_OK)
		return rc;
	for (size_t i = 0; i < p->n; i++) {
		if (p->f[i].cls->id == TF_F_NO_ID)	/* TileDB has no number for it */
			return tf_err(err, TF_E_INVAL, "filter %zu (%s) is an HDF5 filter: a TileDB "
				      "pipeline cannot name it", i, p->f[i].cls->name);
		if ((rc = tf_buf_put_u8(out, p->f[i].cls->id, err)) != TF_OK ||
		    (rc = write_options(&p->f[i], out, err)) != TF_OK)
			return rc;
	}
	return TF_OK;
}

/* ---- running a pipeline over one chunk (§3.4) ------------------------------------ */

struct tf_workspace {
	tf_buf md[2], data[2];	/* ping-pong buffers between stages */
	tf_buf user[2];		/* TF_WS_IO, TF_WS_AUX */
	tf_scratch *scratch;
};

/* Scratch buffers larger than this are released after each chunk, so a
 * rare huge chunk does not pin memory in every thread for ever. */
#define KEEP_SCRATCH_BYTES ((size_t)8 << 20)

tf_workspace *tf_workspace_new(void)
{
	tf_workspace *ws = calloc(1, sizeof(*ws));

	if (!ws)
		return NULL;
	ws->scratch = tf_scratch_new();
	if (!ws->scratch) {
		free(ws);
		return NULL;
	}
	for (int i = 0; i < 2; i++) {
		tf_buf_init(&ws->md[i], SIZE_MAX);
		tf_buf_init(&ws->data[i], SIZE_MAX);
		tf_buf_init(&ws->user[i], SIZE_MAX);
	}
	return ws;
}

void tf_workspace_free(tf_workspace *ws)
{
	if (!ws)
		return;
	for (int i = 0; i < 2; i++) {
		tf_buf_free(&ws->md[i]);
		tf_buf_free(&ws->data[i]);
		tf_buf_free(&ws->user[i]);
	}
	tf_scratch_free(ws->scratch);
	free(ws);
}

tf_buf *tf_workspace_buf(tf_workspace *ws, unsigned which)
{
	return &ws->user[which & 1];
}

static void trim(tf_buf *b)
{
	if (b->cap > KEEP_SCRATCH_BYTES)
		tf_buf_free(b);
}

/* Only the pipeline's own buffers: IO and AUX belong to the caller, who
 * may hold a chunk's stored bytes or a whole decoded tile in them across
 * this call (freeing them here was a use-after-free for tiles over 8 MiB). */
static void workspace_trim(tf_workspace *ws)
{
	for (int i = 0; i < 2; i++) {
		trim(&ws->md[i]);
		trim(&ws->data[i]);
	}
}

/* The buffer of the pair that `s` does not point into: a stage never
 * writes where its input lives. */
static tf_buf *other_buf(tf_buf pair[2], tf_span s)
{
	const tf_buf *b = &pair[0];

	if (s.n && b->p && s.p >= b->p && s.p < b->p + b->cap)
		return &pair[1];
	return &pair[0];
}

static void stage_init(tf_stage *st, const tf_chunk_env *env, tf_workspace *ws, size_t limit)
{
	memset(st, 0, sizeof(*st));
	st->tile_type = env->type;
	st->cell_size = env->cell_size;
	st->version = env->version;
	st->key = env->key;
	st->scratch = ws->scratch;
	st->limit = limit;
}

tf_status tf_pipeline_decode(const tf_pipeline *p, const tf_chunk_env *env, tf_workspace *ws,
			     tf_span md, tf_span data, uint32_t orig_len, uint8_t *dst,
			     tf_buf *offsets, tf_error *err)
{
	tf_datatype type[TF_MAX_FILTERS];
	tf_stream s = { md, data, NULL, NULL };
	tf_buf final;
	tf_stage st;
	tf_status rc = TF_OK;

	if (orig_len > TF_MAX_CHUNK_BYTES)
		return tf_err(err, TF_E_CORRUPT, "chunk claims %u decoded bytes (limit %zu)",
			      orig_len, TF_MAX_CHUNK_BYTES);
	for (size_t i = 0; i < p->n; i++)
		type[i] = tf_pipeline_type_at(p, i, env->type);
	/* No honest stage is far larger than the chunk or its stored form. */
	stage_init(&st, env, ws, 4 * (size_t)orig_len + 2 * (md.n + data.n) + ((size_t)1 << 20));
	tf_buf_wrap(&final, dst, orig_len);
	for (size_t i = p->n; i-- > 0 && rc == TF_OK;) {
		const tf_filter *f = &p->f[i];

		st.type = type[i];
		st.cls = f->cls;
		st.var_string = env->var_string && i == 0;
		st.offsets = i == 0 ? offsets : NULL;
		s.md_out = other_buf(ws->md, s.md);
		s.data_out = i == 0 ? &final : other_buf(ws->data, s.data);
		rc = f->cls->decode(&f->o, &st, &s, err);
		if (rc != TF_OK)
			tf_err_prefix(err, "filter %zu (%s)", i, f->cls->name);
	}
	if (rc == TF_OK && s.md.n != 0)
		rc = tf_err(err, TF_E_CORRUPT, "%zu bytes of chunk metadata left unread", s.md.n);
	if (rc == TF_OK && s.data.n != orig_len)
		rc = tf_err(err, TF_E_CORRUPT, "chunk decodes to %zu bytes, header says %u",
			    s.data.n, orig_len);
	if (rc == TF_OK && s.data.p != dst && orig_len)
		memmove(dst, s.data.p, orig_len);
	workspace_trim(ws);
	return rc;
}

/* Lay out a finished chunk: u32 orig, u32 filtered, u32 md len, md, data. */
static tf_status emit_chunk(size_t orig, const tf_parts *md, const tf_parts *data, tf_buf *out,
			    tf_error *err)
{
	size_t md_len = tf_parts_total(md), data_len = tf_parts_total(data);
	tf_status rc;

	if (orig > UINT32_MAX || md_len > UINT32_MAX || data_len > UINT32_MAX)
		return tf_err(err, TF_E_INVAL, "chunk exceeds 4 GiB");
	if ((rc = tf_buf_put_u32(out, (uint32_t)orig, err)) != TF_OK ||
	    (rc = tf_buf_put_u32(out, (uint32_t)data_len, err)) != TF_OK ||
	    (rc = tf_buf_put_u32(out, (uint32_t)md_len, err)) != TF_OK)
		return rc;
	for (size_t i = 0; i < md->n; i++)
		if ((rc = tf_buf_append(out, md->v[i].p, md->v[i].len, err)) != TF_OK)
			return rc;
	for (size_t i = 0; i < data->n; i++)
		if ((rc = tf_buf_append(out, data->v[i].p, data->v[i].len, err)) != TF_OK)
			return rc;
	return TF_OK;
}

tf_status tf_pipeline_encode(const tf_pipeline *p, const tf_chunk_env *env, tf_workspace *ws,
			     tf_span in, const uint64_t *cell_offsets, size_t ncells,
			     tf_buf *out, tf_error *err)
{
	tf_parts md, data;
	tf_stage st;
	tf_status rc;

	tf_parts_init(&md);
	tf_parts_init(&data);
	stage_init(&st, env, ws, SIZE_MAX);
	rc = tf_parts_add_copy(&data, in.p, in.n, err);
	for (size_t i = 0; i < p->n && rc == TF_OK; i++) {
		const tf_filter *f = &p->f[i];

		st.type = tf_pipeline_type_at(p, i, env->type);
		st.cls = f->cls;
		st.var_string = env->var_string && i == 0;
		st.cell_offsets = i == 0 ? cell_offsets : NULL;
		st.ncells = i == 0 ? ncells : 0;
		rc = f->cls->encode ? f->cls->encode(&f->o, &st, &md, &data, err)
				    : tf_err(err, TF_E_UNSUPPORTED, "no encoder (decode-only plugin)");
		if (rc != TF_OK)
			tf_err_prefix(err, "filter %zu (%s)", i, f->cls->name);
	}
	if (rc == TF_OK)
		rc = emit_chunk(in.n, &md, &data, out, err);
	tf_parts_free(&md);
	tf_parts_free(&data);
	return rc;
}
