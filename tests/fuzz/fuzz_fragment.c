/*
 * fuzz_fragment.c - libFuzzer target: fragment metadata on disk ->
 * tf_fragment_open, every file of the fragment described and read, and the
 * same through tf_array.
 *
 * Input layout (make-seeds writes the same):
 *
 *   byte 0   the fragment's name, which carries its format version (§8.1):
 *            0 a format 1-2 name, 1 a format 3-4 name, 2-254 "..._<v>",
 *            255 "..._4294967295" (experimental builds)
 *   byte 1   flags, FZ_* below
 *   u32      length of the schema payload (cut to what is left), then it:
 *            the decoded schema the fragment was written with
 *   u32      length of the metadata (cut likewise), then it:
 *            __fragment_metadata.tdb as stored
 *   rest     the bytes of every data file the fragment describes
 *
 * Each input becomes an array directory in the per-process temporary
 * directory, laid out as TileDB lays out one of that version: the schema
 * as a generic tile under __schema/ (by the name the footer asks for) or
 * as __array_schema.tdb, the fragment under __fragments/ (format >= 12) or
 * beside them.  Then:
 *   1. tf_fragment_open, with the schema given for any name asked;
 *   2. tf_fragment_describe on every file name such a fragment may have,
 *      and each described file opened with its tile layout and exercised
 *      (fz_exercise: every chunk decoded, every byte read through a cache);
 *   3. tf_array_describe on the same files and the metadata file, which is
 *      opened as generic tiles ending at its footer and exercised.
 * Any status is fine; crashes, leaks, undefined behaviour and descriptions
 * that break their promises are not.
 */
#include "fuzz_util.h"

#include "format/tf_array.h"
#include "util/tf_bytes.h"
#include "format/tf_fragment.h"
#include "format/tf_schema.h"
#include "format/tf_tile.h"

enum {
	FZ_KEY = 0x01,		/* the oracle key given, the schema file encrypted */
	FZ_LEGACY = 0x02,	/* __array_schema.tdb exists whatever the version */
};

#define FZ_HEADER 2
#define FZ_MAX_NAMES 96
#define FZ_NAME_MAX 200
/* The array directory, in fz_dir() and so in fz_source(). */
#define FZ_ARRAY "array"

typedef struct fz_input {
	uint32_t version;	/* the name's */
	uint8_t flags;
	tf_span schema, meta, data;
} fz_input;

/* Paths as written (under fz_dir()) and as opened (relative to
 * fz_source(), the same directory). */
typedef struct fz_array {
	char dir[512], frag_dir[768], frag_rel[256], name[128];
	tf_schema *schema;
	char *asked;		/* the schema name the footer asked for */
	const tf_key *key;
	char *names[FZ_MAX_NAMES];
	size_t nnames;
	tf_cache *cache;	/* every file of the input is read through it */
} fz_array;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	(void)fz_dir();
	(void)fz_key();
	return 0;
}

/* A u32 length, then that many bytes (fewer if the input ends first). */
static bool get_part(tf_reader *r, tf_span *out)
{
	uint32_t len;
	tf_span s;

	if (tf_get_u32(r, &len, "", NULL) != TF_OK)
		return false;
	if (len > r->n)
		len = (uint32_t)r->n;
	tf_get_span(r, len, &s, "", NULL);
	*out = s;
	return true;
}

static bool parse_input(const uint8_t *data, size_t size, fz_input *in)
{
	tf_reader r;

	if (size < FZ_HEADER)
		return false;
	in->version = data[0] == 255 ? UINT32_MAX : data[0];
	in->flags = data[1];
	r = tf_reader_of(tf_span_of(data + FZ_HEADER, size - FZ_HEADER));
	if (!get_part(&r, &in->schema) || !get_part(&r, &in->meta))
		return false;
	in->data = tf_span_of(r.p, r.n);
	return true;
}

/* ---- the array directory ------------------------------------------------------------ */

static void fragment_name(uint32_t v, char *out, size_t n)
{
	if (v == 0)
		snprintf(out, n, "__b4cae15e1a294904a1296510c34f19ec_1538747712566");
	else if (v == 1)
		snprintf(out, n, "__1541540586869_1541540586869_5dc2cc9cce204a189f825fd4919d0c55");
	else
		snprintf(out, n, "__1693562063524_1693562063524_0fcdefaa40d34ff2a4b09153472fbdc2_%u", v);
}

static void make_dir(const char *path)
{
	if (mkdir(path, 0700) != 0)
		fz_fail("mkdir", path);
}

/* The schema payload as TileDB stores it: one generic tile (§6), with no
 * filters, or with AES-256-GCM when keyed (then the array is encrypted). */
static void write_schema_file(const fz_array *a, const fz_input *in, const char *path)
{
	tf_buf file = TF_BUF_INIT(SIZE_MAX);

	fz_generic(in->schema, a->key, &file);
	fz_write(path, file.p, file.len, 0600);
	tf_buf_free(&file);
}

/* A name that can be a file in the fragment directory. */
static bool safe_name(const char *s)
{
	size_t n = strlen(s);

	return n && n < FZ_NAME_MAX && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

static void add_name(fz_array *a, const char *name)
{
	if (a->nnames < FZ_MAX_NAMES && safe_name(name) && !(a->names[a->nnames++] = strdup(name)))
		fz_fail("names", "out of memory");
}

/* Field name (or a<i>, d<j>) with each suffix a file of it may have. */
static void add_field(fz_array *a, const char *stem, size_t nsuffixes)
{
	static const char *const suffixes[] = { ".tdb", "_var.tdb", "_validity.tdb" };
	char name[FZ_NAME_MAX + 32];

	for (size_t k = 0; k < nsuffixes && strlen(stem) < FZ_NAME_MAX; k++) {
		snprintf(name, sizeof(name), "%s%s", stem, suffixes[k]);
		add_name(a, name);
	}
}

/* Every name a file of this fragment may have, in any format (§8.2). */
static void file_names(fz_array *a)
{
	static const char *const specials[] = { "__coords.tdb", "t.tdb", "dt.tdb", "dci.tdb", "a99.tdb" };
	const tf_schema *s = a->schema;
	char stem[32];

	for (size_t i = 0; i < s->nattrs && i < 16; i++) {
		snprintf(stem, sizeof(stem), "a%zu", i);
		add_field(a, stem, 3);
		add_field(a, s->attrs[i].name, 3);
	}
	for (size_t i = 0; i < s->ndims && i < 8; i++) {
		snprintf(stem, sizeof(stem), "d%zu", i);
		add_field(a, stem, 2);
		add_field(a, s->dims[i].name, 2);
	}
	for (size_t i = 0; i < sizeof(specials) / sizeof(specials[0]); i++)
		add_name(a, specials[i]);
}

/* ---- 1, 2: the fragment API ------------------------------------------------------------ */

static tf_status lookup(void *ctx, const char *name, const tf_schema **out, tf_error *err)
{
	fz_array *a = ctx;

	(void)err;
	free(a->asked);
	if (!(a->asked = strdup(name)))
		fz_fail("lookup", "out of memory");
	*out = a->schema;
	return TF_OK;
}

static void check_description(const tf_fragment_file *ff)
{
	const tf_file_spec *sp = &ff->spec;

	if (!ff->field || (sp->ntiles && !sp->tiles) || (sp->var_data && sp->nvar_tiles && !sp->var_tiles) ||
	    (sp->var_data && !sp->var_pipeline) || !tf_datatype_valid(sp->type) || !tf_role_name(ff->role))
		fz_fail("describe", "a description that breaks its promises");
}

/* Open a described file with its layout, the data bytes written for it. */
static void exercise_described(const fz_array *a, const fz_input *in, const char *file,
			       const tf_file_spec *described)
{
	char path[1024], rel[512], var_rel[512];
	tf_file_spec spec = *described;
	tf_file *f;
	tf_error err;

	snprintf(path, sizeof(path), "%s/%s", a->frag_dir, file);
	fz_write(path, in->data.p, in->data.n, 0600);
	snprintf(rel, sizeof(rel), "%s/%s", a->frag_rel, file);
	/* The description names the var data file as a name beside it. */
	if (spec.var_data) {
		snprintf(path, sizeof(path), "%s/%s", a->frag_dir, spec.var_data);
		fz_write(path, in->data.p, in->data.n, 0600);
		snprintf(var_rel, sizeof(var_rel), "%s/%s", a->frag_rel, spec.var_data);
		spec.var_data = var_rel;
	}
	spec.key = a->key;
	if (tf_file_open(fz_source(), rel, file, NULL, &spec, &f, &err) != TF_OK) {
		fz_say("open: %s%s", err.msg, "");
		return;
	}
	fz_exercise(f, a->cache, NULL);
}

static void through_fragment(fz_array *a, const fz_input *in, const tf_schema *legacy)
{
	tf_fragment *fr;
	tf_fragment_file ff;
	tf_error err;

	if (tf_fragment_open(fz_source(), a->frag_rel, a->name, legacy, lookup, a, a->key, &fr,
			     &err) != TF_OK) {
		fz_say("fragment: %s%s", err.msg, "");
		return;
	}
	fz_say("fragment: opened%s%s", "", "");
	if (!tf_fragment_schema(fr) || tf_fragment_footer_offset(fr) > in->meta.n)
		fz_fail("fragment", "no schema, or a footer past the end");
	(void)tf_fragment_version(fr);
	for (size_t i = 0; i < a->nnames; i++) {
		if (tf_fragment_describe(fr, a->names[i], &ff, &err) != TF_OK) {
			fz_say("describe: %s%s", err.msg, "");
			continue;
		}
		fz_say("describe: %s: ok", a->names[i], "");
		check_description(&ff);
		exercise_described(a, in, a->names[i], &ff.spec);
		tf_fragment_file_clear(&ff);
	}
	tf_fragment_free(fr);
}

/* ---- 3: the array API ------------------------------------------------------------------------ */

static void through_array(fz_array *a, bool v12)
{
	char rel[512];
	const tf_schema *latest;
	tf_array_file af;
	tf_array *arr;
	tf_file *f;
	tf_error err;

	if (!tf_array_detect(fz_source(), FZ_ARRAY))
		fz_fail("array", "not detected");
	if (tf_array_open(fz_source(), FZ_ARRAY, a->key, &arr, &err) != TF_OK)
		fz_fail("array", err.msg);
	for (size_t i = 0; i <= a->nnames; i++) {
		snprintf(rel, sizeof(rel), "%s%s/%s", v12 ? "__fragments/" : "", a->name,
			 i < a->nnames ? a->names[i] : "__fragment_metadata.tdb");
		if (tf_array_describe(arr, rel, &af, &err) != TF_OK) {
			fz_say("array describe: %s%s", err.msg, "");
			continue;
		}
		/* The data files were exercised above; the metadata file is new. */
		if (i == a->nnames && tf_file_open(fz_source(), af.path, rel, NULL, &af.spec, &f, &err) == TF_OK)
			fz_exercise(f, a->cache, NULL);
		tf_array_file_clear(&af);
	}
	if (tf_array_latest_schema(arr, &latest, NULL, &err) != TF_OK)
		fz_say("latest schema: %s%s", err.msg, "");
	tf_array_free(arr);
}

static void run(fz_array *a, const fz_input *in)
{
	char path[1024];
	bool legacy = in->flags & FZ_LEGACY || in->version < 10, v12 = in->version >= 12;

	snprintf(a->dir, sizeof(a->dir), "%s/%s", fz_dir(), FZ_ARRAY);
	fz_rm_tree(a->dir);
	make_dir(a->dir);
	snprintf(path, sizeof(path), "%s/__schema", a->dir);
	make_dir(path);
	fragment_name(in->version, a->name, sizeof(a->name));
	if (v12) {
		snprintf(path, sizeof(path), "%s/__fragments", a->dir);
		make_dir(path);
	}
	snprintf(a->frag_rel, sizeof(a->frag_rel), "%s/%s%s", FZ_ARRAY, v12 ? "__fragments/" : "", a->name);
	snprintf(a->frag_dir, sizeof(a->frag_dir), "%s/%s", fz_dir(), a->frag_rel);
	make_dir(a->frag_dir);
	snprintf(path, sizeof(path), "%s/__fragment_metadata.tdb", a->frag_dir);
	fz_write(path, in->meta.p, in->meta.n, 0600);
	file_names(a);
	through_fragment(a, in, legacy ? a->schema : NULL);
	if (legacy) {
		snprintf(path, sizeof(path), "%s/__array_schema.tdb", a->dir);
		write_schema_file(a, in, path);
	}
	if (a->asked && safe_name(a->asked)) {
		snprintf(path, sizeof(path), "%s/__schema/%s", a->dir, a->asked);
		write_schema_file(a, in, path);
	}
	through_array(a, v12);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz_array a = { 0 };
	fz_input in;
	tf_error err;

	if (!parse_input(data, size, &in))
		return 0;
	if (tf_schema_parse(in.schema, &a.schema, &err) != TF_OK) {
		fz_say("schema: %s%s", err.msg, "");
		return 0;
	}
	a.key = in.flags & FZ_KEY ? fz_key() : NULL;
	a.cache = fz_cache();
	run(&a, &in);
	tf_cache_free(a.cache);
	for (size_t i = 0; i < a.nnames; i++)
		free(a.names[i]);
	free(a.asked);
	tf_schema_free(a.schema);
	return 0;
}
