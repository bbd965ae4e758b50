/*
 * hdf5.c - an HDF5 filter plugin as a filter class (hdf5.h has the
 * contract: no metadata, data = the plugin's output, buffer ownership).
 */
#include "hdf5.h"

#include "callout.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

/* cd_values are handed to the plugin as they are stored. */
_Static_assert(sizeof(unsigned int) == sizeof(uint32_t), "cd_values are unsigned int");

struct tf_hdf5_filter {
	tf_filter_class cls;		/* cls.impl points back here */
	const tf_h5z_class2 *h5;	/* in the plugin's memory */
	tf_callout *callout;		/* one thread: calls into the plugin one at a time */
	char name[16];			/* "hdf5:ID" */
};

/* One call of the plugin's filter function: everything it touches is the
 * job's own, since a stopped caller leaves it behind (callout.h). */
typedef struct h5_call {
	tf_h5z_func_t filter;
	unsigned flags;
	size_t ncd;
	unsigned cd[TF_MAX_CD_VALUES];
	size_t nbytes, buf_size, got;
	void *buf;			/* malloc'd: ours before and after the call */
} h5_call;

static void h5_run(void *job)
{
	h5_call *k = job;

	k->got = k->filter(k->flags, k->ncd, k->cd, k->nbytes, &k->buf_size, &k->buf);
}

static void h5_drop(void *job)
{
	h5_call *k = job;

	free(k->buf);	/* success or failure, *buf is still ours, whatever it points to */
	free(k);
}

/*
 * Run the plugin over n bytes at src (flags: 0 forward, TF_H5Z_FLAG_REVERSE
 * back), on the filter's callout thread.  On success *out is a malloc'd
 * buffer the caller frees, holding *got bytes.
 */
static tf_status run(tf_hdf5_filter *h, const tf_filter_opts *o, unsigned flags,
		     tf_span src, void **out, size_t *got, tf_error *err)
{
	h5_call *k = calloc(1, sizeof(*k));
	size_t room;
	tf_status rc;

	if (!k || !(k->buf = malloc(src.n))) {	/* the plugin's to free or keep */
		free(k);
		return tf_err(err, TF_E_NOMEM, "cannot allocate %zu bytes", src.n);
	}
	memcpy(k->buf, src.p, src.n);
	k->filter = h->h5->filter;
	k->flags = flags;
	k->ncd = o->ncd <= TF_MAX_CD_VALUES ? o->ncd : TF_MAX_CD_VALUES;
	memcpy(k->cd, o->cd, k->ncd * sizeof(*k->cd));
	k->nbytes = k->buf_size = src.n;
	if ((rc = tf_callout_run(h->callout, h5_run, h5_drop, k, err)) != TF_OK)
		return rc;	/* (k is the callout's now) */
	if (k->got == 0 || !k->buf) {
		h5_drop(k);
		return tf_err(err, TF_E_CORRUPT, "the HDF5 plugin's filter failed (%s %zu bytes)",
			      flags ? "decoding" : "encoding", src.n);
	}
	/* What it says it wrote must lie inside the buffer it hands back.
	 * Its *buf_size cannot tell (Debian's libh5lz4.so leaves it stale, and
	 * HDF5 never reads it back); malloc can, since the buffer is malloc's
	 * either way: we free() it. */
	room = malloc_usable_size(k->buf);
	if (k->got > room) {
		rc = tf_err(err, TF_E_CORRUPT, "the HDF5 plugin returned %zu bytes in a buffer of %zu "
			    "(%s %zu bytes)", k->got, room, flags ? "decoding" : "encoding", src.n);
		h5_drop(k);
		return rc;
	}
	*out = k->buf;
	*got = k->got;
	free(k);
	return TF_OK;
}

static tf_status decode(const tf_filter_opts *o, const tf_stage *st, tf_stream *s, tf_error *err)
{
	tf_hdf5_filter *h = (tf_hdf5_filter *)st->cls->impl;	/* ours: never changed */
	void *buf = NULL;
	size_t got = 0;
	tf_status rc;

	if (s->data.n && (rc = run(h, o, TF_H5Z_FLAG_REVERSE, s->data, &buf, &got, err)) != TF_OK)
		return rc;	/* (empty data: encode left it alone) */
	/* Bounded before a byte is copied: a growable data_out by the stage's
	 * limit; the first stage's, fixed, by the chunk's original length. */
	rc = tf_stage_output(st, s->data_out, got, err);
	if (rc == TF_OK && got) {
		memcpy(s->data_out->p, buf, got);
		s->data_out->len = got;
	}
	free(buf);
	if (rc == TF_OK)
		s->data = tf_span_of(s->data_out->p, s->data_out->len);
	return rc;
}

/* The data parts joined, as the one input the plugin sees. */
static tf_status join(const tf_parts *data, tf_buf *all, tf_error *err)
{
	tf_status rc = TF_OK;

	for (size_t i = 0; i < data->n && rc == TF_OK; i++)
		rc = tf_buf_append(all, data->v[i].p, data->v[i].len, err);
	return rc;
}

static tf_status encode(const tf_filter_opts *o, const tf_stage *st, tf_parts *md, tf_parts *data,
			tf_error *err)
{
	tf_hdf5_filter *h = (tf_hdf5_filter *)st->cls->impl;
	tf_buf all = TF_BUF_INIT(SIZE_MAX);
	tf_parts out;
	tf_buf *part;
	void *buf = NULL;
	size_t got;
	tf_status rc;

	(void)md;	/* metadata passes through */
	if (!h->h5->encoder_present)
		return tf_err(err, TF_E_UNSUPPORTED, "the HDF5 plugin has no encoder");
	if (tf_parts_total(data) == 0)
		return TF_OK;
	tf_parts_init(&out);
	if ((rc = join(data, &all, err)) == TF_OK &&
	    (rc = run(h, o, 0, tf_span_of(all.p, all.len), &buf, &got, err)) == TF_OK &&
	    (rc = tf_parts_add(&out, &part, err)) == TF_OK)
		rc = tf_buf_append(part, buf, got, err);
	if (rc == TF_OK) {
		tf_parts_free(data);
		*data = out;
	} else {
		tf_parts_free(&out);
	}
	free(buf);
	tf_buf_free(&all);
	return rc;
}

static tf_status check_class(const tf_h5z_class2 *c, tf_error *err)
{
	if (!c)
		return tf_err(err, TF_E_INVAL, "H5PLget_plugin_info() returned NULL");
	if (c->version != TF_H5Z_CLASS_T_VERS)
		return tf_err(err, TF_E_INVAL, "not an H5Z_class2_t (version %d)", c->version);
	if (c->id < 256 || c->id > TF_H5Z_FILTER_MAX)	/* 0-255 are libhdf5's own */
		return tf_err(err, TF_E_INVAL, "filter id %d is not a plugin id (256-%d)", c->id,
			      TF_H5Z_FILTER_MAX);
	if (!c->decoder_present || !c->filter)
		return tf_err(err, TF_E_INVAL, "filter %d has no decoder", c->id);
	return TF_OK;
}

tf_status tf_hdf5_filter_new(tf_h5pl_type_fn type, tf_h5pl_info_fn info, tf_hdf5_filter **out,
			     tf_error *err)
{
	const tf_h5z_class2 *c;
	tf_hdf5_filter *h;
	int t = type();
	tf_status rc;

	if (t != TF_H5PL_TYPE_FILTER)
		return tf_err(err, TF_E_INVAL, "H5PLget_plugin_type() is %d, not a filter (0)", t);
	c = info();
	if ((rc = check_class(c, err)) != TF_OK)
		return rc;
	if (!(h = calloc(1, sizeof(*h))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if ((rc = tf_callout_new(1, &h->callout, err)) != TF_OK) {
		free(h);
		return rc;
	}
	h->h5 = c;
	snprintf(h->name, sizeof(h->name), "hdf5:%d", c->id);
	h->cls = (tf_filter_class){
		.id = TF_F_NO_ID, .name = h->name, .layout = TF_OPTS_CD_VALUES,
		.decode = decode, .encode = encode, .hdf5_id = (uint32_t)c->id, .impl = h,
	};
	*out = h;
	return TF_OK;
}

void tf_hdf5_filter_stop(tf_hdf5_filter *h)
{
	tf_callout_stop(h->callout);
}

bool tf_hdf5_filter_free(tf_hdf5_filter *h)
{
	bool idle;

	if (!h)
		return true;
	idle = tf_callout_free(h->callout);	/* a call left inside uses its copies only */
	free(h);
	return idle;
}

const tf_filter_class *tf_hdf5_filter_class(const tf_hdf5_filter *h)
{
	return &h->cls;
}
