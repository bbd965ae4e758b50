/*
 * tf_config.c - the INI configuration, parsed with inih.
 *
 * inih reads through our line reader, so we always know the current line
 * number and whether a section header or a continuation line was just read
 * (inih calls the handler only for keys).  Everything that names something
 * else (a pipeline, a key) is resolved after the whole file is read.
 * Sizes and budgets are tf_budget.c's, globs tf_glob.c's, what a reload
 * changes tf_config_diff.c's.
 */
#include "config.h"

#include "config/tf_config.h"
#include "config/tf_config_int.h"
#include "filters/plugin.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

typedef enum { SEC_NONE, SEC_TILEFS, SEC_PIPELINE, SEC_KEY, SEC_MATCH, SEC_ARRAY, SEC_S3 } sec_kind;

typedef struct parser {
	tf_config *c;
	FILE *f;
	int line;
	bool header_seen;	/* a [section] line was read since the last key */
	char section[PATH_MAX];	/* its full name: inih truncates names to 50 bytes */
	int section_line;
	bool continuation;	/* the current line starts with blanks */
	sec_kind kind;
	void *cur;		/* the section object keys go to */
	char last_key[64];
	tf_error *err;
	bool failed;
	int fail_line;
	bool key_failed;	/* the first error is about a key */
} parser;

#define MAX_LINE 200	/* INI_MAX_LINE of the system's inih */

/* ---- small parsers ------------------------------------------------------------------ */

static bool parse_bool(const char *s, bool *v)
{
	if (!strcasecmp(s, "yes") || !strcasecmp(s, "true") || !strcmp(s, "1") || !strcasecmp(s, "on"))
		return *v = true, true;
	if (!strcasecmp(s, "no") || !strcasecmp(s, "false") || !strcmp(s, "0") || !strcasecmp(s, "off"))
		return *v = false, true;
	return false;
}

static bool parse_u32(const char *s, uint32_t *v)
{
	unsigned long long n;
	char *end;

	errno = 0;
	n = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || n > UINT32_MAX)
		return false;
	*v = (uint32_t)n;
	return true;
}

/* ---- errors ---------------------------------------------------------------------------------- */

static int fail(parser *ps, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(parser *ps, int line, const char *fmt, ...)
{
	char msg[TF_ERRMSG_MAX];
	va_list ap;

	if (ps->failed)
		return 0;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	tf_err(ps->err, TF_E_INVAL, "%s:%d: %s", ps->c->path, line, msg);
	ps->failed = true;
	ps->fail_line = line;
	return 0;
}

/* ---- growing the section arrays --------------------------------------------------------------- */

static void *push(void *arr, size_t *n, size_t size)
{
	char *p = realloc(arr, (*n + 1) * size);

	if (p)
		memset(p + *n * size, 0, size);
	return p;
}

#define PUSH(ps, arr, n) \
	((arr) = push((arr), &(n), sizeof(*(arr))), (arr) ? &(arr)[(n)++] : NULL)

/* ---- sections -------------------------------------------------------------------------------- */

static bool name_taken(const tf_config *c, sec_kind k, const char *name)
{
	for (size_t i = 0; k == SEC_PIPELINE && i < c->npipes; i++)
		if (!strcmp(c->pipes[i].name, name))
			return true;
	for (size_t i = 0; k == SEC_KEY && i < c->nkeys; i++)
		if (!strcmp(c->keys[i].name, name))
			return true;
	for (size_t i = 0; k == SEC_MATCH && i < c->nrules; i++)
		if (!strcmp(c->rules[i].pattern, name))
			return true;
	for (size_t i = 0; k == SEC_ARRAY && i < c->narrays; i++)
		if (!strcmp(c->arrays[i].path, name))
			return true;
	return false;
}

static void *new_section(parser *ps, sec_kind k, const char *arg)
{
	tf_config *c = ps->c;
	char *name = strdup(arg);
	void *obj = NULL;

	if (!name)
		return NULL;
	switch (k) {
	case SEC_PIPELINE: if ((obj = PUSH(ps, c->pipes, c->npipes))) ((pipe_sec *)obj)->name = name; break;
	case SEC_KEY: if ((obj = PUSH(ps, c->keys, c->nkeys))) ((key_sec *)obj)->name = name; break;
	case SEC_MATCH: if ((obj = PUSH(ps, c->rules, c->nrules))) ((match_sec *)obj)->pattern = name; break;
	case SEC_ARRAY: if ((obj = PUSH(ps, c->arrays, c->narrays))) ((array_sec *)obj)->path = name; break;
	default: obj = c; free(name); name = NULL; break;
	}
	if (!obj)
		free(name);
	return obj;
}

static void start_section(parser *ps, const char *section)
{
	static const struct { const char *word; sec_kind kind; } kinds[] = {
		{ "tilefs", SEC_TILEFS }, { "pipeline", SEC_PIPELINE }, { "key", SEC_KEY },
		{ "match", SEC_MATCH }, { "array", SEC_ARRAY }, { "s3", SEC_S3 },
	};
	size_t wlen = strcspn(section, " \t");
	const char *arg = section + wlen;

	while (isspace((unsigned char)*arg))
		arg++;
	ps->kind = SEC_NONE;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strlen(kinds[i].word) == wlen && !strncmp(section, kinds[i].word, wlen))
			ps->kind = kinds[i].kind;
	if (ps->kind == SEC_NONE)
		return (void)fail(ps, ps->section_line, "unknown section [%s]", section);
	if (ps->kind == SEC_S3) {	/* one [s3], no name */
		if (*arg || ps->c->s3_seen)
			return (void)fail(ps, ps->section_line, *arg ? "[s3] takes no name" : "duplicate section [s3]");
		ps->c->s3_seen = true;
		return;
	}
	if ((ps->kind == SEC_TILEFS) != (*arg == '\0'))
		return (void)fail(ps, ps->section_line, ps->kind == SEC_TILEFS ? "[tilefs] takes no name" :
				  "[%s] needs a name, e.g. [%s NAME]", section, section);
	if (name_taken(ps->c, ps->kind, arg))
		return (void)fail(ps, ps->section_line, "duplicate section [%s]", section);
	if (ps->kind == SEC_MATCH && !tf_glob_valid(arg))
		return (void)fail(ps, ps->section_line, "bad glob '%s'", arg);
	if (!(ps->cur = new_section(ps, ps->kind, arg)))
		return (void)fail(ps, ps->section_line, "out of memory");
	if (ps->kind == SEC_MATCH)
		((match_sec *)ps->cur)->rule.line = ps->section_line;
	else if (ps->kind == SEC_KEY)
		((key_sec *)ps->cur)->line = ps->section_line;
}

/* ---- keys of each section ------------------------------------------------------------------------ */

static int set_fieldspec(parser *ps, fieldspec *f, const char *name, const char *value, bool *known)
{
	*known = true;
	if (!strcmp(name, "filters")) {
		free(f->filters);
		if (!(f->filters = strdup(value)))
			return fail(ps, ps->line, "out of memory");
		f->filters_line = ps->line;
	} else if (!strcmp(name, "datatype")) {
		if (!tf_datatype_parse(value, &f->type))
			return fail(ps, ps->line, "unknown datatype '%s'", value);
		f->has_type = true;
	} else if (!strcmp(name, "cell_val_num")) {
		if (!strcasecmp(value, "var"))
			f->cell_val_num = TF_CELL_VAR;
		else if (!parse_u32(value, &f->cell_val_num) || f->cell_val_num == 0 ||
			 f->cell_val_num == TF_CELL_VAR)
			return fail(ps, ps->line, "cell_val_num must be a positive number or 'var', not '%s'", value);
		f->has_cells = true;
	} else if (!strcmp(name, "format_version")) {
		if (!parse_u32(value, &f->version) || f->version == 0)
			return fail(ps, ps->line, "bad format_version '%s'", value);
		f->has_version = true;
	} else {
		*known = false;
	}
	return 1;
}

static char *resolve_path(const tf_config *c, const char *p);

/* index_dir (a path relative to the file, or "none"), index_max_size,
 * index_at_mount, metadata_walk. */
static int set_index(parser *ps, const char *name, const char *value)
{
	tf_settings *s = &ps->c->s;

	if (!strcmp(name, "index_dir")) {
		free(ps->c->index_dir);
		ps->c->index_dir = !value[0] ? NULL : !strcmp(value, "none") ? strdup("none")
				 : resolve_path(ps->c, value);
		free(ps->c->index_dir_at);
		if (asprintf(&ps->c->index_dir_at, "%s:%d", ps->c->path, ps->line) < 0)
			ps->c->index_dir_at = NULL;
		if ((value[0] && !ps->c->index_dir) || !ps->c->index_dir_at)
			return fail(ps, ps->line, "out of memory");
		s->index_dir = ps->c->index_dir;
		s->index_dir_at = ps->c->index_dir_at;
	} else if (!strcmp(name, "index_max_size")) {
		if (!tf_parse_size(value, &s->index_max_size) || s->index_max_size < 65536)
			return fail(ps, ps->line, "index_max_size: bad size '%s' (e.g. 1G; at least 64K)", value);
	} else if (!strcmp(name, "index_at_mount")) {
		if (!parse_bool(value, &s->index_at_mount))
			return fail(ps, ps->line, "index_at_mount must be yes or no, not '%s'", value);
	} else if (!strcmp(name, "metadata_walk")) {
		if (strcmp(value, "window") && strcmp(value, "headers"))
			return fail(ps, ps->line, "metadata_walk must be window or headers, not '%s'", value);
		s->metadata_headers = !strcmp(value, "headers");
	} else {
		return fail(ps, ps->line, "unknown key '%s' in [tilefs]", name);
	}
	return 1;
}

static int set_tilefs(parser *ps, const char *name, const char *value)
{
	tf_settings *s = &ps->c->s;
	static const char *const levels[] = { "error", "warn", "info", "debug" };
	uint32_t n;

	if (!strcmp(name, "cache_size") || !strcmp(name, "index_cache")) {
		bool cache = name[0] == 'c';
		tf_error e;
		if (tf_parse_budget(name, value, cache ? TF_CACHE_SIZE_MIN : TF_INDEX_CACHE_MIN,
				    cache ? &s->cache_size : &s->index_budget, &e) != TF_OK)
			return fail(ps, ps->line, "%s", e.msg);
	} else if (!strcmp(name, "unmatched")) {
		if (strcmp(value, "raw") && strcmp(value, "hide"))
			return fail(ps, ps->line, "unmatched must be 'raw' or 'hide', not '%s'", value);
		s->hide_unmatched = value[0] == 'h';
	} else if (!strcmp(name, "log_level")) {
		size_t i = 0;
		while (i < 4 && strcmp(value, levels[i]))
			i++;
		if (i == 4)
			return fail(ps, ps->line, "log_level must be error, warn, info or debug, not '%s'", value);
		s->log_level = (tf_log_level)i;
	} else if (!strcmp(name, "workers")) {
		if (!parse_u32(value, &n) || n > 256)
			return fail(ps, ps->line, "workers must be 0 (one per CPU) to 256, not '%s'", value);
		s->workers = n;
	} else if (!strcmp(name, "views")) {
		if (!parse_bool(value, &s->views))
			return fail(ps, ps->line, "views must be yes or no, not '%s'", value);
	} else if (!strcmp(name, "default_key")) {
		free(ps->c->default_key_name);
		ps->c->default_key_name = strdup(value);
		ps->c->default_key_line = ps->line;
	} else if (!strncmp(name, "index_", 6) || !strcmp(name, "metadata_walk")) {
		return set_index(ps, name, value);
	} else if (!strcmp(name, "plugin_path")) {
		free(ps->c->plugin_path);
		if (!(ps->c->plugin_path = strdup(value)))
			return fail(ps, ps->line, "out of memory");
		ps->c->plugin_path_line = ps->line;
	} else {
		return fail(ps, ps->line, "unknown key '%s' in [tilefs]", name);
	}
	return 1;
}

static char *resolve_path(const tf_config *c, const char *p)
{
	char *out;

	if (p[0] == '/' || !c->dir)
		return strdup(p);
	if (asprintf(&out, "%s/%s", c->dir, p) < 0)
		return NULL;
	return out;
}

static int set_key(parser *ps, key_sec *k, const char *name, const char *value)
{
	tf_error kerr;
	tf_status rc;
	char *path;

	if (k->key)
		return fail(ps, ps->line, "[key %s] has more than one of file, env, hex", k->name);
	k->line = ps->line;
	if (!strcmp(name, "file")) {
		if (!(path = resolve_path(ps->c, value)))
			return fail(ps, ps->line, "out of memory");
		rc = tf_key_load_file(path, &k->key, &kerr);
		free(path);
	} else if (!strcmp(name, "env")) {
		const char *v = getenv(value);
		if (!v) {
			ps->key_failed = !ps->failed;
			return fail(ps, ps->line, "environment variable %s is not set", value);
		}
		rc = tf_key_from_bytes(v, strlen(v), &k->key, &kerr);
	} else if (!strcmp(name, "hex")) {
		if (ps->c->world_readable)
			return fail(ps, ps->line, "a key is written in this file, which group or others "
				    "can read: chmod 600 it or use file = or env =");
		rc = tf_key_from_bytes(value, strlen(value), &k->key, &kerr);
	} else {
		return fail(ps, ps->line, "unknown key '%s' in [key %s] (file, env or hex)", name, k->name);
	}
	if (rc == TF_OK)
		return 1;
	ps->key_failed = !ps->failed;
	return fail(ps, ps->line, "[key %s]: %s", k->name, kerr.msg);
}

static int set_match(parser *ps, match_sec *m, const char *name, const char *value)
{
	char **dst = NULL;
	bool known;

	if (!set_fieldspec(ps, &m->f, name, value, &known) || known)
		return !ps->failed;
	if (!strcmp(name, "pipeline")) {
		dst = &m->pipe_name;
		m->pipe_line = ps->line;
	} else if (!strcmp(name, "key")) {
		dst = &m->key_name;
		m->key_line = ps->line;
	} else if (!strcmp(name, "var_data")) {
		dst = &m->var_data;
	} else if (!strcmp(name, "generic")) {
		if (!parse_bool(value, &m->rule.generic))
			return fail(ps, ps->line, "generic must be yes or no, not '%s'", value);
		return 1;
	} else {
		return fail(ps, ps->line, "unknown key '%s' in [match %s]", name, m->pattern);
	}
	free(*dst);
	return (*dst = strdup(value)) ? 1 : fail(ps, ps->line, "out of memory");
}

static int set_array(parser *ps, array_sec *a, const char *name, const char *value)
{
	if (strcmp(name, "key"))
		return fail(ps, ps->line, "unknown key '%s' in [array %s]", name, a->path);
	a->line = ps->line;
	free(a->key_name);	/* a repeated key: the last one wins, as in [match] */
	return (a->key_name = strdup(value)) ? 1 : fail(ps, ps->line, "out of memory");
}

static int set_value(parser *ps, const char *name, const char *value)
{
	bool known;

	switch (ps->kind) {
	case SEC_TILEFS:
		return set_tilefs(ps, name, value);
	case SEC_PIPELINE:
		if (!set_fieldspec(ps, &((pipe_sec *)ps->cur)->f, name, value, &known) || known)
			return !ps->failed;
		return fail(ps, ps->line, "unknown key '%s' in [pipeline %s]", name, ((pipe_sec *)ps->cur)->name);
	case SEC_KEY:
		return set_key(ps, ps->cur, name, value);
	case SEC_MATCH:
		return set_match(ps, ps->cur, name, value);
	case SEC_ARRAY:
		return set_array(ps, ps->cur, name, value);
	case SEC_S3: {
		tf_error e;
		if (tf_s3_settings_set(&ps->c->s3, name, value, ps->c->dir, &e) != TF_OK)
			return fail(ps, ps->line, "%s", e.msg);
		return 1;
	}
	case SEC_NONE:
		break;
	}
	return fail(ps, ps->line, "'%s' outside any section", name);
}

/* The length of v without a " ; comment": inih before r56 strips inline
 * comments from key lines but not from continuation lines. */
static int uncommented_len(const char *v)
{
	int len = 0;

	while (v[len] && !(v[len] == ';' && len > 0 && isspace((unsigned char)v[len - 1])))
		len++;
	while (len > 0 && isspace((unsigned char)v[len - 1]))
		len--;
	return len;
}

/* A continuation line (inih: an indented line after a key) extends filters. */
static int continue_value(parser *ps, const char *name, const char *value)
{
	fieldspec *f = ps->kind == SEC_PIPELINE ? &((pipe_sec *)ps->cur)->f :
		       ps->kind == SEC_MATCH ? &((match_sec *)ps->cur)->f : NULL;
	char *joined;

	if (!f || strcmp(name, "filters") || !f->filters)
		return fail(ps, ps->line, "indented line continues '%s'; only filters may span lines "
			    "(do not indent keys)", name);
	if (asprintf(&joined, "%s %.*s", f->filters, uncommented_len(value), value) < 0)
		return fail(ps, ps->line, "out of memory");
	free(f->filters);
	f->filters = joined;
	return 1;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
	parser *ps = user;

	(void)section;	/* truncated by inih; ps->section has it whole */
	if (ps->failed)
		return 1;	/* the first error is the one reported */
	if (ps->header_seen) {
		ps->header_seen = false;
		ps->last_key[0] = '\0';
		start_section(ps, ps->section);
		if (ps->failed)
			return 0;
	} else if (ps->continuation && ps->last_key[0]) {
		return continue_value(ps, name, value);
	}
	snprintf(ps->last_key, sizeof(ps->last_key), "%s", name);
	return set_value(ps, name, value);
}

static char *read_line(char *str, int num, void *stream)
{
	parser *ps = stream;
	const char *t;
	size_t n;

	if (!fgets(str, num, ps->f))
		return NULL;
	ps->line++;
	n = strlen(str);
	if (n && str[n - 1] != '\n' && !feof(ps->f)) {
		int next = getc(ps->f);	/* exactly num - 1 characters, then '\n'? */
		if (next != '\n' && next != EOF) {
			ungetc(next, ps->f);
			fail(ps, ps->line, "line longer than %d characters", MAX_LINE - 1);
		}
	}
	ps->continuation = str[0] == ' ' || str[0] == '\t';
	t = str;
	if (ps->line == 1 && !strncmp(t, "\xEF\xBB\xBF", 3))	/* inih skips a BOM too */
		t += 3;
	for (; isspace((unsigned char)*t); t++)
		;
	if (*t == '[') {
		/* The name runs to the first ']', as inih reads it. */
		const char *name = t + 1 + strspn(t + 1, " \t"), *end = name + strcspn(name, "]");

		while (end > name && isspace((unsigned char)end[-1]))
			end--;
		if (ps->header_seen && !ps->failed)	/* the previous section had no keys */
			start_section(ps, ps->section);
		snprintf(ps->section, sizeof(ps->section), "%.*s", (int)(end - name), name);
		ps->section_line = ps->line;
		ps->header_seen = true;
	}
	return str;
}

/* ---- resolving names ------------------------------------------------------------------------ */

static tf_status build_pipeline(parser *ps, const fieldspec *f, tf_pipeline **out)
{
	tf_error perr;

	if (tf_pipeline_parse_with(f->filters, ps->c->plugins, out, &perr) == TF_OK)
		return TF_OK;
	fail(ps, f->filters_line, "filters: %s", perr.msg);
	return TF_E_INVAL;
}

static const pipe_sec *find_pipe(const tf_config *c, const char *name)
{
	for (size_t i = 0; i < c->npipes; i++)
		if (!strcmp(c->pipes[i].name, name))
			return &c->pipes[i];
	return NULL;
}

static const tf_key *find_key(parser *ps, const char *name, int line)
{
	for (size_t i = 0; i < ps->c->nkeys; i++)
		if (!strcmp(ps->c->keys[i].name, name))
			return ps->c->keys[i].key;
	if (strlen(name) >= 32)	/* perhaps the key itself: never repeat it */
		fail(ps, line, "no [key NAME] section of that name");
	else
		fail(ps, line, "no [key %s] section", name);
	return NULL;
}

/* Named pipeline first, then whatever the rule says inline. */
static void resolve_rule(parser *ps, match_sec *m)
{
	const pipe_sec *named = NULL;
	tf_rule *r = &m->rule;

	r->pattern = m->pattern;
	r->pipeline = ps->c->empty;
	r->type = TF_DT_UINT8;
	r->cell_val_num = 1;
	r->version = 22;
	if (m->pipe_name && !(named = find_pipe(ps->c, m->pipe_name)))
		return (void)fail(ps, m->pipe_line, "no [pipeline %s] section", m->pipe_name);
	if (named) {
		r->pipeline = named->pipeline;
		r->type = named->f.has_type ? named->f.type : r->type;
		r->cell_val_num = named->f.has_cells ? named->f.cell_val_num : 1;
		r->version = named->f.has_version ? named->f.version : 22;
	}
	if (m->f.filters && build_pipeline(ps, &m->f, &m->own) == TF_OK)
		r->pipeline = m->own;
	r->type = m->f.has_type ? m->f.type : r->type;
	r->cell_val_num = m->f.has_cells ? m->f.cell_val_num : r->cell_val_num;
	r->version = m->f.has_version ? m->f.version : r->version;
	if (m->key_name)
		r->key = find_key(ps, m->key_name, m->key_line);
	r->var_data = m->var_data;
}

/* ---- plugins ---------------------------------------------------------------------------------- */

/* A plugin warning, kept for the caller to show, prefixed with where the
 * plugin path was set.  Lookups load plugins (filters/plugin.h), so this
 * runs while pipelines are built too: its context is the config itself. */
static void keep_warning(void *ctx, const char *msg)
{
	tf_config *c = ctx;
	char **v = realloc(c->warnings, (c->nwarnings + 1) * sizeof(*v));

	if (!v)
		return;
	c->warnings = v;
	if (asprintf(&v[c->nwarnings], "%s: %s", c->plugin_where, msg) >= 0)
		c->nwarnings++;
}

/* plugin_path with each relative directory made relative to the
 * configuration file's own, as key files are. */
static char *plugin_dirs(const tf_config *c)
{
	char *in = strdup(c->plugin_path), *save = NULL, *out = strdup(""), *next;

	for (char *d = in ? strtok_r(in, ":", &save) : NULL; d && out; d = strtok_r(NULL, ":", &save)) {
		char *abs = resolve_path(c, d);
		next = NULL;
		if (abs && asprintf(&next, "%s%s%s", out, *out ? ":" : "", abs) < 0)
			next = NULL;
		free(abs);
		free(out);
		out = next;
	}
	free(in);
	return out;
}

/* The plugins, before any pipeline is built (which loads those it names):
 * plugin_path, else the environment's.  A plugin that cannot be used is a
 * warning, not an error. */
static tf_status load_plugins(tf_config *c, const char *where, tf_error *err)
{
	char *dirs = c->plugin_path ? plugin_dirs(c) : NULL;
	const char *path = c->plugin_path ? dirs : tf_plugins_env_path();
	tf_status rc;

	if (!c->plugin_path)
		where = getenv("TILEFS_PLUGIN_PATH") ? "TILEFS_PLUGIN_PATH" : "HDF5_PLUGIN_PATH";
	if ((c->plugin_path && !dirs) || !(c->plugin_where = strdup(where))) {
		free(dirs);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	rc = tf_plugins_load(path, keep_warning, c, &c->plugins, err);
	free(dirs);
	return rc;
}

static void resolve(parser *ps)
{
	tf_config *c = ps->c;
	char where[PATH_MAX + 16];
	tf_error perr;

	snprintf(where, sizeof(where), "%s:%d", c->path, c->plugin_path_line);
	if (load_plugins(c, where, &perr) != TF_OK)
		fail(ps, c->plugin_path_line, "plugin_path: %s", perr.msg);

	for (size_t i = 0; i < c->nkeys && !ps->failed; i++)
		if (!c->keys[i].key)
			fail(ps, c->keys[i].line, "[key %s] needs file, env or hex", c->keys[i].name);
	for (size_t i = 0; i < c->npipes && !ps->failed; i++)
		if (!c->pipes[i].f.filters)
			c->pipes[i].pipeline = tf_pipeline_dup(c->empty);
		else
			build_pipeline(ps, &c->pipes[i].f, &c->pipes[i].pipeline);
	for (size_t i = 0; i < c->nrules && !ps->failed; i++)
		resolve_rule(ps, &c->rules[i]);
	for (size_t i = 0; i < c->narrays && !ps->failed; i++)
		if (c->arrays[i].key_name)
			c->arrays[i].key = find_key(ps, c->arrays[i].key_name, c->arrays[i].line);
	if (c->default_key_name && !ps->failed)
		c->s.default_key = find_key(ps, c->default_key_name, c->default_key_line);
}

/* ---- public ------------------------------------------------------------------------------------ */

static tf_config *config_new(void)
{
	tf_config *c = calloc(1, sizeof(*c));

	if (!c || !(c->empty = tf_pipeline_new())) {
		free(c);
		return NULL;
	}
	c->s.cache_size = (uint64_t)256 << 20;
	c->s.index_budget = (uint64_t)64 << 20;
	c->s.log_level = TF_LOG_INFO;
	tf_s3_settings_init(&c->s3);
	return c;
}

tf_status tf_config_default(tf_config **out, tf_error *err)
{
	tf_status rc;

	if (!(*out = config_new()))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if ((rc = load_plugins(*out, NULL, err)) != TF_OK) {
		tf_config_free(*out);
		*out = NULL;
	}
	return rc;
}

static tf_status open_config(tf_config *c, const char *path, FILE **f, tf_error *err)
{
	struct stat sb;
	char *slash;
	int fd;

	if (!(c->path = strdup(path)) || !(c->dir = strdup(path)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	slash = strrchr(c->dir, '/');
	if (slash)
		*slash = '\0';
	else
		strcpy(c->dir, ".");
	/* O_NONBLOCK until fstat says it is a regular file: opening a FIFO
	 * would wait for a writer forever (a directory reads as empty). */
	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
		return tf_err(err, TF_E_INVAL, "%s: %s", path, strerror(errno));
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || fcntl(fd, F_SETFL, 0) != 0 ||
	    !(*f = fdopen(fd, "r"))) {
		close(fd);
		return tf_err(err, TF_E_INVAL, "%s: not a regular file", path);
	}
	c->world_readable = (sb.st_mode & (S_IRGRP | S_IROTH)) != 0;
	return TF_OK;
}

tf_status tf_config_load(const char *path, tf_config **out, tf_error *err)
{
	tf_config *c = config_new();
	parser ps = { .c = c, .err = err };
	tf_status rc;
	int line;

	if (!c)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if ((rc = open_config(c, path, &ps.f, err)) != TF_OK) {
		if (ps.f)
			fclose(ps.f);
		tf_config_free(c);
		return rc;
	}
	line = ini_parse_stream(read_line, &ps, on_key, &ps);
	if (ps.header_seen && !ps.failed)	/* a last section with no keys */
		start_section(&ps, ps.section);
	if (ferror(ps.f) && !ps.failed)
		fail(&ps, ps.line, "read error");
	fclose(ps.f);
	if (line > 0 && (!ps.failed || line < ps.fail_line)) {
		ps.failed = ps.key_failed = false;	/* an earlier syntax error wins */
		fail(&ps, line, "syntax error (expected [section], key = value, or ; comment)");
	}
	else if (line < 0 && !ps.failed)
		fail(&ps, ps.line, "cannot parse (out of memory)");
	if (!ps.failed)
		resolve(&ps);
	if (ps.failed) {
		tf_config_free(c);
		if (ps.key_failed && err)
			err->code = TF_E_NOKEY;
		return ps.key_failed ? TF_E_NOKEY : TF_E_INVAL;
	}
	*out = c;
	return TF_OK;
}

void tf_config_free(tf_config *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->npipes; i++) {
		free(c->pipes[i].name);
		free(c->pipes[i].f.filters);
		tf_pipeline_free(c->pipes[i].pipeline);
	}
	for (size_t i = 0; i < c->nkeys; i++) {
		free(c->keys[i].name);
		tf_key_free(c->keys[i].key);
	}
	for (size_t i = 0; i < c->nrules; i++) {
		match_sec *m = &c->rules[i];
		free(m->pattern), free(m->pipe_name), free(m->key_name), free(m->var_data);
		free(m->f.filters);
		tf_pipeline_free(m->own);
	}
	for (size_t i = 0; i < c->narrays; i++)
		free(c->arrays[i].path), free(c->arrays[i].key_name);
	free(c->pipes), free(c->keys), free(c->rules), free(c->arrays);
	free(c->default_key_name), free(c->path), free(c->dir);
	tf_pipeline_free(c->empty);
	tf_plugins_free(c->plugins);	/* after every pipeline holding its classes */
	for (size_t i = 0; i < c->nwarnings; i++)
		free(c->warnings[i]);
	free(c->warnings), free(c->plugin_where), free(c->plugin_path), free(c->index_dir), free(c->index_dir_at);
	tf_s3_settings_clear(&c->s3);
	free(c);
}

const tf_settings *tf_config_settings(const tf_config *c)
{
	return &c->s;
}

const tf_plugins *tf_config_plugins(const tf_config *c)
{
	return c->plugins;
}

void tf_config_stop_plugins(tf_config *c)
{
	tf_plugins_stop(c->plugins);
}

size_t tf_config_nwarnings(const tf_config *c)
{
	return c->nwarnings;
}

const char *tf_config_warning(const tf_config *c, size_t i)
{
	return i < c->nwarnings ? c->warnings[i] : NULL;
}

const struct tf_s3_settings *tf_config_s3(const tf_config *c)
{
	return &c->s3;
}

void tf_config_lock_keys(tf_config *c)
{
	for (size_t i = 0; i < c->nkeys; i++)
		if (c->keys[i].key)
			tf_key_lock(c->keys[i].key);
}

tf_status tf_config_set_cache_size(tf_config *c, const char *size, tf_error *err)
{
	return tf_parse_budget("cache_size", size, TF_CACHE_SIZE_MIN, &c->s.cache_size, err);
}

bool tf_config_set_index_dir(tf_config *c, const char *dir)
{
	char *d = strdup(dir);

	if (!d)
		return false;
	free(c->index_dir);
	free(c->index_dir_at);
	c->s.index_dir = c->index_dir = d;
	c->s.index_dir_at = c->index_dir_at = NULL;
	return true;
}

void tf_config_set_index_at_mount(tf_config *c, bool on)
{
	c->s.index_at_mount = on;
}

tf_status tf_config_set_s3(tf_config *c, const char *name, const char *value, tf_error *err)
{
	char cwd[PATH_MAX];

	return tf_s3_settings_set(&c->s3, name, value, getcwd(cwd, sizeof(cwd)) ? cwd : NULL, err);
}

void tf_config_set_views(tf_config *c, bool on)
{
	c->s.views = on;
}

const tf_rule *tf_config_match(const tf_config *c, const char *relpath)
{
	for (size_t i = 0; i < c->nrules; i++)
		if (tf_glob_match(c->rules[i].pattern, relpath))
			return &c->rules[i].rule;
	return NULL;
}

const tf_key *tf_config_array_key(const tf_config *c, const char *relpath)
{
	for (size_t i = 0; i < c->narrays; i++)
		if (!strcmp(c->arrays[i].path, relpath) || tf_glob_match(c->arrays[i].path, relpath))
			return c->arrays[i].key;
	return c->s.default_key;
}
