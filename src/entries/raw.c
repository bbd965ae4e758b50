/*
 * raw.c - what is shown as stored: a file no rule or array decodes, a
 * symlink, a FIFO or socket (the kernel, not the daemon, opens those).  A
 * reader keeps the stored file open as the entry's version: a rewrite
 * gives its reader the old bytes or an error, never a mix.
 */
#include "config.h"

#include "entry_int.h"

#include <stdlib.h>

typedef struct raw_reader {
	tf_entry_reader r;
	tf_object *o;
} raw_reader;

static void raw_attr(tf_entry *e, tf_shown *out)
{
	pthread_mutex_lock(&e->set->lock);
	out->st = e->st;
	pthread_mutex_unlock(&e->set->lock);
}

static tf_status raw_pin(tf_entry_reader *r, tf_pin_scratch *s, uint64_t off, size_t len, const tf_cancel *cancel,
			 tf_error *err)
{
	tf_object *o = ((raw_reader *)r)->o;
	uint64_t size = tf_object_stat(o)->v.size;
	tf_status rc;

	(void)cancel;
	if (off >= size)
		len = 0;
	else if (len > size - off)
		len = (size_t)(size - off);
	if (!tf_pin_scratch_grow(s, len))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if ((rc = tf_object_read(o, off, s->buf, len, err)) != TF_OK)
		return rc;
	tf_pin_scratch_one_slice(s, len);
	return TF_OK;
}


static void raw_close(tf_entry_reader *r)
{
	tf_object_close(((raw_reader *)r)->o);
	free(r);
}

static const tf_entry_reader_ops raw_reader_ops = { raw_pin, raw_close };

static tf_status raw_open(tf_entry *e, tf_pin_scratch *s, const tf_cancel *cancel, unsigned flags, tf_entry_reader **out,
			  tf_open_how *how, tf_error *err)
{
	raw_reader *r;
	tf_status rc;

	(void)s, (void)cancel, (void)flags, (void)how;
	if (e->kind != TF_ENT_REG)
		return tf_err(err, TF_E_INVAL, "%s: not a file", e->rel);
	if (!(r = calloc(1, sizeof(*r))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if ((rc = tf_object_open(e->set->src, e->rel, &e->st.v, &r->o, err)) != TF_OK) {
		free(r);
		return rc;
	}
	r->r = (tf_entry_reader){ &raw_reader_ops, tf_entry_ref(e) };
	*out = &r->r;
	return TF_OK;
}

static void raw_free(tf_entry *e)
{
	(void)e;
}

const tf_entry_ops tf_raw_entry_ops = {
	.name = "stored",
	.attr = raw_attr,
	.open = raw_open,
	.free = raw_free,
};
