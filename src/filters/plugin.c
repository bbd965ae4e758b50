/*
 * plugin.c - loading filter plugins from a plugin path (plugin.h).
 */
#include "config.h"

#include "plugin.h"

#include <dirent.h>
#include <dlfcn.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "hdf5.h"

typedef struct plugin {
	const tf_filter_class *cls;
	tf_hdf5_filter *hdf5;	/* the adapter of an HDF5 plugin, else NULL */
	void *handle;		/* dlopen handle */
	char *file;
} plugin;

struct tf_plugins {
	char *path;
	plugin *v;
	size_t n, cap;
	tf_plugin_warn_fn warn;
	void *ctx;
};

/* What a tilefs plugin may call (plugin.h). */
static const tf_plugin_host host = {
	.abi = TF_PLUGIN_ABI,
	.err = tf_err,
	.stage_output = tf_stage_output,
	.buf_grow = tf_buf_grow,
	.buf_append = tf_buf_append,
	.parts_add = tf_parts_add,
};

static void warn(const tf_plugins *pl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(const tf_plugins *pl, const char *fmt, ...)
{
	char msg[TF_ERRMSG_MAX + PATH_MAX];
	va_list ap;

	if (!pl->warn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pl->warn(pl->ctx, msg);
}

const char *tf_plugins_env_path(void)
{
	const char *p = getenv("TILEFS_PLUGIN_PATH");

	return p ? p : getenv("HDF5_PLUGIN_PATH");
}

/* ---- verifying what a file provides ------------------------------------------------- */

static bool valid_name(const char *s)
{
	if (!s || !isalpha((unsigned char)*s) || strlen(s) > 64)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.')
			return false;
	return true;
}

/* A tilefs plugin's class, checked against the built-ins and plugins so far. */
static tf_status check_native(const tf_plugins *pl, const tf_plugin_info *info, tf_error *err)
{
	const tf_filter_class *c = info ? info->cls : NULL;

	if (!info)
		return tf_err(err, TF_E_INVAL, "%s() returned NULL", TF_PLUGIN_ENTRY);
	if (info->abi != TF_PLUGIN_ABI)
		return tf_err(err, TF_E_INVAL, "built for plugin ABI %u, this tilefs has %u",
			      info->abi, TF_PLUGIN_ABI);
	if (!c || !valid_name(c->name) || !c->decode || c->layout > TF_OPTS_CD_VALUES ||
	    c->hdf5_id || c->id == TF_F_NONE || c->id == TF_F_NO_ID)
		return tf_err(err, TF_E_INVAL, "not a valid filter class (name, id 1-254, decode, layout)");
	if (tf_filter_by_id(c->id))
		return tf_err(err, TF_E_INVAL, "filter id %u is TileDB's %s: a plugin cannot replace it",
			      c->id, tf_filter_by_id(c->id)->name);
	if (tf_filter_by_name(c->name, strlen(c->name)) || !strncasecmp(c->name, "hdf5", 4) ||
	    !strncasecmp(c->name, "tiledb", 6))
		return tf_err(err, TF_E_INVAL, "name '%s' is taken by a built-in filter", c->name);
	for (size_t i = 0; i < pl->n; i++)
		if (!pl->v[i].cls->hdf5_id && (pl->v[i].cls->id == c->id ||
					       !strcasecmp(pl->v[i].cls->name, c->name)))
			return tf_err(err, TF_E_INVAL, "filter %u '%s' clashes with %u '%s' of %s", c->id,
				      c->name, pl->v[i].cls->id, pl->v[i].cls->name, pl->v[i].file);
	return TF_OK;
}

/* Which kind of plugin `h` is, and its class; err says why it is refused. */
static tf_status adopt(tf_plugins *pl, void *h, plugin *p, tf_error *err)
{
	tf_plugin_entry_fn entry = (tf_plugin_entry_fn)dlsym(h, TF_PLUGIN_ENTRY);
	tf_h5pl_type_fn type = (tf_h5pl_type_fn)dlsym(h, "H5PLget_plugin_type");
	tf_h5pl_info_fn info = (tf_h5pl_info_fn)dlsym(h, "H5PLget_plugin_info");
	tf_status rc;

	if (entry) {
		const tf_plugin_info *pi = entry(&host);
		if ((rc = check_native(pl, pi, err)) == TF_OK)
			p->cls = pi->cls;
		return rc;
	}
	if (!type || !info)
		return tf_err(err, TF_E_INVAL, "neither a tilefs filter plugin (%s) nor an HDF5 one "
			      "(H5PLget_plugin_type, H5PLget_plugin_info)", TF_PLUGIN_ENTRY);
	if ((rc = tf_hdf5_filter_new(type, info, &p->hdf5, err)) != TF_OK)
		return rc;
	p->cls = tf_hdf5_filter_class(p->hdf5);
	for (size_t i = 0; i < pl->n && rc == TF_OK; i++)
		if (pl->v[i].cls->hdf5_id == p->cls->hdf5_id)
			rc = tf_err(err, TF_E_INVAL, "HDF5 filter %u is provided by %s already",
				    p->cls->hdf5_id, pl->v[i].file);
	if (rc != TF_OK)
		tf_hdf5_filter_free(p->hdf5);
	return rc;
}

/* ---- loading ---------------------------------------------------------------------- */

static tf_status load_file(tf_plugins *pl, const char *file, tf_error *err)
{
	plugin p = { 0 };
	tf_error why;
	void *h;

	if (pl->n == pl->cap) {
		size_t cap = pl->cap ? 2 * pl->cap : 8;
		plugin *v = realloc(pl->v, cap * sizeof(*v));
		if (!v)
			return tf_err(err, TF_E_NOMEM, "out of memory");
		pl->v = v;
		pl->cap = cap;
	}
	/* RTLD_NOW: a missing symbol is found here, not in the middle of a read. */
	if (!(h = dlopen(file, RTLD_NOW | RTLD_LOCAL))) {
		warn(pl, "plugin %s skipped: %s", file, dlerror());
		return TF_OK;
	}
	if (adopt(pl, h, &p, &why) != TF_OK) {
		warn(pl, "plugin %s skipped: %s", file, why.msg);
		dlclose(h);
		return TF_OK;
	}
	if (!(p.file = strdup(file))) {
		tf_hdf5_filter_free(p.hdf5);
		dlclose(h);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	p.handle = h;
	pl->v[pl->n++] = p;
	return TF_OK;
}

static int so_file(const struct dirent *d)
{
	size_t n = strlen(d->d_name);

	return n > 3 && !strcmp(d->d_name + n - 3, ".so");
}

/* Every *.so regular file in dir, in name order. */
static tf_status load_dir(tf_plugins *pl, const char *dir, tf_error *err)
{
	struct dirent **names;
	int n = scandir(dir, &names, so_file, alphasort);
	tf_status rc = TF_OK;

	if (n < 0) {
		warn(pl, "plugin directory %s skipped: %s", dir, strerror(errno));
		return TF_OK;
	}
	for (int i = 0; i < n; i++) {
		char file[PATH_MAX];
		struct stat st;

		if (rc == TF_OK && snprintf(file, sizeof(file), "%s/%s", dir, names[i]->d_name) <
		    (int)sizeof(file) && stat(file, &st) == 0 && S_ISREG(st.st_mode))
			rc = load_file(pl, file, err);
		free(names[i]);
	}
	free(names);
	return rc;
}

tf_status tf_plugins_load(const char *path, tf_plugin_warn_fn warn_fn, void *ctx, tf_plugins **out,
			  tf_error *err)
{
	tf_plugins *pl = calloc(1, sizeof(*pl));
	char *dirs = strdup(path ? path : ""), *save = NULL;
	tf_status rc = TF_OK;

	if (!pl || !dirs || !(pl->path = strdup(dirs))) {
		free(dirs);
		tf_plugins_free(pl);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	pl->warn = warn_fn;
	pl->ctx = ctx;
	for (char *d = strtok_r(dirs, ":", &save); d && rc == TF_OK; d = strtok_r(NULL, ":", &save))
		rc = load_dir(pl, d, err);
	free(dirs);
	if (rc != TF_OK) {
		tf_plugins_free(pl);
		return rc;
	}
	pl->warn = NULL;	/* the callback's context need not outlive loading */
	*out = pl;
	return TF_OK;
}

void tf_plugins_free(tf_plugins *pl)
{
	if (!pl)
		return;
	for (size_t i = 0; i < pl->n; i++) {
		tf_hdf5_filter_free(pl->v[i].hdf5);
		dlclose(pl->v[i].handle);
		free(pl->v[i].file);
	}
	free(pl->v);
	free(pl->path);
	free(pl);
}

/* ---- lookups ------------------------------------------------------------------------- */

const char *tf_plugins_path(const tf_plugins *pl)
{
	return pl ? pl->path : "";
}

const tf_filter_class *tf_plugins_by_name(const tf_plugins *pl, const char *name, size_t len)
{
	for (size_t i = 0; pl && i < pl->n; i++) {
		const tf_filter_class *c = pl->v[i].cls;
		if (!c->hdf5_id && strlen(c->name) == len && !strncasecmp(c->name, name, len))
			return c;
	}
	return NULL;
}

const tf_filter_class *tf_plugins_by_id(const tf_plugins *pl, unsigned id)
{
	for (size_t i = 0; pl && i < pl->n; i++)
		if (!pl->v[i].cls->hdf5_id && pl->v[i].cls->id == id)
			return pl->v[i].cls;
	return NULL;
}

const tf_filter_class *tf_plugins_by_hdf5_id(const tf_plugins *pl, unsigned id)
{
	for (size_t i = 0; pl && i < pl->n; i++)
		if (pl->v[i].cls->hdf5_id && pl->v[i].cls->hdf5_id == id)
			return pl->v[i].cls;
	return NULL;
}

size_t tf_plugins_count(const tf_plugins *pl)
{
	return pl ? pl->n : 0;
}

const tf_filter_class *tf_plugins_class(const tf_plugins *pl, size_t i)
{
	return pl && i < pl->n ? pl->v[i].cls : NULL;
}

const char *tf_plugins_file(const tf_plugins *pl, size_t i)
{
	return pl && i < pl->n ? pl->v[i].file : NULL;
}
