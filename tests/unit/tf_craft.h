/*
 * tf_craft.h - hostile arrays for the unit tests: a corpus array copied
 * into a temporary directory, then its schemas rewritten with what TileDB
 * never writes (a zero extent, a wrapped cell size, another tiling), or
 * added to as a newer schema.
 *
 * A schema is read from its file, parsed, changed as a tf_schema and
 * written back in its own format version's layout (tf_craft_schema_payload
 * mirrors tf_schema.c's reader, versions 5 on), as one unfiltered generic
 * tile.  Every helper fails the test on error.
 */
#ifndef TF_CRAFT_H
#define TF_CRAFT_H

#include <stdbool.h>

#include "util/tf_bytes.h"
#include "format/tf_schema.h"

typedef struct tf_craft {
	char dir[4096];		/* the copy's array directory */
	char tmp[64];		/* the temporary directory holding it */
} tf_craft;

/* Copy corpus case case_name's array into a new temporary directory;
 * false (and nothing made) when the corpus is absent. */
bool tf_craft_copy(const char *case_name, tf_craft *c);
/* Remove the copy. */
void tf_craft_remove(tf_craft *c);
/* The path of rel in the copy, in out[4096]. */
void tf_craft_path(const tf_craft *c, const char *rel, char *out);

/* The decoded payload of generic tile file rel of the copy (unencrypted). */
void tf_craft_read_generic(const tf_craft *c, const char *rel, tf_buf *out);
/* payload as rel, one unfiltered generic tile (format 22). */
void tf_craft_write_generic(const tf_craft *c, const char *rel, tf_span payload);
/* The schema of file rel, parsed (tf_schema_free it). */
tf_schema *tf_craft_schema(const tf_craft *c, const char *rel);
/* s in the layout of its version (5 or later), appended to out. */
void tf_craft_schema_payload(const tf_schema *s, tf_buf *out);
/* s written as schema file rel of the copy. */
void tf_craft_write_schema(const tf_craft *c, const char *rel, const tf_schema *s);
/* The name of the only file in directory rel of the copy, in out[256]. */
void tf_craft_only_file(const tf_craft *c, const char *rel, char *out);

#endif
