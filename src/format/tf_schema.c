/*
 * tf_schema.c - array schema payloads (FORMAT.md §7.2-7.7,
 * tiledb/sm/array_schema/array_schema.cc and friends).
 *
 * Every field is read by the layout of the schema's version.  A version
 * newer than any known (UINT32_MAX is what experimental builds wrote) is
 * tried with each known layout, newest first, until one accounts for every
 * byte of the payload.
 */
#include "format/tf_schema.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Default fill values (formats before 6) are made, not read: at most this
 * much of them per schema, whatever its cells claim. */
#define DEFAULT_FILLS_MAX ((uint64_t)64 << 20)

typedef struct parse {
	tf_reader r;
	uint32_t v;		/* layout version */
	uint64_t fills;		/* bytes of default fill values made */
	tf_error *err;
} parse;

#define GET(kind, ps, dst, what) tf_get_##kind(&(ps)->r, (dst), (what), (ps)->err)

static tf_status get_string32(parse *ps, char **out, const char *what)
{
	uint32_t len;
	tf_span s;
	tf_status rc;

	if ((rc = GET(u32, ps, &len, what)) != TF_OK ||
	    (rc = tf_get_span(&ps->r, len, &s, what, ps->err)) != TF_OK)
		return rc;
	if (!out)
		return TF_OK;
	if (!(*out = malloc(s.n + 1)))
		return tf_err(ps->err, TF_E_NOMEM, "out of memory");
	memcpy(*out, s.p, s.n);
	(*out)[s.n] = '\0';
	return TF_OK;
}

static tf_status get_datatype(parse *ps, tf_datatype *t, const char *what)
{
	uint8_t v;
	tf_status rc = GET(u8, ps, &v, what);

	if (rc == TF_OK && !tf_datatype_valid(v))
		return tf_err(ps->err, TF_E_CORRUPT, "%s: bad datatype %u", what, v);
	*t = (tf_datatype)v;
	return rc;
}

static tf_status get_pipeline(parse *ps, tf_pipeline **p, const char *what)
{
	tf_status rc = tf_pipeline_deserialize(&ps->r, p, ps->err);

	return rc == TF_OK ? rc : tf_err_prefix(ps->err, "%s", what);
}

static tf_status skip(parse *ps, uint64_t n, const char *what)
{
	tf_span s;

	return tf_get_span(&ps->r, n, &s, what, ps->err);
}

/* ---- values of a dimension's type ------------------------------------------------------------ */

static bool signed_like(tf_datatype t)
{
	return tf_datatype_is_signed(t) || tf_datatype_is_datetime(t);
}

static int64_t as_signed(uint64_t u, unsigned size)
{
	return size >= 8 ? (int64_t)u : (int64_t)(u << (64 - 8 * size)) >> (64 - 8 * size);
}

static double real_at(tf_datatype t, const uint8_t *p)
{
	float f;
	double d;

	if (t == TF_DT_FLOAT32) {
		memcpy(&f, p, 4);
		return f;
	}
	memcpy(&d, p, 8);
	return d;
}

/* ---- domain and dimensions (§7.3-7.4) --------------------------------------------------- */

/* A fixed-size dimension is what TileDB writes (dimension.cc check_domain,
 * check_tile_extent): one value per cell, a domain of two values of its
 * type with lower <= upper (reals finite), a positive extent. */
static tf_status check_dimension(parse *ps, const tf_field *d, uint64_t dom_size)
{
	unsigned size = tf_datatype_size(d->type);
	const uint8_t *lo = d->domain, *hi = d->domain + size, *ext = d->extent;
	bool ordered, positive = true;

	if (d->cell_val_num == TF_CELL_VAR)
		return TF_OK;
	if (d->cell_val_num != 1 || dom_size != 2 * (uint64_t)size || size > 8)
		return tf_err(ps->err, TF_E_CORRUPT, "dimension %s: %u values per cell, a domain of %" PRIu64
			      " bytes", d->name, d->cell_val_num, dom_size);
	if (tf_datatype_is_real(d->type)) {
		ordered = isfinite(real_at(d->type, lo)) && isfinite(real_at(d->type, hi)) &&
			  real_at(d->type, lo) <= real_at(d->type, hi);
		if (d->has_extent)
			positive = isfinite(real_at(d->type, ext)) && real_at(d->type, ext) > 0;
	} else if (signed_like(d->type)) {
		ordered = as_signed(tf_le_n(lo, size), size) <= as_signed(tf_le_n(hi, size), size);
		if (d->has_extent)
			positive = as_signed(tf_le_n(ext, size), size) > 0;
	} else {
		ordered = tf_le_n(lo, size) <= tf_le_n(hi, size);
		if (d->has_extent)
			positive = tf_le_n(ext, size) > 0;
	}
	if (!ordered)
		return tf_err(ps->err, TF_E_CORRUPT, "dimension %s: domain bounds out of order", d->name);
	if (!positive)
		return tf_err(ps->err, TF_E_CORRUPT, "dimension %s: tile extent not positive", d->name);
	return TF_OK;
}

static tf_status parse_dimension(parse *ps, tf_field *d, tf_datatype domain_type)
{
	unsigned size;
	uint64_t dom_size;
	uint8_t null_extent;
	tf_span dom;
	tf_status rc;

	if ((rc = get_string32(ps, &d->name, "dimension name")) != TF_OK)
		return rc;
	d->type = domain_type;
	d->cell_val_num = 1;
	if (ps->v >= 5 && ((rc = get_datatype(ps, &d->type, "dimension datatype")) != TF_OK ||
			   (rc = GET(u32, ps, &d->cell_val_num, "dimension cell_val_num")) != TF_OK ||
			   (rc = get_pipeline(ps, &d->filters, "dimension filters")) != TF_OK ||
			   (rc = GET(u64, ps, &dom_size, "dimension domain size")) != TF_OK))
		return rc;
	size = tf_datatype_size(d->type);
	if (ps->v < 5)
		dom_size = 2 * (uint64_t)size;	/* implicit before format 5 */
	if ((rc = tf_get_span(&ps->r, dom_size, &dom, "dimension domain", ps->err)) != TF_OK ||
	    (rc = GET(u8, ps, &null_extent, "dimension tile extent flag")) != TF_OK)
		return rc;
	memcpy(d->domain, dom.p, dom.n < sizeof(d->domain) ? dom.n : sizeof(d->domain));
	d->has_extent = null_extent == 0;	/* 1 means "no extent" */
	if (d->has_extent) {
		if (size > sizeof(d->extent))
			return tf_err(ps->err, TF_E_CORRUPT, "dimension %s: extent of %u bytes", d->name, size);
		if ((rc = tf_get_span(&ps->r, size, &dom, "dimension tile extent", ps->err)) != TF_OK)
			return rc;
		memcpy(d->extent, dom.p, size);
	}
	return check_dimension(ps, d, dom_size);
}

static tf_status parse_domain(parse *ps, tf_schema *s)
{
	tf_datatype domain_type = TF_DT_INT32;
	uint32_t n;
	tf_status rc;

	if (ps->v < 5 && (rc = get_datatype(ps, &domain_type, "domain datatype")) != TF_OK)
		return rc;
	if ((rc = GET(u32, ps, &n, "dimension count")) != TF_OK)
		return rc;
	if (n == 0 || n > ps->r.n)
		return tf_err(ps->err, TF_E_CORRUPT, "schema claims %u dimensions", n);
	if (!(s->dims = calloc(n, sizeof(*s->dims))))
		return tf_err(ps->err, TF_E_NOMEM, "out of memory");
	s->ndims = n;	/* zeroed entries free cleanly if parsing stops early */
	for (uint32_t i = 0; i < n; i++)
		if ((rc = parse_dimension(ps, &s->dims[i], domain_type)) != TF_OK)
			return tf_err_prefix(ps->err, "dimension %u", i);
	return TF_OK;
}

/* ---- attributes (§7.5) ---------------------------------------------------------------------- */

/* TileDB's fill value for a type with no stored one (constants.cc
 * empty_*, Attribute::default_fill_value): signed integers and date/times
 * their minimum, unsigned their maximum, floats NaN, CHAR its minimum (0x80),
 * other strings, BOOL, BLOB and ANY zero; one value per cell value (one for
 * var-sized cells).  They are made from nothing stored, so their total is
 * bounded: a schema of a thousand attributes of 2^20 values each would
 * otherwise make 8 GiB of them. */
static tf_status default_fill(parse *ps, tf_field *a)
{
	unsigned size = tf_datatype_size(a->type);
	uint32_t n = a->cell_val_num == TF_CELL_VAR ? 1 : a->cell_val_num;
	uint64_t bytes = (uint64_t)n * size;
	uint8_t v[8] = { 0 };

	if (tf_datatype_is_signed(a->type) || tf_datatype_is_datetime(a->type))
		v[size - 1] = 0x80;
	else if (a->type == TF_DT_FLOAT32)
		tf_put_le32(v, 0x7fc00000u);
	else if (a->type == TF_DT_FLOAT64)
		tf_put_le64(v, 0x7ff8000000000000ull);
	else if (a->type == TF_DT_CHAR)
		v[0] = 0x80;
	else if (tf_datatype_is_integer(a->type) && a->type != TF_DT_BOOL)
		memset(v, 0xff, size);
	if (bytes > DEFAULT_FILLS_MAX - ps->fills)
		return tf_err(ps->err, TF_E_CORRUPT, "attribute %s: default fill values of more than %llu MiB "
			      "in all", a->name, (unsigned long long)(DEFAULT_FILLS_MAX >> 20));
	if (!(a->fill = malloc((size_t)bytes)))
		return tf_err(ps->err, TF_E_NOMEM, "fill value of %u values", n);
	ps->fills += bytes;
	for (uint32_t i = 0; i < n; i++)
		memcpy(a->fill + (size_t)i * size, v, size);
	a->fill_size = (uint64_t)n * size;
	return TF_OK;
}

static tf_status get_fill(parse *ps, tf_field *a)
{
	uint64_t fill_size;
	tf_span fill;
	tf_status rc;

	if (ps->v < 6)
		return default_fill(ps, a);
	if ((rc = GET(u64, ps, &fill_size, "fill value size")) != TF_OK ||
	    (rc = tf_get_span(&ps->r, fill_size, &fill, "fill value", ps->err)) != TF_OK)
		return rc;
	if (!(a->fill = malloc(fill.n ? fill.n : 1)))
		return tf_err(ps->err, TF_E_NOMEM, "out of memory");
	memcpy(a->fill, fill.p, fill.n);
	a->fill_size = fill.n;
	return TF_OK;
}

/* An attribute's cells are what TileDB writes (attribute.cc
 * set_cell_val_num, set_fill_value): at least one value each; a fixed-size
 * cell fits a chunk and, where the fill value is stored, is its size. */
static tf_status check_attribute(parse *ps, const tf_field *a)
{
	uint64_t bytes = (uint64_t)a->cell_val_num * tf_datatype_size(a->type);

	if (a->cell_val_num == 0)
		return tf_err(ps->err, TF_E_CORRUPT, "attribute %s: no values per cell", a->name);
	if (a->cell_val_num == TF_CELL_VAR)
		return TF_OK;
	if (bytes > TF_CELL_BYTES_MAX)
		return tf_err(ps->err, TF_E_CORRUPT, "attribute %s: cells of %" PRIu64 " bytes, more than a "
			      "chunk holds", a->name, bytes);
	if (ps->v >= 6 && a->fill_size != bytes)
		return tf_err(ps->err, TF_E_CORRUPT, "attribute %s: a fill value of %" PRIu64 " bytes for cells "
			      "of %" PRIu64, a->name, a->fill_size, bytes);
	return TF_OK;
}

static tf_status parse_attribute(parse *ps, tf_field *a)
{
	uint8_t nullable = 0, fill_validity = 0, order;
	tf_status rc;

	if ((rc = get_string32(ps, &a->name, "attribute name")) != TF_OK ||
	    (rc = get_datatype(ps, &a->type, "attribute datatype")) != TF_OK ||
	    (rc = GET(u32, ps, &a->cell_val_num, "attribute cell_val_num")) != TF_OK ||
	    (rc = get_pipeline(ps, &a->filters, "attribute filters")) != TF_OK)
		return rc;
	if (a->type == TF_DT_ANY)	/* ANY is always var-sized (§7.5) */
		a->cell_val_num = TF_CELL_VAR;
	if (a->cell_val_num == 0)
		return tf_err(ps->err, TF_E_CORRUPT, "attribute %s: no values per cell", a->name);
	if ((rc = get_fill(ps, a)) != TF_OK)
		return rc;
	if (ps->v >= 7 && ((rc = GET(u8, ps, &nullable, "nullable")) != TF_OK ||
			   (rc = GET(u8, ps, &fill_validity, "fill validity")) != TF_OK))
		return rc;
	if (ps->v >= 17 && (rc = GET(u8, ps, &order, "attribute order")) != TF_OK)
		return rc;
	if (ps->v >= 20 && (rc = get_string32(ps, &a->enumeration, "enumeration name")) != TF_OK)
		return rc;
	if (a->enumeration && !a->enumeration[0]) {	/* an empty name: none */
		free(a->enumeration);
		a->enumeration = NULL;
	}
	a->nullable = nullable != 0;
	a->fill_valid = fill_validity != 0;
	return check_attribute(ps, a);
}

static tf_status parse_attributes(parse *ps, tf_schema *s)
{
	uint32_t n;
	tf_status rc;

	if ((rc = GET(u32, ps, &n, "attribute count")) != TF_OK)
		return rc;
	if (n > ps->r.n)
		return tf_err(ps->err, TF_E_CORRUPT, "schema claims %u attributes", n);
	if (n && !(s->attrs = calloc(n, sizeof(*s->attrs))))
		return tf_err(ps->err, TF_E_NOMEM, "out of memory");
	s->nattrs = n;
	for (uint32_t i = 0; i < n; i++)
		if ((rc = parse_attribute(ps, &s->attrs[i])) != TF_OK)
			return tf_err_prefix(ps->err, "attribute %u", i);
	return TF_OK;
}

/* ---- the tail: labels, enumerations, current domain (read to be skipped) ---------------------- */

static tf_status skip_labels(parse *ps)
{
	uint32_t n, u32;
	uint64_t uri_len;
	uint8_t u8;
	tf_status rc;

	if ((rc = GET(u32, ps, &n, "dimension label count")) != TF_OK)
		return rc;
	for (uint32_t i = 0; i < n && rc == TF_OK; i++) {	/* dimension_label.cc (§7.6) */
		if ((rc = GET(u32, ps, &u32, "label dimension")) != TF_OK ||
		    (rc = get_string32(ps, NULL, "label name")) != TF_OK ||
		    (rc = GET(u8, ps, &u8, "label uri kind")) != TF_OK ||
		    (rc = GET(u64, ps, &uri_len, "label uri length")) != TF_OK ||
		    (rc = skip(ps, uri_len, "label uri")) != TF_OK ||
		    (rc = get_string32(ps, NULL, "label attribute")) != TF_OK)
			break;
		rc = skip(ps, 1 + 1 + 4 + 1, "label order, datatype, cell_val_num, external");
	}
	return rc;
}

static tf_status parse_enumerations(parse *ps, tf_schema *s)
{
	uint32_t n;
	tf_status rc = GET(u32, ps, &n, "enumeration count");

	if (rc != TF_OK)
		return rc;
	if (n > ps->r.n / 8)
		return tf_err(ps->err, TF_E_CORRUPT, "schema claims %u enumerations", n);
	if (n && !(s->enums = calloc(n, sizeof(*s->enums))))
		return tf_err(ps->err, TF_E_NOMEM, "out of memory");
	s->nenums = n;	/* zeroed entries free cleanly if parsing stops early */
	for (uint32_t i = 0; i < n && rc == TF_OK; i++)
		if ((rc = get_string32(ps, &s->enums[i].name, "enumeration name")) == TF_OK)
			rc = get_string32(ps, &s->enums[i].path, "enumeration file");
	return rc;
}

static tf_status skip_current_domain(parse *ps, const tf_schema *s)
{
	uint32_t version;
	uint8_t empty, type;
	uint64_t range, start;
	tf_status rc;

	if ((rc = GET(u32, ps, &version, "current domain version")) != TF_OK ||
	    (rc = GET(u8, ps, &empty, "current domain empty flag")) != TF_OK || empty)
		return rc;
	if ((rc = GET(u8, ps, &type, "current domain type")) != TF_OK)
		return rc;
	for (size_t d = 0; d < s->ndims && rc == TF_OK; d++) {	/* ndrectangle.cc (§7.7) */
		if (s->dims[d].cell_val_num != TF_CELL_VAR) {
			rc = skip(ps, 2 * (uint64_t)tf_datatype_size(s->dims[d].type), "current domain range");
		} else if ((rc = GET(u64, ps, &range, "current domain range size")) == TF_OK &&
			   (rc = GET(u64, ps, &start, "current domain start size")) == TF_OK) {
			rc = skip(ps, range, "current domain range");
		}
	}
	return rc;
}

/* ---- the whole payload (§7.2) ------------------------------------------------------------------ */

static tf_status parse_header(parse *ps, tf_schema *s)
{
	uint8_t dups = 0, type;
	tf_status rc;

	if ((ps->v >= 5 && (rc = GET(u8, ps, &dups, "allows_dups")) != TF_OK) ||
	    (rc = GET(u8, ps, &type, "array type")) != TF_OK ||
	    (rc = GET(u8, ps, &s->tile_order, "tile order")) != TF_OK ||
	    (rc = GET(u8, ps, &s->cell_order, "cell order")) != TF_OK ||
	    (rc = GET(u64, ps, &s->capacity, "capacity")) != TF_OK ||
	    (rc = get_pipeline(ps, &s->coords, "coords filters")) != TF_OK ||
	    (rc = get_pipeline(ps, &s->offsets, "offsets filters")) != TF_OK)
		return rc;
	if (type > 1)
		return tf_err(ps->err, TF_E_CORRUPT, "bad array type %u", type);
	s->dense = type == 0;
	s->allows_dups = dups != 0;
	if (ps->v >= 7)
		return get_pipeline(ps, &s->validity, "validity filters");
	/* No nullable attributes before format 7; RLE is the default (§1.6). */
	if (!(s->validity = tf_pipeline_new()))
		return tf_err(ps->err, TF_E_NOMEM, "out of memory");
	return tf_pipeline_append(s->validity, TF_F_RLE, ps->err);
}

static tf_status parse_as(tf_span payload, uint32_t layout, tf_schema *s, tf_error *err)
{
	parse ps = { tf_reader_of(payload), layout, 0, err };
	tf_status rc;

	if ((rc = GET(u32, &ps, &s->version, "schema version")) != TF_OK ||
	    (rc = parse_header(&ps, s)) != TF_OK || (rc = parse_domain(&ps, s)) != TF_OK ||
	    (rc = parse_attributes(&ps, s)) != TF_OK ||
	    (layout >= 18 && (rc = skip_labels(&ps)) != TF_OK) ||
	    (layout >= 20 && (rc = parse_enumerations(&ps, s)) != TF_OK) ||
	    (layout >= 22 && (rc = skip_current_domain(&ps, s)) != TF_OK))
		return rc;
	if (ps.r.n)
		return tf_err(err, TF_E_CORRUPT, "%zu bytes after the schema", ps.r.n);
	s->layout_version = layout;
	return TF_OK;
}

static void schema_clear(tf_schema *s)
{
	for (size_t i = 0; i < s->nattrs; i++) {
		free(s->attrs[i].name);
		free(s->attrs[i].fill);
		free(s->attrs[i].enumeration);
		tf_pipeline_free(s->attrs[i].filters);
	}
	for (size_t i = 0; i < s->nenums; i++) {
		free(s->enums[i].name);
		free(s->enums[i].path);
	}
	free(s->enums);
	for (size_t i = 0; i < s->ndims; i++) {
		free(s->dims[i].name);
		tf_pipeline_free(s->dims[i].filters);
	}
	free(s->attrs);
	free(s->dims);
	tf_pipeline_free(s->coords);
	tf_pipeline_free(s->offsets);
	tf_pipeline_free(s->validity);
	memset(s, 0, sizeof(*s));
}

tf_status tf_schema_parse(tf_span payload, tf_schema **out, tf_error *err)
{
	tf_schema *s = calloc(1, sizeof(*s));
	uint32_t version, layout;
	tf_status rc;

	if (!s)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if (payload.n < 4) {
		free(s);
		return tf_err(err, TF_E_CORRUPT, "array schema of %zu bytes", payload.n);
	}
	version = tf_le32(payload.p);
	layout = version > TF_FORMAT_VERSION_MAX ? TF_FORMAT_VERSION_MAX : version;
	rc = parse_as(payload, layout, s, err);
	/* An unknown (experimental) version: the first known layout that fits. */
	while (rc != TF_OK && rc != TF_E_NOMEM && version > TF_FORMAT_VERSION_MAX && layout > 1) {
		schema_clear(s);
		rc = parse_as(payload, --layout, s, err);
	}
	if (rc != TF_OK) {
		schema_clear(s);
		free(s);
		return tf_err_prefix(err, "array schema (version %u)", version);
	}
	*out = s;
	return TF_OK;
}

void tf_schema_free(tf_schema *s)
{
	if (s) {
		schema_clear(s);
		free(s);
	}
}

const tf_field *tf_schema_attr(const tf_schema *s, const char *name)
{
	for (size_t i = 0; i < s->nattrs; i++)
		if (!strcmp(s->attrs[i].name, name))
			return &s->attrs[i];
	return NULL;
}

const char *tf_schema_enum_path(const tf_schema *s, const char *name)
{
	for (size_t i = 0; name && i < s->nenums; i++)
		if (s->enums[i].name && !strcmp(s->enums[i].name, name))
			return s->enums[i].path;
	return NULL;
}

const tf_pipeline *tf_schema_dim_filters(const tf_schema *s, const tf_field *dim)
{
	return dim->filters && tf_pipeline_count(dim->filters) ? dim->filters : s->coords;
}

static const char *layout_name(uint8_t l)
{
	static const char *const names[] = { "row-major", "col-major", "global-order", "unordered", "hilbert" };
	return l < 5 ? names[l] : "unknown";
}

uint64_t tf_schema_dim_extent(const tf_field *d)
{
	unsigned size = tf_datatype_size(d->type);
	uint64_t v;

	if (!d->has_extent || tf_datatype_is_real(d->type) || d->cell_val_num == TF_CELL_VAR || size > 8)
		return 0;
	v = tf_le_n(d->extent, size);
	return signed_like(d->type) && as_signed(v, size) <= 0 ? 0 : v;	/* (refused when parsed) */
}

uint64_t tf_schema_dense_tile_cells(const tf_schema *s)
{
	uint64_t cells = 1;

	for (size_t d = 0; d < s->ndims; d++) {
		uint64_t e = tf_schema_dim_extent(&s->dims[d]);
		if (!e || !tf_u64_mul(cells, e, &cells))
			return 0;
	}
	return cells;
}

uint64_t tf_field_cell_bytes(const tf_field *f)
{
	if (f->cell_val_num == TF_CELL_VAR)
		return 0;
	return tf_u64_mul_sat(f->cell_val_num, tf_datatype_size(f->type));
}

/* The first difference in how a and b lay cells out, into why[n]. */
bool tf_schema_same_tiling(const tf_schema *a, const tf_schema *b, char *why, size_t n)
{
	if (a->ndims != b->ndims) {
		snprintf(why, n, "%zu dimensions, not %zu", b->ndims, a->ndims);
		return false;
	}
	if (a->tile_order != b->tile_order || a->cell_order != b->cell_order) {
		snprintf(why, n, "tile order %s, cell order %s, not %s, %s", layout_name(b->tile_order),
			 layout_name(b->cell_order), layout_name(a->tile_order), layout_name(a->cell_order));
		return false;
	}
	for (size_t i = 0; i < a->ndims; i++) {
		const tf_field *x = &a->dims[i], *y = &b->dims[i];
		unsigned size = tf_datatype_size(x->type);
		bool var = x->cell_val_num == TF_CELL_VAR;

		if (strcmp(x->name, y->name) || x->type != y->type || x->cell_val_num != y->cell_val_num) {
			snprintf(why, n, "dimension %zu is %s (%s), not %s (%s)", i, y->name, tf_datatype_name(y->type),
				 x->name, tf_datatype_name(x->type));
			return false;
		}
		if (!var && (memcmp(x->domain, y->domain, 2 * (size_t)size) || x->has_extent != y->has_extent ||
			     (x->has_extent && memcmp(x->extent, y->extent, size)))) {
			snprintf(why, n, "dimension %s has another domain or tile extent", x->name);
			return false;
		}
	}
	return true;
}

/* ---- printing -------------------------------------------------------------------------------------- */

/* One value of datatype t at p, as text. */
static void fmt_value(char *buf, size_t n, tf_datatype t, const uint8_t *p)
{
	unsigned size = tf_datatype_size(t);
	uint64_t u = tf_le_n(p, size);

	if (t == TF_DT_FLOAT32 || t == TF_DT_FLOAT64) {
		double d;
		float f;
		if (size == 4) {
			memcpy(&f, p, 4);
			d = f;
		} else {
			memcpy(&d, p, 8);
		}
		snprintf(buf, n, "%g", d);
	} else if (tf_datatype_is_signed(t) || tf_datatype_is_datetime(t)) {
		int64_t v = size == 8 ? (int64_t)u : (int64_t)(u << (64 - 8 * size)) >> (64 - 8 * size);
		snprintf(buf, n, "%" PRId64, v);
	} else {
		snprintf(buf, n, "%" PRIu64, u);
	}
}

static void print_pipeline(FILE *out, const tf_pipeline *p)
{
	char *s = tf_pipeline_text(p);

	fprintf(out, "%s", s && *s ? s : "(none)");
	free(s);
}

static void print_cells(FILE *out, const tf_field *f)
{
	if (f->cell_val_num == TF_CELL_VAR)
		fprintf(out, "var");
	else
		fprintf(out, "%u", f->cell_val_num);
}

static void print_dimension(FILE *out, const tf_schema *s, const tf_field *d)
{
	unsigned size = tf_datatype_size(d->type);
	char lo[48], hi[48], ext[48];

	fprintf(out, "    %-12s %-14s", d->name, tf_datatype_name(d->type));
	if (d->cell_val_num == TF_CELL_VAR) {
		fprintf(out, " (string)");
	} else {
		fmt_value(lo, sizeof(lo), d->type, d->domain);
		fmt_value(hi, sizeof(hi), d->type, d->domain + size);
		fprintf(out, " domain [%s, %s]", lo, hi);
	}
	if (d->has_extent) {
		fmt_value(ext, sizeof(ext), d->type, d->extent);
		fprintf(out, " extent %s", ext);
	}
	fprintf(out, "\n      filters: ");
	print_pipeline(out, tf_schema_dim_filters(s, d));
	fprintf(out, d->filters && tf_pipeline_count(d->filters) ? "\n" : " (coords filters)\n");
}

void tf_schema_print(const tf_schema *s, FILE *out)
{
	fprintf(out, "array schema, format version %u", s->version);
	if (s->layout_version != s->version)
		fprintf(out, " (read with the layout of version %u)", s->layout_version);
	fprintf(out, "\n  %s, tile order %s, cell order %s, capacity %" PRIu64 "%s\n",
		s->dense ? "dense" : "sparse", layout_name(s->tile_order), layout_name(s->cell_order),
		s->capacity, s->allows_dups ? ", duplicates allowed" : "");
	fprintf(out, "  dimensions (%zu):\n", s->ndims);
	for (size_t d = 0; d < s->ndims; d++)
		print_dimension(out, s, &s->dims[d]);
	fprintf(out, "  attributes (%zu):\n", s->nattrs);
	for (size_t i = 0; i < s->nattrs; i++) {
		const tf_field *a = &s->attrs[i];
		fprintf(out, "    %-12s %-14s cells ", a->name, tf_datatype_name(a->type));
		print_cells(out, a);
		fprintf(out, "%s\n      filters: ", a->nullable ? ", nullable" : "");
		print_pipeline(out, a->filters);
		fprintf(out, "\n");
	}
	fprintf(out, "  coords filters:   ");
	print_pipeline(out, s->coords);
	fprintf(out, "\n  offsets filters:  ");
	print_pipeline(out, s->offsets);
	fprintf(out, "\n  validity filters: ");
	print_pipeline(out, s->validity);
	fprintf(out, "\n");
	if (s->nenums)
		fprintf(out, "  enumerations:     %zu\n", s->nenums);
}
