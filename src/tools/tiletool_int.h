/*
 * tiletool_int.h - what tiletool.c (options, the other commands, main)
 * and encode.c (the encode command) share.  Nothing else includes this
 * file.
 */
#ifndef TILETOOL_INT_H
#define TILETOOL_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "config/tf_config.h"
#include "util/tf_keys.h"
#include "filters/plugin.h"
#include "util/tf_datatype.h"
#include "format/tf_pipeline.h"
#include "util/tf_bytes.h"

enum { EXIT_DATA = 1, EXIT_USAGE = 2 };

typedef struct opts {
	const char *spec, *keyfile, *out, *var_data, *var_spec, *config;
	tf_datatype type, var_type;
	uint32_t cell_val_num, version;
	uint64_t tile_size, tile_cells;
	const char *offsets_in, *offsets_out, *offsets_spec;
	const char *raw_attr, *npy_attr, *fragment;	/* export */
	bool arrow;			/* export: cells.arrow */
	uint64_t cache_size;
	const char *plugin_path;
	bool generic, verbose, have_spec, all;
	bool explicit;		/* any of -F -t -n -V --generic --var-*: no array lookup */
	/* resolved */
	tf_plugins *plugins;	/* outlives the pipelines, which hold its classes */
	tf_pipeline *pipeline, *var_pipeline;
	tf_key *key;
	tf_config *cfg;				/* -c: its [s3] section */
	const struct tf_s3_settings *s3;	/* NULL: defaults and environment */
} opts;


/* "tiletool", for messages. */
extern const char *const tiletool_prog;
/* A usage error: fmt with arg on stderr, and where help is; EXIT_USAGE. */
int tiletool_usage_error(const char *fmt, const char *arg);
/* Write n bytes of p to out, or the buffer b to a new file at path. */
bool tiletool_write_all(FILE *out, const uint8_t *p, size_t n);
bool tiletool_write_file(const char *path, const tf_buf *b);

/* tiletool encode (encode.c); returns the exit status. */
int tiletool_encode(opts *o, int nfiles, char **files);

#endif
