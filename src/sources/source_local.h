/*
 * source_local.h - a local directory as a source (tf_source.h's interface;
 * confinement, versions and the descriptor pool: source_local.c).
 */
#ifndef TF_SOURCE_LOCAL_H
#define TF_SOURCE_LOCAL_H

#include "sources/tf_source.h"

/* A local directory; dir is opened once (O_DIRECTORY) and everything below
 * is resolved beneath that descriptor. */
tf_status tf_source_local(const char *dir, tf_source **out, tf_error *err);

#endif
