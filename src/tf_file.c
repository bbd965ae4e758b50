/*
 * tf_file.c - two-level index of one source file (tiles, then each tile's
 * chunks) and decoding of its chunks.
 */
#include "tf_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tf_cache.h"
#include "tf_tile.h"

#define WALK_WINDOW (1024 * 1024)	/* see walker */

typedef enum { TILE_CHUNKED, TILE_FOLDED, TILE_RAW } tile_kind;

typedef struct chunk_ent {
	uint64_t off;		/* start in the decoded file */
	uint64_t src_off;	/* stored chunk, header included */
	uint64_t src_len;
	uint32_t size;		/* decoded bytes */
} chunk_ent;

typedef struct chunk_table {
	size_t n;
	chunk_ent c[];
} chunk_table;

typedef struct tile_ent {
	uint64_t start, stored;	/* where the tile is stored */
	uint64_t off, size;	/* its decoded range */
	tile_kind kind;
	unsigned dec;		/* which decoder: generic files have one per tile */
	uint64_t data_start, data_stored; /* folded: the data tile it comes from */
	_Atomic(chunk_table *) chunks;	/* NULL until first needed */
} tile_ent;

/* A pipeline and what it needs to run. */
typedef struct decoder {
	tf_pipeline *pipeline;	/* effective: AES appended when keyed */
	tf_chunk_env env;
} decoder;

struct tf_file {
	atomic_int refs;
	char *name, *path;
	_Atomic int fd;		/* -1 until a read needs it: listing a big array
				 * must not hold a descriptor per file */
	int var_fd;
	struct stat st;
	decoder *dec;
	size_t ndec;
	decoder var;		/* folded offsets: the data file's decoder */
	tile_ent *tiles;
	size_t ntiles, tcap;
	uint64_t size;
	uint64_t folded;
	bool generic, from_layout;
	uint32_t cell_val_num;
	tf_cache *cache;	/* bound on the first read through a cache */
	_Atomic uint64_t owner;	/* our id in that cache */
};

/* ---- I/O ------------------------------------------------------------------------ */

static tf_status read_at(int fd, uint64_t off, void *dst, size_t n, tf_error *err)
{
	uint8_t *p = dst;

	while (n) {
		ssize_t got = pread(fd, p, n, (off_t)off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return tf_err(err, TF_E_IO, "read at %llu: %s", (unsigned long long)off,
				      strerror(errno));
		if (got == 0)
			return tf_err(err, TF_E_STALE, "file ended at %llu (changed on disk?)",
				      (unsigned long long)off);
		p += got;
		off += (uint64_t)got;
		n -= (size_t)got;
	}
	return TF_OK;
}

/* Headers are read through a window: a walk visits them in order.  Chunks
 * are tens of KiB apart, so a wide window reads nearly the whole file: one
 * sequential pass instead of a random read per header, which costs ten times
 * more on most storage, and it fills the page cache with what readers will
 * want next.  (Asking the kernel to read ahead while taking only the header
 * pages was measured slower: 0.43 s against 0.27 s for a cold 70 MB file.) */
typedef struct walker {
	int fd;
	uint64_t end;		/* the walk stays before this offset */
	uint64_t at;		/* file offset of buf[0] */
	size_t len;
	uint8_t buf[WALK_WINDOW];
} walker;

static walker *walker_new(int fd, uint64_t end)
{
	walker *w = malloc(sizeof(*w));

	if (w) {
		w->fd = fd;
		w->end = end;
		w->at = w->len = 0;
	}
	return w;
}

static tf_status walk_read(walker *w, uint64_t off, void *dst, size_t n, tf_error *err)
{
	if (off > w->end || n > w->end - off)
		return tf_err(err, TF_E_CORRUPT, "header at %llu runs past the end of the tile data",
			      (unsigned long long)off);
	if (off < w->at || off + n > w->at + w->len) {
		size_t want = w->end - off < WALK_WINDOW ? (size_t)(w->end - off) : WALK_WINDOW;
		tf_status rc = read_at(w->fd, off, w->buf, want, err);
		if (rc != TF_OK)
			return rc;
		w->at = off;
		w->len = want;
	}
	memcpy(dst, w->buf + (off - w->at), n);
	return TF_OK;
}

int tf_open_regular(const char *path, struct stat *st)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

	if (fd < 0)
		return -1;
	if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode) || fcntl(fd, F_SETFL, 0) != 0) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	return fd;
}

bool tf_same_source(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* The source's descriptor, opened on first need.  A file that is no longer
 * the one indexed is refused: its bytes would not match the index. */
static int file_fd(const tf_file *f, tf_error *err)
{
	int fd = atomic_load(&f->fd), have = -1;
	struct stat st;

	if (fd >= 0)
		return fd;
	if ((fd = tf_open_regular(f->path, &st)) < 0)
		return tf_err(err, TF_E_IO, "%s: %s", f->name, strerror(errno)), -1;
	if (!tf_same_source(&st, &f->st)) {
		close(fd);
		return tf_err(err, TF_E_STALE, "%s changed on disk", f->name), -1;
	}
	if (!atomic_compare_exchange_strong((_Atomic int *)&f->fd, &have, fd)) {
		close(fd);	/* another reader opened it first */
		fd = have;
	}
	return fd;
}

/* ---- chunk lists ------------------------------------------------------------------- */

static chunk_table *table_new(size_t n)
{
	chunk_table *t = malloc(sizeof(*t) + n * sizeof(chunk_ent));

	if (t)
		t->n = n;
	return t;
}

/*
 * Read the chunk headers of the tile at `pos` (u64 count, then chunks back
 * to back) into a new table whose decoded offsets start at `off`.  *stored
 * receives the tile's stored size, *size its decoded size.
 */
static tf_status walk_chunks(walker *w, uint64_t pos, uint64_t off, chunk_table **out,
			     uint64_t *stored, uint64_t *size, tf_error *err)
{
	uint8_t raw[TF_CHUNK_HEADER_SIZE];
	uint64_t n, p = pos + TF_TILE_HEADER_SIZE, start = off;
	chunk_table *t;
	tf_status rc;

	if ((rc = walk_read(w, pos, raw, TF_TILE_HEADER_SIZE, err)) != TF_OK)
		return rc;
	n = tf_le64(raw);
	if (n > (w->end - p) / TF_CHUNK_HEADER_SIZE)
		return tf_err(err, TF_E_CORRUPT, "claims %llu chunks in %llu bytes",
			      (unsigned long long)n, (unsigned long long)(w->end - p));
	if (!(t = table_new((size_t)n)))
		return tf_err(err, TF_E_NOMEM, "cannot index %llu chunks", (unsigned long long)n);
	for (uint64_t c = 0; c < n; c++) {
		chunk_ent *e = &t->c[c];
		tf_chunk_header h;

		if ((rc = walk_read(w, p, raw, sizeof(raw), err)) != TF_OK) {
			free(t);
			return tf_err_prefix(err, "chunk %llu", (unsigned long long)c);
		}
		tf_chunk_header_read(raw, &h);
		if (tf_chunk_stored_size(&h) > w->end - p) {
			free(t);
			return tf_err(err, TF_E_CORRUPT, "chunk %llu: %llu stored bytes run past the end",
				      (unsigned long long)c, (unsigned long long)tf_chunk_stored_size(&h));
		}
		*e = (chunk_ent){ off, p, tf_chunk_stored_size(&h), h.orig_len };
		p += e->src_len;
		off += h.orig_len;
	}
	*out = t;
	*stored = p - pos;
	*size = off - start;
	return TF_OK;
}

/* Make tile t's chunk list (lock-free: a racing loader's list may win). */
static tf_status build_table(const tf_file *f, const tile_ent *te, chunk_table **out, tf_error *err)
{
	uint64_t stored, size;
	chunk_table *t = NULL;
	walker *w;
	int fd;
	tf_status rc;

	if (te->kind != TILE_CHUNKED) {
		/* One pseudo-chunk: its decoded size must fit a chunk's 32 bits
		 * (sizes come from fragment metadata, which may lie), and raw
		 * bytes decode to exactly what is stored. */
		if (te->size > UINT32_MAX || (te->kind == TILE_RAW && te->size != te->stored))
			return tf_err(err, TF_E_CORRUPT, "tile of %llu bytes (%llu stored) cannot be "
				      "one chunk", (unsigned long long)te->size, (unsigned long long)te->stored);
		if (!(t = table_new(1)))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		t->c[0] = (chunk_ent){ te->off, te->kind == TILE_RAW ? te->start : te->data_start,
				       te->kind == TILE_RAW ? te->stored : te->data_stored, (uint32_t)te->size };
		*out = t;
		return TF_OK;
	}
	if ((fd = file_fd(f, err)) < 0)
		return err ? err->code : TF_E_IO;
	if (!(w = walker_new(fd, te->start + te->stored)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	rc = walk_chunks(w, te->start, te->off, &t, &stored, &size, err);
	free(w);
	if (rc != TF_OK)
		return rc;
	if (stored != te->stored || size != te->size) {
		free(t);
		return tf_err(err, TF_E_CORRUPT, "chunks take %llu bytes and decode to %llu, the "
			      "fragment metadata says %llu and %llu", (unsigned long long)stored,
			      (unsigned long long)size, (unsigned long long)te->stored,
			      (unsigned long long)te->size);
	}
	*out = t;
	return TF_OK;
}

static tf_status load_tile(const tf_file *f, size_t t, const chunk_table **out, tf_error *err)
{
	tile_ent *te = &f->tiles[t];
	chunk_table *have = atomic_load_explicit(&te->chunks, memory_order_acquire), *mine;
	tf_status rc;

	if (!have) {
		if ((rc = build_table(f, te, &mine, err)) != TF_OK)
			return tf_err_prefix(err, "%s: tile %zu", f->name, t);
		if (atomic_compare_exchange_strong(&te->chunks, &have, mine))
			have = mine;
		else
			free(mine);	/* another reader was first */
	}
	*out = have;
	return TF_OK;
}

/* ---- the tile list ------------------------------------------------------------------ */

static tf_status add_tile(tf_file *f, const tile_ent *te, tf_error *err)
{
	if (f->ntiles == f->tcap) {
		size_t cap = f->tcap ? f->tcap * 2 : 16;
		tile_ent *v = realloc(f->tiles, cap * sizeof(*v));
		if (!v)
			return tf_err(err, TF_E_NOMEM, "cannot index %zu tiles", cap);
		f->tiles = v;
		f->tcap = cap;
	}
	f->tiles[f->ntiles] = *te;
	f->tiles[f->ntiles].off = f->size;
	f->size += te->size;
	f->ntiles++;
	return TF_OK;
}

/* Walk every tile in [start, end): tiles with their chunk lists loaded. */
static tf_status walk_file(tf_file *f, int fd, uint64_t start, uint64_t end, unsigned dec,
			   tf_error *err)
{
	walker *w = walker_new(fd, end);
	tf_status rc = TF_OK;

	if (!w)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	for (uint64_t pos = start; rc == TF_OK && pos < end;) {
		tile_ent te = { .start = pos, .dec = dec, .kind = TILE_CHUNKED };
		chunk_table *t;

		rc = walk_chunks(w, pos, f->size, &t, &te.stored, &te.size, err);
		if (rc != TF_OK) {
			tf_err_prefix(err, "tile %zu (at byte %llu)", f->ntiles, (unsigned long long)pos);
			break;
		}
		atomic_init(&te.chunks, t);
		if ((rc = add_tile(f, &te, err)) != TF_OK)
			free(t);
		pos += te.stored;
	}
	free(w);
	return rc;
}

/* Tiles given by the caller: checked against the file, chunks read later. */
static tf_status layout_tiles(tf_file *f, const tf_tile_layout *v, size_t n, tf_error *err)
{
	uint64_t fsize = (uint64_t)f->st.st_size;
	tf_status rc = TF_OK;

	for (size_t t = 0; t < n && rc == TF_OK; t++) {
		tile_ent te = { .start = v[t].start, .stored = v[t].stored, .size = v[t].size,
				.kind = TILE_CHUNKED };

		if (v[t].start > fsize || v[t].stored > fsize - v[t].start || v[t].stored < TF_TILE_HEADER_SIZE)
			return tf_err(err, TF_E_CORRUPT, "tile %zu: stored at %llu+%llu, beyond the file's "
				      "%llu bytes", t, (unsigned long long)v[t].start,
				      (unsigned long long)v[t].stored, (unsigned long long)fsize);
		atomic_init(&te.chunks, NULL);
		rc = add_tile(f, &te, err);
	}
	f->from_layout = true;
	return rc;
}

/* ---- folded offsets (§4.7-4.8, §5.2) ---------------------------------------------------- */

/* Decode data tile (start, stored) of the var file: its cell offsets (u64,
 * relative to the tile) land in *offsets, its data in the aux buffer. */
static tf_status decode_data_tile(const tf_file *f, tf_workspace *ws, uint64_t start,
				  uint64_t stored, tf_buf *offsets, tf_error *err)
{
	tf_buf *io = tf_workspace_buf(ws, TF_WS_IO), *data = tf_workspace_buf(ws, TF_WS_AUX);
	tf_status rc;

	io->len = data->len = offsets->len = 0;
	data->limit = 2 * TF_MAX_CHUNK_BYTES;
	if (stored > SIZE_MAX)
		return tf_err(err, TF_E_NOMEM, "data tile too large");
	if ((rc = tf_buf_reserve(io, (size_t)stored, err)) != TF_OK ||
	    (rc = read_at(f->var_fd, start, io->p, (size_t)stored, err)) != TF_OK)
		return rc;
	return tf_tile_decode(f->var.pipeline, &f->var.env, ws, tf_span_of(io->p, (size_t)stored), data,
			      offsets, NULL, err);
}

/* The data file's tiles: from the caller, or by walking it. */
static tf_status data_tiles(const tf_file_spec *spec, int fd, uint64_t fsize, tf_tile_layout **out,
			    size_t *n, tf_error *err)
{
	tf_file scratch = { .fd = fd, .st.st_size = (off_t)fsize };
	tf_status rc = TF_OK;

	*n = 0;
	if (spec->var_tiles) {
		*out = malloc((spec->nvar_tiles ? spec->nvar_tiles : 1) * sizeof(**out));
		if (!*out)
			return tf_err(err, TF_E_NOMEM, "out of memory");
		memcpy(*out, spec->var_tiles, spec->nvar_tiles * sizeof(**out));
		*n = spec->nvar_tiles;
		return TF_OK;
	}
	rc = walk_file(&scratch, fd, 0, fsize, 0, err);
	if (rc == TF_OK && (*out = malloc((scratch.ntiles ? scratch.ntiles : 1) * sizeof(**out))))
		for (size_t t = 0; t < scratch.ntiles; t++)
			(*out)[t] = (tf_tile_layout){ scratch.tiles[t].start, scratch.tiles[t].stored,
						      scratch.tiles[t].size };
	else if (rc == TF_OK)
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	*n = rc == TF_OK ? scratch.ntiles : 0;
	for (size_t t = 0; t < scratch.ntiles; t++)
		free(atomic_load(&scratch.tiles[t].chunks));
	free(scratch.tiles);
	return rc;
}

static bool has_empty_tile(const tf_file *f)
{
	for (size_t t = 0; t < f->ntiles; t++)
		if (f->tiles[t].stored == TF_TILE_HEADER_SIZE)
			return true;
	return false;
}

/* Turn each 0-chunk tile (exactly its 8-byte count) of this offsets file
 * into one rebuilt from the same tile of the data file.  Without a layout
 * its size is only known by decoding that data tile once. */
static tf_status fold_tiles(tf_file *f, const tf_tile_layout *data, size_t ndata, tf_error *err)
{
	tf_buf offsets = TF_BUF_INIT(2 * TF_MAX_CHUNK_BYTES);
	tf_workspace *ws = f->from_layout ? NULL : tf_workspace_new();
	tf_status rc = TF_OK;

	if (!f->from_layout && !ws)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	f->size = 0;
	for (size_t t = 0; t < f->ntiles && rc == TF_OK; t++) {
		tile_ent *te = &f->tiles[t];
		chunk_table *ct = atomic_load(&te->chunks);
		uint64_t moved = f->size - te->off;	/* modulo 2^64: may move back */

		te->off = f->size;
		for (size_t c = 0; ct && c < ct->n; c++)
			ct->c[c].off += moved;
		if (te->stored == TF_TILE_HEADER_SIZE) {
			if (t >= ndata) {
				rc = tf_err(err, TF_E_CORRUPT, "offsets tile %zu has no data tile to rebuild it from", t);
				break;
			}
			free(atomic_exchange(&te->chunks, NULL));
			te->kind = TILE_FOLDED;
			te->data_start = data[t].start;
			te->data_stored = data[t].stored;
			if (ws && (rc = decode_data_tile(f, ws, te->data_start, te->data_stored, &offsets, err)) != TF_OK)
				tf_err_prefix(err, "data tile %zu", t);
			if (ws)
				te->size = offsets.len;
			f->folded++;
		}
		f->size += te->size;
	}
	tf_buf_free(&offsets);
	tf_workspace_free(ws);
	return rc;
}

/* ---- opening ------------------------------------------------------------------------------ */

bool tf_var_string_applies(const tf_pipeline *p, tf_datatype type, uint32_t cell_val_num,
			   uint32_t version)
{
	const tf_filter_class *first = tf_pipeline_class(p, 0);
	bool utf8 = type == TF_DT_STRING_UTF8;

	if (cell_val_num != TF_CELL_VAR || !tf_datatype_is_var_string(type) || !first)
		return false;
	/* skip_offsets_filtering (filter_pipeline.cc): ASCII RLE from format 12,
	 * ASCII dictionary from 13, UTF-8 either from 17. */
	if (first->id == TF_F_RLE)
		return version >= (utf8 ? 17u : 12u);
	if (first->id == TF_F_DICTIONARY)
		return version >= (utf8 ? 17u : 13u);
	return false;
}

/* The pipeline as run: the field's filters, then AES when the data is
 * encrypted (§9). */
static tf_status make_decoder(decoder *d, const tf_pipeline *p, const tf_key *key, tf_error *err)
{
	if (!(d->pipeline = p ? tf_pipeline_dup(p) : tf_pipeline_new()))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	return key ? tf_pipeline_append(d->pipeline, TF_F_AES_256_GCM, err) : TF_OK;
}

static uint32_t cell_size_of(tf_datatype t, uint32_t cell_val_num)
{
	uint64_t n = cell_val_num == TF_CELL_VAR || cell_val_num == 0 ? 1 : cell_val_num;
	uint64_t sz = n * tf_datatype_size(t);

	return sz > UINT32_MAX ? UINT32_MAX : (uint32_t)sz;
}

static tf_status open_var_data(tf_file *f, const tf_file_spec *spec, tf_error *err)
{
	const tf_filter_class *first = spec->var_pipeline ? tf_pipeline_class(spec->var_pipeline, 0) : NULL;
	tf_tile_layout *data = NULL;
	struct stat sb;
	size_t ndata;
	tf_status rc;

	if (!first || (first->id != TF_F_RLE && first->id != TF_F_DICTIONARY) ||
	    !tf_datatype_is_var_string(spec->var_type))
		return tf_err(err, TF_E_INVAL, "offsets are folded only into STRING_ASCII/UTF8 data "
			      "whose first filter is rle or dictionary");
	f->var_fd = tf_open_regular(spec->var_data, &sb);
	if (f->var_fd < 0)
		return tf_err(err, TF_E_IO, "%s: %s", spec->var_data, strerror(errno));
	if ((rc = make_decoder(&f->var, spec->var_pipeline, spec->key, err)) != TF_OK)
		return rc;
	/* A 0-chunk offsets tile is the authoritative sign of the var-string
	 * layout, whatever the version rule says (FORMAT-NOTES §4.7, §10 #21). */
	f->var.env = (tf_chunk_env){ .type = spec->var_type, .cell_size = tf_datatype_size(spec->var_type),
				     .version = f->dec[0].env.version, .var_string = true, .key = spec->key };
	rc = data_tiles(spec, f->var_fd, (uint64_t)sb.st_size, &data, &ndata, err);
	if (rc != TF_OK)
		return tf_err_prefix(err, "%s", spec->var_data);
	rc = fold_tiles(f, data, ndata, err);
	free(data);
	return rc;
}

static tf_status open_tiles(tf_file *f, const tf_file_spec *spec, tf_error *err)
{
	uint32_t version = spec->version ? spec->version : 22;
	decoder *d;
	tf_status rc;

	if (!tf_datatype_valid(spec->type))
		return tf_err(err, TF_E_INVAL, "invalid datatype");
	if (!(f->dec = d = calloc(1, sizeof(*d))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	f->ndec = 1;
	if ((rc = make_decoder(d, spec->pipeline, spec->key, err)) != TF_OK)
		return rc;
	d->env = (tf_chunk_env){ .type = spec->type, .cell_size = cell_size_of(spec->type, spec->cell_val_num),
				 .version = version, .key = spec->key,
				 .var_string = spec->var_string || (spec->pipeline &&
					tf_var_string_applies(spec->pipeline, spec->type, spec->cell_val_num, version)) };
	rc = spec->tiles ? layout_tiles(f, spec->tiles, spec->ntiles, err)
			 : walk_file(f, atomic_load(&f->fd), 0, (uint64_t)f->st.st_size, 0, err);
	if (rc != TF_OK || !spec->var_data || !has_empty_tile(f))
		return rc;
	return open_var_data(f, spec, err);
}

/* Read and parse the generic tile header at pos. */
static tf_status read_generic_header(const tf_file *f, uint64_t pos, uint64_t end,
				     tf_generic_header *h, tf_error *err)
{
	uint8_t base[TF_GENERIC_BASE_SIZE], *hdr;
	uint32_t ps;
	tf_status rc;

	if (end - pos < sizeof(base))
		return tf_err(err, TF_E_CORRUPT, "truncated generic tile header");
	if ((rc = read_at(atomic_load(&f->fd), pos, base, sizeof(base), err)) != TF_OK)
		return rc;
	/* TileDB 1.3 wrote a 30-byte header (no pipeline) that TileDB 2.x
	 * cannot read either ("format 0"); say so rather than "corrupt". */
	if (pos == 0 && tf_le64(base) == end - 30 && base[16] < TF_DT_COUNT)
		return tf_err(err, TF_E_UNSUPPORTED, "a TileDB 1.3 (pre-format 1) generic tile: not "
			      "supported, as by TileDB 2.x");
	ps = tf_le32(base + 30);
	if (ps > end - pos - sizeof(base) || ps > 65536)
		return tf_err(err, TF_E_CORRUPT, "generic tile header: pipeline of %u bytes", ps);
	if (!(hdr = malloc(sizeof(base) + ps)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	memcpy(hdr, base, sizeof(base));
	rc = read_at(atomic_load(&f->fd), pos + sizeof(base), hdr + sizeof(base), ps, err);
	if (rc == TF_OK)
		rc = tf_generic_header_parse(tf_span_of(hdr, sizeof(base) + ps), h, err);
	free(hdr);
	return rc;
}

/* One generic tile at pos: a decoder of its own and one tile.  *next
 * receives where the following one starts. */
static tf_status add_generic(tf_file *f, walker *w, uint64_t pos, const tf_key *key, uint64_t *next,
			     tf_error *err)
{
	tf_generic_header h;
	tile_ent te = { .kind = TILE_CHUNKED, .dec = (unsigned)f->ndec };
	decoder *d = realloc(f->dec, (f->ndec + 1) * sizeof(*d));
	chunk_table *t;
	tf_status rc;

	if (!d)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	f->dec = d;
	if ((rc = read_generic_header(f, pos, w->end, &h, err)) != TF_OK)
		return rc;
	/* The header's pipeline carries AES itself when encrypted (§6, §9). */
	d[f->ndec++] = (decoder){ h.pipeline, { .type = h.datatype, .cell_size = (uint32_t)h.cell_size,
					       .version = h.version, .key = key } };
	te.start = pos + h.header_size;
	if (h.encryption && !key)
		return tf_err(err, TF_E_NOKEY, "generic tile is encrypted and no key was given");
	if (h.persisted_size > w->end - te.start)
		return tf_err(err, TF_E_CORRUPT, "generic tile: %llu stored bytes claimed, %llu left",
			      (unsigned long long)h.persisted_size, (unsigned long long)(w->end - te.start));
	if ((rc = walk_chunks(w, te.start, f->size, &t, &te.stored, &te.size, err)) != TF_OK)
		return rc;
	atomic_init(&te.chunks, t);
	if (te.stored != h.persisted_size || te.size != h.tile_size) {
		free(t);
		return tf_err(err, TF_E_CORRUPT, "generic tile: chunks take %llu bytes for %llu, header "
			      "says %llu for %llu", (unsigned long long)te.stored, (unsigned long long)te.size,
			      (unsigned long long)h.persisted_size, (unsigned long long)h.tile_size);
	}
	if ((rc = add_tile(f, &te, err)) != TF_OK)
		free(t);
	*next = te.start + te.stored;
	return rc;
}

/* Whether the bytes from pos to the end are a fragment metadata footer and
 * its u64 length (§8.4): what follows the generic tiles of such a file when
 * the caller could not say where they end. */
static bool footer_starts_at(const tf_file *f, uint64_t pos)
{
	uint64_t fsize = (uint64_t)f->st.st_size;
	uint8_t len[8];

	return fsize - pos >= 8 && read_at(atomic_load(&f->fd), fsize - 8, len, 8, NULL) == TF_OK &&
	       tf_le64(len) == fsize - 8 - pos;
}

static tf_status open_generic(tf_file *f, const tf_file_spec *spec, tf_error *err)
{
	uint64_t fsize = (uint64_t)f->st.st_size, end = spec->generic_end ? spec->generic_end : fsize;
	walker *w;
	tf_status rc = TF_OK;

	f->generic = true;
	if (end > fsize)
		return tf_err(err, TF_E_CORRUPT, "generic tiles end at %llu, after the file's end",
			      (unsigned long long)end);
	if (!(w = walker_new(atomic_load(&f->fd), end)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	for (uint64_t pos = 0; rc == TF_OK && pos < end;) {
		if (!spec->generic_end && pos && footer_starts_at(f, pos)) {
			end = pos;	/* a fragment metadata footer follows */
			break;
		}
		if ((rc = add_generic(f, w, pos, spec->key, &pos, err)) != TF_OK)
			tf_err_prefix(err, "generic tile %zu (at byte %llu)", f->ntiles, (unsigned long long)pos);
	}
	free(w);
	if (rc == TF_OK && end < fsize) {	/* e.g. a fragment metadata footer */
		tile_ent raw = { .start = end, .stored = fsize - end, .size = fsize - end, .kind = TILE_RAW };
		atomic_init(&raw.chunks, NULL);
		if (raw.size > TF_MAX_CHUNK_BYTES)
			return tf_err(err, TF_E_CORRUPT, "%llu bytes after the generic tiles",
				      (unsigned long long)raw.size);
		rc = add_tile(f, &raw, err);
	}
	return rc;
}

static void file_free(tf_file *f)
{
	if (f->cache)
		tf_cache_drop(f->cache, atomic_load(&f->owner));
	if (atomic_load(&f->fd) >= 0)
		close(atomic_load(&f->fd));
	if (f->var_fd >= 0)
		close(f->var_fd);
	for (size_t i = 0; i < f->ndec; i++)
		tf_pipeline_free(f->dec[i].pipeline);
	tf_pipeline_free(f->var.pipeline);
	for (size_t t = 0; t < f->ntiles; t++)
		free(atomic_load(&f->tiles[t].chunks));
	free(f->tiles);
	free(f->dec);
	free(f->name);
	free(f->path);
	free(f);
}

tf_status tf_file_open(const char *path, const char *name, const tf_file_spec *spec,
		       tf_file **out, tf_error *err)
{
	tf_file *f = calloc(1, sizeof(*f));
	tf_status rc;

	int fd;

	if (!f || !(f->name = strdup(name ? name : path)) || !(f->path = strdup(path))) {
		if (f)
			free(f->name);
		free(f);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	atomic_init(&f->refs, 1);
	f->var_fd = -1;
	f->cell_val_num = spec->cell_val_num;
	fd = tf_open_regular(path, &f->st);
	atomic_init(&f->fd, fd);
	if (fd < 0 && errno == EINVAL)
		rc = tf_err(err, TF_E_INVAL, "not a regular file");
	else if (fd < 0)
		rc = tf_err(err, TF_E_IO, "%s", strerror(errno));
	else
		rc = spec->generic ? open_generic(f, spec, err) : open_tiles(f, spec, err);
	if (rc == TF_OK && f->from_layout) {	/* nothing read yet: reopen when needed */
		close(fd);
		atomic_store(&f->fd, -1);
	}
	if (rc != TF_OK) {
		tf_err_prefix(err, "%s", f->name);
		file_free(f);
		return rc;
	}
	*out = f;
	return TF_OK;
}

tf_file *tf_file_ref(tf_file *f)
{
	atomic_fetch_add(&f->refs, 1);
	return f;
}

void tf_file_unref(tf_file *f)
{
	if (f && atomic_fetch_sub(&f->refs, 1) == 1)
		file_free(f);
}

/* ---- tiles and chunks ------------------------------------------------------------------------ */

uint64_t tf_file_size(const tf_file *f) { return f->size; }
const char *tf_file_name(const tf_file *f) { return f->name; }
size_t tf_file_ntiles(const tf_file *f) { return f->ntiles; }

void tf_file_tile_range(const tf_file *f, size_t tile, uint64_t *off, uint64_t *size)
{
	*off = f->tiles[tile].off;
	*size = f->tiles[tile].size;
}

tf_status tf_file_tile_chunks(const tf_file *f, size_t tile, size_t *nchunks, tf_error *err)
{
	const chunk_table *t = NULL;
	tf_status rc = load_tile(f, tile, &t, err);

	*nchunks = rc == TF_OK ? t->n : 0;
	return rc;
}

void tf_file_chunk_info(const tf_file *f, size_t tile, size_t c, tf_chunk_info *out)
{
	const chunk_ent *e = &atomic_load_explicit(&f->tiles[tile].chunks, memory_order_acquire)->c[c];

	*out = (tf_chunk_info){ e->off, e->size, e->src_off, e->src_len };
}

/* Rebuild a folded offsets tile: the data tile's cell offsets, straight into dst. */
static tf_status decode_folded(const tf_file *f, tf_workspace *ws, const chunk_ent *e, uint8_t *dst,
			       tf_error *err)
{
	tf_buf offsets;
	tf_status rc;

	tf_buf_wrap(&offsets, dst, e->size);
	rc = decode_data_tile(f, ws, e->src_off, e->src_len, &offsets, err);
	if (rc == TF_OK && offsets.len != e->size)
		rc = tf_err(err, TF_E_CORRUPT, "data tile holds %zu cells, the offsets tile %u",
			    offsets.len / 8, e->size / 8);
	return rc == TF_OK ? rc : tf_err_prefix(err, "rebuilding offsets from the data tile");
}

static tf_status decode_entry(const tf_file *f, tf_workspace *ws, const tile_ent *te,
			      const chunk_ent *e, uint8_t *dst, tf_error *err)
{
	tf_buf *io = tf_workspace_buf(ws, TF_WS_IO);
	const decoder *d = &f->dec[te->dec];
	tf_status rc;
	int fd;

	switch (te->kind) {
	case TILE_FOLDED:
		return decode_folded(f, ws, e, dst, err);
	case TILE_RAW:
	case TILE_CHUNKED:
		break;
	}
	if ((fd = file_fd(f, err)) < 0)
		return err ? err->code : TF_E_IO;
	if (te->kind == TILE_RAW)
		return read_at(fd, e->src_off, dst, e->size, err);
	if (e->src_len > SIZE_MAX)
		return tf_err(err, TF_E_NOMEM, "chunk too large");
	if ((rc = tf_buf_reserve(io, (size_t)e->src_len, err)) != TF_OK ||
	    (rc = read_at(fd, e->src_off, io->p, (size_t)e->src_len, err)) != TF_OK)
		return rc;
	return tf_chunk_decode(d->pipeline, &d->env, ws, tf_span_of(io->p, (size_t)e->src_len), dst,
			       NULL, err);
}

tf_status tf_file_decode(const tf_file *f, tf_workspace *ws, size_t tile, size_t c, uint8_t *dst,
			 tf_error *err)
{
	const tile_ent *te = &f->tiles[tile];
	const chunk_table *t = atomic_load_explicit(&te->chunks, memory_order_acquire);
	tf_status rc;

	if (!t || c >= t->n)
		return tf_err(err, TF_E_INVAL, "%s: tile %zu, chunk %zu: not loaded", f->name, tile, c);
	rc = decode_entry(f, ws, te, &t->c[c], dst, err);
	if (rc != TF_OK)
		tf_err_prefix(err, "%s: tile %zu, chunk %zu", f->name, tile, c);
	return rc;
}

/* ---- facts --------------------------------------------------------------------------------- */

void tf_file_get_info(const tf_file *f, tf_file_info *info)
{
	memset(info, 0, sizeof(*info));
	info->tiles = f->ntiles;
	for (size_t t = 0; t < f->ntiles; t++) {
		const chunk_table *ct = atomic_load(&f->tiles[t].chunks);
		info->chunks += ct ? ct->n : 0;
	}
	info->stored_bytes = (uint64_t)f->st.st_size;
	info->decoded_bytes = f->size;
	info->folded_tiles = f->folded;
	info->type = f->dec ? f->dec[0].env.type : TF_DT_CHAR;
	info->cell_val_num = f->generic ? 1 : f->cell_val_num;
	info->version = f->dec ? f->dec[0].env.version : 0;
	info->generic = f->generic;
	info->encrypted = f->dec && tf_pipeline_has(f->dec[0].pipeline, TF_F_AES_256_GCM);
	info->var_string = f->dec && f->dec[0].env.var_string;
	info->from_layout = f->from_layout;
}

char *tf_file_pipeline_text(const tf_file *f)
{
	return f->ndec ? tf_pipeline_text(f->dec[0].pipeline) : strdup("");
}

char *tf_file_filter_attr(const tf_file *f)
{
	return f->ndec ? tf_pipeline_filter_attr(f->dec[0].pipeline) : strdup("");
}

char *tf_file_codecs_json(const tf_file *f)
{
	return f->ndec ? tf_pipeline_codecs_json(f->dec[0].pipeline, f->dec[0].env.type) : strdup("[]");
}

size_t tf_file_index_bytes(const tf_file *f)
{
	size_t n = sizeof(*f) + f->tcap * sizeof(tile_ent);

	for (size_t t = 0; t < f->ntiles; t++) {
		const chunk_table *ct = atomic_load(&f->tiles[t].chunks);
		n += ct ? sizeof(*ct) + ct->n * sizeof(chunk_ent) : 0;
	}
	return n;
}

bool tf_file_is_current(const tf_file *f, const struct stat *now)
{
	return tf_same_source(now, &f->st);
}

/* ---- reading through the cache --------------------------------------------------------------- */

#define AHEAD_MAX_BYTES ((uint64_t)8 << 20)
/* Cache entries are keyed by tile and chunk within the tile. */
#define CHUNK_KEY(tile, c) ((uint64_t)(tile) << 32 | (uint64_t)(c))

static tf_status load_chunk(void *ctx, uint64_t key, uint8_t *dst, tf_workspace *ws, tf_error *err)
{
	return tf_file_decode(ctx, ws, (size_t)(key >> 32), (size_t)(key & 0xffffffffu), dst, err);
}

static void hold_file(void *ctx) { tf_file_ref(ctx); }
static void release_file(void *ctx) { tf_file_unref(ctx); }

static uint64_t owner_in(tf_file *f, tf_cache *c)
{
	uint64_t id = atomic_load(&f->owner), fresh;

	if (id)
		return id;
	/* First read through a cache: take an id; a racing reader's id wins. */
	fresh = tf_cache_owner(c);
	if (atomic_compare_exchange_strong(&f->owner, &id, fresh)) {
		f->cache = c;
		return fresh;
	}
	return id;
}

/* The last tile starting at or before off; empty tiles share their start
 * with the next one, so this skips them.  Same for chunks in a tile. */
static size_t tile_at(const tf_file *f, uint64_t off)
{
	size_t lo = 0, hi = f->ntiles;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		*(f->tiles[mid].off <= off ? &lo : &hi) = mid;
	}
	return lo;
}

static size_t chunk_at(const chunk_table *t, uint64_t off)
{
	size_t lo = 0, hi = t->n;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		*(t->c[mid].off <= off ? &lo : &hi) = mid;
	}
	return lo;
}

typedef tf_status (*chunk_visit)(tf_file *f, size_t tile, size_t c, const chunk_ent *e, void *arg,
				 tf_error *err);

/* Call visit for every non-empty chunk overlapping [from, to), in order,
 * loading tile chunk lists as needed. */
static tf_status each_chunk(tf_file *f, uint64_t from, uint64_t to, chunk_visit visit, void *arg,
			    tf_error *err)
{
	tf_status rc = TF_OK;

	if (from >= to || !f->ntiles)
		return TF_OK;
	for (size_t t = tile_at(f, from); rc == TF_OK && t < f->ntiles && f->tiles[t].off < to; t++) {
		const tile_ent *te = &f->tiles[t];
		const chunk_table *ct = NULL;

		if (!te->size || te->off + te->size <= from)
			continue;
		if ((rc = load_tile(f, t, &ct, err)) != TF_OK)
			break;
		for (size_t c = chunk_at(ct, from); rc == TF_OK && c < ct->n && ct->c[c].off < to; c++)
			if (ct->c[c].size && ct->c[c].off + ct->c[c].size > from)
				rc = visit(f, t, c, &ct->c[c], arg, err);
	}
	return rc;
}

typedef struct read_job {
	tf_cache *cache;
	tf_workspace *ws;
	const tf_cache_source *src;
	uint64_t owner, pos, end;
	uint8_t *dst;		/* where pos goes */
	bool drop_behind;	/* chunks this read takes whole go first */
} read_job;

static tf_status copy_chunk(tf_file *f, size_t tile, size_t c, const chunk_ent *e, void *arg,
			    tf_error *err)
{
	read_job *j = arg;
	uint64_t from = j->pos - e->off, n = e->size - from;
	tf_cache_entry *ce;
	tf_status rc;

	(void)f;
	if (j->pos < e->off || from >= e->size)	/* an index that does not add up */
		return tf_err(err, TF_E_CORRUPT, "tile %zu, chunk %zu: index inconsistent at %llu", tile, c,
			      (unsigned long long)j->pos);
	if (n > j->end - j->pos)
		n = j->end - j->pos;
	rc = tf_cache_get(j->cache, j->owner, CHUNK_KEY(tile, c), e->size, j->src, j->ws, &ce, err);
	if (rc != TF_OK)
		return rc;
	memcpy(j->dst, tf_cache_data(ce) + from, (size_t)n);
	/* A read that took the whole chunk left it in the kernel's page cache:
	 * ours goes first when room is needed (scan resistance). */
	if (n == e->size && j->drop_behind)
		tf_cache_release_done(j->cache, ce);
	else
		tf_cache_release(j->cache, ce);
	j->dst += n;
	j->pos += n;
	return TF_OK;
}

static tf_status queue_chunk(tf_file *f, size_t tile, size_t c, const chunk_ent *e, void *arg,
			     tf_error *err)
{
	read_job *j = arg;

	(void)f, (void)err;
	tf_cache_prefetch(j->cache, j->owner, CHUNK_KEY(tile, c), e->size, j->src);
	j->pos = e->off + e->size;
	return TF_OK;
}

/* A sequential reader now at j->pos: keep the workers busy on the chunks it
 * will want next, within a window small against the cache budget so that
 * prefetched chunks are not evicted unread. */
static void decode_ahead(tf_file *f, tf_read_state *rs, read_job j)
{
	tf_cache_stats st;
	uint64_t window, from;
	tf_error ignored;

	if (!rs || !tf_cache_workers(j.cache) || j.pos != atomic_load(&rs->next))
		return;
	tf_cache_get_stats(j.cache, &st);
	window = st.budget / 4 < AHEAD_MAX_BYTES ? st.budget / 4 : AHEAD_MAX_BYTES;
	from = atomic_load(&rs->ahead);
	j.pos = from > j.pos ? from : j.pos;
	from = j.pos;
	if (each_chunk(f, from, j.end + window < f->size ? j.end + window : f->size, queue_chunk, &j,
		       &ignored) == TF_OK && j.pos > atomic_load(&rs->ahead))
		atomic_store(&rs->ahead, j.pos);
}

tf_status tf_file_read(tf_file *f, tf_cache *c, tf_workspace *ws, tf_read_state *rs, uint64_t off,
		       size_t len, uint8_t *dst, size_t *got, tf_error *err)
{
	const tf_cache_source src = { f, load_chunk, hold_file, release_file };
	read_job j = { c, ws, &src, owner_in(f, c), off, 0, dst, rs != NULL };
	tf_status rc;

	*got = 0;
	if (off >= f->size || len == 0)
		return TF_OK;
	j.end = len < f->size - off ? off + len : f->size;
	decode_ahead(f, rs, j);
	rc = each_chunk(f, off, j.end, copy_chunk, &j, err);
	if (rs)
		atomic_store(&rs->next, j.pos);
	*got = (size_t)(j.pos - off);
	return rc;
}
