/*
 * double_delta.c - DOUBLE_DELTA (filter type 6), a member of the
 * compression family (FORMAT.md §4.1, §4.9; tiledb/sm/compressors/dd_compressor.cc).
 *
 * Each part (metadata parts of earlier filters included, §10 #10) holds
 * n = len / sizeof(T) values x_i of the integer type T (the reinterpret
 * type when it is not ANY, else type_in; §4.9 table; floats refused):
 *     u8 B, u64 n, then
 *     if B >= 8 sizeof(T) - 1: the part's bytes raw ("no gain" fallback);
 *     else x_0, x_1 (T each) and, for n >= 3, the records of
 *     dd_i = (x_i - x_(i-1)) - (x_(i-1) - x_(i-2)), i = 2 .. n-1: one sign
 *     bit (1 = negative) then B bits of |dd_i|, MSB first, packed from
 *     bit 63 down in 64-bit words stored little-endian; a last partial
 *     word is padded with zero bits.
 * Decoding works modulo 2^64 and truncates to T, which is exactly
 * TileDB's int64 arithmetic followed by the cast to T.
 *
 * Where TileDB's encoder loses data (its iassert is compiled out of release
 * builds), this one uses the fallback instead, which TileDB's decoder
 * reads correctly since it copies whatever follows the header: for an empty
 * part (TileDB writes x_0 and x_1 read from beyond the input, and cannot
 * decode the result) and for a part ending in a partial value (TileDB
 * drops those bytes).  TileDB's own form of both is still decoded, except
 * that dropped bytes are reported as corrupt.
 */
#include "framing.h"
#include "elem.h"

/* B from which the part is stored raw (dd_compressor.cc, compress). */
static unsigned fallback_bits(const elem_int *t)
{
	return 8 * t->size - 1;
}

/* 64-bit words holding nrec records of width bits. */
static uint64_t stream_words(uint64_t nrec, unsigned width)
{
	return (nrec * width + 63) / 64;
}

/* ---- decoding ------------------------------------------------------------------------ */

/*
 * Rebuild x_2 .. x_(nrec+1) into dst from the record stream, given x_0 and
 * x_1; `words` holds exactly stream_words(nrec, B + 1) words.
 */
ELEM_INLINE void
unpack_es(const uint8_t *words, uint64_t nrec, unsigned bits, uint64_t x0, uint64_t x1,
	  uint8_t *dst, unsigned es)
{
	const unsigned width = bits + 1;
	const uint64_t mag_mask = ((uint64_t)1 << bits) - 1;
	uint64_t pos = 0;

	for (uint64_t i = 0; i < nrec; i++, pos += width) {
		unsigned off = pos & 63;
		const uint8_t *w = words + 8 * (pos >> 6);
		uint64_t rec = elem_ld64(w) << off, mag, x2;

		if (off + width > 64)	/* the record runs into the next word */
			rec |= elem_ld64(w + 8) >> (64 - off);
		rec >>= 64 - width;
		mag = rec & mag_mask;
		x2 = ((rec >> bits) ? 0 - mag : mag) + 2 * x1 - x0;
		elem_st_n(dst + i * es, es, x2);
		x0 = x1;
		x1 = x2;
	}
}

static void unpack(const uint8_t *words, uint64_t nrec, unsigned bits, uint64_t x0, uint64_t x1,
		   uint8_t *dst, unsigned es)
{
	switch (es) {
	case 1: unpack_es(words, nrec, bits, x0, x1, dst, 1); break;
	case 2: unpack_es(words, nrec, bits, x0, x1, dst, 2); break;
	case 4: unpack_es(words, nrec, bits, x0, x1, dst, 4); break;
	default: unpack_es(words, nrec, bits, x0, x1, dst, 8); break;
	}
}

/* The coded form (B below the fallback): x_0, x_1, records. */
static tf_status decode_coded(tf_reader *r, unsigned bits, uint64_t n, const elem_int *t,
			      uint8_t *dst, tf_error *err)
{
	/* TileDB writes x_1 whenever n != 1: for n = 0 both values are stray. */
	size_t head = (n == 1 ? 1 : 2) * (size_t)t->size;
	uint64_t words = n >= 3 ? stream_words(n - 2, bits + 1) : 0;

	if (r->n != head + 8 * words)
		return tf_err(err, TF_E_CORRUPT, "%zu bytes after the header, %llu values of "
			      "%u bits need %llu", r->n, (unsigned long long)n, bits,
			      (unsigned long long)(head + 8 * words));
	if (n == 0)
		return TF_OK;
	memcpy(dst, r->p, n == 1 ? t->size : 2 * (size_t)t->size);
	if (n >= 3)
		unpack(r->p + head, n - 2, bits, elem_ld_n(r->p, t->size),
		       elem_ld_n(r->p + t->size, t->size), dst + head, t->size);
	return TF_OK;
}

static tf_status decode_part(const tf_filter_opts *o, const tf_stage *st, tf_span src,
			     uint8_t *dst, size_t len, tf_error *err)
{
	tf_reader r = tf_reader_of(src);
	uint8_t bits;
	uint64_t n;
	elem_int t;
	tf_status rc;

	if ((rc = elem_reinterpret_int(o, st, "double-delta-code", &t, err)) != TF_OK ||
	    (rc = tf_get_u8(&r, &bits, "bit size", err)) != TF_OK ||
	    (rc = tf_get_u64(&r, &n, "value count", err)) != TF_OK)
		return rc;
	if ((rc = elem_check_count(n, len, &t, err)) != TF_OK)
		return rc;
	if (bits >= fallback_bits(&t)) {
		if (r.n != len)
			return tf_err(err, TF_E_CORRUPT, "raw part of %zu bytes, expected %zu",
				      r.n, len);
		if (len)
			memcpy(dst, r.p, len);
		return TF_OK;
	}
	if (len % t.size)
		return elem_dropped_tail(len, &t, err);
	return decode_coded(&r, bits, n, &t, dst, err);
}

/* ---- encoding ------------------------------------------------------------------------ */

/* x_i as int64 the way TileDB widens T: sign- or zero-extended. */
static uint64_t value_at(const uint8_t *p, uint64_t i, const elem_int *t)
{
	uint64_t v = elem_ld_n(p + i * t->size, t->size);

	return t->is_signed ? elem_sext(v, t->size) : v;
}

/* a - b as an int64 (two's complement in a uint64), or false if it does not
 * fit: checked_arithmetic<int64_t>::sub / <uint64_t>::sub_signed. */
static bool delta_fits(uint64_t a, uint64_t b, bool is_signed, uint64_t *d)
{
	const uint64_t min = (uint64_t)1 << 63;

	*d = a - b;
	if (is_signed)	/* overflow iff a, b differ in sign and d's sign is b's */
		return !(((a ^ b) & (a ^ *d)) >> 63);
	return a >= b ? *d < min : b - a <= min;
}

static uint64_t magnitude(uint64_t v)
{
	return v >> 63 ? 0 - v : v;
}

/*
 * B as compute_bitsize chooses it: 0 for n <= 2, else the bit length (at
 * least 1) of the largest of |x_1 - x_0| and every |dd_i|.  A delta or
 * double delta outside int64 fails the write, as in TileDB.
 */
static tf_status choose_bits(const uint8_t *p, uint64_t n, const elem_int *t, unsigned *bits,
			     tf_error *err)
{
	uint64_t prev = 0, cur, dd = 0, max = 0;

	*bits = 0;
	if (n <= 2)
		return TF_OK;
	for (uint64_t i = 1; i < n; i++) {
		if (!delta_fits(value_at(p, i, t), value_at(p, i - 1, t), t->is_signed, &cur))
			return tf_err(err, TF_E_INVAL, "delta exceeds the range of int64");
		if (i >= 2 && !delta_fits(cur, prev, true, &dd))
			return tf_err(err, TF_E_INVAL, "double delta exceeds the range of int64");
		if (i == 1 || magnitude(dd) > max)
			max = i == 1 ? magnitude(cur) : magnitude(dd);
		prev = cur;
	}
	do
		++*bits;
	while (max >>= 1);
	return TF_OK;
}

/* Append the records of x_2 .. x_(n-1) to at (stream_words(n - 2, B + 1) words). */
static void pack(const uint8_t *p, uint64_t n, unsigned bits, const elem_int *t, uint8_t *at)
{
	const unsigned width = bits + 1;
	uint64_t acc = 0, prev = value_at(p, 1, t) - value_at(p, 0, t);
	unsigned used = 0;	/* bits of acc filled, from the MSB */

	for (uint64_t i = 2; i < n; i++) {
		uint64_t cur = value_at(p, i, t) - value_at(p, i - 1, t), dd = cur - prev;
		uint64_t rec = (dd >> 63) << bits | magnitude(dd);

		prev = cur;
		if (used + width < 64) {
			acc |= rec << (64 - used - width);
			used += width;
			continue;
		}
		used = used + width - 64;	/* bits that spill into the next word */
		elem_st64(at, acc | rec >> used);
		at += 8;
		acc = used ? rec << (64 - used) : 0;
	}
	if (used)
		elem_st64(at, acc);
}

static tf_status encode_part(const tf_filter_opts *o, const tf_stage *st, tf_span src,
			     tf_buf *out, tf_error *err)
{
	uint64_t n, words;
	unsigned bits;
	size_t size;
	uint8_t *at;
	elem_int t;
	tf_status rc;

	if ((rc = elem_reinterpret_int(o, st, "double-delta-code", &t, err)) != TF_OK)
		return rc;
	n = src.n / t.size;
	if ((rc = choose_bits(src.p, n, &t, &bits, err)) != TF_OK)
		return rc;
	/* TileDB would lose data here; the fallback keeps it (see top). */
	if ((n == 0 || src.n % t.size) && bits < fallback_bits(&t))
		bits = fallback_bits(&t);
	words = n >= 3 ? stream_words(n - 2, bits + 1) : 0;
	size = bits >= fallback_bits(&t) ? src.n : (n == 1 ? 1 : 2) * t.size + 8 * words;
	if ((rc = tf_buf_grow(out, 9 + size, &at, err)) != TF_OK)
		return rc;
	at[0] = (uint8_t)bits;
	tf_put_le64(at + 1, n);
	if (bits >= fallback_bits(&t)) {
		if (src.n)
			memcpy(at + 9, src.p, src.n);
	} else {
		memcpy(at + 9, src.p, (n == 1 ? 1 : 2) * t.size);
		if (n >= 3)
			pack(src.p, n, bits, &t, at + 9 + 2 * t.size);
	}
	out->len += 9 + size;
	return TF_OK;
}

static const tf_codec codec = { "double delta", decode_part, encode_part };

TF_FRAMING_FUNCTIONS(codec)

const tf_filter_class tf_filter_double_delta = {
	.id = TF_F_DOUBLE_DELTA,
	.name = "double_delta",
	.layout = TF_OPTS_REINTERPRET,
	.compressor = 6,
	.reinterpret_since = 20,
	.consumes_md = true,
	.out_type = elem_reinterpret_type,
	.decode = framed_decode,
	.encode = framed_encode,
};
