/*
 * tf_array_path.c - what a file beneath a TileDB array is, from its path
 * alone (tf_array_path.h).
 */
#include "config.h"

#include "format/tf_array.h"
#include "format/tf_array_path.h"

#include <stdio.h>
#include <string.h>

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && !strcmp(s + n - m, suffix);
}

static bool is_internal_dir(const char *c, size_t n)
{
	static const char *const dirs[] = { "__schema", "__meta", "__commits", "__fragment_meta",
					    "__labels", "__fragments" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (strlen(dirs[i]) == n && !strncmp(c, dirs[i], n))
			return true;
	return false;
}

/* A fragment file: __fragments/F/file (format >= 12) or F/file (older). */
static bool classify_fragment(const char *rel, path_info *pi)
{
	const char *s1 = strchr(rel, '/'), *frag = rel, *file;

	if (!s1)
		return false;
	if (!strncmp(rel, "__fragments/", 12)) {
		frag = s1 + 1;
		pi->in_fragments_dir = true;
	} else if (strncmp(rel, "__", 2) || is_internal_dir(rel, (size_t)(s1 - rel))) {
		return false;
	}
	if (!(file = strchr(frag, '/')) || strchr(file + 1, '/') || !ends_with(file, ".tdb") ||
	    (size_t)(file - frag) >= sizeof(pi->frag) || strlen(file + 1) >= sizeof(pi->file))
		return false;
	snprintf(pi->frag, sizeof(pi->frag), "%.*s", (int)(file - frag), frag);
	snprintf(pi->file, sizeof(pi->file), "%s", file + 1);
	pi->kind = !strcmp(pi->file, "__fragment_metadata.tdb") ? P_FRAG_META : P_FRAG_DATA;
	return true;
}

void tf_array_classify(const char *rel, path_info *pi)
{
	memset(pi, 0, sizeof(*pi));
	pi->kind = P_GENERIC;
	if (!strncmp(rel, "__schema/__enumerations/", 24) && !strchr(rel + 24, '/'))
		pi->what = "enumeration";
	else if ((!strncmp(rel, "__schema/", 9) && !strchr(rel + 9, '/')) || !strcmp(rel, LEGACY_SCHEMA))
		pi->what = "schema";
	else if (!strncmp(rel, "__meta/", 7) && !strchr(rel + 7, '/') && !ends_with(rel, ".vac"))
		pi->what = "array metadata";
	else if (!strncmp(rel, "__commits/", 10) && !strchr(rel + 10, '/') &&
		 (ends_with(rel, ".del") || ends_with(rel, ".upd")))
		pi->what = ends_with(rel, ".del") ? "delete condition" : "update condition";
	else if (ends_with(rel, ".meta") && (!strchr(rel, '/') ||
		 (!strncmp(rel, "__fragment_meta/", 16) && !strchr(rel + 16, '/'))))
		pi->what = "consolidated fragment metadata";
	else if (!classify_fragment(rel, pi))
		pi->kind = P_RAW;
}

bool tf_array_is_decoded_name(const char *rel)
{
	path_info pi;

	tf_array_classify(rel, &pi);
	return pi.kind != P_RAW;
}
