/*
 * arrays.c - TileDB arrays under SOURCE: the innermost array directory
 * holding a path (dimension-label arrays nest inside their array), and one
 * tf_array per array root, opened on first use with its configured key.
 */
#include "tilefs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fs_array {
	char *root;		/* relative to SOURCE, "." for SOURCE itself */
	tf_array *array;
	struct fs_array *next;
};

void fs_arrays_destroy(tilefs *fs)
{
	for (fs_array *a = fs->arrays, *next; a; a = next) {
		next = a->next;
		tf_array_free(a->array);
		free(a->root);
		free(a);
	}
	fs->arrays = NULL;
}

/* The longest directory prefix of rel that is an array root, if any. */
static bool array_root(const tilefs *fs, const char *rel, char *root, size_t n)
{
	if (snprintf(root, n, "%s", rel) >= (int)n)
		return false;
	for (char *slash = strrchr(root, '/');; slash = strrchr(root, '/')) {
		if (slash)
			*slash = '\0';
		else
			strcpy(root, ".");
		if (tf_array_detect(fs->src, root))
			return true;
		if (!slash)
			return false;
	}
}

static fs_array *open_array(tilefs *fs, const char *root)
{
	fs_array *a = calloc(1, sizeof(*a));
	tf_error err;

	if (!a || !(a->root = strdup(root)) ||
	    tf_array_open(fs->src, root, tf_config_array_key(fs->config, root), &a->array, &err) != TF_OK) {
		if (a)
			free(a->root);
		free(a);
		return NULL;
	}
	a->next = fs->arrays;
	fs->arrays = a;
	return a;
}

tf_array *fs_array_of(tilefs *fs, const char *rel, const char **inner)
{
	char root[PATH_MAX];
	fs_array *a;

	if (!array_root(fs, rel, root, sizeof(root)))
		return NULL;
	pthread_mutex_lock(&fs->arrays_lock);
	for (a = fs->arrays; a && strcmp(a->root, root); a = a->next)
		;
	if (!a)
		a = open_array(fs, root);
	pthread_mutex_unlock(&fs->arrays_lock);
	*inner = rel + (strcmp(root, ".") ? strlen(root) + 1 : 0);
	return a ? a->array : NULL;
}
