/*
 * plugin.h - filters loaded at run time from a plugin path (doc/plugins.md).
 *
 * A tf_plugins object stands for a configuration's plugin_path (or
 * TILEFS_PLUGIN_PATH, then HDF5_PLUGIN_PATH): the regular files named *.so
 * in each directory, in path order and name order within a directory.
 * Only trusted places count: directories (and every directory above them,
 * and every symlink on the way) owned by root or the effective user and
 * writable by no one else (a sticky directory above excepted), regular
 * files (never a symlink) likewise; anything else is refused with a
 * warning and nothing of it ever runs.
 *
 * Nothing is loaded until a lookup asks for a filter no loaded plugin
 * provides: then the files not loaded yet are dlopen'ed one at a time, in
 * order, until one provides it (an HDF5 plugin only says its id once
 * loaded).  So the answer is the first provider in path order, and a file
 * after it, or in a path no pipeline names a plugin filter of, never runs.
 * Each file is one of
 *
 *   1. a tilefs filter plugin: it exports TF_PLUGIN_ENTRY, which returns a
 *      tf_plugin_info whose abi must equal TF_PLUGIN_ABI and whose class is
 *      a tf_filter_class exactly like a built-in one (tf_filter.h), with a
 *      name and a TileDB-space id (1..254) that no built-in class and no
 *      plugin loaded before it has;
 *   2. an HDF5 filter plugin: H5PLget_plugin_type() returns 0 (a filter)
 *      and H5PLget_plugin_info() an H5Z_class2_t with a decoder (hdf5.h).
 *      It becomes a class named "hdf5:ID" that runs the plugin's filter
 *      function (hdf5.c); pipelines name it as hdf5:ID,cd_values...
 *
 * Anything else, and any plugin that fails to load or verify, is skipped
 * after one call of the warn callback naming the file.  The object owns
 * the loaded code: every class it returns (and every pipeline holding one)
 * is valid until tf_plugins_free().  Lookups may run from many threads at
 * once (loading is serialized inside).  dlopen'ed code is trusted as
 * whoever set the plugin path trusted it; the bytes it decodes are not
 * (hdf5.c checks what it can).  There is no global state: each tf_plugins
 * is independent.
 */
#ifndef TF_PLUGIN_H
#define TF_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "filters/tf_filter.h"

/* ---- writing a tilefs filter plugin ------------------------------------------------
 *
 * Build a shared object from one C file that includes this header and
 * exports TF_PLUGIN_ENTRY (see contrib/plugins/bytexor.c):
 *
 *     const tf_plugin_info *tilefs_filter_plugin(const tf_plugin_host *host);
 *
 * The plugin calls back into tilefs only through `host` (it links against
 * nothing of tilefs).  The layouts of every struct in tf_filter.h,
 * tf_bytes.h and tf_status.h are part of the ABI: TF_PLUGIN_ABI changes
 * whenever one of them, or tf_plugin_host, does.
 */
#define TF_PLUGIN_ABI 1
#define TF_PLUGIN_ENTRY "tilefs_filter_plugin"

typedef struct tf_plugin_host {
	uint32_t abi;		/* TF_PLUGIN_ABI of the host */
	tf_status (*err)(tf_error *err, tf_status code, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));
	/* tf_stage_output: start *out with room for n bytes. */
	tf_status (*stage_output)(const tf_stage *st, tf_buf *out, size_t n, tf_error *err);
	tf_status (*buf_grow)(tf_buf *b, size_t extra, uint8_t **at, tf_error *err);
	tf_status (*buf_append)(tf_buf *b, const void *src, size_t n, tf_error *err);
	tf_status (*parts_add)(tf_parts *p, tf_buf **part, tf_error *err);
} tf_plugin_host;

typedef struct tf_plugin_info {
	uint32_t abi;			/* TF_PLUGIN_ABI the plugin was built for */
	const tf_filter_class *cls;	/* must stay valid while the plugin is loaded */
} tf_plugin_info;

typedef const tf_plugin_info *(*tf_plugin_entry_fn)(const tf_plugin_host *host);
/* What a plugin defines (and tilefs never does). */
const tf_plugin_info *tilefs_filter_plugin(const tf_plugin_host *host);

/* ---- loading plugins -------------------------------------------------------------- */

typedef struct tf_plugins tf_plugins;

/* Told once per refused or skipped directory or file, with a message
 * naming it: by tf_plugins_load and by any lookup that loads files. */
typedef void (*tf_plugin_warn_fn)(void *ctx, const char *msg);

/*
 * The plugins under `path` (DIR[:DIR...]; NULL or "" has none): the
 * directories are checked and listed, their files checked; nothing is
 * loaded.  A directory that cannot be read is warned about and skipped like
 * a bad plugin; only running out of memory fails.  warn (if not NULL) is
 * kept, with ctx, until tf_plugins_free.
 */
tf_status tf_plugins_load(const char *path, tf_plugin_warn_fn warn, void *ctx, tf_plugins **out,
			  tf_error *err);
/*
 * Every decode through a plugin (and an HDF5 plugin's encode) runs on
 * threads of the plugin's own (filters/callout.h), on copies of what it
 * reads and writes; a tilefs plugin's decode gets no key, scratch or
 * offsets in its tf_stage.  From
 * tf_plugins_stop on, every call waiting for one fails at once with
 * TF_E_IO, and so does every later call: a plugin that never returns
 * keeps no thread of the caller's, so a daemon can exit (doc/plugins.md).
 * Safe from any thread, at any time; tf_plugins_free stops too, and
 * leaves loaded (and leaks) a plugin whose code a stopped call is still in.
 */
void tf_plugins_stop(tf_plugins *pl);
void tf_plugins_free(tf_plugins *pl);

/* The plugin path a program uses when nothing configures one:
 * TILEFS_PLUGIN_PATH, else HDF5_PLUGIN_PATH, else NULL. */
const char *tf_plugins_env_path(void);
/* The path given to tf_plugins_load ("" for none), for messages. */
const char *tf_plugins_path(const tf_plugins *pl);
/* The first directory or file refused as untrusted (its warning), or NULL:
 * for "no plugin provides" messages, while no other thread looks up. */
const char *tf_plugins_refused(const tf_plugins *pl);

/* A tilefs plugin's class by name (case-insensitive) or TileDB-space id;
 * loads files as the top of this header says.  NULL: none provides it. */
const tf_filter_class *tf_plugins_by_name(const tf_plugins *pl, const char *name, size_t len);
const tf_filter_class *tf_plugins_by_id(const tf_plugins *pl, unsigned id);
/* An HDF5 plugin's class by its HDF5 filter id. */
const tf_filter_class *tf_plugins_by_hdf5_id(const tf_plugins *pl, unsigned id);

/* Every class loaded so far (in load order) and the file it came from. */
size_t tf_plugins_count(const tf_plugins *pl);
const tf_filter_class *tf_plugins_class(const tf_plugins *pl, size_t i);
const char *tf_plugins_file(const tf_plugins *pl, size_t i);

#endif
