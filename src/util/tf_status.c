/* tf_status.c - error messages with layered context. */
#include "util/tf_status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

tf_status tf_err(tf_error *err, tf_status code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return code;
}

tf_status tf_err_prefix(tf_error *err, const char *fmt, ...)
{
	char old[TF_ERRMSG_MAX];
	size_t n;
	va_list ap;

	if (!err)
		return TF_E_INVAL;
	memcpy(old, err->msg, sizeof(old));
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	/* Append ": old" after the prefix, truncating if need be. */
	n = strlen(err->msg);
	if (n + 2 < sizeof(err->msg)) {
		memcpy(err->msg + n, ": ", 2);
		memccpy(err->msg + n + 2, old, '\0', sizeof(err->msg) - n - 2);
		err->msg[sizeof(err->msg) - 1] = '\0';
	}
	return err->code;
}

const char *tf_status_str(tf_status st)
{
	switch (st) {
	case TF_OK: return "success";
	case TF_E_CORRUPT: return "corrupt data";
	case TF_E_CHECKSUM: return "checksum mismatch";
	case TF_E_AUTH: return "authentication failed (wrong key or tampered data)";
	case TF_E_NOKEY: return "encrypted data and no key";
	case TF_E_IO: return "I/O error";
	case TF_E_NOMEM: return "out of memory or over a size limit";
	case TF_E_INVAL: return "invalid argument";
	case TF_E_UNSUPPORTED: return "unsupported";
	case TF_E_STALE: return "source changed";
	case TF_E_NOTFOUND: return "not found";
	case TF_E_ACCESS: return "access refused";
	case TF_E_INTR: return "interrupted";
	}
	return "unknown error";
}
