/*
 * tf_spec.c - the text form of a pipeline (see tf_pipeline.h):
 *     name[(opt=value, ...)] | ...      or numeric:  [tiledb:]id[,param...] | ...
 */
#include "tf_pipeline_int.h"

#include <ctype.h>
#include <errno.h>
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
	case TF_OPTS_NONE: break;
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
	case K_INT:
		if (!parse_int(val, &i) || i < INT32_MIN || i > INT32_MAX)
			break;
		o->level = (int32_t)i;
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

static tf_status parse_named(char *item, const tf_filter_class **c, tf_filter_opts *o, tf_error *err)
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
		return tf_err(err, TF_E_INVAL, "unknown filter '%s'", name);
	tf_filter_opts_default(*c, o);
	return args ? apply_args(*c, o, args, err) : TF_OK;
}

static tf_status parse_numeric(char *item, const tf_filter_class **c, tf_filter_opts *o, tf_error *err)
{
	char *comma = strchr(item, ','), *rest = NULL;
	long long id;

	if (comma) {
		*comma = '\0';
		rest = comma + 1;
	}
	if (!parse_int(trim(item), &id) || id < 0 || id > 255 || !(*c = tf_filter_by_id((unsigned)id)))
		return tf_err(err, TF_E_INVAL, "unknown filter id '%s'", trim(item));
	tf_filter_opts_default(*c, o);
	if (rest && strchr(rest, '='))
		return tf_err(err, TF_E_INVAL, "numeric filter %lld: parameters are positional", id);
	return rest ? apply_args(*c, o, rest, err) : TF_OK;
}

static tf_status parse_item(tf_pipeline *p, char *item, size_t index, tf_error *err)
{
	const tf_filter_class *c = NULL;
	tf_filter_opts o;
	tf_status rc;

	item = trim(item);
	if (!*item)
		return tf_err(err, TF_E_INVAL, "filter %zu is empty", index + 1);
	if (isdigit((unsigned char)*item))
		rc = parse_numeric(item, &c, &o, err);
	else
		rc = parse_named(item, &c, &o, err);
	if (rc == TF_OK)
		rc = tf_pipeline_push(p, c, &o, err);
	if (rc != TF_OK)
		tf_err_prefix(err, "filter %zu '%s'", index + 1, c ? c->name : item);
	return rc;
}

tf_status tf_pipeline_parse(const char *spec, tf_pipeline **out, tf_error *err)
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
		if ((rc = parse_item(p, item, index++, err)) != TF_OK || !bar)
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

static size_t fmt_filter(char *buf, size_t n, const tf_filter *f)
{
	size_t nd, len = (size_t)snprintf(buf, n, "%s", f->cls->name), shown = 0;
	const opt_desc *d = layout_opts(f->cls->layout, &nd);

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

char *tf_pipeline_text(const tf_pipeline *p)
{
	size_t cap = 64 + p->n * 160, len = 0;
	char *s = malloc(cap);

	if (!s)
		return NULL;
	s[0] = '\0';
	for (size_t i = 0; i < p->n && len < cap; i++) {
		if (i)
			len += (size_t)snprintf(s + len, cap - len, " | ");
		len += fmt_filter(s + len, cap - len, &p->f[i]);
	}
	return s;
}
