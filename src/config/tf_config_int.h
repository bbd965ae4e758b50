/*
 * tf_config_int.h - the parsed configuration's insides, for tf_config.c
 * (which builds it) and tf_config_diff.c (which compares two, on reload).
 * Nothing else includes this header.
 */
#ifndef TF_CONFIG_INT_H
#define TF_CONFIG_INT_H

#include "config/tf_config.h"
#include "config/tf_s3.h"

/* A datatype/filters/cell_val_num/format_version group, from a [pipeline]
 * section or inline in a [match] section. */
typedef struct fieldspec {
	char *filters;
	int filters_line;
	tf_datatype type;
	uint32_t cell_val_num, version;
	bool has_type, has_cells, has_version;
} fieldspec;

typedef struct pipe_sec {
	char *name;
	int line;
	fieldspec f;
	tf_pipeline *pipeline;
} pipe_sec;

typedef struct key_sec {
	char *name;
	int line;
	tf_key *key;
} key_sec;

typedef struct match_sec {
	tf_rule rule;
	char *pattern, *pipe_name, *key_name, *var_data;
	int pipe_line, key_line;
	fieldspec f;
	tf_pipeline *own;
} match_sec;

typedef struct array_sec {
	char *path, *key_name;
	int line;
	const tf_key *key;
} array_sec;

struct tf_config {
	char *path, *dir;
	tf_settings s;
	char *default_key_name;
	int default_key_line;
	pipe_sec *pipes;
	key_sec *keys;
	match_sec *rules;
	array_sec *arrays;
	size_t npipes, nkeys, nrules, narrays;
	tf_pipeline *empty;
	bool world_readable;	/* the config file itself */
	char *plugin_path;	/* [tilefs] plugin_path, as written */
	char *index_dir;	/* [tilefs] index_dir, resolved (s.index_dir) */
	char *index_dir_at;	/* "FILE:LINE" of it (s.index_dir_at) */
	int plugin_path_line;
	tf_plugins *plugins;	/* loaded by resolve(); outlives every pipeline */
	char *plugin_where;	/* "FILE:LINE" of plugin_path, or the variable, for warnings */
	char **warnings;	/* plugins refused or skipped, for the caller to show */
	size_t nwarnings;
	tf_s3_settings s3;	/* [s3] */
	bool s3_seen;
};

#endif
