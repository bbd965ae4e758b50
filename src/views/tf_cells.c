/*
 * tf_cells.c - cell values as CSV text, enumerations, NumPy headers.
 */
#include "views/tf_cells.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- enumerations ---------------------------------------------------------------------- */

struct tf_enum {
	tf_datatype type;
	uint32_t cell_val_num;
	size_t n;		/* values */
	uint8_t *data;
	uint64_t *starts;	/* n + 1 byte offsets into data */
};

static tf_status enum_values(tf_enum *e, tf_span data, tf_span offs, tf_error *err)
{
	unsigned size = tf_datatype_size(e->type);
	uint64_t cell = (uint64_t)e->cell_val_num * size;

	if (e->cell_val_num != TF_CELL_VAR && (cell == 0 || data.n % cell))
		return tf_err(err, TF_E_CORRUPT, "enumeration data of %zu bytes for cells of %llu",
			      data.n, (unsigned long long)cell);
	e->n = e->cell_val_num == TF_CELL_VAR ? offs.n / 8 : data.n / cell;
	if ((e->cell_val_num == TF_CELL_VAR && offs.n % 8) ||
	    !(e->starts = malloc((e->n + 1) * sizeof(*e->starts))) || !(e->data = malloc(data.n + 1)))
		return tf_err(err, offs.n % 8 ? TF_E_CORRUPT : TF_E_NOMEM, "enumeration offsets");
	memcpy(e->data, data.p, data.n);
	for (size_t i = 0; i < e->n; i++) {
		e->starts[i] = e->cell_val_num == TF_CELL_VAR ? tf_le64(offs.p + 8 * i) : i * cell;
		if (e->starts[i] > data.n || (i && e->starts[i] < e->starts[i - 1]))
			return tf_err(err, TF_E_CORRUPT, "enumeration offset %zu out of order", i);
	}
	e->starts[e->n] = data.n;
	return TF_OK;
}

tf_status tf_enum_parse(tf_span payload, tf_enum **out, tf_error *err)
{
	tf_reader r = tf_reader_of(payload);
	tf_enum *e = calloc(1, sizeof(*e));
	uint32_t version, len;
	uint64_t size;
	uint8_t type, ordered;
	tf_span skip, data, offs = { NULL, 0 };
	tf_status rc;

	if (!e)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if ((rc = tf_get_u32(&r, &version, "enumeration version", err)) != TF_OK ||
	    (rc = tf_get_u32(&r, &len, "enumeration name", err)) != TF_OK ||
	    (rc = tf_get_span(&r, len, &skip, "enumeration name", err)) != TF_OK ||
	    (rc = tf_get_u32(&r, &len, "enumeration path", err)) != TF_OK ||
	    (rc = tf_get_span(&r, len, &skip, "enumeration path", err)) != TF_OK ||
	    (rc = tf_get_u8(&r, &type, "enumeration type", err)) != TF_OK ||
	    (rc = tf_get_u32(&r, &e->cell_val_num, "enumeration cell_val_num", err)) != TF_OK ||
	    (rc = tf_get_u8(&r, &ordered, "enumeration ordered", err)) != TF_OK ||
	    (rc = tf_get_u64(&r, &size, "enumeration data size", err)) != TF_OK ||
	    (rc = tf_get_span(&r, size, &data, "enumeration data", err)) != TF_OK)
		goto fail;
	if (!tf_datatype_valid(type) || e->cell_val_num == 0) {
		rc = tf_err(err, TF_E_CORRUPT, "enumeration of type %u, %u values per cell", type,
			    e->cell_val_num);
		goto fail;
	}
	e->type = (tf_datatype)type;
	if (e->cell_val_num == TF_CELL_VAR &&
	    ((rc = tf_get_u64(&r, &size, "enumeration offsets size", err)) != TF_OK ||
	     (rc = tf_get_span(&r, size, &offs, "enumeration offsets", err)) != TF_OK))
		goto fail;
	if ((rc = enum_values(e, data, offs, err)) == TF_OK) {
		*out = e;
		return TF_OK;
	}
fail:
	tf_enum_free(e);
	return tf_err_prefix(err, "enumeration");
}

void tf_enum_free(tf_enum *e)
{
	if (e) {
		free(e->data);
		free(e->starts);
		free(e);
	}
}

size_t tf_enum_count(const tf_enum *e) { return e->n; }

/* ---- numbers --------------------------------------------------------------------------- */

static size_t fmt_u64(char *buf, uint64_t v)
{
	char tmp[24];
	size_t n = 0, i = 0;

	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10));
	while (n)
		buf[i++] = tmp[--n];
	buf[i] = '\0';
	return i;
}

static size_t fmt_i64(char *buf, int64_t v)
{
	if (v >= 0)
		return fmt_u64(buf, (uint64_t)v);
	buf[0] = '-';
	return 1 + fmt_u64(buf + 1, 0 - (uint64_t)v);
}

/* NaN and the infinities as Python's float() reads them. */
static size_t fmt_special(char *buf, double v)
{
	if (isnan(v))
		return (size_t)sprintf(buf, "nan");
	return (size_t)sprintf(buf, v < 0 ? "-inf" : "inf");
}

/* The correctly rounded N-digit form of the closest decimal is the
 * shortest that round-trips once N reaches DBL_DIG (15): a double's half
 * ulp is below half a unit of the 15th digit, so a shorter exact form
 * survives rounding to 15 digits (trailing zeros are dropped by %g). */
size_t tf_fmt_f64(char *buf, double v)
{
	int n = 0;

	if (!isfinite(v))
		return fmt_special(buf, v);
	for (int prec = 15; prec <= 17; prec++) {
		n = snprintf(buf, 32, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	return (size_t)n;
}

size_t tf_fmt_f32(char *buf, float v)
{
	int n = 0;

	if (!isfinite(v))
		return fmt_special(buf, v);
	for (int prec = 6; prec <= 9; prec++) {	/* FLT_DIG = 6, 9 always round-trips */
		n = snprintf(buf, 32, "%.*g", prec, (double)v);
		if (strtof(buf, NULL) == v)
			break;
	}
	return (size_t)n;
}

/* ---- dates and times --------------------------------------------------------------------- */

/* The proleptic Gregorian date of a day count from 1970-01-01 (the
 * well-known era arithmetic: 400-year eras of 146097 days from 0000-03-01). */
static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
	int64_t era, yy;
	uint64_t doe, yoe, doy, mp;

	if (z > INT64_MAX - 719468)	/* far past any calendar: saturate */
		z = INT64_MAX - 719468;
	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = (uint64_t)(z - era * 146097);
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	yy = (int64_t)yoe + era * 400;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
	*m = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
	*y = yy + (*m <= 2);
}

static int64_t floor_div(int64_t a, int64_t b, int64_t *rem)
{
	int64_t q = a / b, r = a % b;

	if (r < 0) {
		q--;
		r += b;
	}
	*rem = r;
	return q;
}

/* Years as NumPy prints them ("%04" of the signed year: 0042, -221, 10183). */
static size_t fmt_year(char *buf, int64_t y)
{
	return (size_t)sprintf(buf, "%04" PRId64, y);
}

/* Units per second and digits of the fraction of the sub-second units. */
static const struct {
	int64_t per_sec;
	int digits;
} subsec[] = { { 1000, 3 }, { 1000000, 6 }, { 1000000000, 9 } };

/* v in unit u (0 sec .. 3 ns, 4 ps, 5 fs, 6 as) -> seconds and fraction. */
static void split_seconds(int64_t v, int u, int64_t *sec, uint64_t *frac, int *digits)
{
	int64_t rem;

	if (u == 0) {
		*sec = v, *frac = 0, *digits = 0;
	} else if (u <= 3) {
		*sec = floor_div(v, subsec[u - 1].per_sec, &rem);
		*frac = (uint64_t)rem, *digits = subsec[u - 1].digits;
	} else {	/* ps, fs, as: 10^12, 10^15, 10^18 per second */
		int64_t per = u == 4 ? 1000000000000 : u == 5 ? 1000000000000000 : 1000000000000000000;
		*sec = floor_div(v, per, &rem);
		*frac = (uint64_t)rem, *digits = 9 + 3 * (u - 3);
	}
}

static size_t fmt_date_days(char *buf, int64_t days)
{
	int64_t y;
	unsigned m, d;
	size_t n;

	civil_from_days(days, &y, &m, &d);
	n = fmt_year(buf, y);
	return n + (size_t)sprintf(buf + n, "-%02u-%02u", m, d);
}

/* DATETIME_HR .. DATETIME_AS: units 0 hr, 1 min, 2 sec, 3 ms ... 9 as. */
static size_t fmt_datetime_time(char *buf, int unit, int64_t v)
{
	int64_t days, rem, sec;
	uint64_t frac = 0;
	int digits = 0;
	size_t n;

	if (unit <= 1) {	/* hours or minutes: no seconds to overflow */
		days = floor_div(v, unit == 0 ? 24 : 1440, &rem);
		n = fmt_date_days(buf, days);
		n += (size_t)sprintf(buf + n, unit == 0 ? "T%02dZ" : "T%02d:%02dZ",
				     (int)(unit == 0 ? rem : rem / 60), (int)(rem % 60));
		return n;
	}
	split_seconds(v, unit - 2, &sec, &frac, &digits);
	days = floor_div(sec, 86400, &rem);
	n = fmt_date_days(buf, days);
	n += (size_t)sprintf(buf + n, "T%02d:%02d:%02d", (int)(rem / 3600), (int)(rem / 60 % 60),
			     (int)(rem % 60));
	if (digits)
		n += (size_t)sprintf(buf + n, ".%0*" PRIu64, digits, frac);
	buf[n++] = 'Z';
	buf[n] = '\0';
	return n;
}

/* TIME_HR .. TIME_AS: a signed duration as [-]HH[:MM[:SS[.f]]]. */
static size_t fmt_time(char *buf, int unit, int64_t v)
{
	uint64_t a = v < 0 ? 0 - (uint64_t)v : (uint64_t)v, sec, frac = 0;
	int digits = 0;
	size_t n = v < 0 ? (size_t)sprintf(buf, "-") : 0;

	if (unit <= 1) {	/* hours, or minutes */
		uint64_t h = unit == 0 ? a : a / 60;
		n += (size_t)sprintf(buf + n, "%02" PRIu64, h);
		if (unit == 1)
			n += (size_t)sprintf(buf + n, ":%02" PRIu64, a % 60);
		return n;
	}
	if (unit == 2) {
		sec = a;
	} else {
		static const uint64_t per[] = { 1000ull, 1000000ull, 1000000000ull, 1000000000000ull,
						1000000000000000ull, 1000000000000000000ull };
		sec = a / per[unit - 3];
		frac = a % per[unit - 3];
		digits = 3 * (unit - 2);
	}
	n += (size_t)sprintf(buf + n, "%02" PRIu64 ":%02" PRIu64 ":%02" PRIu64, sec / 3600, sec / 60 % 60,
			     sec % 60);
	if (digits)
		n += (size_t)sprintf(buf + n, ".%0*" PRIu64, digits, frac);
	return n;
}

size_t tf_fmt_datetime(char *buf, tf_datatype t, int64_t v)
{
	int64_t rem;
	size_t n;

	if (v == INT64_MIN)
		return (size_t)sprintf(buf, "NaT");
	if (t >= TF_DT_TIME_HR && t <= TF_DT_TIME_AS)
		return fmt_time(buf, (int)(t - TF_DT_TIME_HR), v);
	switch ((int)t - TF_DT_DATETIME_YEAR) {
	case 0:		/* YEAR */
		return fmt_year(buf, v > INT64_MAX - 1970 ? INT64_MAX : v + 1970);
	case 1: {	/* MONTH */
		int64_t y = floor_div(v, 12, &rem);
		n = fmt_year(buf, y > INT64_MAX - 1970 ? INT64_MAX : y + 1970);
		return n + (size_t)sprintf(buf + n, "-%02d", (int)rem + 1);
	}
	case 2:		/* WEEK: weeks from 1970-01-01, as NumPy counts them */
		return fmt_date_days(buf, v > INT64_MAX / 7 || v < INT64_MIN / 7 ? 0 : v * 7);
	case 3:		/* DAY */
		return fmt_date_days(buf, v);
	default:
		return fmt_datetime_time(buf, (int)t - (TF_DT_DATETIME_YEAR + 4), v);
	}
}

/* ---- fields ------------------------------------------------------------------------------ */

static bool needs_quotes(const uint8_t *p, size_t n)
{
	if (n == 0)
		return true;	/* "" is an empty value, nothing is null */
	for (size_t i = 0; i < n; i++)
		if (p[i] == ',' || p[i] == '"' || p[i] == '\n' || p[i] == '\r')
			return true;
	return false;
}

tf_status tf_csv_text(tf_buf *out, const void *src, size_t n, tf_error *err)
{
	const uint8_t *p = src;
	uint8_t *at;
	tf_status rc;

	if (!needs_quotes(p, n))
		return tf_buf_append(out, p, n, err);
	if ((rc = tf_buf_grow(out, tf_size_add(tf_size_mul(n, 2), 2), &at, err)) != TF_OK)
		return rc;
	*at++ = '"';
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '"')
			*at++ = '"';
		*at++ = p[i];
	}
	*at++ = '"';
	out->len = (size_t)(at - out->p);
	return TF_OK;
}

/* UTF-16/UCS-2 (w 2) or UTF-32/UCS-4 (w 4) little-endian code units to
 * UTF-8; unpaired surrogates and values past U+10FFFF become U+FFFD. */
tf_status tf_utf8_append_wide(tf_buf *tmp, const uint8_t *p, size_t n, unsigned w, tf_error *err)
{
	tf_status rc = TF_OK;

	for (size_t i = 0; i + w <= n && rc == TF_OK; i += w) {
		uint32_t c = w == 2 ? tf_le16(p + i) : tf_le32(p + i);
		uint8_t u[4];
		size_t k;

		if (w == 2 && c >= 0xd800 && c < 0xdc00 && i + 4 <= n && tf_le16(p + i + 2) >= 0xdc00 &&
		    tf_le16(p + i + 2) < 0xe000) {
			c = 0x10000 + ((c - 0xd800) << 10) + (tf_le16(p + i + 2) - 0xdc00u);
			i += 2;
		} else if ((c >= 0xd800 && c < 0xe000) || c > 0x10ffff) {
			c = 0xfffd;
		}
		if (c < 0x80)
			u[0] = (uint8_t)c, k = 1;
		else if (c < 0x800)
			u[0] = (uint8_t)(0xc0 | c >> 6), u[1] = (uint8_t)(0x80 | (c & 63)), k = 2;
		else if (c < 0x10000)
			u[0] = (uint8_t)(0xe0 | c >> 12), u[1] = (uint8_t)(0x80 | (c >> 6 & 63)),
			u[2] = (uint8_t)(0x80 | (c & 63)), k = 3;
		else
			u[0] = (uint8_t)(0xf0 | c >> 18), u[1] = (uint8_t)(0x80 | (c >> 12 & 63)),
			u[2] = (uint8_t)(0x80 | (c >> 6 & 63)), u[3] = (uint8_t)(0x80 | (c & 63)), k = 4;
		rc = tf_buf_append(tmp, u, k, err);
	}
	return rc;
}

static tf_status fmt_string(tf_buf *out, tf_datatype t, const uint8_t *p, size_t n, tf_error *err)
{
	tf_buf tmp = TF_BUF_INIT(SIZE_MAX);
	tf_status rc;

	if (t != TF_DT_STRING_UTF16 && t != TF_DT_STRING_UCS2 && t != TF_DT_STRING_UTF32 &&
	    t != TF_DT_STRING_UCS4)
		return tf_csv_text(out, p, n, err);
	rc = tf_utf8_append_wide(&tmp, p, n, tf_datatype_size(t), err);
	if (rc == TF_OK)
		rc = tf_csv_text(out, tmp.p ? tmp.p : (const uint8_t *)"", tmp.len, err);
	tf_buf_free(&tmp);
	return rc;
}

static tf_status fmt_hex(tf_buf *out, const uint8_t *p, size_t n, tf_error *err)
{
	static const char digits[] = "0123456789abcdef";
	uint8_t *at;
	tf_status rc;

	if (n == 0)
		return tf_buf_append(out, "\"\"", 2, err);
	if ((rc = tf_buf_grow(out, tf_size_mul(n, 2), &at, err)) != TF_OK)
		return rc;
	for (size_t i = 0; i < n; i++) {
		*at++ = (uint8_t)digits[p[i] >> 4];
		*at++ = (uint8_t)digits[p[i] & 15];
	}
	out->len += 2 * n;
	return TF_OK;
}

/* One number (or date) of type t at p into buf (at least 48 bytes). */
static size_t fmt_number(char *buf, tf_datatype t, const uint8_t *p)
{
	unsigned size = tf_datatype_size(t);
	uint64_t u = tf_le_n(p, size);
	float f;
	double d;

	switch (t) {
	case TF_DT_FLOAT32:
		memcpy(&f, p, 4);
		return tf_fmt_f32(buf, f);
	case TF_DT_FLOAT64:
		memcpy(&d, p, 8);
		return tf_fmt_f64(buf, d);
	case TF_DT_BOOL:
		return fmt_u64(buf, u != 0);
	default:
		break;
	}
	if (tf_datatype_is_datetime(t))
		return tf_fmt_datetime(buf, t, (int64_t)u);
	if (tf_datatype_is_signed(t))
		return fmt_i64(buf, size == 8 ? (int64_t)u : (int64_t)(u << (64 - 8 * size)) >> (64 - 8 * size));
	return fmt_u64(buf, u);
}

static bool is_text(tf_datatype t)
{
	return t == TF_DT_CHAR || (t >= TF_DT_STRING_ASCII && t <= TF_DT_STRING_UCS4) || t == TF_DT_GEOM_WKT;
}

static bool is_bytes(tf_datatype t)
{
	return t == TF_DT_BLOB || t == TF_DT_GEOM_WKB || t == TF_DT_ANY;
}

/* Values of a numeric cell, space-separated; an empty var cell is "". */
static tf_status fmt_numbers(tf_buf *out, tf_datatype t, const uint8_t *p, size_t n, tf_error *err)
{
	unsigned size = tf_datatype_size(t);
	size_t count = n / size;
	uint8_t *at;
	tf_status rc;

	if (count == 0)
		return tf_buf_append(out, "\"\"", 2, err);
	for (size_t i = 0; i < count; i++) {
		if ((rc = tf_buf_grow(out, 49, &at, err)) != TF_OK)
			return rc;
		if (i)
			*at++ = ' ', out->len++;
		out->len += fmt_number((char *)at, t, p + i * size);
	}
	return TF_OK;
}

tf_cellfmt tf_enum_valfmt(const tf_enum *e)
{
	return (tf_cellfmt){ e->type, e->cell_val_num, NULL };
}

bool tf_enum_value(const tf_cellfmt *f, const uint8_t *p, size_t n, const uint8_t **v, size_t *vn)
{
	const tf_enum *e = f->enumeration;
	unsigned size = tf_datatype_size(f->type);
	uint64_t u = n >= size ? tf_le_n(p, size) : UINT64_MAX;

	if (tf_datatype_is_signed(f->type) && size < 8 && (u >> (8 * size - 1)))
		return false;	/* a negative index: no value */
	if (n != size || u >= e->n)
		return false;
	*v = e->data + e->starts[u];
	*vn = (size_t)(e->starts[u + 1] - e->starts[u]);
	return true;
}

static tf_status fmt_enum_value(tf_buf *out, const tf_cellfmt *f, const uint8_t *p, size_t n,
				tf_error *err)
{
	tf_cellfmt vf = tf_enum_valfmt(f->enumeration);
	const uint8_t *v;
	size_t vn;

	if (!tf_enum_value(f, p, n, &v, &vn))
		return TF_OK;
	return tf_cell_format(out, &vf, v, vn, true, err);
}

/* One plain integer (the common cell): no dispatch, one reservation. */
static tf_status fmt_one_integer(tf_buf *out, tf_datatype t, unsigned size, const uint8_t *p, tf_error *err)
{
	uint64_t u = tf_le_n(p, size);
	uint8_t *at;
	tf_status rc = tf_buf_grow(out, 21, &at, err);

	if (rc != TF_OK)
		return rc;
	if (tf_datatype_is_signed(t))
		out->len += fmt_i64((char *)at, size == 8 ? (int64_t)u
							  : (int64_t)(u << (64 - 8 * size)) >> (64 - 8 * size));
	else
		out->len += fmt_u64((char *)at, t == TF_DT_BOOL ? u != 0 : u);
	return TF_OK;
}

tf_status tf_cell_format(tf_buf *out, const tf_cellfmt *f, const uint8_t *p, size_t n, bool valid,
			 tf_error *err)
{
	unsigned size = tf_datatype_size(f->type);

	if (!valid)
		return TF_OK;
	if (f->cell_val_num == 1 && !f->enumeration && n == size && tf_datatype_is_integer(f->type))
		return fmt_one_integer(out, f->type, size, p, err);
	if (f->enumeration)
		return fmt_enum_value(out, f, p, n, err);
	if (is_text(f->type))
		return fmt_string(out, f->type, p, n, err);
	if (is_bytes(f->type))
		return fmt_hex(out, p, n, err);
	return fmt_numbers(out, f->type, p, n, err);
}

/* ---- NumPy ----------------------------------------------------------------------------------- */

static const char *const time_units[] = { "Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps",
					  "fs", "as" };

bool tf_npy_dtype(tf_datatype t, uint32_t cell_val_num, char *buf, size_t n, uint32_t *inner)
{
	static const char *const plain[] = {
		[TF_DT_INT32] = "<i4", [TF_DT_INT64] = "<i8", [TF_DT_FLOAT32] = "<f4",
		[TF_DT_FLOAT64] = "<f8", [TF_DT_INT8] = "|i1", [TF_DT_UINT8] = "|u1",
		[TF_DT_INT16] = "<i2", [TF_DT_UINT16] = "<u2", [TF_DT_UINT32] = "<u4",
		[TF_DT_UINT64] = "<u8", [TF_DT_STRING_UTF16] = "<u2", [TF_DT_STRING_UCS2] = "<u2",
		[TF_DT_BOOL] = "|b1",
	};

	*inner = 1;
	if (cell_val_num == TF_CELL_VAR || cell_val_num == 0 || (unsigned)t >= TF_DT_COUNT)
		return false;
	if (t == TF_DT_CHAR || t == TF_DT_STRING_ASCII || t == TF_DT_STRING_UTF8 || t == TF_DT_GEOM_WKT)
		return snprintf(buf, n, "|S%u", cell_val_num) < (int)n;
	if (t == TF_DT_STRING_UTF32 || t == TF_DT_STRING_UCS4)
		return snprintf(buf, n, "<U%u", cell_val_num) < (int)n;
	if (t == TF_DT_BLOB || t == TF_DT_GEOM_WKB)
		return snprintf(buf, n, "|V%u", cell_val_num) < (int)n;
	*inner = cell_val_num;
	if (t >= TF_DT_DATETIME_YEAR && t <= TF_DT_DATETIME_AS)
		return snprintf(buf, n, "<M8[%s]", time_units[t - TF_DT_DATETIME_YEAR]) < (int)n;
	if (t >= TF_DT_TIME_HR && t <= TF_DT_TIME_AS)
		return snprintf(buf, n, "<m8[%s]", time_units[t - TF_DT_TIME_HR + 4]) < (int)n;
	if ((size_t)t < sizeof(plain) / sizeof(plain[0]) && plain[t])
		return snprintf(buf, n, "%s", plain[t]) < (int)n;
	return false;
}

size_t tf_npy_shape_text(const uint64_t *shape, size_t ndim, char *buf, size_t n)
{
	size_t len = (size_t)snprintf(buf, n, "(");

	for (size_t i = 0; i < ndim; i++)
		len += (size_t)snprintf(len < n ? buf + len : NULL, len < n ? n - len : 0,
					i ? ", %" PRIu64 : "%" PRIu64, shape[i]);
	return len + (size_t)snprintf(len < n ? buf + len : NULL, len < n ? n - len : 0, ndim == 1 ? ",)" : ")");
}

tf_status tf_npy_header(const char *descr, const uint64_t *shape, size_t ndim, tf_buf *out,
			tf_error *err)
{
	char dict[TF_NPY_SHAPE_MAX + 128], shp[TF_NPY_SHAPE_MAX];
	size_t len, total;
	tf_status rc;

	if (tf_npy_shape_text(shape, ndim, shp, sizeof(shp)) >= sizeof(shp))
		return tf_err(err, TF_E_INVAL, "NumPy shape of %zu dimensions too long", ndim);
	len = (size_t)snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
			       descr, shp);
	if (len >= sizeof(dict) - 64)
		return tf_err(err, TF_E_INVAL, "NumPy header too long");
	/* magic (6) + version (2) + u16 length, then the dict padded with
	 * spaces and ended by '\n' to a multiple of 64 bytes (format.py). */
	total = (10 + len + 1 + 63) / 64 * 64;
	out->len = 0;
	if ((rc = tf_buf_reserve(out, total, err)) != TF_OK)
		return rc;
	memcpy(out->p, "\x93NUMPY\x01\x00", 8);
	tf_put_le16(out->p + 8, (uint16_t)(total - 10));
	memcpy(out->p + 10, dict, len);
	memset(out->p + 10 + len, ' ', total - 10 - len - 1);
	out->p[total - 1] = '\n';
	out->len = total;
	return TF_OK;
}
