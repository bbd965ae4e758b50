/*
 * tf_merge_order.c - the global order of the sparse merge: coordinates
 * compared value by value, sort keys (space tiles, Hilbert values), cells'
 * timestamps, and the lower corners of fragments' domains that say when a
 * fragment joins.  The comparison every heap step makes (cmp_slots) lives
 * beside the heaps in tf_merge.c, where it is inlined.
 */
#include "views/tf_merge_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- coordinates ---------------------------------------------------------------------------- */

static int64_t as_signed(uint64_t u, unsigned size)
{
	return size == 8 ? (int64_t)u : (int64_t)(u << (64 - 8 * size)) >> (64 - 8 * size);
}

/* Typed comparison of two values of a fixed-size dimension. */
int merge_cmp_fixed(tf_datatype t, const uint8_t *a, const uint8_t *b)
{
	unsigned size = tf_datatype_size(t);
	uint64_t ua = tf_le_n(a, size), ub = tf_le_n(b, size);

	if (t == TF_DT_FLOAT32 || t == TF_DT_FLOAT64) {
		double da, db;
		float fa, fb;
		if (size == 4)
			memcpy(&fa, a, 4), memcpy(&fb, b, 4), da = fa, db = fb;
		else
			memcpy(&da, a, 8), memcpy(&db, b, 8);
		return (da > db) - (da < db);
	}
	if (tf_datatype_is_signed(t) || tf_datatype_is_datetime(t)) {
		int64_t sa = as_signed(ua, size), sb = as_signed(ub, size);
		return (sa > sb) - (sa < sb);
	}
	return (ua > ub) - (ua < ub);
}

/* Strings: bytewise, a shorter prefix first (std::string_view). */
int merge_cmp_var(const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
	int r = memcmp(a, b, na < nb ? na : nb);

	return r ? (r > 0) - (r < 0) : (na > nb) - (na < nb);
}

/* The space tile of a value along dimension d (Dimension::tile_idx):
 * integers (v - low) / extent in the type's unsigned width; reals
 * (v - low) / extent in the type's precision, truncated. */
static uint64_t tile_index(const tf_field *d, const uint8_t *v)
{
	unsigned size = tf_datatype_size(d->type);
	uint64_t mask = size == 8 ? UINT64_MAX : (((uint64_t)1 << (8 * size)) - 1);

	/* A coordinate outside the domain (or NaN) gives a quotient no tile
	 * index holds: clamped, as is any past 2^64. */
	if (d->type == TF_DT_FLOAT32) {
		float fv, lo, ext;
		memcpy(&fv, v, 4), memcpy(&lo, d->domain, 4), memcpy(&ext, d->extent, 4);
		return tf_u64_of_real((double)((fv - lo) / ext));
	}
	if (d->type == TF_DT_FLOAT64) {
		double dv, lo, ext;
		memcpy(&dv, v, 8), memcpy(&lo, d->domain, 8), memcpy(&ext, d->extent, 8);
		return tf_u64_of_real((dv - lo) / ext);
	}
	return ((tf_le_n(v, size) - tf_le_n(d->domain, size)) & mask) / (tf_le_n(d->extent, size) & mask ? tf_le_n(d->extent, size) & mask : 1);
}

/* The coordinates compared one by one, after equal sort keys. */
int merge_cmp_values(const tf_sparse *it, const merge_slot *a, uint64_t ca, const merge_slot *b, uint64_t cb)
{
	bool crow = it->schema->cell_order != 1 || it->hilbert;
	size_t n = it->ndims, na, nb;
	const uint8_t *pa, *pb;
	int r;

	for (size_t k = 0; k < n; k++) {
		size_t d = crow ? k : n - 1 - k;
		const tf_field *fd = &it->schema->dims[d];

		dim_value(a, d, ca, &pa, &na), dim_value(b, d, cb, &pb, &nb);
		r = fd->cell_val_num == TF_CELL_VAR ? merge_cmp_var(pa, na, pb, nb) : merge_cmp_fixed(fd->type, pa, pb);
		if (r)
			return r;
	}
	return 0;
}

uint64_t merge_cell_timestamp(const tf_sparse *it, const merge_slot *sl, uint64_t c)
{
	const tf_snap_frag *f = frag_of(it, sl);
	const uint8_t *p;
	size_t n;
	bool valid;

	if (!f->has_ts)
		return f->t1;	/* timestamp_range().first */
	tf_cellbuf_get(sl->buf, it->f_ts, c, &p, &n, &valid);
	return n == 8 ? tf_le64(p) : f->t1;
}

/* ---- Hilbert values (hilbert_order.cc, Dimension::map_to_uint64) ----------------------------- */

/* A coordinate mapped to [0, 2^bits): reals and integers by their place in
 * the domain, strings by their first 8 bytes (each byte sign-extended, as
 * TileDB ORs a char into a uint64). */
uint64_t tf_hilbert_coord(const tf_field *d, const uint8_t *p, size_t n, int bits)
{
	uint64_t max = ((uint64_t)1 << bits) - 1, ret = 0;
	unsigned size = tf_datatype_size(d->type);
	double v, lo, hi, q;

	if (d->cell_val_num == TF_CELL_VAR) {
		for (size_t i = 0; i < 8; i++) {
			ret <<= 8;
			if (i < n)
				ret |= (uint64_t)(int64_t)(int8_t)p[i];
		}
		return ret >> (64 - bits);
	}
	if (d->type == TF_DT_FLOAT32 || d->type == TF_DT_FLOAT64) {
		float f;
		if (size == 4) {
			memcpy(&f, p, 4), v = f;
			memcpy(&f, d->domain, 4), lo = f;
			memcpy(&f, d->domain + 4, 4), hi = f;
		} else {
			memcpy(&v, p, 8), memcpy(&lo, d->domain, 8), memcpy(&hi, d->domain + 8, 8);
		}
	} else if (tf_datatype_is_signed(d->type) || tf_datatype_is_datetime(d->type)) {
		v = (double)as_signed(tf_le_n(p, size), size);
		lo = (double)as_signed(tf_le_n(d->domain, size), size);
		hi = (double)as_signed(tf_le_n(d->domain + size, size), size);
	} else {
		v = (double)tf_le_n(p, size), lo = (double)tf_le_n(d->domain, size);
		hi = (double)tf_le_n(d->domain + size, size);
	}
	q = (v - lo) / (hi - lo) * (double)max;
	return q > 0 && q < 18446744073709551616.0 ? (uint64_t)q : 0;
}

/* Coordinates (bits each) to the Hilbert index, after J. Skilling,
 * "Programming the Hilbert curve" (2004): axes to transpose, then the
 * transpose's bits interleaved, dimension 0 most significant per level. */
uint64_t tf_hilbert_index(uint64_t *x, size_t n, int bits)
{
	uint64_t m = (uint64_t)1 << (bits - 1), t = 0, h = 0;

	for (uint64_t q = m; q > 1; q >>= 1) {	/* inverse undo */
		uint64_t p = q - 1;
		for (size_t i = 0; i < n; i++) {
			if (x[i] & q) {
				x[0] ^= p;
			} else {
				uint64_t s = (x[0] ^ x[i]) & p;
				x[0] ^= s, x[i] ^= s;
			}
		}
	}
	for (size_t i = 1; i < n; i++)	/* Gray encode */
		x[i] ^= x[i - 1];
	for (uint64_t q = m; q > 1; q >>= 1)
		if (x[n - 1] & q)
			t ^= q - 1;
	for (size_t i = 0; i < n; i++)
		x[i] ^= t;
	for (int b = bits - 1; b >= 0; b--)
		for (size_t i = 0; i < n; i++)
			h = h << 1 | (x[i] >> b & 1);
	return h;
}

/* A fixed-size coordinate that is not a real (it->fast) as a uint64 of
 * the same order as merge_cmp_fixed's: signed ones offset by 2^63. */
static uint64_t ordered_value(const tf_field *fd, const merge_slot *sl, size_t d, uint64_t c)
{
	unsigned size = tf_datatype_size(fd->type);
	const uint8_t *p;
	size_t n;
	uint64_t u;

	dim_value(sl, d, c, &p, &n);
	u = tf_le_n(p, size);
	if (tf_datatype_is_signed(fd->type) || tf_datatype_is_datetime(fd->type))
		u = (uint64_t)as_signed(u, size) ^ ((uint64_t)1 << 63);
	return u;
}

/* merge_compute_keys where it->fast, a dimension at a time: each value read
 * from the window as it lies, its tile's quotient taken only when it
 * leaves the last value's tile (cells come sorted: a window of 1,600
 * cells spans a few tiles). */
static void fast_keys(const tf_sparse *it, merge_slot *sl)
{
	const tf_cellbuf *b = sl->buf;
	bool trow = it->schema->tile_order != 1, crow = it->schema->cell_order != 1;
	size_t nd = it->ndims, nk = 2 * nd;
	uint64_t *keys = (uint64_t *)(void *)b->extra;

	for (size_t d = 0; d < nd; d++) {
		const tf_field *fd = &it->schema->dims[d];
		unsigned size = tf_datatype_size(fd->type);
		uint64_t mask = size == 8 ? UINT64_MAX : (((uint64_t)1 << (8 * size)) - 1);
		uint64_t lo = tf_le_n(fd->domain, size) & mask, ext = tf_le_n(fd->extent, size) & mask;
		uint64_t flip = tf_datatype_is_signed(fd->type) || tf_datatype_is_datetime(fd->type) ? (uint64_t)1 << 63 : 0;
		uint64_t *tk = keys + (trow ? d : nd - 1 - d), *vk = keys + nd + (crow ? d : nd - 1 - d);
		uint64_t qlo = 0, t = 0;	/* the last tile: offsets [qlo, qlo + ext) */
		const uint8_t *p = b->f[d].data;
		bool known = false;

		ext = !fd->has_extent ? 0 : ext ? ext : 1;	/* tile_index's divisor */
		for (uint64_t i = 0; i < b->ncells; i++, p += size, tk += nk, vk += nk) {
			uint64_t u = tf_le_n(p, size), q = (u - lo) & mask;

			*vk = flip ? (uint64_t)as_signed(u, size) ^ flip : u;
			if (!ext) {
				*tk = 0;
				continue;
			}
			if (!known || q - qlo >= ext) {	/* another tile (tile_index's quotient) */
				t = q / ext;
				qlo = t * ext;
				known = true;
			}
			*tk = t;
		}
	}
}

/* The sort keys of every cell of the slot's window (its extra bytes):
 * Hilbert values, or each dimension's space tile where tile order
 * compares it (those with an extent, not var-sized), 0 elsewhere. */
tf_status merge_compute_keys(const tf_sparse *it, merge_slot *sl, tf_error *err)
{
	const tf_cellbuf *b = sl->buf;
	bool trow = it->schema->tile_order != 1, crow = it->schema->cell_order != 1;
	uint64_t *k = (uint64_t *)(void *)b->extra, x[16];
	size_t nd = it->ndims, n;
	const uint8_t *p;

	if (it->hilbert && nd > 16)
		return tf_err(err, TF_E_UNSUPPORTED, "Hilbert order over %zu dimensions", nd);
	if (it->fast)
		return fast_keys(it, sl), TF_OK;
	for (uint64_t c = b->first; c < b->first + b->ncells; c++) {
		for (size_t j = 0; j < nd; j++) {
			size_t d = it->hilbert || trow ? j : nd - 1 - j;
			const tf_field *fd = &it->schema->dims[d];
			bool skip = !it->hilbert && (fd->cell_val_num == TF_CELL_VAR || !fd->has_extent);

			if (!skip)
				dim_value(sl, d, c, &p, &n);
			if (it->hilbert)
				x[d] = tf_hilbert_coord(fd, p, n, it->hbits);
			else
				*k++ = skip ? 0 : tile_index(fd, p);
		}
		if (it->hilbert)
			*k++ = tf_hilbert_index(x, nd, it->hbits);
		for (size_t j = 0; it->fast && j < nd; j++)
			*k++ = ordered_value(&it->schema->dims[crow ? j : nd - 1 - j], sl, crow ? j : nd - 1 - j, c);
	}
	return TF_OK;
}

/* ---- lower corners ----------------------------------------------------------------------------- */

/* A fragment's corner (tf_snap_frag.corner) parsed into it->cp, cn, ct. */
static void parse_corner(tf_sparse *it, const uint8_t *corner)
{
	size_t at = 0;

	for (size_t d = 0; d < it->ndims; d++) {
		const tf_field *fd = &it->schema->dims[d];
		uint32_t n = tf_le32(corner + at);

		it->cp[d] = corner + at + 4, it->cn[d] = n;
		it->ct[d] = fd->cell_val_num == TF_CELL_VAR || !fd->has_extent ? 0 : tile_index(fd, it->cp[d]);
		at += 4 + (((size_t)n + 3) & ~(size_t)3);
	}
}

/* Global order of a parsed corner and coordinates given by value and
 * space tile per dimension (q, qn, qt): <0 if the corner comes first. */
static int cmp_corner(const tf_sparse *it, const uint8_t *const *q, const size_t *qn, const uint64_t *qt)
{
	bool trow = it->schema->tile_order != 1, crow = it->schema->cell_order != 1;
	size_t n = it->ndims;
	int r;

	for (size_t k = 0; k < n; k++) {
		size_t d = trow ? k : n - 1 - k;
		if (it->ct[d] != qt[d])
			return it->ct[d] < qt[d] ? -1 : 1;
	}
	for (size_t k = 0; k < n; k++) {
		size_t d = crow ? k : n - 1 - k;
		const tf_field *fd = &it->schema->dims[d];

		r = fd->cell_val_num == TF_CELL_VAR ? merge_cmp_var(it->cp[d], it->cn[d], q[d], qn[d])
						    : merge_cmp_fixed(fd->type, it->cp[d], q[d]);
		if (r)
			return r;
	}
	return 0;
}

/* Whether waiting slot w's corner comes at or before cell c of active
 * slot a's window: then w may hold a cell that a's does not precede, and
 * must join before a's cell is merged. */
bool merge_corner_reached_at(tf_sparse *it, size_t w, const merge_slot *a, uint64_t c)
{
	const uint8_t *q[64];
	size_t qn[64], n = it->ndims;
	uint64_t qt[64];
	const uint64_t *k = keys_of(it, a, c);
	bool trow = it->schema->tile_order != 1;

	if (n > 64)
		return true;
	for (size_t d = 0; d < n; d++) {
		dim_value(a, d, c, &q[d], &qn[d]);
		qt[d] = k[trow ? d : n - 1 - d];	/* keys_of: in tile order */
	}
	parse_corner(it, tf_snapshot_frag(it->s, it->slots[w].frag)->corner);
	return cmp_corner(it, q, qn, qt) <= 0;
}

bool merge_corner_reached(tf_sparse *it, size_t w, const merge_slot *a)
{
	return merge_corner_reached_at(it, w, a, cell_of(a));
}

/* Order of two waiting slots' corners (0: the same; also past 64
 * dimensions, where read order decides alone). */
static int cmp_pend(tf_sparse *it, size_t a, size_t b)
{
	const uint8_t *q[64];
	size_t qn[64];
	uint64_t qt[64];

	if (it->ndims > 64)
		return 0;
	parse_corner(it, tf_snapshot_frag(it->s, it->slots[b].frag)->corner);
	for (size_t d = 0; d < it->ndims; d++)
		q[d] = it->cp[d], qn[d] = it->cn[d], qt[d] = it->ct[d];
	parse_corner(it, tf_snapshot_frag(it->s, it->slots[a].frag)->corner);
	return cmp_corner(it, q, qn, qt);
}

/* Order of two waiting slots: by corner, then read order. */
bool merge_pend_less(tf_sparse *it, size_t a, size_t b)
{
	int r = cmp_pend(it, a, b);

	return r ? r < 0 : a < b;
}

bool merge_same_corner(tf_sparse *it, size_t a, size_t b)
{
	return it->ndims <= 64 && cmp_pend(it, a, b) == 0;
}
