/*
 * tf_file.c - chunk index of one source file and decoding of its chunks.
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

#define WALK_BUF (64 * 1024)
#define CHUNK_FOLDED 1u		/* offsets rebuilt from a data tile */

typedef struct chunk_ent {
	uint64_t dec_off;	/* start in the decoded file */
	uint64_t src_off;	/* stored chunk, or the data tile it is folded into */
	uint64_t src_len;
	uint32_t orig_len;
	uint32_t tile;
	uint32_t index;		/* chunk number within its tile */
	uint32_t flags;
} chunk_ent;

typedef struct tile_ent {
	uint64_t start, stored;	/* where the tile (its u64 count) is, and its size */
	size_t first;		/* its first entry in the chunk table */
	uint64_t nchunks;
} tile_ent;

typedef struct chunk_index {
	chunk_ent *chunks;
	size_t n, cap;
	tile_ent *tiles;
	size_t ntiles, tcap;
	uint64_t size;		/* decoded bytes */
} chunk_index;

struct tf_file {
	atomic_int refs;
	char *name;
	int fd, var_fd;
	struct stat st;
	tf_pipeline *pipeline;	/* effective: AES appended when keyed */
	tf_pipeline *var_pipeline;
	tf_chunk_env env, var_env;
	chunk_index idx;
	chunk_index var_idx;		/* tiles of the data file, when folding */
	uint64_t folded;
	bool generic;
	uint32_t cell_val_num;
	tf_cache *cache;	/* bound on first read through a cache */
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

typedef struct walker {
	int fd;
	uint64_t end;		/* readable bytes end here */
	uint64_t at;		/* file offset of buf[0] */
	size_t len;
	uint8_t buf[WALK_BUF];
} walker;

/* Read n (<= WALK_BUF) bytes at off through a window, refilling on a miss:
 * the walk visits headers in order, often several per window. */
static tf_status walk_read(walker *w, uint64_t off, void *dst, size_t n, tf_error *err)
{
	if (off > w->end || n > w->end - off)
		return tf_err(err, TF_E_CORRUPT, "header at %llu runs past the end of the file",
			      (unsigned long long)off);
	if (off < w->at || off + n > w->at + w->len) {
		size_t want = w->end - off < WALK_BUF ? (size_t)(w->end - off) : WALK_BUF;
		tf_status rc = read_at(w->fd, off, w->buf, want, err);
		if (rc != TF_OK)
			return rc;
		w->at = off;
		w->len = want;
	}
	memcpy(dst, w->buf + (off - w->at), n);
	return TF_OK;
}

/* ---- building an index --------------------------------------------------------------- */

static void index_free(chunk_index *x)
{
	free(x->chunks);
	free(x->tiles);
	memset(x, 0, sizeof(*x));
}

static tf_status grow(void **v, size_t *cap, size_t n, size_t elem, tf_error *err)
{
	size_t ncap;
	void *p;

	if (n < *cap)
		return TF_OK;
	ncap = *cap ? *cap * 2 : 64;
	p = realloc(*v, tf_size_mul(ncap, elem));
	if (!p)
		return tf_err(err, TF_E_NOMEM, "cannot grow the chunk index to %zu entries", ncap);
	*v = p;
	*cap = ncap;
	return TF_OK;
}

static tf_status add_chunk(chunk_index *x, const chunk_ent *c, tf_error *err)
{
	tf_status rc = grow((void **)&x->chunks, &x->cap, x->n, sizeof(*c), err);

	if (rc != TF_OK)
		return rc;
	x->chunks[x->n] = *c;
	x->chunks[x->n].dec_off = x->size;
	x->size += c->orig_len;
	x->n++;
	return TF_OK;
}

/* Record the chunks of the tile at *pos and move *pos past it. */
static tf_status walk_tile(walker *w, chunk_index *x, uint64_t *pos, tf_error *err)
{
	tile_ent t = { .start = *pos, .first = x->n };
	uint8_t raw[TF_CHUNK_HEADER_SIZE];
	uint64_t p = *pos + TF_TILE_HEADER_SIZE;
	tf_status rc;

	if ((rc = walk_read(w, *pos, raw, TF_TILE_HEADER_SIZE, err)) != TF_OK)
		return rc;
	t.nchunks = tf_le64(raw);
	if (t.nchunks > (w->end - p) / TF_CHUNK_HEADER_SIZE)
		return tf_err(err, TF_E_CORRUPT, "claims %llu chunks in %llu bytes",
			      (unsigned long long)t.nchunks, (unsigned long long)(w->end - p));
	for (uint64_t c = 0; c < t.nchunks; c++) {
		chunk_ent e = { .src_off = p, .tile = (uint32_t)x->ntiles, .index = (uint32_t)c };
		tf_chunk_header h;

		if ((rc = walk_read(w, p, raw, sizeof(raw), err)) != TF_OK)
			return tf_err_prefix(err, "chunk %llu", (unsigned long long)c);
		tf_chunk_header_read(raw, &h);
		e.src_len = tf_chunk_stored_size(&h);
		e.orig_len = h.orig_len;
		if (e.src_len > w->end - p)
			return tf_err(err, TF_E_CORRUPT, "chunk %llu: %llu stored bytes run past the end "
				      "of the file", (unsigned long long)c, (unsigned long long)e.src_len);
		if ((rc = add_chunk(x, &e, err)) != TF_OK)
			return rc;
		p += e.src_len;
	}
	t.stored = p - *pos;
	if ((rc = grow((void **)&x->tiles, &x->tcap, x->ntiles, sizeof(t), err)) != TF_OK)
		return rc;
	x->tiles[x->ntiles++] = t;
	*pos = p;
	return TF_OK;
}

/* Walk every tile in [start, end) of fd. */
static tf_status walk_tiles(int fd, uint64_t start, uint64_t end, chunk_index *x, tf_error *err)
{
	walker *w = malloc(sizeof(*w));
	uint64_t pos = start;
	tf_status rc = TF_OK;

	if (!w)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	w->fd = fd;
	w->end = end;
	w->at = w->len = 0;
	while (rc == TF_OK && pos < end)
		if ((rc = walk_tile(w, x, &pos, err)) != TF_OK)
			tf_err_prefix(err, "tile %zu (at byte %llu)", x->ntiles, (unsigned long long)pos);
	free(w);
	return rc;
}

/* ---- folded offsets (§4.7-4.8, §5.2) ------------------------------------------------------ */

/* Decode the var data tile t; its cell offsets (u64, relative to the tile)
 * land in *offsets, its data in the workspace's aux buffer. */
static tf_status decode_data_tile(const tf_file *f, tf_workspace *ws, const chunk_ent *c,
				  tf_buf *offsets, tf_error *err)
{
	tf_buf *io = tf_workspace_buf(ws, TF_WS_IO), *data = tf_workspace_buf(ws, TF_WS_AUX);
	tf_status rc;

	io->len = data->len = offsets->len = 0;
	io->limit = SIZE_MAX;
	data->limit = 2 * TF_MAX_CHUNK_BYTES;
	if (c->src_len > SIZE_MAX)
		return tf_err(err, TF_E_NOMEM, "data tile too large");
	if ((rc = tf_buf_reserve(io, (size_t)c->src_len, err)) != TF_OK ||
	    (rc = read_at(f->var_fd, c->src_off, io->p, (size_t)c->src_len, err)) != TF_OK)
		return rc;
	rc = tf_tile_decode(f->var_pipeline, &f->var_env, ws, tf_span_of(io->p, (size_t)c->src_len),
			    data, offsets, NULL, err);
	return rc == TF_OK ? rc : tf_err_prefix(err, "data tile %u", c->tile);
}

/* Replace each 0-chunk tile of the offsets index by one folded entry that
 * rebuilds it from the same tile of the data file. */
static tf_status fold_offsets(tf_file *f, tf_workspace *ws, tf_error *err)
{
	chunk_index raw = f->idx, out = { 0 };
	tf_buf offsets = TF_BUF_INIT(2 * TF_MAX_CHUNK_BYTES);
	tf_status rc = TF_OK;

	for (size_t t = 0; t < raw.ntiles && rc == TF_OK; t++) {
		const tile_ent *te = &raw.tiles[t];
		chunk_ent e = { .tile = (uint32_t)t, .flags = CHUNK_FOLDED };

		if ((rc = grow((void **)&out.tiles, &out.tcap, out.ntiles, sizeof(*te), err)) != TF_OK)
			break;
		out.tiles[out.ntiles] = *te;
		out.tiles[out.ntiles++].first = out.n;
		for (uint64_t c = 0; c < te->nchunks && rc == TF_OK; c++)
			rc = add_chunk(&out, &raw.chunks[te->first + c], err);
		if (te->nchunks || rc != TF_OK)
			continue;
		if (t >= f->var_idx.ntiles) {
			rc = tf_err(err, TF_E_CORRUPT, "offsets tile %zu has no data tile to rebuild it from", t);
			break;
		}
		e.src_off = f->var_idx.tiles[t].start;
		e.src_len = f->var_idx.tiles[t].stored;
		if ((rc = decode_data_tile(f, ws, &e, &offsets, err)) != TF_OK)
			break;
		e.orig_len = (uint32_t)offsets.len;
		f->folded++;
		rc = add_chunk(&out, &e, err);
	}
	tf_buf_free(&offsets);
	if (rc != TF_OK) {
		index_free(&out);
		return rc;
	}
	index_free(&f->idx);
	f->idx = out;
	return TF_OK;
}

/* ---- opening -------------------------------------------------------------------------------- */

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

/* The pipeline as run: the field's filters, then AES when the data is encrypted (§9). */
static tf_status effective_pipeline(const tf_pipeline *p, const tf_key *key, tf_pipeline **out,
				    tf_error *err)
{
	tf_pipeline *q = p ? tf_pipeline_dup(p) : tf_pipeline_new();
	tf_status rc;

	if (!q)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if (key && (rc = tf_pipeline_append(q, TF_F_AES_256_GCM, err)) != TF_OK) {
		tf_pipeline_free(q);
		return rc;
	}
	*out = q;
	return TF_OK;
}

static tf_status open_generic(tf_file *f, const tf_file_spec *spec, tf_error *err)
{
	uint8_t base[TF_GENERIC_BASE_SIZE];
	tf_generic_header h;
	uint64_t fsize = (uint64_t)f->st.st_size, end;
	uint8_t *hdr;
	uint32_t ps;
	tf_status rc;

	if ((rc = read_at(f->fd, 0, base, sizeof(base), err)) != TF_OK)
		return tf_err_prefix(err, "generic tile header");
	ps = tf_le32(base + 30);
	if (ps > fsize - sizeof(base) || ps > 65536)
		return tf_err(err, TF_E_CORRUPT, "generic tile header: pipeline of %u bytes", ps);
	if (!(hdr = malloc(sizeof(base) + ps)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	memcpy(hdr, base, sizeof(base));
	rc = read_at(f->fd, sizeof(base), hdr + sizeof(base), ps, err);
	if (rc == TF_OK)
		rc = tf_generic_header_parse(tf_span_of(hdr, sizeof(base) + ps), &h, err);
	free(hdr);
	if (rc != TF_OK)
		return rc;
	f->pipeline = h.pipeline;	/* carries AES itself when encrypted */
	f->env = (tf_chunk_env){ .type = h.datatype, .cell_size = (uint32_t)h.cell_size,
				 .version = h.version, .key = spec->key };
	f->generic = true;
	end = h.header_size + h.persisted_size;
	if (h.persisted_size > fsize - h.header_size)
		return tf_err(err, TF_E_CORRUPT, "generic tile: %llu stored bytes claimed, file has %llu",
			      (unsigned long long)h.persisted_size, (unsigned long long)(fsize - h.header_size));
	if (h.encryption && !spec->key)
		return tf_err(err, TF_E_NOKEY, "generic tile is encrypted and no key was given");
	if ((rc = walk_tiles(f->fd, h.header_size, end, &f->idx, err)) != TF_OK)
		return rc;
	if (f->idx.size != h.tile_size)
		return tf_err(err, TF_E_CORRUPT, "generic tile: chunks hold %llu bytes, header says %llu",
			      (unsigned long long)f->idx.size, (unsigned long long)h.tile_size);
	return TF_OK;
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
	struct stat sb;
	tf_status rc;

	if (!first || (first->id != TF_F_RLE && first->id != TF_F_DICTIONARY) ||
	    !tf_datatype_is_var_string(spec->var_type))
		return tf_err(err, TF_E_INVAL, "offsets are folded only into STRING_ASCII/UTF8 data "
			      "whose first filter is rle or dictionary");
	f->var_fd = open(spec->var_data, O_RDONLY | O_CLOEXEC);
	if (f->var_fd < 0 || fstat(f->var_fd, &sb) != 0)
		return tf_err(err, TF_E_IO, "%s: %s", spec->var_data, strerror(errno));
	if ((rc = effective_pipeline(spec->var_pipeline, spec->key, &f->var_pipeline, err)) != TF_OK)
		return rc;
	/* A 0-chunk offsets tile is the authoritative sign of the var-string
	 * layout, whatever the version rule says (FORMAT-NOTES §4.7, §10 #21). */
	f->var_env = (tf_chunk_env){ .type = spec->var_type, .cell_size = tf_datatype_size(spec->var_type),
				     .version = f->env.version, .var_string = true, .key = spec->key };
	rc = walk_tiles(f->var_fd, 0, (uint64_t)sb.st_size, &f->var_idx, err);
	return rc == TF_OK ? rc : tf_err_prefix(err, "%s", spec->var_data);
}

static bool has_empty_tile(const chunk_index *x)
{
	for (size_t t = 0; t < x->ntiles; t++)
		if (x->tiles[t].nchunks == 0)
			return true;
	return false;
}

static tf_status open_tiles(tf_file *f, const tf_file_spec *spec, tf_error *err)
{
	uint32_t version = spec->version ? spec->version : 22;
	tf_workspace *ws;
	tf_status rc;

	if (!tf_datatype_valid(spec->type))
		return tf_err(err, TF_E_INVAL, "invalid datatype");
	if ((rc = effective_pipeline(spec->pipeline, spec->key, &f->pipeline, err)) != TF_OK)
		return rc;
	f->env = (tf_chunk_env){ .type = spec->type, .cell_size = cell_size_of(spec->type, spec->cell_val_num),
				 .version = version, .key = spec->key,
				 .var_string = spec->pipeline && tf_var_string_applies(spec->pipeline,
					spec->type, spec->cell_val_num, version) };
	if ((rc = walk_tiles(f->fd, 0, (uint64_t)f->st.st_size, &f->idx, err)) != TF_OK)
		return rc;
	if (!spec->var_data || !has_empty_tile(&f->idx))
		return TF_OK;
	if ((rc = open_var_data(f, spec, err)) != TF_OK)
		return rc;
	if (!(ws = tf_workspace_new()))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	rc = fold_offsets(f, ws, err);
	tf_workspace_free(ws);
	return rc;
}

static void file_free(tf_file *f)
{
	if (f->cache)
		tf_cache_drop(f->cache, atomic_load(&f->owner));
	if (f->fd >= 0)
		close(f->fd);
	if (f->var_fd >= 0)
		close(f->var_fd);
	tf_pipeline_free(f->pipeline);
	tf_pipeline_free(f->var_pipeline);
	index_free(&f->idx);
	index_free(&f->var_idx);
	free(f->name);
	free(f);
}

tf_status tf_file_open(const char *path, const char *name, const tf_file_spec *spec,
		       tf_file **out, tf_error *err)
{
	tf_file *f = calloc(1, sizeof(*f));
	tf_status rc;

	if (!f || !(f->name = strdup(name ? name : path))) {
		free(f);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	atomic_init(&f->refs, 1);
	f->var_fd = -1;
	f->cell_val_num = spec->cell_val_num;
	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (f->fd < 0 || fstat(f->fd, &f->st) != 0)
		rc = tf_err(err, TF_E_IO, "%s", strerror(errno));
	else if (!S_ISREG(f->st.st_mode))
		rc = tf_err(err, TF_E_INVAL, "not a regular file");
	else
		rc = spec->generic ? open_generic(f, spec, err) : open_tiles(f, spec, err);
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

/* ---- reading ------------------------------------------------------------------------------ */

uint64_t tf_file_size(const tf_file *f) { return f->idx.size; }
size_t tf_file_nchunks(const tf_file *f) { return f->idx.n; }
const char *tf_file_name(const tf_file *f) { return f->name; }

size_t tf_file_index_bytes(const tf_file *f)
{
	return sizeof(*f) + f->idx.cap * sizeof(chunk_ent) + f->idx.tcap * sizeof(tile_ent) +
	       f->var_idx.cap * sizeof(chunk_ent) + f->var_idx.tcap * sizeof(tile_ent);
}

size_t tf_file_chunk_at(const tf_file *f, uint64_t off)
{
	size_t lo = 0, hi = f->idx.n;

	/* The last chunk starting at or before off; empty chunks share their
	 * start with the next chunk, so this skips them. */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (f->idx.chunks[mid].dec_off <= off)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

void tf_file_chunk_range(const tf_file *f, size_t i, uint64_t *off, uint32_t *len)
{
	*off = f->idx.chunks[i].dec_off;
	*len = f->idx.chunks[i].orig_len;
}

void tf_file_chunk_where(const tf_file *f, size_t i, uint32_t *tile, uint32_t *chunk,
			 uint64_t *src_off, uint64_t *src_len)
{
	const chunk_ent *c = &f->idx.chunks[i];

	*tile = c->tile;
	*chunk = c->index;
	*src_off = c->src_off;
	*src_len = c->src_len;
}

static tf_status decode_folded(const tf_file *f, tf_workspace *ws, const chunk_ent *c,
			       uint8_t *dst, tf_error *err)
{
	tf_buf offsets;
	tf_status rc;

	/* The offsets are written straight into dst: exactly orig_len bytes. */
	tf_buf_wrap(&offsets, dst, c->orig_len);
	rc = decode_data_tile(f, ws, c, &offsets, err);
	if (rc == TF_OK && offsets.len != c->orig_len)
		rc = tf_err(err, TF_E_STALE, "data tile now holds %zu cells, not %u", offsets.len / 8,
			    c->orig_len / 8);
	return rc;
}

tf_status tf_file_decode_chunk(const tf_file *f, tf_workspace *ws, size_t i, uint8_t *dst,
			       tf_error *err)
{
	const chunk_ent *c = &f->idx.chunks[i];
	tf_buf *io = tf_workspace_buf(ws, TF_WS_IO);
	tf_status rc;

	if (c->flags & CHUNK_FOLDED) {
		rc = decode_folded(f, ws, c, dst, err);
	} else if ((rc = tf_buf_reserve(io, (size_t)c->src_len, err)) == TF_OK &&
		   (rc = read_at(f->fd, c->src_off, io->p, (size_t)c->src_len, err)) == TF_OK) {
		rc = tf_chunk_decode(f->pipeline, &f->env, ws, tf_span_of(io->p, (size_t)c->src_len),
				     dst, NULL, err);
	}
	if (rc != TF_OK)
		tf_err_prefix(err, "%s: tile %u, chunk %u", f->name, c->tile, c->index);
	return rc;
}

void tf_file_get_info(const tf_file *f, tf_file_info *info)
{
	memset(info, 0, sizeof(*info));
	info->tiles = f->idx.ntiles;
	info->chunks = f->idx.n;
	info->stored_bytes = (uint64_t)f->st.st_size;
	info->decoded_bytes = f->idx.size;
	info->folded_tiles = f->folded;
	info->type = f->env.type;
	info->cell_val_num = f->generic ? 1 : f->cell_val_num;
	info->version = f->env.version;
	info->generic = f->generic;
	info->encrypted = tf_pipeline_has(f->pipeline, TF_F_AES_256_GCM);
	info->var_string = f->env.var_string;
}

char *tf_file_pipeline_text(const tf_file *f)
{
	return tf_pipeline_text(f->pipeline);
}

bool tf_file_is_current(const tf_file *f, const struct stat *now)
{
	return now->st_dev == f->st.st_dev && now->st_ino == f->st.st_ino &&
	       now->st_size == f->st.st_size && now->st_mtim.tv_sec == f->st.st_mtim.tv_sec &&
	       now->st_mtim.tv_nsec == f->st.st_mtim.tv_nsec;
}

/* ---- reading through the cache ------------------------------------------------------------------ */

#define AHEAD_MAX_BYTES ((uint64_t)16 << 20)

static tf_status load_chunk(void *ctx, uint64_t index, uint8_t *dst, tf_workspace *ws, tf_error *err)
{
	return tf_file_decode_chunk(ctx, ws, (size_t)index, dst, err);
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

/* Queue decode-ahead for a sequential reader now at `off`: keep the
 * workers busy on the chunks it will want next, within a window small
 * against the cache budget so prefetched chunks are not evicted unread. */
static void decode_ahead(tf_file *f, tf_cache *c, tf_read_state *rs, uint64_t off, uint64_t owner,
			 const tf_cache_source *src)
{
	tf_cache_stats st;
	uint64_t window, from, to;

	if (!rs || !tf_cache_workers(c) || off != atomic_load(&rs->next))
		return;
	tf_cache_get_stats(c, &st);
	window = st.budget / 4 < AHEAD_MAX_BYTES ? st.budget / 4 : AHEAD_MAX_BYTES;
	from = atomic_load(&rs->ahead);
	if (from < off)
		from = off;
	to = off + window < f->idx.size ? off + window : f->idx.size;
	for (size_t i = tf_file_chunk_at(f, from); from < to && i < f->idx.n; i++) {
		const chunk_ent *ce = &f->idx.chunks[i];

		if (ce->dec_off >= to)
			break;
		if (ce->dec_off + ce->orig_len > from && ce->orig_len)
			tf_cache_prefetch(c, owner, i, ce->orig_len, src);
		from = ce->dec_off + ce->orig_len;
	}
	if (from > atomic_load(&rs->ahead))
		atomic_store(&rs->ahead, from);
}

tf_status tf_file_read(tf_file *f, tf_cache *c, tf_workspace *ws, tf_read_state *rs, uint64_t off,
		       size_t len, uint8_t *dst, size_t *got, tf_error *err)
{
	const tf_cache_source src = { f, load_chunk, hold_file, release_file };
	uint64_t owner = owner_in(f, c), end, pos = off;
	tf_status rc = TF_OK;

	*got = 0;
	if (off >= f->idx.size || len == 0)
		return TF_OK;
	end = len < f->idx.size - off ? off + len : f->idx.size;
	decode_ahead(f, c, rs, off, owner, &src);
	for (size_t i = tf_file_chunk_at(f, off); pos < end && i < f->idx.n; i++) {
		const chunk_ent *ce = &f->idx.chunks[i];
		uint64_t from = pos - ce->dec_off, n = ce->orig_len - from;
		tf_cache_entry *e;

		if (ce->orig_len == 0 || pos >= ce->dec_off + ce->orig_len)
			continue;
		if (n > end - pos)
			n = end - pos;
		if ((rc = tf_cache_get(c, owner, i, ce->orig_len, &src, ws, &e, err)) != TF_OK)
			break;
		memcpy(dst + (pos - off), tf_cache_data(e) + from, (size_t)n);
		tf_cache_release(c, e);
		pos += n;
	}
	if (rs)
		atomic_store(&rs->next, pos);
	*got = (size_t)(pos - off);
	return rc;
}
