/*
 * tf_config.h - what to decode how: the INI configuration (conf/tilefs.ini
 * documents every key).
 *
 *   [tilefs]          cache_size, unmatched, log_level, workers, default_key,
 *                     plugin_path, views, index_dir, index_max_size, index_at_mount,
 *                     metadata_walk
 *   [pipeline NAME]   filters, datatype, cell_val_num, format_version
 *   [key NAME]        file | env | hex
 *   [match GLOB]      pipeline = NAME or inline filters/datatype/...,
 *                     key, generic, var_data; first match wins
 *   [array PATH]      key  (TileDB arrays under SOURCE, decoded from their schema)
 *   [s3]              endpoint, region, path_style, profile, anonymous, list_ttl,
 *                     credentials, timeout, retries, max_requests (tf_s3.h)
 *
 * Any error (unknown section or key, bad value, bad filter spec, missing or
 * world-readable key file, bad glob) fails the load with "FILE:LINE: message".
 * Key material is never part of a message.
 *
 * Filter plugins (filters/plugin.h) come from plugin_path (relative
 * directories are relative to the file), or with no plugin_path (and for
 * tf_config_default) from $TILEFS_PLUGIN_PATH, else $HDF5_PLUGIN_PATH;
 * specs may name them, and a plugin is loaded when a spec first does.  A
 * place or plugin that cannot be used is skipped with a warning
 * (tf_config_warning); a spec naming a filter no plugin provides fails the
 * load at its line.
 */
#ifndef TF_CONFIG_H
#define TF_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "config/tf_budget.h"
#include "config/tf_glob.h"
#include "util/tf_keys.h"
#include "format/tf_pipeline.h"
#include "util/tf_status.h"

typedef struct tf_config tf_config;

typedef enum { TF_LOG_ERROR, TF_LOG_WARN, TF_LOG_INFO, TF_LOG_DEBUG } tf_log_level;

typedef struct tf_settings {
	uint64_t cache_size;		/* decoded-chunk cache budget, bytes */
	uint64_t index_budget;		/* chunk indexes kept for closed files, bytes */
	bool hide_unmatched;		/* unmatched = hide */
	tf_log_level log_level;
	unsigned workers;		/* decode-ahead threads; 0 = one per CPU, plus one */
	const tf_key *default_key;	/* for TileDB arrays with no [array] key */
	bool views;			/* views = yes: each array's @views folder */
	const char *index_dir;		/* persisted indexes: NULL the default, "none" */
	const char *index_dir_at;	/* "FILE:LINE" that set it, NULL if no file did */
	uint64_t index_max_size;	/* their bound in bytes (0: the default) */
	bool index_at_mount;		/* index the whole source in the background */
	bool metadata_headers;		/* metadata_walk = headers (default window) */
} tf_settings;

/* How files a [match] rule selects are decoded. */
typedef struct tf_rule {
	const char *pattern;
	const tf_pipeline *pipeline;	/* never NULL: empty pipeline if none given */
	tf_datatype type;
	uint32_t cell_val_num;
	uint32_t version;
	const tf_key *key;
	bool generic;
	const char *var_data;		/* sibling data file of folded offsets, or NULL */
	int line;
} tf_rule;

tf_status tf_config_load(const char *path, tf_config **out, tf_error *err);
/* The configuration of no file: defaults only. */
tf_status tf_config_default(tf_config **out, tf_error *err);
void tf_config_free(tf_config *c);

const tf_settings *tf_config_settings(const tf_config *c);
/* The loaded filter plugins (valid while c is). */
const tf_plugins *tf_config_plugins(const tf_config *c);
/* From now on no call into a plugin waits (tf_plugins_stop): for a daemon
 * on its way out.  Safe from any thread. */
void tf_config_stop_plugins(tf_config *c);
/* What loading skipped ("FILE:LINE: plugin P skipped: why"), to be shown
 * once by the program. */
size_t tf_config_nwarnings(const tf_config *c);
const char *tf_config_warning(const tf_config *c, size_t i);
/* The [s3] section (defaults when there is none), for tf_source_open. */
struct tf_s3_settings;
const struct tf_s3_settings *tf_config_s3(const tf_config *c);
/* Lock every key in memory again (locks do not survive fork()). */
void tf_config_lock_keys(tf_config *c);
/* Override the cache budget (mount option cache_size=, text as in the
 * file, checked as tf_parse_budget does). */
tf_status tf_config_set_cache_size(tf_config *c, const char *size, tf_error *err);
/* Turn the views folders on (mount option views). */
void tf_config_set_views(tf_config *c, bool on);
/* Override index_dir (a path, or "none") and index_at_mount (mount options). */
bool tf_config_set_index_dir(tf_config *c, const char *dir);
void tf_config_set_index_at_mount(tf_config *c, bool on);
/* Override one [s3] setting (mount options cache_dir, cache_dir_size,
 * cache_dir_min_free): tf_s3_settings_set, a relative path taken from the
 * working directory. */
tf_status tf_config_set_s3(tf_config *c, const char *name, const char *value, tf_error *err);
/* The first rule whose glob matches relpath (relative to SOURCE), or NULL. */
const tf_rule *tf_config_match(const tf_config *c, const char *relpath);
/* Key for the TileDB array at relpath ([array] rule, else default_key). */
const tf_key *tf_config_array_key(const tf_config *c, const char *relpath);

/* Reloading: tf_config_diff.h (whoever holds a configuration may compare two). */
#include "config/tf_config_diff.h"

#endif
