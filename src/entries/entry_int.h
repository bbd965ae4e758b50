/*
 * entry_int.h - what every kind of entry shares (tf_entry.h), and the ops
 * table each kind implements.  Included by src/tf_entry.c, the kinds in
 * src/entries/ and src/tf_catalog.c (which owns the entries' set); nothing
 * else.
 *
 * Kinds: dir.c (a directory of the source: what each name in it is),
 * file.c (a file decoded: its index, kept within the index budget),
 * view.c (an array's @views folder and what is in it), raw.c (a file as
 * stored, a symlink, a FIFO or socket).
 *
 * One mutex per set (the catalog's) guards every entry's changing fields,
 * the table of current entries and the indexes' LRU; nothing is read
 * from a source with it held.
 */
#ifndef TF_ENTRY_INT_H
#define TF_ENTRY_INT_H

#include <pthread.h>

#include "cache/tf_cache.h"
#include "sources/tf_perm.h"
#include "tf_catalog.h"
#include "tf_entry.h"
#include "util/tf_lru.h"


typedef struct tf_entry_ops {
	const char *name;
	bool decoded;			/* it shows decoded bytes (a [match] rule or an array's) */
	/* Directories (NULL for files). */
	tf_status (*lookup)(tf_entry *dir, const char *name, const tf_stat *known, tf_entry **out, tf_error *err);
	tf_status (*list)(tf_entry *dir, bool plus, tf_entry_list_fn fn, void *ctx, tf_error *err);
	/* out->st from e->st (lock not held); the common part then takes the
	 * write bits away and makes plaintext the mounter's. */
	void (*attr)(tf_entry *e, tf_shown *out);
	/* Who may read what e is made of, into p (cleared): true when the
	 * driver must check (besides e->keyed).  NULL: the kernel's check is
	 * enough. */
	bool (*inputs)(tf_entry *e, tf_perm *p);
	char *(*getxattr)(tf_entry *e, const char *name);	/* NULL: none */
	size_t (*listxattr)(tf_entry *e, char *buf, size_t n);
	tf_status (*open)(tf_entry *e, tf_pin_scratch *s, const tf_cancel *cancel, unsigned flags, tf_entry_reader **out,
			  tf_open_how *how, tf_error *err);	/* NULL: not a file */
	void (*free)(tf_entry *e);	/* the kind's part; then the common part goes */
} tf_entry_ops;

struct tf_entry {
	const tf_entry_ops *ops;
	tf_entries *set;
	unsigned refs;			/* under set->lock */
	char *rel;
	tf_ent_kind kind;		/* st.kind, never changed */
	unsigned gen;			/* the configuration it was made under */
	tf_stat st;			/* under set->lock: a directory's and a view's change */
	bool keyed;			/* plaintext: the mounter's alone (under the lock) */
	bool failed;			/* a read failed: later opens are direct */
	char *error;			/* the last decode or index error */
	tf_lru_node node;		/* keyed: its path's current entry; listed: a
					 * decoded file holding an index (file.c) */
};

typedef struct tf_entry_reader_ops {
	tf_status (*pin)(tf_entry_reader *r, tf_pin_scratch *s, uint64_t off, size_t len, const tf_cancel *cancel,
			 tf_error *err);
	void (*close)(tf_entry_reader *r);	/* frees r */
} tf_entry_reader_ops;

struct tf_entry_reader {
	const tf_entry_reader_ops *ops;
	tf_entry *entry;		/* referenced */
};

struct tf_pin_scratch {
	tf_workspace *ws;
	tf_slices slices;		/* pinned in the cache (tf_handle's: its own layout) */
	tf_cache *pinned_in;		/* the cache they are pinned in, or NULL */
	tf_slice one;			/* bytes copied into buf, as one slice */
	tf_slices copied;		/* {&one}, when a pin copied */
	const tf_slices *last;		/* what the last pin gave: slices or copied */
	uint8_t *buf;			/* bytes read by copy (views, raw files) */
	size_t cap;
};

struct tf_entries {
	tf_catalog *catalog;
	tf_source *src;
	tf_cache *cache;		/* views and decoded files read through it */
	pthread_mutex_t lock;
	pthread_cond_t indexed;		/* a file's index was built (or failed) */
	tf_lru *lru;			/* current entries by path; list 0: decoded
					 * files holding an index, oldest first */
	size_t index_bytes, index_budget, open_files;
};

/* ---- tf_entry.c: the set, the common part -------------------------------------------------- */
/* A new entry of ops's kind (size bytes, its first part a tf_entry),
 * referenced, not yet current; NULL: no memory. */
tf_entry *tf_entry_make(tf_entries *s, const tf_entry_ops *ops, size_t size, const char *rel, const tf_stat *st,
			unsigned gen);
/* The current entry of rel, referenced, or NULL (lock not held). */
tf_entry *tf_entries_current(tf_entries *s, const char *rel);
/* e is rel's current entry from now on (the one before stays for its holders). */
void tf_entries_install(tf_entries *s, tf_entry *e);
/* Whether e, rel's current entry, may answer a lookup finding st under
 * configuration gen, when the path shows decoded bytes (or not) now. */
bool tf_entry_still(tf_entries *s, tf_entry *e, const tf_stat *st, bool decoded, unsigned gen);
void tf_entry_set_error(tf_entry *e, const char *msg, bool failed);
char *tf_entry_error(tf_entry *e);
/* s's buffer holds at least n bytes (false: no memory). */
bool tf_pin_scratch_grow(tf_pin_scratch *s, size_t n);
/* The slices pinned are s's buffer, its first n bytes. */
void tf_pin_scratch_one_slice(tf_pin_scratch *s, size_t n);

/* ---- the kinds -------------------------------------------------------------------------------- */
extern const tf_entry_ops tf_dir_entry_ops, tf_raw_entry_ops, tf_file_entry_ops, tf_view_entry_ops;
/* file.c: a decoded file's entry (keyed: decided by the catalog); its
 * index built now for a lookup (TF_OK with err->code set: it failed;
 * TF_E_STALE, when `again`: the source changed since st, look again;
 * else the entry, its index failed). */
tf_status tf_file_entry_lookup(tf_entries *s, const char *rel, const tf_stat *st, unsigned gen, bool keyed,
			       bool again, tf_entry **out, tf_error *err);
void tf_file_entry_trim(tf_entries *s);	/* lock held */
/* view.c: the entry vrel of the views of the array at arr (vrel "": the
 * folder), with parent the attributes its times come from. */
tf_status tf_view_entry_lookup(tf_entries *s, const char *rel, const char *arr, const char *vrel,
			       const tf_stat *parent, tf_entry **out, tf_error *err);


#endif
