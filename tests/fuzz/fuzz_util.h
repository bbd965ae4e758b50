/*
 * fuzz_util.h - what the file-level fuzz targets share (header only: each
 * target is one program; see README here).
 *
 *   - a per-process temporary directory (on /dev/shm when there is one:
 *     every input is written to disk, so disk speed is execution speed),
 *     removed when the fuzzer exits, and the local source of it that files
 *     are opened through (tf_source.h);
 *   - an in-memory source (fz_mem_*): files held in memory behind the
 *     tf_source interface, for targets that read whole directory trees
 *     (fuzz_view) without writing them to disk;
 *   - the corpus's oracle key, for encrypted seeds;
 *   - fz_exercise(): everything a reader can do with an open tf_file, with
 *     the promises tf_file.h makes checked: tile ranges, unit lists and
 *     chunk lists add up, and the bytes tf_handle_read returns through a
 *     small cache (decode-ahead on) are the bytes tf_handle_decode_unit
 *     gives unit by unit.
 *
 * A broken promise aborts, so libFuzzer saves the input.  With FUZZ_VERBOSE=1
 * in the environment each input's outcome is printed.
 */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H

#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sources/source_impl.h"
#include "sources/source_local.h"
#include "cache/tf_cache.h"
#include "cache/tf_handle.h"
#include "format/tf_file.h"
#include "util/tf_keys.h"
#include "format/tf_pipeline.h"
#include "sources/tf_source.h"
#include "format/tf_tile.h"

/* Decoded bytes read and compared per file: far beyond any seed. */
#define FZ_READ_WINDOW ((uint64_t)2 << 20)
/* Units decoded one by one only up to this size: a chunk header may claim
 * up to 1 GiB, which the cache refuses anyway (budget below). */
#define FZ_UNIT_CAP ((uint32_t)1 << 20)
#define FZ_CACHE_BUDGET ((size_t)512 << 10)

/* Not every target uses every helper. */
#define FZ_FN static __attribute__((unused))

static const char fz_oracle_key[] __attribute__((unused)) = "TileDB-oracle-key-0123456789ABCD";
static char fz_dir_path[256];
static tf_source *fz_src;
static bool fz_verbose __attribute__((unused));

FZ_FN void fz_fail(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz: %s: %s\n", what, detail);
	abort();
}

FZ_FN void fz_say(const char *fmt, const char *a, const char *b)
{
	if (fz_verbose) {
		fprintf(stderr, fmt, a, b);
		fputc('\n', stderr);
	}
}

FZ_FN int fz_rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	remove(path);
	return 0;
}

/* Remove dir and everything under it (never follows symlinks). */
FZ_FN void fz_rm_tree(const char *dir)
{
	nftw(dir, fz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

FZ_FN void fz_cleanup(void)
{
	tf_source_free(fz_src);
	if (fz_dir_path[0])
		fz_rm_tree(fz_dir_path);
}

/* The per-process directory, made on first use. */
FZ_FN const char *fz_dir(void)
{
	struct stat sb;
	const char *base = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) && access("/dev/shm", W_OK) == 0
				   ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

	if (fz_dir_path[0])
		return fz_dir_path;
	snprintf(fz_dir_path, sizeof(fz_dir_path), "%s/tf-fuzz-XXXXXX", base);
	if (!mkdtemp(fz_dir_path))
		fz_fail("temporary directory", fz_dir_path);
	atexit(fz_cleanup);
	fz_verbose = getenv("FUZZ_VERBOSE") != NULL;
	return fz_dir_path;
}

/* The per-process directory as a local source: every file of an input is
 * opened through it, by its path relative to the directory. */
FZ_FN tf_source *fz_source(void)
{
	tf_error err;

	if (!fz_src && tf_source_local(fz_dir(), &fz_src, &err) != TF_OK)
		fz_fail("source", err.msg);
	return fz_src;
}

FZ_FN void fz_write(const char *path, const void *p, size_t n, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	const char *at = p;

	if (fd < 0)
		fz_fail("create", path);
	fchmod(fd, mode);	/* an existing file keeps its old mode otherwise */
	while (n) {
		ssize_t w = write(fd, at, n);
		if (w <= 0)
			fz_fail("write", path);
		at += w;
		n -= (size_t)w;
	}
	close(fd);
}

/* ---- an in-memory source -------------------------------------------------------- */

/* Files by path ("a/b/c"); a directory is any proper prefix of a path
 * ending at a '/'.  Bytes are borrowed: they must outlive the source. */
typedef struct fz_mem_file {
	char *path;
	const uint8_t *p;
	size_t n;
} fz_mem_file;

typedef struct fz_mem {
	tf_source base;
	fz_mem_file *f;		/* sorted by path once sealed */
	size_t n, cap;
} fz_mem;

typedef struct fz_mem_object {
	tf_object base;
	const uint8_t *p;
} fz_mem_object;

static const tf_object_ops fz_mem_object_ops;

FZ_FN int fz_mem_cmp(const void *a, const void *b)
{
	return strcmp(((const fz_mem_file *)a)->path, ((const fz_mem_file *)b)->path);
}

FZ_FN void fz_mem_free(tf_source *base)
{
	fz_mem *m = (fz_mem *)base;

	for (size_t i = 0; i < m->n; i++)
		free(m->f[i].path);
	free(m->f);
	free(m->base.name);
	free(m);
}

/* Whether rel ("." or a path) is a directory: a proper prefix of a file's
 * path, followed there by '/'. */
FZ_FN bool fz_mem_is_dir(const fz_mem *m, const char *rel)
{
	size_t len = strlen(rel);

	if (!strcmp(rel, "."))
		return true;
	for (size_t i = 0; i < m->n; i++)
		if (!strncmp(m->f[i].path, rel, len) && m->f[i].path[len] == '/')
			return true;
	return false;
}

FZ_FN const fz_mem_file *fz_mem_find(const fz_mem *m, const char *rel)
{
	fz_mem_file key = { (char *)rel, NULL, 0 };

	return m->n ? bsearch(&key, m->f, m->n, sizeof(*m->f), fz_mem_cmp) : NULL;
}

FZ_FN tf_stat fz_mem_stat_of(const fz_mem *m, const fz_mem_file *f)
{
	tf_stat st = { .kind = f ? TF_ENT_REG : TF_ENT_DIR, .mode = f ? 0444 : 0555, .nlink = 1 };

	st.v.dev = 1;
	st.v.ino = f ? (uint64_t)(f - m->f) + 2 : 1;
	st.v.size = f ? f->n : 0;
	st.v.mtime_ns = st.v.ctime_ns = 1;
	return st;
}

FZ_FN tf_status fz_mem_stat(tf_source *base, const char *rel, tf_stat *st, tf_error *err)
{
	fz_mem *m = (fz_mem *)base;
	const fz_mem_file *f = fz_mem_find(m, rel);

	if (!f && !fz_mem_is_dir(m, rel))
		return tf_err(err, TF_E_NOTFOUND, "%s: no such file", rel);
	*st = fz_mem_stat_of(m, f);
	return TF_OK;
}

/* Each name under rel once (paths are sorted: a directory's files are
 * adjacent). */
FZ_FN tf_status fz_mem_list(tf_source *base, const char *rel, bool want_stat, tf_list_fn fn, void *ctx,
			    tf_error *err)
{
	fz_mem *m = (fz_mem *)base;
	size_t len = strcmp(rel, ".") ? strlen(rel) : 0;
	char last[512] = "", name[512];

	(void)want_stat;
	if (!fz_mem_is_dir(m, rel))
		return tf_err(err, TF_E_NOTFOUND, "%s: no such directory", rel);
	for (size_t i = 0; i < m->n; i++) {
		const char *p = m->f[i].path, *rest, *slash;
		tf_stat st;

		if (len && (strncmp(p, rel, len) || p[len] != '/'))
			continue;
		rest = p + (len ? len + 1 : 0);
		slash = strchr(rest, '/');
		snprintf(name, sizeof(name), "%.*s", slash ? (int)(slash - rest) : (int)strlen(rest), rest);
		if (!strcmp(name, last))
			continue;
		snprintf(last, sizeof(last), "%s", name);
		st = fz_mem_stat_of(m, slash ? NULL : &m->f[i]);
		if (fn(ctx, name, &st))
			break;
	}
	return TF_OK;
}

FZ_FN tf_status fz_mem_statfs(tf_source *base, tf_source_fsstat *out, tf_error *err)
{
	(void)base, (void)err;
	memset(out, 0, sizeof(*out));
	out->bsize = 4096;
	out->namemax = 255;
	return TF_OK;
}

FZ_FN tf_status fz_mem_open(tf_source *base, const char *rel, const tf_version *expect, tf_object **out,
			    tf_error *err)
{
	fz_mem *m = (fz_mem *)base;
	const fz_mem_file *f = fz_mem_find(m, rel);
	fz_mem_object *o;

	if (!f)
		return tf_err(err, fz_mem_is_dir(m, rel) ? TF_E_INVAL : TF_E_NOTFOUND, "%s: not a file", rel);
	if (!(o = calloc(1, sizeof(*o))) || !(o->base.name = strdup(rel))) {
		free(o);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	o->base.ops = &fz_mem_object_ops;
	o->base.st = fz_mem_stat_of(m, f);
	o->p = f->p;
	if (expect && !tf_version_equal(expect, &o->base.st.v)) {
		free(o->base.name);
		free(o);
		return tf_err(err, TF_E_STALE, "%s: another version", rel);
	}
	*out = &o->base;
	return TF_OK;
}

FZ_FN void fz_mem_close(tf_object *base)
{
	free(base->name);
	free(base);
}

FZ_FN tf_status fz_mem_read(tf_object *base, uint64_t off, void *dst, size_t len, tf_error *err)
{
	(void)err;
	memcpy(dst, ((fz_mem_object *)base)->p + off, len);	/* tf_object_read checked the range */
	return TF_OK;
}

static const tf_source_ops fz_mem_ops = {
	.kind = "memory", .free = fz_mem_free, .stat = fz_mem_stat, .list = fz_mem_list,
	.statfs = fz_mem_statfs, .open = fz_mem_open,
};
static const tf_object_ops fz_mem_object_ops = { .close = fz_mem_close, .read = fz_mem_read };

FZ_FN fz_mem *fz_mem_new(void)
{
	fz_mem *m = calloc(1, sizeof(*m));

	if (!m || !(m->base.name = strdup("memory")))
		fz_fail("memory source", "out of memory");
	m->base.ops = &fz_mem_ops;
	m->base.local_fd = -1;
	return m;
}

/* Add a file (its path's components neither empty, "." nor ".."); a path
 * already there, or one that is a directory of another, is refused. */
FZ_FN bool fz_mem_add(fz_mem *m, const char *path, const uint8_t *p, size_t n)
{
	size_t len = strlen(path);

	for (const char *c = path;;) {
		size_t k = strcspn(c, "/");
		if (k == 0 || (k == 1 && c[0] == '.') || (k == 2 && c[0] == '.' && c[1] == '.') || k > 200)
			return false;
		if (!c[k])
			break;
		c += k + 1;
	}
	for (size_t i = 0; i < m->n; i++) {
		size_t l = strlen(m->f[i].path), s = l < len ? l : len;
		if (!strncmp(m->f[i].path, path, s) && (l == len || (l < len ? path[l] : m->f[i].path[len]) == '/'))
			return false;
	}
	if (m->n == m->cap) {
		fz_mem_file *v = realloc(m->f, (m->cap ? 2 * m->cap : 16) * sizeof(*v));
		if (!v)
			fz_fail("memory source", "out of memory");
		m->f = v;
		m->cap = m->cap ? 2 * m->cap : 16;
	}
	if (!(m->f[m->n].path = strdup(path)))
		fz_fail("memory source", "out of memory");
	m->f[m->n].p = p;
	m->f[m->n++].n = n;
	qsort(m->f, m->n, sizeof(*m->f), fz_mem_cmp);
	return true;
}

FZ_FN tf_key *fz_key(void)
{
	static tf_key *key;
	tf_error err;

	if (!key && tf_key_from_bytes(fz_oracle_key, strlen(fz_oracle_key), &key, &err) != TF_OK)
		fz_fail("key", err.msg);
	return key;
}

/* payload as one generic tile (§6) appended to out: no filters, or only
 * AES-256-GCM when a key is given, written by format version 22. */
FZ_FN void fz_generic(tf_span payload, const tf_key *key, tf_buf *out)
{
	tf_buf tile = TF_BUF_INIT(SIZE_MAX), pipe = TF_BUF_INIT(SIZE_MAX);
	tf_chunk_env env = { .type = TF_DT_CHAR, .cell_size = 1, .version = 22, .key = key };
	tf_pipeline *p = tf_pipeline_new();
	tf_workspace *ws = tf_workspace_new();
	tf_error err;

	if (!p || !ws || (key && tf_pipeline_append(p, TF_F_AES_256_GCM, &err) != TF_OK) ||
	    tf_pipeline_serialize(p, &pipe, &err) != TF_OK ||
	    tf_tile_encode(p, &env, ws, payload, NULL, 0, &tile, &err) != TF_OK ||
	    tf_buf_put_u32(out, 22, &err) != TF_OK || tf_buf_put_u64(out, tile.len, &err) != TF_OK ||
	    tf_buf_put_u64(out, payload.n, &err) != TF_OK || tf_buf_put_u8(out, TF_DT_CHAR, &err) != TF_OK ||
	    tf_buf_put_u64(out, 1, &err) != TF_OK || tf_buf_put_u8(out, key != NULL, &err) != TF_OK ||
	    tf_buf_put_u32(out, (uint32_t)pipe.len, &err) != TF_OK ||
	    tf_buf_append(out, pipe.p, pipe.len, &err) != TF_OK ||
	    tf_buf_append(out, tile.p, tile.len, &err) != TF_OK)
		fz_fail("generic tile", "cannot encode");
	tf_buf_free(&tile);
	tf_buf_free(&pipe);
	tf_pipeline_free(p);
	tf_workspace_free(ws);
}

/* ---- exercising an open file ------------------------------------------------------ */

/* What unit-by-unit decoding said about each byte of the window. */
enum { FZ_UNKNOWN, FZ_DECODED, FZ_FAILED };

typedef struct fz_ref {
	uint64_t n;		/* bytes of the window */
	uint8_t *bytes, *state;
	bool incomplete;	/* a unit (maybe an empty one) failed or was skipped */
} fz_ref;

FZ_FN void fz_mark(fz_ref *ref, uint64_t off, uint32_t size, const uint8_t *src, int state)
{
	uint64_t n = off < ref->n ? (size < ref->n - off ? size : ref->n - off) : 0;

	if (!n)
		return;
	if (src)
		memcpy(ref->bytes + off, src, (size_t)n);
	memset(ref->state + off, state, (size_t)n);
}

/* The units of a loaded tile follow each other over exactly its range. */
FZ_FN void fz_check_units(tf_handle *h, size_t t, uint64_t off, uint64_t size, size_t nu)
{
	uint64_t at = off;

	for (size_t u = 0; u < nu; u++) {
		tf_unit_info ui;

		tf_handle_unit_info(h, t, u, &ui);
		if (ui.off != at)
			fz_fail("units", "a unit does not start where the one before it ends");
		at += ui.size;
	}
	if (at - off != size)
		fz_fail("units", "the units of a tile do not add up to its size");
}

typedef struct fz_chunks {
	uint64_t at;
} fz_chunks;

FZ_FN int fz_chunk_at(void *ctx, size_t chunk, const tf_chunk_info *ci)
{
	fz_chunks *cs = ctx;

	(void)chunk;
	if (ci->off != cs->at)
		fz_fail("chunks", "a chunk does not start where the one before it ends");
	cs->at += ci->size;
	return 0;
}

/* So do its chunks, as tools list them (their headers read again). */
FZ_FN void fz_check_chunks(tf_handle *h, tf_workspace *ws, size_t t, uint64_t off, uint64_t size)
{
	fz_chunks cs = { off };
	tf_error err;

	if (tf_handle_each_chunk(h, ws, t, fz_chunk_at, &cs, &err) != TF_OK)
		fz_say("chunks: %s%s", err.msg, "");
	else if (cs.at - off != size)
		fz_fail("chunks", "the chunks of a tile do not add up to its size");
}

/* Decode every unit of tile t (up to FZ_UNIT_CAP bytes each) into ref. */
FZ_FN void fz_decode_tile(tf_handle *h, tf_workspace *ws, size_t t, size_t nu, fz_ref *ref)
{
	uint8_t *buf = NULL;
	tf_error err;

	for (size_t u = 0; u < nu; u++) {
		tf_unit_info ui;
		tf_status rc;

		tf_handle_unit_info(h, t, u, &ui);
		if (ui.size > FZ_UNIT_CAP || ui.off >= ref->n) {
			ref->incomplete = true;
			continue;
		}
		if (!(buf = realloc(buf, ui.size ? ui.size : 1)))
			fz_fail("decode", "out of memory");
		rc = tf_handle_decode_unit(h, ws, t, u, buf, &err);
		fz_mark(ref, ui.off, ui.size, rc == TF_OK ? buf : NULL, rc == TF_OK ? FZ_DECODED : FZ_FAILED);
		if (rc != TF_OK) {
			ref->incomplete = true;
			fz_say("unit: %s%s", err.msg, "");
		}
	}
	free(buf);
}

/* Tile ranges follow each other from 0 to the file's size, which fits an
 * off_t (st_size); every tile's units and chunks cover its range. */
FZ_FN void fz_decode_all(tf_handle *h, tf_workspace *ws, fz_ref *ref)
{
	const tf_file *f = tf_handle_file(h);
	uint64_t expect = 0;
	tf_error err;

	if (tf_file_size(f) > (uint64_t)INT64_MAX)
		fz_fail("tiles", "the file is larger than an off_t can say");
	for (size_t t = 0; t < tf_file_ntiles(f); t++) {
		uint64_t off, size;
		size_t nu;

		tf_file_tile_range(f, t, &off, &size);
		if (off != expect)
			fz_fail("tiles", "a tile does not start where the one before it ends");
		if (size > UINT64_MAX - off)
			fz_fail("tiles", "decoded size overflows");
		expect = off + size;
		if (tf_handle_tile_units(h, t, &nu, &err) != TF_OK) {
			ref->incomplete = true;
			fz_say("tile: %s%s", err.msg, "");
			continue;
		}
		fz_check_units(h, t, off, size, nu);
		fz_check_chunks(h, ws, t, off, size);
		fz_decode_tile(h, ws, t, nu, ref);
	}
	if (expect != tf_file_size(f))
		fz_fail("tiles", "the tiles do not add up to the file's size");
}

/* Bytes a read returned are what unit decoding gave, and never come from
 * a unit that failed to decode. */
FZ_FN void fz_compare(const fz_ref *ref, uint64_t off, const uint8_t *got, size_t n)
{
	for (size_t i = 0; i < n && off + i < ref->n; i++) {
		uint8_t s = ref->state[off + i];

		if (s == FZ_FAILED)
			fz_fail("read", "tf_handle_read returned bytes of a unit that does not decode");
		if (s == FZ_DECODED && got[i] != ref->bytes[off + i])
			fz_fail("read", "tf_handle_read and tf_handle_decode_unit disagree");
	}
}

/* Read the window front to back in pieces of varying size through cache c
 * (whose worker decodes ahead), then a few reads at the end.  A read is
 * all or nothing: every byte asked for (up to the end), or none. */
FZ_FN void fz_read_all(tf_handle *h, tf_cache *c, tf_workspace *ws, const fz_ref *ref)
{
	static const size_t lens[] = { 1, 4093, 65536, 7, 200000, 512, 65535, 3 };
	uint64_t size = tf_file_size(tf_handle_file(h));
	uint8_t *buf = malloc(200000);
	tf_error err;

	if (!buf)
		fz_fail("read", "out of memory");
	for (uint64_t off = 0, i = 0; off < ref->n; i++) {
		size_t len = lens[i % (sizeof(lens) / sizeof(lens[0]))], got;
		tf_status rc = tf_handle_read(h, c, ws, off, len, buf, &got, &err);

		if (got != (rc != TF_OK ? 0 : len < size - off ? len : size - off))
			fz_fail("read", "wrong byte count");
		fz_compare(ref, off, buf, got);
		off += len;
	}
	for (uint64_t back = 1; back <= 4096 && back <= size; back *= 64) {
		size_t got;
		tf_status rc = tf_handle_read(h, c, ws, size - back, 100, buf, &got, &err);

		if (got != (rc != TF_OK ? 0 : back < 100 ? back : 100))
			fz_fail("read", "wrong byte count at the end");
	}
	free(buf);
}

/* A small cache with one decode-ahead worker, for one input's files: a
 * file is read through one cache only, and its handles' decode-ahead jobs
 * hold it, so the cache is freed after them (tf_cache_free also drops
 * what its queue holds). */
FZ_FN tf_cache *fz_cache(void)
{
	tf_cache *c;
	tf_error err;

	if (tf_cache_new(FZ_CACHE_BUDGET, 1, &c, &err) != TF_OK)
		fz_fail("cache", err.msg);
	return c;
}

/* What the same bytes decode to in memory (tf_tile_decode or
 * tf_generic_decode over the whole input), for fz_exercise to compare. */
typedef struct fz_expect {
	bool known;		/* false: nothing to compare with */
	bool strict;		/* the memory decode must succeed when the file does */
	tf_status rc;
	const uint8_t *p;
	size_t n;
} fz_expect;

/* Whether every unit of the file, empty ones too, decoded. */
FZ_FN bool fz_all_decoded(const tf_file *f, const fz_ref *ref)
{
	if (ref->n != tf_file_size(f) || ref->incomplete)
		return false;
	for (uint64_t i = 0; i < ref->n; i++)
		if (ref->state[i] != FZ_DECODED)
			return false;
	return true;
}

/* A file whose every unit decodes holds what the same bytes decode to in
 * memory: the index must not change them. */
FZ_FN void fz_compare_memory(const tf_file *f, const fz_ref *ref, const fz_expect *want)
{
	if (!want || !want->known || !fz_all_decoded(f, ref))
		return;
	if (want->rc != TF_OK) {
		if (want->strict && want->rc != TF_E_NOMEM)
			fz_fail("memory", "the file decodes, the same bytes in memory do not");
		return;
	}
	if (want->n != ref->n) {
		if (want->strict)
			fz_fail("memory", "the file and the same bytes in memory decode to different sizes");
		return;
	}
	if (want->n && memcmp(want->p, ref->bytes, want->n))
		fz_fail("memory", "the file and the same bytes in memory decode to different bytes");
}

/* What tilefs and tiletool show of a file: its facts and texts. */
FZ_FN void fz_describe(const tf_file *f)
{
	char *text[3] = { tf_file_pipeline_text(f), tf_file_filter_attr(f), tf_file_codecs_json(f) };
	const tf_version *dep_ver;
	tf_file_info info;

	tf_file_get_info(f, &info);
	if (info.decoded_bytes != tf_file_size(f) || info.tiles != tf_file_ntiles(f))
		fz_fail("info", "disagrees with the index");
	for (int i = 0; i < 3; i++) {
		if (!text[i])
			fz_fail("pipeline text", "out of memory");
		free(text[i]);
	}
	if ((tf_file_dep(f, &dep_ver) != NULL) != (dep_ver != NULL))
		fz_fail("info", "a data file without its version, or the reverse");
	(void)tf_file_index_bytes(f);
}

/* Everything a reader does with f, through c, on a handle of its own;
 * takes over the caller's reference to f.  want (may be NULL): what
 * memory decoding gave. */
FZ_FN void fz_exercise(tf_file *f, tf_cache *c, const fz_expect *want)
{
	tf_workspace *ws = tf_workspace_new();
	uint64_t size = tf_file_size(f);
	fz_ref ref = { size < FZ_READ_WINDOW ? size : FZ_READ_WINDOW, NULL, NULL, false };
	tf_handle *h;
	tf_error err;

	if (!ws || !(ref.bytes = malloc(ref.n + 1)) || !(ref.state = calloc(ref.n + 1, 1)))
		fz_fail("exercise", "out of memory");
	fz_describe(f);
	/* Nothing changed the files since the open: the handle must open. */
	if (tf_handle_open(f, &h, &err) != TF_OK)
		fz_fail("handle", err.msg);
	fz_decode_all(h, ws, &ref);
	fz_compare_memory(f, &ref, want);
	fz_read_all(h, c, ws, &ref);
	tf_handle_close(h);
	tf_file_unref(f);
	free(ref.bytes);
	free(ref.state);
	tf_workspace_free(ws);
}

#endif
