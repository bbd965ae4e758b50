/* tf_filter.c - the filter registry and helpers shared by filter files. */
#include "filters/tf_filter.h"

#include <stdlib.h>
#include <strings.h>

static const tf_filter_class *const registry[] = {
	&tf_filter_none, &tf_filter_gzip, &tf_filter_zstd, &tf_filter_lz4,
	&tf_filter_rle, &tf_filter_bzip2, &tf_filter_double_delta,
	&tf_filter_bit_width_reduction, &tf_filter_bitshuffle,
	&tf_filter_byteshuffle, &tf_filter_positive_delta,
	&tf_filter_aes_256_gcm, &tf_filter_checksum_md5,
	&tf_filter_checksum_sha256, &tf_filter_dictionary,
	&tf_filter_scale_float, &tf_filter_xor, &tf_filter_webp, &tf_filter_delta,
};
#define NCLASSES (sizeof(registry) / sizeof(registry[0]))

const tf_filter_class *tf_filter_by_id(unsigned id)
{
	for (size_t i = 0; i < NCLASSES; i++)
		if (registry[i]->id == id)
			return registry[i];
	return NULL;
}

static bool name_is(const char *want, const char *name, size_t len)
{
	return want && strlen(want) == len && strncasecmp(want, name, len) == 0;
}

const tf_filter_class *tf_filter_by_name(const char *name, size_t len)
{
	for (size_t i = 0; i < NCLASSES; i++)
		if (name_is(registry[i]->name, name, len) || name_is(registry[i]->alias, name, len))
			return registry[i];
	return NULL;
}

void tf_filter_opts_default(const tf_filter_class *c, tf_filter_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->level = -1;			/* FilterCreate::make's default level */
	o->reinterpret = TF_DT_ANY;	/* "no reinterpretation" */
	o->window = c->id == TF_F_POSITIVE_DELTA ? 1024 : 256;
	o->scale = 1.0;
	o->offset = 0.0;
	o->byte_width = 8;
	o->quality = 100.0f;
}

tf_status tf_stage_output(const tf_stage *st, tf_buf *out, size_t n, tf_error *err)
{
	out->len = 0;
	if (!out->fixed && out->limit > st->limit)
		out->limit = st->limit;
	return tf_buf_reserve(out, n, err);
}

/* ---- parts ------------------------------------------------------------------ */

void tf_parts_init(tf_parts *p)
{
	p->v = NULL;
	p->n = p->cap = 0;
}

void tf_parts_free(tf_parts *p)
{
	for (size_t i = 0; i < p->n; i++)
		tf_buf_free(&p->v[i]);
	free(p->v);
	tf_parts_init(p);
}

static tf_status parts_room(tf_parts *p, tf_error *err)
{
	size_t cap;
	tf_buf *v;

	if (p->n < p->cap)
		return TF_OK;
	cap = p->cap ? p->cap * 2 : 4;
	v = realloc(p->v, cap * sizeof(*v));
	if (!v)
		return tf_err(err, TF_E_NOMEM, "cannot allocate part list");
	p->v = v;
	p->cap = cap;
	return TF_OK;
}

tf_status tf_parts_add(tf_parts *p, tf_buf **part, tf_error *err)
{
	tf_status st = parts_room(p, err);

	if (st != TF_OK)
		return st;
	*part = &p->v[p->n++];
	tf_buf_init(*part, SIZE_MAX);
	return TF_OK;
}

tf_status tf_parts_add_copy(tf_parts *p, const void *src, size_t n, tf_error *err)
{
	tf_buf *b;
	tf_status st = tf_parts_add(p, &b, err);

	return st != TF_OK ? st : tf_buf_append(b, src, n, err);
}

tf_status tf_parts_move(tf_parts *dst, tf_parts *src, tf_error *err)
{
	for (size_t i = 0; i < src->n; i++) {
		tf_status st = parts_room(dst, err);
		if (st != TF_OK)
			return st;
		dst->v[dst->n++] = src->v[i];
		tf_buf_init(&src->v[i], 0);
	}
	src->n = 0;
	return TF_OK;
}

size_t tf_parts_total(const tf_parts *p)
{
	size_t t = 0;
	for (size_t i = 0; i < p->n; i++)
		t += p->v[i].len;
	return t;
}

tf_status tf_parts_prepend(tf_parts *p, tf_buf *part, tf_error *err)
{
	tf_status st = parts_room(p, err);

	if (st != TF_OK)
		return st;
	memmove(p->v + 1, p->v, p->n * sizeof(*p->v));
	p->v[0] = *part;
	p->n++;
	tf_buf_init(part, 0);
	return TF_OK;
}

/* ---- per-thread codec contexts ------------------------------------------------ */

struct tf_scratch {
	void *slot[TF_SLOT_COUNT];
	void (*destroy[TF_SLOT_COUNT])(void *);
};

tf_scratch *tf_scratch_new(void)
{
	return calloc(1, sizeof(tf_scratch));
}

void tf_scratch_free(tf_scratch *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < TF_SLOT_COUNT; i++)
		if (s->slot[i])
			s->destroy[i](s->slot[i]);
	free(s);
}

void *tf_scratch_get(tf_scratch *s, unsigned slot, void *(*create)(void), void (*destroy)(void *))
{
	if (!s || slot >= TF_SLOT_COUNT)
		return NULL;
	if (!s->slot[slot]) {
		s->slot[slot] = create();
		s->destroy[slot] = destroy;
	}
	return s->slot[slot];
}
