/*
 * tf_array.c - files of a TileDB array and how to decode each (FORMAT-NOTES
 * §7-§9, array_directory.cc for the layout of the directory).
 */
#include "config.h"

#include "tf_array.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tf_tile.h"

#define LEGACY_SCHEMA "__array_schema.tdb"
#define NBUCKETS 256

typedef struct schema_slot {
	char *name;
	tf_schema *schema;	/* NULL: it failed, see error */
	bool encrypted;		/* its generic tile was: so is all the array (§9) */
	tf_error error;
} schema_slot;

typedef struct frag_slot {
	char *name;
	tf_fragment *fr;	/* NULL: it failed, see error */
	tf_error error;
	struct frag_slot *next;
} frag_slot;

struct tf_array {
	tf_source *src;		/* borrowed */
	char *dir;		/* the array's root in src */
	const tf_key *key;
	pthread_mutex_t lock;	/* guards everything below, and fragment loads */
	schema_slot *schemas;
	size_t nschemas;
	frag_slot *frags[NBUCKETS];
};

bool tf_array_detect(tf_source *src, const char *dir)
{
	char path[4096];
	tf_stat st;

	if (tf_path_join(path, sizeof(path), dir, "__schema") &&
	    tf_source_stat(src, path, &st, NULL) == TF_OK && st.kind == TF_ENT_DIR)
		return true;
	return tf_path_join(path, sizeof(path), dir, LEGACY_SCHEMA) &&
	       tf_source_stat(src, path, &st, NULL) == TF_OK && st.kind == TF_ENT_REG;
}

tf_status tf_array_open(tf_source *src, const char *dir, const tf_key *key, tf_array **out,
			tf_error *err)
{
	tf_array *a = calloc(1, sizeof(*a));

	if (!a || !(a->dir = strdup(dir))) {
		free(a);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	a->src = src;
	a->key = key;
	pthread_mutex_init(&a->lock, NULL);
	*out = a;
	return TF_OK;
}

void tf_array_free(tf_array *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->nschemas; i++) {
		free(a->schemas[i].name);
		tf_schema_free(a->schemas[i].schema);
	}
	for (size_t b = 0; b < NBUCKETS; b++)
		for (frag_slot *s = a->frags[b], *next; s; s = next) {
			next = s->next;
			free(s->name);
			tf_fragment_free(s->fr);
			free(s);
		}
	free(a->schemas);
	pthread_mutex_destroy(&a->lock);
	free(a->dir);
	free(a);
}

/* ---- schemas (lock held) ---------------------------------------------------------------- */

static tf_status read_whole(tf_source *src, const char *path, tf_buf *out, tf_error *err)
{
	tf_object *o;
	uint64_t size;
	tf_status rc;

	out->len = 0;
	if ((rc = tf_object_open(src, path, NULL, &o, err)) != TF_OK)
		return rc;
	size = tf_object_stat(o)->v.size;
	if (size > out->limit)
		rc = tf_err(err, TF_E_CORRUPT, "%s: %llu bytes, more than any schema", path,
			    (unsigned long long)size);
	else if ((rc = tf_buf_reserve(out, (size_t)size, err)) == TF_OK &&
		 (rc = tf_object_read(o, 0, out->p, (size_t)size, err)) == TF_OK)
		out->len = (size_t)size;
	tf_object_close(o);
	return rc;
}

static tf_status parse_schema_file(tf_array *a, const char *name, tf_schema **out, bool *encrypted,
				   tf_error *err)
{
	tf_buf raw = TF_BUF_INIT((size_t)64 << 20), payload = TF_BUF_INIT((size_t)256 << 20);
	tf_workspace *ws = tf_workspace_new();
	char path[4096], file[4096];
	tf_status rc;

	if (!ws)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	snprintf(file, sizeof(file), strcmp(name, LEGACY_SCHEMA) ? "__schema/%s" : "%s", name);
	if (!tf_path_join(path, sizeof(path), a->dir, file))
		rc = tf_err(err, TF_E_INVAL, "path too long");
	else if ((rc = read_whole(a->src, path, &raw, err)) == TF_OK && raw.len > 30 &&
		 tf_le64(raw.p) == raw.len - 30)
		rc = tf_err(err, TF_E_UNSUPPORTED, "a TileDB 1.3 (pre-format 1) array: not supported, "
			    "as by TileDB 2.x");
	else if (rc == TF_OK &&
		 (rc = tf_generic_decode(tf_span_of(raw.p, raw.len), a->key, ws, &payload, NULL, err)) == TF_OK)
		rc = tf_schema_parse(tf_span_of(payload.p, payload.len), out, err);
	/* The header's encryption byte (offset 29, §6) tells how the array was written. */
	*encrypted = raw.len > 29 && raw.p[29] != 0;
	tf_buf_free(&raw);
	tf_buf_free(&payload);
	tf_workspace_free(ws);
	return rc == TF_OK ? rc : tf_err_prefix(err, "schema %s", name);
}

/* A schema by file name, read once (failures too are remembered). */
static tf_status get_schema(void *ctx, const char *name, const tf_schema **out, tf_error *err)
{
	tf_array *a = ctx;
	schema_slot *s, *v;

	if (strchr(name, '/') || !strcmp(name, "..") || !*name)
		return tf_err(err, TF_E_CORRUPT, "bad schema name '%s'", name);
	for (size_t i = 0; i < a->nschemas; i++) {
		s = &a->schemas[i];
		if (strcmp(s->name, name))
			continue;
		if (!s->schema && err)
			*err = s->error;
		*out = s->schema;
		return s->schema ? TF_OK : s->error.code;
	}
	if (!(v = realloc(a->schemas, (a->nschemas + 1) * sizeof(*v))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	a->schemas = v;
	s = &v[a->nschemas];
	memset(s, 0, sizeof(*s));
	if (!(s->name = strdup(name)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	a->nschemas++;
	parse_schema_file(a, name, &s->schema, &s->encrypted, &s->error);
	return get_schema(a, name, out, err);
}

static bool schema_encrypted(const tf_array *a, const tf_schema *s)
{
	for (size_t i = 0; i < a->nschemas; i++)
		if (a->schemas[i].schema == s)
			return a->schemas[i].encrypted;
	return false;
}

/* ---- fragments (lock held) ----------------------------------------------------------------- */

static size_t bucket(const char *s)
{
	size_t h = 5381;

	while (*s)
		h = h * 33 ^ (unsigned char)*s++;
	return h % NBUCKETS;
}

/* Fragment `name` in directory fdir, its metadata read once. */
static tf_status get_fragment(tf_array *a, const char *name, const char *fdir, tf_fragment **out,
			      tf_error *err)
{
	frag_slot **head = &a->frags[bucket(name)], *s;
	const tf_schema *legacy = NULL;
	tf_error legacy_err = { TF_OK, "" };
	char path[4096];
	tf_stat st;

	for (s = *head; s && strcmp(s->name, name); s = s->next)
		;
	if (!s) {
		if (!(s = calloc(1, sizeof(*s))) || !(s->name = strdup(name))) {
			free(s);
			return tf_err(err, TF_E_NOMEM, "out of memory");
		}
		/* Fragments before format 10 use the array's one old schema. */
		if (tf_path_join(path, sizeof(path), a->dir, LEGACY_SCHEMA) &&
		    tf_source_stat(a->src, path, &st, NULL) == TF_OK)
			get_schema(a, LEGACY_SCHEMA, &legacy, &legacy_err);
		if (tf_fragment_open(a->src, fdir, name, legacy, get_schema, a, a->key, &s->fr,
				     &s->error) != TF_OK &&
		    legacy_err.code != TF_OK)
			s->error = legacy_err;	/* the real cause */
		s->next = *head;
		*head = s;
	}
	if (!s->fr && err)
		*err = s->error;
	*out = s->fr;
	return s->fr ? TF_OK : s->error.code;
}

/* ---- what a path is --------------------------------------------------------------------------- */

typedef enum { P_RAW, P_GENERIC, P_FRAG_META, P_FRAG_DATA } path_kind;

typedef struct path_info {
	path_kind kind;
	const char *what;	/* for generic files */
	char frag[256], file[256];
	bool in_fragments_dir;	/* __fragments/<frag>/ (format >= 12) */
} path_info;

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && !strcmp(s + n - m, suffix);
}

static bool is_internal_dir(const char *c, size_t n)
{
	static const char *const dirs[] = { "__schema", "__meta", "__commits", "__fragment_meta",
					    "__labels", "__fragments" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (strlen(dirs[i]) == n && !strncmp(c, dirs[i], n))
			return true;
	return false;
}

/* A fragment file: __fragments/F/file (format >= 12) or F/file (older). */
static bool classify_fragment(const char *rel, path_info *pi)
{
	const char *s1 = strchr(rel, '/'), *frag = rel, *file;

	if (!s1)
		return false;
	if (!strncmp(rel, "__fragments/", 12)) {
		frag = s1 + 1;
		pi->in_fragments_dir = true;
	} else if (strncmp(rel, "__", 2) || is_internal_dir(rel, (size_t)(s1 - rel))) {
		return false;
	}
	if (!(file = strchr(frag, '/')) || strchr(file + 1, '/') || !ends_with(file, ".tdb") ||
	    (size_t)(file - frag) >= sizeof(pi->frag) || strlen(file + 1) >= sizeof(pi->file))
		return false;
	snprintf(pi->frag, sizeof(pi->frag), "%.*s", (int)(file - frag), frag);
	snprintf(pi->file, sizeof(pi->file), "%s", file + 1);
	pi->kind = !strcmp(pi->file, "__fragment_metadata.tdb") ? P_FRAG_META : P_FRAG_DATA;
	return true;
}

/* Decide from the path alone what a file of an array is (§8.1). */
static void classify(const char *rel, path_info *pi)
{
	memset(pi, 0, sizeof(*pi));
	pi->kind = P_GENERIC;
	if (!strncmp(rel, "__schema/__enumerations/", 24) && !strchr(rel + 24, '/'))
		pi->what = "enumeration";
	else if ((!strncmp(rel, "__schema/", 9) && !strchr(rel + 9, '/')) || !strcmp(rel, LEGACY_SCHEMA))
		pi->what = "schema";
	else if (!strncmp(rel, "__meta/", 7) && !strchr(rel + 7, '/') && !ends_with(rel, ".vac"))
		pi->what = "array metadata";
	else if (!strncmp(rel, "__commits/", 10) && !strchr(rel + 10, '/') &&
		 (ends_with(rel, ".del") || ends_with(rel, ".upd")))
		pi->what = ends_with(rel, ".del") ? "delete condition" : "update condition";
	else if (ends_with(rel, ".meta") && (!strchr(rel, '/') ||
		 (!strncmp(rel, "__fragment_meta/", 16) && !strchr(rel + 16, '/'))))
		pi->what = "consolidated fragment metadata";
	else if (!classify_fragment(rel, pi))
		pi->kind = P_RAW;
}

bool tf_array_is_decoded_name(const char *rel)
{
	path_info pi;

	classify(rel, &pi);
	return pi.kind != P_RAW;
}

/* ---- descriptions ------------------------------------------------------------------------------- */

static tf_status set_paths(tf_array *a, const char *rel, const path_info *pi, tf_array_file *out,
			   tf_error *err)
{
	char path[4096];

	if (!tf_path_join(path, sizeof(path), a->dir, rel))
		return tf_err(err, TF_E_INVAL, "path too long");
	if (!(out->path = strdup(path)) ||
	    (pi->kind != P_RAW && pi->frag[0] && !(out->fragment = strdup(pi->frag))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	return TF_OK;
}

static tf_status describe_fragment_file(tf_array *a, const path_info *pi, tf_array_file *out,
					tf_error *err)
{
	char fdir[4096], sub[512];
	tf_fragment *fr;
	tf_status rc;

	snprintf(sub, sizeof(sub), pi->in_fragments_dir ? "__fragments/%s" : "%s", pi->frag);
	if (!tf_path_join(fdir, sizeof(fdir), a->dir, sub))
		return tf_err(err, TF_E_INVAL, "path too long");
	if ((rc = get_fragment(a, pi->frag, fdir, &fr, err)) != TF_OK)
		return rc;
	out->format_version = tf_fragment_version(fr);
	if (pi->kind == P_FRAG_META) {	/* generic tiles, then the footer as it is */
		out->kind = "fragment metadata";
		out->spec.generic = true;
		out->spec.generic_end = tf_fragment_footer_offset(fr);
		out->spec.key = a->key;
		return TF_OK;
	}
	if ((rc = tf_fragment_describe(fr, pi->file, &out->ff, err)) != TF_OK)
		return rc;
	out->spec = out->ff.spec;
	/* Data tiles get AES appended only in an encrypted array (§9). */
	out->spec.key = schema_encrypted(a, tf_fragment_schema(fr)) ? a->key : NULL;
	out->kind = tf_role_name(out->ff.role);
	if (!(out->field = strdup(out->ff.field)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if (out->ff.var_file) {
		char var[4096];
		if (!tf_path_join(var, sizeof(var), fdir, out->ff.var_file) || !(out->var_path = strdup(var)))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		out->spec.var_data = out->var_path;
	}
	return TF_OK;
}

tf_status tf_array_describe(tf_array *a, const char *rel, tf_array_file *out, tf_error *err)
{
	path_info pi;
	tf_status rc;

	memset(out, 0, sizeof(*out));
	classify(rel, &pi);
	if (pi.kind == P_RAW)
		return tf_err(err, TF_E_INVAL, "%s is not decoded", rel);
	if ((rc = set_paths(a, rel, &pi, out, err)) != TF_OK) {
		tf_array_file_clear(out);
		return rc;
	}
	if (pi.kind == P_GENERIC) {
		out->kind = pi.what;
		out->spec.generic = true;
		out->spec.key = a->key;
		return TF_OK;
	}
	pthread_mutex_lock(&a->lock);
	rc = describe_fragment_file(a, &pi, out, err);
	pthread_mutex_unlock(&a->lock);
	if (rc != TF_OK)
		tf_array_file_clear(out);
	return rc;
}

void tf_array_file_clear(tf_array_file *f)
{
	free(f->path);
	free(f->field);
	free(f->fragment);
	free(f->var_path);
	tf_fragment_file_clear(&f->ff);
	memset(f, 0, sizeof(*f));
}

/* The greatest schema file name (names start with timestamps). */
static int pick_latest(void *ctx, const char *name, const tf_stat *st)
{
	char *best = ctx;

	if (st->kind != TF_ENT_DIR && name[0] != '.' && strcmp(name, "__enumerations") &&
	    strlen(name) < 256 && strcmp(name, best) > 0)
		snprintf(best, 256, "%s", name);
	return 0;
}

tf_status tf_array_latest_schema(tf_array *a, const tf_schema **out, char **name, tf_error *err)
{
	char path[4096], best[256] = "";
	tf_status rc;

	if (tf_path_join(path, sizeof(path), a->dir, "__schema"))
		tf_source_list(a->src, path, false, pick_latest, best, NULL);
	if (!best[0])
		snprintf(best, sizeof(best), "%s", LEGACY_SCHEMA);
	pthread_mutex_lock(&a->lock);
	rc = get_schema(a, best, out, err);
	pthread_mutex_unlock(&a->lock);
	if (rc == TF_OK && name && !(*name = strdup(best)))
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	return rc;
}
