/*
 * fuzz_file.c - libFuzzer target: a file on disk -> tf_file_open -> every
 * unit decoded and every byte read through a cache.
 *
 * Input layout (make-seeds writes the same; the first four bytes and the
 * pipeline are fuzz_decode's, so its seeds are walk-mode seeds here):
 *
 *   byte 0   datatype (modulo TF_DT_COUNT)
 *   byte 1   flags, FZ_* below
 *   byte 2   cell_val_num of a fixed field (0 means 1)
 *   byte 3   format version (modulo 24; 0 means 22)
 *   4..      a serialized pipeline (tf_pipeline_deserialize), write order
 *   LAYOUT:  u8 n (modulo 65), n x (u64 start, u64 stored, u64 size): the
 *            tiles, as fragment metadata would give them
 *   GENERIC: u64 generic_end (0: the whole file is generic tiles)
 *   FOLDED:  u8 datatype, a serialized pipeline, u32 length and that many
 *            bytes: the var data file whose tiles the offsets are folded
 *            into; with LAYOUT also its tiles (u8 n, n x 3 u64)
 *   rest     the file's bytes
 *
 * The file is opened through the local source of the per-process
 * directory as tilefs opens it (walking the chunk headers, or from the
 * given tiles, or as generic tiles), then fz_exercise() decodes every unit
 * and reads every byte through a small cache with decode-ahead and checks
 * that both agree (fuzz_util.h).  A walked file whose every unit decodes
 * must hold what its bytes decode to in memory
 * (tf_tile_decode tile after tile, tf_generic_decode for generic files):
 * the index must not change them.  Any status is fine; crashes, leaks,
 * undefined behaviour and broken promises are not.
 */
#include "fuzz_util.h"

#include "util/tf_bytes.h"
#include "format/tf_pipeline.h"
#include "format/tf_tile.h"

enum {
	FZ_VAR = 0x01,		/* cell_val_num = TF_CELL_VAR */
	FZ_KEY = 0x02,		/* encrypted: the oracle key given */
	FZ_VARSTR = 0x04,	/* spec.var_string: force the var-string layout */
	FZ_LAYOUT = 0x08,	/* tiles given, not walked */
	FZ_GENERIC = 0x10,	/* generic tiles */
	FZ_FOLDED = 0x20,	/* offsets folded into a var data file */
};

#define FZ_HEADER 4
#define FZ_MAX_TILES 64

typedef struct fz_input {
	tf_file_spec spec;
	tf_pipeline *pipeline, *var_pipeline;
	tf_tile_layout tiles[FZ_MAX_TILES], var_tiles[FZ_MAX_TILES];
	tf_span var, file;
} fz_input;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool get_layout(tf_reader *r, tf_tile_layout *v, size_t *n)
{
	uint8_t count;

	if (tf_get_u8(r, &count, "", NULL) != TF_OK)
		return false;
	*n = count % (FZ_MAX_TILES + 1);
	for (size_t t = 0; t < *n; t++)
		if (tf_get_u64(r, &v[t].start, "", NULL) != TF_OK ||
		    tf_get_u64(r, &v[t].stored, "", NULL) != TF_OK ||
		    tf_get_u64(r, &v[t].size, "", NULL) != TF_OK)
			return false;
	return true;
}

static bool get_folded(tf_reader *r, fz_input *in, bool layout)
{
	uint8_t type;
	uint32_t len;
	tf_span var;

	if (tf_get_u8(r, &type, "", NULL) != TF_OK ||
	    tf_pipeline_deserialize(r, &in->var_pipeline, NULL) != TF_OK)
		return false;
	if (tf_get_u32(r, &len, "", NULL) != TF_OK || tf_get_span(r, len, &var, "", NULL) != TF_OK)
		return false;
	in->var = var;
	in->spec.var_type = (tf_datatype)(type % TF_DT_COUNT);
	in->spec.var_pipeline = in->var_pipeline;
	if (layout) {
		in->spec.var_tiles = in->var_tiles;
		return get_layout(r, in->var_tiles, &in->spec.nvar_tiles);
	}
	return true;
}

/* Split the input; false when it cannot be read. */
static bool parse_input(const uint8_t *data, size_t size, fz_input *in)
{
	tf_reader r;
	uint8_t flags;

	memset(in, 0, sizeof(*in));
	if (size < FZ_HEADER)
		return false;
	flags = data[1];
	in->spec.type = (tf_datatype)(data[0] % TF_DT_COUNT);
	in->spec.cell_val_num = flags & FZ_VAR ? TF_CELL_VAR : data[2] ? data[2] : 1;
	in->spec.version = data[3] % 24;
	in->spec.key = flags & FZ_KEY ? fz_key() : NULL;
	in->spec.var_string = (flags & FZ_VARSTR) != 0;
	in->spec.generic = (flags & FZ_GENERIC) != 0;
	r = tf_reader_of(tf_span_of(data + FZ_HEADER, size - FZ_HEADER));
	if (tf_pipeline_deserialize(&r, &in->pipeline, NULL) != TF_OK)
		return false;
	in->spec.pipeline = in->pipeline;
	if (flags & FZ_LAYOUT) {
		in->spec.tiles = in->tiles;
		if (!get_layout(&r, in->tiles, &in->spec.ntiles))
			return false;
	}
	if (flags & FZ_GENERIC && tf_get_u64(&r, &in->spec.generic_end, "", NULL) != TF_OK)
		return false;
	if (flags & FZ_FOLDED && !get_folded(&r, in, flags & FZ_LAYOUT))
		return false;
	in->file = tf_span_of(r.p, r.n);
	return true;
}

/* The file's bytes decoded in memory as tf_file's walk would: tiles back
 * to back with the same pipeline and environment. */
static tf_status tiles_in_memory(const fz_input *in, tf_workspace *ws, tf_buf *out)
{
	const tf_file_spec *sp = &in->spec;
	uint32_t version = sp->version ? sp->version : 22;
	tf_chunk_env env = { .type = sp->type, .version = version, .key = sp->key,
			     .cell_size = (sp->cell_val_num == TF_CELL_VAR ? 1 : sp->cell_val_num) *
					  tf_datatype_size(sp->type),
			     .var_string = sp->var_string ||
					   tf_var_string_applies(sp->pipeline, sp->type, sp->cell_val_num, version) };
	tf_pipeline *p = tf_pipeline_dup(sp->pipeline);
	tf_span rest = in->file;
	tf_status rc = p && sp->key ? tf_pipeline_append(p, TF_F_AES_256_GCM, NULL) : p ? TF_OK : TF_E_NOMEM;

	while (rc == TF_OK && rest.n) {
		uint64_t used;

		if ((rc = tf_tile_decode(p, &env, ws, rest, out, NULL, &used, NULL)) == TF_OK)
			rest = tf_span_of(rest.p + used, rest.n - (size_t)used);
	}
	tf_pipeline_free(p);
	return rc;
}

/* Generic tiles up to generic_end (or the end), then the bytes as stored. */
static tf_status generic_in_memory(const fz_input *in, tf_workspace *ws, tf_buf *out)
{
	size_t end = in->spec.generic_end ? (size_t)in->spec.generic_end : in->file.n, pos = 0;
	tf_status rc = TF_OK;

	while (rc == TF_OK && pos < end) {
		uint64_t used;

		if ((rc = tf_generic_decode(tf_span_of(in->file.p + pos, end - pos), in->spec.key, ws, out,
					    &used, NULL)) == TF_OK)
			pos += (size_t)used;
	}
	return rc == TF_OK ? tf_buf_append(out, in->file.p + end, in->file.n - end, NULL) : rc;
}

/* What the file should decode to, where memory decoding can say: files
 * walked from their first byte (a layout may skip bytes, folded offsets
 * are rebuilt from another file).  Generic files without generic_end may
 * end in a footer, which only tf_file looks for: not strict. */
static void expect_of(const fz_input *in, tf_buf *out, fz_expect *want)
{
	tf_workspace *ws;

	memset(want, 0, sizeof(*want));
	if (in->spec.tiles || in->var_pipeline || in->spec.generic_end > in->file.n)
		return;
	if (!(ws = tf_workspace_new()))
		fz_fail("workspace", "out of memory");
	want->rc = in->spec.generic ? generic_in_memory(in, ws, out) : tiles_in_memory(in, ws, out);
	want->known = true;
	want->strict = !in->spec.generic || in->spec.generic_end;
	want->p = out->p;
	want->n = out->len;
	tf_workspace_free(ws);
}

static void run(fz_input *in)
{
	char path[512];
	tf_buf memory = TF_BUF_INIT(FZ_READ_WINDOW);
	fz_expect want;
	tf_cache *c;
	tf_file *f;
	tf_error err;

	snprintf(path, sizeof(path), "%s/file.tdb", fz_dir());
	fz_write(path, in->file.p, in->file.n, 0600);
	if (in->var_pipeline) {
		snprintf(path, sizeof(path), "%s/file_var.tdb", fz_dir());
		fz_write(path, in->var.p, in->var.n, 0600);
		in->spec.var_data = "file_var.tdb";	/* in the same source */
	}
	if (tf_file_open(fz_source(), "file.tdb", NULL, NULL, &in->spec, &f, &err) != TF_OK) {
		fz_say("open: %s%s", err.msg, "");
		return;
	}
	fz_say("open: ok%s%s", "", "");
	expect_of(in, &memory, &want);
	c = fz_cache();
	fz_exercise(f, c, &want);
	tf_cache_free(c);
	tf_buf_free(&memory);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz_input in;

	if (parse_input(data, size, &in))
		run(&in);
	tf_pipeline_free(in.pipeline);
	tf_pipeline_free(in.var_pipeline);
	return 0;
}
