/* tf_craft.c - hostile arrays for the unit tests (tf_craft.h). */
#include "tf_craft.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf_test.h"
#include "format/tf_tile.h"

bool tf_craft_copy(const char *case_name, tf_craft *c)
{
	char cmd[8400];

	if (!tf_test_corpus())
		return false;
	strcpy(c->tmp, "/tmp/tf-craft-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(c->tmp));
	snprintf(c->dir, sizeof(c->dir), "%s/array", c->tmp);
	snprintf(cmd, sizeof(cmd), "cp -r '%s/%s/array' '%s'", tf_test_corpus(), case_name, c->dir);
	ck_assert_int_eq(system(cmd), 0);
	return true;
}

void tf_craft_remove(tf_craft *c)
{
	char cmd[200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", c->tmp);
	ck_assert_int_eq(system(cmd), 0);
}

void tf_craft_path(const tf_craft *c, const char *rel, char *out)
{
	ck_assert_int_lt(snprintf(out, 4096, "%s/%s", c->dir, rel), 4096);
}

void tf_craft_read_generic(const tf_craft *c, const char *rel, tf_buf *out)
{
	char path[4096];
	size_t n;
	uint8_t *bytes;
	tf_workspace *ws = tf_workspace_new();
	tf_error err;

	tf_craft_path(c, rel, path);
	bytes = tf_test_read_file(path, &n);
	ck_assert_msg(tf_generic_decode(tf_span_of(bytes, n), NULL, ws, out, NULL, &err) == TF_OK, "%s: %s", rel,
		      err.msg);
	free(bytes);
	tf_workspace_free(ws);
}

/* Generic tile (§6): version, persisted size, tile size, datatype, cell
 * size, encryption, pipeline; then the tile, one chunk, unfiltered. */
void tf_craft_write_generic(const tf_craft *c, const char *rel, tf_span payload)
{
	char path[4096];
	tf_buf file = TF_BUF_INIT(SIZE_MAX), tile = TF_BUF_INIT(SIZE_MAX), pipe = TF_BUF_INIT(SIZE_MAX);
	tf_chunk_env env = { .type = TF_DT_CHAR, .cell_size = 1, .version = 22 };
	tf_pipeline *p = tf_pipeline_new();
	tf_workspace *ws = tf_workspace_new();
	tf_error err;

	ck_assert(p && ws);
	ck_assert_int_eq(tf_pipeline_serialize(p, &pipe, &err), TF_OK);
	ck_assert_int_eq(tf_tile_encode(p, &env, ws, payload, NULL, 0, &tile, &err), TF_OK);
	ck_assert(tf_buf_put_u32(&file, 22, NULL) == TF_OK && tf_buf_put_u64(&file, tile.len, NULL) == TF_OK &&
		  tf_buf_put_u64(&file, payload.n, NULL) == TF_OK && tf_buf_put_u8(&file, TF_DT_CHAR, NULL) == TF_OK &&
		  tf_buf_put_u64(&file, 1, NULL) == TF_OK && tf_buf_put_u8(&file, 0, NULL) == TF_OK &&
		  tf_buf_put_u32(&file, (uint32_t)pipe.len, NULL) == TF_OK &&
		  tf_buf_append(&file, pipe.p, pipe.len, NULL) == TF_OK &&
		  tf_buf_append(&file, tile.p, tile.len, NULL) == TF_OK);
	tf_craft_path(c, rel, path);
	tf_test_write_file(path, file.p, file.len);
	tf_buf_free(&file);
	tf_buf_free(&tile);
	tf_buf_free(&pipe);
	tf_pipeline_free(p);
	tf_workspace_free(ws);
}

tf_schema *tf_craft_schema(const tf_craft *c, const char *rel)
{
	tf_buf payload = TF_BUF_INIT(SIZE_MAX);
	tf_schema *s;
	tf_error err;

	tf_craft_read_generic(c, rel, &payload);
	ck_assert_msg(tf_schema_parse(tf_span_of(payload.p, payload.len), &s, &err) == TF_OK, "%s", err.msg);
	tf_buf_free(&payload);
	return s;
}

static void put_str(tf_buf *b, const char *s)
{
	ck_assert(tf_buf_put_u32(b, (uint32_t)strlen(s), NULL) == TF_OK &&
		  tf_buf_append(b, s, strlen(s), NULL) == TF_OK);
}

static void put_u8(tf_buf *b, uint8_t v) { ck_assert_int_eq(tf_buf_put_u8(b, v, NULL), TF_OK); }
static void put_u32(tf_buf *b, uint32_t v) { ck_assert_int_eq(tf_buf_put_u32(b, v, NULL), TF_OK); }
static void put_u64(tf_buf *b, uint64_t v) { ck_assert_int_eq(tf_buf_put_u64(b, v, NULL), TF_OK); }

static void put_pipeline(tf_buf *b, const tf_pipeline *p)
{
	tf_pipeline *none = p ? NULL : tf_pipeline_new();

	ck_assert_int_eq(tf_pipeline_serialize(p ? p : none, b, NULL), TF_OK);
	tf_pipeline_free(none);
}

/* The reader's order (tf_schema.c parse_as), for versions 5 on. */
void tf_craft_schema_payload(const tf_schema *s, tf_buf *out)
{
	uint32_t v = s->layout_version;

	ck_assert_uint_ge(v, 5);
	put_u32(out, s->version);
	put_u8(out, s->allows_dups);
	put_u8(out, s->dense ? 0 : 1);
	put_u8(out, s->tile_order);
	put_u8(out, s->cell_order);
	put_u64(out, s->capacity);
	put_pipeline(out, s->coords);
	put_pipeline(out, s->offsets);
	if (v >= 7)
		put_pipeline(out, s->validity);
	put_u32(out, (uint32_t)s->ndims);
	for (size_t i = 0; i < s->ndims; i++) {
		const tf_field *d = &s->dims[i];
		unsigned size = tf_datatype_size(d->type);
		bool var = d->cell_val_num == TF_CELL_VAR;

		put_str(out, d->name);
		put_u8(out, (uint8_t)d->type);
		put_u32(out, d->cell_val_num);
		put_pipeline(out, d->filters);
		put_u64(out, var ? 0 : 2 * (uint64_t)size);
		if (!var)
			ck_assert_int_eq(tf_buf_append(out, d->domain, 2 * (size_t)size, NULL), TF_OK);
		put_u8(out, d->has_extent ? 0 : 1);
		if (d->has_extent)
			ck_assert_int_eq(tf_buf_append(out, d->extent, size, NULL), TF_OK);
	}
	put_u32(out, (uint32_t)s->nattrs);
	for (size_t i = 0; i < s->nattrs; i++) {
		const tf_field *a = &s->attrs[i];

		put_str(out, a->name);
		put_u8(out, (uint8_t)a->type);
		put_u32(out, a->cell_val_num);
		put_pipeline(out, a->filters);
		if (v >= 6) {
			put_u64(out, a->fill_size);
			ck_assert_int_eq(tf_buf_append(out, a->fill, (size_t)a->fill_size, NULL), TF_OK);
		}
		if (v >= 7) {
			put_u8(out, a->nullable);
			put_u8(out, a->fill_valid);
		}
		if (v >= 17)
			put_u8(out, 0);	/* order: unordered */
		if (v >= 20)
			put_str(out, a->enumeration ? a->enumeration : "");
	}
	if (v >= 18)
		put_u32(out, 0);	/* dimension labels */
	if (v >= 20) {
		put_u32(out, (uint32_t)s->nenums);
		for (size_t i = 0; i < s->nenums; i++) {
			put_str(out, s->enums[i].name);
			put_str(out, s->enums[i].path);
		}
	}
	if (v >= 22) {
		put_u32(out, 0);	/* current domain: version, empty */
		put_u8(out, 1);
	}
}

void tf_craft_write_schema(const tf_craft *c, const char *rel, const tf_schema *s)
{
	tf_buf payload = TF_BUF_INIT(SIZE_MAX);

	tf_craft_schema_payload(s, &payload);
	tf_craft_write_generic(c, rel, tf_span_of(payload.p, payload.len));
	tf_buf_free(&payload);
}

void tf_craft_only_file(const tf_craft *c, const char *rel, char *out)
{
	char path[4096];
	DIR *d;
	struct dirent *e;
	int n = 0;

	tf_craft_path(c, rel, path);
	ck_assert_ptr_nonnull(d = opendir(path));
	while ((e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(out, 256, "%s", e->d_name);
			n++;
		}
	closedir(d);
	ck_assert_int_eq(n, 1);
}
