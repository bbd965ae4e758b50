/*
 * tf_walk.c - a source's tree, walked (contract in tf_walk.h).
 *
 * A stack of frames, one per directory on the way down: its listing (names
 * and stats, read whole through tf_source_list) and how far it was given.
 */
#include "cache/tf_walk.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct frame {
	char *dir;
	char **names;
	tf_stat *st;
	size_t n, cap, next;	/* entries listed; the next to give */
	bool failed;		/* out of memory while listing */
} frame;

typedef struct walk {
	tf_source *src;
	unsigned flags;
	frame *v;
	size_t depth, cap;
} walk;

static int collect(void *ctx, const char *name, const tf_stat *st)
{
	frame *f = ctx;

	if (st->kind != TF_ENT_DIR && st->kind != TF_ENT_REG)
		return 0;	/* symlinks are never followed */
	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 64;
		char **names = realloc(f->names, cap * sizeof(*names));
		tf_stat *s = names ? realloc(f->st, cap * sizeof(*s)) : NULL;

		if (names)
			f->names = names;
		if (!s)
			goto nomem;
		f->st = s;
		f->cap = cap;
	}
	if (!(f->names[f->n] = strdup(name)))
		goto nomem;
	f->st[f->n++] = *st;
	return 0;
nomem:
	f->failed = true;
	return 1;
}

static void frame_free(frame *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->names[i]);
	free(f->names);
	free(f->st);
	free(f->dir);
}

/* An error e met on the way: the walk's answer (into err), or passed over. */
static tf_status met(const walk *w, tf_status rc, const tf_error *e, tf_error *err)
{
	if (rc == TF_OK || w->flags & TF_WALK_KEEP_GOING)
		return TF_OK;
	if (err)
		*err = *e;
	return rc;
}

/* List dir into a new frame on top of the stack. */
static tf_status enter(walk *w, const char *dir, tf_error *err)
{
	frame *f;
	tf_error e;
	tf_status rc;

	if (w->depth == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 16;
		frame *v = realloc(w->v, cap * sizeof(*v));

		if (!v)
			return tf_err(err, TF_E_NOMEM, "%s: out of memory", dir);
		w->v = v;
		w->cap = cap;
	}
	f = &w->v[w->depth];
	memset(f, 0, sizeof(*f));
	if (!(f->dir = strdup(dir)))
		return tf_err(err, TF_E_NOMEM, "%s: out of memory", dir);
	w->depth++;
	rc = tf_source_list(w->src, dir, true, collect, f, &e);
	if (f->failed)	/* never passed over: the walk would miss files unsaid */
		return tf_err(err, TF_E_NOMEM, "%s: out of memory listing it", dir);
	return met(w, rc, &e, err);
}

tf_status tf_walk(tf_source *s, const char *top, unsigned flags, tf_walk_fn fn, void *ctx,
		  tf_error *err)
{
	walk w = { .src = s, .flags = flags };
	char rel[PATH_MAX];
	tf_error e;
	tf_status rc = enter(&w, top, err);

	while (rc == TF_OK && w.depth) {
		frame *f = &w.v[w.depth - 1];
		size_t i = f->next++;

		if (i == f->n) {
			frame_free(f);
			w.depth--;
		} else if (!tf_path_join(rel, sizeof(rel), f->dir, f->names[i])) {
			rc = met(&w, tf_err(&e, TF_E_INVAL, "path too long: %s/%s", f->dir, f->names[i]), &e,
				 err);
		} else if (fn(ctx, rel, &f->st[i])) {
			break;
		} else if (f->st[i].kind == TF_ENT_DIR) {
			rc = enter(&w, rel, err);
		}
	}
	while (w.depth)
		frame_free(&w.v[--w.depth]);
	free(w.v);
	return rc;
}
