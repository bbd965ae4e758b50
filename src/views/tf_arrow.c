/*
 * tf_arrow.c - an Arrow IPC file writer: flatbuffers written front to
 * back, every offset pointing forward; here the flatbuffers, the schema,
 * and the file's head and tail (record batches: tf_arrow_batch.c).
 */
#include "config.h"

#include "views/tf_arrow_int.h"

#include <stdlib.h>
#include <string.h>

static const uint8_t MAGIC[8] = { 'A', 'R', 'R', 'O', 'W', '1', 0, 0 };

/* ---- flatbuffers, front to back -------------------------------------------------------------- */

static uint8_t *fb_room(fb *f, size_t n)
{
	uint8_t *at = NULL;

	if (f->rc == TF_OK && (f->rc = tf_buf_grow(&f->b, n, &at, f->err)) == TF_OK) {
		memset(at, 0, n);
		f->b.len += n;
		return at;
	}
	return NULL;
}

static void fb_pad(fb *f, size_t align)
{
	if (f->b.len % align)
		fb_room(f, align - f->b.len % align);
}

static void fb_u16(fb *f, uint16_t v)
{
	uint8_t *p = fb_room(f, 2);
	if (p)
		tf_put_le16(p, v);
}

static void fb_u32(fb *f, uint32_t v)
{
	uint8_t *p = fb_room(f, 4);
	if (p)
		tf_put_le32(p, v);
}

void fb_u64(fb *f, uint64_t v)
{
	uint8_t *p = fb_room(f, 8);
	if (p)
		tf_put_le64(p, v);
}

/* The offset field at `at` points to `to` (later in the buffer). */
void fb_link(fb *f, size_t at, size_t to)
{
	if (f->rc == TF_OK)
		tf_put_le32(f->b.p + at, (uint32_t)(to - at));
}

/* Write a table's vtable, then the table (fields largest first, each
 * aligned to its size); returns where the table starts. */
size_t fb_table(fb *f, fbf *fl, size_t n)
{
	size_t off[16], pos = 4, vt, t;
	unsigned maxid = 0, talign = 4;

	for (unsigned size = 8; size >= 1; size /= 2)
		for (size_t i = 0; i < n; i++) {
			unsigned s = fl[i].size == REF ? 4 : fl[i].size;
			if (s != size)
				continue;
			pos = (pos + s - 1) / s * s;
			off[i] = pos;
			pos += s;
			if (s == 8)
				talign = 8;
		}
	for (size_t i = 0; i < n; i++)
		maxid = fl[i].id > maxid ? fl[i].id : maxid;
	fb_pad(f, 2);
	vt = f->b.len;
	fb_u16(f, (uint16_t)(4 + 2 * (maxid + 1)));
	fb_u16(f, (uint16_t)pos);
	for (unsigned id = 0; id <= maxid; id++) {
		uint16_t o = 0;
		for (size_t i = 0; i < n; i++)
			if (fl[i].id == id)
				o = (uint16_t)off[i];
		fb_u16(f, o);
	}
	fb_pad(f, talign);
	t = f->b.len;
	fb_room(f, pos);
	if (f->rc != TF_OK)
		return 0;
	tf_put_le32(f->b.p + t, (uint32_t)(t - vt));	/* soffset: the vtable lies before */
	for (size_t i = 0; i < n; i++) {
		uint8_t *p = f->b.p + t + off[i];
		fl[i].at = t + off[i];
		switch (fl[i].size) {
		case 1: *p = (uint8_t)fl[i].v; break;
		case 2: tf_put_le16(p, (uint16_t)fl[i].v); break;
		case 4: tf_put_le32(p, (uint32_t)fl[i].v); break;
		case 8: tf_put_le64(p, fl[i].v); break;
		default: break;	/* REF: linked later */
		}
	}
	return t;
}

static size_t fb_string(fb *f, const char *s)
{
	size_t n = strlen(s), at;
	uint8_t *p;

	fb_pad(f, 4);
	at = f->b.len;
	fb_u32(f, (uint32_t)n);
	if ((p = fb_room(f, n + 1)))
		memcpy(p, s, n);
	return at;
}

/* A vector's length, its elements (of `align`) to follow; returns where
 * the vector starts. */
size_t fb_vector(fb *f, size_t n, size_t align)
{
	size_t at;

	fb_pad(f, 4);
	while (f->rc == TF_OK && (f->b.len + 4) % align)
		fb_room(f, 4);
	at = f->b.len;
	fb_u32(f, (uint32_t)n);
	return at;
}

/* ---- the schema ---------------------------------------------------------------------------- */

static bool is_text(tf_datatype t)
{
	return t == TF_DT_CHAR || t == TF_DT_STRING_ASCII || t == TF_DT_STRING_UTF8 || t == TF_DT_GEOM_WKT ||
	       t == TF_DT_STRING_UTF16 || t == TF_DT_STRING_UTF32 || t == TF_DT_STRING_UCS2 ||
	       t == TF_DT_STRING_UCS4;
}

static int timestamp_unit(tf_datatype t)
{
	/* DATETIME_YEAR + 6 is DATETIME_SEC, then MS, US, NS (TileDB's ids) */
	int k = (int)t - (int)TF_DT_DATETIME_YEAR - 6;

	return k >= 0 && k <= 3 ? k : -1;
}

static tf_status col_init(acol *c, const tf_arrow_col *in, tf_error *err)
{
	unsigned size = tf_datatype_size(in->type);

	if (!(c->name = strdup(in->name)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	c->type = in->type;
	c->nullable = in->nullable;
	c->width = size;
	if (is_text(in->type) || in->type == TF_DT_BLOB || in->type == TF_DT_GEOM_WKB || in->type == TF_DT_ANY) {
		c->kind = K_BYTES;
		c->arrow = is_text(in->type) ? T_UTF8 : T_BINARY;
		c->wide = in->type == TF_DT_STRING_UTF16 || in->type == TF_DT_STRING_UCS2   ? 2
			: in->type == TF_DT_STRING_UTF32 || in->type == TF_DT_STRING_UCS4 ? 4 : 0;
		return TF_OK;
	}
	if (size != 1 && size != 2 && size != 4 && size != 8)
		return tf_err(err, TF_E_UNSUPPORTED, "%s: type %s has no Arrow form", in->name,
			      tf_datatype_name(in->type));
	c->kind = in->type == TF_DT_BOOL ? K_BOOL : K_FIXED;
	c->arrow = in->type == TF_DT_BOOL ? T_BOOL : tf_datatype_is_real(in->type) ? T_FLOAT
		 : timestamp_unit(in->type) >= 0 ? T_TIMESTAMP : T_INT;
	c->list = in->cell_val_num == TF_CELL_VAR;
	c->fixed = in->cell_val_num != TF_CELL_VAR && in->cell_val_num > 1 ? in->cell_val_num : 0;
	if (c->fixed > INT32_MAX)
		return tf_err(err, TF_E_UNSUPPORTED, "%s: %u values a cell", in->name, in->cell_val_num);
	return TF_OK;
}

void tf_arrow_free(tf_arrow *a)
{
	for (size_t i = 0; a && i < a->ncols; i++)
		free(a->cols[i].name);
	if (a)
		free(a->cols);
	free(a);
}

tf_status tf_arrow_new(const tf_arrow_col *cols, size_t ncols, const tf_arrow_limits *lim, tf_arrow **out,
		       tf_error *err)
{
	tf_arrow *a = calloc(1, sizeof(*a));
	tf_status rc = TF_OK;

	if (!a || !(a->cols = calloc(ncols + 1, sizeof(*a->cols)))) {
		free(a);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	a->lim = lim ? *lim : (tf_arrow_limits){ TF_ARROW_CELLS, TF_ARROW_BYTES, TF_ARROW_VAR_MAX };
	if (!a->lim.max_cells)
		a->lim.max_cells = 1;
	if (!a->lim.max_var || a->lim.max_var > TF_ARROW_VAR_MAX)
		a->lim.max_var = TF_ARROW_VAR_MAX;
	for (; a->ncols < ncols && rc == TF_OK; a->ncols++) {
		rc = col_init(&a->cols[a->ncols], &cols[a->ncols], err);
		a->var |= a->cols[a->ncols].kind == K_BYTES || a->cols[a->ncols].list;
	}
	a->spans = true;
	for (size_t i = 0; i < a->ncols; i++) {
		const acol *c = &a->cols[i];
		a->spans &= (c->kind == K_FIXED && !c->list) || (c->kind == K_BYTES && !c->wide);
	}
	if (rc != TF_OK) {
		tf_arrow_free(a);
		return rc;
	}
	*out = a;
	return TF_OK;
}

/* The type table of an Arrow type; returns its start. */
static size_t write_type(fb *f, const acol *c, uint8_t t, size_t *tz)
{
	fbf fl[2];
	size_t n = 0;

	*tz = 0;
	switch (t) {
	case T_INT:
		fl[n++] = (fbf){ 0, 4, 8 * c->width, 0 };
		fl[n++] = (fbf){ 1, 1, tf_datatype_is_signed(c->type) || tf_datatype_is_datetime(c->type), 0 };
		break;
	case T_FLOAT:
		fl[n++] = (fbf){ 0, 2, c->width == 4 ? 1 : 2, 0 };
		break;
	case T_TIMESTAMP:
		fl[n++] = (fbf){ 0, 2, (uint64_t)timestamp_unit(c->type), 0 };
		fl[n++] = (fbf){ 1, REF, 0, 0 };
		break;
	case T_FIXED_LIST:
		fl[n++] = (fbf){ 0, 4, c->fixed, 0 };
		break;
	default:	/* Utf8, Binary, Bool, List: empty tables */
		break;
	}
	size_t at = fb_table(f, fl, n);
	if (t == T_TIMESTAMP)
		*tz = fl[1].at;
	return at;
}

/*
 * A Field table and what it points to: name, type, children (a list's
 * "item"), custom metadata.  nested: the values of a list column.
 */
static size_t write_field(fb *f, const acol *c, bool nested)
{
	uint8_t t = nested ? c->arrow : c->list ? T_LIST : c->fixed ? T_FIXED_LIST : c->arrow;
	bool kids = !nested && (c->list || c->fixed);
	fbf fl[] = { { 0, REF, 0, 0 }, { 1, 1, !nested && c->nullable, 0 }, { 2, 1, t, 0 }, { 3, REF, 0, 0 },
		     { 5, REF, 0, 0 }, { 6, REF, 0, 0 } };
	size_t at = fb_table(f, fl, nested ? 5 : 6), tz, v, slot, kv;

	fb_link(f, fl[0].at, fb_string(f, nested ? "item" : c->name));
	fb_link(f, fl[3].at, write_type(f, c, t, &tz));
	if (tz)
		fb_link(f, tz, fb_string(f, "UTC"));
	v = fb_vector(f, kids, 4);
	fb_link(f, fl[4].at, v);
	if (kids) {
		slot = f->b.len;
		fb_u32(f, 0);
		fb_link(f, slot, write_field(f, c, true));
	}
	if (!nested) {	/* [KeyValue]: the TileDB type */
		fbf kvf[] = { { 0, REF, 0, 0 }, { 1, REF, 0, 0 } };
		v = fb_vector(f, 1, 4);
		fb_link(f, fl[5].at, v);
		slot = f->b.len;
		fb_u32(f, 0);
		kv = fb_table(f, kvf, 2);
		fb_link(f, slot, kv);
		fb_link(f, kvf[0].at, fb_string(f, "tiledb.datatype"));
		fb_link(f, kvf[1].at, fb_string(f, tf_datatype_name(c->type)));
	}
	return at;
}

static size_t write_schema(fb *f, const tf_arrow *a)
{
	fbf fl[] = { { 0, 2, 0, 0 }, { 1, REF, 0, 0 } };	/* endianness Little, fields */
	size_t at = fb_table(f, fl, 2), v = fb_vector(f, a->ncols, 4), slots = f->b.len;

	fb_link(f, fl[1].at, v);
	fb_room(f, 4 * a->ncols);
	for (size_t i = 0; i < a->ncols; i++)
		fb_link(f, slots + 4 * i, write_field(f, &a->cols[i], false));
	return at;
}

/* The Message table, its header to be linked by the caller (*hdr). */
void fb_message(fb *f, uint8_t type, uint64_t body, size_t *hdr)
{
	fbf fl[] = { { 0, 2, V5, 0 }, { 1, 1, type, 0 }, { 2, REF, 0, 0 }, { 3, 8, body, 0 } };
	size_t root;

	fb_u32(f, 0);
	root = fb_table(f, fl, 4);
	fb_link(f, 0, root);
	*hdr = fl[2].at;
}

/* Frame a message: continuation, metadata length, metadata padded to 8. */
tf_status fb_frame(fb *f, tf_buf *out, tf_error *err)
{
	size_t pad = (8 - f->b.len % 8) % 8;
	tf_status rc = f->rc;

	if (rc == TF_OK && f->b.len + pad > INT32_MAX)
		rc = tf_err(err, TF_E_UNSUPPORTED, "Arrow metadata of %zu bytes", f->b.len);
	if (rc == TF_OK && (rc = tf_buf_put_u32(out, 0xFFFFFFFFu, err)) == TF_OK &&
	    (rc = tf_buf_put_u32(out, (uint32_t)(f->b.len + pad), err)) == TF_OK &&
	    (rc = tf_buf_append(out, f->b.p, f->b.len, err)) == TF_OK)
		rc = tf_buf_append(out, "\0\0\0\0\0\0\0", pad, err);
	return rc;
}

tf_status tf_arrow_file_head(const tf_arrow *a, tf_buf *out, tf_error *err)
{
	fb f = { TF_BUF_INIT((size_t)1 << 30), TF_OK, err };
	size_t hdr;
	tf_status rc;

	fb_message(&f, MSG_SCHEMA, 0, &hdr);
	fb_link(&f, hdr, write_schema(&f, a));
	if ((rc = tf_buf_append(out, MAGIC, sizeof(MAGIC), err)) == TF_OK)
		rc = fb_frame(&f, out, err);
	tf_buf_free(&f.b);
	return rc;
}

tf_status tf_arrow_file_tail(const tf_arrow *a, const tf_arrow_block *blocks, size_t n, tf_buf *out,
			     tf_error *err)
{
	fb f = { TF_BUF_INIT((size_t)1 << 31), TF_OK, err };
	fbf fl[] = { { 0, 2, V5, 0 }, { 1, REF, 0, 0 }, { 2, REF, 0, 0 }, { 3, REF, 0, 0 } };
	size_t root;
	tf_status rc;

	fb_u32(&f, 0);
	root = fb_table(&f, fl, 4);
	fb_link(&f, 0, root);
	fb_link(&f, fl[1].at, write_schema(&f, a));
	fb_link(&f, fl[2].at, fb_vector(&f, 0, 8));
	fb_link(&f, fl[3].at, fb_vector(&f, n, 8));
	for (size_t i = 0; i < n && f.rc == TF_OK; i++) {
		uint8_t *p = fb_room(&f, 24);
		if (p) {
			tf_put_le64(p, blocks[i].offset);
			tf_put_le32(p + 8, blocks[i].meta);
			tf_put_le64(p + 16, blocks[i].body);
		}
	}
	rc = f.rc;
	if (rc == TF_OK && f.b.len > INT32_MAX)
		rc = tf_err(err, TF_E_UNSUPPORTED, "an Arrow footer of %zu bytes", f.b.len);
	/* End of stream (continuation, length 0), then the footer. */
	if (rc == TF_OK && (rc = tf_buf_put_u64(out, 0xFFFFFFFFu, err)) == TF_OK &&
	    (rc = tf_buf_append(out, f.b.p, f.b.len, err)) == TF_OK &&
	    (rc = tf_buf_put_u32(out, (uint32_t)f.b.len, err)) == TF_OK)
		rc = tf_buf_append(out, MAGIC, 6, err);
	tf_buf_free(&f.b);
	return rc;
}
