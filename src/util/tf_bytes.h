/*
 * tf_bytes.h - bounds-checked byte reading and bounded growable buffers.
 *
 * TileDB stores every integer little-endian with no padding (FORMAT.md §0);
 * a few run lengths and string lengths are big-endian.  A tf_reader walks a
 * span of untrusted bytes: every get checks the remaining length first and
 * fails with TF_E_CORRUPT instead of reading past the end.
 *
 * A tf_buf is the one growable buffer of the library.  It has a hard limit
 * (so lengths read from disk can never make it allocate without bound) and
 * can instead wrap caller memory of fixed capacity, which is how the last
 * pipeline stage writes straight into its destination.
 */
#ifndef TF_BYTES_H
#define TF_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util/tf_checked.h"
#include "util/tf_status.h"

typedef struct tf_span {
	const uint8_t *p;
	size_t n;
} tf_span;

static inline tf_span tf_span_of(const void *p, size_t n)
{
	tf_span s = { (const uint8_t *)p, n };
	return s;
}

/* ---- little/big-endian loads and stores on raw memory ---------------- */

static inline uint16_t tf_le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t tf_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t tf_le64(const uint8_t *p) { return tf_le32(p) | (uint64_t)tf_le32(p + 4) << 32; }
static inline void tf_put_le16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void tf_put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline void tf_put_le64(uint8_t *p, uint64_t v) { tf_put_le32(p, (uint32_t)v); tf_put_le32(p + 4, (uint32_t)(v >> 32)); }

/* Big-endian unsigned integer of width 1..8 bytes. */
static inline uint64_t tf_be_n(const uint8_t *p, unsigned width)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < width; i++)
		v = v << 8 | p[i];
	return v;
}
static inline void tf_put_be_n(uint8_t *p, unsigned width, uint64_t v)
{
	for (unsigned i = width; i-- > 0; v >>= 8)
		p[i] = (uint8_t)v;
}

/* Little-endian integer of width 1, 2, 4 or 8 bytes, zero-extended. */
static inline uint64_t tf_le_n(const uint8_t *p, unsigned width)
{
	switch (width) {
	case 1: return p[0];
	case 2: return tf_le16(p);
	case 4: return tf_le32(p);
	default: return tf_le64(p);
	}
}
static inline void tf_put_le_n(uint8_t *p, unsigned width, uint64_t v)
{
	switch (width) {
	case 1: p[0] = (uint8_t)v; break;
	case 2: tf_put_le16(p, (uint16_t)v); break;
	case 4: tf_put_le32(p, (uint32_t)v); break;
	default: tf_put_le64(p, v); break;
	}
}

/* ---- reader ------------------------------------------------------------ */

typedef struct tf_reader {
	const uint8_t *p;
	size_t n;	/* bytes left */
	size_t pos;	/* bytes consumed, for messages */
} tf_reader;

static inline tf_reader tf_reader_of(tf_span s)
{
	tf_reader r = { s.p, s.n, 0 };
	return r;
}

/* Each get fails with TF_E_CORRUPT (message naming `what`) when fewer bytes
 * remain than needed, and leaves the reader unchanged in that case. */
tf_status tf_get_u8(tf_reader *r, uint8_t *v, const char *what, tf_error *err);
tf_status tf_get_u32(tf_reader *r, uint32_t *v, const char *what, tf_error *err);
tf_status tf_get_i32(tf_reader *r, int32_t *v, const char *what, tf_error *err);
tf_status tf_get_u64(tf_reader *r, uint64_t *v, const char *what, tf_error *err);
tf_status tf_get_f64(tf_reader *r, double *v, const char *what, tf_error *err);
tf_status tf_get_f32(tf_reader *r, float *v, const char *what, tf_error *err);
/* A view of the next n bytes (no copy). */
tf_status tf_get_span(tf_reader *r, uint64_t n, tf_span *out, const char *what, tf_error *err);

/* ---- bounded buffer ------------------------------------------------------ */

typedef struct tf_buf {
	uint8_t *p;
	size_t len;
	size_t cap;
	size_t limit;	/* reserve() beyond this fails with TF_E_CORRUPT */
	bool fixed;	/* wraps caller memory: never reallocated or freed */
} tf_buf;

#define TF_BUF_INIT(lim) { NULL, 0, 0, (lim), false }

void tf_buf_init(tf_buf *b, size_t limit);
/* Wrap caller memory of capacity cap; len starts at 0. */
void tf_buf_wrap(tf_buf *b, void *mem, size_t cap);
void tf_buf_free(tf_buf *b);
/* Make room for `need` bytes in total (not in addition). */
tf_status tf_buf_reserve(tf_buf *b, size_t need, tf_error *err);
/* Make room for len + extra bytes and return a pointer to the free space. */
tf_status tf_buf_grow(tf_buf *b, size_t extra, uint8_t **at, tf_error *err);
tf_status tf_buf_append(tf_buf *b, const void *src, size_t n, tf_error *err);
tf_status tf_buf_put_u8(tf_buf *b, uint8_t v, tf_error *err);
tf_status tf_buf_put_u32(tf_buf *b, uint32_t v, tf_error *err);
tf_status tf_buf_put_u64(tf_buf *b, uint64_t v, tf_error *err);

#endif
