/*
 * tf_spec.c - the text form of a pipeline (contract in tf_spec.h):
 *     name[(opt=value, ...)] | ...      or numeric:  [tiledb:]id[,param...] | ...
 *     hdf5:id[,param...]                an HDF5 plugin, netCDF's _Filter syntax
 */
#include "format/tf_spec.h"

#include "format/tf_pipeline_int.h"

#include "filters/plugin.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

typedef enum { K_INT, K_UINT, K_DOUBLE, K_FLOAT, K_DTYPE } opt_kind;

typedef struct opt_desc {
	const char *name, *alias;
	opt_kind kind;
	size_t off, width;	/* field in tf_filter_opts */
	uint64_t max;		/* K_UINT upper bound */
} opt_desc;

#define FIELD(f) offsetof(tf_filter_opts, f), sizeof(((tf_filter_opts *)0)->f)

static const opt_desc level_opt[] = {
	{ "level", "compression_level", K_INT, FIELD(level), 0 },
};
static const opt_desc reinterpret_opts[] = {
	{ "level", "compression_level", K_INT, FIELD(level), 0 },
	{ "reinterpret", "reinterpret_datatype", K_DTYPE, FIELD(reinterpret), 0 },
};
static const opt_desc window_opt[] = {
	{ "window", "max_window", K_UINT, FIELD(window), UINT32_MAX },
};
static const opt_desc scale_opts[] = {
	{ "scale", "factor", K_DOUBLE, FIELD(scale), 0 },
	{ "offset", NULL, K_DOUBLE, FIELD(offset), 0 },
	{ "byte_width", "bytewidth", K_UINT, FIELD(byte_width), 8 },
};
static const opt_desc webp_opts[] = {
	{ "quality", NULL, K_FLOAT, FIELD(quality), 0 },
	{ "format", "input_format", K_UINT, FIELD(webp_format), 4 },
	{ "lossless", NULL, K_UINT, FIELD(lossless), 1 },
	{ "y_extent", NULL, K_UINT, FIELD(y_extent), UINT16_MAX },
	{ "x_extent", NULL, K_UINT, FIELD(x_extent), UINT16_MAX },
};

static const opt_desc *layout_opts(tf_opts_layout l, size_t *n)
{
	switch (l) {
	case TF_OPTS_COMPRESSOR: *n = 1; return level_opt;
	case TF_OPTS_REINTERPRET: *n = 2; return reinterpret_opts;
	case TF_OPTS_WINDOW: *n = 1; return window_opt;
	case TF_OPTS_SCALE_FLOAT: *n = 3; return scale_opts;
	case TF_OPTS_WEBP: *n = 5; return webp_opts;
	case TF_OPTS_NONE: case TF_OPTS_CD_VALUES: break;	/* (cd values: cd_args) */
	}
	*n = 0;
	return NULL;
}

/* ---- setting one option from text ------------------------------------------------ */

static void store_uint(void *field, size_t width, uint64_t v)
{
	uint8_t u8 = (uint8_t)v;
	uint16_t u16 = (uint16_t)v;
	uint32_t u32 = (uint32_t)v;

	switch (width) {
	case 1: memcpy(field, &u8, 1); break;
	case 2: memcpy(field, &u16, 2); break;
	case 4: memcpy(field, &u32, 4); break;
	default: memcpy(field, &v, 8); break;
	}
}

static bool parse_int(const char *s, long long *v)
{
	char *end;

	errno = 0;
	*v = strtoll(s, &end, 0);
	return errno == 0 && end != s && *end == '\0';
}

static tf_status set_opt(tf_filter_opts *o, const opt_desc *d, const char *val, tf_error *err)
{
	void *field = (char *)o + d->off;
	long long i;
	char *end;
	double x;

	switch (d->kind) {
	case K_INT:	/* also the u32 pattern of a negative level, as _Filter shows it */
		if (!parse_int(val, &i) || i < INT32_MIN || i > UINT32_MAX)
			break;
		o->level = i > INT32_MAX ? (int32_t)(i - 0x100000000LL) : (int32_t)i;
		return TF_OK;
	case K_UINT:
		if (!parse_int(val, &i) || i < 0 || (uint64_t)i > d->max)
			break;
		store_uint(field, d->width, (uint64_t)i);
		return TF_OK;
	case K_DOUBLE:
	case K_FLOAT:
		errno = 0;
		x = strtod(val, &end);
		if (errno || end == val || *end || !isfinite(x))
			break;
		/* A double past float's range would become inf (undefined in C),
		 * which the printed form could not parse back. */
		if (d->kind == K_FLOAT && fabs(x) > FLT_MAX)
			break;
		if (d->kind == K_FLOAT)
			o->quality = (float)x;
		else
			memcpy(field, &x, sizeof(x));
		return TF_OK;
	case K_DTYPE:
		if (tf_datatype_parse(val, &o->reinterpret))
			return TF_OK;
		if (parse_int(val, &i) && i >= 0 && tf_datatype_valid((unsigned)i)) {
			o->reinterpret = (tf_datatype)i;
			return TF_OK;
		}
		break;
	}
	return tf_err(err, TF_E_INVAL, "bad value '%s' for option %s", val, d->name);
}

static char *trim(char *s);

/* ---- netCDF filter constants (seed 003, "parameter encoding syntax") ----------------- */

/* Split a trailing type tag (u b s l f d, at most two) off s; hex has none. */
static size_t tag_len(const char *s, size_t n)
{
	const char *digits = s + (s[0] == '-');
	size_t t = 0;

	if (digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X'))
		return 0;
	while (t < 2 && t + 1 < n && strchr("ubslfdUBSLFD", s[n - 1 - t]))
		t++;
	return t;
}

static void put_words(uint64_t v, uint32_t w[2], size_t *nw, bool wide)
{
	w[0] = (uint32_t)v;	/* little-endian: the low half first */
	w[1] = (uint32_t)(v >> 32);
	*nw = wide ? 2 : 1;
}

/* An integer constant with tag (lower case) into one or two words. */
static bool nc_integer(const char *num, const char *tag, uint32_t w[2], size_t *nw)
{
	static const struct { const char *tag; long long min; unsigned long long max; bool wide; } t[] = {
		{ "b", INT8_MIN, INT8_MAX, false }, { "ub", 0, UINT8_MAX, false },
		{ "s", INT16_MIN, INT16_MAX, false }, { "us", 0, UINT16_MAX, false },
		{ "u", 0, UINT32_MAX, false }, { "l", INT64_MIN, INT64_MAX, true },
		{ "ul", 0, UINT64_MAX, true },
	};
	unsigned long long u;
	long long i;
	char *end;

	errno = 0;
	if (num[0] == '-') {
		i = strtoll(num, &end, 0);
		u = (unsigned long long)i;	/* two's complement, sign-extended */
	} else {
		u = strtoull(num, &end, 0);
		i = u > LLONG_MAX ? LLONG_MAX : (long long)u;
	}
	if (errno || end == num || *end)
		return false;
	if (!*tag) {	/* untagged: int32 if negative, else the smallest that fits */
		put_words(u, w, nw, num[0] != '-' && u > UINT32_MAX);
		return num[0] != '-' || i >= INT32_MIN;
	}
	for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++)
		if (!strcmp(tag, t[k].tag)) {
			put_words(u, w, nw, t[k].wide);
			return num[0] == '-' ? t[k].min < 0 && i >= t[k].min : u <= t[k].max;
		}
	return false;
}

/* One constant as one or two unsigned 32-bit words (*nw of them). */
static bool nc_constant(const char *s, uint32_t w[2], size_t *nw)
{
	size_t n = strlen(s), t = tag_len(s, n);
	char num[64], tag[3];
	char *end;

	if (n == 0 || n >= sizeof(num))
		return false;
	memcpy(num, s, n - t);
	num[n - t] = '\0';
	for (size_t k = 0; k <= t; k++)
		tag[k] = (char)tolower((unsigned char)s[n - t + k]);
	errno = 0;
	if (!strcmp(tag, "f")) {
		float f = strtof(num, &end);
		memcpy(&w[0], &f, 4);
		*nw = 1;
		return !errno && end != num && !*end && isfinite(f);
	}
	if (!strcmp(tag, "d")) {
		double d = strtod(num, &end);
		uint64_t bits;
		memcpy(&bits, &d, 8);
		put_words(bits, w, nw, true);
		return !errno && end != num && !*end && isfinite(d);
	}
	return nc_integer(num, tag, w, nw);
}

/* Positional constants into o->cd (TF_OPTS_CD_VALUES). */
static tf_status cd_args(tf_filter_opts *o, char *args, tf_error *err)
{
	char *save = NULL;

	for (char *a = strtok_r(args, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
		uint32_t w[2];
		size_t nw;

		a = trim(a);
		if (strchr(a, '='))
			return tf_err(err, TF_E_INVAL, "parameters are positional ('%s')", a);
		if (!nc_constant(a, w, &nw))
			return tf_err(err, TF_E_INVAL, "bad parameter '%s' (netCDF constants: 9, -1, 200ub, "
				      "-17b, 1.5f, 1.5d, -9l, 18ul ...)", a);
		if (o->ncd + nw > TF_MAX_CD_VALUES)
			return tf_err(err, TF_E_INVAL, "more than %d parameters", TF_MAX_CD_VALUES);
		for (size_t k = 0; k < nw; k++)
			o->cd[o->ncd++] = w[k];
	}
	return TF_OK;
}

/* ---- tokenizing ------------------------------------------------------------------- */

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static const opt_desc *find_opt(const opt_desc *d, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcasecmp(d[i].name, key) == 0 || (d[i].alias && strcasecmp(d[i].alias, key) == 0))
			return &d[i];
	return NULL;
}

/* Apply a comma-separated argument list: key=value or positional values. */
static tf_status apply_args(const tf_filter_class *c, tf_filter_opts *o, char *args, tf_error *err)
{
	size_t n, pos = 0;
	const opt_desc *d = layout_opts(c->layout, &n);
	char *save = NULL;

	if (c->layout == TF_OPTS_CD_VALUES)
		return cd_args(o, args, err);
	for (char *a = strtok_r(args, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(a, '='), *val;
		const opt_desc *od;

		if (eq) {
			*eq = '\0';
			od = find_opt(d, n, trim(a));
			val = trim(eq + 1);
			if (!od)
				return tf_err(err, TF_E_INVAL, "unknown option '%s'", trim(a));
		} else {
			val = trim(a);
			if (!*val && !n)
				continue;	/* "bitshuffle()" */
			if (pos >= n)
				return tf_err(err, TF_E_INVAL, "too many parameters");
			od = &d[pos++];
		}
		tf_status rc = set_opt(o, od, val, err);
		if (rc != TF_OK)
			return rc;
	}
	return TF_OK;
}

/* Where plugins were looked for, and what was refused there, for "unknown
 * filter" messages: printf arguments for "%s%s%s%s%s". */
#define PLUGIN_HINT(pl) \
	(pl) && *tf_plugins_path(pl) ? "plugin path '" : "no plugin path is set", \
	(pl) && *tf_plugins_path(pl) ? tf_plugins_path(pl) : "", (pl) && *tf_plugins_path(pl) ? "'" : "", \
	tf_plugins_refused(pl) ? "; " : "", tf_plugins_refused(pl) ? tf_plugins_refused(pl) : ""

static tf_status parse_named(const tf_plugins *pl, char *item, const tf_filter_class **c,
			     tf_filter_opts *o, tf_error *err)
{
	char *paren = strchr(item, '('), *name = item, *args = NULL;

	if (paren) {
		char *close = strrchr(paren, ')');
		if (!close || trim(close + 1)[0] != '\0')
			return tf_err(err, TF_E_INVAL, "'%s': unbalanced parentheses", item);
		*paren = *close = '\0';
		args = paren + 1;
	}
	name = trim(name);
	*c = tf_filter_by_name(name, strlen(name));
	if (!*c)
		*c = tf_plugins_by_name(pl, name, strlen(name));
	if (!*c)
		return tf_err(err, TF_E_INVAL, "unknown filter '%s' (not built in; %s%s%s%s%s)", name,
			      PLUGIN_HINT(pl));
	tf_filter_opts_default(*c, o);
	return args ? apply_args(*c, o, args, err) : TF_OK;
}

/* HDF5 filter id (and parameters) of an HDF5 plugin stage. */
static tf_status parse_hdf5(const tf_plugins *pl, long long id, char *rest, const tf_filter_class **c,
			    tf_filter_opts *o, tf_error *err)
{
	if (id <= 0 || id > 65535)
		return tf_err(err, TF_E_INVAL, "HDF5 filter id %lld is out of range (1-65535)", id);
	if (!(*c = tf_plugins_by_hdf5_id(pl, (unsigned)id)))
		return tf_err(err, TF_E_INVAL, "no HDF5 plugin provides filter %lld (%s%s%s%s%s)", id,
			      PLUGIN_HINT(pl));
	tf_filter_opts_default(*c, o);
	return rest ? cd_args(o, rest, err) : TF_OK;
}

/* [hdf5:]id[,param...]: TileDB ids are below 256, HDF5 plugin ids above. */
static tf_status parse_numeric(const tf_plugins *pl, char *item, bool hdf5, const tf_filter_class **c,
			       tf_filter_opts *o, tf_error *err)
{
	char *comma = strchr(item, ','), *rest = NULL;
	long long id;

	if (comma) {
		*comma = '\0';
		rest = comma + 1;
	}
	if (!parse_int(trim(item), &id) || id < 0)
		return tf_err(err, TF_E_INVAL, "bad filter id '%s'", trim(item));
	if (hdf5 || id > 255)
		return parse_hdf5(pl, id, rest, c, o, err);
	if (!(*c = tf_filter_by_id((unsigned)id)) && !(*c = tf_plugins_by_id(pl, (unsigned)id)))
		return tf_err(err, TF_E_INVAL, "unknown filter id '%s' (not built in; %s%s%s%s%s)", trim(item),
			      PLUGIN_HINT(pl));
	tf_filter_opts_default(*c, o);
	if (rest && strchr(rest, '='))
		return tf_err(err, TF_E_INVAL, "numeric filter %lld: parameters are positional", id);
	return rest ? apply_args(*c, o, rest, err) : TF_OK;
}

static tf_status parse_item(tf_pipeline *p, const tf_plugins *pl, char *item, size_t index,
			    tf_error *err)
{
	const tf_filter_class *c = NULL;
	tf_filter_opts o;
	tf_status rc;

	item = trim(item);
	if (!*item)
		return tf_err(err, TF_E_INVAL, "filter %zu is empty", index + 1);
	if (!strncasecmp(item, "hdf5:", 5))
		rc = parse_numeric(pl, item + 5, true, &c, &o, err);
	else if (isdigit((unsigned char)*item))
		rc = parse_numeric(pl, item, false, &c, &o, err);
	else
		rc = parse_named(pl, item, &c, &o, err);
	if (rc == TF_OK)
		rc = tf_pipeline_push(p, c, &o, err);
	if (rc != TF_OK)
		tf_err_prefix(err, "filter %zu '%s'", index + 1, c ? c->name : item);
	return rc;
}

tf_status tf_pipeline_parse(const char *spec, tf_pipeline **out, tf_error *err)
{
	return tf_pipeline_parse_with(spec, NULL, out, err);
}

tf_status tf_pipeline_parse_with(const char *spec, const tf_plugins *pl, tf_pipeline **out,
				 tf_error *err)
{
	tf_pipeline *p = tf_pipeline_new();
	char *copy = strdup(spec ? spec : ""), *s;
	size_t index = 0;
	tf_status rc = TF_OK;

	if (!p || !copy) {
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
		goto done;
	}
	s = trim(copy);
	if (strncasecmp(s, "tiledb:", 7) == 0)
		s += 7;
	if (*trim(s) == '\0')
		goto done;	/* the empty pipeline */
	/* strtok_r would merge "a||b" into two filters; split by hand. */
	for (char *item = s, *bar;; item = bar + 1) {
		bar = strchr(item, '|');
		if (bar)
			*bar = '\0';
		if ((rc = parse_item(p, pl, item, index++, err)) != TF_OK || !bar)
			break;
	}
done:
	free(copy);
	if (rc != TF_OK) {
		tf_pipeline_free(p);
		return rc;
	}
	*out = p;
	return TF_OK;
}

/* ---- printing ---------------------------------------------------------------------- */

/* Shortest %g form that reads back to the same double. */
static void fmt_double(char *buf, size_t n, double x)
{
	for (int prec = 6; prec <= 17; prec++) {
		snprintf(buf, n, "%.*g", prec, x);
		if (strtod(buf, NULL) == x)
			return;
	}
}

static int fmt_opt(char *buf, size_t n, const tf_filter_opts *o, const opt_desc *d)
{
	const void *field = (const char *)o + d->off;
	uint64_t u = 0;
	char num[40];

	switch (d->kind) {
	case K_INT: return snprintf(buf, n, "%s=%d", d->name, o->level);
	case K_DTYPE: return snprintf(buf, n, "%s=%s", d->name, tf_datatype_name(o->reinterpret));
	case K_FLOAT: fmt_double(num, sizeof(num), o->quality); break;
	case K_DOUBLE: fmt_double(num, sizeof(num), *(const double *)field); break;
	case K_UINT:
		memcpy(&u, field, d->width);	/* little-endian host */
		snprintf(num, sizeof(num), "%llu", (unsigned long long)u);
		break;
	}
	return snprintf(buf, n, "%s=%s", d->name, num);
}

/* Options worth printing: all, except an absent reinterpret type and the
 * level of DELTA/DOUBLE_DELTA, which TileDB ignores (§2.3). */
static bool printed(const tf_filter *f, const opt_desc *d)
{
	if (d->kind == K_DTYPE)
		return f->o.reinterpret != TF_DT_ANY;
	return !(f->cls->layout == TF_OPTS_REINTERPRET && d->kind == K_INT);
}

/* An HDF5 stage as hdf5:ID,params; a plugin's parameters as name(p, ...). */
static size_t fmt_cd_values(char *buf, size_t n, const tf_filter *f)
{
	bool hdf5 = f->cls->hdf5_id != 0;
	size_t len = hdf5 ? (size_t)snprintf(buf, n, "hdf5:%u", f->cls->hdf5_id)
			  : (size_t)snprintf(buf, n, "%s", f->cls->name);

	for (uint32_t i = 0; i < f->o.ncd; i++)
		len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s%u",
					hdf5 ? "," : i ? ", " : "(", f->o.cd[i]);
	if (!hdf5 && f->o.ncd)
		len += (size_t)snprintf(buf + len, len < n ? n - len : 0, ")");
	return len;
}

static size_t fmt_filter(char *buf, size_t n, const tf_filter *f)
{
	size_t nd, len, shown = 0;
	const opt_desc *d = layout_opts(f->cls->layout, &nd);

	if (f->cls->layout == TF_OPTS_CD_VALUES)
		return fmt_cd_values(buf, n, f);
	len = (size_t)snprintf(buf, n, "%s", f->cls->name);
	for (size_t i = 0; i < nd; i++) {
		if (!printed(f, &d[i]))
			continue;
		len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s", shown++ ? ", " : "(");
		len += (size_t)fmt_opt(buf + len, len < n ? n - len : 0, &f->o, &d[i]);
	}
	if (shown)
		len += (size_t)snprintf(buf + len, len < n ? n - len : 0, ")");
	return len;
}

char *tf_pipeline_print(const tf_pipeline *p, const char *sep, size_t filter_cap,
			tf_filter_fmt *fmt)
{
	size_t cap = 64 + p->n * (strlen(sep) + filter_cap), len = 0;
	char *s = malloc(cap);

	if (!s)
		return NULL;
	s[0] = '\0';
	for (size_t i = 0; i < p->n && len < cap; i++) {
		if (i)
			len += (size_t)snprintf(s + len, cap - len, "%s", sep);
		if (len < cap)
			len += fmt(s + len, cap - len, &p->f[i]);
	}
	return s;
}

char *tf_pipeline_text(const tf_pipeline *p)
{
	return tf_pipeline_print(p, " | ", 160 + 12 * TF_MAX_CD_VALUES, fmt_filter);
}
