/*
 * fake.c - plugins for the plugin tests, one per -DKIND:
 *   KIND_H5_TYPE     an HDF5 plugin whose H5PLget_plugin_type is 1 (a VOL)
 *   KIND_ABI         a tilefs plugin built for another ABI
 *   KIND_BUILTIN     a tilefs plugin claiming TileDB's id 2 (zstd)
 *   KIND_REALLOC     a good HDF5 plugin, id 40000: forward prepends the
 *                    u64 LE length, reverse checks and drops it.  It
 *                    realloc()s the buffer it is given (cd_values[0] = 0),
 *                    or replaces it with a new one (2), or claims 100 bytes
 *                    more than the chunk has (1), or returns the right size
 *                    in a 16-byte buffer, saying so in *buf_size (3) or not
 *                    (4): the buffer-ownership and size-check paths of
 *                    filters/hdf5.c.
 *   KIND_MARKER      KIND_REALLOC's filter as id 40001, in a plugin whose
 *                    constructor appends a line to the file named by
 *                    TF_PLUGIN_MARKER: proof that tilefs ran its code.
 *   KIND_HANG        KIND_REALLOC's filter as id 40002, except that decoding
 *                    never returns: it creates the file named by
 *                    TF_PLUGIN_HUNG, then waits for ever.
 *   KIND_WILD        a tilefs plugin "wild" (id 202) whose decode leaves its
 *                    output in memory of its own, not in the buffers it is
 *                    given.
 */
#include <stdlib.h>
#include <string.h>

#include "filters/hdf5.h"
#include "filters/plugin.h"

#if defined(KIND_H5_TYPE) || defined(KIND_REALLOC) || defined(KIND_MARKER) || defined(KIND_HANG)
#include <fcntl.h>
#include <unistd.h>

int H5PLget_plugin_type(void);
const void *H5PLget_plugin_info(void);

static size_t shift(unsigned flags, size_t cd_nelmts, const unsigned cd_values[], size_t nbytes,
		    size_t *buf_size, void **buf)
{
	unsigned mode = cd_nelmts ? cd_values[0] : 0;
	unsigned char *p;

	if (!(flags & TF_H5Z_FLAG_REVERSE)) {
		if (!(p = realloc(*buf, nbytes + 8)))
			return 0;
		memmove(p + 8, p, nbytes);
		for (int i = 0; i < 8; i++)
			p[i] = (unsigned char)((unsigned long long)nbytes >> (8 * i));
		*buf = p;
		*buf_size = nbytes + 8;
		return nbytes + 8;
	}
	p = *buf;
#ifdef KIND_HANG
	{
		const char *hung = getenv("TF_PLUGIN_HUNG");
		int fd = hung ? open(hung, O_WRONLY | O_CREAT | O_CLOEXEC, 0644) : -1;

		if (fd >= 0)
			close(fd);
		for (;;)
			pause();
	}
#endif
	if (nbytes < 8)
		return 0;
	for (int i = 0; i < 8; i++)
		if (p[i] != (unsigned char)((unsigned long long)(nbytes - 8) >> (8 * i)))
			return 0;	/* *buf stays the caller's */
	if (mode == 2) {
		unsigned char *q = malloc(nbytes - 8 + 1);
		if (!q)
			return 0;
		memcpy(q, p + 8, nbytes - 8);
		free(p);
		*buf = q;
		*buf_size = nbytes - 8 + 1;
		return nbytes - 8;
	}
	memmove(p, p + 8, nbytes - 8);
	if (mode == 1) {	/* lies: 100 bytes more than the chunk had */
		if (!(p = realloc(p, nbytes + 100)))
			return 0;
		memset(p + nbytes - 8, 0, 108);
		*buf = p;
		*buf_size = nbytes + 100;
		return nbytes - 8 + 100;
	}
	if (mode == 3 || mode == 4) {	/* more bytes than the buffer it hands back */
		if (!(p = realloc(p, 16)))
			return 0;
		*buf = p;
		if (mode == 3)
			*buf_size = 16;
		return nbytes - 8;
	}
	*buf = realloc(p, nbytes - 8 + 1);	/* (a shrink cannot fail in glibc) */
	*buf_size = nbytes - 8 + 1;
	return nbytes - 8;
}

#ifdef KIND_MARKER
#define FAKE_ID 40001
__attribute__((constructor)) static void mark(void)
{
	const char *m = getenv("TF_PLUGIN_MARKER");
	int fd = m ? open(m, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;

	if (fd >= 0) {
		if (write(fd, "loaded\n", 7) != 7)
			abort();
		close(fd);
	}
}
#elif defined(KIND_HANG)
#define FAKE_ID 40002
#else
#define FAKE_ID 40000
#endif

static const tf_h5z_class2 cls = { TF_H5Z_CLASS_T_VERS, FAKE_ID, 1, 1, "fake shift filter", NULL, NULL,
				   shift };

#ifdef KIND_H5_TYPE
int H5PLget_plugin_type(void) { return 1; }
#else
int H5PLget_plugin_type(void) { return TF_H5PL_TYPE_FILTER; }
#endif
const void *H5PLget_plugin_info(void) { return &cls; }
#endif

#if defined(KIND_ABI) || defined(KIND_BUILTIN) || defined(KIND_WILD)
static tf_status decode(const tf_filter_opts *o, const tf_stage *st, tf_stream *s, tf_error *err)
{
#ifdef KIND_WILD
	static uint8_t elsewhere[16] = "not the data....";

	s->data = tf_span_of(elsewhere, sizeof(elsewhere));
#endif
	(void)o, (void)st, (void)s, (void)err;
	return TF_OK;
}

static const tf_filter_class fake = {
#ifdef KIND_BUILTIN
	.id = 2, .name = "myzstd",
#elif defined(KIND_WILD)
	.id = 202, .name = "wild",
#else
	.id = 201, .name = "newer",
#endif
	.layout = TF_OPTS_NONE, .decode = decode,
};

const tf_plugin_info *tilefs_filter_plugin(const tf_plugin_host *h)
{
#ifdef KIND_ABI
	static const tf_plugin_info info = { TF_PLUGIN_ABI + 98, &fake };
#else
	static const tf_plugin_info info = { TF_PLUGIN_ABI, &fake };
#endif
	(void)h;
	return &info;
}
#endif
