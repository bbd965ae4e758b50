/*
 * tf_catalog.h - what a path under a source is, and how it decodes.
 *
 * The one place that answers "what is this file?": the first [match] rule
 * whose glob matches its path, else the TileDB array holding it (its own
 * schemas and fragment metadata say how, FORMAT.md §7-§9), else nothing:
 * it is shown as stored, or hidden (`unmatched = hide`).
 *
 * Arrays are found by their root (__schema/ or __array_schema.tdb; the
 * innermost root holding the path wins, as dimension-label arrays nest in
 * their array) and kept, least recently used first out beyond
 * TF_CATALOG_ARRAYS, with their schemas and fragment metadata.  A
 * directory found not to be an array is asked again after a second, so an
 * array created under a live mount is seen.  Thread-safe; no lock is held
 * while anything is read.
 */
#ifndef TF_CATALOG_H
#define TF_CATALOG_H

#include <stdint.h>

#include "cache/tf_cache.h"
#include "config/tf_config.h"
#include "format/tf_file.h"
#include "sources/tf_source.h"
#include "util/tf_status.h"
#include "views/tf_view.h"

#define TF_CATALOG_ARRAYS 64

typedef struct tf_catalog tf_catalog;

/* src and cfg are borrowed and must outlive the catalog. */
tf_status tf_catalog_new(tf_source *src, const tf_config *cfg, tf_catalog **out, tf_error *err);
void tf_catalog_free(tf_catalog *c);
/* A reload: what paths are, and arrays' keys, are decided by cfg from now
 * on (borrowed; the old configuration must outlive every file and view
 * opened under it).  Arrays in use stay as they are for their holders. */
void tf_catalog_set_config(tf_catalog *c, const tf_config *cfg);

typedef enum { TF_SHOW_RAW, TF_SHOW_DECODED, TF_SHOW_HIDDEN } tf_show;

/* How regular file rel is shown, from its path alone (nothing is read but
 * whether its ancestors are array roots, which is remembered). */
tf_show tf_catalog_show(tf_catalog *c, const char *rel);

/* What the array says a decoded file is, for its attributes. */
typedef struct tf_facts {
	char *field;			/* attribute or dimension, or NULL */
	char *role;			/* "data", "offsets", "schema", ..., or NULL */
	char *fragment;			/* fragment directory name, or NULL */
	uint32_t format_version;	/* 0 if not known */
	bool keyed;			/* decrypted with a key: plaintext */
} tf_facts;
void tf_facts_clear(tf_facts *fx);

/*
 * Index decoded file rel as version v (which the caller stat'ed; NULL: as
 * it is now).  fx (may be NULL) receives its facts.  Errors name the file.
 */
tf_status tf_catalog_open(tf_catalog *c, const char *rel, const tf_version *v, tf_file **out,
			  tf_facts *fx, tf_error *err);

/* Whether directory dir is the root of a TileDB array (remembered). */
bool tf_catalog_is_array(tf_catalog *c, const char *dir);

/*
 * The views (tf_view.h) of the array at dir as it is now: the state the
 * catalog keeps for the array, or a new one when the array changed since
 * (asked at most once a second).  *out is referenced and *hold keeps the
 * array it reads alive beyond the catalog's bound: give both back with
 * tf_catalog_views_put().  Reads through cache.  TF_E_INVAL: not an array.
 */
typedef struct tf_catalog_hold tf_catalog_hold;
tf_status tf_catalog_views(tf_catalog *c, const char *dir, tf_cache *cache, tf_views **out,
			   tf_catalog_hold **hold, tf_error *err);
void tf_catalog_views_put(tf_catalog *c, tf_views *v, tf_catalog_hold *hold);
/* Let every array's views go (at teardown: they charge the cache they read
 * through, which is freed before the catalog). */
void tf_catalog_drop_views(tf_catalog *c);

/*
 * Who may read entry vrel of views v (held by hold), tf_perm.h: what it is
 * made of in the source (tf_views_reads): the array's directory and its
 * TileDB files, the __schema (and __enumerations), __commits and
 * __fragments directories and their files, and the directory and files of
 * each fragment the entry reads.  Taken again when a second old (longer
 * for arrays so large that taking it costs more than a tenth of that).
 * Empty for sources without modes (object stores): everything there is
 * the same.  TF_E_INVAL: no such entry.
 */
struct tf_perm;
tf_status tf_catalog_views_perm(tf_catalog *c, tf_catalog_hold *hold, tf_views *v, const char *vrel,
				struct tf_perm *out, tf_error *err);

/*
 * Whether decoded file rel is plaintext of an encrypted array (or a file a
 * [match] rule decrypts), decided without indexing it: its rule has a key;
 * or its array has a key and its newest schema is encrypted, or cannot be
 * read now.  tf_facts.keyed says it again, per file, once indexed.
 */
bool tf_catalog_keyed(tf_catalog *c, const char *rel);

/*
 * Persisted indexes (tf_index.h): walked files are looked up in store and
 * stored to it, and every walk is counted there (borrowed; NULL: none).
 * Set before the catalog is used.
 */
struct tf_index;
void tf_catalog_set_index(tf_catalog *c, struct tf_index *store);

/* A lookup of file rel (version v) follows soon (a listing's): start
 * reading its persisted index, if it is a file that has one. */
void tf_catalog_prefetch(tf_catalog *c, const char *rel, const tf_version *v);

/* tf_catalog_open, saying why: TF_OPEN_METADATA when only the size is
 * wanted now (a lookup): a walk then reads headers alone where that is
 * cheap (tf_file_how). */
#define TF_OPEN_METADATA 1u
tf_status tf_catalog_open_for(tf_catalog *c, const char *rel, const tf_version *v, unsigned flags,
			      tf_file **out, tf_facts *fx, tf_error *err);

/* For what paths show (tf_entry.h, above the catalog): the source, the
 * settings in force, and the configuration's generation (a reload's
 * tf_catalog_set_config adds one). */
tf_source *tf_catalog_source(tf_catalog *c);
const tf_settings *tf_catalog_settings(tf_catalog *c);
unsigned tf_catalog_gen(tf_catalog *c);

/* Arrays currently kept. */
size_t tf_catalog_arrays(tf_catalog *c);

#endif
