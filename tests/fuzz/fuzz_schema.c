/*
 * fuzz_schema.c - libFuzzer target: array schema bytes -> tf_schema_parse.
 *
 * Input layout (make-seeds writes the same):
 *
 *   byte 0   flags, FZ_* below
 *   byte 1   with FZ_VERSION: the format version written over the payload's
 *            own (0-30 as they are, above 30 UINT32_MAX, what experimental
 *            builds wrote), so every layout is tried on every seed
 *   rest     FZ_GENERIC: a schema file as stored (one generic tile, §6),
 *            decoded with the oracle key first; else the decoded payload
 *
 * A parse may fail with any status, but must never crash, leak or hit
 * undefined behaviour, and a schema it returns must hang together (names,
 * pipelines, at least one dimension, a layout version it knows); it is
 * then printed and asked what tilefs asks of it.
 */
#include "fuzz_util.h"

#include "format/tf_pipeline.h"
#include "format/tf_schema.h"
#include "format/tf_tile.h"

enum {
	FZ_GENERIC = 0x01,	/* a generic tile, not its payload */
	FZ_VERSION = 0x02,	/* byte 1 replaces the payload's version */
};

#define FZ_HEADER 2
#define FZ_OUT_LIMIT ((size_t)16 << 20)

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	fz_verbose = getenv("FUZZ_VERBOSE") != NULL;
	if (!(devnull = fopen("/dev/null", "w")))
		fz_fail("/dev/null", "cannot open");
	(void)fz_key();
	return 0;
}

static void check_pipeline(const tf_pipeline *p, tf_datatype type, bool may_be_null)
{
	char *text;

	if (!p) {
		if (!may_be_null)
			fz_fail("schema", "a pipeline is missing");
		return;
	}
	if (!(text = tf_pipeline_text(p)))
		fz_fail("schema", "pipeline text: out of memory");
	free(text);
	for (size_t i = 0; i < tf_pipeline_count(p); i++)
		if (!tf_pipeline_class(p, i) || !tf_datatype_valid(tf_pipeline_type_at(p, i, type)))
			fz_fail("schema", "a filter without a class or datatype");
}

static void check_field(const tf_schema *s, const tf_field *f, bool dim)
{
	if (!f->name || !tf_datatype_valid(f->type))
		fz_fail("schema", "a field without a name or datatype");
	if (!dim && !tf_schema_attr(s, f->name))
		fz_fail("schema", "an attribute not found by its name");
	/* Dimensions before format 5 have no pipeline of their own. */
	check_pipeline(f->filters, f->type, dim);
	if (dim)
		check_pipeline(tf_schema_dim_filters(s, f), f->type, false);
}

static void check_schema(const tf_schema *s)
{
	if (s->ndims == 0 || !s->dims || (s->nattrs && !s->attrs))
		fz_fail("schema", "no dimensions, or counts without arrays");
	if (s->layout_version > TF_FORMAT_VERSION_MAX || s->layout_version > s->version)
		fz_fail("schema", "read with a layout newer than its version");
	check_pipeline(s->coords, TF_DT_UINT64, false);
	check_pipeline(s->offsets, TF_DT_UINT64, false);
	check_pipeline(s->validity, TF_DT_UINT8, false);
	for (size_t i = 0; i < s->ndims; i++)
		check_field(s, &s->dims[i], true);
	for (size_t i = 0; i < s->nattrs; i++)
		check_field(s, &s->attrs[i], false);
	/* Views look enumerations up by the names attributes give. */
	for (size_t i = 0; i < s->nenums; i++)
		if (!s->enums || !s->enums[i].name || !s->enums[i].path ||
		    !tf_schema_enum_path(s, s->enums[i].name))
			fz_fail("schema", "an enumeration without a name or file");
	(void)tf_schema_dense_tile_cells(s);
	tf_schema_print(s, devnull);
}

static void parse_payload(uint8_t *p, size_t n, const uint8_t *data)
{
	tf_schema *s;
	tf_error err;

	if (data[0] & FZ_VERSION && n >= 4)
		tf_put_le32(p, data[1] <= 30 ? data[1] : UINT32_MAX);
	if (tf_schema_parse(tf_span_of(p, n), &s, &err) != TF_OK) {
		fz_say("schema: %s%s", err.msg, "");
		return;
	}
	fz_say("schema: parsed%s%s", "", "");
	check_schema(s);
	tf_schema_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tf_buf out = TF_BUF_INIT(FZ_OUT_LIMIT);
	tf_workspace *ws;
	tf_error err;
	uint8_t *copy;

	if (size < FZ_HEADER)
		return 0;
	if (!(data[0] & FZ_GENERIC)) {
		/* A copy: the version may be written over, and a payload that
		 * ends exactly at the input's end shows reads past it. */
		if (!(copy = malloc(size > FZ_HEADER ? size - FZ_HEADER : 1)))
			fz_fail("copy", "out of memory");
		memcpy(copy, data + FZ_HEADER, size - FZ_HEADER);
		parse_payload(copy, size - FZ_HEADER, data);
		free(copy);
		return 0;
	}
	if (!(ws = tf_workspace_new()))
		fz_fail("workspace", "out of memory");
	if (tf_generic_decode(tf_span_of(data + FZ_HEADER, size - FZ_HEADER), fz_key(), ws, &out, NULL,
			      &err) == TF_OK)
		parse_payload(out.p, out.len, data);
	else
		fz_say("generic tile: %s%s", err.msg, "");
	tf_buf_free(&out);
	tf_workspace_free(ws);
	return 0;
}
