/*
 * genarray - write a dense 2-D int32 TileDB array (format 22) for
 * benchmarks and tests, with tilefs's own encoder: one attribute "a",
 * dimensions "r" and "c" (int32), row-major tiles of TR x TC cells, and
 * NFRAGS fragments, each a band of whole tile rows written at its own
 * timestamp.  Cell (r, c) holds r * 1000003 + c * 7 + (r ^ c) % 97, plus T
 * in a fragment added with --append at timestamp T: any reader can check a
 * value from its coordinates, and which fragment it came from.
 *
 *   genarray DIR ROWS COLS TR TC NFRAGS [FILTER[:TC]]
 *            FILTER: none (default) | zstd | lz4; TC: tile and cell order,
 *            each r (row-major, default) or c (column-major), e.g. zstd:cr
 *   genarray DIR ... --append R0 R1 C0 C1 T        add one fragment of cells
 *                                                  [R0, R1] x [C0, C1] at timestamp T
 *                                                  (its tiles padded with zeros)
 *
 *   genarray DIR --sparse NCELLS NFRAGS CAP [dups] [disjoint] [blocks=B] [nullable] [FILTER]
 *            a sparse array: int64 dimension "d" (domain [0, 2^40), extent
 *            1000000), attributes "a" (int32) and "s" (string_ascii, var),
 *            capacity CAP.  Fragment f (timestamp 1000 + f) holds d = i *
 *            NFRAGS + f for i < NCELLS / NFRAGS, and, for f > 0, every
 *            fifth coordinate of fragment 0 again (d = 5k * NFRAGS): later
 *            fragments overwrite those without duplicates; with "dups",
 *            each fragment also holds d = 7k * NFRAGS + f twice.  With
 *            "disjoint", fragments are appended one after another as a
 *            time series is: fragment f holds d = f * K + i (K = NCELLS /
 *            NFRAGS, i < K) and nothing of another's (NCELLS = NFRAGS:
 *            one-cell fragments).  With "blocks=B", fragments interleave
 *            in blocks of B cells instead of cell by cell: fragment f
 *            holds d = (j * NFRAGS + f) * B + k (k < B), and, for f > 0,
 *            the first and the last cell of each of fragment 0's blocks
 *            but the first again (duplicates at the edges of runs;
 *            fragment f's first cell is f * B: it joins the merge there).  With "nullable",
 *            s is nullable and null in every third cell of a fragment
 *            (its bytes written all the same).  Cell values: a = d * 3 +
 *            f, s = "v<d>.<f>" (".<f>b" for the second of a pair).
 *
 * The layout follows FORMAT.md §6-§8 and the corpus: __schema/ holds the
 * schema's generic tile, each fragment its a0.tdb tiles, a
 * __fragment_metadata.tdb of generic tiles and the footer, and a .wrt
 * commit in __commits/.  Statistics tiles are empty lists (tilefs does not
 * read them; TileDB would not need them to read cells either).
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/tf_bytes.h"
#include "format/tf_pipeline.h"
#include "format/tf_tile.h"

#define FORMAT 22
#define SCHEMA_NAME "__1_1_0000000000000000000000000000beef"

typedef struct spec {
	const char *dir;
	int32_t rows, cols, tr, tc;
	const char *filter;
	bool tile_col, cell_col;	/* column-major tile / cell order */
} spec;

static const char *pipeline_text(const spec *s)
{
	return !strncmp(s->filter, "zstd", 4) ? "zstd(level=-1)" : !strncmp(s->filter, "lz4", 3) ? "lz4" : "";
}

static int die(const char *what)
{
	fprintf(stderr, "genarray: %s%s%s\n", what, errno ? ": " : "", errno ? strerror(errno) : "");
	exit(1);
}

static void put_str32(tf_buf *b, const char *s)
{
	if (tf_buf_put_u32(b, (uint32_t)strlen(s), NULL) || tf_buf_append(b, s, strlen(s), NULL))
		die("out of memory");
}

static void put_pipeline(tf_buf *b, const char *text)
{
	tf_pipeline *p;

	if (tf_pipeline_parse(text, &p, NULL) != TF_OK || tf_pipeline_serialize(p, b, NULL) != TF_OK)
		die("bad filter");
	tf_pipeline_free(p);
}

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");

	if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0)
		die(path);
}

/* A generic tile (§6): 34-byte header + empty pipeline, then the payload
 * as one unfiltered tile. */
static void put_generic(tf_buf *out, const tf_buf *payload)
{
	tf_chunk_env env = { .type = TF_DT_CHAR, .cell_size = 1, .version = FORMAT };
	tf_buf tile = TF_BUF_INIT(SIZE_MAX), pipe = TF_BUF_INIT(SIZE_MAX);
	tf_workspace *ws = tf_workspace_new();
	tf_pipeline *none = tf_pipeline_new();

	if (!ws || !none || tf_pipeline_serialize(none, &pipe, NULL) ||
	    tf_tile_encode(none, &env, ws, tf_span_of(payload->p, payload->len), NULL, 0, &tile, NULL))
		die("generic tile");
	if (tf_buf_put_u32(out, FORMAT, NULL) || tf_buf_put_u64(out, tile.len, NULL) ||
	    tf_buf_put_u64(out, payload->len, NULL) || tf_buf_put_u8(out, TF_DT_CHAR, NULL) ||
	    tf_buf_put_u64(out, 1, NULL) || tf_buf_put_u8(out, 0, NULL) ||
	    tf_buf_put_u32(out, (uint32_t)pipe.len, NULL) || tf_buf_append(out, pipe.p, pipe.len, NULL) ||
	    tf_buf_append(out, tile.p, tile.len, NULL))
		die("out of memory");
	tf_buf_free(&tile), tf_buf_free(&pipe);
	tf_pipeline_free(none);
	tf_workspace_free(ws);
}

static void put_dim(tf_buf *b, const char *name, int32_t hi, int32_t ext)
{
	put_str32(b, name);
	if (tf_buf_put_u8(b, TF_DT_INT32, NULL) || tf_buf_put_u32(b, 1, NULL))
		die("out of memory");
	put_pipeline(b, "");
	if (tf_buf_put_u64(b, 8, NULL) || tf_buf_put_u32(b, 0, NULL) || tf_buf_put_u32(b, (uint32_t)hi, NULL) ||
	    tf_buf_put_u8(b, 0, NULL) || tf_buf_put_u32(b, (uint32_t)ext, NULL))
		die("out of memory");
}

/* The schema payload (§7.2, format 22). */
static void write_schema(const spec *s)
{
	tf_buf b = TF_BUF_INIT(SIZE_MAX), g = TF_BUF_INIT(SIZE_MAX);
	char path[4096];

	tf_buf_put_u32(&b, FORMAT, NULL);
	tf_buf_put_u8(&b, 0, NULL);		/* allows_dups */
	tf_buf_put_u8(&b, 0, NULL);		/* dense */
	tf_buf_put_u8(&b, s->tile_col, NULL);	/* tile order: 0 row-, 1 column-major */
	tf_buf_put_u8(&b, s->cell_col, NULL);	/* cell order */
	tf_buf_put_u64(&b, 10000, NULL);	/* capacity */
	put_pipeline(&b, "zstd(level=-1)");	/* coords */
	put_pipeline(&b, "zstd(level=-1)");	/* offsets */
	put_pipeline(&b, "rle(level=-1)");	/* validity */
	tf_buf_put_u32(&b, 2, NULL);
	put_dim(&b, "r", s->rows - 1, s->tr);
	put_dim(&b, "c", s->cols - 1, s->tc);
	tf_buf_put_u32(&b, 1, NULL);		/* attributes */
	put_str32(&b, "a");
	tf_buf_put_u8(&b, TF_DT_INT32, NULL);
	tf_buf_put_u32(&b, 1, NULL);
	put_pipeline(&b, pipeline_text(s));
	tf_buf_put_u64(&b, 4, NULL);
	tf_buf_put_u32(&b, 0x80000000u, NULL);	/* fill: INT32_MIN */
	tf_buf_put_u8(&b, 0, NULL);		/* nullable */
	tf_buf_put_u8(&b, 0, NULL);		/* fill validity */
	tf_buf_put_u8(&b, 0, NULL);		/* order */
	put_str32(&b, "");			/* no enumeration */
	tf_buf_put_u32(&b, 0, NULL);		/* dimension labels */
	tf_buf_put_u32(&b, 0, NULL);		/* enumerations */
	tf_buf_put_u32(&b, 0, NULL);		/* current domain: version 0, empty */
	tf_buf_put_u8(&b, 1, NULL);
	put_generic(&g, &b);
	snprintf(path, sizeof(path), "%s/__schema/" SCHEMA_NAME, s->dir);
	write_file(path, g.p, g.len);
	tf_buf_free(&b), tf_buf_free(&g);
}

static int32_t value(int32_t r, int32_t c, uint32_t salt)
{
	return (int32_t)((uint32_t)r * 1000003u + (uint32_t)c * 7u + (uint32_t)((r ^ c) % 97) + salt);
}

/* a0.tdb of the tiles covering [r0, r1] x [c0, c1]: tiles row-major,
 * cells row-major, cells outside the box zero (as TileDB pads, FORMAT
 * corpus README); returns the tile offsets. */
static uint64_t *write_tiles(const spec *s, const char *fdir, const int32_t *box, uint32_t salt,
			     size_t *ntiles, uint64_t *size)
{
	tf_chunk_env env = { .type = TF_DT_INT32, .cell_size = 4, .version = FORMAT };
	int32_t t0 = box[0] / s->tr * s->tr, t1 = box[1] / s->tr * s->tr, u0 = box[2] / s->tc * s->tc,
		u1 = box[3] / s->tc * s->tc;
	size_t nt = (size_t)((t1 - t0) / s->tr + 1) * (size_t)((u1 - u0) / s->tc + 1), t = 0;
	uint64_t *offs = malloc(nt * sizeof(*offs));
	int32_t *cells = malloc((size_t)s->tr * s->tc * 4);
	tf_workspace *ws = tf_workspace_new();
	tf_buf enc = TF_BUF_INIT(SIZE_MAX);
	tf_pipeline *p;
	char path[4200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/a0.tdb", fdir);
	if (!offs || !cells || !ws || !(f = fopen(path, "wb")) ||
	    tf_pipeline_parse(pipeline_text(s), &p, NULL))
		die("tiles");
	*size = 0;
	for (size_t k = 0; k < nt; k++, t++) {
		size_t ntr = (size_t)((t1 - t0) / s->tr + 1), ntc = (size_t)((u1 - u0) / s->tc + 1);
		int32_t tr = t0 + (int32_t)(s->tile_col ? k % ntr : k / ntc) * s->tr;
		int32_t tc = u0 + (int32_t)(s->tile_col ? k / ntr : k % ntc) * s->tc;

		for (int32_t i = 0; i < s->tr; i++)
			for (int32_t j = 0; j < s->tc; j++) {
				int32_t r = tr + i, c = tc + j;
				bool in = r >= box[0] && r <= box[1] && c >= box[2] && c <= box[3];
				size_t at = s->cell_col ? (size_t)j * s->tr + i : (size_t)i * s->tc + j;
				cells[at] = in ? value(r, c, salt) : 0;
			}
		enc.len = 0;
		if (tf_tile_encode(p, &env, ws, tf_span_of(cells, (size_t)s->tr * s->tc * 4), NULL, 0, &enc, NULL) ||
		    fwrite(enc.p, 1, enc.len, f) != enc.len)
			die("encode");
		offs[t] = *size;
		*size += enc.len;
	}
	if (fclose(f) != 0)
		die(path);
	tf_pipeline_free(p);
	tf_buf_free(&enc);
	tf_workspace_free(ws);
	free(cells);
	*ntiles = nt;
	return offs;
}

/* A generic tile of u64 n then n u64 (a per-field list, §8.6). */
static uint64_t put_list(tf_buf *meta, const uint64_t *v, size_t n)
{
	tf_buf b = TF_BUF_INIT(SIZE_MAX);
	uint64_t at = meta->len;

	tf_buf_put_u64(&b, n, NULL);
	for (size_t i = 0; i < n; i++)
		tf_buf_put_u64(&b, v[i], NULL);
	put_generic(meta, &b);
	tf_buf_free(&b);
	return at;
}

/* __fragment_metadata.tdb: lists for a0, __coords, r, c, then the footer. */
static void write_metadata(const char *fdir, const int32_t *box, const uint64_t *offs, size_t nt,
			   uint64_t a0_size)
{
	tf_buf meta = TF_BUF_INIT(SIZE_MAX), ft = TF_BUF_INIT(SIZE_MAX);
	uint64_t empty = put_list(&meta, NULL, 0), tiles = put_list(&meta, offs, nt);
	char path[4200];

	tf_buf_put_u32(&ft, FORMAT, NULL);
	tf_buf_put_u64(&ft, strlen(SCHEMA_NAME), NULL);
	tf_buf_append(&ft, SCHEMA_NAME, strlen(SCHEMA_NAME), NULL);
	tf_buf_put_u8(&ft, 1, NULL);	/* dense */
	tf_buf_put_u8(&ft, 0, NULL);	/* non-empty domain present */
	for (int i = 0; i < 4; i++)
		tf_buf_put_u32(&ft, (uint32_t)box[i], NULL);
	tf_buf_put_u64(&ft, 0, NULL);	/* sparse tiles */
	tf_buf_put_u64(&ft, 0, NULL);	/* last tile cells */
	tf_buf_put_u8(&ft, 0, NULL);	/* timestamps */
	tf_buf_put_u8(&ft, 0, NULL);	/* delete metadata */
	for (int k = 0; k < 3; k++)	/* file sizes, var sizes, validity sizes */
		for (int i = 0; i < 4; i++)
			tf_buf_put_u64(&ft, k == 0 && i == 0 ? a0_size : 0, NULL);
	tf_buf_put_u64(&ft, empty, NULL);	/* R-tree */
	for (int k = 0; k < 8; k++)	/* offsets, var offsets, var sizes, validity, min, max, sum, nulls */
		for (int i = 0; i < 4; i++)
			tf_buf_put_u64(&ft, k == 0 && i == 0 ? tiles : empty, NULL);
	tf_buf_put_u64(&ft, empty, NULL);	/* fragment min/max/sum/null count */
	tf_buf_put_u64(&ft, empty, NULL);	/* processed conditions */
	tf_buf_append(&meta, ft.p, ft.len, NULL);
	tf_buf_put_u64(&meta, ft.len, NULL);
	snprintf(path, sizeof(path), "%s/__fragment_metadata.tdb", fdir);
	write_file(path, meta.p, meta.len);
	tf_buf_free(&meta), tf_buf_free(&ft);
}

static void write_fragment(const spec *s, const int32_t *box, uint64_t t, uint32_t salt)
{
	char name[128], fdir[4096], path[4300];
	uint64_t size, *offs;
	size_t nt;

	if (box[0] > box[1] || box[2] > box[3] || box[1] >= s->rows || box[3] >= s->cols)
		die("fragment outside the domain");
	snprintf(name, sizeof(name), "__%llu_%llu_%032llx_%d", (unsigned long long)t, (unsigned long long)t,
		 (unsigned long long)(t * 2654435761u + (uint64_t)box[0] * 65537 + (uint64_t)box[2]), FORMAT);
	snprintf(fdir, sizeof(fdir), "%s/__fragments/%s", s->dir, name);
	if (mkdir(fdir, 0755) != 0)
		die(fdir);
	offs = write_tiles(s, fdir, box, salt, &nt, &size);
	write_metadata(fdir, box, offs, nt, size);
	free(offs);
	snprintf(path, sizeof(path), "%s/__commits/%s.wrt", s->dir, name);
	write_file(path, "", 0);
}

static int32_t arg(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*end || v < 0 || v > INT32_MAX)
		die("bad number");
	return (int32_t)v;
}


/* ---- sparse ------------------------------------------------------------------------------------ */

typedef struct scell {
	int64_t d;
	int32_t a;
	char s[40];
} scell;

static int cmp_scell(const void *x, const void *y)
{
	const scell *a = x, *b = y;
	return (a->d > b->d) - (a->d < b->d);
}

static void write_sparse_schema(const char *dir, uint64_t cap, bool dups, bool nullable, const char *filter)
{
	tf_buf b = TF_BUF_INIT(SIZE_MAX), g = TF_BUF_INIT(SIZE_MAX);
	char path[4200];

	tf_buf_put_u32(&b, FORMAT, NULL);
	tf_buf_put_u8(&b, dups, NULL);
	tf_buf_put_u8(&b, 1, NULL);		/* sparse */
	tf_buf_put_u8(&b, 0, NULL), tf_buf_put_u8(&b, 0, NULL);	/* row-major orders */
	tf_buf_put_u64(&b, cap, NULL);
	put_pipeline(&b, "zstd(level=-1)"), put_pipeline(&b, "zstd(level=-1)"), put_pipeline(&b, "rle(level=-1)");
	tf_buf_put_u32(&b, 1, NULL);
	put_str32(&b, "d");
	tf_buf_put_u8(&b, TF_DT_INT64, NULL), tf_buf_put_u32(&b, 1, NULL);
	put_pipeline(&b, "");
	tf_buf_put_u64(&b, 16, NULL), tf_buf_put_u64(&b, 0, NULL), tf_buf_put_u64(&b, ((uint64_t)1 << 40) - 1, NULL);
	tf_buf_put_u8(&b, 0, NULL), tf_buf_put_u64(&b, 1000000, NULL);
	tf_buf_put_u32(&b, 2, NULL);
	for (int i = 0; i < 2; i++) {
		put_str32(&b, i ? "s" : "a");
		tf_buf_put_u8(&b, i ? TF_DT_STRING_ASCII : TF_DT_INT32, NULL);
		tf_buf_put_u32(&b, i ? TF_CELL_VAR : 1, NULL);
		put_pipeline(&b, i ? "" : filter);
		tf_buf_put_u64(&b, i ? 1 : 4, NULL);
		tf_buf_put_u32(&b, i ? 0 : 0x80000000u, NULL);
		b.len -= i ? 3 : 0;	/* a one-byte fill "\0" for the string */
		tf_buf_put_u8(&b, i && nullable, NULL);	/* nullable, fill validity, order */
		tf_buf_put_u8(&b, 0, NULL), tf_buf_put_u8(&b, 0, NULL);
		put_str32(&b, "");
	}
	tf_buf_put_u32(&b, 0, NULL), tf_buf_put_u32(&b, 0, NULL), tf_buf_put_u32(&b, 0, NULL);
	tf_buf_put_u8(&b, 1, NULL);
	put_generic(&g, &b);
	snprintf(path, sizeof(path), "%s/__schema/" SCHEMA_NAME, dir);
	write_file(path, g.p, g.len);
	tf_buf_free(&b), tf_buf_free(&g);
}

/* One file of tiles of `cap` cells; per tile: offset, and var size. */
typedef struct sfile {
	FILE *f;
	uint64_t size, *offs, *vsizes;
	size_t nt;
} sfile;

static void put_tile(sfile *sf, const char *filter, tf_datatype t, const void *p, size_t n, bool var_sz)
{
	tf_chunk_env env = { .type = t, .cell_size = tf_datatype_size(t), .version = FORMAT };
	tf_workspace *ws = tf_workspace_new();
	tf_buf enc = TF_BUF_INIT(SIZE_MAX);
	tf_pipeline *pl;

	if (tf_pipeline_parse(filter, &pl, NULL) || !ws ||
	    tf_tile_encode(pl, &env, ws, tf_span_of(p, n), NULL, 0, &enc, NULL) || fwrite(enc.p, 1, enc.len, sf->f) != enc.len ||
	    !(sf->offs = realloc(sf->offs, (sf->nt + 1) * 8)) || !(sf->vsizes = realloc(sf->vsizes, (sf->nt + 1) * 8)))
		die("encode");
	sf->offs[sf->nt] = sf->size, sf->vsizes[sf->nt] = var_sz ? n : 0;
	sf->nt++, sf->size += enc.len;
	tf_pipeline_free(pl), tf_buf_free(&enc), tf_workspace_free(ws);
}

static void open_sfile(sfile *sf, const char *fdir, const char *name)
{
	char path[4200];

	memset(sf, 0, sizeof(*sf));
	snprintf(path, sizeof(path), "%s/%s", fdir, name);
	if (!(sf->f = fopen(path, "wb")))
		die(path);
}

/* s of the cell at position i of its fragment: null in every third. */
static bool sparse_null(size_t i)
{
	return i % 3 == 1;
}

static void write_sparse_tiles(const char *fdir, const scell *c, size_t n, uint64_t cap, const char *filter,
			       bool nullable, sfile *files)
{
	static const char *const names[] = { "d0.tdb", "a0.tdb", "a1.tdb", "a1_var.tdb", "a1_validity.tdb" };
	int nfiles = nullable ? 5 : 4;
	int64_t *d = malloc(cap * 8);
	int32_t *a = malloc(cap * 4);
	uint64_t *o = malloc(cap * 8);
	char *v = malloc(cap * 40);
	uint8_t *valid = malloc(cap);

	for (int k = 0; k < nfiles; k++)
		open_sfile(&files[k], fdir, names[k]);
	for (size_t t0 = 0; t0 < n; t0 += cap) {
		size_t m = n - t0 < cap ? n - t0 : cap, vl = 0;
		for (size_t i = 0; i < m; i++) {
			d[i] = c[t0 + i].d, a[i] = c[t0 + i].a, o[i] = vl;
			memcpy(v + vl, c[t0 + i].s, strlen(c[t0 + i].s));
			vl += strlen(c[t0 + i].s);
			valid[i] = !sparse_null(t0 + i);
		}
		put_tile(&files[0], "zstd(level=-1)", TF_DT_INT64, d, m * 8, false);
		put_tile(&files[1], filter, TF_DT_INT32, a, m * 4, false);
		put_tile(&files[2], "zstd(level=-1)", TF_DT_UINT64, o, m * 8, false);
		put_tile(&files[3], "", TF_DT_STRING_ASCII, v, vl, true);
		if (nullable)
			put_tile(&files[4], "rle(level=-1)", TF_DT_UINT8, valid, m, false);
	}
	for (int k = 0; k < nfiles; k++)
		if (fclose(files[k].f) != 0)
			die("close");
	free(d), free(a), free(o), free(v), free(valid);
}

/* Footer fields: a0, a1, __coords, d0 (§8.2). */
static void write_sparse_metadata(const char *fdir, const scell *c, size_t n, uint64_t cap, bool nullable,
				  sfile *fl)
{
	tf_buf meta = TF_BUF_INIT(SIZE_MAX), ft = TF_BUF_INIT(SIZE_MAX);
	uint64_t e = put_list(&meta, NULL, 0), tiles[4], var_offs, var_sizes, valid_offs = e;
	uint64_t fixed[4] = { fl[1].size, fl[2].size, 0, fl[0].size };
	char path[4200];

	tiles[0] = put_list(&meta, fl[1].offs, fl[1].nt), tiles[1] = put_list(&meta, fl[2].offs, fl[2].nt);
	tiles[2] = e, tiles[3] = put_list(&meta, fl[0].offs, fl[0].nt);
	var_offs = put_list(&meta, fl[3].offs, fl[3].nt), var_sizes = put_list(&meta, fl[3].vsizes, fl[3].nt);
	if (nullable)
		valid_offs = put_list(&meta, fl[4].offs, fl[4].nt);
	tf_buf_put_u32(&ft, FORMAT, NULL);
	tf_buf_put_u64(&ft, strlen(SCHEMA_NAME), NULL), tf_buf_append(&ft, SCHEMA_NAME, strlen(SCHEMA_NAME), NULL);
	tf_buf_put_u8(&ft, 0, NULL), tf_buf_put_u8(&ft, 0, NULL);
	tf_buf_put_u64(&ft, (uint64_t)c[0].d, NULL), tf_buf_put_u64(&ft, (uint64_t)c[n - 1].d, NULL);
	tf_buf_put_u64(&ft, fl[0].nt, NULL), tf_buf_put_u64(&ft, n - (fl[0].nt - 1) * cap, NULL);
	tf_buf_put_u8(&ft, 0, NULL), tf_buf_put_u8(&ft, 0, NULL);
	for (int i = 0; i < 4; i++)
		tf_buf_put_u64(&ft, fixed[i], NULL);
	for (int i = 0; i < 4; i++)
		tf_buf_put_u64(&ft, i == 1 ? fl[3].size : 0, NULL);
	for (int i = 0; i < 4; i++)	/* validity sizes */
		tf_buf_put_u64(&ft, i == 1 && nullable ? fl[4].size : 0, NULL);
	tf_buf_put_u64(&ft, e, NULL);
	for (int i = 0; i < 4; i++)
		tf_buf_put_u64(&ft, tiles[i], NULL);
	for (int i = 0; i < 4; i++)
		tf_buf_put_u64(&ft, i == 1 ? var_offs : e, NULL);
	for (int i = 0; i < 4; i++)
		tf_buf_put_u64(&ft, i == 1 ? var_sizes : e, NULL);
	for (int k = 0; k < 5 * 4 + 2; k++)	/* validity, min, max, sum, nulls; fragment stats, conditions */
		tf_buf_put_u64(&ft, k == 1 ? valid_offs : e, NULL);
	tf_buf_append(&meta, ft.p, ft.len, NULL);
	tf_buf_put_u64(&meta, ft.len, NULL);
	snprintf(path, sizeof(path), "%s/__fragment_metadata.tdb", fdir);
	write_file(path, meta.p, meta.len);
	tf_buf_free(&meta), tf_buf_free(&ft);
	for (int k = 0; k < (nullable ? 5 : 4); k++)
		free(fl[k].offs), free(fl[k].vsizes);
}

/* Fragment f's cell i (of n / nf), in blocks of B cells or (B = 0) one. */
static int64_t sparse_coord(int64_t n, int nf, int f, bool disjoint, int64_t B, int64_t i)
{
	if (disjoint)
		return (int64_t)f * (n / nf) + i;
	if (B)
		return (i / B * nf + f) * B + i % B;
	return i * nf + f;
}

/* Whether fragments f > 0 hold fragment 0's cell i again. */
static bool sparse_again(int64_t B, int64_t i)
{
	return B ? i >= B && (i % B == 0 || i % B == B - 1) : i % 5 == 0;
}

static size_t sparse_cells(int64_t n, int nf, int f, bool dups, bool disjoint, int64_t B, scell *c)
{
	size_t m = 0;

	for (int64_t i = 0; i < n / nf; i++) {
		int64_t d = sparse_coord(n, nf, f, disjoint, B, i), d0 = sparse_coord(n, nf, 0, disjoint, B, i);
		c[m].d = d, c[m].a = (int32_t)(d * 3 + f);
		snprintf(c[m].s, sizeof(c[m].s), "v%lld.%d", (long long)d, f);
		m++;
		if (!disjoint && f > 0 && sparse_again(B, i)) {	/* fragment 0's coordinate again */
			c[m].d = d0, c[m].a = (int32_t)(d0 * 3 + f);
			snprintf(c[m].s, sizeof(c[m].s), "v%lld.%d", (long long)d0, f);
			m++;
		}
		if (dups && i % 7 == 0) {
			c[m] = c[m - 1 - (!disjoint && f > 0 && sparse_again(B, i))];
			snprintf(c[m].s, sizeof(c[m].s), "v%lld.%db", (long long)d, f);
			m++;
		}
	}
	qsort(c, m, sizeof(*c), cmp_scell);	/* not stable: equal cells are equal but for s */
	for (size_t i = 1; i < m; i++)	/* keep a pair's first before its "b" */
		if (c[i].d == c[i - 1].d && strchr(c[i - 1].s, 'b') && !strchr(c[i].s, 'b')) {
			scell t = c[i];
			c[i] = c[i - 1], c[i - 1] = t;
		}
	return m;
}

static int main_sparse(int argc, char **argv)
{
	static const char *const dirs[] = { "", "/__schema", "/__fragments", "/__commits", "/__meta" };
	int64_t n = argc > 3 ? arg(argv[3]) : 0;
	int nf = argc > 4 ? arg(argv[4]) : 0;
	uint64_t cap = argc > 5 ? (uint64_t)arg(argv[5]) : 0;
	bool dups = false, disjoint = false, nullable = false;
	int64_t B = 0;
	const char *filter = "none";
	char path[4200], fdir[4100], name[128];
	scell *c;

	for (int i = 6; i < argc; i++) {
		if (!strcmp(argv[i], "dups"))
			dups = true;
		else if (!strcmp(argv[i], "disjoint"))
			disjoint = true;
		else if (!strcmp(argv[i], "nullable"))
			nullable = true;
		else if (!strncmp(argv[i], "blocks=", 7))
			B = arg(argv[i] + 7);
		else
			filter = argv[i];
	}
	filter = !strcmp(filter, "zstd") ? "zstd(level=-1)" : !strcmp(filter, "lz4") ? "lz4" : "";
	errno = 0;
	if (!n || !nf || !cap || n / nf < 1 || !(c = malloc(((size_t)n / nf * 3 + 3) * sizeof(*c))))
		die("usage: genarray DIR --sparse NCELLS NFRAGS CAP [dups] [disjoint] [blocks=B] [nullable] [FILTER]");
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", argv[1], dirs[i]);
		if (mkdir(path, 0755) != 0 && errno != EEXIST)
			die(path);
	}
	write_sparse_schema(argv[1], cap, dups, nullable, filter);
	for (int f = 0; f < nf; f++) {
		size_t m = sparse_cells(n, nf, f, dups, disjoint, B, c);
		sfile fl[5];

		snprintf(name, sizeof(name), "__%d_%d_%032x_%d", 1000 + f, 1000 + f, 0xabc00 + f, FORMAT);
		snprintf(fdir, sizeof(fdir), "%s/__fragments/%s", argv[1], name);
		if (mkdir(fdir, 0755) != 0)
			die(fdir);
		write_sparse_tiles(fdir, c, m, cap, filter, nullable, fl);
		write_sparse_metadata(fdir, c, m, cap, nullable, fl);
		snprintf(path, sizeof(path), "%s/__commits/%s.wrt", argv[1], name);
		write_file(path, "", 0);
	}
	free(c);
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const dirs[] = { "", "/__schema", "/__fragments", "/__commits", "/__meta" };
	spec s;
	int32_t nf;
	char path[4096];

	if (argc > 2 && !strcmp(argv[2], "--sparse"))
		return main_sparse(argc, argv);
	if (argc < 7) {
		fprintf(stderr, "usage: genarray DIR ROWS COLS TR TC NFRAGS [none|zstd|lz4] [--append R0 R1 C0 C1 T]\n"
			"       genarray DIR --sparse NCELLS NFRAGS CAP [dups] [disjoint] [blocks=B] [nullable] [none|zstd|lz4]\n");
		return 2;
	}
	s = (spec){ argv[1], arg(argv[2]), arg(argv[3]), arg(argv[4]), arg(argv[5]), argc > 7 ? argv[7] : "none",
		    false, false };
	if (strchr(s.filter, ':')) {
		const char *o = strchr(s.filter, ':') + 1;
		s.tile_col = o[0] == 'c';
		s.cell_col = o[0] && o[1] == 'c';
	}
	nf = arg(argv[6]);
	errno = 0;
	if (!s.rows || !s.cols || !s.tr || !s.tc || s.rows % s.tr || s.cols % s.tc || (nf && (s.rows / s.tr) % nf))
		die("ROWS and COLS must be multiples of TR and TC, tile rows of NFRAGS");
	if (argc == 14 && !strcmp(argv[8], "--append")) {
		int32_t box[4] = { arg(argv[9]), arg(argv[10]), arg(argv[11]), arg(argv[12]) };
		write_fragment(&s, box, (uint64_t)arg(argv[13]), (uint32_t)arg(argv[13]));
		return 0;
	}
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", s.dir, dirs[i]);
		if (mkdir(path, 0755) != 0 && errno != EEXIST)
			die(path);
	}
	write_schema(&s);
	for (int32_t f = 0; f < nf; f++) {
		int32_t band = s.rows / nf, box[4] = { f * band, (f + 1) * band - 1, 0, s.cols - 1 };
		write_fragment(&s, box, 1000 + (uint64_t)f, 0);
	}
	return 0;
}
