/*
 * reframe.c - make-seeds' helper: a fragment metadata file with its generic
 * tiles stored without filters, so that the fuzzer mutates the tile lists
 * themselves instead of gzip streams that no longer inflate.
 *
 *   reframe IN OUT
 *
 * IN is a __fragment_metadata.tdb (not encrypted).  Its generic tiles are
 * walked from offset 0 and each one's payload is written again as a generic
 * tile with no filters (fuzz_util.h, fz_generic); what follows them (the
 * footer and its length, §8.4) is copied, with every 8 bytes anywhere in
 * it that spell the old offset of a generic tile replaced by the new one.
 * That rewrites the footer's offsets without parsing it; a coincidence
 * elsewhere in the footer only makes a seed that fails early.
 * Exit status: 0 written, 1 nothing to reframe or an error.
 */
#include "fuzz_util.h"

#include "format/tf_tile.h"

#define MAX_TILES 4096

static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p = NULL;
	long len;

	if (!f || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
	    !(p = malloc((size_t)len + 1)) || fread(p, 1, (size_t)len, f) != (size_t)len) {
		fprintf(stderr, "reframe: cannot read %s\n", path);
		exit(1);
	}
	fclose(f);
	*n = (size_t)len;
	return p;
}

/* Whether the bytes from pos on are a footer and its u64 length. */
static bool footer_at(const uint8_t *p, size_t n, size_t pos)
{
	return n - pos >= 8 && tf_le64(p + n - 8) == n - 8 - pos;
}

int main(int argc, char **argv)
{
	static uint64_t old_at[MAX_TILES], new_at[MAX_TILES];
	tf_buf out = TF_BUF_INIT(SIZE_MAX), payload = TF_BUF_INIT((size_t)1 << 30);
	tf_workspace *ws = tf_workspace_new();
	size_t n, pos = 0, ntiles = 0, footer, end;
	uint8_t *in;

	if (argc != 3 || !ws) {
		fprintf(stderr, "usage: reframe IN OUT\n");
		return 1;
	}
	in = slurp(argv[1], &n);
	while (pos < n && ntiles < MAX_TILES && !(pos && footer_at(in, n, pos))) {
		uint64_t used;

		payload.len = 0;
		if (tf_generic_decode(tf_span_of(in + pos, n - pos), NULL, ws, &payload, &used, NULL) != TF_OK)
			break;	/* formats 3-9: a footer without a length */
		old_at[ntiles] = pos;
		new_at[ntiles++] = out.len;
		fz_generic(tf_span_of(payload.p, payload.len), NULL, &out);
		pos += (size_t)used;
	}
	if (!ntiles)
		return 1;
	footer = out.len;
	if (tf_buf_append(&out, in + pos, n - pos, NULL) != TF_OK)
		return 1;
	end = out.len - (footer_at(in, n, pos) ? 8 : 0);	/* the length stays */
	for (size_t at = footer; at + 8 <= end; at++)
		for (size_t t = 1; t < ntiles; t++)
			if (tf_le64(out.p + at) == old_at[t]) {
				tf_put_le64(out.p + at, new_at[t]);
				break;
			}
	fz_write(argv[2], out.p, out.len, 0644);
	tf_buf_free(&out);
	tf_buf_free(&payload);
	tf_workspace_free(ws);
	free(in);
	return 0;
}
