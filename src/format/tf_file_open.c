/*
 * tf_file_open.c - opening a stored file as its decoded bytes: its tile
 * list from the caller's layout, the index store, a walk or its generic
 * tile headers, the decoders its tiles need, and offsets tiles folded into
 * the var data (rebuilt from the data file's tiles).  The parts it is made
 * from (walking, unit tables, decoding) are tf_file.c's; the store's entry
 * is tf_file_index.c's.
 */
#include "format/tf_file_int.h"

#include <stdlib.h>
#include <string.h>

#include "cache/tf_index.h"

/* ---- layouts ------------------------------------------------------------------------------ */

/* A tile the caller gives must lie inside the file (of fsize bytes). */
static tf_status check_stored(const tf_tile_layout *v, size_t t, uint64_t fsize, tf_error *err)
{
	if (v[t].start > fsize || v[t].stored > fsize - v[t].start || v[t].stored < TF_TILE_HEADER_SIZE)
		return tf_err(err, TF_E_CORRUPT, "tile %zu: stored at %llu+%llu, beyond the file's "
			      "%llu bytes", t, (unsigned long long)v[t].start,
			      (unsigned long long)v[t].stored, (unsigned long long)fsize);
	return TF_OK;
}

/* Tiles given by the caller: checked against the file, units read later. */
static tf_status layout_tiles(tf_file *f, const tf_tile_layout *v, size_t n, tf_error *err)
{
	uint64_t fsize = f->ver.size;
	tf_status rc = TF_OK;

	for (size_t t = 0; t < n && rc == TF_OK; t++) {
		tile_ent te = { .start = v[t].start, .stored = v[t].stored, .size = v[t].size,
				.kind = TILE_CHUNKED };

		if ((rc = check_stored(v, t, fsize, err)) != TF_OK)
			return rc;
		atomic_init(&te.units, NULL);
		rc = tf_file_add_tile(f, &te, err);
	}
	f->from_layout = true;
	return rc;
}

/* ---- folded offsets (§4.7-4.8, §5.2) ---------------------------------------------------- */

/* The data file's tiles (fsize bytes stored): from the caller, or by
 * walking var. */
static tf_status data_tiles(const tf_file_spec *spec, tf_object *var, uint64_t fsize, tf_tile_layout **out,
			    size_t *n, tf_error *err)
{
	tf_file scratch = { 0 };
	tf_status rc = TF_OK;

	*n = 0;
	if (spec->var_tiles) {
		/* From fragment metadata, and each read whole when an offsets
		 * tile is rebuilt from it: a size that lies would be allocated. */
		for (size_t t = 0; t < spec->nvar_tiles; t++)
			if ((rc = check_stored(spec->var_tiles, t, fsize, err)) != TF_OK)
				return rc;
		*out = malloc((spec->nvar_tiles ? spec->nvar_tiles : 1) * sizeof(**out));
		if (!*out)
			return tf_err(err, TF_E_NOMEM, "out of memory");
		memcpy(*out, spec->var_tiles, spec->nvar_tiles * sizeof(**out));
		*n = spec->nvar_tiles;
		return TF_OK;
	}
	scratch.ver = tf_object_stat(var)->v;
	rc = tf_file_walk(&scratch, var, 0, scratch.ver.size, err);
	if (rc == TF_OK && (*out = malloc((scratch.ntiles ? scratch.ntiles : 1) * sizeof(**out))))
		for (size_t t = 0; t < scratch.ntiles; t++)
			(*out)[t] = (tf_tile_layout){ scratch.tiles[t].start, scratch.tiles[t].stored,
						      scratch.tiles[t].size };
	else if (rc == TF_OK)
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	*n = rc == TF_OK ? scratch.ntiles : 0;
	for (size_t t = 0; t < scratch.ntiles; t++)
		free(atomic_load(&scratch.tiles[t].units));
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
 * its size is only known by decoding that data tile once (var non-NULL). */
static tf_status fold_tiles(tf_file *f, tf_object *var, const tf_tile_layout *data, size_t ndata,
			    tf_error *err)
{
	tf_buf offsets = TF_BUF_INIT(2 * TF_MAX_CHUNK_BYTES);
	tf_workspace *ws = var ? tf_workspace_new() : NULL;
	tf_status rc = TF_OK;

	if (var && !ws)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	f->size = 0;
	for (size_t t = 0; t < f->ntiles && rc == TF_OK; t++) {
		tile_ent *te = &f->tiles[t];
		unit_table *ut = atomic_load(&te->units);
		uint64_t moved = f->size - te->off;	/* modulo 2^64: may move back */

		te->off = f->size;
		for (size_t u = 0; ut && u < ut->n; u++)
			ut->u[u].off += moved;
		if (te->stored == TF_TILE_HEADER_SIZE) {
			if (t >= ndata) {
				rc = tf_err(err, TF_E_CORRUPT, "offsets tile %zu has no data tile to rebuild it from", t);
				break;
			}
			free(atomic_exchange(&te->units, NULL));
			te->kind = TILE_FOLDED;
			te->data_start = data[t].start;
			te->data_stored = data[t].stored;
			if (ws && (rc = tf_file_decode_data_tile(f, var, ws, te->data_start, te->data_stored, &offsets,
								 err)) != TF_OK)
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
	tf_object *var = NULL;
	size_t ndata;
	tf_status rc;

	if (!first || (first->id != TF_F_RLE && first->id != TF_F_DICTIONARY) ||
	    !tf_datatype_is_var_string(spec->var_type))
		return tf_err(err, TF_E_INVAL, "offsets are folded only into STRING_ASCII/UTF8 data "
			      "whose first filter is rle or dictionary");
	if (!(f->var_rel = strdup(spec->var_data)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if ((rc = make_decoder(&f->var, spec->var_pipeline, spec->key, err)) != TF_OK)
		return rc;
	/* A 0-chunk offsets tile is the authoritative sign of the var-string
	 * layout, whatever the version rule says (FORMAT.md §4.7, §10 #21). */
	f->var.env = (tf_chunk_env){ .type = spec->var_type, .cell_size = tf_datatype_size(spec->var_type),
				     .version = f->dec[0].env.version, .var_string = true, .key = spec->key };
	/* Without a layout of both files, the data file is read now. */
	if ((!spec->var_tiles || !f->from_layout) &&
	    (rc = tf_object_open(f->src, spec->var_data, NULL, &var, err)) != TF_OK)
		return rc;
	/* The decoded offsets are the data file's as much as ours: handles
	 * read the version indexed, and the driver sees when it changes. */
	if (var) {
		f->var_ver = tf_object_stat(var)->v;
	} else {
		tf_stat st;
		if ((rc = tf_source_stat(f->src, spec->var_data, &st, err)) != TF_OK)
			return rc;
		f->var_ver = st.v;
	}
	if ((rc = data_tiles(spec, var, f->var_ver.size, &data, &ndata, err)) != TF_OK) {
		tf_object_close(var);
		return tf_err_prefix(err, "%s", spec->var_data);
	}
	rc = fold_tiles(f, f->from_layout ? NULL : var, data, ndata, err);
	tf_object_close(var);
	free(data);
	return rc;
}

/* The decoder of a tile file's chunks, from the spec. */
static tf_status tile_decoder(tf_file *f, const tf_file_spec *spec, tf_error *err)
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
	return TF_OK;
}

/* A tile file's tiles: from the caller's layout, or walked. */
static tf_status open_tiles(tf_file *f, tf_object *obj, const tf_file_spec *spec, tf_error *err)
{
	tf_status rc = spec->tiles ? layout_tiles(f, spec->tiles, spec->ntiles, err)
				   : tf_file_walk(f, obj, 0, f->ver.size, err);

	if (rc != TF_OK || !spec->var_data || !has_empty_tile(f))
		return rc;
	return open_var_data(f, spec, err);
}

/* Read and parse the generic tile header at pos. */
static tf_status read_generic_header(tf_object *obj, uint64_t pos, uint64_t end, tf_generic_header *h,
				     tf_error *err)
{
	uint8_t base[TF_GENERIC_BASE_SIZE], *hdr;
	uint32_t ps;
	tf_status rc;

	if (end - pos < sizeof(base))
		return tf_err(err, TF_E_CORRUPT, "truncated generic tile header");
	if ((rc = tf_object_read(obj, pos, base, sizeof(base), err)) != TF_OK)
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
	rc = tf_object_read(obj, pos + sizeof(base), hdr + sizeof(base), ps, err);
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
	unit_table *t;
	tf_status rc;

	if (!d)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	f->dec = d;
	if ((rc = read_generic_header(w->obj, pos, w->end, &h, err)) != TF_OK)
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
	if ((rc = tf_file_walk_chunks(w, te.start, f->size, &t, &te.stored, &te.size, err)) != TF_OK)
		return rc;
	atomic_init(&te.units, t);
	if (te.stored != h.persisted_size || te.size != h.tile_size) {
		free(t);
		return tf_err(err, TF_E_CORRUPT, "generic tile: chunks take %llu bytes for %llu, header "
			      "says %llu for %llu", (unsigned long long)te.stored, (unsigned long long)te.size,
			      (unsigned long long)h.persisted_size, (unsigned long long)h.tile_size);
	}
	if ((rc = tf_file_add_tile(f, &te, err)) != TF_OK)
		free(t);
	else
		rc = tf_file_check_empty(f, &f->tiles[f->ntiles - 1], w->obj, t, err);
	*next = te.start + te.stored;
	return rc;
}

/* Whether the bytes from pos to the end are a fragment metadata footer and
 * its u64 length (§8.4): what follows the generic tiles of such a file when
 * the caller could not say where they end. */
static bool footer_starts_at(tf_object *obj, uint64_t fsize, uint64_t pos)
{
	uint8_t len[8];

	return fsize - pos >= 8 && tf_object_read(obj, fsize - 8, len, 8, NULL) == TF_OK &&
	       tf_le64(len) == fsize - 8 - pos;
}

static tf_status open_generic(tf_file *f, tf_object *obj, const tf_file_spec *spec, tf_error *err)
{
	uint64_t fsize = f->ver.size, end = spec->generic_end ? spec->generic_end : fsize;
	walker *w;
	tf_status rc = TF_OK;

	f->generic = true;
	if (end > fsize)
		return tf_err(err, TF_E_CORRUPT, "generic tiles end at %llu, after the file's end",
			      (unsigned long long)end);
	if (!(w = tf_file_walker_new(obj, end, false)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	for (uint64_t pos = 0; rc == TF_OK && pos < end;) {
		if (!spec->generic_end && pos && footer_starts_at(obj, fsize, pos)) {
			end = pos;	/* a fragment metadata footer follows */
			break;
		}
		if ((rc = add_generic(f, w, pos, spec->key, &pos, err)) != TF_OK)
			tf_err_prefix(err, "generic tile %zu (at byte %llu)", f->ntiles, (unsigned long long)pos);
	}
	f->walked = true;
	f->walked_bytes += w->read;
	free(w);
	if (rc == TF_OK && end < fsize) {	/* e.g. a fragment metadata footer */
		tile_ent raw = { .start = end, .stored = fsize - end, .size = fsize - end, .kind = TILE_RAW };
		atomic_init(&raw.units, NULL);
		if (raw.size > TF_MAX_CHUNK_BYTES)
			return tf_err(err, TF_E_CORRUPT, "%llu bytes after the generic tiles",
				      (unsigned long long)raw.size);
		rc = tf_file_add_tile(f, &raw, err);
	}
	return rc;
}

/*
 * Index f.  The stored file is not opened at all when the caller knows both
 * its version and its tiles (a listing of a big array opens nothing), nor
 * when the store holds the index of that version.  Only walked tile files
 * are stored: arrays' files have their layout, generic files are small, and
 * folded offsets depend on a second file.
 */
static tf_status index_file(tf_file *f, const tf_version *expect, const tf_file_spec *spec,
			    const tf_file_how *how, tf_error *err)
{
	struct tf_index *store = how && !spec->generic && !spec->tiles && !spec->var_data ? how->store : NULL;
	tf_object *obj = NULL;
	tf_status rc;

	if (!spec->generic && (rc = tile_decoder(f, spec, err)) != TF_OK)
		return rc;
	if (store && (rc = tf_file_restore(f, store, expect, err)) != TF_E_NOTFOUND)
		return rc;
	if (expect && spec->tiles && !spec->generic)
		f->ver = *expect;
	else if ((rc = tf_object_open(f->src, f->rel, expect, &obj, err)) != TF_OK)
		return rc;
	else
		f->ver = tf_object_stat(obj)->v;
	f->walk_headers = how && how->metadata && obj && !spec->generic && !spec->tiles &&
			  tf_object_advise(obj, TF_ACCESS_HEADERS);
	rc = spec->generic ? open_generic(f, obj, spec, err) : open_tiles(f, obj, spec, err);
	tf_object_close(obj);
	if (how && how->store && f->walked)
		tf_index_count_walk(how->store, f->walked_bytes);
	if (rc == TF_OK && store)
		tf_file_persist(f, store);
	return rc;
}

tf_status tf_file_open(tf_source *src, const char *rel, const char *name, const tf_version *expect,
		       const tf_file_spec *spec, tf_file **out, tf_error *err)
{
	return tf_file_open_how(src, rel, name, expect, spec, NULL, out, err);
}

tf_status tf_file_open_how(tf_source *src, const char *rel, const char *name, const tf_version *expect,
			   const tf_file_spec *spec, const tf_file_how *how, tf_file **out, tf_error *err)
{
	tf_file *f = calloc(1, sizeof(*f));
	tf_status rc;

	if (!f || !(f->name = strdup(name ? name : rel)) || !(f->rel = strdup(rel))) {
		if (f)
			free(f->name);
		free(f);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	atomic_init(&f->refs, 1);
	atomic_init(&f->cache, NULL);
	atomic_init(&f->owner, 0);
	atomic_init(&f->saved_bad, false);
	atomic_init(&f->proved, 0);
	pthread_mutex_init(&f->proof_lock, NULL);
	f->src = src;
	f->cell_val_num = spec->cell_val_num;
	if ((rc = index_file(f, expect, spec, how, err)) != TF_OK) {
		tf_err_prefix(err, "%s", f->name);
		tf_file_free(f);
		return rc;
	}
	*out = f;
	return TF_OK;
}
