/*
 * tf_hash.h - the one hash of strings and bytes of the library (64-bit
 * FNV-1a), and the one mix of two integers.
 *
 * Used for tables (tf_lru's keys), for rings that remember a key by its
 * hash (S3 continuation tokens, reserved names not found, published index
 * entries skipped) and for object ids compared by hash first.  None of
 * these is an adversary's choice that could cost more than a longer hash
 * chain, and none needs to survive a change of hash: nothing hashed here
 * is written anywhere.  FNV-1a: one multiply per byte, no state, good low
 * bits for a power-of-two table (the names hashed are short: paths of a
 * few dozen bytes).
 */
#ifndef TF_HASH_H
#define TF_HASH_H

#include <stddef.h>
#include <stdint.h>

#define TF_HASH_SEED 14695981039346656037ull	/* FNV-1a's offset basis */
#define TF_HASH_PRIME 1099511628211ull

/* h continued over n bytes at p (start from TF_HASH_SEED). */
static inline uint64_t tf_hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * TF_HASH_PRIME;
	return h;
}

/* h continued over the NUL-terminated string s. */
static inline uint64_t tf_hash_more(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * TF_HASH_PRIME;
	return h;
}

/* A string's hash. */
static inline uint64_t tf_hash_str(const char *s)
{
	return tf_hash_more(TF_HASH_SEED, s);
}

/* Two integers mixed (a cache key of owner and index): every bit of each
 * reaches the low bits a table uses. */
static inline uint64_t tf_hash_pair(uint64_t a, uint64_t b)
{
	uint64_t h = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull;

	return h ^ h >> 29;
}

#endif
