/*
 * elem.h - helpers shared by the numeric transform filters: delta, double
 * delta, bit width reduction, positive delta, bit/byte shuffle, xor and
 * scale float.
 *
 *   - which integer type T a filter works with (FORMAT.md §4.9-4.12),
 *     with the reinterpret type and value count checks of delta and double
 *     delta, and the windows of bit width reduction and positive delta;
 *   - little-endian loads/stores for the word-at-a-time kernels;
 *   - blosc's byte shuffle (§4.14), which bitshuffle also uses as its first
 *     stage, done as byte-matrix transposes on 64-bit words or, with SSE2
 *     (unless TF_NO_SIMD is defined), on 128-bit registers;
 *   - running sums and differences (delta, positive delta);
 *   - the "u32 n_parts, u32 part_len[n_parts]" metadata header of
 *     byteshuffle, bitshuffle, xor and scale float (§4.13-4.17), and the
 *     decode/encode of filters that map each part to one of equal length;
 *   - the window-by-window encode of bit width reduction and positive delta.
 */
#ifndef TF_ELEM_H
#define TF_ELEM_H

#include "filters/tf_filter.h"

/* For the word kernels: inlined into each loop, where the element width
 * is a constant and the words stay in registers. */
#define ELEM_INLINE static inline __attribute__((always_inline))
/* ... and their loops over the 8 words fully unrolled (GCC and Clang). */
#define ELEM_UNROLL _Pragma("GCC unroll 8")

/* An integer element type: its width and whether it is signed. */
typedef struct elem_int {
	unsigned size;		/* 1, 2, 4 or 8 */
	bool is_signed;
} elem_int;

/*
 * T of DOUBLE_DELTA and DELTA for datatype t (§4.9 table; DELTA's std::byte
 * and char behave as uint8/int8): every string type and ANY are uint8,
 * whatever their character width (dd_compressor.cc, delta_compressor.cc).
 * False for floats, which TileDB refuses, and for invalid ids.
 */
static inline bool elem_delta_type(tf_datatype t, elem_int *e)
{
	if (tf_datatype_is_real(t) || !tf_datatype_valid(t))
		return false;
	if ((t >= TF_DT_STRING_ASCII && t <= TF_DT_STRING_UCS4) || t == TF_DT_ANY) {
		e->size = 1;
		e->is_signed = false;
		return true;
	}
	e->size = tf_datatype_size(t);
	e->is_signed = tf_datatype_is_signed(t) || t == TF_DT_CHAR ||
		       tf_datatype_is_datetime(t);
	return true;
}

/* The output datatype of DELTA and DOUBLE_DELTA for input t: the reinterpret
 * type, if any (compression_filter.cc, output_datatype). */
static inline tf_datatype elem_reinterpret_type(const tf_filter_opts *o, tf_datatype t)
{
	return o->reinterpret != TF_DT_ANY ? o->reinterpret : t;
}

/* T of DELTA and DOUBLE_DELTA at a stage: from the reinterpret type when
 * there is one, else from the type the filter sees.  `coding` names the
 * filter's coding in the error ("delta-code"). */
static inline tf_status elem_reinterpret_int(const tf_filter_opts *o, const tf_stage *st,
					     const char *coding, elem_int *t, tf_error *err)
{
	tf_datatype d = elem_reinterpret_type(o, st->type);

	if (elem_delta_type(d, t))
		return TF_OK;
	tf_err(err, TF_E_INVAL, "cannot %s %s values (an integer reinterpret type is needed)",
	       coding, tf_datatype_name(d));
	/* A constant, not tf_err's result: inlined here, the compiler can then
	 * tell that *t is set whenever TF_OK comes back. */
	return TF_E_INVAL;
}

/* The value count n stored in a DELTA or DOUBLE_DELTA part must be the
 * number of whole values in the len bytes it decodes to. */
static inline tf_status elem_check_count(uint64_t n, size_t len, const elem_int *t, tf_error *err)
{
	if (n != len / t->size)
		return tf_err(err, TF_E_CORRUPT, "%llu values where a part of %zu bytes holds %zu",
			      (unsigned long long)n, len, len / t->size);
	return TF_OK;
}

/* The error for a part whose partial last value TileDB's encoder dropped
 * (see the tops of delta.c and double_delta.c): those bytes are lost. */
static inline tf_status elem_dropped_tail(size_t len, const elem_int *t, tf_error *err)
{
	return tf_err(err, TF_E_CORRUPT, "the last %zu bytes of the %zu-byte part were dropped "
		      "by the encoder", len % t->size, len);
}

/*
 * T of BIT_WIDTH_REDUCTION (bytes_too false) and POSITIVE_DELTA (bytes_too
 * true), or false when the filter passes the data through with no header
 * at all (§4.11, §4.12, §10 #7).  Date/time types are int64, but only from
 * format 20 on (bit_width_reduction_filter.cc, positive_delta_filter.cc:
 * "tile.format_version() < 20").
 */
static inline bool elem_window_type(tf_datatype t, uint32_t version, bool bytes_too, elem_int *e)
{
	if (tf_datatype_is_datetime(t)) {
		e->size = 8;
		e->is_signed = true;
		return version >= 20;
	}
	switch (t) {
	case TF_DT_INT16: case TF_DT_UINT16: case TF_DT_INT32: case TF_DT_UINT32:
	case TF_DT_INT64: case TF_DT_UINT64:
		break;
	case TF_DT_INT8: case TF_DT_UINT8: case TF_DT_BOOL: case TF_DT_BLOB:
	case TF_DT_GEOM_WKB: case TF_DT_GEOM_WKT:
		if (!bytes_too)
			return false;
		break;
	default:
		return false;
	}
	e->size = tf_datatype_size(t);
	e->is_signed = tf_datatype_is_signed(t);
	return true;
}

/*
 * Window length in bytes of BIT_WIDTH_REDUCTION and POSITIVE_DELTA for a
 * part of len bytes: floor(min(len, max_window) / size) values (§4.11);
 * windows follow each other, the last one shorter.  Where that is 0 (a
 * part shorter than one value, or a max_window below one value) TileDB
 * divides by zero; one value per window, or a single window for the
 * whole short part, is used instead.
 */
static inline size_t elem_window_bytes(size_t len, uint32_t max_window, unsigned size)
{
	size_t w = (len < max_window ? len : max_window) / size * size;

	if (w == 0)
		w = len < size ? len : size;
	return w;
}

/* ---- 64-bit words in stored (little-endian) byte order ------------------------ */

ELEM_INLINE uint64_t elem_ld64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

ELEM_INLINE void elem_st64(uint8_t *p, uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	memcpy(p, &v, 8);
}

/* Little-endian integer of n = 1, 2, 4 or 8 bytes, zero-extended, and back. */
ELEM_INLINE uint64_t elem_ld_n(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	memcpy(&v, p, n);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v) >> (64 - 8 * n);
#endif
	return v;
}

ELEM_INLINE void elem_st_n(uint8_t *p, unsigned n, uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v << (64 - 8 * n));
#endif
	memcpy(p, &v, n);
}

/* Sign-extend the low n bytes of v, in two's complement modulo 2^64. */
static inline uint64_t elem_sext(uint64_t v, unsigned n)
{
	uint64_t m = n < 8 ? (uint64_t)1 << (8 * n - 1) : 0;

	return (v ^ m) - m;
}

/* Order-preserving key: signed values (sign-extended) compare as unsigned. */
static inline uint64_t elem_key(uint64_t v, bool is_signed)
{
	return is_signed ? v ^ ((uint64_t)1 << 63) : v;
}

/* Exchange the bits of a selected by mask << shift with the bits of b
 * selected by mask: one step of a recursive matrix transpose. */
ELEM_INLINE void elem_swap_bits(uint64_t *a, uint64_t *b, unsigned shift, uint64_t mask)
{
	uint64_t t = ((*a >> shift) ^ *b) & mask;

	*b ^= t;
	*a ^= t << shift;
}

/*
 * Transpose 8 elements of es bytes between "element order" (w holds the
 * 8*es bytes as they lie in memory) and "plane order" (word j holds byte j
 * of the 8 elements).  Each is a byte-matrix transpose; every step swaps
 * blocks, so each direction applies the steps of the other in reverse.
 */
ELEM_INLINE void elem_planes_to_elems(uint64_t *w, unsigned es)
{
	const uint64_t lo = 0x00000000FFFFFFFFull;
	uint64_t a, b;

	switch (es) {
	case 2:		/* 2x8 -> 8x2 */
		elem_swap_bits(&w[0], &w[1], 8, 0x00FF00FF00FF00FFull);
		elem_swap_bits(&w[0], &w[1], 16, 0x0000FFFF0000FFFFull);
		a = w[0], b = w[1];
		w[0] = (a & lo) | b << 32;
		w[1] = a >> 32 | (b & ~lo);
		break;
	case 4:		/* 4x8: two 4x4 transposes, then gather halves */
		elem_swap_bits(&w[0], &w[1], 8, 0x00FF00FF00FF00FFull);
		elem_swap_bits(&w[2], &w[3], 8, 0x00FF00FF00FF00FFull);
		elem_swap_bits(&w[0], &w[2], 16, 0x0000FFFF0000FFFFull);
		elem_swap_bits(&w[1], &w[3], 16, 0x0000FFFF0000FFFFull);
		elem_swap_bits(&w[0], &w[1], 32, lo);	/* w0 = e0 e1, w1 = e4 e5 */
		elem_swap_bits(&w[2], &w[3], 32, lo);	/* w2 = e2 e3, w3 = e6 e7 */
		a = w[1], w[1] = w[2], w[2] = a;
		break;
	case 8:		/* 8x8, its own inverse */
		ELEM_UNROLL
		for (unsigned r = 0; r < 8; r += 2)	/* 1x1 blocks */
			elem_swap_bits(&w[r], &w[r + 1], 8, 0x00FF00FF00FF00FFull);
		ELEM_UNROLL
		for (unsigned r = 0; r < 8; r += 4) {	/* 2x2 blocks */
			elem_swap_bits(&w[r], &w[r + 2], 16, 0x0000FFFF0000FFFFull);
			elem_swap_bits(&w[r + 1], &w[r + 3], 16, 0x0000FFFF0000FFFFull);
		}
		ELEM_UNROLL
		for (unsigned r = 0; r < 4; r++)	/* 4x4 blocks */
			elem_swap_bits(&w[r], &w[r + 4], 32, lo);
		break;
	}
}

ELEM_INLINE void elem_elems_to_planes(uint64_t *w, unsigned es)
{
	const uint64_t lo = 0x00000000FFFFFFFFull;
	uint64_t a, b;

	switch (es) {
	case 2:
		a = w[0], b = w[1];
		w[0] = (a & lo) | b << 32;
		w[1] = a >> 32 | (b & ~lo);
		elem_swap_bits(&w[0], &w[1], 16, 0x0000FFFF0000FFFFull);
		elem_swap_bits(&w[0], &w[1], 8, 0x00FF00FF00FF00FFull);
		break;
	case 4:
		a = w[1], w[1] = w[2], w[2] = a;
		elem_swap_bits(&w[0], &w[1], 32, lo);
		elem_swap_bits(&w[2], &w[3], 32, lo);
		elem_swap_bits(&w[0], &w[2], 16, 0x0000FFFF0000FFFFull);
		elem_swap_bits(&w[1], &w[3], 16, 0x0000FFFF0000FFFFull);
		elem_swap_bits(&w[0], &w[1], 8, 0x00FF00FF00FF00FFull);
		elem_swap_bits(&w[2], &w[3], 8, 0x00FF00FF00FF00FFull);
		break;
	case 8:
		elem_planes_to_elems(w, 8);
		break;
	}
}

#if defined(__SSE2__) && !defined(TF_NO_SIMD)
#include <emmintrin.h>
#define ELEM_SSE2 1

/*
 * The same transposes on 16 elements at a time in SSE2 registers.  One
 * round pairs the vectors of x whose index differs in `bit`: the pair's
 * low halves interleave in units of w bits into the first vector, the
 * high halves into the second.  Viewing a byte's place as (vector index
 * bits, lane bits): a round moves the top lane bit into the vector index
 * in place of the pair bit, shifts the lane bits above the unit up by one
 * and puts the pair bit just above the unit.  A chain of rounds is a
 * byte-matrix transpose; comments at each use track the bits.
 */
#define ELEM_UNPACK_ROUND(x, nvec, bit, w)					\
	do {									\
		ELEM_UNROLL							\
		for (unsigned a_ = 0; a_ < (nvec); a_++) {			\
			if (a_ & (bit))						\
				continue;					\
			__m128i l_ = _mm_unpacklo_epi##w((x)[a_], (x)[a_ | (bit)]);	\
			(x)[a_ | (bit)] = _mm_unpackhi_epi##w((x)[a_], (x)[a_ | (bit)]); \
			(x)[a_] = l_;						\
		}								\
	} while (0)

/* Index bits (a b c) -> (c b a), and (a b) -> (b a). */
static inline unsigned elem_rev3(unsigned q)
{
	return (q & 1) << 2 | (q & 2) | (q >> 2 & 1);
}

static inline unsigned elem_rev2(unsigned q)
{
	return (q & 1) << 1 | q >> 1;
}

/*
 * 8 planes of 16 bytes (vector j, lane e = (e3 e2 e1 e0)) to 16 elements
 * of 8 bytes: rounds on index bits 0, 1, 2 in 8-, 16-, 32-bit units leave
 * vector (e1 e2 e3), lane (e0 j2 j1 j0), so elements 2q, 2q+1 are in
 * x[elem_rev3(q)].
 */
ELEM_INLINE void elem_transpose_8x16(__m128i *x)
{
	ELEM_UNPACK_ROUND(x, 8, 1, 8);
	ELEM_UNPACK_ROUND(x, 8, 2, 16);
	ELEM_UNPACK_ROUND(x, 8, 4, 32);
}

/*
 * The inverse: x[q] = elements 2q, 2q+1 (vector (e3 e2 e1), lane
 * (e0 j2 j1 j0)); 8-bit rounds on bits 2, 1, 0, 2 leave vector
 * (j0 j2 j1), lane (e3 e2 e1 e0): plane j is x[elem_plane8(j)].
 */
ELEM_INLINE void elem_transpose_16x8(__m128i *x)
{
	ELEM_UNPACK_ROUND(x, 8, 4, 8);
	ELEM_UNPACK_ROUND(x, 8, 2, 8);
	ELEM_UNPACK_ROUND(x, 8, 1, 8);
	ELEM_UNPACK_ROUND(x, 8, 4, 8);
}

static inline unsigned elem_plane8(unsigned j)
{
	return (j & 1) << 2 | (j >> 2) << 1 | (j >> 1 & 1);
}

/* 16 elements of es bytes from planes (plane j at planes + j*stride). */
ELEM_INLINE void elem_unshuffle16(const uint8_t *planes, size_t stride, uint8_t *elems,
				  unsigned es)
{
	__m128i x[8];

	ELEM_UNROLL
	for (unsigned j = 0; j < es; j++)
		x[j] = _mm_loadu_si128((const __m128i *)(planes + j * stride));
	if (es == 2) {
		_mm_storeu_si128((__m128i *)elems, _mm_unpacklo_epi8(x[0], x[1]));
		_mm_storeu_si128((__m128i *)(elems + 16), _mm_unpackhi_epi8(x[0], x[1]));
	} else if (es == 4) {
		/* vector (j1 j0), lane (e3 e2 e1 e0) -> vector (e2 e3), lane (e1 e0 j1 j0) */
		ELEM_UNPACK_ROUND(x, 4, 1, 8);
		ELEM_UNPACK_ROUND(x, 4, 2, 16);
		ELEM_UNROLL
		for (unsigned q = 0; q < 4; q++)
			_mm_storeu_si128((__m128i *)(elems + 16 * q), x[elem_rev2(q)]);
	} else {
		elem_transpose_8x16(x);
		ELEM_UNROLL
		for (unsigned q = 0; q < 8; q++)
			_mm_storeu_si128((__m128i *)(elems + 16 * q), x[elem_rev3(q)]);
	}
}

ELEM_INLINE void elem_shuffle16(const uint8_t *elems, uint8_t *planes, size_t stride, unsigned es)
{
	const __m128i low = _mm_set1_epi16(0x00FF);
	__m128i x[8];

	ELEM_UNROLL
	for (unsigned q = 0; q < es; q++)
		x[q] = _mm_loadu_si128((const __m128i *)(elems + 16 * q));
	if (es == 2) {	/* even bytes, then odd bytes */
		_mm_storeu_si128((__m128i *)planes, _mm_packus_epi16(_mm_and_si128(x[0], low),
								     _mm_and_si128(x[1], low)));
		_mm_storeu_si128((__m128i *)(planes + stride),
				 _mm_packus_epi16(_mm_srli_epi16(x[0], 8), _mm_srli_epi16(x[1], 8)));
	} else if (es == 4) {
		/* vector (e3 e2), lane (e1 e0 j1 j0); 8-bit rounds on bits 1, 0, 1, 0
		 * -> vector (j1 j0), lane (e3 e2 e1 e0) */
		ELEM_UNPACK_ROUND(x, 4, 2, 8);
		ELEM_UNPACK_ROUND(x, 4, 1, 8);
		ELEM_UNPACK_ROUND(x, 4, 2, 8);
		ELEM_UNPACK_ROUND(x, 4, 1, 8);
		ELEM_UNROLL
		for (unsigned j = 0; j < 4; j++)
			_mm_storeu_si128((__m128i *)(planes + j * stride), x[j]);
	} else {
		elem_transpose_16x8(x);
		ELEM_UNROLL
		for (unsigned j = 0; j < 8; j++)
			_mm_storeu_si128((__m128i *)(planes + j * stride), x[elem_plane8(j)]);
	}
}
#endif

/*
 * Blosc byte shuffle of n elements of es bytes (§4.14): plane j (n bytes at
 * planes + j*n) holds byte j of every element.  Eight elements at a time
 * go through the word transposes above; the last n % 8 byte by byte.
 * es is a constant at every call site below, so each width gets its own
 * loop without a dispatch inside it.
 */
ELEM_INLINE void
elem_shuffle_es(const uint8_t *elems, uint8_t *planes, size_t n, unsigned es)
{
	size_t e = 0;

#ifdef ELEM_SSE2
	for (; e + 16 <= n; e += 16)
		elem_shuffle16(elems + e * es, planes + e, n, es);
#endif
	for (; e + 8 <= n; e += 8) {
		uint64_t w[8];

		ELEM_UNROLL
		for (unsigned j = 0; j < es; j++)
			w[j] = elem_ld64(elems + e * es + 8 * j);
		elem_elems_to_planes(w, es);
		ELEM_UNROLL
		for (unsigned j = 0; j < es; j++)
			elem_st64(planes + j * n + e, w[j]);
	}
	for (; e < n; e++) {
		ELEM_UNROLL
		for (unsigned j = 0; j < es; j++)
			planes[j * n + e] = elems[e * es + j];
	}
}

ELEM_INLINE void
elem_unshuffle_es(const uint8_t *planes, uint8_t *elems, size_t n, unsigned es)
{
	size_t e = 0;

#ifdef ELEM_SSE2
	for (; e + 16 <= n; e += 16)
		elem_unshuffle16(planes + e, n, elems + e * es, es);
#endif
	for (; e + 8 <= n; e += 8) {
		uint64_t w[8];

		ELEM_UNROLL
		for (unsigned j = 0; j < es; j++)
			w[j] = elem_ld64(planes + j * n + e);
		elem_planes_to_elems(w, es);
		ELEM_UNROLL
		for (unsigned j = 0; j < es; j++)
			elem_st64(elems + e * es + 8 * j, w[j]);
	}
	for (; e < n; e++) {
		ELEM_UNROLL
		for (unsigned j = 0; j < es; j++)
			elems[e * es + j] = planes[j * n + e];
	}
}

/* Shuffle n whole elements of es (1, 2, 4 or 8) bytes; src and dst differ. */
static inline void elem_byte_shuffle(const uint8_t *src, uint8_t *dst, size_t n, unsigned es)
{
	switch (es) {
	case 2: elem_shuffle_es(src, dst, n, 2); break;
	case 4: elem_shuffle_es(src, dst, n, 4); break;
	case 8: elem_shuffle_es(src, dst, n, 8); break;
	default: if (n) memcpy(dst, src, n); break;	/* es 1: the identity */
	}
}

static inline void elem_byte_unshuffle(const uint8_t *src, uint8_t *dst, size_t n, unsigned es)
{
	switch (es) {
	case 2: elem_unshuffle_es(src, dst, n, 2); break;
	case 4: elem_unshuffle_es(src, dst, n, 4); break;
	case 8: elem_unshuffle_es(src, dst, n, 8); break;
	default: if (n) memcpy(dst, src, n); break;
	}
}

/* ---- running sums and differences (DELTA, POSITIVE_DELTA) ---------------------- */

/* dst[i] = start + src[0] + ... + src[i] for n es-byte integers, modulo
 * 2^(8 es): signedness cannot matter for a sum taken modulo the width. */
ELEM_INLINE void
elem_prefix_sum_es(const uint8_t *src, uint8_t *dst, size_t n, unsigned es, uint64_t start)
{
	uint64_t acc = start;

	for (size_t i = 0; i < n; i++) {
		acc += elem_ld_n(src + i * es, es);
		elem_st_n(dst + i * es, es, acc);
	}
}

static inline void elem_prefix_sum(const uint8_t *src, uint8_t *dst, size_t n, unsigned es,
				   uint64_t start)
{
	switch (es) {
	case 1: elem_prefix_sum_es(src, dst, n, 1, start); break;
	case 2: elem_prefix_sum_es(src, dst, n, 2, start); break;
	case 4: elem_prefix_sum_es(src, dst, n, 4, start); break;
	default: elem_prefix_sum_es(src, dst, n, 8, start); break;
	}
}

/* The inverse: dst[i] = src[i] - src[i-1], with src[-1] = prev. */
ELEM_INLINE void
elem_diff_es(const uint8_t *src, uint8_t *dst, size_t n, unsigned es, uint64_t prev)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t x = elem_ld_n(src + i * es, es);

		elem_st_n(dst + i * es, es, x - prev);
		prev = x;
	}
}

static inline void elem_diff(const uint8_t *src, uint8_t *dst, size_t n, unsigned es, uint64_t prev)
{
	switch (es) {
	case 1: elem_diff_es(src, dst, n, 1, prev); break;
	case 2: elem_diff_es(src, dst, n, 2, prev); break;
	case 4: elem_diff_es(src, dst, n, 4, prev); break;
	default: elem_diff_es(src, dst, n, 8, prev); break;
	}
}

/* ---- the "u32 n_parts, u32 part_len[n_parts]" header -------------------------- */

/* Read it from the front of *md, leaving *md after it; *lens points at the
 * n little-endian u32 lengths and *total receives their sum. */
static inline tf_status elem_get_parts(tf_span *md, uint32_t *n, const uint8_t **lens,
				       uint64_t *total, tf_error *err)
{
	tf_reader r = tf_reader_of(*md);
	tf_span l;
	tf_status rc;

	if ((rc = tf_get_u32(&r, n, "part count", err)) != TF_OK ||
	    (rc = tf_get_span(&r, 4 * (uint64_t)*n, &l, "part lengths", err)) != TF_OK)
		return rc;
	*lens = l.p;
	*total = 0;
	for (uint32_t i = 0; i < *n; i++)
		*total += tf_le32(l.p + 4 * (size_t)i);
	*md = tf_span_of(r.p, r.n);
	return TF_OK;
}

/* Append the header describing the parts of p to hdr. */
static inline tf_status elem_put_parts(tf_buf *hdr, const tf_parts *p, tf_error *err)
{
	tf_status rc = tf_buf_put_u32(hdr, (uint32_t)p->n, err);

	for (size_t i = 0; i < p->n && rc == TF_OK; i++) {
		if (p->v[i].len > UINT32_MAX)
			return tf_err(err, TF_E_INVAL, "part of %zu bytes exceeds 4 GiB", p->v[i].len);
		rc = tf_buf_put_u32(hdr, (uint32_t)p->v[i].len, err);
	}
	return rc;
}

/*
 * Finish the encode of a metadata-passing filter (§3.4): its header goes
 * in front of the earlier metadata parts and `out` replaces every data
 * part.  hdr and out are taken over (left empty) on success and freed on
 * failure.
 */
static inline tf_status elem_encode_done(tf_parts *md, tf_parts *data, tf_buf *hdr, tf_buf *out,
					 tf_error *err)
{
	tf_buf *slot;
	tf_status rc = tf_parts_prepend(md, hdr, err);

	if (rc == TF_OK) {
		tf_parts_free(data);
		rc = tf_parts_add(data, &slot, err);
	}
	if (rc != TF_OK) {
		tf_buf_free(hdr);
		tf_buf_free(out);
		return rc;
	}
	*slot = *out;
	tf_buf_init(out, 0);
	return TF_OK;
}

/* ---- filters that transform each part in place of the same length ------------ */

/* Transform one part of len bytes from src to dst (distinct buffers). */
typedef void (*elem_part_fn)(const uint8_t *src, uint8_t *dst, size_t len, unsigned es);

/*
 * Decode of byteshuffle, bitshuffle and xor: read the parts header, check
 * that the parts cover the data exactly, and undo each part with fn into
 * s->data_out.
 */
static inline tf_status elem_decode_parts(const tf_stage *st, tf_stream *s, unsigned es,
					  elem_part_fn fn, const char *name, tf_error *err)
{
	const uint8_t *lens, *src = s->data.p;
	uint8_t *dst;
	uint64_t total;
	uint32_t n;
	tf_status rc;

	if ((rc = elem_get_parts(&s->md, &n, &lens, &total, err)) != TF_OK)
		return tf_err_prefix(err, "%s header", name);
	if (total != s->data.n)
		return tf_err(err, TF_E_CORRUPT, "%s parts hold %llu bytes but the data has %zu",
			      name, (unsigned long long)total, s->data.n);
	if (s->data.n == 0)
		return TF_OK;	/* only empty parts */
	if ((rc = tf_stage_output(st, s->data_out, s->data.n, err)) != TF_OK)
		return rc;
	dst = s->data_out->p;
	for (uint32_t i = 0; i < n; i++) {
		size_t len = tf_le32(lens + 4 * (size_t)i);

		fn(src, dst, len, es);
		src += len;
		dst += len;
	}
	s->data_out->len = s->data.n;
	s->data = tf_span_of(s->data_out->p, s->data_out->len);
	return TF_OK;
}

/* Encode of byteshuffle and xor: one header entry per data part, and the
 * transformed parts back to back as the one output part. */
static inline tf_status elem_encode_parts(tf_parts *md, tf_parts *data, unsigned es,
					  elem_part_fn fn, tf_error *err)
{
	tf_buf hdr = TF_BUF_INIT(SIZE_MAX), out = TF_BUF_INIT(SIZE_MAX);
	tf_status rc = elem_put_parts(&hdr, data, err);

	if (rc == TF_OK)
		rc = tf_buf_reserve(&out, tf_parts_total(data), err);
	for (size_t i = 0; rc == TF_OK && i < data->n; i++) {
		if (data->v[i].len == 0)
			continue;
		fn(data->v[i].p, out.p + out.len, data->v[i].len, es);
		out.len += data->v[i].len;
	}
	if (rc != TF_OK) {
		tf_buf_free(&hdr);
		tf_buf_free(&out);
		return rc;
	}
	return elem_encode_done(md, data, &hdr, &out, err);
}

/* ---- windowed filters (BIT_WIDTH_REDUCTION, POSITIVE_DELTA) ------------------ */

/* Append one window's header entry to hdr and its encoded bytes to out. */
typedef tf_status (*elem_window_fn)(const uint8_t *p, size_t nbytes, const elem_int *t,
				    tf_buf *hdr, tf_buf *out, tf_error *err);

/* Encode the windows of one part of len bytes (elem_window_bytes) with fn. */
static inline tf_status elem_encode_part_windows(const uint8_t *p, size_t len, uint32_t max_window,
						 const elem_int *t, elem_window_fn fn, tf_buf *hdr,
						 tf_buf *out, uint64_t *nwin, tf_error *err)
{
	size_t w = elem_window_bytes(len, max_window, t->size);
	tf_status rc = TF_OK;

	for (size_t off = 0, nb; off < len && rc == TF_OK; off += nb, ++*nwin) {
		nb = len - off < w ? len - off : w;
		rc = fn(p + off, nb, t, hdr, out, err);
	}
	return rc;
}

/*
 * Encode of BIT_WIDTH_REDUCTION and POSITIVE_DELTA.  hdr holds the header
 * fields that come before the u32 window count; the count follows them,
 * then one entry per window of every data part, while the encoded windows
 * go back to back into the one output part.  hdr is taken over.
 */
static inline tf_status elem_encode_windows(tf_parts *md, tf_parts *data, tf_buf *hdr,
					    uint32_t max_window, const elem_int *t,
					    elem_window_fn fn, tf_error *err)
{
	tf_buf out = TF_BUF_INIT(SIZE_MAX);
	size_t count_at = hdr->len;
	uint64_t nwin = 0;
	tf_status rc = tf_buf_put_u32(hdr, 0, err);	/* the count, set below */

	if (rc == TF_OK)
		rc = tf_buf_reserve(&out, tf_parts_total(data), err);
	for (size_t i = 0; i < data->n && rc == TF_OK; i++)
		rc = elem_encode_part_windows(data->v[i].p, data->v[i].len, max_window, t, fn, hdr,
					      &out, &nwin, err);
	if (rc == TF_OK && nwin > UINT32_MAX)
		rc = tf_err(err, TF_E_INVAL, "%llu windows exceed u32", (unsigned long long)nwin);
	if (rc != TF_OK) {
		tf_buf_free(hdr);
		tf_buf_free(&out);
		return rc;
	}
	tf_put_le32(hdr->p + count_at, (uint32_t)nwin);
	return elem_encode_done(md, data, hdr, &out, err);
}

#endif
