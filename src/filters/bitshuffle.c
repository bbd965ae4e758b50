/*
 * bitshuffle.c - BITSHUFFLE (filter type 8), Kiyo Masui's bitshuffle
 * (FORMAT.md §4.13, tiledb/sm/filter/bitshuffle_filter.cc).
 *
 * Each input part is split into its first L - L%8 bytes and, when L%8 != 0,
 * a tail of L%8 bytes; metadata lists every resulting part:
 * u32 n_parts, u32 part_len[n_parts].  A part whose length is not a
 * multiple of both 8 and es = sizeof(type_in) is stored raw.  Otherwise it
 * is cut into blocks of 8192 bytes (the last shorter).  In a block of blk
 * bytes the first m = floor(blk/es) rounded down to a multiple of 8
 * elements are bit-transposed, the remaining bytes copied: the output is
 * 8*es bit planes of m bits, plane p holding bit p of every element
 * (bit p = bit p%8 of byte p/8), packed LSB first.
 *
 * The transpose runs in two stages, never bit by bit: a byte shuffle
 * (elem.h) gathers byte j of every element into row j, then each group of
 * 8 bytes of a row becomes 8 plane bytes through an 8x8 bit-matrix
 * transpose of a 64-bit word, with byte-matrix transposes moving whole
 * words between rows and planes.  With SSE2 (and without TF_NO_SIMD) 16
 * groups at a time go through 128-bit registers; the scalar word code
 * does the rest and is the fallback.
 */
#include "elem.h"

/* BSHUF_TARGET_BLOCK_SIZE_B of bitshuffle_filter.cc. */
#define BLOCK_BYTES 8192

/*
 * Transpose the 8x8 bit matrix whose row r is byte r and column c bit c:
 * afterwards bit r of byte c is what bit c of byte r was.  Three rounds
 * swap 1x1, 2x2 and 4x4 blocks (Hacker's Delight, transpose8).
 */
ELEM_INLINE uint64_t bit_transpose8(uint64_t x)
{
	uint64_t t;

	t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
	x ^= t ^ (t << 7);
	t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
	x ^= t ^ (t << 14);
	t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
	x ^= t ^ (t << 28);
	return x;
}

#ifdef ELEM_SSE2
/* bit_transpose8 on both 64-bit lanes. */
ELEM_INLINE __m128i bit_transpose8x2(__m128i x)
{
	const __m128i m1 = _mm_set1_epi64x(0x00AA00AA00AA00AAll);
	const __m128i m2 = _mm_set1_epi64x(0x0000CCCC0000CCCCll);
	const __m128i m3 = _mm_set1_epi64x(0x00000000F0F0F0F0ll);
	__m128i t;

	t = _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64(x, 7)), m1);
	x = _mm_xor_si128(x, _mm_xor_si128(t, _mm_slli_epi64(t, 7)));
	t = _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64(x, 14)), m2);
	x = _mm_xor_si128(x, _mm_xor_si128(t, _mm_slli_epi64(t, 14)));
	t = _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64(x, 28)), m3);
	return _mm_xor_si128(x, _mm_xor_si128(t, _mm_slli_epi64(t, 28)));
}

/* planes_to_row for 16 groups: the byte transpose of elem.h gathers each
 * group's 8 plane bytes, two groups per vector, then bits are transposed. */
static void planes_to_row16(const uint8_t *planes, size_t n, uint8_t *row)
{
	__m128i x[8];

	ELEM_UNROLL
	for (unsigned b = 0; b < 8; b++)
		x[b] = _mm_loadu_si128((const __m128i *)(planes + b * n));
	elem_transpose_8x16(x);
	ELEM_UNROLL
	for (unsigned q = 0; q < 8; q++)
		_mm_storeu_si128((__m128i *)(row + 16 * q), bit_transpose8x2(x[elem_rev3(q)]));
}

static void row_to_planes16(const uint8_t *row, size_t n, uint8_t *planes)
{
	__m128i x[8];

	ELEM_UNROLL
	for (unsigned q = 0; q < 8; q++)
		x[q] = bit_transpose8x2(_mm_loadu_si128((const __m128i *)(row + 16 * q)));
	elem_transpose_16x8(x);
	ELEM_UNROLL
	for (unsigned b = 0; b < 8; b++)
		_mm_storeu_si128((__m128i *)(planes + b * n), x[elem_plane8(b)]);
}
#endif

/*
 * Eight consecutive bit planes of n bytes each (plane b at planes + b*n)
 * to the row of 8n bytes they encode: bit b of row byte e is bit e%8 of
 * byte e/8 of plane b.  Eight plane words at a time: a byte transpose
 * gives, per group of 8 row bytes, one byte of each plane, and a bit
 * transpose turns those into the 8 row bytes.
 */
static void planes_to_row(const uint8_t *planes, size_t n, uint8_t *row)
{
	size_t g = 0;

#ifdef ELEM_SSE2
	for (; g + 16 <= n; g += 16)
		planes_to_row16(planes + g, n, row + 8 * g);
#endif
	for (; g + 8 <= n; g += 8) {
		uint64_t w[8];

		ELEM_UNROLL
		for (unsigned b = 0; b < 8; b++)
			w[b] = elem_ld64(planes + b * n + g);
		elem_planes_to_elems(w, 8);
		ELEM_UNROLL
		for (unsigned i = 0; i < 8; i++)
			elem_st64(row + 8 * (g + i), bit_transpose8(w[i]));
	}
	for (; g < n; g++) {
		uint64_t x = 0;

		for (unsigned b = 0; b < 8; b++)
			x |= (uint64_t)planes[b * n + g] << (8 * b);
		elem_st64(row + 8 * g, bit_transpose8(x));
	}
}

static void row_to_planes(const uint8_t *row, size_t n, uint8_t *planes)
{
	size_t g = 0;

#ifdef ELEM_SSE2
	for (; g + 16 <= n; g += 16)
		row_to_planes16(row + 8 * g, n, planes + g);
#endif
	for (; g + 8 <= n; g += 8) {
		uint64_t w[8];

		ELEM_UNROLL
		for (unsigned i = 0; i < 8; i++)
			w[i] = bit_transpose8(elem_ld64(row + 8 * (g + i)));
		elem_elems_to_planes(w, 8);
		ELEM_UNROLL
		for (unsigned b = 0; b < 8; b++)
			elem_st64(planes + b * n + g, w[b]);
	}
	for (; g < n; g++) {
		uint64_t x = bit_transpose8(elem_ld64(row + 8 * g));

		for (unsigned b = 0; b < 8; b++)
			planes[b * n + g] = (uint8_t)(x >> (8 * b));
	}
}

/* Elements of a block that are bit-transposed: a multiple of 8 (§4.13). */
static size_t block_elems(size_t blk, unsigned es)
{
	return blk / es / 8 * 8;
}

/* A block's bytes past its transposed elements (done bytes) are stored as
 * they are, either way. */
static void copy_rest(const uint8_t *src, uint8_t *dst, size_t blk, size_t done)
{
	if (blk > done)
		memcpy(dst + done, src + done, blk - done);
}

/* Undo one block of blk bytes; tmp holds BLOCK_BYTES. */
static void unshuffle_block(const uint8_t *src, uint8_t *dst, size_t blk, unsigned es,
			    uint8_t *tmp)
{
	size_t m = block_elems(blk, es), n = m / 8;

	if (es == 1) {
		planes_to_row(src, n, dst);
	} else {
		for (unsigned j = 0; j < es; j++)
			planes_to_row(src + 8 * j * n, n, tmp + j * m);
		elem_byte_unshuffle(tmp, dst, m, es);
	}
	copy_rest(src, dst, blk, m * es);
}

static void shuffle_block(const uint8_t *src, uint8_t *dst, size_t blk, unsigned es,
			  uint8_t *tmp)
{
	size_t m = block_elems(blk, es), n = m / 8;

	if (es == 1) {
		row_to_planes(src, n, dst);
	} else {
		elem_byte_shuffle(src, tmp, m, es);
		for (unsigned j = 0; j < es; j++)
			row_to_planes(tmp + j * m, n, dst + 8 * j * n);
	}
	copy_rest(src, dst, blk, m * es);
}

/* unshuffle_block or shuffle_block. */
typedef void (*block_fn)(const uint8_t *src, uint8_t *dst, size_t blk, unsigned es, uint8_t *tmp);

/* Transform a part block by block with fn; parts TileDB could not shuffle,
 * not a multiple of both es and 8 bytes long, are copied (§10 #12).
 * Inlined into each caller, so that fn is called directly. */
ELEM_INLINE void each_block(const uint8_t *src, uint8_t *dst, size_t len, unsigned es,
			    block_fn fn)
{
	uint8_t tmp[BLOCK_BYTES];

	if (len % es != 0 || len % 8 != 0) {
		memcpy(dst, src, len);
		return;
	}
	for (size_t off = 0, blk; off < len; off += blk) {
		blk = len - off < BLOCK_BYTES ? len - off : BLOCK_BYTES;
		fn(src + off, dst + off, blk, es, tmp);
	}
}

static void unshuffle_part(const uint8_t *src, uint8_t *dst, size_t len, unsigned es)
{
	each_block(src, dst, len, es, unshuffle_block);
}

static void shuffle_part(const uint8_t *src, uint8_t *dst, size_t len, unsigned es)
{
	each_block(src, dst, len, es, shuffle_block);
}

static tf_status decode(const tf_filter_opts *o, const tf_stage *st, tf_stream *s, tf_error *err)
{
	unsigned es = tf_datatype_size(st->type);

	(void)o;
	if (es == 0)
		return tf_err(err, TF_E_INVAL, "invalid datatype %u", st->type);
	return elem_decode_parts(st, s, es, unshuffle_part, "bitshuffle", err);
}

/* Header: every input part as its 8-aligned part plus, if any, its tail
 * (bitshuffle_filter.cc, compute_parts; an empty part stays one part). */
static tf_status put_header(tf_buf *hdr, const tf_parts *data, tf_error *err)
{
	uint32_t count = 0;
	tf_status rc = TF_OK;

	for (size_t i = 0; i < data->n; i++) {
		if (data->v[i].len > UINT32_MAX)
			return tf_err(err, TF_E_INVAL, "part of %zu bytes exceeds 4 GiB",
				      data->v[i].len);
		count += data->v[i].len % 8 ? 2 : 1;
	}
	rc = tf_buf_put_u32(hdr, count, err);
	for (size_t i = 0; i < data->n && rc == TF_OK; i++) {
		uint32_t len = (uint32_t)data->v[i].len;

		rc = tf_buf_put_u32(hdr, len - len % 8, err);
		if (rc == TF_OK && len % 8)
			rc = tf_buf_put_u32(hdr, len % 8, err);
	}
	return rc;
}

static tf_status encode(const tf_filter_opts *o, const tf_stage *st, tf_parts *md,
			tf_parts *data, tf_error *err)
{
	unsigned es = tf_datatype_size(st->type);
	tf_buf hdr = TF_BUF_INIT(SIZE_MAX), out = TF_BUF_INIT(SIZE_MAX);
	tf_status rc;

	(void)o;
	if (es == 0)
		return tf_err(err, TF_E_INVAL, "invalid datatype %u", st->type);
	rc = put_header(&hdr, data, err);
	if (rc == TF_OK)
		rc = tf_buf_reserve(&out, tf_parts_total(data), err);
	for (size_t i = 0; rc == TF_OK && i < data->n; i++) {
		const uint8_t *p = data->v[i].p;
		size_t len = data->v[i].len, aligned = len - len % 8;

		if (len == 0)
			continue;
		shuffle_part(p, out.p + out.len, aligned, es);
		memcpy(out.p + out.len + aligned, p + aligned, len - aligned);
		out.len += len;
	}
	if (rc != TF_OK) {
		tf_buf_free(&hdr);
		tf_buf_free(&out);
		return rc;
	}
	return elem_encode_done(md, data, &hdr, &out, err);
}

const tf_filter_class tf_filter_bitshuffle = {
	.id = TF_F_BITSHUFFLE,
	.name = "bitshuffle",
	.layout = TF_OPTS_NONE,
	.decode = decode,
	.encode = encode,
};
