/*
 * tf_walk.h - a source's tree, walked: every regular file and directory
 * beneath a directory, given one at a time to a callback.
 *
 * The walk is depth first in listing order: a directory is given, then
 * entered, before the entries after it.  Each directory is listed whole,
 * with stats, before the first of its entries is given (no listing stays
 * open while the callback works: it may take long, e.g. index a file).
 * Symlinks are neither given nor followed; FIFOs, sockets and devices are
 * not given.  The walk is iterative: it holds the listings of the
 * directories on the way to the current one, and its depth is bounded by
 * PATH_MAX (a longer path is an error, below), not by the C stack.  No
 * bound on the entries of one directory but memory.
 *
 * Errors: a directory the source cannot list (its error, naming it), or a
 * path past PATH_MAX (TF_E_INVAL, "path too long: DIR/NAME").  By default
 * the walk stops at the first and returns it.  With TF_WALK_KEEP_GOING it
 * passes over them (what a listing gave before it failed is still walked)
 * and returns TF_OK.  Running out of memory for a listing is an error
 * either way (TF_E_NOMEM).
 */
#ifndef TF_WALK_H
#define TF_WALK_H

#include "sources/tf_source.h"
#include "util/tf_status.h"

/* rel: the entry's path in the source ("a/b/c.tdb"); st: its stat.
 * Returns 0 to go on, non-zero to stop the walk (not an error). */
typedef int (*tf_walk_fn)(void *ctx, const char *rel, const tf_stat *st);

enum { TF_WALK_KEEP_GOING = 1 };

/* Walk the tree beneath directory top of s ("." for the root, not given
 * to fn itself). */
tf_status tf_walk(tf_source *s, const char *top, unsigned flags, tf_walk_fn fn, void *ctx,
		  tf_error *err);

#endif
