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
 * The layout follows FORMAT-NOTES §6-§8 and the corpus: __schema/ holds the
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

#include "tf_bytes.h"
#include "tf_pipeline.h"
#include "tf_tile.h"

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

int main(int argc, char **argv)
{
	static const char *const dirs[] = { "", "/__schema", "/__fragments", "/__commits", "/__meta" };
	spec s;
	int32_t nf;
	char path[4096];

	if (argc < 7) {
		fprintf(stderr, "usage: genarray DIR ROWS COLS TR TC NFRAGS [none|zstd|lz4] [--append R0 R1 C0 C1 T]\n");
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
