/*
 * nodes.c - inode numbers and what each shows.
 *
 * Two hash tables map inode numbers and paths to nodes; a path maps to its
 * current node only.  A regular file's node is one version of its source:
 * a lookup that finds the source changed makes a new node (a new inode for
 * the kernel, with an empty page cache), while open handles and the
 * kernel's references keep the old one until they let go.  A node is
 * freed when the kernel has forgotten it and no handle or request holds it.
 *
 * Decoded nodes hold their index (tf_file).  Indexes of nodes nobody has
 * open and no request holds are dropped, least recently used first, beyond
 * the index budget, and rebuilt (for the same version) when opened again:
 * an index is never dropped between its building and its use.  A failed index is
 * tried again after INDEX_RETRY_NS: a fragment seen mid-commit, before
 * TileDB wrote its last file, reads once it is complete.
 *
 * One mutex guards the tables and every node's fields; indexes are built
 * with it released (one builder per node; others wait on `indexed`).
 */
#include "tilefs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define INDEX_RETRY_NS 1000000000LL

struct fs_node {
	fuse_ino_t id;
	char *rel;
	tf_stat st;		/* the source as this node shows it (under the lock:
				 * a directory's and a view's are refreshed) */
	tf_ent_kind kind;	/* st.kind, which never changes: read without the lock */
	bool decoded, current;	/* current: by_rel maps rel here */
	uint64_t nlookup;	/* the kernel's references */
	unsigned pins, opens;	/* requests in flight, open handles */
	uint64_t gen;		/* the configuration it was made under (fs_nodes.gen) */
	/* decoded files */
	uint64_t size;		/* decoded size, kept when the index is dropped */
	tf_file *file;		/* NULL: not built, dropped, or failed */
	size_t bytes;		/* its index memory */
	bool indexing;
	int index_errno;	/* the last build failed (0: did not) */
	int64_t failed_at;
	tf_facts facts;
	char *error;		/* last decode or index error */
	char *dep_rel;		/* the other file the bytes come from (folded */
	tf_version dep_v;	/* offsets: the data file), its version shown */
	tf_perm dep_perm;	/* who may read the dep (empty: no dep known) */
	bool failed;		/* a read failed: later opens get direct I/O */
	bool keyed;		/* its bytes are decrypted: the mounter's alone */
	/* view nodes: an entry of an array's @views folder (tf_view.h) */
	tf_views *views;	/* the array state shown (NULL: not a view) */
	tf_catalog_hold *hold;	/* keeps the array the state reads */
	char *vrel;		/* path in the views folder, "" for the folder */
	char *arr;		/* the array's root */
	tf_view_stat vst;
	fs_node *id_next, *rel_next;
	fs_node *prev, *next;	/* LRU of nodes holding an index */
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static size_t hash_rel(const char *s)
{
	size_t h = 5381;

	while (*s)
		h = h * 33 ^ (unsigned char)*s++;
	return h;
}

/* ---- tables (lock held) ----------------------------------------------------------------- */

static fs_node **id_slot(fs_nodes *t, fuse_ino_t id)
{
	fs_node **p = &t->by_id[(id * 0x9e3779b97f4a7c15ull >> 20) % t->nbuckets];

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

static void lru_unlink(fs_nodes *t, fs_node *n)
{
	if (!n->prev && !n->next && t->lru_head != n)
		return;
	*(n->prev ? &n->prev->next : &t->lru_head) = n->next;
	*(n->next ? &n->next->prev : &t->lru_tail) = n->prev;
	n->prev = n->next = NULL;
}

static void lru_touch(fs_nodes *t, fs_node *n)
{
	lru_unlink(t, n);
	n->prev = t->lru_tail;
	*(t->lru_tail ? &t->lru_tail->next : &t->lru_head) = n;
	t->lru_tail = n;
}

static void drop_index(fs_nodes *t, fs_node *n)
{
	lru_unlink(t, n);
	tf_file_unref(n->file);
	n->file = NULL;
	t->index_bytes -= n->bytes;
	n->bytes = 0;
}

/*
 * Indexes of idle nodes go, oldest first, beyond the budget.  A node is
 * idle when no request holds it (pins), no handle has it open and nobody
 * builds its index: a request that pinned a node before asking for its
 * index can use n->file until it unpins, whatever the budget (one index
 * larger than the whole budget included).  Called wherever a node stops
 * being busy, so the budget holds again once the requests are done.
 */
static void trim_indexes(fs_nodes *t)
{
	for (fs_node *n = t->lru_head, *next; n && t->index_bytes > t->index_budget; n = next) {
		next = n->next;
		if (!n->pins && !n->opens && !n->indexing)
			drop_index(t, n);
	}
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

static void free_node(fs_nodes *t, fs_node *n)
{
	tf_catalog_views_put(t->catalog, n->views, n->hold);
	tf_perm_clear(&n->dep_perm);
	free(n->vrel);
	free(n->arr);
	free(n->error);
	free(n->dep_rel);
	free(n->rel);
	free(n);
}

/* Free n if nothing holds it any more (the root is held for ever). */
static void maybe_free(fs_nodes *t, fs_node *n)
{
	fs_node **p;

	if (n->nlookup || n->pins || n->opens || n->indexing || n->id == FUSE_ROOT_ID)
		return;
	p = id_slot(t, n->id);
	*p = n->id_next;
	unmap_rel(t, n);
	drop_index(t, n);
	tf_facts_clear(&n->facts);
	t->count--;
	free_node(t, n);
}

/* A request lets go of n: its index may go now, and n with it. */
static void unpin(fs_nodes *t, fs_node *n)
{
	n->pins--;
	trim_indexes(t);
	maybe_free(t, n);
}

static fs_node *add_node(fs_nodes *t, const char *rel, const tf_stat *st, bool decoded, uint64_t gen)
{
	fs_node *n = calloc(1, sizeof(*n)), **p;

	if (!n || !(n->rel = strdup(rel))) {
		free(n);
		return NULL;
	}
	if (t->count >= 2 * t->nbuckets)
		grow(t);
	n->id = t->next_id++;
	n->st = *st;
	n->kind = st->kind;
	n->decoded = decoded;
	n->gen = gen;
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

int fs_nodes_init(fs_nodes *t, size_t index_budget, tf_catalog *catalog)
{
	memset(t, 0, sizeof(*t));
	t->catalog = catalog;
	t->nbuckets = 1024;
	t->by_id = calloc(t->nbuckets, sizeof(*t->by_id));
	t->by_rel = calloc(t->nbuckets, sizeof(*t->by_rel));
	t->index_budget = index_budget;
	t->next_id = FUSE_ROOT_ID;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->indexed, NULL);
	return t->by_id && t->by_rel ? 0 : ENOMEM;
}

void fs_nodes_destroy(fs_nodes *t)
{
	for (size_t i = 0; t->by_id && i < t->nbuckets; i++)
		for (fs_node *n = t->by_id[i], *next; n; n = next) {
			next = n->id_next;
			tf_file_unref(n->file);
			tf_facts_clear(&n->facts);
			free_node(t, n);
		}
	free(t->by_id);
	free(t->by_rel);
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->indexed);
}

/* ---- indexes -------------------------------------------------------------------------------- */

/* Whether index f decodes from the versions node n shows (recording them
 * on the node's first index, with who may read the dep: dp, taken over). */
static bool same_dep(fs_node *n, const tf_file *f, tf_perm *dp)
{
	const tf_version *v;
	const char *rel = tf_file_dep(f, &v);

	if (!rel)
		return true;
	if (!n->dep_rel) {
		n->dep_rel = strdup(rel);
		n->dep_v = *v;
		tf_perm_clear(&n->dep_perm);
		n->dep_perm = *dp;
		*dp = (tf_perm)TF_PERM_INIT;
		return n->dep_rel != NULL;
	}
	return !strcmp(n->dep_rel, rel) && tf_version_equal(&n->dep_v, v);
}

/* Who may read the other file index f decodes from, if any (lock not held:
 * a stat).  A dep that cannot be stat'ed now is root's alone. */
static void dep_perm(tilefs *fs, const tf_file *f, tf_perm *out)
{
	const tf_version *v;
	const char *rel = tf_file_dep(f, &v);
	tf_stat st;

	if (!rel)
		return;
	if (tf_source_stat(fs->src, rel, &st, NULL) == TF_OK)
		tf_perm_add_stat(out, &st);
	else
		tf_perm_close(out);
}

/* Build n's index unless it has one, or failed recently (lock held; it is
 * released while the catalog works).  The caller has pinned n: on 0,
 * n->file is there until it unpins.  flags: TF_OPEN_METADATA for a lookup
 * (only the size is wanted yet).  Returns 0 or an errno: ESTALE when the
 * source is no longer n's version, EIO for every other failure (a file
 * that cannot be indexed is a damaged file, whatever the cause). */
static int ensure_index(tilefs *fs, fs_node *n, unsigned flags)
{
	fs_nodes *t = &fs->nodes;
	tf_file *f = NULL;
	tf_perm dp = TF_PERM_INIT;
	tf_version v;
	tf_facts fx;
	tf_error err;
	tf_status rc;

	while (n->indexing)
		pthread_cond_wait(&t->indexed, &t->lock);
	if (n->file)
		return 0;
	if (n->index_errno && now_ns() - n->failed_at < INDEX_RETRY_NS)
		return n->index_errno;
	n->indexing = true;
	v = n->st.v;
	pthread_mutex_unlock(&t->lock);
	rc = tf_catalog_open_for(fs->catalog, n->rel, &v, flags, &f, &fx, &err);
	if (rc != TF_OK && rc != TF_E_STALE)
		fs_log(TF_LOG_ERROR, "%s", err.msg);
	if (rc == TF_OK)
		dep_perm(fs, f, &dp);
	pthread_mutex_lock(&t->lock);
	n->indexing = false;
	pthread_cond_broadcast(&t->indexed);
	if (rc != TF_OK) {
		n->index_errno = rc == TF_E_STALE ? ESTALE : EIO;
		n->failed_at = now_ns();
		free(n->error);
		n->error = strdup(err.msg);
		return n->index_errno;
	}
	/* A node shows one version of every file its bytes come from: an
	 * index of another version of the data file is another node's. */
	if (!same_dep(n, f, &dp)) {
		tf_perm_clear(&dp);
		tf_file_unref(f);
		tf_facts_clear(&fx);
		n->index_errno = ESTALE;
		n->failed_at = now_ns();
		return ESTALE;
	}
	tf_perm_clear(&dp);
	tf_facts_clear(&n->facts);
	n->facts = fx;
	/* Plaintext is known from the catalog before any index; the index
	 * can only add to that (never take it back). */
	n->keyed |= fx.keyed;
	n->file = f;
	n->size = tf_file_size(f);
	n->bytes = tf_file_index_bytes(f);
	n->index_errno = 0;
	t->index_bytes += n->bytes;
	lru_touch(t, n);
	trim_indexes(t);
	return 0;
}

/* ---- lookups ----------------------------------------------------------------------------------- */

/*
 * A lookup's stat maps two statuses its own way (fs_errno the rest): a
 * name the source refuses as invalid (not a path inside it, or one an
 * object store cannot hold) is no such name, ENOENT; and "changed", which
 * a stat expecting no version can only get from a source failing under
 * it, is that failure, EIO: ESTALE from a lookup would have the kernel
 * walk the whole path again (LOOKUP_REVAL) and hand ESTALE to the caller
 * of open(2) or stat(2), who holds nothing that went stale.
 */
static int lookup_errno(tf_status rc)
{
	return rc == TF_E_INVAL ? ENOENT : rc == TF_E_STALE ? EIO : fs_errno(rc);
}

/* Whether node n still shows what st describes. */
static bool same_thing(const fs_node *n, const tf_stat *st)
{
	if (n->st.kind != st->kind)
		return false;
	if (st->kind == TF_ENT_REG || st->kind == TF_ENT_LNK)
		return tf_version_equal(&n->st.v, &st->v);
	return n->st.v.dev == st->v.dev && n->st.v.ino == st->v.ino && !strcmp(n->st.v.etag, st->v.etag);
}

/*
 * Whether the other file the current node of rel reads (the data file of
 * folded offsets) has changed since it was indexed: a stat, made with the
 * lock released (on an object store it may be a request).
 */
static bool dep_changed(tilefs *fs, const char *rel)
{
	char *dep = NULL;
	tf_version was = { 0 };
	fs_node *n;
	tf_stat st;
	bool changed;

	pthread_mutex_lock(&fs->nodes.lock);
	if ((n = *rel_slot(&fs->nodes, rel)) && n->dep_rel) {
		dep = strdup(n->dep_rel);
		was = n->dep_v;
	}
	pthread_mutex_unlock(&fs->nodes.lock);
	if (!dep)
		return false;
	changed = tf_source_stat(fs->src, dep, &st, NULL) != TF_OK || !tf_version_equal(&st.v, &was);
	free(dep);
	return changed;
}

/* The current node for rel showing st: the existing one, or a new one.  A
 * file's node made under an older configuration is replaced (a reload:
 * its bytes may decode otherwise now); a directory's stays.  So is one
 * the catalog now shows otherwise (decoded or as stored: an array's
 * schema written after its files were looked up). */
static fs_node *node_for(tilefs *fs, const char *rel, const tf_stat *st, bool decoded, bool dep_moved,
			 uint64_t gen)
{
	fs_nodes *t = &fs->nodes;
	fs_node *n = *rel_slot(t, rel);

	if (n && same_thing(n, st) && n->decoded == decoded && !dep_moved &&
	    (n->kind == TF_ENT_DIR || n->gen >= gen)) {
		if (n->st.kind == TF_ENT_DIR)
			n->st = *st;	/* fresh mode and times */
		return n;
	}
	return add_node(t, rel, st, decoded, gen);
}

static int stat_rel(tilefs *fs, const char *rel, tf_stat *st)
{
	tf_error err;
	tf_status rc = tf_source_stat(fs->src, rel, st, &err);

	if (lookup_errno(rc) == EIO)	/* the source failed, not the name: say why */
		fs_log_failure(err.msg);
	return lookup_errno(rc);
}

/* ---- views ------------------------------------------------------------------------------------ */

/* What a view entry shows as a stored file would: read-only, sized if
 * known (a CSV not yet formatted to its end is served as size 0), times of
 * the array's root (st, the entry's parent as the kernel sees it); owner
 * and modes are view_access's (until then, root's alone). */
static tf_stat view_stat(const tf_stat *parent, const tf_view_stat *vst)
{
	tf_stat st = *parent;

	st.kind = vst->dir ? TF_ENT_DIR : TF_ENT_REG;
	st.mode = 0;
	st.nlink = vst->dir ? 2 : 1;
	st.v.size = vst->size_known ? vst->size : 0;
	st.v.ino = 0;
	return st;
}

/*
 * The owner, group and mode of view node n: those of what it is made of
 * (tf_catalog_views_perm, tf_perm_show), so that the kernel lets in no
 * user the source would refuse.  A source without modes: the owner of the
 * array's root (as shown at lookup) and every class.  Lock not held (the
 * catalog may list directories); the result is stored in n->st.
 */
static void view_access(tilefs *fs, fs_node *n)
{
	tf_perm p = TF_PERM_INIT;
	uint32_t uid, gid;
	unsigned classes;

	if (!n->vrel || tf_catalog_views_perm(fs->catalog, n->hold, n->views, n->vrel, &p, NULL) != TF_OK)
		tf_perm_close(&p);
	tf_perm_show(&p, &uid, &gid, &classes);
	pthread_mutex_lock(&fs->nodes.lock);
	if (p.n || p.closed)
		n->st.uid = uid, n->st.gid = gid;
	n->st.mode = tf_perm_mode(classes, n->vst.dir);
	pthread_mutex_unlock(&fs->nodes.lock);
	tf_perm_clear(&p);
}

/* Whether dir's entry `name` is a view: the views folder of an array, or
 * anything inside it.  (Fields never changed after a node is made: no lock.) */
static bool is_view(tilefs *fs, const fs_node *dir, const char *name)
{
	return dir && (dir->views || (fs->settings->views && dir->kind == TF_ENT_DIR &&
				      !strcmp(name, TF_VIEWS_DIR) && tf_catalog_is_array(fs->catalog, dir->rel)));
}

/* The node of a view entry, in the array's state as it is now: the node
 * that shows this state, or a new one (which takes the state over). */
static int view_lookup(tilefs *fs, fs_node *dir, const char *name, const char *rel, fs_node **out,
		       struct stat *attr)
{
	char vrel[PATH_MAX];
	const char *arr = dir->views ? dir->arr : dir->rel;
	tf_catalog_hold *hold;
	tf_view_stat vst;
	tf_views *v;
	tf_stat st, parent;
	tf_error err;
	fs_node *n;

	if (!dir->views)
		vrel[0] = '\0';
	else if (!tf_path_join(vrel, sizeof(vrel), dir->vrel[0] ? dir->vrel : ".", name))
		return ENAMETOOLONG;
	if (tf_catalog_views(fs->catalog, arr, fs->cache, &v, &hold, &err) != TF_OK) {
		fs_log_failure(err.msg);	/* the array's state could not be read: say why */
		return EIO;
	}
	if (tf_views_stat(v, vrel, &vst, NULL) != TF_OK) {
		tf_catalog_views_put(fs->catalog, v, hold);
		return ENOENT;
	}
	pthread_mutex_lock(&fs->nodes.lock);
	parent = dir->st;	/* a directory's is refreshed by getattr and lookups */
	st = view_stat(&parent, &vst);
	n = *rel_slot(&fs->nodes, rel);
	if (n && n->views == v) {
		tf_catalog_views_put(fs->catalog, v, hold);	/* it has its own */
		n->vst = vst;
		st.mode = n->st.mode, st.uid = n->st.uid, st.gid = n->st.gid;	/* view_access's */
		n->st = st;
	} else if ((n = add_node(&fs->nodes, rel, &st, false, fs->nodes.gen))) {
		n->views = v, n->hold = hold, n->vst = vst;
		n->keyed = tf_views_keyed(v);
		n->vrel = strdup(vrel);
		n->arr = strdup(arr);
	}
	if (n)
		n->nlookup++;
	pthread_mutex_unlock(&fs->nodes.lock);
	if (!n) {
		tf_catalog_views_put(fs->catalog, v, hold);
		return ENOMEM;
	}
	*out = n;
	return fs_node_attr(fs, n, attr);
}

int fs_node_lookup(tilefs *fs, fs_node *dir, const char *name, const tf_stat *known, fs_node **out,
		   struct stat *attr)
{
	char rel[PATH_MAX];
	bool decoded = false, keyed = false, moved;
	uint64_t gen = atomic_load(&fs->nodes.gen);	/* before the catalog is asked */
	fs_node *n;
	tf_stat st;
	int rc;

	if (!dir)
		snprintf(rel, sizeof(rel), ".");
	else if (!tf_path_join(rel, sizeof(rel), dir->rel, name))
		return ENAMETOOLONG;
	if (is_view(fs, dir, name))
		return view_lookup(fs, dir, name, rel, out, attr);
	for (int tries = 0;; tries++) {
		if (known && !tries)
			st = *known;
		else if ((rc = stat_rel(fs, rel, &st)) != 0)
			return rc;
		/* Device nodes of SOURCE are not shown: through the mount
		 * they would open the device itself. */
		if (st.kind == TF_ENT_OTHER)
			return ENOENT;
		if (st.kind == TF_ENT_REG) {
			tf_show show = tf_catalog_show(fs->catalog, rel);
			if (show == TF_SHOW_HIDDEN)
				return ENOENT;
			decoded = show == TF_SHOW_DECODED;
			/* Plaintext is the mounter's whether or not its index can
			 * be built now: decided from the catalog alone. */
			keyed = decoded && tf_catalog_keyed(fs->catalog, rel);
		}
		moved = decoded && dep_changed(fs, rel);
		pthread_mutex_lock(&fs->nodes.lock);
		if (!(n = node_for(fs, rel, &st, decoded, moved, gen))) {
			pthread_mutex_unlock(&fs->nodes.lock);
			return ENOMEM;
		}
		n->keyed |= keyed;
		n->pins++;
		/* A file that cannot be indexed is listed empty; opening it says EIO.
		 * One that changed since our stat is looked at again, once. */
		rc = decoded ? ensure_index(fs, n, TF_OPEN_METADATA) : 0;
		if (rc == ESTALE && tries == 0) {
			unpin(&fs->nodes, n);
			pthread_mutex_unlock(&fs->nodes.lock);
			continue;
		}
		n->nlookup++;
		unpin(&fs->nodes, n);	/* its size stays if the index goes */
		pthread_mutex_unlock(&fs->nodes.lock);
		*out = n;
		return fs_node_attr(fs, n, attr);
	}
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

/* st (showing s, n's own file) restricted to who may also read n's dep:
 * the classes it refuses lose their bits; owners that differ are shown as
 * tf_perm_show says. */
static void restrict_to_dep(const fs_node *n, const tf_stat *s, struct stat *st)
{
	tf_perm p = TF_PERM_INIT;
	uint32_t uid, gid;
	unsigned classes;

	tf_perm_add_stat(&p, s);
	tf_perm_add_perm(&p, &n->dep_perm);
	tf_perm_show(&p, &uid, &gid, &classes);
	tf_perm_clear(&p);
	if (uid == s->uid && gid == s->gid) {
		st->st_mode &= ~(mode_t)((classes & TF_PERM_OWNER ? 0 : 0700) | (classes & TF_PERM_GROUP ? 0 : 070) |
					 (classes & TF_PERM_OTHER ? 0 : 07));
	} else {
		st->st_mode = fs_mode_type(s->kind) | tf_perm_mode(classes, false);
		st->st_uid = uid;
		st->st_gid = gid;
	}
}

static void fill_stat(const fs_node *n, const tf_stat *s, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = n->id;
	/* Read-only: the source's modes without write bits, which the kernel
	 * enforces for every user (default_permissions). */
	st->st_mode = fs_mode_type(s->kind) | (s->mode & 07555);
	st->st_nlink = s->nlink ? s->nlink : 1;
	st->st_uid = s->uid;
	st->st_gid = s->gid;
	/* Bytes made from another stored file too (folded offsets: the data
	 * file) are as readable as both. */
	if (n->dep_rel)
		restrict_to_dep(n, s, st);
	/* Plaintext of an encrypted array is the key holder's, whatever the
	 * ciphertext's modes: the user who mounted, and no one else. */
	if (n->keyed) {
		st->st_mode = fs_mode_type(s->kind) | (s->kind == TF_ENT_DIR ? 0500 : 0400);
		st->st_uid = geteuid();
		st->st_gid = getegid();
	}
	st->st_size = (off_t)(n->decoded ? n->size : s->v.size);
	st->st_blocks = (st->st_size + 511) / 512;
	st->st_blksize = 1 << 20;	/* cat, cp: 1 MiB reads, one FUSE request each */
	st->st_mtim.tv_sec = s->v.mtime_ns / 1000000000LL;
	st->st_mtim.tv_nsec = s->v.mtime_ns % 1000000000LL;
	st->st_ctim.tv_sec = s->v.ctime_ns / 1000000000LL;
	st->st_ctim.tv_nsec = s->v.ctime_ns % 1000000000LL;
	st->st_atim = st->st_mtim;
}

mode_t fs_mode_type(tf_ent_kind k)
{
	return k == TF_ENT_DIR ? S_IFDIR : k == TF_ENT_LNK ? S_IFLNK : k == TF_ENT_FIFO ? S_IFIFO
	     : k == TF_ENT_SOCK ? S_IFSOCK : S_IFREG;
}

int fs_node_attr(tilefs *fs, fs_node *n, struct stat *attr)
{
	tf_view_stat vst;
	tf_stat st;
	bool unsized;

	/* A view's owner and modes follow what it is made of. */
	if (n->views)
		view_access(fs, n);
	/* st and vst are rewritten by lookups of the same name meanwhile. */
	pthread_mutex_lock(&fs->nodes.lock);
	st = n->st;
	unsized = n->views && !n->vst.dir && !n->vst.size_known;
	pthread_mutex_unlock(&fs->nodes.lock);
	/* A view's size is known once it was formatted to its end. */
	if (unsized && tf_views_stat(n->views, n->vrel, &vst, NULL) == TF_OK) {
		pthread_mutex_lock(&fs->nodes.lock);
		n->vst = vst;
		n->st.v.size = vst.size_known ? vst.size : 0;
		st = n->st;
		pthread_mutex_unlock(&fs->nodes.lock);
	}
	/* A directory shows its present modes and times; a file, its version. */
	if (!n->views && n->kind == TF_ENT_DIR && stat_rel(fs, n->rel, &st) == 0 && st.kind == TF_ENT_DIR) {
		pthread_mutex_lock(&fs->nodes.lock);
		n->st = st;
		pthread_mutex_unlock(&fs->nodes.lock);
	}
	pthread_mutex_lock(&fs->nodes.lock);
	fill_stat(n, &st, attr);
	pthread_mutex_unlock(&fs->nodes.lock);
	return 0;
}

fuse_ino_t fs_node_ino(const fs_node *n) { return n->id; }
tf_views *fs_node_views(const fs_node *n) { return n->views; }
const char *fs_node_vrel(const fs_node *n) { return n->vrel; }
const char *fs_node_arr(const fs_node *n) { return n->arr; }

bool fs_node_set_view_size(tilefs *fs, fs_node *n, uint64_t size)
{
	bool was;

	pthread_mutex_lock(&fs->nodes.lock);
	was = n->vst.size_known && n->vst.size == size;
	n->vst.size_known = true;
	n->vst.size = size;
	n->st.v.size = size;
	pthread_mutex_unlock(&fs->nodes.lock);
	return !was;
}

double fs_node_attr_timeout(tilefs *fs, fs_node *n, double usual)
{
	bool unsized;

	pthread_mutex_lock(&fs->nodes.lock);
	unsized = n->views && !n->vst.dir && !n->vst.size_known;
	pthread_mutex_unlock(&fs->nodes.lock);
	return unsized ? 0.0 : usual;
}
const char *fs_node_rel(const fs_node *n) { return n->rel; }
bool fs_node_is_dir(const fs_node *n) { return n->kind == TF_ENT_DIR; }
bool fs_node_is_decoded(const fs_node *n) { return n->decoded; }
const tf_version *fs_node_version(const fs_node *n) { return &n->st.v; }

/* ---- opens ------------------------------------------------------------------------------------- */

bool fs_node_access(tilefs *fs, fs_node *n, tf_perm *p, bool *keyed)
{
	bool check;

	tf_perm_clear(p);
	if (n->views && (!n->vrel || tf_catalog_views_perm(fs->catalog, n->hold, n->views, n->vrel, p, NULL) != TF_OK))
		tf_perm_close(p);
	pthread_mutex_lock(&fs->nodes.lock);
	*keyed = n->keyed;
	if (n->dep_rel) {
		tf_perm_add_stat(p, &n->st);
		tf_perm_add_perm(p, &n->dep_perm);
	}
	check = n->views || n->keyed || n->dep_rel;
	pthread_mutex_unlock(&fs->nodes.lock);
	return check;
}

int fs_node_open_index(tilefs *fs, fs_node *n, tf_file **f)
{
	int rc;

	pthread_mutex_lock(&fs->nodes.lock);
	/* Pinned, so that the index published by ensure_index stays ours
	 * until it is counted open, however far it is over the budget. */
	n->pins++;
	/* A failure older than the retry time is tried again; a fresh one is
	 * the answer. */
	rc = ensure_index(fs, n, 0);
	if (rc == 0) {
		*f = tf_file_ref(n->file);
		n->opens++;
		fs->nodes.open_handles++;
		lru_touch(&fs->nodes, n);
	}
	unpin(&fs->nodes, n);
	pthread_mutex_unlock(&fs->nodes.lock);
	return rc;
}

void fs_node_closed(tilefs *fs, fs_node *n)
{
	pthread_mutex_lock(&fs->nodes.lock);
	n->opens--;
	fs->nodes.open_handles--;
	/* Reads load unit tables lazily (arrays, restored indexes): what the
	 * index holds now is charged, not what it held when it was built. */
	if (!n->opens && n->file) {
		size_t bytes = tf_file_index_bytes(n->file);

		fs->nodes.index_bytes += bytes - n->bytes;
		n->bytes = bytes;
	}
	trim_indexes(&fs->nodes);
	maybe_free(&fs->nodes, n);
	pthread_mutex_unlock(&fs->nodes.lock);
}

void fs_node_set_error(tilefs *fs, fs_node *n, const char *msg)
{
	pthread_mutex_lock(&fs->nodes.lock);
	free(n->error);
	n->error = strdup(msg);
	n->failed = true;
	pthread_mutex_unlock(&fs->nodes.lock);
}

char *fs_node_error(tilefs *fs, fs_node *n)
{
	char *s;

	pthread_mutex_lock(&fs->nodes.lock);
	s = n->error ? strdup(n->error) : NULL;
	pthread_mutex_unlock(&fs->nodes.lock);
	return s;
}

bool fs_node_failed(tilefs *fs, fs_node *n)
{
	bool failed;

	pthread_mutex_lock(&fs->nodes.lock);
	failed = n->failed;
	pthread_mutex_unlock(&fs->nodes.lock);
	return failed;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

void fs_node_facts(tilefs *fs, fs_node *n, tf_facts *out)
{
	pthread_mutex_lock(&fs->nodes.lock);
	*out = (tf_facts){ dup_or_null(n->facts.field), dup_or_null(n->facts.role),
			   dup_or_null(n->facts.fragment), n->facts.format_version, n->facts.keyed };
	pthread_mutex_unlock(&fs->nodes.lock);
}

void fs_nodes_stats(tilefs *fs, size_t *nodes, size_t *indexes, size_t *index_bytes, size_t *handles)
{
	size_t k = 0;

	pthread_mutex_lock(&fs->nodes.lock);
	for (fs_node *n = fs->nodes.lru_head; n; n = n->next)
		k++;
	*nodes = fs->nodes.count;
	*indexes = k;
	*index_bytes = fs->nodes.index_bytes;
	*handles = fs->nodes.open_handles;
	pthread_mutex_unlock(&fs->nodes.lock);
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
	atomic_fetch_add(&fs->nodes.gen, 1);
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
