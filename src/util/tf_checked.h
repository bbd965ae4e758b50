/*
 * tf_checked.h - checked arithmetic for sizes, counts and extents read from
 * storage.
 *
 * Every product or sum of numbers a schema, fragment metadata or a tile
 * header claims goes through these before it sizes an allocation, bounds a
 * loop or divides: a wrapped product is a small number that passes every
 * later check.  Two kinds:
 *
 *   - exact: tf_u64_mul / tf_u64_add give false when the result does not
 *     fit (the caller reports TF_E_CORRUPT, naming what claimed it);
 *   - saturating: tf_u64_mul_sat / tf_u64_add_sat (and the size_t ones)
 *     give the type's maximum instead, which every limit then refuses,
 *     where one comparison follows anyway.
 *
 * tf_u64_of_real converts a float quotient (a tile index, a Hilbert
 * coordinate) without the undefined behaviour of a cast of NaN, a
 * negative or a value past 2^64.
 */
#ifndef TF_CHECKED_H
#define TF_CHECKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* a * b into *out; false (and *out unchanged) if it does not fit. */
static inline bool tf_u64_mul(uint64_t a, uint64_t b, uint64_t *out)
{
	uint64_t r;

	if (__builtin_mul_overflow(a, b, &r))
		return false;
	*out = r;
	return true;
}

static inline bool tf_u64_add(uint64_t a, uint64_t b, uint64_t *out)
{
	uint64_t r;

	if (__builtin_add_overflow(a, b, &r))
		return false;
	*out = r;
	return true;
}

static inline uint64_t tf_u64_mul_sat(uint64_t a, uint64_t b)
{
	uint64_t r;

	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static inline uint64_t tf_u64_add_sat(uint64_t a, uint64_t b)
{
	uint64_t r;

	return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* a + b, a * b without overflow, or SIZE_MAX (which every limit rejects). */
static inline size_t tf_size_add(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }
static inline size_t tf_size_mul(size_t a, size_t b) { return b && a > SIZE_MAX / b ? SIZE_MAX : a * b; }

/* A uint64_t as a size_t, or SIZE_MAX where it does not fit. */
static inline size_t tf_size_of_u64(uint64_t v) { return v > SIZE_MAX ? SIZE_MAX : (size_t)v; }

/* A real quotient as an unsigned count: NaN and anything below 1 give 0,
 * anything at or past 2^64 UINT64_MAX, the rest truncated. */
static inline uint64_t tf_u64_of_real(double q)
{
	if (!(q >= 1.0))	/* NaN too */
		return 0;
	if (q >= 18446744073709551616.0)
		return UINT64_MAX;
	return (uint64_t)q;
}

#endif
