/*
 * nodes.c - inode numbers and what each shows.
 *
 * Two hash tables map inode numbers and paths to nodes; a path maps to its
 * current node only.  What a node shows is the library's entry (tf_entry.h):
 * a lookup gives the same entry while the name shows the same thing (one
 * version of a regular file), and a new one, so a new node (a new inode
 * for the kernel, with an empty page cache), when it does not; open
 * handles and the kernel's references keep the old node until they let
 * go.  A node is freed when the kernel has forgotten it and no handle or
 * request holds it.
 *
 * One mutex guards the tables and every node's fields.
 */
#include "tilefs.h"
#include "util/tf_hash.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fs_node {
	fuse_ino_t id;
	char *rel;
	tf_entry *entry;	/* what it shows (referenced) */
	tf_ent_kind kind;	/* the entry's, which never changes */
	bool current;		/* by_rel maps rel here */
	bool unsized;		/* its size not known yet (fs_node_attr) */
	uint64_t nlookup;	/* the kernel's references */
	unsigned pins;		/* requests in flight and open handles */
	atomic_bool stale_pages;	/* a read found the stored bytes changed (fs_node_pages_stale) */
	fs_node *id_next, *rel_next;
};

static size_t hash_rel(const char *rel)
{
	return (size_t)tf_hash_str(rel);
}

/* ---- tables (lock held) ----------------------------------------------------------------- */

static fs_node **id_slot(fs_nodes *t, fuse_ino_t id)
{
	fs_node **p = &t->by_id[tf_hash_pair(id, 0) % t->nbuckets];

	while (*p && (*p)->id != id)
		p = &(*p)->id_next;
	return p;
}

static fs_node **rel_slot(fs_nodes *t, const char *rel)
{
	fs_node **p = &t->by_rel[hash_rel(rel) % t->nbuckets];

	while (*p && strcmp((*p)->rel, rel))
		p = &(*p)->rel_next;
	return p;
}

static void grow(fs_nodes *t)
{
	size_t old = t->nbuckets, nb = old * 2;
	fs_node **ids = calloc(nb, sizeof(*ids)), **rels = calloc(nb, sizeof(*rels));
	fs_node **oid = t->by_id, **orel = t->by_rel;

	if (!ids || !rels) {
		free(ids), free(rels);
		return;	/* longer chains, still correct */
	}
	t->by_id = ids, t->by_rel = rels, t->nbuckets = nb;
	for (size_t i = 0; i < old; i++) {
		for (fs_node *n = oid[i], *next; n; n = next) {
			fs_node **p = id_slot(t, n->id);
			next = n->id_next;
			n->id_next = NULL;
			*p = n;
		}
		for (fs_node *n = orel[i], *next; n; n = next) {
			fs_node **p = rel_slot(t, n->rel);
			next = n->rel_next;
			n->rel_next = NULL;
			*p = n;
		}
	}
	free(oid), free(orel);
}

static void unmap_rel(fs_nodes *t, fs_node *n)
{
	fs_node **p;

	if (!n->current)
		return;
	p = rel_slot(t, n->rel);
	if (*p == n)
		*p = n->rel_next;
	n->rel_next = NULL;
	n->current = false;
}

/* Free n if nothing holds it any more (the root is held for ever). */
static void maybe_free(fs_nodes *t, fs_node *n)
{
	fs_node **p;

	if (n->nlookup || n->pins || n->id == FUSE_ROOT_ID)
		return;
	p = id_slot(t, n->id);
	*p = n->id_next;
	unmap_rel(t, n);
	t->count--;
	tf_entry_unref(n->entry);
	free(n->rel);
	free(n);
}

static void unpin(fs_nodes *t, fs_node *n)
{
	n->pins--;
	maybe_free(t, n);
}

/* A new node for entry e (taken over), its path's current one from now on. */
static fs_node *add_node(fs_nodes *t, tf_entry *e)
{
	const char *rel = tf_entry_rel(e);
	fs_node *n = calloc(1, sizeof(*n)), **p;

	if (!n || !(n->rel = strdup(rel))) {
		free(n);
		return NULL;
	}
	if (t->count >= 2 * t->nbuckets)
		grow(t);
	n->id = t->next_id++;
	n->entry = e;
	n->kind = tf_entry_kind(e);
	*id_slot(t, n->id) = n;
	p = rel_slot(t, rel);
	if (*p)
		unmap_rel(t, *p);	/* the old version stays for who holds it */
	p = rel_slot(t, rel);
	n->rel_next = *p;	/* NULL: the slot is the chain's end */
	*p = n;
	n->current = true;
	t->count++;
	return n;
}

/* The tables, and the root's node (inode 1, held for ever). */
int fs_nodes_init(tilefs *fs)
{
	fs_nodes *t = &fs->nodes;
	tf_entry *root;
	tf_error err;

	memset(t, 0, sizeof(*t));
	t->nbuckets = 1024;
	t->by_id = calloc(t->nbuckets, sizeof(*t->by_id));
	t->by_rel = calloc(t->nbuckets, sizeof(*t->by_rel));
	t->next_id = FUSE_ROOT_ID;
	pthread_mutex_init(&t->lock, NULL);
	if (!t->by_id || !t->by_rel)
		return ENOMEM;
	if (tf_entry_root(fs->entries, &root, &err) != TF_OK) {
		fs_log(TF_LOG_ERROR, "%s", err.msg);
		return EIO;
	}
	if (!add_node(t, root)) {
		tf_entry_unref(root);
		return ENOMEM;
	}
	return 0;
}

void fs_nodes_destroy(fs_nodes *t)
{
	for (size_t i = 0; t->by_id && i < t->nbuckets; i++)
		for (fs_node *n = t->by_id[i], *next; n; n = next) {
			next = n->id_next;
			tf_entry_unref(n->entry);
			free(n->rel);
			free(n);
		}
	free(t->by_id);
	free(t->by_rel);
	t->by_id = t->by_rel = NULL;
	pthread_mutex_destroy(&t->lock);
}

/* ---- lookups ----------------------------------------------------------------------------------- */

/* The root's node, looked up by the kernel once more. */
static int root_lookup(tilefs *fs, fs_node **out, struct stat *attr)
{
	fs_node *n;

	pthread_mutex_lock(&fs->nodes.lock);
	if ((n = *id_slot(&fs->nodes, FUSE_ROOT_ID)))
		n->nlookup++;
	pthread_mutex_unlock(&fs->nodes.lock);
	if (!n)
		return ESTALE;
	*out = n;
	return fs_node_attr(fs, n, attr);
}

int fs_node_lookup(tilefs *fs, fs_node *dir, const char *name, const tf_stat *known, fs_node **out,
		   struct stat *attr)
{
	fs_nodes *t = &fs->nodes;
	tf_entry *e;
	tf_error err;
	tf_status rc;
	fs_node *n;

	if (!dir)
		return root_lookup(fs, out, attr);
	if (strlen(dir->rel) + 1 + strlen(name) >= PATH_MAX)
		return ENAMETOOLONG;
	if ((rc = tf_entry_lookup(dir->entry, name, known, &e, &err)) != TF_OK) {
		if (fs_errno(rc) == EIO)	/* the source failed, not the name: say why */
			fs_log_failure(err.msg);
		return fs_errno(rc);
	}
	if (err.code != TF_OK && err.code != TF_E_STALE && err.msg[0])	/* found, not indexed now */
		fs_log(TF_LOG_ERROR, "%s", err.msg);	/* (listed empty; opening it says EIO) */
	pthread_mutex_lock(&t->lock);
	n = *rel_slot(t, tf_entry_rel(e));
	if (n && n->entry == e)
		tf_entry_unref(e);	/* the node holds it already */
	else if (!(n = add_node(t, e))) {
		pthread_mutex_unlock(&t->lock);
		tf_entry_unref(e);
		return ENOMEM;
	}
	n->nlookup++;
	n->pins++;
	pthread_mutex_unlock(&t->lock);
	*out = n;
	fs_node_attr(fs, n, attr);
	fs_node_put(fs, n);
	return 0;
}

void fs_node_forget(tilefs *fs, fuse_ino_t ino, uint64_t nlookup)
{
	fs_node *n;

	pthread_mutex_lock(&fs->nodes.lock);
	if ((n = *id_slot(&fs->nodes, ino))) {
		n->nlookup = nlookup < n->nlookup ? n->nlookup - nlookup : 0;
		maybe_free(&fs->nodes, n);
	}
	pthread_mutex_unlock(&fs->nodes.lock);
}

fs_node *fs_node_get(tilefs *fs, fuse_ino_t ino)
{
	fs_node *n;

	pthread_mutex_lock(&fs->nodes.lock);
	if ((n = *id_slot(&fs->nodes, ino)))
		n->pins++;
	pthread_mutex_unlock(&fs->nodes.lock);
	return n;
}

void fs_node_put(tilefs *fs, fs_node *n)
{
	pthread_mutex_lock(&fs->nodes.lock);
	unpin(&fs->nodes, n);
	pthread_mutex_unlock(&fs->nodes.lock);
}

/* ---- attributes --------------------------------------------------------------------------------- */

mode_t fs_mode_type(tf_ent_kind k)
{
	return k == TF_ENT_DIR ? S_IFDIR : k == TF_ENT_LNK ? S_IFLNK : k == TF_ENT_FIFO ? S_IFIFO
	     : k == TF_ENT_SOCK ? S_IFSOCK : S_IFREG;
}

int fs_node_attr(tilefs *fs, fs_node *n, struct stat *st)
{
	tf_shown a;

	tf_entry_attr(n->entry, &a);
	pthread_mutex_lock(&fs->nodes.lock);
	n->unsized = a.unsized;
	pthread_mutex_unlock(&fs->nodes.lock);
	memset(st, 0, sizeof(*st));
	st->st_ino = n->id;
	st->st_mode = fs_mode_type(a.st.kind) | a.st.mode;
	st->st_nlink = a.st.nlink ? a.st.nlink : 1;
	st->st_uid = a.st.uid;
	st->st_gid = a.st.gid;
	st->st_size = (off_t)a.st.v.size;
	st->st_blocks = (st->st_size + 511) / 512;
	st->st_blksize = 1 << 20;	/* cat, cp: 1 MiB reads, one FUSE request each */
	st->st_mtim.tv_sec = a.st.v.mtime_ns / 1000000000LL;
	st->st_mtim.tv_nsec = a.st.v.mtime_ns % 1000000000LL;
	st->st_ctim.tv_sec = a.st.v.ctime_ns / 1000000000LL;
	st->st_ctim.tv_nsec = a.st.v.ctime_ns % 1000000000LL;
	st->st_atim = st->st_mtim;
	return 0;
}

double fs_node_attr_timeout(tilefs *fs, fs_node *n, double usual)
{
	bool unsized;

	pthread_mutex_lock(&fs->nodes.lock);
	unsized = n->unsized;
	pthread_mutex_unlock(&fs->nodes.lock);
	return unsized ? 0.0 : usual;
}

fuse_ino_t fs_node_ino(const fs_node *n) { return n->id; }
const char *fs_node_rel(const fs_node *n) { return n->rel; }
bool fs_node_is_dir(const fs_node *n) { return n->kind == TF_ENT_DIR; }
tf_entry *fs_node_entry(const fs_node *n) { return n->entry; }
void fs_node_pages_stale(fs_node *n) { atomic_store(&n->stale_pages, true); }
bool fs_node_pages_good(fs_node *n) { return !atomic_exchange(&n->stale_pages, false); }

void fs_nodes_stats(tilefs *fs, size_t *nodes, size_t *indexes, size_t *index_bytes, size_t *handles)
{
	tf_entry_stats s;

	tf_entries_stats(fs->entries, &s);
	pthread_mutex_lock(&fs->nodes.lock);
	*nodes = fs->nodes.count;
	pthread_mutex_unlock(&fs->nodes.lock);
	*indexes = s.indexes;
	*index_bytes = s.index_bytes;
	*handles = s.open_files;
}

/*
 * A reload: files looked up from now on get new nodes (node_for), and the
 * kernel forgets the names of those it knows, so that the next open of
 * each looks it up again rather than reopening the node of the old
 * configuration (whose open handles keep reading as they did).  The
 * kernel is told with the lock released: an invalidation waits for
 * lookups in flight in that directory, which may wait for the lock.
 */
typedef struct stale_name { fuse_ino_t parent; char *name; } stale_name;

static size_t stale_names(fs_nodes *t, stale_name **out)
{
	size_t k = 0, cap = t->count;
	stale_name *v = calloc(cap ? cap : 1, sizeof(*v));

	for (size_t b = 0; v && b < t->nbuckets; b++)
		for (fs_node *n = t->by_rel[b]; n; n = n->rel_next) {
			const char *slash = strrchr(n->rel, '/');
			char dir[PATH_MAX];
			fs_node *p;
			if (n->kind == TF_ENT_DIR || !n->current || !n->nlookup || k == cap)
				continue;
			snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - n->rel) : 1, slash ? n->rel : ".");
			if ((p = *rel_slot(t, dir)) && (v[k].name = strdup(slash ? slash + 1 : n->rel)))
				v[k++].parent = p->id;
		}
	*out = v;
	return k;
}

void fs_nodes_reloaded(tilefs *fs)
{
	stale_name *v;
	size_t k;

	pthread_mutex_lock(&fs->nodes.lock);
	k = stale_names(&fs->nodes, &v);
	pthread_mutex_unlock(&fs->nodes.lock);
	for (size_t i = 0; i < k; i++) {
		if (fs->se)
			fuse_lowlevel_notify_inval_entry(fs->se, v[i].parent, v[i].name, strlen(v[i].name));
		free(v[i].name);
	}
	free(v);
	fs_log(TF_LOG_DEBUG, "reload: %zu names the kernel knew are looked up again", k);
}
