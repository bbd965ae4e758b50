/*
 * dictionary.c - DICTIONARY_ENCODING (filter type 14, compressor 7), which
 * exists only on the var-string path: var-sized STRING_ASCII/UTF8 data as
 * filter 0, one chunk per tile, offsets tile not stored (FORMAT.md §4.8,
 * tiledb/sm/filter/compression_filter.cc, tiledb/sm/compressors/dict_compressor.h).
 *
 * Chunk metadata: u32 0, u32 1 (part counts), u32 uncompressed size,
 * u32 compressed size (= cells x id width), u32 offsets size (= cells x 8),
 * u8 id width, u8 string length width, u32 dictionary size, dictionary.
 * The dictionary is entries in first-appearance order, each a big-endian
 * length and the bytes, with no entry count.  Chunk data: one big-endian id
 * per cell.  Decoding rebuilds the cell offsets.
 */
#include <stdlib.h>

#include "framing.h"
#include "varstring.h"

/* Chunk metadata, the dictionary bytes still serialized.  vs.width is the
 * id width: vs.compressed / vs.width ids in the chunk data. */
typedef struct dict_header {
	varstring_header vs;
	tf_span dict;
} dict_header;

static tf_status read_header(tf_span md, dict_header *h, tf_error *err)
{
	tf_reader r = tf_reader_of(md);
	uint32_t dict_size;
	tf_status rc;

	if ((rc = varstring_get_header(&r, &h->vs, "id width", err)) != TF_OK ||
	    (rc = tf_get_u32(&r, &dict_size, "dictionary size", err)) != TF_OK ||
	    (rc = tf_get_span(&r, dict_size, &h->dict, "dictionary", err)) != TF_OK)
		return tf_err_prefix(err, "dictionary header");
	if ((rc = varstring_check_header(&h->vs, "dictionary", "id", err)) != TF_OK)
		return rc;
	if (r.n != 0)
		return tf_err(err, TF_E_CORRUPT, "%zu unexpected bytes after the dictionary", r.n);
	return TF_OK;
}

/* One dictionary string: its place in the serialized dictionary.  Eight
 * bytes, so the table is never much larger than the metadata it indexes. */
typedef struct dict_entry {
	uint32_t at, len;
} dict_entry;

/* Walk the serialized entries; with `entries` NULL only count them. */
static tf_status scan_dict(const dict_header *h, dict_entry *entries, size_t *count,
			   tf_error *err)
{
	const unsigned lw = h->vs.len_width;
	size_t at = 0, n = 0;

	while (at < h->dict.n) {
		uint64_t len;

		if (h->dict.n - at < lw)
			return tf_err(err, TF_E_CORRUPT, "dictionary entry %zu: truncated length", n);
		len = tf_be_n(h->dict.p + at, lw);
		at += lw;
		if (len > h->dict.n - at)
			return tf_err(err, TF_E_CORRUPT, "dictionary entry %zu: %llu bytes, %zu left",
				      n, (unsigned long long)len, h->dict.n - at);
		if (entries)	/* both fit: the dictionary size is a u32 */
			entries[n] = (dict_entry){ (uint32_t)at, (uint32_t)len };
		at += (size_t)len;
		n++;
	}
	*count = n;
	return TF_OK;
}

/* The dictionary as an array of dict_entry, in entries->p. */
static tf_status load_dict(const tf_stage *st, const dict_header *h, tf_buf *entries,
			   size_t *count, tf_error *err)
{
	tf_status rc;

	if ((rc = scan_dict(h, NULL, count, err)) != TF_OK)
		return rc;
	tf_buf_init(entries, st->limit);
	if ((rc = tf_buf_reserve(entries, tf_size_mul(*count, sizeof(dict_entry)), err)) != TF_OK)
		return tf_err_prefix(err, "dictionary of %zu entries", *count);
	return scan_dict(h, (dict_entry *)(void *)entries->p, count, err);
}

/* Everything decoding the ids needs. */
typedef struct id_job {
	const uint8_t *dict;	/* serialized dictionary */
	const dict_entry *entries;
	size_t nentries;
	const uint8_t *ids;
	size_t ncells;
	uint8_t *out;		/* h.uncompressed bytes */
	size_t room;
	uint8_t *offs;		/* ncells x u64, or NULL */
} id_job;

/* Inlined once per id width (W is a constant at each call), so the
 * big-endian load compiles to a plain load and byte swap. */
static inline tf_status expand_ids(const id_job *j, unsigned w, tf_error *err)
{
	size_t pos = 0;

	for (size_t i = 0; i < j->ncells; i++) {
		uint64_t id = tf_be_n(j->ids + i * w, w);
		const dict_entry *e;

		if (id >= j->nentries)
			return tf_err(err, TF_E_CORRUPT, "cell %zu refers to entry %llu of a %zu-entry "
				      "dictionary", i, (unsigned long long)id, j->nentries);
		e = &j->entries[id];
		if (e->len > j->room - pos)
			return tf_err(err, TF_E_CORRUPT, "strings exceed the %zu bytes the header says",
				      j->room);
		if (e->len)
			memcpy(j->out + pos, j->dict + e->at, e->len);
		if (j->offs)
			tf_put_le64(j->offs + 8 * i, pos);
		pos += e->len;
	}
	if (pos != j->room)
		return tf_err(err, TF_E_CORRUPT, "strings hold %zu bytes, header says %zu", pos,
			      j->room);
	return TF_OK;
}

static tf_status expand_ids_any(const id_job *j, unsigned w, tf_error *err)
{
	switch (w) {
	case 1: return expand_ids(j, 1, err);
	case 2: return expand_ids(j, 2, err);
	case 4: return expand_ids(j, 4, err);
	default: return expand_ids(j, 8, err);
	}
}

/* Check the id array against the header before anything is allocated. */
static tf_status check_ids(tf_span data, const varstring_header *h, tf_error *err)
{
	if (data.n != h->compressed)
		return tf_err(err, TF_E_CORRUPT, "%zu bytes of ids, header says %u", data.n,
			      h->compressed);
	if (h->compressed % h->width != 0 ||
	    (uint64_t)h->compressed / h->width * 8 != h->offsets_size)
		return tf_err(err, TF_E_CORRUPT, "%u bytes of %u-byte ids do not make the %u/8 "
			      "cells the offsets size says", h->compressed, h->width,
			      h->offsets_size);
	return TF_OK;
}

static tf_status decode(const tf_filter_opts *o, const tf_stage *st, tf_stream *s, tf_error *err)
{
	tf_buf entries = TF_BUF_INIT(0);
	dict_header h;
	id_job j = { 0 };
	tf_status rc;

	(void)o;
	if (!st->var_string)
		return tf_err(err, TF_E_CORRUPT,
			      "dictionary encoding applies only to var-sized strings");
	if ((rc = read_header(s->md, &h, err)) != TF_OK ||
	    (rc = check_ids(s->data, &h.vs, err)) != TF_OK ||
	    (rc = load_dict(st, &h, &entries, &j.nentries, err)) != TF_OK ||
	    (rc = varstring_output(st, &h.vs, s, &j.offs, err)) != TF_OK)
		goto done;
	j.dict = h.dict.p;
	j.entries = (const dict_entry *)(const void *)entries.p;
	j.ids = s->data.p;
	j.ncells = h.vs.compressed / h.vs.width;
	j.out = s->data_out->p;
	j.room = h.vs.uncompressed;
	if ((rc = expand_ids_any(&j, h.vs.width, err)) == TF_OK)
		varstring_done(st, &h.vs, s);	/* the header and dictionary were all of md */
done:
	tf_buf_free(&entries);
	return rc;
}

/* ---- encoding ------------------------------------------------------------------- */

static uint64_t hash_bytes(tf_span s)	/* FNV-1a */
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < s.n; i++)
		h = (h ^ s.p[i]) * 0x100000001b3ull;
	return h;
}

/* Distinct strings in first-appearance order and each cell's id. */
typedef struct dict_build {
	tf_span *entries;
	size_t nentries;
	uint64_t *ids;		/* per cell */
	size_t *slots;		/* open addressing: entry index + 1, 0 = free */
	size_t mask;
} dict_build;

static void dict_build_free(dict_build *d)
{
	free(d->entries);
	free(d->ids);
	free(d->slots);
}

/* The id of s, adding it to the dictionary when it is new. */
static uint64_t intern(dict_build *d, tf_span s)
{
	size_t at = (size_t)hash_bytes(s) & d->mask;

	for (;; at = (at + 1) & d->mask) {
		size_t e = d->slots[at];

		if (e == 0) {
			d->entries[d->nentries] = s;
			d->slots[at] = ++d->nentries;
			return d->nentries - 1;
		}
		if (d->entries[e - 1].n == s.n && (s.n == 0 || !memcmp(d->entries[e - 1].p, s.p, s.n)))
			return e - 1;
	}
}

/* Ids are given 0, 1, 2 ... in order of first appearance (DictEncoding::compress). */
static tf_status build_dict(const varstring_cells *c, dict_build *d, tf_error *err)
{
	size_t cap = 16;

	while (cap < 2 * c->n)	/* load factor <= 1/2; n <= 2^29 */
		cap *= 2;
	memset(d, 0, sizeof(*d));
	d->entries = malloc(c->n * sizeof(*d->entries));
	d->ids = malloc(c->n * sizeof(*d->ids));
	d->slots = calloc(cap, sizeof(*d->slots));
	if (!d->entries || !d->ids || !d->slots) {
		dict_build_free(d);
		return tf_err(err, TF_E_NOMEM, "dictionary: cannot index %zu cells", c->n);
	}
	d->mask = cap - 1;
	for (size_t i = 0; i < c->n; i++)
		d->ids[i] = intern(d, varstring_cell(c, i));
	return TF_OK;
}

/* Metadata part after the part counts: header and serialized dictionary (§4.8). */
static tf_status put_header(tf_buf *b, const varstring_cells *c, const dict_build *d,
			    unsigned id_w, tf_error *err)
{
	varstring_header h = { 0 };
	uint64_t max_len = 0, dict_size = 0;
	tf_status rc;

	/* TileDB takes the longest string over all cells (create_input_view). */
	for (size_t i = 0; i < d->nentries; i++)
		max_len = d->entries[i].n > max_len ? d->entries[i].n : max_len;
	h.len_width = varstring_width_for(max_len);
	for (size_t i = 0; i < d->nentries; i++)
		dict_size += h.len_width + d->entries[i].n;
	if (dict_size > UINT32_MAX)
		return tf_err(err, TF_E_INVAL, "dictionary of %llu bytes exceeds 4 GiB",
			      (unsigned long long)dict_size);
	h.uncompressed = (uint32_t)c->in.n;
	h.compressed = (uint32_t)(c->n * id_w);
	h.offsets_size = (uint32_t)(c->n * 8);
	h.width = (uint8_t)id_w;
	if ((rc = varstring_put_header(b, &h, err)) != TF_OK ||
	    (rc = tf_buf_put_u32(b, (uint32_t)dict_size, err)) != TF_OK)
		return rc;
	for (size_t i = 0; i < d->nentries; i++) {
		uint8_t len[8];

		tf_put_be_n(len, h.len_width, d->entries[i].n);
		if ((rc = tf_buf_append(b, len, h.len_width, err)) != TF_OK ||
		    (rc = tf_buf_append(b, d->entries[i].p, d->entries[i].n, err)) != TF_OK)
			return rc;
	}
	return TF_OK;
}

static tf_status put_ids(tf_buf *b, const dict_build *d, size_t ncells, unsigned id_w,
			 tf_error *err)
{
	uint8_t *at;
	tf_status rc = tf_buf_grow(b, ncells * id_w, &at, err);

	if (rc != TF_OK)
		return rc;
	for (size_t i = 0; i < ncells; i++)
		tf_put_be_n(at + i * id_w, id_w, d->ids[i]);
	b->len += ncells * id_w;
	return TF_OK;
}

static tf_status encode(const tf_filter_opts *o, const tf_stage *st, tf_parts *md,
			tf_parts *data, tf_error *err)
{
	varstring_cells c;
	tf_framing_out f;
	dict_build d;
	unsigned id_w;
	tf_status rc;

	(void)o;
	if (!st->var_string)
		return tf_err(err, TF_E_INVAL, "dictionary encoding applies only to var-sized strings");
	if ((rc = varstring_input(st, md, data, "dictionary encoding", &c, err)) != TF_OK ||
	    (rc = build_dict(&c, &d, err)) != TF_OK)
		return rc;
	/* The id width follows the cell count, not the entry count (§4.8). */
	id_w = varstring_width_for(c.n);
	if ((rc = tf_framing_begin(&f, md, data, err)) == TF_OK &&
	    (rc = put_header(f.hdr, &c, &d, id_w, err)) == TF_OK)
		rc = put_ids(f.out, &d, c.n, id_w, err);
	dict_build_free(&d);
	return tf_framing_end(&f, md, data, rc);
}

const tf_filter_class tf_filter_dictionary = {
	.id = TF_F_DICTIONARY,
	.name = "dictionary",
	.alias = "dictionary_encoding",
	.layout = TF_OPTS_COMPRESSOR,
	.compressor = 7,
	.consumes_md = true,
	.decode = decode,
	.encode = encode,
};
