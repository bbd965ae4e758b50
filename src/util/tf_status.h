/*
 * tf_status.h - the one error convention of the tilefs library.
 *
 * Every fallible function returns a tf_status: TF_OK (0) or a negative code.
 * It may also fill a caller-supplied tf_error with a human message.  Layers
 * add context on the way up by prefixing ("tile 3, chunk 1: zstd: ..."), so
 * the final message names file, tile, chunk and filter.  Passing a NULL
 * tf_error is always allowed.  The library never exits or aborts.
 */
#ifndef TF_STATUS_H
#define TF_STATUS_H

#include <stddef.h>

typedef enum tf_status {
	TF_OK = 0,
	TF_E_CORRUPT = -1,	/* malformed, truncated or lying input */
	TF_E_CHECKSUM = -2,	/* MD5/SHA-256 digest mismatch */
	TF_E_AUTH = -3,		/* AES-GCM tag mismatch: wrong key or tampered */
	TF_E_NOKEY = -4,	/* encrypted data and no key supplied */
	TF_E_IO = -5,		/* the operating system failed a read/open */
	TF_E_NOMEM = -6,	/* allocation failed or a size limit was hit */
	TF_E_INVAL = -7,	/* bad argument, spec, option or config */
	TF_E_UNSUPPORTED = -8,	/* valid but not handled (e.g. no webp) */
	TF_E_STALE = -9,	/* the source file changed under us */
	TF_E_NOTFOUND = -10,	/* no such file or directory in the source */
	TF_E_ACCESS = -11,	/* the source refuses: permissions, a symlink on the way */
	TF_E_INTR = -12,	/* given up: whoever asked went away (tf_cancel) */
} tf_status;

#define TF_ERRMSG_MAX 480

typedef struct tf_error {
	tf_status code;
	char msg[TF_ERRMSG_MAX];
} tf_error;

/* Record code and a printf-style message in err (if non-NULL); returns code. */
tf_status tf_err(tf_error *err, tf_status code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prefix the message already in err with more context; returns err->code
 * (or TF_E_INVAL when err is NULL, which callers only use as "failed"). */
tf_status tf_err_prefix(tf_error *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* A short name for a status ("corrupt data", "checksum mismatch", ...). */
const char *tf_status_str(tf_status st);

#endif
