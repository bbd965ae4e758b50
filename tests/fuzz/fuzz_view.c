/*
 * fuzz_view.c - libFuzzer target: a whole array directory (schemas,
 * fragment metadata, data tiles, commits, deletes) -> tf_views: every view
 * listed, stat'ed and read (cells.csv, <attr>.raw and .npy, every
 * fragment's cells.csv), each read bounded.
 *
 * Input layout (make-seeds writes the same):
 *
 *   byte 0   flags, FZ_* below
 *   then entries to the end of the input, each
 *     u8     kind: 0 a file as stored; 1 the payload of a generic tile
 *            (schemas, enumerations, deletes), stored by the target as one
 *            unfiltered generic tile, so that mutations reach the payload
 *     u8     length of the name, then it: a path under the array's
 *            directory ("__schema/__1_1_u", "__fragments/F/a0.tdb");
 *            a path that cannot be a file is skipped
 *     u32    length (cut to what is left), then the bytes
 *
 * The files are served from memory (fuzz_util.h, fz_mem: no disk, so
 * executions are cheap) as the directory "array" of a source.  Then:
 *   1. tf_views_open (through tf_array, a small cache);
 *   2. every entry of @views, fragments/ and each fragments/F/: stat,
 *      extended attributes, and each file opened and read: at most
 *      FZ_VIEW_BYTES of it, front to back in pieces of varying sizes, a
 *      piece again, and its last bytes when its size is known.
 * Any status is fine; crashes, leaks, undefined behaviour, timeouts, and
 * views that break their promises are not:
 *   - a read returns at most what was asked, less only at the end (a read
 *     there returns 0 bytes), the same bytes when asked again;
 *   - a size, when known, fits an off_t, is where reads end, and an .npy
 *     is its header (the NumPy magic) and its .raw's bytes.
 */
#include "fuzz_util.h"

#include "format/tf_array.h"
#include "util/tf_bytes.h"
#include "views/tf_cells.h"
#include "views/tf_view.h"

enum {
	FZ_SMALL_CACHE = 0x01,	/* a 256 KiB cache: CSV blocks of 32 KiB, evicted and made again */
	FZ_FRAGMENTS = 0x02,	/* read every fragment's own cells.csv too */
};

#define FZ_ARRAY "array"
#define FZ_MAX_FILES 256
/* Bytes read of each view: far beyond any seed's output, small enough for
 * a lying array whose views are 2^62 bytes. */
#define FZ_VIEW_BYTES ((uint64_t)256 << 10)

typedef struct fz_input {
	uint8_t flags;
	fz_mem *src;
	tf_buf payloads[FZ_MAX_FILES];	/* generic tiles built from entries */
	size_t npayloads;
} fz_input;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	fz_verbose = getenv("FUZZ_VERBOSE") != NULL;
	return 0;
}

/* ---- the array in memory ------------------------------------------------------------------ */

static void add_entry(fz_input *in, uint8_t kind, const char *name, tf_span bytes)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/%s", FZ_ARRAY, name);
	if (kind == 1 && in->npayloads < FZ_MAX_FILES) {
		tf_buf *b = &in->payloads[in->npayloads++];

		tf_buf_init(b, SIZE_MAX);
		fz_generic(bytes, NULL, b);
		bytes = tf_span_of(b->p, b->len);
	}
	if (!fz_mem_add(in->src, path, bytes.p, bytes.n))
		fz_say("entry %s%s: skipped", name, "");
}

static bool parse_input(const uint8_t *data, size_t size, fz_input *in)
{
	tf_reader r;
	size_t files = 0;

	if (size < 1)
		return false;
	in->flags = data[0];
	in->src = fz_mem_new();
	r = tf_reader_of(tf_span_of(data + 1, size - 1));
	while (r.n && files++ < FZ_MAX_FILES) {
		uint8_t kind, len;
		uint32_t n;
		tf_span name, bytes;
		char path[256];

		if (tf_get_u8(&r, &kind, "", NULL) != TF_OK || tf_get_u8(&r, &len, "", NULL) != TF_OK ||
		    tf_get_span(&r, len, &name, "", NULL) != TF_OK || tf_get_u32(&r, &n, "", NULL) != TF_OK)
			break;
		if (n > r.n)
			n = (uint32_t)r.n;
		tf_get_span(&r, n, &bytes, "", NULL);
		if (memchr(name.p, '\0', name.n))
			continue;
		snprintf(path, sizeof(path), "%.*s", (int)name.n, (const char *)name.p);
		add_entry(in, kind & 1, path, bytes);
	}
	return true;
}

/* ---- reading the views ---------------------------------------------------------------------------- */

typedef struct fz_names {
	char name[FZ_MAX_FILES][320];
	tf_view_stat st[FZ_MAX_FILES];
	size_t n;
} fz_names;

static int collect(void *ctx, const char *name, const tf_view_stat *st)
{
	fz_names *l = ctx;

	if (l->n == FZ_MAX_FILES)
		return 1;
	snprintf(l->name[l->n], sizeof(l->name[0]), "%s", name);
	l->st[l->n++] = *st;
	return 0;
}

static void check_size(const tf_view_stat *st)
{
	if (st->size_known && st->size > (uint64_t)INT64_MAX)
		fz_fail("stat", "a size past what an off_t says");
	if (!st->size_known && st->size)
		fz_fail("stat", "an unknown size that is not 0");
}

/* Read [off, off + len) and check the byte count: all of it, or up to the
 * end (size, when known).  Returns the count (0 on an error). */
static size_t read_at(tf_view *w, tf_workspace *ws, uint64_t off, size_t len, uint8_t *buf, bool *failed)
{
	uint64_t size;
	size_t got = 0;
	tf_error err;

	if (tf_view_read(w, ws, off, len, buf, &got, &err) != TF_OK) {
		fz_say("read: %s%s", err.msg, "");
		*failed = true;
		return 0;
	}
	if (got > len)
		fz_fail("read", "more bytes than asked for");
	if (tf_view_size(w, &size) && got != (off >= size ? 0 : size - off < len ? size - off : len))
		fz_fail("read", "a byte count other than the size says");
	return got;
}

/* At most FZ_VIEW_BYTES of a view, front to back, then checks. */
static void read_view(tf_views *v, const char *rel, tf_workspace *ws)
{
	static const size_t lens[] = { 4096, 1, 65536, 7, 20000, 512, 131072, 3 };
	uint8_t *buf = malloc(131072 + 1), *again = malloc(131072 + 1), head[16];
	uint64_t off = 0, size, first = 0;
	bool failed = false, ended = false;
	tf_view *w;
	tf_error err;

	if (!buf || !again)
		fz_fail("read", "out of memory");
	if (tf_view_open(v, rel, &w, &err) != TF_OK) {
		fz_say("open %s: %s", rel, err.msg);
		free(buf);
		free(again);
		return;
	}
	for (size_t i = 0; !failed && !ended && off < FZ_VIEW_BYTES; i++) {
		size_t len = lens[i % (sizeof(lens) / sizeof(lens[0]))];
		size_t got = read_at(w, ws, off, len, buf, &failed);

		if (i == 0)
			memcpy(head, buf, (first = got < sizeof(head) ? got : sizeof(head)));
		if (!failed && got < len) {	/* the end: nothing after it */
			ended = true;
			if (read_at(w, ws, off + got, 100, again, &failed) != 0 && !failed)
				fz_fail("read", "bytes after a short read");
			if (!failed && (!tf_view_size(w, &size) || size != off + got))
				fz_fail("read", "read to the end, and the size is not known or not there");
		}
		off += got;
	}
	/* The first bytes again (a CSV block made again, or from the cache). */
	if (!failed && first && (read_at(w, ws, 0, (size_t)first, again, &failed) != first ||
				 memcmp(again, head, (size_t)first)) && !failed)
		fz_fail("read", "other bytes when read again");
	/* The last bytes, when the size is known. */
	if (!failed && tf_view_size(w, &size) && size)
		read_at(w, ws, size - (size < 100 ? size : 100), 100, buf, &failed);
	fz_say("read %s: %s", rel, failed ? "failed" : "ok");
	tf_view_close(w);
	free(buf);
	free(again);
}

/* A .raw and its .npy: the .npy is the NumPy header and the same size
 * more; both have a shape and a dtype. */
static void check_matrix(tf_views *v, const char *raw, tf_workspace *ws)
{
	char npy[330], value[TF_NPY_SHAPE_MAX];
	uint8_t magic[8];
	tf_view_stat rs, ns;
	tf_view *w;
	size_t len, got;
	tf_error err;

	snprintf(npy, sizeof(npy), "%.*s.npy", (int)(strlen(raw) - 4), raw);
	if (tf_views_stat(v, raw, &rs, &err) != TF_OK || tf_views_stat(v, npy, &ns, &err) != TF_OK)
		fz_fail("matrix", "a .raw without its .npy");
	/* Both too large to show (size 0), or the header and the cells. */
	if (!rs.size_known || !ns.size_known || (ns.size ? ns.size <= rs.size : rs.size != 0))
		fz_fail("matrix", "a .npy that is not its header and the .raw");
	if (tf_views_getxattr(v, raw, "user.tilefs.shape", value, sizeof(value), &len, &err) != TF_OK ||
	    tf_views_getxattr(v, npy, "user.tilefs.dtype", value, sizeof(value), &len, &err) != TF_OK)
		fz_fail("matrix", "no shape or dtype");
	if (ns.size && tf_view_open(v, npy, &w, &err) == TF_OK) {
		if (tf_view_read(w, ws, 0, sizeof(magic), magic, &got, &err) == TF_OK &&
		    (got != sizeof(magic) || memcmp(magic, "\x93NUMPY\x01\x00", 8)))
			fz_fail("matrix", "a .npy without the NumPy magic");
		tf_view_close(w);
	}
}

static void read_dir(tf_views *v, const char *dir, tf_workspace *ws, uint8_t flags, int depth)
{
	fz_names *l = calloc(1, sizeof(*l));
	char rel[700];
	tf_error err;

	if (!l)
		fz_fail("list", "out of memory");
	if (tf_views_list(v, dir, collect, l, &err) != TF_OK)
		fz_fail("list", err.msg);	/* listed by its parent: it lists */
	for (size_t i = 0; i < l->n; i++) {
		tf_view_stat st;
		size_t len;

		snprintf(rel, sizeof(rel), "%s%s%s", dir, *dir ? "/" : "", l->name[i]);
		check_size(&l->st[i]);
		if (tf_views_stat(v, rel, &st, &err) != TF_OK)
			fz_fail("stat", "a listed entry does not stat");
		if (tf_views_listxattr(v, rel, NULL, 0, &len, &err) != TF_OK)
			fz_fail("listxattr", err.msg);
		if (st.dir) {
			if (depth < 2 && (depth == 0 || flags & FZ_FRAGMENTS))
				read_dir(v, rel, ws, flags, depth + 1);
			continue;
		}
		if (strlen(rel) > 4 && !strcmp(rel + strlen(rel) - 4, ".raw"))
			check_matrix(v, rel, ws);
		read_view(v, rel, ws);
	}
	free(l);
}

static void run(fz_input *in)
{
	tf_workspace *ws = tf_workspace_new();
	tf_array *a;
	tf_cache *cache;
	tf_views *v;
	tf_error err;

	if (!ws)
		fz_fail("workspace", "out of memory");
	if (!tf_array_detect(&in->src->base, FZ_ARRAY) ||
	    tf_array_open(&in->src->base, FZ_ARRAY, NULL, &a, &err) != TF_OK) {
		tf_workspace_free(ws);
		return;
	}
	if (tf_cache_new(in->flags & FZ_SMALL_CACHE ? (size_t)256 << 10 : (size_t)1 << 20, 0, &cache, &err) != TF_OK)
		fz_fail("cache", err.msg);
	if (tf_views_open(a, cache, &v, &err) == TF_OK) {
		fz_say("views: open%s%s", "", "");
		(void)tf_views_keyed(v);
		(void)tf_views_current(v);
		read_dir(v, "", ws, in->flags, 0);
		tf_views_unref(v);
	} else {
		fz_say("views: %s%s", err.msg, "");
	}
	tf_cache_free(cache);
	tf_array_free(a);
	tf_workspace_free(ws);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz_input in;

	memset(&in, 0, sizeof(in));
	if (parse_input(data, size, &in))
		run(&in);
	if (in.src)
		tf_source_free(&in.src->base);
	for (size_t i = 0; i < in.npayloads; i++)
		tf_buf_free(&in.payloads[i]);
	return 0;
}
