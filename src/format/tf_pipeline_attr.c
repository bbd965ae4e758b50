/*
 * tf_pipeline_attr.c - a pipeline as netCDF shows one: the _Filter
 * attribute (numeric ids, unsigned 32-bit parameters) and the _Codecs
 * attribute (NumCodecs-style JSON).  Contracts in tf_pipeline_attr.h;
 * _Filter is printed by the text form's printer (tf_pipeline_print);
 * encoding rules from seed 003 ("parameter encode/decode", "NCZarr filter
 * support").
 */
#include "format/tf_pipeline_attr.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "format/tf_pipeline_int.h"

#define MAX_WORDS (6 + TF_MAX_CD_VALUES)	/* scale float: three 8-byte values */

/* ---- _Filter ----------------------------------------------------------------------- */

/* The 8 bytes of v as two unsigned ints, the little-endian low half first
 * (the seed's rule for doubles and 64-bit integers). */
static size_t put64(uint32_t *w, uint64_t v)
{
	w[0] = (uint32_t)v;
	w[1] = (uint32_t)(v >> 32);
	return 2;
}

static uint64_t bits_of_double(double d)
{
	uint64_t b;

	memcpy(&b, &d, 8);
	return b;
}

/* A filter's parameters as unsigned ints, in the numeric text form's order. */
static size_t filter_words(const tf_filter *f, uint32_t w[MAX_WORDS])
{
	const tf_filter_opts *o = &f->o;
	size_t n = 0;

	switch (f->cls->layout) {
	case TF_OPTS_NONE:
		break;
	case TF_OPTS_REINTERPRET:
		w[n++] = (uint32_t)o->level;	/* two's complement pattern */
		w[n++] = (uint32_t)o->reinterpret;
		break;
	case TF_OPTS_COMPRESSOR:
		w[n++] = (uint32_t)o->level;
		break;
	case TF_OPTS_WINDOW:
		w[n++] = o->window;
		break;
	case TF_OPTS_SCALE_FLOAT:
		n += put64(w + n, bits_of_double(o->scale));
		n += put64(w + n, bits_of_double(o->offset));
		n += put64(w + n, o->byte_width);
		break;
	case TF_OPTS_WEBP:
		memcpy(&w[n++], &o->quality, 4);	/* a float's bits */
		w[n++] = o->webp_format;
		w[n++] = o->lossless;
		w[n++] = o->y_extent;
		w[n++] = o->x_extent;
		break;
	case TF_OPTS_CD_VALUES:
		for (uint32_t i = 0; i < o->ncd && i < TF_MAX_CD_VALUES; i++)
			w[n++] = o->cd[i];
		break;
	}
	return n;
}

/* One filter as _Filter shows it: its id, then ",param" per parameter. */
static size_t fmt_filter_words(char *buf, size_t n, const tf_filter *f)
{
	uint32_t w[MAX_WORDS];
	size_t nw = filter_words(f, w);
	size_t len = (size_t)snprintf(buf, n, "%u", f->cls->hdf5_id ? f->cls->hdf5_id : f->cls->id);

	for (size_t k = 0; k < nw; k++)
		len += (size_t)snprintf(buf + len, len < n ? n - len : 0, ",%u", w[k]);
	return len;
}

char *tf_pipeline_filter_attr(const tf_pipeline *p)
{
	return tf_pipeline_print(p, "|", 11 * (1 + MAX_WORDS), fmt_filter_words);
}

/* ---- _Codecs ------------------------------------------------------------------------ */

/* NumPy's type string of a datatype ("<i8", "|u1"), or NULL when unknown. */
static const char *numpy_dtype(tf_datatype t, char buf[16])
{
	unsigned size = tf_datatype_size(t);
	char kind = tf_datatype_is_real(t) ? 'f' : t == TF_DT_BOOL ? 'b' :
		    tf_datatype_is_signed(t) || tf_datatype_is_datetime(t) ? 'i' : 'u';

	if (t == TF_DT_ANY || size == 0)
		return NULL;
	snprintf(buf, 16, "%c%c%u", size == 1 ? '|' : '<', kind, size);
	return buf;
}

/* json_real refuses NaN and infinities (a corrupt schema may hold them). */
static json_t *real(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}

/* Every option of a class without a NumCodecs id, under its spec name. */
static void own_options(json_t *c, const tf_filter *f)
{
	const tf_filter_opts *o = &f->o;
	json_t *cd;

	switch (f->cls->layout) {
	case TF_OPTS_NONE:
		break;
	case TF_OPTS_REINTERPRET:	/* the level is ignored by these (§2.3) */
		if (o->reinterpret != TF_DT_ANY)
			json_object_set_new(c, "reinterpret", json_string(tf_datatype_name(o->reinterpret)));
		break;
	case TF_OPTS_COMPRESSOR:
		json_object_set_new(c, "level", json_integer(o->level));
		break;
	case TF_OPTS_WINDOW:
		json_object_set_new(c, "window", json_integer(o->window));
		break;
	case TF_OPTS_SCALE_FLOAT:
		json_object_set_new(c, "scale", real(o->scale));
		json_object_set_new(c, "offset", real(o->offset));
		json_object_set_new(c, "byte_width", json_integer((json_int_t)o->byte_width));
		break;
	case TF_OPTS_WEBP:
		json_object_set_new(c, "quality", real(o->quality));
		json_object_set_new(c, "format", json_integer(o->webp_format));
		json_object_set_new(c, "lossless", json_integer(o->lossless));
		json_object_set_new(c, "y_extent", json_integer(o->y_extent));
		json_object_set_new(c, "x_extent", json_integer(o->x_extent));
		break;
	case TF_OPTS_CD_VALUES:
		cd = json_array();
		for (uint32_t i = 0; i < o->ncd && i < TF_MAX_CD_VALUES; i++)
			json_array_append_new(cd, json_integer(o->cd[i]));
		json_object_set_new(c, "cd_values", cd);
		break;
	}
}

/* An HDF5 plugin stage: bz2 (307) and zstd (32015) have NumCodecs ids and
 * take the level as their first parameter; others show their cd_values. */
static json_t *hdf5_codec(const tf_filter *f)
{
	const tf_filter_opts *o = &f->o;
	char id[24];
	json_t *c;

	if (f->cls->hdf5_id == 307)
		return json_pack("{s:s, s:I}", "id", "bz2", "level", (json_int_t)(o->ncd ? o->cd[0] : 9));
	if (f->cls->hdf5_id == 32015 && o->ncd)
		return json_pack("{s:s, s:I}", "id", "zstd", "level", (json_int_t)(int32_t)o->cd[0]);
	snprintf(id, sizeof(id), "hdf5.%u", f->cls->hdf5_id);
	c = json_pack("{s:s}", "id", id);
	if (c)
		own_options(c, f);
	return c;
}

/* A class with a NumCodecs id, or NULL. */
static json_t *numcodecs(const tf_filter *f, tf_datatype t)
{
	tf_datatype dt = f->o.reinterpret != TF_DT_ANY ? f->o.reinterpret : t;
	unsigned es = t == TF_DT_ANY ? 0 : tf_datatype_size(t);
	char buf[16];
	const char *np;

	switch (f->cls->id) {
	case TF_F_GZIP:		/* a zlib stream (RFC 1950) per part */
		return json_pack("{s:s, s:i}", "id", "zlib", "level", f->o.level);
	case TF_F_ZSTD:
		return json_pack("{s:s, s:i}", "id", "zstd", "level", f->o.level);
	case TF_F_LZ4:		/* LZ4_compress_default: acceleration 1 */
		return json_pack("{s:s, s:i}", "id", "lz4", "acceleration", 1);
	case TF_F_BZIP2:	/* levels below 1 mean 1 */
		return json_pack("{s:s, s:i}", "id", "bz2", "level", f->o.level < 1 ? 1 : f->o.level);
	case TF_F_DELTA:
		np = numpy_dtype(dt, buf);
		return np ? json_pack("{s:s, s:s}", "id", "delta", "dtype", np) : json_pack("{s:s}", "id", "delta");
	case TF_F_BYTESHUFFLE:
	case TF_F_BITSHUFFLE:
		np = f->cls->id == TF_F_BYTESHUFFLE ? "shuffle" : "bitshuffle";
		return es ? json_pack("{s:s, s:i}", "id", np, "elementsize", (int)es) : json_pack("{s:s}", "id", np);
	default:
		return NULL;
	}
}

static json_t *codec_of(const tf_filter *f, tf_datatype t)
{
	char id[96];
	json_t *c;

	if (f->cls->hdf5_id)
		return hdf5_codec(f);
	if (tf_filter_by_id(f->cls->id) == f->cls && (c = numcodecs(f, t)))
		return c;
	snprintf(id, sizeof(id), "%s.%s", tf_filter_by_id(f->cls->id) == f->cls ? "tiledb" : "tilefs",
		 f->cls->name);
	if ((c = json_pack("{s:s}", "id", id)))
		own_options(c, f);
	return c;
}

char *tf_pipeline_codecs_json(const tf_pipeline *p, tf_datatype type)
{
	json_t *a = json_array();
	char *s = NULL;
	bool ok = a != NULL;

	for (size_t i = 0; ok && i < p->n; i++)
		ok = json_array_append_new(a, codec_of(&p->f[i], tf_pipeline_type_at(p, i, type))) == 0;
	if (ok)
		s = json_dumps(a, JSON_REAL_PRECISION(17));
	json_decref(a);
	return s;
}
