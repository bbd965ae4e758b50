/*
 * tf_perm.h - who may read what is made of several stored files.
 *
 * A view of an array reads many files and directories of the source; the
 * decoded offsets of a string attribute read the data file too.  What they
 * show may be read by exactly those users who may read every one of those
 * inputs: a file counts as readable with its r bit for the caller's class
 * (owner, group, other: the first that applies, as POSIX checks), a
 * directory with r and x (it is listed and entered).  Root (uid 0) reads
 * everything, as the kernel lets it.
 *
 * A tf_perm is that set of inputs, each reduced to (uid, gid, classes that
 * may read it) and kept once.  It answers two questions:
 *
 *   - tf_perm_allows: may this caller (uid, gid, supplementary groups)
 *     read them all?  Exact.
 *   - tf_perm_show: the one owner, group and readable classes to show in a
 *     stat, for the kernel to enforce (default_permissions).  When every
 *     input has the same owner and group that is exact: those, and the
 *     classes every input grants.  Otherwise no single owner and group can
 *     say it, and the answer is the widest one that never lets in anybody
 *     tf_perm_allows would refuse: a class is shown readable only if every
 *     user it may hold can read every input (tf_perm.c says how the owner
 *     and group shown are chosen).  Users it leaves out are refused by the
 *     kernel though the source would let them read; never the other way.
 *
 * An input that could not be examined, or a set that could not be kept
 * (no memory), is "nobody but root".  Not thread-safe: one owner.
 */
#ifndef TF_PERM_H
#define TF_PERM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sources/tf_source.h"

/* Classes, as bits. */
#define TF_PERM_OWNER 4u
#define TF_PERM_GROUP 2u
#define TF_PERM_OTHER 1u

typedef struct tf_perm_in {
	uint32_t uid, gid;
	unsigned classes;	/* TF_PERM_* that may read it */
} tf_perm_in;

typedef struct tf_perm {
	tf_perm_in *v;		/* distinct inputs, in the order first added */
	size_t n, cap;
	bool closed;		/* an input unknown, or no memory: root only */
} tf_perm;

#define TF_PERM_INIT { NULL, 0, 0, false }

void tf_perm_clear(tf_perm *p);
/* An input as the source stats it: a directory needs r and x, anything
 * else r. */
void tf_perm_add_stat(tf_perm *p, const tf_stat *st);
/* An input that could not be examined: from now on, root only. */
void tf_perm_close(tf_perm *p);
/* Every input of q too. */
void tf_perm_add_perm(tf_perm *p, const tf_perm *q);
/* A copy of q into *p (cleared first). */
void tf_perm_copy(tf_perm *p, const tf_perm *q);

/* Entry rel of src as it is now (one that does not exist adds nothing; a
 * stat that fails otherwise closes p). */
void tf_perm_add_path(tf_perm *p, tf_source *src, const char *rel);
/*
 * Directory dir of src and what is in it: the directory itself (with
 * self), and every entry in it that want (NULL: all) accepts, files and
 * subdirectories alike (not what is inside those).  A directory that does
 * not exist adds nothing (what it would hold cannot be read either); a
 * stat or listing that fails otherwise closes p.
 */
typedef bool (*tf_perm_want_fn)(const char *name, const tf_stat *st);
void tf_perm_add_dir(tf_perm *p, tf_source *src, const char *dir, bool self, tf_perm_want_fn want);

/* Whether the caller may read every input.  groups: its supplementary
 * groups (n of them; gid is its primary group). */
bool tf_perm_allows(const tf_perm *p, uint32_t uid, uint32_t gid, const uint32_t *groups, size_t n);
/* Whether the answer of tf_perm_allows for (uid, gid) depends on the
 * supplementary groups (a caller may skip looking them up if not). */
bool tf_perm_needs_groups(const tf_perm *p, uint32_t uid, uint32_t gid);

/* The owner and group to show and the classes that may read (see above).
 * No inputs: (0, 0) and every class. */
void tf_perm_show(const tf_perm *p, uint32_t *uid, uint32_t *gid, unsigned *classes);

/* The permission bits (07777) of classes: r for a file, r and x for a
 * directory. */
uint32_t tf_perm_mode(unsigned classes, bool dir);

#endif
