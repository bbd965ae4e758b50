/*
 * bytexor.c - a sample tilefs filter plugin (doc/plugins.md): every data
 * byte XORed with a key byte.  No metadata, the length is kept.
 *
 *     filters = bytexor(90) | zstd        by name, key 90
 *     filters = 200,90 | 2                by id (200), netCDF style
 *
 * Build (make check builds it into contrib/plugins/bytexor.so):
 *     cc -shared -fPIC -I SRC/src -o bytexor.so bytexor.c
 * and put the .so in a directory of plugin_path.
 *
 * A plugin sees only what tf_filter.h describes and calls tilefs only
 * through the tf_plugin_host it is handed: it links nothing of tilefs.
 */
#include "filters/plugin.h"

#define BYTEXOR_ID 200		/* no TileDB filter has it */
#define DEFAULT_KEY 0xA5

static const tf_plugin_host *host;	/* set once, when tilefs loads us */

static uint8_t key_of(const tf_filter_opts *o)
{
	return o->ncd ? (uint8_t)o->cd[0] : DEFAULT_KEY;
}

/* Options come as HDF5-style parameters (layout TF_OPTS_CD_VALUES). */
static tf_status check(const tf_filter_opts *o, tf_error *err)
{
	if (o->ncd > 1 || (o->ncd == 1 && o->cd[0] > 255))
		return host->err(err, TF_E_INVAL, "takes one parameter, a key byte (0-255)");
	return TF_OK;
}

/* Decode: new data (the same length) in data_out, metadata untouched. */
static tf_status decode(const tf_filter_opts *o, const tf_stage *st, tf_stream *s, tf_error *err)
{
	uint8_t k = key_of(o);
	tf_status rc = host->stage_output(st, s->data_out, s->data.n, err);

	if (rc != TF_OK)
		return rc;
	for (size_t i = 0; i < s->data.n; i++)
		s->data_out->p[i] = s->data.p[i] ^ k;
	s->data_out->len = s->data.n;
	s->data = tf_span_of(s->data_out->p, s->data_out->len);
	return TF_OK;
}

/* Encode: each data part in place; metadata parts pass through. */
static tf_status encode(const tf_filter_opts *o, const tf_stage *st, tf_parts *md, tf_parts *data,
			tf_error *err)
{
	uint8_t k = key_of(o);

	(void)st, (void)md;
	if (check(o, err) != TF_OK)	/* pipelines from files are not checked */
		return TF_E_INVAL;
	for (size_t i = 0; i < data->n; i++)
		for (size_t j = 0; j < data->v[i].len; j++)
			data->v[i].p[j] ^= k;
	return TF_OK;
}

static const tf_filter_class bytexor = {
	.id = BYTEXOR_ID,
	.name = "bytexor",
	.layout = TF_OPTS_CD_VALUES,
	.check = check,
	.decode = decode,
	.encode = encode,
};

const tf_plugin_info *tilefs_filter_plugin(const tf_plugin_host *h)
{
	static const tf_plugin_info info = { TF_PLUGIN_ABI, &bytexor };

	if (h->abi != TF_PLUGIN_ABI)
		return NULL;
	host = h;
	return &info;
}
