/*
 * tf_glob.h - the globs of [match] and [array] sections.  Implemented by
 * tf_glob.c; tf_config.h includes it.
 */
#ifndef TF_GLOB_H
#define TF_GLOB_H

#include <stdbool.h>

/* Glob match: '*' and '?' within a path segment, '[...]' classes, '**' for
 * any number of segments; a pattern without '/' matches the last segment. */
bool tf_glob_match(const char *pattern, const char *path);
/* Whether a pattern is well-formed (balanced brackets, no empty segment). */
bool tf_glob_valid(const char *pattern);

#endif
