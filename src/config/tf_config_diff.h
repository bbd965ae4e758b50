/*
 * tf_config_diff.h - what a reload changes: two configurations compared,
 * and the settings only a mount makes carried to the new one.
 * Implemented by tf_config_diff.c; tf_config.h includes it.
 */
#ifndef TF_CONFIG_DIFF_H
#define TF_CONFIG_DIFF_H

#include <stddef.h>

typedef struct tf_config tf_config;

/*
 * Reloading (a daemon's SIGHUP, tf_config_diff.c).  tf_config_changes
 * says what nc changes from old, in words ("[key k] changed; [match *.tdb]
 * added; cache_size changed: applies at the next mount"), "; "-separated
 * into buf (truncated to n), and returns how many changes it found (0:
 * none).  Key material never appears in it.  tf_config_keep_mount_settings
 * gives nc the settings only a mount makes (cache_size, index_cache,
 * workers, views, index_dir, index_max_size, index_at_mount; [s3] and
 * plugin_path are read at mount only, as they are part of the source and
 * of the loaded plugins); old must outlive nc.
 */
size_t tf_config_changes(const tf_config *old, const tf_config *nc, char *buf, size_t n);
void tf_config_keep_mount_settings(tf_config *nc, const tf_config *old);

#endif
