/*
 * encode.c - tiletool's encode command: raw cells (and, for var-sized
 * cells, their offsets) written as a tile file through a pipeline, as
 * TileDB writes one.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/tf_file.h"
#include "format/tf_pipeline.h"
#include "format/tf_tile.h"
#include "tools/tiletool_int.h"

/* Read up to n bytes (fewer only at end of file). */
static size_t read_full(FILE *in, uint8_t *p, size_t n)
{
	size_t got = 0, r;

	while (got < n && (r = fread(p + got, 1, n - got, in)) > 0)
		got += r;
	return got;
}

static int encode_stream(const opts *o, FILE *in, FILE *out, uint64_t total)
{
	tf_chunk_env env = { .type = o->type, .version = o->version ? o->version : 22, .key = o->key };
	uint64_t cell = (uint64_t)o->cell_val_num * tf_datatype_size(o->type);
	uint64_t tile_size = o->tile_size ? o->tile_size : total;
	tf_workspace *ws = tf_workspace_new();
	tf_buf tile = TF_BUF_INIT(SIZE_MAX), enc = TF_BUF_INIT(SIZE_MAX);
	tf_error err;
	int rc = 0;

	env.cell_size = (uint32_t)cell;
	if (tile_size % cell)
		rc = tiletool_usage_error("%s", "the tile size must be a multiple of the cell size");
	/* One tile at a time, so memory stays bounded by the tile size. */
	for (uint64_t done = 0; !rc && ws && (done < total || total == 0); done += tile.len) {
		uint64_t want = total - done < tile_size ? total - done : tile_size;

		enc.len = tile.len = 0;
		if (tf_buf_reserve(&tile, (size_t)want, &err) != TF_OK ||
		    (tile.len = read_full(in, tile.p, (size_t)want)) != want) {
			fprintf(stderr, "%s: cannot read input\n", tiletool_prog);
			rc = EXIT_DATA;
		} else if (tf_tile_encode(o->pipeline, &env, ws, tf_span_of(tile.p, tile.len), NULL, 0,
					  &enc, &err) != TF_OK) {
			fprintf(stderr, "%s: encode: %s\n", tiletool_prog, err.msg);
			rc = EXIT_DATA;
		} else if (!tiletool_write_all(out, enc.p, enc.len)) {
			fprintf(stderr, "%s: write: %s\n", tiletool_prog, strerror(errno));
			rc = EXIT_DATA;
		}
		if (total == 0)
			break;
	}
	tf_buf_free(&tile);
	tf_buf_free(&enc);
	tf_workspace_free(ws);
	return ws ? rc : EXIT_DATA;
}

/* ---- encoding var-sized cells -------------------------------------------------------------- */

typedef struct var_input {
	tf_buf data, offsets;	/* IN, and its u64 cell starts (as TileDB's query buffers) */
	size_t ncells;
} var_input;

static bool read_file(const char *path, tf_buf *b)
{
	FILE *f = fopen(path, "rb");
	size_t got;

	if (!f)
		return false;
	while (tf_buf_reserve(b, b->len + 65536, NULL) == TF_OK &&
	       (got = fread(b->p + b->len, 1, 65536, f)) > 0)
		b->len += got;
	got = !ferror(f);
	fclose(f);
	return got;
}

static int load_var_input(const opts *o, const char *in, var_input *v)
{
	uint64_t prev = 0;

	if (!read_file(in, &v->data) || !read_file(o->offsets_in, &v->offsets)) {
		fprintf(stderr, "%s: cannot read %s or %s: %s\n", tiletool_prog, in, o->offsets_in, strerror(errno));
		return EXIT_DATA;
	}
	v->ncells = v->offsets.len / 8;
	for (size_t c = 0; c < v->ncells; c++) {
		uint64_t at = tf_le64(v->offsets.p + 8 * c);
		if (at < prev || at > v->data.len || v->offsets.len % 8) {
			fprintf(stderr, "%s: %s: offsets must be u64, non-decreasing, within %s\n", tiletool_prog,
				o->offsets_in, in);
			return EXIT_DATA;
		}
		prev = at;
	}
	return 0;
}

/* Encode one tile of cells [first, first + count) to out, and its offsets
 * tile to offs (if non-NULL): folded into the data where TileDB folds them. */
static tf_status encode_var_tile(const opts *o, const var_input *v, const tf_chunk_env *env,
				 const tf_pipeline *off_pipe, tf_workspace *ws, size_t first, size_t count,
				 tf_buf *out, tf_buf *offs, tf_error *err)
{
	uint64_t base = count ? tf_le64(v->offsets.p + 8 * first) : v->data.len;
	uint64_t end = first + count < v->ncells ? tf_le64(v->offsets.p + 8 * (first + count)) : v->data.len;
	tf_chunk_env off_env = { .type = TF_DT_UINT64, .cell_size = 8, .version = env->version, .key = o->key };
	uint64_t *rel = malloc((count ? count : 1) * sizeof(*rel));
	tf_status rc;

	if (!rel)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	for (size_t c = 0; c < count; c++)
		rel[c] = tf_le64(v->offsets.p + 8 * (first + c)) - base;	/* relative to the tile */
	rc = tf_tile_encode(o->pipeline, env, ws, tf_span_of(v->data.p + base, (size_t)(end - base)), rel,
			    count, out, err);
	if (rc == TF_OK && offs && env->var_string)
		rc = tf_buf_put_u64(offs, 0, err);	/* an offsets tile of no chunks (§4.7) */
	else if (rc == TF_OK && offs)
		rc = tf_tile_encode(off_pipe, &off_env, ws, tf_span_of(rel, count * 8), NULL, 0, offs, err);
	free(rel);
	return rc;
}

static int encode_var(const opts *o, const char *in, const char *out_path)
{
	tf_chunk_env env = { .type = o->type, .cell_size = tf_datatype_size(o->type),
			     .version = o->version ? o->version : 22, .key = o->key };
	tf_buf out = TF_BUF_INIT(SIZE_MAX), offs = TF_BUF_INIT(SIZE_MAX);
	var_input v = { TF_BUF_INIT(SIZE_MAX), TF_BUF_INIT(SIZE_MAX), 0 };
	tf_workspace *ws = tf_workspace_new();
	tf_pipeline *off_pipe = NULL;
	tf_error err;
	int rc = load_var_input(o, in, &v);

	env.var_string = tf_var_string_applies(o->pipeline, o->type, TF_CELL_VAR, env.version);
	if (!rc && o->offsets_out &&
	    tf_pipeline_parse_with(o->offsets_spec ? o->offsets_spec : "zstd", o->plugins, &off_pipe, &err))
		rc = tiletool_usage_error("--offsets-filters: %s", err.msg);
	if (!rc && o->key && off_pipe && tf_pipeline_append(off_pipe, TF_F_AES_256_GCM, &err))
		rc = tiletool_usage_error("%s", "too many filters");
	for (size_t first = 0; !rc && ws && (first < v.ncells || first == 0); first += o->tile_cells ? o->tile_cells : v.ncells) {
		size_t count = o->tile_cells && v.ncells - first > o->tile_cells ? o->tile_cells : v.ncells - first;
		if (encode_var_tile(o, &v, &env, off_pipe, ws, first, count, &out, o->offsets_out ? &offs : NULL, &err)) {
			fprintf(stderr, "%s: encode: cells %zu..: %s\n", tiletool_prog, first, err.msg);
			rc = EXIT_DATA;
		}
		if (!v.ncells)
			break;
	}
	if (!rc && (!tiletool_write_file(out_path, &out) ||
		    (o->offsets_out && !tiletool_write_file(o->offsets_out, &offs)))) {
		fprintf(stderr, "%s: write: %s\n", tiletool_prog, strerror(errno));
		rc = EXIT_DATA;
	}
	tf_buf_free(&out), tf_buf_free(&offs), tf_buf_free(&v.data), tf_buf_free(&v.offsets);
	tf_pipeline_free(off_pipe);
	tf_workspace_free(ws);
	return rc;
}

int tiletool_encode(opts *o, int nfiles, char **files)
{
	FILE *in, *out;
	long long total;
	int rc;

	if (nfiles != 2)
		return tiletool_usage_error("%s", "encode takes IN and OUT");
	if (!o->have_spec)
		return tiletool_usage_error("%s", "encode needs -F SPEC (use -F '' for no filters)");
	if ((o->cell_val_num == TF_CELL_VAR) != (o->offsets_in != NULL))
		return tiletool_usage_error("%s", "var-sized cells (-n var) need --offsets FILE, and only they");
	/* Encrypted data: AES-256-GCM runs last, after the field's filters (§9). */
	if (o->key && tf_pipeline_append(o->pipeline, TF_F_AES_256_GCM, NULL) != TF_OK)
		return tiletool_usage_error("%s", "too many filters");
	if (o->cell_val_num == TF_CELL_VAR)
		return encode_var(o, files[0], files[1]);
	if (!(in = fopen(files[0], "rb")) || fseeko(in, 0, SEEK_END) != 0 || (total = ftello(in)) < 0 ||
	    fseeko(in, 0, SEEK_SET) != 0) {
		fprintf(stderr, "%s: %s: %s\n", tiletool_prog, files[0], strerror(errno));
		return EXIT_DATA;
	}
	if (!(out = fopen(files[1], "wb"))) {
		fprintf(stderr, "%s: %s: %s\n", tiletool_prog, files[1], strerror(errno));
		fclose(in);
		return EXIT_DATA;
	}
	rc = encode_stream(o, in, out, (uint64_t)total);
	fclose(in);
	if (fclose(out) != 0 && !rc) {
		fprintf(stderr, "%s: %s: %s\n", tiletool_prog, files[1], strerror(errno));
		rc = EXIT_DATA;
	}
	return rc;
}
