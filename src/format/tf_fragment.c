/*
 * tf_fragment.c - fragment metadata (FORMAT.md §8.4-8.7,
 * tiledb/sm/fragment/fragment_metadata.cc).
 */
#include "config.h"

#include "format/tf_fragment.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/tf_tile.h"

/* The per-field lists of tile positions and sizes (§8.6). */
enum { L_OFFSETS, L_VAR_OFFSETS, L_VAR_SIZES, L_VALIDITY, L_KINDS };
/* The per-field file sizes (§8.5). */
enum { S_FIXED, S_VAR, S_VALIDITY, S_KINDS };

typedef struct u64_list {
	uint64_t *v;
	size_t n;
	bool loaded;
} u64_list;

struct tf_fragment {
	tf_source *src;		/* borrowed */
	char *dir, *name, *meta_path;	/* relative to the source */
	tf_version meta_ver;	/* lists are read later: from this version only */
	const tf_key *key;
	uint32_t version;	/* as stored */
	uint32_t layout;	/* the footer layout used */
	const tf_schema *schema;
	uint64_t sparse_tile_num, last_tile_cell_num;
	bool dense, has_ts, has_dm;
	size_t n;		/* fields: attributes, __coords, dimensions, specials */
	uint64_t *sizes[S_KINDS];	/* n each */
	uint64_t *where[L_KINDS];	/* generic tile offset of each list, n each */
	u64_list *lists[L_KINDS];	/* n each, loaded on first use */
	pthread_mutex_t lists_lock;	/* guards their loading */
	uint64_t footer_offset;
	uint64_t file_size;
	uint8_t *small;		/* the whole file, when at most SMALL_META bytes */
	uint8_t *ned;		/* the non-empty domain as stored (see tf_fragment_ned) */
	size_t ned_len;
	bool ned_null;
};

/* A metadata file this small is read whole when opened, and every later
 * read (footer, lists) comes from those bytes: a fragment of one cell has
 * ~1 KiB of metadata, and opening it again for each of its lists was 10
 * opens per fragment (200,000 fragments: 2,000,000 path walks).  The array
 * keeps 1,024 idle fragments: 4 MiB of such bytes at most. */
#define SMALL_META ((uint64_t)4 << 10)

static const char *const list_names[L_KINDS] = {
	"tile offsets", "tile var offsets", "tile var sizes", "tile validity offsets",
};

const char *tf_role_name(tf_role r)
{
	static const char *const names[] = { "data", "offsets", "var", "validity" };
	return names[r];
}

uint32_t tf_fragment_version(const tf_fragment *fr) { return fr->version; }
const tf_schema *tf_fragment_schema(const tf_fragment *fr) { return fr->schema; }
uint64_t tf_fragment_footer_offset(const tf_fragment *fr) { return fr->footer_offset; }

/* ---- reading the metadata file ------------------------------------------------------ */

static tf_status read_range(const tf_fragment *fr, uint64_t off, uint64_t len, tf_buf *out, tf_error *err)
{
	tf_object *o;
	tf_status rc;

	out->len = 0;
	if (fr->small) {
		if (off > fr->file_size || len > fr->file_size - off)
			return tf_err(err, TF_E_CORRUPT, "%" PRIu64 " bytes at %" PRIu64 " of a %" PRIu64 "-byte file",
				      len, off, fr->file_size);
		if ((rc = tf_buf_reserve(out, (size_t)len, err)) == TF_OK) {
			memcpy(out->p, fr->small + off, (size_t)len);
			out->len = (size_t)len;
		}
		return rc;
	}
	if ((rc = tf_object_open(fr->src, fr->meta_path, &fr->meta_ver, &o, err)) != TF_OK)
		return rc;
	rc = len > SIZE_MAX ? tf_err(err, TF_E_NOMEM, "too large") : tf_buf_reserve(out, (size_t)len, err);
	if (rc == TF_OK && (rc = tf_object_read(o, off, out->p, (size_t)len, err)) == TF_OK)
		out->len = (size_t)len;
	tf_object_close(o);
	return rc;
}

/* Decode the generic tile at `off` of the metadata file into out. */
static tf_status read_generic(const tf_fragment *fr, uint64_t off, tf_buf *out, tf_error *err)
{
	tf_buf raw = TF_BUF_INIT(1u << 30);
	tf_workspace *ws = tf_workspace_new();
	uint64_t total;
	tf_status rc;

	out->len = 0;
	if (!ws)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	/* 34 fixed header bytes say how long the rest is (§6). */
	rc = off < fr->file_size ? read_range(fr, off, TF_GENERIC_BASE_SIZE, &raw, err)
				 : tf_err(err, TF_E_CORRUPT, "generic tile offset %" PRIu64 " past the end", off);
	if (rc == TF_OK) {
		total = TF_GENERIC_BASE_SIZE + (uint64_t)tf_le32(raw.p + 30) + tf_le64(raw.p + 4);
		rc = total > fr->file_size - off
			? tf_err(err, TF_E_CORRUPT, "generic tile at %" PRIu64 " runs past the end", off)
			: read_range(fr, off, total, &raw, err);
	}
	if (rc == TF_OK)
		rc = tf_generic_decode(tf_span_of(raw.p, raw.len), fr->key, ws, out, NULL, err);
	tf_buf_free(&raw);
	tf_workspace_free(ws);
	return rc;
}

/* ---- the footer (§8.5) ------------------------------------------------------------------ */

typedef struct footer {
	tf_reader r;
	uint32_t layout;
	tf_error *err;
} footer;

static tf_status get_u64s(tf_reader *r, uint64_t *dst, size_t n, const char *what, tf_error *err)
{
	tf_status rc = TF_OK;

	for (size_t i = 0; i < n && rc == TF_OK; i++)
		rc = tf_get_u64(r, &dst[i], what, err);
	return rc;
}

static tf_status skip_bytes(tf_reader *r, uint64_t n, const char *what, tf_error *err)
{
	tf_span s;
	return tf_get_span(r, n, &s, what, err);
}

static tf_status skip_domain(footer *ft, const tf_schema *s, bool null_domain)
{
	uint64_t total = 0, range, start;
	tf_status rc = TF_OK;

	if (ft->layout < 5)	/* all dimensions share dimension 0's type */
		return skip_bytes(&ft->r, 2 * (uint64_t)s->ndims * tf_datatype_size(s->dims[0].type),
				  "non-empty domain", ft->err);
	for (size_t d = 0; d < s->ndims && rc == TF_OK; d++) {
		const tf_field *dim = &s->dims[d];
		if (null_domain || dim->cell_val_num != TF_CELL_VAR)
			total += 2 * (uint64_t)tf_datatype_size(dim->type);
		else if ((rc = tf_get_u64(&ft->r, &range, "domain range size", ft->err)) == TF_OK &&
			 (rc = tf_get_u64(&ft->r, &start, "domain start size", ft->err)) == TF_OK)
			rc = start > range ? tf_err(ft->err, TF_E_CORRUPT, "domain start of %llu bytes "
						    "in a range of %llu", (unsigned long long)start,
						    (unsigned long long)range)
					   : skip_bytes(&ft->r, range, "domain range", ft->err);
	}
	/* A null domain is followed by zeros of the fixed size (§10 #27). */
	return rc == TF_OK ? skip_bytes(&ft->r, total, "non-empty domain", ft->err) : rc;
}

/* The domain's bytes as stored, kept for tf_fragment_ned. */
static tf_status keep_domain(tf_fragment *fr, footer *ft, const tf_schema *s, bool null_domain)
{
	const uint8_t *from = ft->r.p;
	tf_status rc = skip_domain(ft, s, null_domain);

	free(fr->ned);
	fr->ned = NULL;
	fr->ned_len = (size_t)(ft->r.p - from);
	fr->ned_null = null_domain;
	if (rc == TF_OK && !(fr->ned = malloc(fr->ned_len ? fr->ned_len : 1)))
		return tf_err(ft->err, TF_E_NOMEM, "out of memory");
	if (rc == TF_OK)
		memcpy(fr->ned, from, fr->ned_len);
	return rc;
}

static tf_status alloc_lists(tf_fragment *fr, tf_error *err)
{
	for (int k = 0; k < S_KINDS; k++)
		if (!(fr->sizes[k] = calloc(fr->n, sizeof(uint64_t))))
			return tf_err(err, TF_E_NOMEM, "out of memory");
	for (int k = 0; k < L_KINDS; k++)
		if (!(fr->where[k] = calloc(fr->n, sizeof(uint64_t))) ||
		    !(fr->lists[k] = calloc(fr->n, sizeof(u64_list))))
			return tf_err(err, TF_E_NOMEM, "out of memory");
	return TF_OK;
}

static void free_lists(tf_fragment *fr)
{
	for (int k = 0; k < S_KINDS; k++) {
		free(fr->sizes[k]);
		fr->sizes[k] = NULL;
	}
	for (int k = 0; k < L_KINDS; k++) {
		for (size_t i = 0; fr->lists[k] && i < fr->n; i++)
			free(fr->lists[k][i].v);
		free(fr->lists[k]);
		free(fr->where[k]);
		fr->lists[k] = NULL;
		fr->where[k] = NULL;
	}
}

/* Fields counted in the footer's arrays (num_dims_and_attrs). */
static void count_fields(tf_fragment *fr, const tf_schema *s, uint32_t layout)
{
	fr->n = s->nattrs + 1;	/* attributes, then the __coords slot */
	if (layout >= 5)
		fr->n += s->ndims + fr->has_ts + 2 * (size_t)fr->has_dm;
}

/* Everything from the file sizes on; nvar: entries of the var arrays. */
static tf_status parse_positions(tf_fragment *fr, footer *ft, size_t nvar)
{
	uint64_t rtree, skip = 0;
	tf_status rc;

	if ((rc = alloc_lists(fr, ft->err)) != TF_OK ||
	    (rc = get_u64s(&ft->r, fr->sizes[S_FIXED], fr->n, "file sizes", ft->err)) != TF_OK ||
	    (rc = get_u64s(&ft->r, fr->sizes[S_VAR], nvar, "file var sizes", ft->err)) != TF_OK ||
	    (ft->layout >= 7 &&
	     (rc = get_u64s(&ft->r, fr->sizes[S_VALIDITY], fr->n, "file validity sizes", ft->err)) != TF_OK) ||
	    (rc = tf_get_u64(&ft->r, &rtree, "R-tree offset", ft->err)) != TF_OK ||
	    (rc = get_u64s(&ft->r, fr->where[L_OFFSETS], fr->n, list_names[0], ft->err)) != TF_OK ||
	    (rc = get_u64s(&ft->r, fr->where[L_VAR_OFFSETS], nvar, list_names[1], ft->err)) != TF_OK ||
	    (rc = get_u64s(&ft->r, fr->where[L_VAR_SIZES], nvar, list_names[2], ft->err)) != TF_OK ||
	    (ft->layout >= 7 &&
	     (rc = get_u64s(&ft->r, fr->where[L_VALIDITY], fr->n, list_names[3], ft->err)) != TF_OK))
		return rc;
	if (ft->layout >= 11)	/* tile mins, maxes, sums, null counts */
		skip += 4 * 8 * (uint64_t)fr->n;
	skip += 8 * ((ft->layout >= 12) + (ft->layout >= 16));
	return skip_bytes(&ft->r, skip, "statistics offsets", ft->err);
}

static tf_status skip_optional_sections(footer *ft)
{
	uint32_t count, size;
	uint64_t id;
	tf_status rc = tf_get_u32(&ft->r, &count, "optional section count", ft->err);

	for (uint32_t i = 0; i < count && rc == TF_OK; i++)
		if ((rc = tf_get_u64(&ft->r, &id, "optional section id", ft->err)) == TF_OK &&
		    (rc = tf_get_u32(&ft->r, &size, "optional section size", ft->err)) == TF_OK)
			rc = skip_bytes(&ft->r, size, "optional section", ft->err);
	return rc;
}

static tf_status parse_footer(tf_fragment *fr, tf_span bytes, uint32_t layout, const tf_schema *legacy,
			      tf_schema_lookup lookup, void *ctx, tf_error *err)
{
	footer ft = { tf_reader_of(bytes), layout, err };
	uint8_t dense, null_domain, ts = 0, dm = 0;
	const tf_schema *s = legacy;
	uint64_t len;
	tf_span name;
	char *copy;
	tf_status rc;

	if ((rc = tf_get_u32(&ft.r, &fr->version, "footer version", err)) != TF_OK)
		return rc;
	if (layout >= 10) {	/* the schema this fragment was written with */
		if ((rc = tf_get_u64(&ft.r, &len, "schema name length", err)) != TF_OK ||
		    (rc = tf_get_span(&ft.r, len, &name, "schema name", err)) != TF_OK)
			return rc;
		if (!(copy = strndup((const char *)name.p, name.n)))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		rc = lookup ? lookup(ctx, copy, &s, err) : tf_err(err, TF_E_INVAL, "no schemas");
		free(copy);
		if (rc != TF_OK)
			return rc;
	}
	if (!s)
		return tf_err(err, TF_E_CORRUPT, "no schema for a format %u fragment", fr->version);
	if ((rc = tf_get_u8(&ft.r, &dense, "dense flag", err)) != TF_OK ||
	    (rc = tf_get_u8(&ft.r, &null_domain, "null domain flag", err)) != TF_OK ||
	    (rc = keep_domain(fr, &ft, s, null_domain != 0)) != TF_OK ||
	    (rc = tf_get_u64(&ft.r, &fr->sparse_tile_num, "sparse tile count", err)) != TF_OK ||
	    (rc = tf_get_u64(&ft.r, &fr->last_tile_cell_num, "last tile cell count", err)) != TF_OK ||
	    (layout >= 14 && (rc = tf_get_u8(&ft.r, &ts, "timestamps flag", err)) != TF_OK) ||
	    (layout >= 15 && (rc = tf_get_u8(&ft.r, &dm, "delete metadata flag", err)) != TF_OK))
		return rc;
	fr->has_ts = ts != 0;
	fr->has_dm = dm != 0;
	count_fields(fr, s, layout);
	if ((rc = parse_positions(fr, &ft, layout >= 5 ? fr->n : s->nattrs)) != TF_OK ||
	    (layout >= 23 && (rc = skip_optional_sections(&ft)) != TF_OK))
		return rc;
	/* Format 11 footers from newer writers carry one more u64 (§8.5). */
	if (ft.r.n && !(layout == 11 && ft.r.n == 8))
		return tf_err(err, TF_E_CORRUPT, "%zu bytes left after the footer", ft.r.n);
	fr->schema = s;
	fr->dense = dense != 0;
	fr->layout = layout;
	return TF_OK;
}

static bool has_var_dims(const tf_schema *s)
{
	for (size_t d = 0; s && d < s->ndims; d++)
		if (s->dims[d].cell_val_num == TF_CELL_VAR)
			return true;
	return false;
}

/* Footer size of formats 3-9 with fixed-size dimensions, which store no
 * length: footer_size_v3_v4 / _v5_v6 / _v7_v9 (fragment_metadata.cc). */
static uint64_t computed_footer_size(const tf_schema *s, uint32_t v)
{
	uint64_t a = s->nattrs, d = s->ndims, n = a + 1 + d, dom = 0;

	for (size_t i = 0; i < s->ndims; i++)
		dom += 2 * (uint64_t)tf_datatype_size(v < 5 ? s->dims[0].type : s->dims[i].type);
	if (v < 5)
		return 6 + dom + 16 + 8 * (a + 1) + 8 * a + 8 + 8 * (a + 1) + 8 * a + 8 * a;
	if (v < 7)
		return 6 + dom + 16 + 16 * n + 8 + 24 * n;
	return 6 + dom + 16 + 24 * n + 8 + 32 * n;
}

static tf_status read_footer(tf_fragment *fr, uint32_t v, const tf_schema *legacy, tf_buf *out,
			     tf_error *err)
{
	uint64_t len;
	tf_status rc;

	if (v >= 10 || has_var_dims(legacy)) {
		if (fr->file_size < 8)
			return tf_err(err, TF_E_CORRUPT, "fragment metadata of %" PRIu64 " bytes", fr->file_size);
		if ((rc = read_range(fr, fr->file_size - 8, 8, out, err)) != TF_OK)
			return rc;
		len = tf_le64(out->p);
		if (len > fr->file_size - 8)
			return tf_err(err, TF_E_CORRUPT, "footer of %" PRIu64 " bytes in a %" PRIu64 "-byte file",
				      len, fr->file_size);
		fr->footer_offset = fr->file_size - 8 - len;
	} else {
		if (!legacy)
			return tf_err(err, TF_E_CORRUPT, "a format %u fragment needs __array_schema.tdb", v);
		len = computed_footer_size(legacy, v);
		if (len > fr->file_size)
			return tf_err(err, TF_E_CORRUPT, "fragment metadata shorter than its footer");
		fr->footer_offset = fr->file_size - len;
	}
	return read_range(fr, fr->footer_offset, len, out, err);
}

static tf_status open_v3(tf_fragment *fr, uint32_t v, const tf_schema *legacy, tf_schema_lookup lookup,
			 void *ctx, tf_error *err)
{
	tf_buf bytes = TF_BUF_INIT((size_t)64 << 20);
	uint32_t layout;
	tf_status rc = read_footer(fr, v, legacy, &bytes, err);

	if (rc != TF_OK) {
		tf_buf_free(&bytes);
		return rc;
	}
	if (bytes.len >= 4 && v >= 10)
		v = tf_le32(bytes.p);	/* the footer's own version */
	layout = v > TF_FORMAT_VERSION_MAX ? TF_FORMAT_VERSION_MAX : v;
	rc = parse_footer(fr, tf_span_of(bytes.p, bytes.len), layout, legacy, lookup, ctx, err);
	/* A newer (experimental) version: the first known layout that fits. */
	while (rc != TF_OK && rc != TF_E_NOMEM && v > TF_FORMAT_VERSION_MAX && layout > 10) {
		free_lists(fr);
		rc = parse_footer(fr, tf_span_of(bytes.p, bytes.len), --layout, legacy, lookup, ctx, err);
	}
	tf_buf_free(&bytes);
	return rc == TF_OK ? rc : tf_err_prefix(err, "footer");
}

/* ---- formats 1-2: one generic tile (§8.7) -------------------------------------------------- */

/* (A+1) or A lists of "u64 n, u64[n]" into lists[k]. */
static tf_status inline_lists(tf_fragment *fr, tf_reader *r, int k, size_t count, tf_error *err)
{
	tf_status rc = TF_OK;

	for (size_t i = 0; i < count && rc == TF_OK; i++) {
		u64_list *l = &fr->lists[k][i];
		uint64_t n;

		if ((rc = tf_get_u64(r, &n, list_names[k], err)) != TF_OK)
			break;
		if (n > r->n / 8)
			return tf_err(err, TF_E_CORRUPT, "%s: %" PRIu64 " entries claimed", list_names[k], n);
		if (n && !(l->v = malloc((size_t)n * 8)))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		l->n = (size_t)n;
		l->loaded = true;
		rc = get_u64s(r, l->v, l->n, list_names[k], err);
	}
	for (size_t i = count; i < fr->n; i++)
		fr->lists[k][i].loaded = true;	/* the var lists stop at A */
	return rc;
}

static tf_status parse_v1v2(tf_fragment *fr, tf_span payload, tf_error *err)
{
	const tf_schema *s = fr->schema;
	uint64_t box = 2 * (uint64_t)s->ndims * tf_datatype_size(s->dims[0].type), n;
	tf_reader r = tf_reader_of(payload);
	size_t a = s->nattrs;
	tf_status rc;

	fr->n = a + 1;
	if ((rc = alloc_lists(fr, err)) != TF_OK ||
	    (rc = tf_get_u32(&r, &fr->version, "version", err)) != TF_OK ||
	    (rc = tf_get_u64(&r, &n, "domain size", err)) != TF_OK ||
	    (rc = skip_bytes(&r, n, "non-empty domain", err)) != TF_OK ||
	    (rc = tf_get_u64(&r, &fr->sparse_tile_num, "MBR count", err)) != TF_OK ||
	    (rc = skip_bytes(&r, fr->sparse_tile_num > UINT64_MAX / box ? UINT64_MAX : fr->sparse_tile_num * box,
			     "MBRs", err)) != TF_OK ||
	    (rc = tf_get_u64(&r, &n, "bounding coordinates count", err)) != TF_OK ||
	    (rc = skip_bytes(&r, n > UINT64_MAX / box ? UINT64_MAX : n * box, "bounding coordinates", err)) != TF_OK ||
	    (rc = inline_lists(fr, &r, L_OFFSETS, a + 1, err)) != TF_OK ||
	    (rc = inline_lists(fr, &r, L_VAR_OFFSETS, a, err)) != TF_OK ||
	    (rc = inline_lists(fr, &r, L_VAR_SIZES, a, err)) != TF_OK ||
	    (rc = tf_get_u64(&r, &fr->last_tile_cell_num, "last tile cell count", err)) != TF_OK ||
	    (rc = get_u64s(&r, fr->sizes[S_FIXED], a + 1, "file sizes", err)) != TF_OK ||
	    (rc = get_u64s(&r, fr->sizes[S_VAR], a, "file var sizes", err)) != TF_OK)
		return rc;
	/* Files are named and looked up by this version's layout, and these
	 * lists hold format 1-2's fields only (attributes and coordinates). */
	if (fr->version < 1 || fr->version > 2)
		return tf_err(err, TF_E_CORRUPT, "format %u metadata in a fragment named as format 1-2",
			      fr->version);
	for (size_t i = 0; i < fr->n; i++)
		fr->lists[L_VALIDITY][i].loaded = true;	/* no validity before format 7 */
	fr->dense = s->dense;
	fr->layout = fr->version;
	return r.n ? tf_err(err, TF_E_CORRUPT, "%zu bytes after the fragment metadata", r.n) : TF_OK;
}

static tf_status open_v1v2(tf_fragment *fr, const tf_schema *legacy, tf_error *err)
{
	tf_buf payload = TF_BUF_INIT((size_t)1 << 30);
	tf_status rc;

	if (!(fr->schema = legacy))
		return tf_err(err, TF_E_CORRUPT, "a format 1-2 fragment needs __array_schema.tdb");
	rc = read_generic(fr, 0, &payload, err);
	if (rc == TF_OK)
		rc = parse_v1v2(fr, tf_span_of(payload.p, payload.len), err);
	tf_buf_free(&payload);
	return rc;
}

/* ---- opening ------------------------------------------------------------------------------------- */

/* Exactly n hex digits at s (a UUID without dashes when n is 32). */
static bool is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	return n > 0;
}

/* The format version a fragment's name implies (§8.1, FragmentID):
 * __uuid_t1[_t2] is 1-2, __t1_t2_uuid is 3-4, __t1_t2_uuid_v is v. */
static uint32_t version_from_name(const char *name)
{
	const char *last = strrchr(name, '_');
	const char *first = name + strspn(name, "_");
	unsigned long long v;
	char *end;

	if (strlen(first) >= 32 && is_hex(first, 32) && first[32] == '_')
		return 2;
	if (!last || (strlen(last + 1) == 32 && is_hex(last + 1, 32)))
		return 4;
	errno = 0;
	v = strtoull(last + 1, &end, 10);
	return errno || *end || v > UINT32_MAX ? 4 : (uint32_t)v;
}

tf_status tf_fragment_open(tf_source *src, const char *dir, const char *name, const tf_schema *legacy,
			   tf_schema_lookup lookup, void *ctx, const tf_key *key,
			   tf_fragment **out, tf_error *err)
{
	tf_fragment *fr = calloc(1, sizeof(*fr));
	tf_object *o;
	tf_stat sb;
	uint32_t v;
	tf_status rc;

	if (fr)
		pthread_mutex_init(&fr->lists_lock, NULL);
	if (!fr || !(fr->dir = strdup(dir)) || !(fr->name = strdup(name)) ||
	    asprintf(&fr->meta_path, "%s/__fragment_metadata.tdb", dir) < 0) {
		tf_fragment_free(fr);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	fr->src = src;
	fr->key = key;
	/* One open: its version is the one every later read checks. */
	if ((rc = tf_object_open(src, fr->meta_path, NULL, &o, err)) == TF_OK) {
		sb = *tf_object_stat(o);
		if (sb.kind != TF_ENT_REG)
			rc = tf_err(err, TF_E_CORRUPT, "not a regular file");
		fr->meta_ver = sb.v;
		fr->file_size = sb.v.size;
		if (rc == TF_OK && fr->file_size <= SMALL_META) {
			if (!(fr->small = malloc(fr->file_size ? (size_t)fr->file_size : 1)))
				rc = tf_err(err, TF_E_NOMEM, "out of memory");
			else
				rc = tf_object_read(o, 0, fr->small, (size_t)fr->file_size, err);
		}
		tf_object_close(o);
	}
	if (rc == TF_OK) {
		v = version_from_name(name);
		rc = v <= 2 ? open_v1v2(fr, legacy, err) : open_v3(fr, v, legacy, lookup, ctx, err);
	}
	if (rc != TF_OK) {
		tf_err_prefix(err, "fragment %s: metadata", name);
		tf_fragment_free(fr);
		return rc;
	}
	*out = fr;
	return TF_OK;
}

void tf_fragment_free(tf_fragment *fr)
{
	if (!fr)
		return;
	free_lists(fr);
	free(fr->ned);
	free(fr->small);
	pthread_mutex_destroy(&fr->lists_lock);
	free(fr->dir);
	free(fr->name);
	free(fr->meta_path);
	free(fr);
}

/* ---- per-field tile lists (§8.6) -------------------------------------------------------------- */

static tf_status load_list(tf_fragment *fr, int k, size_t idx, const u64_list **out, tf_error *err);

/* A list, read on first use under the fragment's own lock: its readers
 * want it anyway, and readers of other fragments are not held up. */
static tf_status get_list(tf_fragment *fr, int k, size_t idx, const u64_list **out, tf_error *err)
{
	tf_status rc;

	pthread_mutex_lock(&fr->lists_lock);
	rc = load_list(fr, k, idx, out, err);
	pthread_mutex_unlock(&fr->lists_lock);
	return rc;
}

static tf_status load_list(tf_fragment *fr, int k, size_t idx, const u64_list **out, tf_error *err)
{
	u64_list *l = &fr->lists[k][idx];
	tf_buf payload = TF_BUF_INIT((size_t)1 << 30);
	tf_reader r;
	uint64_t n;
	tf_status rc = TF_OK;

	if (!l->loaded) {	/* generic tile: u64 n, then n u64 */
		rc = read_generic(fr, fr->where[k][idx], &payload, err);
		r = tf_reader_of(tf_span_of(payload.p, payload.len));
		if (rc == TF_OK && (rc = tf_get_u64(&r, &n, list_names[k], err)) == TF_OK &&
		    (n > r.n / 8 || r.n != n * 8))
			rc = tf_err(err, TF_E_CORRUPT, "%s: %" PRIu64 " entries in %zu bytes", list_names[k], n, r.n);
		if (rc == TF_OK && n && !(l->v = malloc((size_t)n * 8)))
			rc = tf_err(err, TF_E_NOMEM, "out of memory");
		if (rc == TF_OK && (rc = get_u64s(&r, l->v, (size_t)n, list_names[k], err)) == TF_OK) {
			l->n = (size_t)n;
			l->loaded = true;
		}
		tf_buf_free(&payload);
		if (rc != TF_OK)
			return tf_err_prefix(err, "%s of field %zu", list_names[k], idx);
	}
	*out = l;
	return TF_OK;
}

/* Cells in tile t of ntiles: dense tiles are whole space tiles; sparse ones
 * hold `capacity` cells but the last (§5.4; a stored 0 means full). */
static uint64_t tile_cells(const tf_fragment *fr, size_t t, size_t ntiles)
{
	const tf_schema *s = fr->schema;

	if (fr->dense)
		return tf_schema_dense_tile_cells(s);
	if (t + 1 < ntiles || fr->last_tile_cell_num == 0)
		return s->capacity;
	return fr->last_tile_cell_num;
}

/* ---- files ---------------------------------------------------------------------------------------- */

typedef struct field_ref {
	size_t idx;		/* position in the footer's arrays */
	const tf_field *f;	/* NULL for __coords and the special attributes */
	bool dim;
	tf_role role;
	const char *name;
} field_ref;

/* Names of format 8 are percent-encoded (fragment_metadata.cc encode_name,
 * including its odd mappings for " < > \ |). */
static void encode_name(const char *in, char *out, size_t n)
{
	static const char from[] = "!#$%&'()*+,/:;=?@[]\"<>\\|";
	static const char *const to[] = { "%21", "%23", "%24", "%25", "%26", "%27", "%28", "%29", "%2A",
		"%2B", "%2C", "%2F", "%3A", "%3B", "%3D", "%3F", "%40", "%5B", "%5D", "%22", "%20",
		"%2D", "%30", "%3C" };
	size_t len = 0;

	for (; *in && len + 4 < n; in++) {
		const char *hit = strchr(from, *in);
		len += (size_t)snprintf(out + len, n - len, "%s", hit ? to[hit - from] : (char[]){ *in, 0 });
	}
	out[len] = '\0';
}

/* Role of a file from its suffix after the field's name (§5.1). */
static bool role_of(const char *suffix, const field_ref *ref, tf_role *role)
{
	bool var = ref->f && ref->f->cell_val_num == TF_CELL_VAR;

	if (!strcmp(suffix, ".tdb"))
		*role = var ? TF_ROLE_OFFSETS : TF_ROLE_DATA;
	else if (!strcmp(suffix, "_var.tdb") && var)
		*role = TF_ROLE_VAR;
	else if (!strcmp(suffix, "_validity.tdb") && ref->f && ref->f->nullable && !ref->dim)
		*role = TF_ROLE_VALIDITY;
	else
		return false;
	return true;
}

/* Field i of the footer's order: attributes, __coords, dimensions (§8.2). */
static void ref_at(const tf_fragment *fr, size_t i, field_ref *ref)
{
	const tf_schema *s = fr->schema;

	ref->idx = i;
	ref->f = i < s->nattrs ? &s->attrs[i] : i > s->nattrs && i <= s->nattrs + s->ndims ?
		 &s->dims[i - s->nattrs - 1] : NULL;
	ref->dim = i > s->nattrs;
	ref->name = ref->f ? ref->f->name : "__coords";
}

/* Format 9 on: a<k>, d<j>, t, dt, dci (and __coords before format 5). */
static bool resolve_indexed(const tf_fragment *fr, const char *file, field_ref *ref)
{
	static const char *const specials[] = { "__timestamps", "__delete_timestamps",
						"__delete_condition_index" };
	static const char *const special_files[] = { "t.tdb", "dt.tdb", "dci.tdb" };
	const tf_schema *s = fr->schema;
	size_t base = s->nattrs + 1 + s->ndims;
	unsigned long k;
	char *end;

	for (int i = 0; i < 3; i++)
		if (!strcmp(file, special_files[i]) && (i == 0 ? fr->has_ts : fr->has_dm)) {
			*ref = (field_ref){ base + (i == 0 ? 0 : fr->has_ts + (size_t)i - 1), NULL, false,
					    TF_ROLE_DATA, specials[i] };
			return true;
		}
	if ((file[0] != 'a' && file[0] != 'd') || !isdigit((unsigned char)file[1]))
		return false;
	errno = 0;
	k = strtoul(file + 1, &end, 10);
	if (errno || (file[0] == 'a' ? k >= s->nattrs : k >= s->ndims))
		return false;
	ref_at(fr, file[0] == 'a' ? k : s->nattrs + 1 + k, ref);
	return role_of(end, ref, &ref->role);
}

/* Before format 9: files are named after the fields (percent-encoded in 8). */
static bool resolve_named(const tf_fragment *fr, const char *file, field_ref *ref)
{
	const tf_schema *s = fr->schema;
	char enc[1024];

	for (size_t i = 0; i < s->nattrs + 1 + s->ndims; i++) {
		size_t len;

		ref_at(fr, i, ref);
		if (!ref->f && fr->layout >= 5)
			continue;	/* __coords.tdb only before format 5 */
		if (ref->dim && ref->f && fr->layout < 5)
			break;
		encode_name(ref->name, enc, sizeof(enc));
		len = strlen(fr->layout == 8 ? enc : ref->name);
		if (!strncmp(file, fr->layout == 8 ? enc : ref->name, len) && role_of(file + len, ref, &ref->role))
			return true;
	}
	return false;
}

/* Pipeline, datatype and cells of a file, by its field and role (§2.4 table). */
static void file_spec(const tf_fragment *fr, const field_ref *ref, tf_file_spec *spec)
{
	const tf_schema *s = fr->schema;

	spec->version = fr->version > TF_FORMAT_VERSION_MAX ? TF_FORMAT_VERSION_MAX : fr->version;
	spec->cell_val_num = 1;
	spec->type = TF_DT_UINT64;
	if (ref->role == TF_ROLE_OFFSETS) {
		spec->pipeline = s->offsets;
	} else if (ref->role == TF_ROLE_VALIDITY) {
		spec->pipeline = s->validity;
		spec->type = TF_DT_UINT8;
	} else if (!ref->f) {	/* special attributes use the coords pipeline as uint64 */
		spec->pipeline = s->coords;
		if (!strcmp(ref->name, "__coords")) {	/* legacy zipped/unzipped coordinates */
			spec->type = s->dims[0].type;
			spec->cell_val_num = (uint32_t)s->ndims;
		}
	} else {
		spec->pipeline = ref->dim ? tf_schema_dim_filters(s, ref->f) : ref->f->filters;
		spec->type = ref->f->type;
		spec->cell_val_num = ref->role == TF_ROLE_VAR ? TF_CELL_VAR : ref->f->cell_val_num;
	}
}

/* Tiles of one file of a field: where (list k, file size) and how big. */
static tf_status make_layout(tf_fragment *fr, const field_ref *ref, tf_role role,
			     tf_tile_layout **out, size_t *n, tf_error *err)
{
	int k = role == TF_ROLE_VAR ? L_VAR_OFFSETS : role == TF_ROLE_VALIDITY ? L_VALIDITY : L_OFFSETS;
	uint64_t fsize = fr->sizes[role == TF_ROLE_VAR ? S_VAR : role == TF_ROLE_VALIDITY ? S_VALIDITY : S_FIXED][ref->idx];
	uint64_t cell = 8;
	const u64_list *at, *sizes = NULL;
	tf_file_spec spec = { 0 };
	field_ref r = *ref;
	tf_status rc;

	r.role = role;
	file_spec(fr, &r, &spec);
	if (role == TF_ROLE_DATA)
		cell = (uint64_t)spec.cell_val_num * tf_datatype_size(spec.type);
	else if (role == TF_ROLE_VALIDITY)
		cell = 1;
	if ((rc = get_list(fr, k, ref->idx, &at, err)) != TF_OK ||
	    (role == TF_ROLE_VAR && (rc = get_list(fr, L_VAR_SIZES, ref->idx, &sizes, err)) != TF_OK))
		return rc;
	if (sizes && sizes->n != at->n)
		return tf_err(err, TF_E_CORRUPT, "%zu var tile offsets but %zu sizes", at->n, sizes->n);
	if (!(*out = malloc((at->n ? at->n : 1) * sizeof(**out))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	for (size_t t = 0; t < at->n; t++) {
		uint64_t end = t + 1 < at->n ? at->v[t + 1] : fsize, size = sizes ? sizes->v[t] : 0;
		if (at->v[t] > end || end > fsize)
			return tf_err(err, TF_E_CORRUPT, "tile %zu at %" PRIu64 " of a %" PRIu64 "-byte file",
				      t, at->v[t], fsize);
		if (!sizes && !tf_u64_mul(tile_cells(fr, t, at->n), cell, &size))
			return tf_err(err, TF_E_CORRUPT, "tile %zu: %" PRIu64 " cells of %" PRIu64 " bytes", t,
				      tile_cells(fr, t, at->n), cell);
		(*out)[t] = (tf_tile_layout){ at->v[t], end - at->v[t], size };
	}
	*n = at->n;
	return TF_OK;
}

/* String RLE/dictionary whose offsets tiles are 0-chunk (8-byte) tiles:
 * the offsets are folded into the data (§4.7, §10 #21). */
static bool folded(tf_fragment *fr, const field_ref *ref)
{
	const tf_filter_class *first;
	tf_tile_layout *tiles = NULL;
	size_t n = 0;
	bool all = true;
	tf_error ignored;

	if (!ref->f || ref->f->cell_val_num != TF_CELL_VAR || !tf_datatype_is_var_string(ref->f->type))
		return false;
	first = tf_pipeline_class(ref->dim ? tf_schema_dim_filters(fr->schema, ref->f) : ref->f->filters, 0);
	if (!first || (first->id != TF_F_RLE && first->id != TF_F_DICTIONARY))
		return false;
	if (make_layout(fr, ref, TF_ROLE_OFFSETS, &tiles, &n, &ignored) != TF_OK)
		all = false;
	for (size_t t = 0; all && t < n; t++)
		all = tiles[t].stored == TF_TILE_HEADER_SIZE;
	free(tiles);
	return all && n > 0;
}

tf_status tf_fragment_describe(tf_fragment *fr, const char *file, tf_fragment_file *out, tf_error *err)
{
	field_ref ref = { 0 };
	tf_status rc;

	memset(out, 0, sizeof(*out));
	if (!(fr->layout >= 9 ? resolve_indexed(fr, file, &ref) : resolve_named(fr, file, &ref)))
		return tf_err(err, TF_E_INVAL, "%s is not a file of fragment %s", file, fr->name);
	out->field = ref.name;
	out->role = ref.role;
	file_spec(fr, &ref, &out->spec);
	rc = make_layout(fr, &ref, ref.role, &out->tiles, &out->spec.ntiles, err);
	out->spec.tiles = out->tiles;
	if (rc == TF_OK && ref.role == TF_ROLE_VAR)
		out->spec.var_string = folded(fr, &ref);
	if (rc == TF_OK && ref.role == TF_ROLE_OFFSETS && folded(fr, &ref)) {
		size_t stem = strlen(file) - 4;	/* without ".tdb" */
		if (asprintf(&out->var_file, "%.*s_var.tdb", (int)stem, file) < 0)
			rc = tf_err(err, TF_E_NOMEM, "out of memory");
		else
			rc = make_layout(fr, &ref, TF_ROLE_VAR, &out->var_tiles, &out->spec.nvar_tiles, err);
		out->spec.var_data = out->var_file;
		out->spec.var_tiles = out->var_tiles;
		out->spec.var_pipeline = ref.dim ? tf_schema_dim_filters(fr->schema, ref.f) : ref.f->filters;
		out->spec.var_type = ref.f->type;
	}
	if (rc != TF_OK) {
		tf_fragment_file_clear(out);
		return tf_err_prefix(err, "fragment %s, %s", fr->name, file);
	}
	return TF_OK;
}

void tf_fragment_file_clear(tf_fragment_file *ff)
{
	free(ff->tiles);
	free(ff->var_tiles);
	free(ff->var_file);
	memset(ff, 0, sizeof(*ff));
}

/* ---- facts for readers of cells (views) ----------------------------------------------------- */

size_t tf_fragment_bytes(tf_fragment *fr)
{
	size_t n = sizeof(*fr) + fr->ned_len + (fr->small ? (size_t)fr->file_size : 0) +
		   fr->n * (S_KINDS + L_KINDS) * sizeof(uint64_t) + fr->n * L_KINDS * sizeof(u64_list);

	pthread_mutex_lock(&fr->lists_lock);
	for (int k = 0; k < L_KINDS; k++)
		for (size_t i = 0; fr->lists[k] && i < fr->n; i++)
			n += fr->lists[k][i].n * sizeof(uint64_t);
	pthread_mutex_unlock(&fr->lists_lock);
	return n;
}

const char *tf_fragment_name(const tf_fragment *fr) { return fr->name; }
bool tf_fragment_dense(const tf_fragment *fr) { return fr->dense; }
bool tf_fragment_has_timestamps(const tf_fragment *fr) { return fr->has_ts; }
bool tf_fragment_has_delete_meta(const tf_fragment *fr) { return fr->has_dm; }

uint64_t tf_fragment_sparse_tiles(const tf_fragment *fr) { return fr->sparse_tile_num; }

uint64_t tf_fragment_tile_cells(const tf_fragment *fr, uint64_t t, uint64_t ntiles)
{
	return tile_cells(fr, (size_t)t, (size_t)ntiles);
}

/* Formats 1-4 keep the domain of every dimension in dimension 0's type
 * (§8.5); var-sized dimensions store u64 range size, u64 start size, then
 * start and end back to back (fragment_metadata.cc load_non_empty_domain). */
tf_status tf_fragment_ned(const tf_fragment *fr, size_t d, tf_span *lo, tf_span *hi, tf_error *err)
{
	const tf_schema *s = fr->schema;
	tf_reader r = tf_reader_of(tf_span_of(fr->ned, fr->ned_len));
	uint64_t range, start;
	tf_status rc = TF_OK;

	if (fr->layout <= 2 || fr->ned_null || d >= s->ndims)
		return tf_err(err, TF_E_UNSUPPORTED, "fragment %s: no non-empty domain for dimension %zu",
			      fr->name, d);
	for (size_t i = 0; i <= d && rc == TF_OK; i++) {
		const tf_field *dim = &s->dims[i];
		unsigned size = tf_datatype_size(fr->layout < 5 ? s->dims[0].type : dim->type);

		if (fr->layout < 5 || dim->cell_val_num != TF_CELL_VAR) {
			if ((rc = tf_get_span(&r, size, lo, "domain", err)) == TF_OK)
				rc = tf_get_span(&r, size, hi, "domain", err);
		} else if ((rc = tf_get_u64(&r, &range, "domain", err)) == TF_OK &&
			   (rc = tf_get_u64(&r, &start, "domain", err)) == TF_OK &&
			   (rc = tf_get_span(&r, start, lo, "domain", err)) == TF_OK) {
			rc = tf_get_span(&r, range - start, hi, "domain", err);
		}
	}
	return rc;
}

/* File names by format (§8.2): a<k>/d<j> from format 9 on, the field's
 * name before (percent-encoded in format 8). */
bool tf_fragment_field_file(const tf_fragment *fr, const char *field, tf_role role, char *buf,
			    size_t n)
{
	static const char *const suffix[] = { ".tdb", ".tdb", "_var.tdb", "_validity.tdb" };
	const tf_schema *s = fr->schema;
	char stem[1024];
	int len = -1;

	for (size_t i = 0; i < s->nattrs + s->ndims && len < 0; i++) {
		bool dim = i >= s->nattrs;
		const tf_field *f = dim ? &s->dims[i - s->nattrs] : &s->attrs[i];

		if (strcmp(f->name, field))
			continue;
		if (fr->layout >= 9)
			len = snprintf(stem, sizeof(stem), "%c%zu", dim ? 'd' : 'a', dim ? i - s->nattrs : i);
		else if (fr->layout == 8)
			encode_name(f->name, stem, sizeof(stem)), len = (int)strlen(stem);
		else
			len = snprintf(stem, sizeof(stem), "%s", f->name);
	}
	if (len < 0 && !strcmp(field, "__timestamps") && fr->has_ts)
		len = snprintf(stem, sizeof(stem), "t");
	else if (len < 0 && !strcmp(field, "__delete_timestamps") && fr->has_dm)
		len = snprintf(stem, sizeof(stem), "dt");
	else if (len < 0 && !strcmp(field, "__coords") && fr->layout < 5)
		len = snprintf(stem, sizeof(stem), "__coords");
	return len >= 0 && (size_t)len < sizeof(stem) &&
	       snprintf(buf, n, "%s%s", stem, suffix[role]) < (int)n;
}
