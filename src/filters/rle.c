/*
 * rle.c - RLE (filter type 4), which has two layouts.
 *
 * Fixed path (FORMAT.md §4.6, tiledb/sm/compressors/rle_compressor.cc):
 * through the compression framing; each part is a sequence of runs
 * value ‖ u16 big-endian run length (1..65535, longer runs are split).  The
 * value width is the tile's cell size (cell_val_num x sizeof(type)), not
 * the datatype size, and it applies to earlier filters' metadata parts too
 * (§10 #9).
 *
 * Var-string path (§4.7, tiledb/sm/filter/compression_filter.cc,
 * compress/decompress_var_string_coords): var-sized STRING_ASCII/UTF8 data
 * as filter 0.  The whole tile is one chunk, its offsets tile is not stored,
 * and decoding rebuilds the cell offsets from the runs.
 */
#include "framing.h"
#include "varstring.h"

/* ---- fixed path (§4.6) -------------------------------------------------------- */

#define FIXED_RUN_MAX 65535	/* the run length is a u16 */

/* Fill total bytes at dst with an 8-byte pattern of whole values: eight
 * bytes per store, then the values left over (total is a multiple of w). */
static inline void fill_pattern(uint8_t *dst, const uint8_t *v, size_t w, size_t total)
{
	uint8_t pattern[8];
	size_t i = 0;

	for (size_t k = 0; k < 8; k += w)
		memcpy(pattern + k, v, w);
	for (; i + 8 <= total; i += 8)
		memcpy(dst + i, pattern, 8);
	for (; i < total; i += w)
		memcpy(dst + i, v, w);
}

/* Write count copies of the w-byte value v at dst. */
static void fill_copies(uint8_t *dst, const uint8_t *v, size_t w, size_t count)
{
	size_t total = w * count;

	switch (w) {	/* constant widths let the compiler inline the copies */
	case 1:
		memset(dst, v[0], count);
		return;
	case 2:
		fill_pattern(dst, v, 2, total);
		return;
	case 4:
		fill_pattern(dst, v, 4, total);
		return;
	case 8:
		fill_pattern(dst, v, 8, total);
		return;
	}
	/* Other widths: one copy, then keep doubling the filled prefix. */
	memcpy(dst, v, w);
	for (size_t done = w; done < total; done *= 2)
		memcpy(dst + done, dst, done < total - done ? done : total - done);
}

static tf_status decode_part(const tf_filter_opts *o, const tf_stage *st, tf_span src,
			     uint8_t *dst, size_t n, tf_error *err)
{
	size_t w = st->cell_size, run = w + 2, pos = 0;

	(void)o;
	if (w == 0)
		return tf_err(err, TF_E_CORRUPT, "tile cell size is 0");
	if (src.n % run != 0)
		return tf_err(err, TF_E_CORRUPT, "%zu bytes are not whole runs of %zu-byte values",
			      src.n, w);
	for (size_t at = 0; at < src.n; at += run) {
		size_t count = (size_t)src.p[at + w] << 8 | src.p[at + w + 1];

		if (count == 0)
			return tf_err(err, TF_E_CORRUPT, "run %zu is empty", at / run);
		if (count > (n - pos) / w)
			return tf_err(err, TF_E_CORRUPT, "runs exceed the %zu bytes the header says",
				      n);
		fill_copies(dst + pos, src.p + at, w, count);
		pos += count * w;
	}
	if (pos != n)
		return tf_err(err, TF_E_CORRUPT, "runs hold %zu bytes, header says %zu", pos, n);
	return TF_OK;
}

/* Index just past the run of equal w-byte values that starts at value i,
 * at most FIXED_RUN_MAX values long. */
static size_t run_end(const uint8_t *p, size_t i, size_t nvals, size_t w)
{
	size_t last = nvals - i > FIXED_RUN_MAX ? i + FIXED_RUN_MAX : nvals, j = i + 1;

#define SCAN(W) while (j < last && memcmp(p + j * (W), p + i * (W), (W)) == 0) j++
	switch (w) {	/* constant widths let the compiler inline the compare */
	case 1: SCAN(1); break;
	case 2: SCAN(2); break;
	case 4: SCAN(4); break;
	case 8: SCAN(8); break;
	default: SCAN(w); break;
	}
#undef SCAN
	return j;
}

static tf_status encode_part(const tf_filter_opts *o, const tf_stage *st, tf_span src,
			     tf_buf *out, tf_error *err)
{
	size_t w = st->cell_size, nvals, len = 0;
	uint8_t *at;
	tf_status rc;

	(void)o;
	if (w == 0)
		return tf_err(err, TF_E_INVAL, "rle: tile cell size is 0");
	/* TileDB throws here too, except for 0 < n < w, where it silently
	 * writes nothing and so a chunk it cannot read back. */
	if (src.n % w != 0)
		return tf_err(err, TF_E_INVAL, "rle: part of %zu bytes is not a whole number of "
			      "%zu-byte cells", src.n, w);
	nvals = src.n / w;
	if ((rc = tf_buf_grow(out, tf_size_mul(nvals, w + 2), &at, err)) != TF_OK)
		return rc;
	for (size_t i = 0, j; i < nvals; i = j) {
		j = run_end(src.p, i, nvals, w);
		memcpy(at + len, src.p + i * w, w);
		at[len + w] = (uint8_t)((j - i) >> 8);
		at[len + w + 1] = (uint8_t)(j - i);
		len += w + 2;
	}
	out->len += len;
	return TF_OK;
}

static const tf_codec codec = { "rle", decode_part, encode_part };

/* ---- var-string path (§4.7) ----------------------------------------------------- */

/* The chunk metadata is varstring.h's common header and nothing more. */
static tf_status read_str_header(tf_span md, varstring_header *h, tf_error *err)
{
	tf_reader r = tf_reader_of(md);
	tf_status rc;

	if ((rc = varstring_get_header(&r, h, "run length width", err)) != TF_OK)
		return tf_err_prefix(err, "var-string header");
	if ((rc = varstring_check_header(h, "var-string", "run", err)) != TF_OK)
		return rc;
	if (r.n != 0)
		return tf_err(err, TF_E_CORRUPT, "%zu unexpected bytes after the var-string header",
			      r.n);
	return TF_OK;
}

/* One stored run: `count` cells holding `str`. */
typedef struct str_run {
	uint64_t count;
	tf_span str;
} str_run;

/* Parse the run at *at of the runs in src; false if it is truncated. */
static inline bool take_run(tf_span src, size_t *at, unsigned rw, unsigned lw, str_run *run)
{
	uint64_t len;

	if (src.n - *at < (size_t)rw + lw)
		return false;
	run->count = tf_be_n(src.p + *at, rw);
	len = tf_be_n(src.p + *at + rw, lw);
	*at += rw + lw;
	if (len > src.n - *at)
		return false;
	run->str = tf_span_of(src.p + *at, (size_t)len);
	*at += (size_t)len;
	return true;
}

/* Check, before anything is allocated, that the runs hold exactly the
 * cells and string bytes the header promises (§10 #22). */
static tf_status check_runs(tf_span runs, const varstring_header *h, tf_error *err)
{
	uint64_t cells = 0, bytes = 0, max_cells = h->offsets_size / 8;
	size_t at = 0;
	str_run run;

	for (size_t i = 0; at < runs.n; i++) {
		if (!take_run(runs, &at, h->width, h->len_width, &run))
			return tf_err(err, TF_E_CORRUPT, "run %zu is truncated", i);
		if (run.count == 0)
			return tf_err(err, TF_E_CORRUPT, "run %zu is empty", i);
		if (run.count > max_cells - cells)
			return tf_err(err, TF_E_CORRUPT, "runs hold more cells than the offsets size "
				      "%u allows", h->offsets_size);
		if (run.str.n && run.count > (h->uncompressed - bytes) / run.str.n)
			return tf_err(err, TF_E_CORRUPT, "runs hold more than the %u string bytes "
				      "the header says", h->uncompressed);
		cells += run.count;
		bytes += run.count * run.str.n;
	}
	if (cells * 8 != h->offsets_size || bytes != h->uncompressed)
		return tf_err(err, TF_E_CORRUPT, "runs hold %llu cells of %llu bytes, header says "
			      "%u offset bytes and %u string bytes", (unsigned long long)cells,
			      (unsigned long long)bytes, h->offsets_size, h->uncompressed);
	return TF_OK;
}

/* Write the strings of validated runs to out and, when offs is not NULL,
 * each cell's start as a u64 relative to the chunk. */
static void expand_runs(tf_span runs, const varstring_header *h, uint8_t *out, uint8_t *offs)
{
	size_t at = 0, pos = 0;
	str_run run;

	while (take_run(runs, &at, h->width, h->len_width, &run)) {
		for (uint64_t c = 0; c < run.count && (run.str.n || offs); c++) {
			if (run.str.n)
				memcpy(out + pos, run.str.p, run.str.n);
			if (offs) {
				tf_put_le64(offs, pos);
				offs += 8;
			}
			pos += run.str.n;
		}
	}
}

static tf_status decode_strings(const tf_stage *st, tf_stream *s, tf_error *err)
{
	varstring_header h;
	uint8_t *offs;
	tf_status rc;

	if ((rc = read_str_header(s->md, &h, err)) != TF_OK)
		return rc;
	if (s->data.n != h.compressed)
		return tf_err(err, TF_E_CORRUPT, "%zu bytes of runs, header says %u", s->data.n,
			      h.compressed);
	if ((rc = check_runs(s->data, &h, err)) != TF_OK ||
	    (rc = varstring_output(st, &h, s, &offs, err)) != TF_OK)
		return rc;
	expand_runs(s->data, &h, s->data_out->p, offs);
	varstring_done(st, &h, s);
	return TF_OK;
}

/* Walks the cells of a var-string chunk run by run. */
typedef struct run_iter {
	varstring_cells cells;
	size_t next;		/* the cell the next run starts at */
} run_iter;

static bool next_run(run_iter *it, str_run *run)
{
	tf_span cur;

	if (it->next >= it->cells.n)
		return false;
	run->str = varstring_cell(&it->cells, it->next);
	run->count = 1;
	while (++it->next < it->cells.n) {
		cur = varstring_cell(&it->cells, it->next);
		if (cur.n != run->str.n || (cur.n && memcmp(cur.p, run->str.p, cur.n) != 0))
			break;
		run->count++;
	}
	return true;
}

/*
 * Header fields as RLE::calculate_compression_params chooses them, except
 * that the longest string is taken over ALL runs: TileDB forgets the last
 * run's string, so when that one alone needs a wider length field it writes
 * a corrupt tile (FORMAT.md §4.7, §13 Q2).  Otherwise both agree.
 */
static tf_status plan_runs(const varstring_cells *cells, varstring_header *h, tf_error *err)
{
	uint64_t runs = 0, max_count = 0, max_len = 0, str_bytes = 0, size;
	run_iter it = { *cells, 0 };
	str_run run;

	while (next_run(&it, &run)) {
		runs++;
		max_count = run.count > max_count ? run.count : max_count;
		max_len = run.str.n > max_len ? run.str.n : max_len;
		str_bytes += run.str.n;
	}
	h->width = varstring_width_for(max_count);
	h->len_width = varstring_width_for(max_len);
	size = runs * (h->width + h->len_width) + str_bytes;	/* <= 17 x input */
	if (size > UINT32_MAX)
		return tf_err(err, TF_E_INVAL, "rle: %llu bytes of runs exceed 4 GiB",
			      (unsigned long long)size);
	h->uncompressed = (uint32_t)cells->in.n;
	h->compressed = (uint32_t)size;
	h->offsets_size = (uint32_t)(cells->n * 8);
	return TF_OK;
}

static void write_runs(const varstring_cells *cells, const varstring_header *h, uint8_t *out)
{
	run_iter it = { *cells, 0 };
	str_run run;

	while (next_run(&it, &run)) {
		tf_put_be_n(out, h->width, run.count);
		tf_put_be_n(out + h->width, h->len_width, run.str.n);
		out += h->width + h->len_width;
		if (run.str.n)
			memcpy(out, run.str.p, run.str.n);
		out += run.str.n;
	}
}

static tf_status encode_strings(const tf_stage *st, tf_parts *md, tf_parts *data, tf_error *err)
{
	varstring_header h = { 0 };
	varstring_cells cells;
	tf_framing_out f;
	tf_status rc;

	if ((rc = varstring_input(st, md, data, "rle on var strings", &cells, err)) != TF_OK ||
	    (rc = plan_runs(&cells, &h, err)) != TF_OK)
		return rc;
	if ((rc = tf_framing_begin(&f, md, data, err)) == TF_OK &&
	    (rc = varstring_put_header(f.hdr, &h, err)) == TF_OK &&
	    (rc = tf_buf_reserve(f.out, h.compressed, err)) == TF_OK) {
		write_runs(&cells, &h, f.out->p);
		f.out->len = h.compressed;
	}
	return tf_framing_end(&f, md, data, rc);
}

/* ---- the class ------------------------------------------------------------------ */

TF_FRAMING_FUNCTIONS(codec)

static tf_status decode(const tf_filter_opts *o, const tf_stage *st, tf_stream *s, tf_error *err)
{
	if (st->var_string)
		return decode_strings(st, s, err);
	return framed_decode(o, st, s, err);
}

static tf_status encode(const tf_filter_opts *o, const tf_stage *st, tf_parts *md,
			tf_parts *data, tf_error *err)
{
	if (st->var_string)
		return encode_strings(st, md, data, err);
	return framed_encode(o, st, md, data, err);
}

const tf_filter_class tf_filter_rle = {
	.id = TF_F_RLE,
	.name = "rle",
	.layout = TF_OPTS_COMPRESSOR,
	.compressor = 4,
	.consumes_md = true,
	.decode = decode,
	.encode = encode,
};
