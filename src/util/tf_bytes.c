/* tf_bytes.c - bounds-checked reader and bounded buffers. */
#include "util/tf_bytes.h"

#include <stdlib.h>
#include <string.h>

static tf_status short_read(tf_reader *r, size_t need, const char *what, tf_error *err)
{
	return tf_err(err, TF_E_CORRUPT, "truncated %s: need %zu bytes at offset %zu, %zu left",
		      what, need, r->pos, r->n);
}

/* The next `need` bytes, consumed; NULL (reader unchanged) if fewer remain. */
static const uint8_t *take(tf_reader *r, size_t need)
{
	const uint8_t *at = r->p;

	if (r->n < need)
		return NULL;
	r->p += need;
	r->n -= need;
	r->pos += need;
	return at;
}

tf_status tf_get_u8(tf_reader *r, uint8_t *v, const char *what, tf_error *err)
{
	const uint8_t *p = take(r, 1);

	if (!p)
		return short_read(r, 1, what, err);
	*v = p[0];
	return TF_OK;
}

/* The next n (4 or 8) bytes, little-endian, as the bits of *v: an
 * integer or a float of that size.  *v is left as it was on a short read. */
static tf_status get_le(tf_reader *r, void *v, size_t n, const char *what, tf_error *err)
{
	const uint8_t *p = take(r, n);
	uint32_t u32;
	uint64_t u64;

	if (!p)
		return short_read(r, n, what, err);
	if (n == 4) {
		u32 = tf_le32(p);
		memcpy(v, &u32, n);
	} else {
		u64 = tf_le64(p);
		memcpy(v, &u64, n);
	}
	return TF_OK;
}

tf_status tf_get_u32(tf_reader *r, uint32_t *v, const char *what, tf_error *err)
{
	return get_le(r, v, sizeof(*v), what, err);
}

tf_status tf_get_i32(tf_reader *r, int32_t *v, const char *what, tf_error *err)
{
	return get_le(r, v, sizeof(*v), what, err);
}

tf_status tf_get_u64(tf_reader *r, uint64_t *v, const char *what, tf_error *err)
{
	return get_le(r, v, sizeof(*v), what, err);
}

tf_status tf_get_f64(tf_reader *r, double *v, const char *what, tf_error *err)
{
	return get_le(r, v, sizeof(*v), what, err);
}

tf_status tf_get_f32(tf_reader *r, float *v, const char *what, tf_error *err)
{
	return get_le(r, v, sizeof(*v), what, err);
}

tf_status tf_get_span(tf_reader *r, uint64_t n, tf_span *out, const char *what, tf_error *err)
{
	const uint8_t *p = n <= r->n ? take(r, (size_t)n) : NULL;

	if (n == 0) {	/* the reader may wrap an empty span with p == NULL */
		*out = tf_span_of(r->p, 0);
		return TF_OK;
	}
	if (!p)
		return short_read(r, n > SIZE_MAX ? SIZE_MAX : (size_t)n, what, err);
	*out = tf_span_of(p, (size_t)n);
	return TF_OK;
}

void tf_buf_init(tf_buf *b, size_t limit)
{
	b->p = NULL;
	b->len = b->cap = 0;
	b->limit = limit;
	b->fixed = false;
}

void tf_buf_wrap(tf_buf *b, void *mem, size_t cap)
{
	b->p = mem;
	b->len = 0;
	b->cap = b->limit = cap;
	b->fixed = true;
}

void tf_buf_free(tf_buf *b)
{
	if (!b->fixed)
		free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

tf_status tf_buf_reserve(tf_buf *b, size_t need, tf_error *err)
{
	size_t cap;
	uint8_t *p;

	/* A growable buffer always gets storage, even for 0 bytes, so that
	 * p + len is never arithmetic on a null pointer. */
	if (need <= b->cap && (b->p || b->fixed))
		return TF_OK;
	if (b->fixed)
		return tf_err(err, TF_E_CORRUPT, "output of %zu bytes exceeds its expected size %zu",
			      need, b->cap);
	/* Limits come from the sizes of what is being decoded: a need beyond
	 * one is a lying length in the data, not a want of memory. */
	if (need > b->limit)
		return tf_err(err, TF_E_CORRUPT, "buffer of %zu bytes exceeds the limit of %zu", need, b->limit);
	/* Grow geometrically but never past the limit. */
	cap = b->cap < 4096 ? 4096 : b->cap;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	if (cap > b->limit)
		cap = b->limit;		/* >= need, checked above */
	p = realloc(b->p, cap ? cap : 1);
	if (!p)
		return tf_err(err, TF_E_NOMEM, "cannot allocate %zu bytes", cap);
	b->p = p;
	b->cap = cap;
	return TF_OK;
}

tf_status tf_buf_grow(tf_buf *b, size_t extra, uint8_t **at, tf_error *err)
{
	tf_status st = tf_buf_reserve(b, tf_size_add(b->len, extra), err);
	if (st == TF_OK)
		*at = b->p + b->len;
	return st;
}

tf_status tf_buf_append(tf_buf *b, const void *src, size_t n, tf_error *err)
{
	uint8_t *at;
	tf_status st = tf_buf_grow(b, n, &at, err);

	if (st != TF_OK)
		return st;
	if (n)
		memcpy(at, src, n);
	b->len += n;
	return TF_OK;
}

tf_status tf_buf_put_u8(tf_buf *b, uint8_t v, tf_error *err)
{
	return tf_buf_append(b, &v, 1, err);
}

tf_status tf_buf_put_u32(tf_buf *b, uint32_t v, tf_error *err)
{
	uint8_t le[4];
	tf_put_le32(le, v);
	return tf_buf_append(b, le, sizeof(le), err);
}

tf_status tf_buf_put_u64(tf_buf *b, uint64_t v, tf_error *err)
{
	uint8_t le[8];
	tf_put_le64(le, v);
	return tf_buf_append(b, le, sizeof(le), err);
}
